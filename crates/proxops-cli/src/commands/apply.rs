//! `proxops apply`.

use super::repo_dir;
use crate::error::CliError;
use crate::render;
use crate::session::{
    BackendArgs, RemoteArgs, SourceArgs, TuningArgs, load_from, runtime, store_error,
};
use proxops_engine::execute::{ExecOptions, Progress, execute};
use proxops_engine::lease::hold;
use proxops_engine::planes::{Destination, Planes};
use proxops_engine::planner::plan_cluster;
use proxops_store::Holder;
use proxops_store::documents::hex;
use proxops_store::refs::ChangeGate;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// Make each cluster match the repository: plan, show the plan, then execute it.
///
/// Independent actions run in parallel; a failed action defers its dependants to the next run.
/// Ctrl-C starts nothing new and waits for the actions in flight. Exit status: 0 when every
/// action succeeded, 1 when one failed or a cluster is invalid, 2 for usage or I/O problems.
///
/// With `--planes` the repository is read at its `HEAD` commit (not the work tree), each
/// cluster's desired plane (`proxops/desired/<cluster>`) is published before its plan runs and
/// receipts of what it reconciled (`proxops/observed/<cluster>`) after; see `proxops get` and
/// `proxops status`. With `planes.change-gate: pullRequest` a change is proposed as a
/// candidate branch `proxops/candidates/<cluster>/<id>` instead, and the cycle reconciles the
/// live desired head. Each cluster's lease is held while it is applied (see `proxops lease`):
/// a cluster an agent or another apply is reconciling is refused.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository (default: the git work tree of the current directory).
    #[arg(long, value_name = "DIR")]
    pub repo: Option<PathBuf>,
    /// Only this cluster (repeatable).
    #[arg(long = "cluster", value_name = "C")]
    pub clusters: Vec<String>,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Show the plan and stop.
    #[arg(long)]
    pub dry_run: bool,
    /// Do not ask for confirmation (needed when stdin is not a terminal).
    #[arg(long)]
    pub yes: bool,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub tuning: TuningArgs,
    /// Record the cycle in the repository's git planes: the desired plane before executing,
    /// receipts after (the repository must be a git repository; its commit is read).
    #[arg(long)]
    pub planes: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// How long apply's lease lasts between renewals (renewed every third of it while it runs).
const LEASE_TTL: std::time::Duration = std::time::Duration::from_secs(120);

/// Runs `proxops apply`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let store = args.planes.then(|| args.remote.store(&dir)).transpose()?;
    let (mut loaded, source_revision) = args.source.load(&dir, &args.clusters, args.planes)?;
    args.tuning.apply_to(&mut loaded);
    let mut failed = loaded.any_invalid();
    let runtime = runtime()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    runtime.spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("stopping: no new actions; waiting for the ones in flight");
            let _ = stop_tx.send(true);
        }
    });
    let outcome: Result<(), CliError> = runtime.block_on(async {
        for (cluster, graph) in loaded.clusters() {
            let conn = match args.backend.connect(&loaded, cluster).await {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("error: {e}");
                    failed = true;
                    continue;
                }
            };
            for w in &conn.warnings {
                eprintln!("warning: {w}");
            }
            // With planes, the cluster's lease keeps an agent (or another apply) off it until
            // this run ends; it is given back when `lease` goes out of scope.
            let lease = match (&store, args.dry_run) {
                (Some(store), false) => {
                    let holder = Holder::this_process("apply");
                    match hold(
                        store,
                        &cluster.name,
                        &holder,
                        LEASE_TTL,
                        Some(stop_rx.clone()),
                    )
                    .await
                    {
                        Ok(l) => Some(l),
                        Err(e) => {
                            eprintln!("error: cluster {}: {e}", cluster.name);
                            failed = true;
                            continue;
                        }
                    }
                }
                _ => None,
            };
            // A gated cluster proposes its change first and then reconciles its live desired
            // head, planned from the source revision that head was built from.
            let mut early = None;
            let mut reloaded = None;
            if let (Some(store), Some(revision), false) = (&store, source_revision, args.dry_run)
                && Planes::from_config(store.clone(), &loaded.repo, &cluster.name)
                    .is_ok_and(|p| p.refs.gate == ChangeGate::PullRequest)
            {
                let published = match publish_desired(store, &loaded.repo, &cluster.name, revision)
                {
                    Ok(p) => p,
                    Err(e) => {
                        eprintln!("error: cluster {}: {e}", cluster.name);
                        failed = true;
                        continue;
                    }
                };
                if let Some(live) = published.1.state.source_revision
                    && published.1.candidate().is_some()
                    && live != revision
                {
                    println!(
                        "cluster {}: reconciling the live desired head, built from source {}",
                        cluster.name,
                        &hex(live)[..12]
                    );
                    let source = store.source(Some(&hex(live))).map_err(store_error);
                    match source.and_then(|s| {
                        load_from(&s, &loaded.dir, std::slice::from_ref(&cluster.name))
                    }) {
                        Ok(l) => reloaded = Some(l),
                        Err(e) => {
                            eprintln!("error: cluster {}: {e}", cluster.name);
                            failed = true;
                            continue;
                        }
                    }
                }
                early = Some(published);
            }
            let graph = match &reloaded {
                None => graph,
                Some(l) => match l.clusters().next() {
                    Some((_, g)) => g,
                    None => {
                        eprintln!(
                            "error: cluster {}: the live desired head's source is invalid",
                            cluster.name
                        );
                        failed = true;
                        continue;
                    }
                },
            };
            let plan = match plan_cluster(
                &conn.client,
                &cluster.name,
                graph,
                &conn.plan_options(cluster),
            )
            .await
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("error: cluster {}: {e}", cluster.name);
                    failed = true;
                    continue;
                }
            };
            print!("{}", render::plan(&plan));
            failed |= !plan.errors.is_empty();
            if args.dry_run || (plan.is_empty() && store.is_none()) {
                continue;
            }
            if !plan.is_empty() && !args.yes && !confirm(&cluster.name, plan.actions.len())? {
                println!("cluster {}: not applied", cluster.name);
                continue;
            }
            let started = std::time::SystemTime::now();
            let published = match (early, &store, source_revision) {
                (Some(p), _, _) => Some(p),
                (None, Some(store), Some(revision)) => {
                    match publish_desired(store, &loaded.repo, &cluster.name, revision) {
                        Ok(p) => Some(p),
                        Err(e) => {
                            eprintln!("error: cluster {}: {e}", cluster.name);
                            failed = true;
                            continue;
                        }
                    }
                }
                _ => None,
            };
            let report = if plan.is_empty() {
                None
            } else {
                let options = ExecOptions {
                    stop: Some(lease.as_ref().map_or_else(|| stop_rx.clone(), |l| l.stop())),
                    progress: Some(progress(&cluster.name)),
                    ..conn.exec_options()
                };
                let report = execute(&conn.client, &plan, &options).await;
                println!("{}", render::summary(&report));
                failed |= !report.all_succeeded();
                Some(report)
            };
            if let Some((planes, desired)) = &published {
                match planes
                    .record_cycle(
                        &conn.client,
                        &desired.state,
                        &plan,
                        report.as_ref(),
                        started,
                    )
                    .await
                {
                    Ok(r) => {
                        let refname = planes.refs.observed_branch();
                        match &r.publication {
                            Some(p) => println!(
                                "cluster {}: {refname} at {}: {} receipt(s), {} teardown(s)",
                                cluster.name,
                                &hex(p.head)[..12],
                                r.receipts,
                                r.teardowns
                            ),
                            None => println!(
                                "cluster {}: {refname} unchanged: receipts are current",
                                cluster.name
                            ),
                        }
                        for (key, why) in &r.withheld {
                            println!("cluster {}: no receipt for {key}: {why}", cluster.name);
                        }
                    }
                    Err(e) => {
                        eprintln!("error: cluster {}: publishing receipts: {e}", cluster.name);
                        failed = true;
                    }
                }
            }
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
            if let Some(lease) = lease
                && !lease.release().await
            {
                eprintln!(
                    "warning: cluster {}: the lease was taken over before this run ended",
                    cluster.name
                );
            }
        }
        Ok(())
    });
    outcome?;
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Publishes a cluster's desired plane and says so.
fn publish_desired(
    store: &proxops_store::Store,
    repo: &proxops_model::Repository,
    cluster: &str,
    revision: proxops_store::ObjectId,
) -> Result<(Planes, proxops_engine::planes::PublishedDesired), proxops_store::StoreError> {
    let planes = Planes::from_config(store.clone(), repo, cluster)?;
    let desired = planes.publish_desired(repo, revision)?;
    let p = &desired.publication.publication;
    let branch = planes.refs.desired_branch();
    match desired.destination() {
        Destination::Live => println!(
            "cluster {cluster}: {branch} at {} (published)",
            short(p.head)
        ),
        Destination::Unchanged => {
            println!(
                "cluster {cluster}: {branch} at {} (unchanged)",
                short(p.head)
            )
        }
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
    }
    Ok((planes, desired))
}

fn short(id: proxops_store::ObjectId) -> String {
    hex(id)[..12].to_owned()
}

/// Asks on the terminal; refuses without one.
fn confirm(cluster: &str, actions: usize) -> Result<bool, CliError> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(
            "apply needs confirmation and stdin is not a terminal",
            Some("pass --yes to apply without asking, or --dry-run to only show the plan".into()),
        ));
    }
    print!("apply {actions} action(s) to cluster {cluster}? [y/N] ");
    std::io::stdout()
        .flush()
        .map_err(|e| CliError::Io(e.to_string()))?;
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|e| CliError::Io(e.to_string()))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Progress on stderr: a spinner per running action on a terminal, a line per ended action
/// otherwise.
fn progress(cluster: &str) -> proxops_engine::execute::ProgressFn {
    let cluster = cluster.to_owned();
    if !std::io::stderr().is_terminal() {
        return Arc::new(move |p: Progress<'_>| {
            if let Progress::Ended(a, r) = p {
                eprintln!("{}", render::result_line(&cluster, a, r));
            }
        });
    }
    let bars = indicatif::MultiProgress::new();
    let running: std::sync::Mutex<std::collections::HashMap<usize, indicatif::ProgressBar>> =
        std::sync::Mutex::new(std::collections::HashMap::new());
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
    })
}
