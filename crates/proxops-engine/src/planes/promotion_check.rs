//! `validate`'s check of `fromPromotion`: the expression reads the pinned source of a
//! promotion, so in a cluster whose desired plane carries no promotion record it can never
//! resolve; waiting would never help, and publishing refuses it. `validate` says so at the
//! expression, with the code publishing uses.

use proxops_model::Repository;
use proxops_model::diagnostic::{Code, Diagnostic};
use proxops_model::expr::Expr;
use proxops_store::{PlaneRefs, Store};

/// One error per `fromPromotion` in a cluster that was never promoted (no desired plane, or
/// one without `promotion.yaml`). `store` is the repository's git store, if it has one (none:
/// no planes, so no promotion either). A plane that cannot be read is not judged here: the
/// cycle that reads it reports why.
pub fn unresolvable_promotions(store: Option<&Store>, repository: &Repository) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for cluster in &repository.clusters {
        let sites: Vec<_> = cluster
            .resources
            .iter()
            .flat_map(|r| r.exprs.iter().map(move |site| (r, site)))
            .filter(|(_, site)| matches!(site.expr, Expr::Promotion { .. }))
            .collect();
        if sites.is_empty() {
            continue;
        }
        let promoted = match store {
            None => Some(false),
            // The refs `Planes::from_config` reads, without the rest of a `Planes`.
            Some(store) => PlaneRefs::from_config(
                &cluster.name,
                repository
                    .cluster(&cluster.name)
                    .and_then(|c| c.entry.as_ref()),
            )
            .and_then(|refs| store.read_desired(&refs, None))
            .map(|plane| plane.is_some_and(|p| p.promotion.is_some()))
            .ok(),
        };
        if promoted != Some(false) {
            continue;
        }
        for (resource, site) in sites {
            out.push(
                Diagnostic::error(
                    Code::ReferenceUnresolvable,
                    format!(
                        "`fromPromotion` in {} can never resolve: cluster `{}` was never promoted (its desired plane has no promotion record)",
                        resource.key(),
                        cluster.name
                    ),
                )
                .with_label(&resource.file, site.span, "no promotion to read")
                .with_help(format!(
                    "promote a cluster into it (`proxops promote --from <source> --to {}`), or write the value itself",
                    cluster.name
                ))
                .in_cluster(Some(&cluster.name)),
            );
        }
    }
    out
}
