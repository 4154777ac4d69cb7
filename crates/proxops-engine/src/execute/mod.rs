//! The executor: runs a plan's actions in dependency order, independent ones in parallel.
//!
//! Concurrency is bounded overall and, through the client's mutation permits, per node and per
//! guest. An action starts only when its node has a free mutation slot and its guest none in
//! flight, so no overall slot is spent waiting for a permit while another node is idle. A failed
//! action defers every action that depends on it (reported; planned again next cycle). A stop
//! request lets running actions finish and starts no new one.

pub(crate) mod config_write;
pub(crate) mod guest_ops;
pub(crate) mod options;
pub(crate) mod report;

use crate::desired::{DesiredArtifact, DesiredGuest};
use crate::diff::after_clone;
pub use crate::failure::{ActionError, FailureKind};
use crate::plan::{Action, ClusterPlan, HaWrite, Op};
use guest_ops::{Edit, apply_changes, restart_guest, start_guest, wait_power};
pub use options::ExecOptions;
pub(crate) use options::wait;
use proxops_pve::{
    CloneRequest, DestroyOptions, DownloadUrl, GuestRef, GuestType, PveClient, PveError,
    TaskFilter, Upid, WaitOptions,
};
pub use report::{ActionResult, CycleReport, Outcome, Progress, ProgressFn};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Pending,
    Running,
    Done(Outcome),
}

/// Runs the plan's actions and reports each.
pub async fn execute(client: &PveClient, plan: &ClusterPlan, options: &ExecOptions) -> CycleReport {
    let n = plan.actions.len();
    let mut states = vec![State::Pending; n];
    let mut results: Vec<Option<ActionResult>> = vec![None; n];
    let mut running = JoinSet::new();
    // The action each spawned task runs, and what it holds of the client's mutation limits: a
    // slot on its node and the lock of its guest (the key `run` takes the permit with).
    let mut spawned: HashMap<tokio::task::Id, usize> = HashMap::new();
    let per_node = client.limits().per_node();
    let mut node_busy: HashMap<&str, usize> = HashMap::new();
    let mut guest_busy: HashSet<u32> = HashSet::new();
    // Downloads (no vmid) take only a node slot, as with the client's permits.
    let guest_key = |a: &Action| a.vmid;
    let stopped = |o: &ExecOptions| o.stop.as_ref().is_some_and(|s| *s.borrow());
    loop {
        // Settle what can be settled, collect what is ready to start.
        let mut ready = settle(plan, &mut states, &mut results, stopped(options));
        // Start ready actions while slots are free: each time the first in plan order on the
        // node with the fewest actions in flight, among nodes with a free mutation slot and
        // guests with no mutation in flight. Plans list a level's steps node by node; taking
        // them in that order would fill one node's slots and leave others idle.
        while running.len() < options.concurrency.max(1) {
            let busy = |a: &Action| node_busy.get(a.node.as_str()).copied().unwrap_or(0);
            let Some((at, &i)) = ready
                .iter()
                .enumerate()
                .filter(|(_, i)| {
                    let a = &plan.actions[**i];
                    busy(a) < per_node && guest_key(a).is_none_or(|g| !guest_busy.contains(&g))
                })
                .min_by_key(|(_, i)| (busy(&plan.actions[**i]), **i))
            else {
                break;
            };
            ready.remove(at);
            let action = &plan.actions[i];
            if let Some(p) = &options.progress {
                p(Progress::Started(action));
            }
            states[i] = State::Running;
            *node_busy.entry(action.node.as_str()).or_default() += 1;
            if let Some(g) = guest_key(action) {
                guest_busy.insert(g);
            }
            let (client, action, options) = (client.clone(), action.clone(), options.clone());
            let task = running.spawn(async move { run_spawned(&client, &action, &options).await });
            spawned.insert(task.id(), i);
        }
        let Some(joined) = running.join_next_with_id().await else {
            break;
        };
        let (task, r) = match joined {
            Ok((task, r)) => (task, r),
            Err(e) => {
                let Some(&id) = spawned.get(&e.id()) else {
                    continue;
                };
                let error = ActionError::new(
                    FailureKind::Internal,
                    format!("the action's task ended abnormally: {e}"),
                );
                let r = result(
                    &plan.actions[id],
                    Outcome::Failed { error },
                    Vec::new(),
                    Duration::ZERO,
                );
                (e.id(), r)
            }
        };
        let Some(id) = spawned.remove(&task) else {
            continue;
        };
        let action = &plan.actions[id];
        if let Some(n) = node_busy.get_mut(action.node.as_str()) {
            *n = n.saturating_sub(1);
        }
        if let Some(g) = guest_key(action) {
            guest_busy.remove(&g);
        }
        if let Some(p) = &options.progress {
            p(Progress::Ended(action, &r));
        }
        states[id] = State::Done(r.outcome.clone());
        results[id] = Some(r);
    }
    let mut results: Vec<ActionResult> = results
        .into_iter()
        .zip(&plan.actions)
        .map(|(r, a)| {
            r.unwrap_or_else(|| result(a, Outcome::NotStarted, Vec::new(), Duration::ZERO))
        })
        .collect();
    sdn_writes_pending(plan, &mut results);
    CycleReport {
        cluster: plan.cluster.clone(),
        results,
    }
}

/// An SDN write whose apply (`PUT /cluster/sdn`) did not succeed is not done: PVE keeps it
/// pending. Its result says so, so that no receipt or teardown records it as done and the next
/// cycle, which still knows the object as ProxOps's, applies it.
fn sdn_writes_pending(plan: &ClusterPlan, results: &mut [ActionResult]) {
    for apply in plan.actions.iter().filter(|a| matches!(a.op, Op::SdnApply)) {
        let why = match &results[apply.id].outcome {
            Outcome::Succeeded => continue,
            Outcome::Failed { error } => (
                error.kind(),
                format!("the SDN apply failed: {}", error.message()),
            ),
            _ => (
                FailureKind::Internal,
                "the SDN apply did not run".to_owned(),
            ),
        };
        for &write in &apply.after {
            let r = &mut results[write];
            if r.outcome == Outcome::Succeeded {
                r.outcome = Outcome::Failed {
                    error: ActionError::new(
                        why.0,
                        format!(
                            "written, but {}; the change stays pending in PVE until the SDN configuration is applied",
                            why.1
                        ),
                    ),
                };
            }
        }
    }
}

/// Settles every pending action whose prerequisites ended badly (deferred behind them) or,
/// when the run is stopping, that has not started; returns the ones ready to start.
fn settle(
    plan: &ClusterPlan,
    states: &mut [State],
    results: &mut [Option<ActionResult>],
    stopped: bool,
) -> Vec<usize> {
    let mut ready = Vec::new();
    for (i, action) in plan.actions.iter().enumerate() {
        if states[i] != State::Pending {
            continue;
        }
        let mut failed_roots = Vec::new();
        let mut waiting = false;
        for p in &action.after {
            match &states[*p] {
                State::Done(Outcome::Succeeded) => {}
                State::Done(Outcome::Failed { .. }) => failed_roots.push(*p),
                State::Done(Outcome::Deferred { blocked_by, reason }) => {
                    if blocked_by.is_empty() && reason.is_some() {
                        // A locked action is its dependants' root.
                        failed_roots.push(*p);
                    }
                    failed_roots.extend(blocked_by)
                }
                State::Done(Outcome::NotStarted) => failed_roots.push(*p),
                State::Pending | State::Running => waiting = true,
            }
        }
        if !failed_roots.is_empty() {
            failed_roots.sort_unstable();
            failed_roots.dedup();
            let outcome = Outcome::Deferred {
                blocked_by: failed_roots,
                reason: None,
            };
            results[i] = Some(result(action, outcome.clone(), Vec::new(), Duration::ZERO));
            states[i] = State::Done(outcome);
            continue;
        }
        if waiting {
            continue;
        }
        if stopped {
            results[i] = Some(result(
                action,
                Outcome::NotStarted,
                Vec::new(),
                Duration::ZERO,
            ));
            states[i] = State::Done(Outcome::NotStarted);
            continue;
        }
        ready.push(i);
    }
    ready
}

/// Runs one action on its own task: its requests, and the outcome they come to.
async fn run_spawned(client: &PveClient, action: &Action, options: &ExecOptions) -> ActionResult {
    let started = Instant::now();
    let mut upids = Vec::new();
    let mut token = None;
    let ran = match &action.op {
        Op::Token {
            request,
            recipients,
            file,
        } => {
            let _permit = client.mutation_permit(&action.node, 0).await;
            let result =
                crate::objects::token::create(client, request, recipients, file.as_deref())
                    .await
                    .map(|sealed| token = Some(sealed))
                    .map_err(ActionError::from);
            crate::guard::Ran {
                result,
                guard: None,
            }
        }
        _ => run_action(client, action, options, &mut upids).await,
    };
    let rolled_back = ran.guard.as_ref().is_some_and(|g| g.rollback_tried());
    let outcome = match ran.result {
        Ok(()) => Outcome::Succeeded,
        // PVE refused before writing anything: tried again next cycle.
        Err(e) if e.kind() == FailureKind::Locked && !rolled_back => Outcome::Deferred {
            blocked_by: Vec::new(),
            reason: Some(match e.pve() {
                Some(p) => lock_reason(p),
                None => e.message().to_owned(),
            }),
        },
        Err(error) => Outcome::Failed { error },
    };
    let mut r = result(action, outcome, upids, started.elapsed());
    r.guard = ran.guard;
    r.token = token;
    r
}

/// `locked (backup)` from PVE's `VM is locked (backup)`; the config file lock PVE could not
/// take in its 10 s otherwise.
fn lock_reason(error: &PveError) -> String {
    let text = error.to_string();
    let lock = text
        .split_once(" is locked (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(lock, _)| lock);
    match lock {
        Some(lock) => format!("locked ({lock})"),
        None => format!("config file locked by other PVE work ({})", error.message()),
    }
}

fn result(action: &Action, outcome: Outcome, upids: Vec<String>, took: Duration) -> ActionResult {
    ActionResult {
        id: action.id,
        subject: format!("{}/{}", action.kind, action.name),
        verb: action.verb,
        outcome,
        upids,
        millis: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        guard: None,
        token: None,
    }
}

/// Runs one action under its guest's mutation permit: a step of a guarded update through
/// [`crate::guard::run`], any other through [`run`].
async fn run_action(
    client: &PveClient,
    action: &Action,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> crate::guard::Ran {
    {
        let _permit = client
            .mutation_permit(&action.node, action.vmid.unwrap_or(0))
            .await;
        if let Some(ran) = crate::guard::run(client, action, options, upids).await {
            return ran;
        }
    }
    crate::guard::Ran {
        result: run(client, action, options, upids)
            .await
            .map_err(ActionError::from),
        guard: None,
    }
}

async fn run(
    client: &PveClient,
    action: &Action,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let _permit = client
        .mutation_permit(&action.node, action.vmid.unwrap_or(0))
        .await;
    match &action.op {
        Op::Download { artifact } => download(client, &action.node, artifact, options, upids).await,
        Op::Replace { artifact } => {
            // download-url refuses to overwrite a file, so the old one goes first. If the
            // download then fails, the next cycle finds the file absent and downloads it.
            if let Some(upid) = client
                .delete_volume(&action.node, &artifact.storage, &artifact.volid)
                .await?
            {
                wait(client, options, upid, upids).await?;
            }
            download(client, &action.node, artifact, options, upids).await
        }
        Op::Create { desired } => create(client, desired, options, upids).await,
        Op::Update {
            desired,
            changes,
            removals,
            resizes,
            digest,
            restart,
            ..
        } => {
            let target = guest_ref(desired);
            let edit = Edit {
                desired,
                changes,
                removals,
                resizes,
                digest: digest.clone(),
            };
            apply_changes(client, &target, edit, options, upids).await?;
            if *restart {
                restart_guest(client, &target, options, upids).await?;
            }
            Ok(())
        }
        Op::Migrate { guest, request } => migrate(client, guest, request, options, upids).await,
        Op::Ha {
            write,
            create,
            guest,
        } => write_ha(client, write, *create, guest, options).await,
        Op::HaRemove { sid } => client.ha_delete(sid).await,
        Op::HaRule { id, create, params } => {
            if *create {
                client.ha_rule_create(id, params.clone()).await
            } else {
                client.ha_rule_update(id, params.clone()).await
            }
        }
        Op::HaRuleRemove { id } => client.ha_rule_delete(id).await,
        Op::Object(_) | Op::Rules { .. } | Op::SdnApply => {
            object_op(client, &action.op, options, upids).await
        }
        Op::Start { guest } | Op::GuardedStart { guest, .. } => {
            start_guest(client, guest, options, upids).await
        }
        // Run by `execute` itself, which keeps the encrypted secret.
        Op::Token { .. } => Err(PveError::Config(
            "an API token's create outside the executor".into(),
        )),
        // Steps of a guarded update are run by `crate::guard::run`.
        Op::Snapshot { .. } | Op::Verify { .. } | Op::PruneSnapshots { .. } => Err(
            PveError::Config("a step of a guarded update outside its runner".into()),
        ),
        Op::Stop { guest } => {
            let upid = client
                .shutdown(guest, Some(options.shutdown_timeout), Some(true))
                .await?;
            wait_power(client, options, guest, upid, "stopped", upids).await
        }
        Op::MarkTemplate { guest, running } => {
            if *running {
                let upid = client
                    .shutdown(guest, Some(options.shutdown_timeout), Some(true))
                    .await?;
                wait_power(client, options, guest, upid, "stopped", upids).await?;
            }
            make_template(client, guest, options, upids).await
        }
        Op::Delete { guest, running, ha } => {
            delete_guest(client, guest, *running, ha.as_deref(), options, upids).await
        }
    }
}

/// A cluster object's request, a firewall rule list's convergence, or the SDN apply.
async fn object_op(
    client: &PveClient,
    op: &Op,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    match op {
        // A cluster object's write is synchronous in PVE (its config file under a lock); sent
        // once, since a create whose answer was lost is found by the next plan.
        Op::Object(request) => client
            .call_json_once(
                request.method.clone(),
                request.template,
                &request.path,
                &request.params,
            )
            .await
            .map(drop),
        Op::Rules {
            endpoints,
            rules,
            owner,
        } => crate::objects::rules::apply(client, endpoints, rules, owner).await,
        // pve-network `PVE/API2/Network/SDN.pm` `reload`: a `reloadnetworkall` worker.
        Op::SdnApply => {
            let data = client
                .call_json_once(
                    proxops_pve::Method::PUT,
                    "/cluster/sdn",
                    "/cluster/sdn",
                    &proxops_pve::Params::new(),
                )
                .await?;
            match data.as_str().and_then(|u| u.parse().ok()) {
                Some(upid) => wait(client, options, upid, upids).await,
                None => Ok(()),
            }
        }
        _ => Err(PveError::Config("not a cluster object's step".into())),
    }
}

/// Deletes a guest: its HA resource first, then stopped if running, then destroyed with purge.
async fn delete_guest(
    client: &PveClient,
    guest: &GuestRef,
    running: bool,
    ha: Option<&str>,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    // An HA guest's resource goes first: then it is stopped directly, not by a request
    // the HA manager acts on later (pve-ha-manager `Resources.pm` `delete`).
    if let Some(sid) = ha {
        match client.ha_delete(sid).await {
            Ok(()) => {}
            // Gone already (a retried cycle): nothing to remove.
            Err(e) if e.to_string().contains("not HA managed") => {}
            Err(e) => return Err(e),
        }
    }
    if running {
        let upid = client.stop(guest).await?;
        wait_power(client, options, guest, upid, "stopped", upids).await?;
    }
    // `purge` also lets PVE destroy an HA-managed guest (qemu-server
    // `src/PVE/API2/Qemu.pm` `destroy_vm` refuses it otherwise) and drops its HA resource.
    let opts = DestroyOptions::default()
        .with_purge(Some(true))
        .with_destroy_unreferenced_disks(Some(true));
    let upid = client.destroy(guest, &opts).await?;
    wait(client, options, upid, upids).await
}

/// Migrates a guest and waits for the task; an HA guest's `hamigrate` only asks the HA
/// manager, so then its arrival on the target is waited for too.
async fn migrate(
    client: &PveClient,
    guest: &GuestRef,
    request: &proxops_pve::api::ha::MigrateRequest,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let before = client
        .guest_status(guest)
        .await
        .map(|s| s.status)
        .unwrap_or_default();
    let upid = client.migrate(guest, request).await?;
    let ha = upid.kind == "hamigrate";
    let opts = options
        .wait
        .clone()
        .unwrap_or_else(|| WaitOptions::for_task(&upid.kind));
    wait(client, options, upid, upids).await?;
    if ha {
        let want = if before.is_empty() {
            "running"
        } else {
            before.as_str()
        };
        client
            .wait_guest_moved(guest.vmid, &request.target, want, &opts)
            .await?;
    }
    Ok(())
}

/// Writes an HA resource; when its state changed, waits for the HA manager to bring the guest
/// to the power state it asks for (within the HA request's timeout).
async fn write_ha(
    client: &PveClient,
    write: &HaWrite,
    create: bool,
    guest: &GuestRef,
    options: &ExecOptions,
) -> Result<(), PveError> {
    if create {
        client.ha_create(&write.sid, write.params()).await?;
    } else {
        client.ha_update(&write.sid, write.params()).await?;
    }
    if let Some(want) = write.wait {
        let opts = options
            .wait
            .clone()
            .unwrap_or_else(|| WaitOptions::for_task("hastart"));
        client.wait_guest_status(guest, want, &opts).await?;
    }
    Ok(())
}

async fn download(
    client: &PveClient,
    node: &str,
    artifact: &DesiredArtifact,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let request = download_request(artifact);
    let upid = client
        .download_url(node, &artifact.storage, &request)
        .await?;
    wait(client, options, upid, upids).await
}

/// The download-url request of an artifact.
pub(crate) fn download_request(artifact: &DesiredArtifact) -> DownloadUrl {
    let get = |k: &str| {
        artifact
            .download
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.clone())
    };
    DownloadUrl::new(
        get("url").unwrap_or_default(),
        artifact.content,
        artifact.filename.clone(),
    )
    .with_checksum(get("checksum"))
    .with_checksum_algorithm(get("checksum-algorithm"))
}

/// The clone request of a guest made from its template.
pub(crate) fn clone_request(
    d: &DesiredGuest,
    source: &crate::desired::CloneSource,
) -> CloneRequest {
    CloneRequest::new(d.vmid)
        .with_full(Some(true))
        .with_target((source.node != d.node).then(|| d.node.clone()))
}

/// The config of a create call: the desired config, and `start=1` for a guest to be started
/// (never a template, which PVE refuses to start).
pub(crate) fn create_request_config(d: &DesiredGuest) -> BTreeMap<String, String> {
    let mut config = d.create_config();
    if d.power == Some(proxops_model::kinds::PowerState::Started) && !d.template {
        config.insert("start".into(), "1".into());
    }
    config
}

pub(crate) fn guest_ref(d: &DesiredGuest) -> GuestRef {
    match d.guest {
        GuestType::Qemu => GuestRef::qemu(&d.node, d.vmid),
        GuestType::Lxc => GuestRef::lxc(&d.node, d.vmid),
    }
}

/// Creates a guest, or clones it and writes what differs from the template; makes templates and
/// starts guests as declared.
async fn create(
    client: &PveClient,
    d: &DesiredGuest,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let target = guest_ref(d);
    let start = d.power == Some(proxops_model::kinds::PowerState::Started);
    if let Some(source) = &d.clone {
        let request = clone_request(d, source);
        let upid = client
            .clone_guest(&GuestRef::qemu(&source.node, source.vmid), &request)
            .await?;
        wait(client, options, upid, upids).await?;
        let live = client.guest_config(&target).await?;
        // The clone carries the template's tags and description: the write sets exactly the
        // clone's own tags and drops the description unless the manifest declares one.
        let found = after_clone(d, &live.values);
        let edit = Edit {
            desired: d,
            changes: &found.changes,
            removals: &found.removals,
            resizes: &found.resizes,
            digest: live.digest,
        };
        apply_changes(client, &target, edit, options, upids).await?;
        if start {
            let upid = client.start(&target).await?;
            wait_power(client, options, &target, upid, "running", upids).await?;
        }
        return Ok(());
    }
    let config = create_request_config(d);
    let upid = client.create_guest(&target, &config).await?;
    wait(client, options, upid, upids).await?;
    if d.template {
        make_template(client, &target, options, upids).await?;
    }
    Ok(())
}

/// Makes a guest a template and waits for the conversion. Qemu answers the `qmtemplate` UPID;
/// LXC answers null but forks a `vztemplate` worker all the same (pve-container
/// `PVE/API2/LXC.pm` `template`: `fork_worker('vztemplate', ...)`, then `return undef`), which
/// can still fail (`PVE/LXC.pm` `template_create`: a storage without the template feature).
/// That task is found in the node's task list, as the one not there before the call, and its
/// failure is the action's.
async fn make_template(
    client: &PveClient,
    guest: &GuestRef,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let filter = TaskFilter::default()
        .with_vmid(Some(guest.vmid))
        .with_typefilter(Some("vztemplate".into()))
        .with_source(Some("all".into()))
        .with_limit(Some(100));
    let before: BTreeSet<String> = if guest.kind == GuestType::Lxc {
        client
            .node_tasks(&guest.node, &filter)
            .await?
            .into_iter()
            .map(|t| t.upid)
            .collect()
    } else {
        BTreeSet::new()
    };
    if let Some(upid) = client.make_template(guest).await? {
        return wait(client, options, upid, upids).await;
    }
    // PVE registers a worker before the call returns, so the first listing normally shows it;
    // a few more cover a node slow to write its task index.
    let mut pause = Duration::from_millis(100);
    for attempt in 0..5 {
        let listed = client.node_tasks(&guest.node, &filter).await?;
        // Newest first: the first unknown one is this call's.
        if let Some(task) = listed.into_iter().find(|t| !before.contains(&t.upid)) {
            let upid = task.upid.parse::<Upid>().map_err(|e| PveError::Decode {
                method: "GET".into(),
                path: format!("/nodes/{}/tasks", guest.node),
                detail: e.to_string(),
            })?;
            return wait(client, options, upid, upids).await;
        }
        if attempt < 4 {
            tokio::time::sleep(pause).await;
            pause *= 2;
        }
    }
    // No worker to be seen (a PVE that converts synchronously): the config says whether it
    // happened.
    let config = client.guest_config(guest).await?;
    if config.values.get("template").is_some_and(|v| v == "1") {
        return Ok(());
    }
    Err(PveError::Decode {
        method: "POST".into(),
        path: format!(
            "/nodes/{}/{}/{}/template",
            guest.node,
            guest.kind.as_str(),
            guest.vmid
        ),
        detail: "PVE accepted the template conversion, but no vztemplate task appeared and the config is not a template".into(),
    })
}

#[cfg(all(test, feature = "sim"))]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::planner::{PlanOptions, plan_cluster};
    use proxops_graph::Graph;
    use proxops_model::Registry;
    use proxops_model::diagnostic::SourceFile;
    use proxops_model::manifest::load_manifest;
    use proxops_pve::{Credentials, TlsVerification};
    use proxops_pve_sim::{Node, SimConfig, State, Storage, TaskDurations};
    use std::sync::{Arc, Mutex};

    fn graph(nodes: &[&str], per_node: usize) -> Graph {
        let registry = Registry::builtin();
        let resources: Vec<_> = (0..nodes.len() * per_node)
            .map(|i| {
                let text = format!(
                    "apiVersion: proxops/v1alpha1\nkind: VM\nmetadata:\n  name: vm-{i}\nspec:\n  node: {}\n  vmid: {}\n  memory: 1GiB\n  cpu:\n    cores: 1\n    type: host\n  disks:\n    - storage: local-lvm\n      size: 1GiB\n",
                    nodes[i % nodes.len()],
                    100 + i
                );
                load_manifest(&SourceFile::new(format!("{i}.yaml"), text), &registry, None)
                    .resource
                    .unwrap()
            })
            .collect();
        Graph::build(&registry, &resources).unwrap()
    }

    /// A level's steps come node by node; the executor still keeps every node busy, never more
    /// than the client's per-node limit, rather than filling its overall slots with actions
    /// that wait for one node's permits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn starts_spread_over_nodes_within_the_per_node_limit() {
        let nodes = ["pve1", "pve2"];
        let state = State {
            nodes: nodes
                .iter()
                .map(|n| Node {
                    node: (*n).into(),
                    storages: vec![Storage {
                        storage: "local-lvm".into(),
                        kind: "lvmthin".into(),
                        content: vec!["images".into()],
                        ..Storage::default()
                    }],
                    ..Node::default()
                })
                .collect(),
            ..State::default()
        };
        let sim = proxops_pve_sim::start(
            SimConfig::default()
                .with_state(state)
                .with_task_durations(TaskDurations::uniform(Duration::from_millis(30))),
        )
        .await
        .unwrap();
        let client = PveClient::builder(
            sim.base_url(),
            Credentials::parse_token(&sim.token.to_string()).unwrap(),
        )
        .tls(TlsVerification::Fingerprint(
            sim.fingerprint.parse().unwrap(),
        ))
        .mutations_per_node(2)
        .build()
        .unwrap();
        let graph = graph(&nodes, 6);
        let plan = plan_cluster(&client, "t", &graph, &PlanOptions::default())
            .await
            .unwrap();
        // The plan lists one node's creates, then the other's.
        let order: Vec<&str> = plan.actions.iter().map(|a| a.node.as_str()).collect();
        assert_eq!(order[..6], ["pve1"; 6]);
        #[derive(Default)]
        struct Seen {
            in_flight: BTreeMap<String, usize>,
            max: BTreeMap<String, usize>,
            first: Vec<String>,
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let record = seen.clone();
        let options = ExecOptions {
            concurrency: 4,
            progress: Some(Arc::new(move |p: Progress<'_>| {
                let mut s = record.lock().unwrap();
                match p {
                    Progress::Started(a) => {
                        if s.first.len() < 4 {
                            s.first.push(a.node.clone());
                        }
                        let n = *s.in_flight.entry(a.node.clone()).or_default() + 1;
                        s.in_flight.insert(a.node.clone(), n);
                        let m = s.max.entry(a.node.clone()).or_default();
                        *m = (*m).max(n);
                    }
                    Progress::Ended(a, _) => {
                        *s.in_flight.entry(a.node.clone()).or_default() -= 1;
                    }
                }
            })),
            ..ExecOptions::default()
        };
        let report = execute(&client, &plan, &options).await;
        assert!(report.all_succeeded(), "{report:#?}");
        let (first, max) = {
            let s = seen.lock().unwrap();
            let mut first = s.first.clone();
            first.sort();
            (first, s.max.values().copied().collect::<Vec<_>>())
        };
        assert_eq!(first, ["pve1", "pve1", "pve2", "pve2"]);
        assert_eq!(max, [2, 2]);
        sim.shutdown().await.unwrap();
    }
}
