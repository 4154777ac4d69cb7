//! `proxops verify`.

use crate::commands::get::table;
use crate::error::CommandError;
use crate::render::Format as Output;
use crate::session::{BackendArgs, PlanesReadArgs, RepoArgs, load_from, runtime};
use proxops_engine::verify::{
    ClusterVerification, ResourceVerification, VerifyOptions, VerifyReport, VerifyState,
    verify_cluster,
};
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

/// Check that live PVE is still as reconciled: each resource with a current receipt against its
/// desired document in the planes. Changes nothing.
///
/// Reads the live desired plane (what was reconciled, not the work tree) and the observed
/// plane, and compares every resource whose receipt is current with live PVE, as `diff` does
/// (owned keys only): InSync, Drifted (the keys that differ, desired and live values), Missing
/// (the guest or file is gone). Resources without a current receipt are NotVerified, with why.
/// Only reads: PVE gets GET requests, no lease is taken, no plane is written; correcting drift
/// is `apply`'s (or the agent's) job.
///
/// Exit status: 0 when nothing drifted; with `--detailed-exitcode` 3 when something drifted or
/// is missing (1 without it); 1 when a cluster could not be verified; 2 for usage or I/O
/// problems (with `--detailed-exitcode`: 1).
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub planes: PlanesReadArgs,
    #[command(flatten)]
    pub backend: BackendArgs,
    /// Output format: `human`, a table and a RESULT line; or `json`, the `VerifyReport`
    /// document.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Human)]
    pub output: Output,
    /// Exit 3 when a resource drifted or is missing, 0 when nothing did, 1 on any error.
    #[arg(long)]
    pub detailed_exitcode: bool,
}

/// Runs `proxops verify`. With `--detailed-exitcode` every error exits 1, so that 3 means only
/// "drift".
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    match verify(args, repo) {
        Err(e) if args.detailed_exitcode => {
            e.report();
            Ok(ExitCode::from(1))
        }
        other => other,
    }
}

fn verify(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let store = args.planes.open(repo)?;
    // The clusters' configurations (endpoint, credentials, plane branches) as committed.
    let source = store.source(None).map_err(CommandError::from)?;
    let loaded = load_from(&source, &dir, &args.planes.clusters.names)?;
    let options = VerifyOptions::default()
        .with_registry(Arc::clone(loaded.registry()))
        .with_flags(loaded.flags.clone());
    let mut names: Vec<String> = loaded
        .repo()
        .clusters
        .iter()
        .map(|c| c.name.clone())
        .collect();
    names.sort();
    let clusters = runtime()?.block_on(async {
        let mut out = Vec::new();
        for name in &names {
            let backend = args.backend.backend(name);
            out.push(
                verify_cluster(
                    &store,
                    &backend,
                    loaded.repo(),
                    loaded.dir(),
                    name,
                    &options,
                )
                .await,
            );
        }
        out
    });
    for c in &clusters {
        for w in &c.warnings {
            eprintln!("warning: cluster `{}`: {w}", c.cluster);
        }
        for e in &c.errors {
            eprintln!("error[{}]: cluster {}: {e}", e.code(), c.cluster);
        }
    }
    let report = VerifyReport::new(clusters);
    let text = match args.output {
        Output::Json => serde_json::to_string_pretty(&report).map_err(CommandError::from)? + "\n",
        Output::Human => render(&report),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if report.has_errors() {
        ExitCode::from(1)
    } else if report.has_drift() {
        ExitCode::from(if args.detailed_exitcode { 3 } else { 1 })
    } else {
        ExitCode::SUCCESS
    })
}

/// The table (CLUSTER KIND NAME STATE DETAIL) and the RESULT line.
pub fn render(report: &VerifyReport) -> String {
    let rows = report
        .clusters
        .iter()
        .flat_map(|c| c.resources.iter().map(move |r| (c.cluster.as_str(), r)));
    let mut out =
        rows_table(rows).unwrap_or_else(|| "No resources in the desired planes.\n".to_owned());
    out.push_str(&result_line(&report.clusters));
    out
}

/// Only the drifted and missing resources of one cluster, then the RESULT line (`proxops
/// demo` shows what verify finds this way).
pub fn render_drift(c: &ClusterVerification) -> String {
    let rows = c.drifted().map(|r| (c.cluster.as_str(), r));
    let mut out = rows_table(rows).unwrap_or_default();
    out.push_str(&result_line(std::slice::from_ref(c)));
    out
}

/// The table of `rows`, or `None` without rows.
fn rows_table<'a>(
    rows: impl Iterator<Item = (&'a str, &'a ResourceVerification)>,
) -> Option<String> {
    let mut table_rows = vec![
        ["CLUSTER", "KIND", "NAME", "STATE", "DETAIL"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for (cluster, r) in rows {
        table_rows.push(vec![
            cluster.to_owned(),
            r.kind.clone(),
            r.name.clone(),
            r.state.label().to_owned(),
            detail(r),
        ]);
    }
    (table_rows.len() > 1).then(|| table(&table_rows))
}

/// What the DETAIL column says: the differences of a drifted resource (`key: desired D, live
/// L`), else why.
fn detail(r: &ResourceVerification) -> String {
    if r.state == VerifyState::InSync {
        return "-".to_owned();
    }
    if r.differences.is_empty() {
        return r.reason.clone();
    }
    let value = |v: &Option<String>| v.clone().unwrap_or_else(|| "(unset)".to_owned());
    r.differences
        .iter()
        .map(|d| {
            format!(
                "{}: desired {}, live {}",
                d.key,
                value(&d.desired),
                value(&d.live)
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `RESULT DRIFT: ...`, `RESULT ERROR: ...` or `RESULT CLEAN: ...`.
fn result_line(clusters: &[ClusterVerification]) -> String {
    let drifted: Vec<String> = clusters
        .iter()
        .flat_map(|c| {
            c.drifted().map(move |r| {
                format!(
                    "{} {} {}",
                    c.cluster,
                    r.subject(),
                    r.state.label().to_lowercase()
                )
            })
        })
        .collect();
    let count = |s: VerifyState| clusters.iter().map(|c| c.count(s)).sum::<usize>();
    let failed: Vec<&str> = clusters
        .iter()
        .filter(|c| !c.errors.is_empty())
        .map(|c| c.cluster.as_str())
        .collect();
    if !drifted.is_empty() {
        format!("RESULT DRIFT: {}\n", drifted.join(", "))
    } else if !failed.is_empty() {
        format!(
            "RESULT ERROR: not every resource could be verified (cluster {})\n",
            failed.join(", ")
        )
    } else {
        format!(
            "RESULT CLEAN: {} in sync, {} not verified\n",
            count(VerifyState::InSync),
            count(VerifyState::NotVerified)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proxops_engine::verify::Difference;

    fn report() -> VerifyReport {
        let mut lab = ClusterVerification::new("lab", "2026-01-01T00:00:00Z");
        let mut vm = ResourceVerification::new(
            "VM",
            "sandbox-01",
            VerifyState::Drifted,
            "changed: memory, onboot",
        );
        vm.differences = vec![
            Difference::new("memory", Some("2048".into()), Some("4096".into())),
            Difference::new("onboot", None, Some("1".into())),
        ];
        lab.resources = vec![
            ResourceVerification::new("ISO", "netinst", VerifyState::InSync, "matches"),
            ResourceVerification::new("LXC", "ci-runner-01", VerifyState::Missing, "absent"),
            ResourceVerification::new(
                "LXC",
                "new",
                VerifyState::NotVerified,
                "never reconciled: it has no receipt",
            ),
            vm,
        ];
        let mut home = ClusterVerification::new("home", "2026-01-01T00:00:00Z");
        home.resources = vec![ResourceVerification::new(
            "VM",
            "web",
            VerifyState::InSync,
            "matches",
        )];
        VerifyReport::new(vec![lab, home])
    }

    #[test]
    fn the_table_names_each_difference_and_the_result_line_every_drifted_resource() {
        insta::assert_snapshot!(render(&report()), @r"
        CLUSTER  KIND  NAME          STATE        DETAIL
        home     VM    web           InSync       -
        lab      ISO   netinst       InSync       -
        lab      LXC   ci-runner-01  Missing      absent
        lab      LXC   new           NotVerified  never reconciled: it has no receipt
        lab      VM    sandbox-01    Drifted      memory: desired 2048, live 4096; onboot: desired (unset), live 1
        RESULT DRIFT: lab LXC/ci-runner-01 missing, lab VM/sandbox-01 drifted
        ");
        let lab = &report().clusters[1];
        insta::assert_snapshot!(render_drift(lab), @r"
        CLUSTER  KIND  NAME          STATE    DETAIL
        lab      LXC   ci-runner-01  Missing  absent
        lab      VM    sandbox-01    Drifted  memory: desired 2048, live 4096; onboot: desired (unset), live 1
        RESULT DRIFT: lab LXC/ci-runner-01 missing, lab VM/sandbox-01 drifted
        ");
    }

    #[test]
    fn without_drift_the_result_is_clean_unless_a_cluster_failed() {
        let mut clean = ClusterVerification::new("lab", "t");
        clean.resources = vec![
            ResourceVerification::new("ISO", "netinst", VerifyState::InSync, "matches"),
            ResourceVerification::new("VM", "x", VerifyState::NotVerified, "stale receipt"),
        ];
        assert_eq!(
            result_line(std::slice::from_ref(&clean)),
            "RESULT CLEAN: 1 in sync, 1 not verified\n"
        );
        clean
            .errors
            .push(proxops_engine::verify::VerifyError::NoCluster("lab".into()));
        assert_eq!(
            result_line(std::slice::from_ref(&clean)),
            "RESULT ERROR: not every resource could be verified (cluster lab)\n"
        );
    }
}
