//! Rules over one cluster's whole composition: unique identities and vmids, the node allowlist,
//! and references that resolve inside the cluster (on the right nodes). Dependency cycles are the
//! graph crate's business (`proxops_graph::check_repository`).

use crate::config::ClusterEntry;
use crate::diagnostic::{Code, Diagnostic};
use crate::kind::{Identity, Reference, ReferenceView, Registry};
use crate::manifest::Resource;
use crate::names::ResourceKey;
use crate::yaml::PathSeg;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// (kind, name) -> the clusters whose compositions hold it.
pub type Owners = BTreeMap<(String, String), BTreeSet<String>>;

fn spec_path(rest: &[PathSeg]) -> Vec<PathSeg> {
    std::iter::once(PathSeg::from("spec"))
        .chain(rest.iter().cloned())
        .collect()
}

fn name_path() -> Vec<PathSeg> {
    vec![PathSeg::from("metadata"), PathSeg::from("name")]
}

/// Every reference of a resource: structured fields first, then the annotation, then reference
/// expressions, without repeats.
pub fn references(registry: &Registry, r: &Resource) -> Vec<Reference> {
    let mut refs = registry
        .get(r.kind)
        .map(|k| k.references(&r.spec))
        .unwrap_or_default();
    let stored = storage_references(registry, r).map(|v| Reference {
        field: v.field,
        target_kind: v.target_kind.into_owned(),
        target_name: v.target_name.into_owned(),
        path: Vec::new(),
        same_node: false,
        source: v.source,
    });
    for dep in r
        .depends_on
        .iter()
        .cloned()
        .chain(expression_references(r))
        .chain(stored)
    {
        if !refs
            .iter()
            .any(|x| x.target_kind == dep.target_kind && x.target_name == dep.target_name)
        {
            refs.push(dep);
        }
    }
    refs
}

/// The storages `r` puts data on, as inferred references to the `Storage` resources that may
/// declare them: a declared storage is created before what sits on it and pruned after.
fn storage_references<'s>(
    registry: &Registry,
    r: &'s Resource,
) -> impl Iterator<Item = ReferenceView<'s>> + 's {
    let uses = registry
        .get(r.kind)
        .map(|k| k.storages(&r.spec))
        .unwrap_or_default();
    let stores = uses.into_iter().map(|u| ReferenceView {
        field: "storage",
        target_kind: std::borrow::Cow::Borrowed("Storage"),
        target_name: std::borrow::Cow::Owned(u.storage),
        same_node: false,
        source: crate::kind::ReferenceSource::Inferred,
    });
    // A guest's own firewall rules name the cluster firewall's groups, aliases and IP sets:
    // after the cluster's `Firewall`, whatever its name (an empty name: every resource of the
    // kind, there is one per cluster).
    let has_rules = match &r.spec {
        crate::Spec::Vm(v) => v.firewall.as_ref().is_some_and(|f| !f.rules.is_empty()),
        crate::Spec::Lxc(l) => l.firewall.as_ref().is_some_and(|f| !f.rules.is_empty()),
        _ => false,
    };
    let firewall = has_rules.then_some(ReferenceView {
        field: "firewall.rules",
        target_kind: std::borrow::Cow::Borrowed("Firewall"),
        target_name: std::borrow::Cow::Borrowed(""),
        same_node: false,
        source: crate::kind::ReferenceSource::Inferred,
    });
    // A NIC's bridge may be an SDN VNet the repository declares: the VNet comes first.
    let bridges: Vec<&'s str> = match &r.spec {
        crate::Spec::Vm(v) => v.networks.iter().map(|n| n.bridge.as_str()).collect(),
        crate::Spec::Lxc(l) => l.networks.iter().map(|n| n.bridge.as_str()).collect(),
        _ => Vec::new(),
    };
    let mut bridges = bridges;
    bridges.sort_unstable();
    bridges.dedup();
    let vnets = bridges
        .into_iter()
        .filter(|b| !b.is_empty())
        .map(|b| ReferenceView {
            field: "networks[].bridge",
            target_kind: std::borrow::Cow::Borrowed("SdnVnet"),
            target_name: std::borrow::Cow::Borrowed(b),
            same_node: false,
            source: crate::kind::ReferenceSource::Inferred,
        });
    // The pool a guest is a member of: the Pool first.
    let pool = match &r.spec {
        crate::Spec::Vm(v) => v.pool.as_deref(),
        crate::Spec::Lxc(l) => l.pool.as_deref(),
        _ => None,
    }
    .map(|p| ReferenceView {
        field: "pool",
        target_kind: std::borrow::Cow::Borrowed("Pool"),
        target_name: std::borrow::Cow::Borrowed(p),
        same_node: false,
        source: crate::kind::ReferenceSource::Inferred,
    });
    stores.chain(firewall).chain(vnets).chain(pool)
}

/// The producers the reference expressions of `r` read (`fromArtifact`, `fromReceipt`).
pub fn expression_references(r: &Resource) -> impl Iterator<Item = Reference> + '_ {
    r.exprs.iter().filter_map(|site| {
        let producer = site.expr.producer()?;
        Some(Reference {
            field: site.expr.key(),
            target_kind: producer.kind.clone(),
            target_name: producer.name.clone(),
            path: site.doc_path(),
            same_node: false,
            source: crate::kind::ReferenceSource::Expression,
        })
    })
}

/// Visits the references of [`references`], in the same order, without their YAML paths and
/// without copying names where the kind can borrow them (the graph walks every resource of a
/// cluster this way).
pub fn for_each_reference(
    registry: &Registry,
    r: &Resource,
    mut visit: impl FnMut(&ReferenceView<'_>),
) {
    let structured = registry
        .get(r.kind)
        .map(|k| k.reference_views(&r.spec))
        .unwrap_or_default();
    for x in &structured {
        visit(x);
    }
    for (i, dep) in r.depends_on.iter().enumerate() {
        let repeated = structured.iter().any(|x| {
            x.target_kind == dep.target_kind.as_str() && x.target_name == dep.target_name.as_str()
        }) || r.depends_on[..i]
            .iter()
            .any(|x| x.target_kind == dep.target_kind && x.target_name == dep.target_name);
        if !repeated {
            visit(&dep.view());
        }
    }
    let exprs: Vec<Reference> = expression_references(r).collect();
    for (i, x) in exprs.iter().enumerate() {
        let repeated = structured.iter().any(|s| {
            s.target_kind == x.target_kind.as_str() && s.target_name == x.target_name.as_str()
        }) || r
            .depends_on
            .iter()
            .chain(&exprs[..i])
            .any(|d| d.target_kind == x.target_kind && d.target_name == x.target_name);
        if !repeated {
            visit(&x.view());
        }
    }
    let stored: Vec<ReferenceView<'_>> = storage_references(registry, r).collect();
    for (i, x) in stored.iter().enumerate() {
        let same = |kind: &str, name: &str| x.target_kind == kind && x.target_name == name;
        let repeated = structured
            .iter()
            .any(|s| same(&s.target_kind, &s.target_name))
            || r.depends_on
                .iter()
                .chain(&exprs)
                .any(|d| same(&d.target_kind, &d.target_name))
            || stored[..i]
                .iter()
                .any(|s| same(&s.target_kind, &s.target_name));
        if !repeated {
            visit(x);
        }
    }
}

/// Checks one cluster's resources together; returns the findings.
pub fn validate_cluster(
    registry: &Registry,
    cluster: &str,
    entry: Option<&ClusterEntry>,
    resources: &[Arc<Resource>],
    owners: &Owners,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let in_cluster = |d: Diagnostic| d.in_cluster(Some(cluster));
    // Identity: (kind, name) unique.
    let mut index: BTreeMap<ResourceKey, &Arc<Resource>> = BTreeMap::new();
    for r in resources {
        if let Some(first) = index.get(&r.key()) {
            out.push(in_cluster(
                Diagnostic::error(Code::DuplicateResource, format!("duplicate resource {} in cluster `{cluster}`", r.key()))
                    .with_resource_label(r, &name_path(), "defined again here")
                    .with_resource_label(first, &name_path(), "first defined here")
                    .with_help("a kind and name identify one resource per cluster: rename one, or list only one file"),
            ));
        } else {
            index.insert(r.key(), r);
        }
    }
    // vmids are unique across every guest kind of the cluster (PVE's vmid pool is cluster-wide).
    let mut vmids: BTreeMap<u32, &Arc<Resource>> = BTreeMap::new();
    for r in index.values() {
        let Some(kind) = registry.get(r.kind) else {
            continue;
        };
        let placement = kind.placement(&r.spec);
        if !matches!(kind.identity(), Identity::Guest { .. }) {
            continue;
        }
        let Some(vmid) = placement.vmid else { continue };
        let at = spec_path(&[PathSeg::from("vmid")]);
        if let Some(first) = vmids.get(&vmid) {
            out.push(in_cluster(
                Diagnostic::error(Code::VmidCollision, format!("PVE id {vmid} is claimed by both {} and {}", first.key(), r.key()))
                    .with_resource_label(r, &at, format!("vmid {vmid} of {}", r.key()))
                    .with_resource_label(first, &at, format!("also claimed by {}", first.key()))
                    .with_help("vmids are unique per cluster, across VMs, containers and templates: PVE's vmid namespace is cluster-wide"),
            ));
        } else {
            vmids.insert(vmid, r);
        }
        // Node allowlist for guests is checked below with every other placement.
    }
    // Node allowlist.
    if let Some(allowed) = entry.map(|e| &e.nodes).filter(|n| !n.is_empty()) {
        for r in index.values() {
            let Some(kind) = registry.get(r.kind) else {
                continue;
            };
            for (node, at) in kind.placement(&r.spec).nodes {
                if !allowed.contains(&node) {
                    out.push(in_cluster(
                        Diagnostic::error(Code::NodeNotAllowed, format!("node `{node}` of {} is not in cluster `{cluster}`'s node allowlist", r.key()))
                            .with_resource_label(r, &spec_path(&at), "not an allowed node")
                            .with_help(format!("allowed nodes: {}; add the node to clusters/{cluster}/config.yaml or move the resource", allowed.join(", "))),
                    ));
                }
            }
        }
    }
    out.extend(
        object_id_collisions(registry, &index)
            .into_iter()
            .map(in_cluster),
    );
    // References.
    for r in index.values() {
        for reference in references(registry, r) {
            // An inferred reference names an object that may be PVE's own or made by hand.
            if reference.source == crate::kind::ReferenceSource::Inferred {
                continue;
            }
            let target = ResourceKey {
                kind: reference.target_kind.clone(),
                name: reference.target_name.clone(),
            };
            let Some(found) = index.get(&target) else {
                out.push(in_cluster(unknown_reference(
                    cluster, r, &reference, &index, owners,
                )));
                continue;
            };
            if reference.same_node
                && let (Some(src), Some(dst)) = (registry.get(r.kind), registry.get(found.kind))
            {
                let guest_nodes: Vec<String> = src
                    .placement(&r.spec)
                    .nodes
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                let target_nodes: Vec<String> = dst
                    .placement(&found.spec)
                    .nodes
                    .into_iter()
                    .map(|(n, _)| n)
                    .collect();
                for node in guest_nodes.iter().filter(|n| !target_nodes.contains(n)) {
                    out.push(in_cluster(
                        Diagnostic::error(
                            Code::ReferenceNotOnNode,
                            format!(
                                "{target} is not placed on node `{node}`, where {} runs",
                                r.key()
                            ),
                        )
                        .with_resource_label(
                            r,
                            &reference.path,
                            format!("{target} is only on {}", target_nodes.join(", ")),
                        )
                        .with_help(format!("add `{node}` to the `nodes` of {target}")),
                    ));
                }
            }
        }
    }
    // Reference expressions that would wait forever.
    for r in index.values() {
        for site in &r.exprs {
            if let Some(d) = never_resolves(registry, r, site, &index) {
                out.push(in_cluster(d));
            }
        }
    }
    out
}

/// The error of an expression of `r` whose wait could never end: an artifact the producer's
/// receipts never carry or never hold at that pointer, a receipt field that does not exist.
/// It refuses only `r` ([`Code::refuses_only_its_resource`]): `r` waits, and is kept.
fn never_resolves(
    registry: &Registry,
    r: &Resource,
    site: &crate::expr::ExprSite,
    index: &BTreeMap<ResourceKey, &Arc<Resource>>,
) -> Option<Diagnostic> {
    use crate::expr::Expr;
    let (producer, what, unreachable) = match &site.expr {
        Expr::Artifact {
            producer,
            name,
            pointer,
        } => {
            let found = index.get(producer)?;
            let why = registry
                .get(found.kind)?
                .artifact_unreachable(&found.spec, name, pointer)?;
            (producer, format!("artifact `{name}` at `{pointer}`"), why)
        }
        Expr::Receipt { producer, pointer } => {
            index.get(producer)?;
            let first = pointer.tokens().next()?;
            let fields = crate::kinds::reach::RECEIPT_RESULT_FIELDS;
            if fields.contains(&first.as_str()) {
                return None;
            }
            let why = crate::kind::Unreachable {
                why: format!("a receipt's result has no field `{first}`"),
                accepted: fields.iter().map(|f| (*f).to_owned()).collect(),
            };
            (producer, format!("receipt at `{pointer}`"), why)
        }
        Expr::Promotion { .. } => return None,
    };
    let word = match &site.expr {
        Expr::Artifact { name, .. } => name.as_str(),
        _ => pointer_head(&site.expr),
    };
    let near =
        crate::diagnostic::did_you_mean(word, unreachable.accepted.iter().map(String::as_str));
    let accepted = unreachable
        .accepted
        .iter()
        .map(|a| format!("`{a}`"))
        .collect::<Vec<_>>()
        .join(", ");
    let help = match (near, accepted.is_empty()) {
        (Some(n), _) => format!("did you mean `{n}`? {producer} offers {accepted}"),
        (None, false) => format!("{producer} offers {accepted}"),
        (None, true) => format!("{producer} offers nothing this expression could read"),
    };
    Some(
        Diagnostic::error(
            Code::ReferenceUnresolvable,
            format!(
                "{} would wait forever on the {what} of {producer}: {}",
                r.key(),
                unreachable.why
            ),
        )
        .with_label(&r.file, site.span, "can never resolve")
        .with_help(help),
    )
}

/// The first token of a `fromReceipt` pointer, for the near-spelling hint.
fn pointer_head(expr: &crate::expr::Expr) -> &str {
    match expr {
        crate::expr::Expr::Receipt { pointer, .. } => {
            pointer.as_str().split('/').nth(1).unwrap_or_default()
        }
        _ => "",
    }
}

fn unknown_reference(
    cluster: &str,
    r: &Resource,
    reference: &Reference,
    index: &BTreeMap<ResourceKey, &Arc<Resource>>,
    owners: &Owners,
) -> Diagnostic {
    let target = format!("{}/{}", reference.target_kind, reference.target_name);
    let message = if reference.field == crate::manifest::DEPENDS_ON {
        format!(
            "depends-on target {target} of {} is not defined in cluster `{cluster}` (unknown reference)",
            r.key()
        )
    } else {
        format!(
            "{} `{}` references unknown {} `{}`",
            r.key(),
            reference.field,
            reference.target_kind,
            reference.target_name
        )
    };
    let other_kind = index
        .keys()
        .find(|k| k.name == reference.target_name && k.kind != reference.target_kind);
    let elsewhere: Vec<&String> = owners
        .get(&(reference.target_kind.clone(), reference.target_name.clone()))
        .map(|s| s.iter().filter(|c| *c != cluster).collect())
        .unwrap_or_default();
    let help = if let Some(k) = other_kind {
        format!(
            "{k} exists, but `{}` needs a {}",
            reference.field, reference.target_kind
        )
    } else if !elsewhere.is_empty() {
        format!(
            "only cluster {} lists {target}: add its file to clusters/{cluster}/resources.yaml (there is no cross-cluster resolution)",
            elsewhere
                .iter()
                .map(|c| format!("`{c}`"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!(
            "add {} {} named `{}` to this cluster's composition, or fix the name",
            if reference.target_kind.starts_with(['A', 'E', 'I', 'O', 'U']) {
                "an"
            } else {
                "a"
            },
            reference.target_kind,
            reference.target_name
        )
    };
    Diagnostic::error(Code::UnknownReference, message)
        .with_resource_label(
            r,
            &reference.path,
            format!("{target} is not in cluster `{cluster}`"),
        )
        .with_help(help)
}

/// Two resources of one cluster-object kind that name the same PVE id (`id:`, `userid`, or
/// `metadata.name`): both would manage one object.
fn object_id_collisions(
    registry: &Registry,
    index: &BTreeMap<ResourceKey, &Arc<Resource>>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let mut seen: BTreeMap<(&str, &str), &Arc<Resource>> = BTreeMap::new();
    for r in index.values() {
        let Some(kind) = registry.get(r.kind) else {
            continue;
        };
        if kind.identity() != Identity::ClusterObject {
            continue;
        }
        let Some(id) = kind.pve_id(&r.spec) else {
            continue;
        };
        match seen.get(&(r.kind, id)) {
            Some(first) => out.push(
                Diagnostic::error(
                    Code::DuplicateResource,
                    format!(
                        "{} and {} both manage the {} `{id}`",
                        first.key(),
                        r.key(),
                        r.kind
                    ),
                )
                .with_resource_label(r, &name_path(), format!("also `{id}`"))
                .with_resource_label(first, &name_path(), format!("`{id}` first here"))
                .with_help("one resource per PVE object: remove one, or give it another id"),
            ),
            None => {
                seen.insert((r.kind, id), r);
            }
        }
    }
    out
}
