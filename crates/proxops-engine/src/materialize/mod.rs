//! Materialized payloads: [`Materializer`] renders a desired document into the PVE requests
//! the engine sends for it, for the store to commit below `materialized/` in the desired plane
//! ([`proxops_store::materialized`]). The requests come from the same functions the executor
//! sends with ([`proxops_pve::Request`], the planner's diff), computed against the document the
//! resource's receipt applied: what PVE holds when nobody changed it by hand since. Secrets
//! stay their SOPS reference (`sops:<reference>`): rendering resolves none.

mod artifact;
mod guest;
mod objects;

use crate::desired::{Context, Desired, Drivers};
use proxops_graph::Graph;
use proxops_model::{Registry, ResourceKey};
use proxops_store::documents::ResourceDoc;
use proxops_store::materialized::{ApiRequest, Materialization, MaterializeRequest};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The engine's [`proxops_store::materialized::Materializer`]: the drivers render, the
/// executor's request builders word the requests.
#[derive(Clone)]
pub struct Materializer {
    registry: Arc<Registry>,
    drivers: Arc<Drivers>,
}

impl std::fmt::Debug for Materializer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Materializer")
            .field("drivers", &self.drivers)
            .finish_non_exhaustive()
    }
}

impl Materializer {
    /// Renders with `drivers`, reading previous documents as `registry`'s kinds.
    pub fn new(registry: Arc<Registry>, drivers: Arc<Drivers>) -> Materializer {
        Materializer { registry, drivers }
    }

    fn render(
        &self,
        cx: &Context<'_>,
        key: &ResourceKey,
        applied: Option<&ResourceDoc>,
    ) -> Result<Materialization, String> {
        let id = cx
            .graph
            .find(&key.kind, &key.name)
            .ok_or_else(|| format!("{key} is not in the cluster's graph"))?;
        let resource = cx.graph.resource(id);
        let desired = self
            .drivers
            .desired(cx, resource)
            .map_err(|e| e.to_string())?;
        let mut notes = Vec::new();
        let previous = match applied {
            None => None,
            Some(doc) => {
                let mapped = crate::reconcile::previous::resource_of(doc, &self.registry)
                    .and_then(|r| self.drivers.desired(cx, &r).ok());
                if mapped.is_none() {
                    notes.push(
                        "the document its receipt applied no longer maps to PVE (a reference that no longer resolves): rendered as a creation"
                            .to_owned(),
                    );
                }
                mapped
            }
        };
        let mut out = match (desired, previous) {
            (Desired::Guest(d), Some(Desired::Guest(p))) => guest::update(&d, &p),
            (Desired::Guest(d), _) => guest::create(cx, &self.drivers, &d),
            (Desired::Artifact(a), Some(Desired::Artifact(p))) => artifact::update(&a, &p),
            (Desired::Artifact(a), _) => artifact::create(&a),
            (Desired::Objects(d), Some(Desired::Objects(p))) => objects::update(&d, &p),
            (Desired::Objects(d), _) => objects::create(&d),
        };
        notes.append(&mut out.notes);
        out.notes = notes;
        Ok(out)
    }
}

impl proxops_store::materialized::Materializer for Materializer {
    fn materialize(
        &self,
        request: &MaterializeRequest<'_>,
    ) -> BTreeMap<ResourceKey, Result<Materialization, String>> {
        let graph = match Graph::build(&self.registry, request.resources) {
            Ok(g) => g,
            Err(e) => {
                let why = format!("the cluster's graph does not build: {e}");
                return request
                    .targets
                    .iter()
                    .map(|k| (k.clone(), Err(why.clone())))
                    .collect();
            }
        };
        let cx = Context::references_only(request.cluster, &graph);
        request
            .targets
            .iter()
            .map(|key| {
                let rendered = self.render(&cx, key, request.applied.get(key));
                (key.clone(), rendered)
            })
            .collect()
    }
}

/// A request of a payload, as the client would send it.
fn api_request(r: proxops_pve::Request) -> ApiRequest {
    let mut params: BTreeMap<String, String> = BTreeMap::new();
    for (k, v) in r.params.pairs() {
        params
            .entry(k.clone())
            .and_modify(|have| {
                have.push(',');
                have.push_str(v);
            })
            .or_insert_with(|| v.clone());
    }
    ApiRequest {
        method: r.method.as_str().to_owned(),
        path: r.path,
        params,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use crate::planes::Planes;
    use proxops_store::Store;
    use proxops_test_support::TestRepo;

    /// Publishes lab of the repository at `path` into its own planes; the payloads by path, as
    /// (blob id, bytes).
    fn payloads(path: &std::path::Path) -> Vec<(String, String, String)> {
        let store = Store::open(path).unwrap();
        let source = store.source(None).unwrap();
        let loaded = proxops_model::load_repository(
            &source,
            &proxops_model::Registry::builtin(),
            &proxops_model::LoadOptions::default(),
        )
        .unwrap();
        assert!(loaded.is_valid(), "{:?}", loaded.diagnostics);
        let planes = Planes::for_cluster(store, "lab").unwrap();
        let published = planes.publish_desired(&loaded, source.commit()).unwrap();
        published
            .state
            .materialized
            .values()
            .map(|m| {
                let bytes = proxops_test_support::git(
                    path,
                    &["cat-file", "blob", &proxops_store::documents::hex(m.blob)],
                );
                (m.path.clone(), proxops_store::documents::hex(m.blob), bytes)
            })
            .collect()
    }

    #[test]
    fn two_stores_publishing_one_source_render_the_same_bytes_and_no_secret() {
        let repo = TestRepo::homelab();
        // A VM whose cloud-init password and keys come from the cluster's SOPS file.
        let path = "vm/lab/sandbox-01.yaml";
        let manifest = repo.read(path).replace(
            "    ci-user: debian\n",
            "    ci-user: debian\n    ci-password-ref: cloud-init.passwords.debian\n",
        );
        repo.write(path, &manifest);
        repo.commit_all("sandbox: a password from SOPS");
        let copy = tempfile::tempdir().unwrap();
        let into = copy.path().join("copy");
        proxops_test_support::git(repo.path(), &["clone", "-q", ".", into.to_str().unwrap()]);

        let first = payloads(repo.path());
        let second = payloads(&into);
        assert_eq!(first.len(), 5, "{first:#?}");
        assert_eq!(first, second);
        let (_, _, vm) = first
            .iter()
            .find(|(p, _, _)| p == "materialized/VM/sandbox-01.yaml")
            .unwrap();
        assert!(
            vm.contains("cipassword: sops:cloud-init.passwords.debian"),
            "{vm}"
        );
        assert!(!vm.contains("error"), "{vm}");
    }
}
