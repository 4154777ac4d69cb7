//! `proxops demo`.

use crate::demo::{DemoEvent, DemoOptions, DemoReport};
use crate::error::CommandError;
use crate::render;
use crate::session::{RepoArgs, runtime};
use crate::writer::print_event;
use proxops_engine::execute::Progress;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Run ProxOps's main job with no Proxmox VE, and show what makes it different.
///
/// The repository (default `examples/homelab`) is copied into a temporary git repository (yours
/// is only read), and each cluster gets a simulator. Then: every cluster is planned and
/// applied, with its desired plane and receipts recorded in git, and planned again (nothing to
/// do); `proxops get` shows one cluster's resources CLEAN; a change made by hand in PVE is
/// reported by `proxops verify`, found as drift and restored; a manifest taken out of the composition is pruned, with its
/// deletion intent and teardown recorded; a disruptive update guarded by a snapshot whose guest
/// does not come back is rolled back, recorded, and not tried again. Exit status: 0 when every
/// step showed what it should, 1 otherwise, 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the temporary repository and the simulators' state (their paths are printed).
    #[arg(long)]
    pub keep: bool,
    /// Print only the summary.
    #[arg(long, short, conflicts_with = "output")]
    pub quiet: bool,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
}

/// The repository the demo copies when `--repo` is not given (a ProxOps checkout's example).
pub const DEFAULT_REPO: &str = "examples/homelab";

/// Output formats of `demo`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Each step as it happens, then a summary.
    Text,
    /// The report of every step, as JSON (nothing else on stdout).
    Json,
}

/// Runs `proxops demo`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let repo: PathBuf = repo
        .dir
        .clone()
        .unwrap_or_else(|| Path::new(DEFAULT_REPO).to_path_buf());
    if !repo.is_dir() {
        return Err(CommandError::usage(
            format!("no repository at {}", repo.display()),
            Some("run it from a ProxOps checkout, or pass --repo DIR".into()),
        ));
    }
    let mut options = DemoOptions::new(&repo).with_keep(args.keep);
    if args.output == Output::Text && !args.quiet {
        options = options.with_events(Arc::new(print));
    }
    let report = runtime()?
        .block_on(crate::demo::run(&options))
        .map_err(CommandError::from)?;
    match args.output {
        Output::Json => {
            let json = serde_json::to_string_pretty(&report).map_err(CommandError::from)?;
            println!("{json}");
        }
        Output::Text => print!("{}", summary(&report)),
    }
    Ok(if report.succeeded() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print(event: &DemoEvent<'_>) {
    match event {
        DemoEvent::Step { number, title } => println!("\n== {number}. {title}"),
        DemoEvent::Reconcile(e) => print_event(e, false),
        DemoEvent::Progress {
            cluster,
            progress: Progress::Ended(a, r),
        } => println!("  {}", render::result_line(cluster, a, r)),
        DemoEvent::Resources(items) => print!("{}", super::get::render_table(items, false)),
        DemoEvent::Note(text) => println!("{text}"),
        DemoEvent::Verified(c) => {
            println!("proxops verify --cluster {}:", c.cluster);
            print!("{}", super::verify::render_drift(c));
        }
        _ => {}
    }
}

/// What the demo showed, in a few lines.
fn summary(r: &DemoReport) -> String {
    let mut out = String::from("\n== summary\n");
    for c in &r.clusters {
        let tasks: usize = c.tasks.values().sum();
        let listed: Vec<String> = c.tasks.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push_str(&format!(
            "cluster {}: {} action(s), {} succeeded, {} failed; {tasks} PVE task(s) ({}); next cycle: {}, {} task(s)\n",
            c.cluster,
            c.plan.as_ref().map_or(0, |p| p.actions.len()),
            c.succeeded,
            c.failed,
            listed.join(", "),
            word(c.again),
            c.tasks_again
        ));
    }
    out.push_str(&format!(
        "get: {} of {} resource(s) of {} CLEAN\n",
        r.get.clean,
        r.get.items.len(),
        r.get.cluster
    ));
    out.push_str(&format!(
        "drift: {} ({}) {}, {} and {}\n",
        r.drift.subject,
        r.drift.by_hand.join(", "),
        if r.drift.verified {
            "reported by verify"
        } else {
            "NOT reported by verify"
        },
        if r.drift.found { "found" } else { "NOT found" },
        if r.drift.restored {
            "restored"
        } else {
            "NOT restored"
        }
    ));
    if let Some(f) = &r.firewall {
        let yes = |b: bool, y: &'static str, n: &'static str| if b { y } else { n };
        out.push_str(&format!(
            "firewall: {} ({}) {}, {}; the hand rule {}\n",
            f.subject,
            f.by_hand.join("; "),
            yes(f.found, "found", "NOT found"),
            yes(f.restored, "restored", "NOT restored"),
            yes(f.hand_kept, "kept", "NOT kept"),
        ));
    }
    out.push_str(&format!(
        "prune: {} (vmid {}) {}; deletion intent {}; teardown {}; {} other guest(s) untouched\n",
        r.prune.subject,
        r.prune.vmid,
        if r.prune.deleted {
            "deleted"
        } else {
            "NOT deleted"
        },
        r.prune.intent.as_deref().unwrap_or("NOT recorded"),
        if r.prune.teardown_recorded {
            "recorded"
        } else {
            "NOT recorded"
        },
        r.prune.guests_left
    ));
    let g = &r.guarded;
    out.push_str(&format!(
        "guarded update: {} ({}) {} snapshot {}; {}; {}; receipt {}; {}\n",
        g.subject,
        g.changed,
        if g.guarded { "after" } else { "NOT after" },
        g.snapshot.as_deref().unwrap_or("(none)"),
        if g.failure.is_some() {
            "the check failed"
        } else {
            "NOTHING failed"
        },
        if g.rolled_back {
            "rolled back as it was"
        } else {
            "NOT rolled back"
        },
        if g.recorded {
            "rolledBack"
        } else {
            "NOT rolledBack"
        },
        if g.retried {
            "TRIED AGAIN"
        } else {
            "not tried again"
        }
    ));
    out.push_str(if r.succeeded() {
        "demo: every step showed what it should\n"
    } else {
        "demo: some step did not show what it should (see above)\n"
    });
    out
}

fn word(result: proxops_engine::RunResult) -> String {
    serde_json::to_value(result)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| format!("{result:?}"))
}
