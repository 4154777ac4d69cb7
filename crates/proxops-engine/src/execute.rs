//! The executor: runs a plan's actions in dependency order, independent ones in parallel.
//!
//! Concurrency is bounded overall and, through the client's mutation permits, per node and per
//! guest. A failed action defers every action that depends on it (reported; planned again next
//! cycle). A stop request lets running actions finish and starts no new one.

use crate::desired::DesiredGuest;
use crate::diff::{Change, Resize, diff};
use crate::plan::{Action, ClusterPlan, Op, Verb};
use proxops_pve::props::format_size;
use proxops_pve::{
    CloneRequest, ConfigChange, DestroyOptions, DownloadUrl, GuestRef, GuestType, PveClient,
    PveError, Upid, WaitOptions,
};
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How an action ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "outcome")]
pub enum Outcome {
    /// It did what it should.
    Succeeded,
    /// PVE refused or a task failed.
    Failed {
        /// What went wrong.
        error: String,
    },
    /// A prerequisite failed; retried next cycle.
    Deferred {
        /// The failed actions it waits for.
        blocked_by: Vec<usize>,
    },
    /// Not started because a stop was requested.
    NotStarted,
}

/// The result of one action.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ActionResult {
    /// The action's id in the plan.
    pub id: usize,
    /// `Kind/name`.
    pub subject: String,
    /// What it did.
    pub verb: Verb,
    /// How it ended.
    #[serde(flatten)]
    pub outcome: Outcome,
    /// The PVE tasks it ran.
    pub upids: Vec<String>,
    /// How long it took.
    pub millis: u64,
}

/// What a cycle did to one cluster.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CycleReport {
    /// The cluster.
    pub cluster: String,
    /// One result per action, in plan order.
    pub results: Vec<ActionResult>,
}

impl CycleReport {
    /// How many actions ended with `outcome`'s variant.
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.results.iter().filter(|r| pred(&r.outcome)).count()
    }

    /// Whether every action succeeded.
    pub fn all_succeeded(&self) -> bool {
        self.results.iter().all(|r| r.outcome == Outcome::Succeeded)
    }
}

/// A progress event, for terminals and logs.
#[derive(Debug, Clone)]
pub enum Progress<'a> {
    /// An action started.
    Started(&'a Action),
    /// An action ended.
    Ended(&'a Action, &'a ActionResult),
}

/// A progress callback.
pub type ProgressFn = Arc<dyn Fn(Progress<'_>) + Send + Sync>;

/// Knobs of the executor.
#[derive(Clone)]
pub struct ExecOptions {
    /// Actions in flight at once over the cluster (the client also bounds each node).
    pub concurrency: usize,
    /// Task wait settings by task type; `None` uses [`WaitOptions::for_task`].
    pub wait: Option<WaitOptions>,
    /// Seconds a guest gets to shut down before it is stopped.
    pub shutdown_timeout: u32,
    /// When it turns true, no new action starts.
    pub stop: Option<watch::Receiver<bool>>,
    /// Called as actions start and end.
    pub progress: Option<ProgressFn>,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            concurrency: 8,
            wait: None,
            shutdown_timeout: 120,
            stop: None,
            progress: None,
        }
    }
}

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
    let stopped = |o: &ExecOptions| o.stop.as_ref().is_some_and(|s| *s.borrow());
    loop {
        // Settle what can be settled, start what can start.
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
                    State::Done(Outcome::Deferred { blocked_by }) => {
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
                };
                results[i] = Some(result(action, outcome.clone(), Vec::new(), Duration::ZERO));
                states[i] = State::Done(outcome);
                continue;
            }
            if waiting || running.len() >= options.concurrency.max(1) {
                continue;
            }
            if stopped(options) {
                results[i] = Some(result(
                    action,
                    Outcome::NotStarted,
                    Vec::new(),
                    Duration::ZERO,
                ));
                states[i] = State::Done(Outcome::NotStarted);
                continue;
            }
            if let Some(p) = &options.progress {
                p(Progress::Started(action));
            }
            states[i] = State::Running;
            let (client, action, options) = (client.clone(), action.clone(), options.clone());
            running.spawn(async move {
                let started = Instant::now();
                let mut upids = Vec::new();
                let outcome = match run(&client, &action, &options, &mut upids).await {
                    Ok(()) => Outcome::Succeeded,
                    Err(e) => Outcome::Failed {
                        error: e.to_string(),
                    },
                };
                (
                    action.id,
                    result(&action, outcome, upids, started.elapsed()),
                )
            });
        }
        let Some(joined) = running.join_next().await else {
            break;
        };
        if let Ok((id, r)) = joined {
            if let Some(p) = &options.progress {
                p(Progress::Ended(&plan.actions[id], &r));
            }
            states[id] = State::Done(r.outcome.clone());
            results[id] = Some(r);
        }
    }
    CycleReport {
        cluster: plan.cluster.clone(),
        results: results
            .into_iter()
            .zip(&plan.actions)
            .map(|(r, a)| {
                r.unwrap_or_else(|| result(a, Outcome::NotStarted, Vec::new(), Duration::ZERO))
            })
            .collect(),
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
    }
}

async fn wait(
    client: &PveClient,
    options: &ExecOptions,
    upid: Upid,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    upids.push(upid.to_string());
    let wait = options
        .wait
        .clone()
        .unwrap_or_else(|| WaitOptions::for_task(&upid.kind));
    client.wait_task(&upid, &wait).await.map(|_| ())
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
        Op::Download { artifact } => {
            let get = |k: &str| {
                artifact
                    .download
                    .iter()
                    .find(|(key, _)| key == k)
                    .map(|(_, v)| v.clone())
            };
            let request = DownloadUrl {
                url: get("url").unwrap_or_default(),
                content: artifact.content.to_owned(),
                filename: artifact.filename.clone(),
                checksum: get("checksum"),
                checksum_algorithm: get("checksum-algorithm"),
                ..DownloadUrl::default()
            };
            let upid = client
                .download_url(&action.node, &artifact.storage, &request)
                .await?;
            wait(client, options, upid, upids).await
        }
        Op::Create { desired } => create(client, desired, options, upids).await,
        Op::Update {
            desired,
            changes,
            resizes,
            digest,
            restart,
        } => {
            let target = guest_ref(desired);
            apply_changes(
                client,
                &target,
                changes,
                resizes,
                digest.clone(),
                options,
                upids,
            )
            .await?;
            if *restart {
                let upid = client
                    .shutdown(&target, Some(options.shutdown_timeout), Some(true))
                    .await?;
                wait(client, options, upid, upids).await?;
                let upid = client.start(&target).await?;
                wait(client, options, upid, upids).await?;
            }
            Ok(())
        }
        Op::Start { guest } => {
            let upid = client.start(guest).await?;
            wait(client, options, upid, upids).await
        }
        Op::Stop { guest } => {
            let upid = client
                .shutdown(guest, Some(options.shutdown_timeout), Some(true))
                .await?;
            wait(client, options, upid, upids).await
        }
        Op::MarkTemplate { guest, running } => {
            if *running {
                let upid = client
                    .shutdown(guest, Some(options.shutdown_timeout), Some(true))
                    .await?;
                wait(client, options, upid, upids).await?;
            }
            if let Some(upid) = client.make_template(guest).await? {
                wait(client, options, upid, upids).await?;
            }
            Ok(())
        }
        Op::Delete { guest, running } => {
            if *running {
                let upid = client.stop(guest).await?;
                wait(client, options, upid, upids).await?;
            }
            let opts = DestroyOptions {
                purge: Some(true),
                destroy_unreferenced_disks: Some(true),
                ..DestroyOptions::default()
            };
            let upid = client.destroy(guest, &opts).await?;
            wait(client, options, upid, upids).await
        }
    }
}

fn guest_ref(d: &DesiredGuest) -> GuestRef {
    match d.guest {
        GuestType::Qemu => GuestRef::qemu(&d.node, d.vmid),
        GuestType::Lxc => GuestRef::lxc(&d.node, d.vmid),
    }
}

async fn apply_changes(
    client: &PveClient,
    target: &GuestRef,
    changes: &[Change],
    resizes: &[Resize],
    digest: Option<String>,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    if !changes.is_empty() {
        let change = ConfigChange {
            set: changes
                .iter()
                .map(|c| (c.key.clone(), c.value.clone()))
                .collect(),
            digest,
            ..ConfigChange::default()
        };
        client.set_config(target, &change).await?;
    }
    for r in resizes {
        if let Some(upid) = client
            .resize(target, &r.disk, &format_size(r.to), None)
            .await?
        {
            wait(client, options, upid, upids).await?;
        }
    }
    Ok(())
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
        let request = CloneRequest {
            newid: d.vmid,
            full: Some(true),
            target: (source.node != d.node).then(|| d.node.clone()),
            ..CloneRequest::default()
        };
        let upid = client
            .clone_guest(&GuestRef::qemu(&source.node, source.vmid), &request)
            .await?;
        wait(client, options, upid, upids).await?;
        let live = client.guest_config(&target).await?;
        let found = diff(d, &live.values);
        apply_changes(
            client,
            &target,
            &found.changes,
            &found.resizes,
            live.digest,
            options,
            upids,
        )
        .await?;
        if start {
            let upid = client.start(&target).await?;
            wait(client, options, upid, upids).await?;
        }
        return Ok(());
    }
    let mut config = d.create_config();
    if start && !d.template {
        config.insert("start".into(), "1".into());
    }
    let upid = client.create_guest(&target, &config).await?;
    wait(client, options, upid, upids).await?;
    if d.template
        && let Some(upid) = client.make_template(&target).await?
    {
        wait(client, options, upid, upids).await?;
    }
    Ok(())
}
