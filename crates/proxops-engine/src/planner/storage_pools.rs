//! A storage's membership of a resource pool (`pool:` on Storage). PVE lists a pool's storages
//! only for one pool at a time (pve-manager `PVE/API2/Pool.pm` `index` with `poolid`), so the
//! plan reads `GET /pools?poolid=P&type=storage` once per pool a storage names now or named in
//! its previous document, and writes `PUT /pools/{poolid}` with `storage=` (added) or with
//! `delete=1` (taken out, only of a pool ProxOps put it in). A storage may sit in other pools:
//! those are left alone.

use super::{PlanOptions, Planner};
use crate::plan::{Op, Verb};
use proxops_graph::StepId;
use proxops_model::Resource;
use proxops_model::kinds::ObjectSpec;
use proxops_pve::{Method, Params, PveClient, Request};
use std::collections::{BTreeMap, BTreeSet};

/// The storages of each pool read this plan (`Err`: why it could not be read).
pub(super) type PoolStorages = BTreeMap<String, Result<BTreeSet<String>, String>>;

/// The storage id and the pool `resource` names, when it is a Storage.
fn storage_pool(resource: &Resource) -> Option<(String, Option<String>)> {
    match &resource.spec {
        proxops_model::Spec::Object(ObjectSpec::Storage(s)) => Some((
            s.id.clone().unwrap_or_else(|| resource.name().to_owned()),
            s.pool.clone(),
        )),
        _ => None,
    }
}

impl Planner<'_> {
    /// Reads the storages of every pool a declared storage names, or named before.
    pub(super) async fn read_storage_pools(&mut self, client: &PveClient, options: &PlanOptions) {
        let graph = self.cx.graph;
        let mut pools = BTreeSet::new();
        for id in graph.resources() {
            let resource = graph.resource(id);
            if let Some((_, Some(pool))) = storage_pool(resource) {
                pools.insert(pool);
            }
            let before = options
                .previous
                .as_ref()
                .and_then(|p| p.get(&resource.key()));
            if let Some((_, Some(pool))) = before.and_then(|b| storage_pool(b)) {
                pools.insert(pool);
            }
        }
        for pool in pools {
            let params = Params::new().set("poolid", &pool).set("type", "storage");
            let read = match client
                .call_json(Method::GET, "/pools", "/pools", &params)
                .await
            {
                Ok(rows) => Ok(rows
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|p| p["members"].as_array().into_iter().flatten())
                    .filter_map(|m| m["storage"].as_str().map(str::to_owned))
                    .collect()),
                // A pool this plan creates has no storage yet.
                Err(e) if e.to_string().contains("does not exist") => Ok(BTreeSet::new()),
                Err(e) => Err(e.to_string()),
            };
            self.pool_storages.insert(pool, read);
        }
    }

    /// Puts a declared storage into the pool its manifest names, or takes it out of the pool
    /// its previous document named and ProxOps put it in; after the storage's own actions.
    pub(super) fn storage_pool_step(
        &mut self,
        step: StepId,
        resource: &Resource,
        options: &PlanOptions,
    ) {
        if self.blocked.contains(&step) {
            return;
        }
        let Some((id, want)) = storage_pool(resource) else {
            return;
        };
        let before = options
            .previous
            .as_ref()
            .and_then(|p| p.get(&resource.key()))
            .and_then(|b| storage_pool(b))
            .and_then(|(was_id, pool)| (was_id == id).then_some(pool).flatten());
        let member = |pool: &str| match self.pool_storages.get(pool) {
            Some(Ok(storages)) => Ok(storages.contains(&id)),
            Some(Err(e)) => Err(format!("cannot read the storages of pool `{pool}`: {e}")),
            None => Ok(false),
        };
        let (pool, params, reason) = match (&want, &before) {
            (Some(w), _) => match member(w) {
                Ok(true) => return,
                Ok(false) => (
                    w.clone(),
                    Params::new().set("storage", &id),
                    format!("storage `{id}` is not in pool `{w}`: added"),
                ),
                Err(why) => return self.block(step, why, false),
            },
            (None, Some(b)) => match member(b) {
                Ok(false) => return,
                Ok(true) => (
                    b.clone(),
                    Params::new().set("storage", &id).set("delete", 1),
                    format!(
                        "the manifest no longer names pool `{b}`: storage `{id}` taken out of it"
                    ),
                ),
                Err(why) => return self.block(step, why, false),
            },
            (None, None) => return,
        };
        let path = format!(
            "/pools/{}",
            crate::objects::endpoints(proxops_model::kinds::ObjectClass::Pool, None)
                .item_path(&pool)
                .trim_start_matches("/pools/")
        );
        let op = Op::Object(Request::new(Method::PUT, "/pools/{poolid}", path, params));
        let after: Vec<usize> = self.step_actions.get(&step).copied().into_iter().collect();
        self.push(step, ("", None), Verb::Update, reason, op, &after);
    }
}
