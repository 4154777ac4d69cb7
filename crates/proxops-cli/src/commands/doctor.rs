//! `proxops doctor`.

use crate::error::CommandError;
use crate::session::{BackendKind, LiveArgs, RepoArgs, load, runtime};
use proxops_engine::doctor::{self, DoctorInput, DoctorLine, Status};
use proxops_engine::secrets::ClusterSecrets;
use std::io::Write;
use std::process::ExitCode;

/// Check that ProxOps can do its work on each cluster, and say what is wrong.
///
/// Per cluster, in order (a failure skips the checks after it): the repository validates for
/// the cluster (`config`); its effective settings, one line each with the layer it comes from
/// (`setting`; secrets show only where they are set); its credentials resolve from the environment or its SOPS secrets file
/// (`credentials`); the endpoint answers `GET /version` with the expected certificate, the pinned
/// fingerprint or the CA file's, warning when verification is off (`endpoint`); the credentials
/// authenticate (`auth`); the token holds every privilege, on its ACL path, that the planner's
/// reads and the cluster's planned actions need, read with `GET /access/permissions`
/// (`privileges`: each missing one with its path and what needs it), and every write that only
/// root@pam may do is named with its remedy unless the credentials are a password login as
/// root@pam (a token never is root, not even `root@pam!name`).
///
/// Exit status: 0 when no check fails (warnings allowed), 1 when one does, 2 for usage or I/O
/// problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Runs `proxops doctor`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = repo.resolve()?;
    let loaded = load(&dir, &args.live.clusters.names)?;
    let pve = args.live.backend.backend == BackendKind::Pve;
    let mut failed = false;
    runtime()?.block_on(async {
        for cluster in &loaded.repo().clusters {
            println!("cluster {}", cluster.name);
            let graph = loaded
                .graphs()
                .iter()
                .find(|(name, _)| *name == cluster.name)
                .map(|(_, g)| g);
            let settings = loaded.settings(cluster);
            let secrets = ClusterSecrets::load(Some(loaded.dir()), cluster);
            let input = DoctorInput::new(cluster, graph, &settings, &secrets, pve);
            let connect = || args.live.backend.connect(&loaded, cluster);
            let report = doctor::check(input, connect, &mut print_line).await;
            failed |= report.failed();
        }
    });
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// One finding, as soon as it is made: `  <status> <check> <reason>`.
fn print_line(line: &DoctorLine) {
    let word = match line.status {
        Status::Info => "info",
        Status::Ok => "ok",
        Status::Warn => "warn",
        _ => "FAIL",
    };
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "  {word:<5} {:<12} {}", line.check, line.reason);
    let _ = out.flush();
}
