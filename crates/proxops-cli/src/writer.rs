//! What `apply` and `converge` share: the engine's [`Reconciler`] run over the selected
//! clusters, its events rendered on the terminal, and one exit status. No cycle logic lives
//! here: only flags in, text out.

use crate::error::CommandError;
use crate::render;
use crate::session::{Loaded, PlanArgs, RemoteArgs, SourceArgs, runtime};
use proxops_engine::execute::{Progress, ProgressFn};
use proxops_engine::planes::Destination;
use proxops_engine::{ClusterPlan, Event, ReconcileOptions, Reconciler, RunResult, Source};
use proxops_store::documents::hex;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// `--planes` and `--no-planes`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PlanesArgs {
    /// Record the cycle in the git planes (the default in a git work tree): the desired plane
    /// (`proxops/desired/<cluster>`) before executing, receipts (`proxops/observed/<cluster>`)
    /// after. The repository is read at its `HEAD` commit.
    #[arg(long, conflicts_with = "no_planes")]
    pub planes: bool,
    /// Do not record the planes. Their previous documents are what prove which keys ProxOps
    /// set, so without them a key, NIC or tag removed from a manifest is reported and left on
    /// the guest, and `get`/`status`/promotion see nothing of this run. The lease is still
    /// taken.
    #[arg(long)]
    pub no_planes: bool,
}

impl PlanesArgs {
    /// Whether to record the planes for the repository at `dir` read as `source` says.
    pub fn wanted(&self, dir: &Path, source: &SourceArgs) -> bool {
        if self.no_planes {
            return false;
        }
        if self.planes {
            return true;
        }
        let git = dir.join(".git").exists();
        if git && source.worktree {
            crate::logging::note(
                "--worktree: the planes are not recorded (they pin a commit); removed keys are reported, not removed",
            );
        }
        git && !source.worktree
    }
}

/// The flags `apply` and `converge` share: what to plan against, the planes and where they
/// are published, and whether pending changes may restart running guests.
#[derive(Debug, Clone, clap::Args)]
pub struct CycleArgs {
    #[command(flatten)]
    pub plan: PlanArgs,
    #[command(flatten)]
    pub planes: PlanesArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Never restart a running guest for a change PVE keeps pending until its next start: such
    /// a change is reported "pending until restart" and the cluster is not converged (exit 1).
    #[arg(long)]
    pub no_restart: bool,
}

/// Everything a writing command was given.
pub struct Writer<'a> {
    /// `apply` or `converge`: the lease holder's name.
    pub holder: &'a str,
    /// The repository directory.
    pub dir: &'a Path,
    /// The shared flags.
    pub cycle: &'a CycleArgs,
    /// Plan only.
    pub dry_run: bool,
    /// Ask before executing (`apply` without `--yes`).
    pub confirm: bool,
    /// Cycles per cluster.
    pub max_cycles: usize,
}

/// How long a writer's lease lasts between renewals (renewed every third of it while it runs).
const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(120);

impl Writer<'_> {
    /// Runs every selected cluster; the exit status (0: each cluster in sync or applied).
    pub fn run(&self) -> Result<ExitCode, CommandError> {
        let plan = &self.cycle.plan;
        let planes = self.cycle.planes.wanted(self.dir, &plan.source);
        let (mut loaded, revision) =
            plan.source
                .load(self.dir, &plan.live.clusters.names, planes)?;
        plan.tuning.apply_to(&mut loaded);
        let mut failed = loaded.any_invalid();
        // The lease needs the repository's git, planes or not.
        let store = if planes || self.dir.join(".git").exists() {
            Some(self.cycle.remote.store(self.dir)?)
        } else {
            None
        };
        let runtime = runtime()?;
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        runtime.spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                eprintln!("stopping: no new actions; waiting for the ones in flight");
                let _ = stop_tx.send(true);
            }
        });
        let needs_terminal = Arc::new(AtomicBool::new(false));
        let results = runtime.block_on(async {
            let mut results = Vec::new();
            for (cluster, graph) in loaded.clusters() {
                let reconciler = self.reconciler(
                    &loaded,
                    &cluster.name,
                    store.clone(),
                    planes,
                    &needs_terminal,
                );
                let source = Source::new(loaded.repo(), Some(graph), loaded.dir()).at(revision);
                let run = reconciler
                    .cycle(source, &cluster.name, stop_rx.clone())
                    .await;
                for e in &run.errors {
                    eprintln!("error[{}]: cluster {}: {e}", e.code(), run.cluster);
                }
                if let Some(line) =
                    verdict(&run.cluster, run.result, run.last_plan(), self.max_cycles)
                {
                    println!("{line}");
                }
                results.push(run.result);
                if needs_terminal.load(Ordering::Relaxed) {
                    break;
                }
            }
            results
        });
        if needs_terminal.load(Ordering::Relaxed) {
            return Err(CommandError::usage(
                format!(
                    "{} needs confirmation and stdin is not a terminal",
                    self.holder
                ),
                Some(
                    "pass --yes to apply without asking, or --dry-run to only show the plan".into(),
                ),
            ));
        }
        if let Some(store) = &store
            && self.cycle.plan.live.clusters.names.is_empty()
        {
            let known: Vec<&str> = loaded
                .repo()
                .clusters
                .iter()
                .map(|c| c.name.as_str())
                .collect();
            for v in proxops_engine::reconcile::vanished_clusters(store, &known) {
                eprintln!("warning[proxops::planes::vanished]: {v}");
            }
        }
        failed |= results.iter().any(|r| !r.is_success());
        Ok(if failed {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        })
    }

    fn reconciler(
        &self,
        loaded: &Loaded,
        cluster: &str,
        store: Option<proxops_store::Store>,
        planes: bool,
        needs_terminal: &Arc<AtomicBool>,
    ) -> Reconciler {
        let multi = self.max_cycles > 1;
        let mut options = ReconcileOptions::default()
            .with_holder(self.holder)
            .with_lease_ttl(LEASE_TTL)
            .with_dry_run(self.dry_run)
            .with_max_cycles(self.max_cycles)
            .with_restarts(!self.cycle.no_restart)
            // A command run by hand corrects drift: `drift: report` is the agent's mode.
            .with_drift(Some(proxops_model::config::DriftMode::Correct))
            .with_flags(loaded.flags.clone())
            .with_events(Arc::new(move |e: &Event<'_>| print_event(e, multi)));
        if !self.dry_run {
            options = options.with_progress(progress(cluster));
        }
        if self.confirm {
            let flag = Arc::clone(needs_terminal);
            let cluster = cluster.to_owned();
            options = options.with_confirm(Arc::new(move |plan: &ClusterPlan| {
                ask(&cluster, plan.actions.len(), &flag)
            }));
        }
        let mut builder = Reconciler::builder(
            Arc::clone(loaded.registry()),
            self.cycle.plan.live.backend.backend(cluster),
        )
        .record_planes(planes)
        .options(options);
        if let Some(store) = store {
            builder = builder.store(store);
        }
        builder.build()
    }
}

/// The closing line of a cluster's run, when the plan's own lines do not say it all.
fn verdict(
    cluster: &str,
    result: RunResult,
    plan: Option<&ClusterPlan>,
    max_cycles: usize,
) -> Option<String> {
    let stuck = plan.map(ClusterPlan::stuck_summary).unwrap_or_default();
    match result {
        RunResult::Stuck => Some(format!(
            "cluster {cluster}: NOT converged: {stuck} (see above; nothing was done about them)"
        )),
        RunResult::Waiting => Some(format!(
            "cluster {cluster}: NOT converged: {stuck} (see above; a consumer is planned once what it reads is there)"
        )),
        RunResult::NotConverged => Some(format!(
            "cluster {cluster}: did not converge in {max_cycles} cycles"
        )),
        RunResult::Declined => Some(format!("cluster {cluster}: not applied")),
        RunResult::Stopped => Some(format!(
            "cluster {cluster}: stopped before every action started"
        )),
        RunResult::Applied if max_cycles > 1 => Some(format!("cluster {cluster}: converged")),
        _ => None,
    }
}

/// Renders an event on the terminal.
pub(crate) fn print_event(event: &Event<'_>, multi: bool) {
    match event {
        Event::Desired {
            cluster,
            refs,
            published,
        } => {
            let p = &published.publication.publication;
            let branch = refs.desired_branch();
            match published.destination() {
                Destination::Live => println!(
                    "cluster {cluster}: {branch} at {} (published)",
                    short(p.head)
                ),
                Destination::Unchanged => println!(
                    "cluster {cluster}: {branch} at {} (unchanged)",
                    short(p.head)
                ),
                Destination::Candidate(c) => println!(
                    "cluster {cluster}: {branch} at {} (unchanged: change gate pullRequest); candidate {} at {} ({}); this cycle reconciles the live head",
                    short(p.head),
                    c.refname.strip_prefix("refs/heads/").unwrap_or(&c.refname),
                    short(c.commit),
                    if c.created {
                        "proposed"
                    } else {
                        "already proposed"
                    }
                ),
                other => println!(
                    "cluster {cluster}: {branch} at {} ({other:?})",
                    short(p.head)
                ),
            }
        }
        Event::LiveHead {
            cluster,
            source_revision,
        } => println!(
            "cluster {cluster}: reconciling the live desired head, built from source {}",
            short(*source_revision)
        ),
        Event::Planned { cycle, plan } => {
            if multi {
                println!("-- cycle {cycle}");
            }
            print!("{}", render::plan(plan));
        }
        Event::Executed { report, .. } => println!("{}", render::summary(report)),
        Event::Receipts {
            cluster,
            refs,
            published,
        } => {
            let refname = refs.observed_branch();
            match &published.publication {
                Some(p) => println!(
                    "cluster {cluster}: {refname} at {}: {} receipt(s), {} teardown(s)",
                    short(p.head),
                    published.receipts,
                    published.teardowns
                ),
                None => println!("cluster {cluster}: {refname} unchanged: receipts are current"),
            }
            for (key, why) in &published.withheld {
                println!("cluster {cluster}: no receipt for {key}: {why}");
            }
        }
        Event::Warning { cluster, message } => {
            eprintln!("warning: cluster `{cluster}`: {message}")
        }
        Event::LeaseTakenOver { cluster, from } => eprintln!(
            "warning: cluster `{cluster}`: took over the lease of {} (pid {} on {}), which {}",
            from.holder,
            from.pid,
            from.host,
            if from.expired_at(std::time::SystemTime::now()) {
                format!("expired at {}", from.expires)
            } else {
                "no longer runs".to_owned()
            }
        ),
        _ => {}
    }
}

fn short(id: proxops_store::ObjectId) -> String {
    hex(id)[..12].to_owned()
}

/// Asks on the terminal; without one, records that a terminal was needed and declines.
fn ask(cluster: &str, actions: usize, needs_terminal: &AtomicBool) -> bool {
    if !std::io::stdin().is_terminal() {
        needs_terminal.store(true, Ordering::Relaxed);
        return false;
    }
    print!("apply {actions} action(s) to cluster {cluster}? [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    if std::io::stdin().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes")
}

/// Progress on stderr: a spinner per running action on a terminal, a line per ended action
/// otherwise.
pub fn progress(cluster: &str) -> ProgressFn {
    let cluster = cluster.to_owned();
    if !std::io::stderr().is_terminal() {
        return Arc::new(move |p: Progress<'_>| {
            if let Progress::Ended(a, r) = p {
                eprintln!("{}", render::result_line(&cluster, a, r));
            }
        });
    }
    let bars = indicatif::MultiProgress::new();
    let running: Mutex<std::collections::HashMap<usize, indicatif::ProgressBar>> =
        Mutex::new(std::collections::HashMap::new());
    Arc::new(move |p: Progress<'_>| match p {
        Progress::Started(a) => {
            let bar = bars.add(indicatif::ProgressBar::new_spinner());
            bar.set_message(render::started_line(&cluster, a));
            bar.enable_steady_tick(std::time::Duration::from_millis(120));
            if let Ok(mut map) = running.lock() {
                map.insert(a.id, bar);
            }
        }
        Progress::Ended(a, r) => {
            let bar = running.lock().ok().and_then(|mut map| map.remove(&a.id));
            match bar {
                Some(bar) => bar.finish_with_message(render::result_line(&cluster, a, r)),
                None => eprintln!("{}", render::result_line(&cluster, a, r)),
            }
        }
        _ => {}
    })
}
