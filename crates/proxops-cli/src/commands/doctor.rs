//! `proxops doctor`.

use super::repo_dir;
use crate::error::CliError;
use crate::session::{BackendArgs, BackendKind, Loaded, load, runtime};
use proxops_engine::backend::{credentials, token_variables};
use proxops_engine::cycle::plan_options;
use proxops_engine::planner::plan_cluster;
use proxops_engine::privileges;
use proxops_model::Cluster;
use proxops_pve::{Credentials, ErrorKind};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

/// Check that ProxOps can do its work on each cluster, and say what is wrong.
///
/// Per cluster, in order (a failure skips the checks after it): the repository validates for
/// the cluster (`config`); its credentials resolve from the environment or its SOPS secrets file
/// (`credentials`); the endpoint answers `GET /version` with the expected certificate, the pinned
/// fingerprint or the CA file's, warning when verification is off (`endpoint`); the credentials
/// authenticate (`auth`); the token holds every privilege, on its ACL path, that the planner's
/// reads and the cluster's planned actions need, read with `GET /access/permissions`
/// (`privileges`: each missing one with its path and what needs it).
///
/// Exit status: 0 when no check fails (warnings allowed), 1 when one does, 2 for usage or I/O
/// problems.
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
}

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Ok,
    Warn,
    Fail,
}

/// The lines printed so far, and whether a check failed.
struct Report {
    out: std::io::Stdout,
    failed: bool,
}

impl Report {
    fn line(&mut self, status: Status, check: &str, reason: &str) {
        let word = match status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => {
                self.failed = true;
                "FAIL"
            }
        };
        let mut out = self.out.lock();
        let _ = writeln!(out, "  {word:<5} {check:<12} {reason}");
        let _ = out.flush();
    }

    fn heading(&mut self, cluster: &str) {
        let _ = writeln!(self.out.lock(), "cluster {cluster}");
    }
}

/// Runs `proxops doctor`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let dir = repo_dir(args.repo.as_deref())?;
    let loaded = load(&dir, &args.clusters)?;
    let mut report = Report {
        out: std::io::stdout(),
        failed: false,
    };
    runtime()?.block_on(async {
        for cluster in &loaded.repo.clusters {
            report.heading(&cluster.name);
            check_cluster(args, &loaded, cluster, &mut report).await;
        }
    });
    Ok(if report.failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Who the credentials are: the token id, or the user of a password login.
fn identity(c: &Credentials) -> String {
    match c {
        Credentials::Token { id, .. } => format!("API token {id}"),
        Credentials::Password { username, .. } => format!("user {username} (password login)"),
    }
}

/// Where a cluster's credentials come from, as `credentials` resolves them.
fn credentials_source(cluster: &Cluster) -> String {
    if let Some(var) = token_variables(&cluster.name)
        .into_iter()
        .find(|v| std::env::var_os(v).is_some())
    {
        return format!("from ${var}");
    }
    let file = cluster
        .entry
        .as_ref()
        .and_then(|e| e.secrets_file.as_deref())
        .unwrap_or("secrets.sops.yaml");
    format!("from clusters/{}/{file} (SOPS, decrypted)", cluster.name)
}

async fn check_cluster(args: &Args, loaded: &Loaded, cluster: &Cluster, report: &mut Report) {
    // 1. The configuration.
    let graph = loaded
        .graphs
        .iter()
        .find(|(name, _)| *name == cluster.name)
        .map(|(_, g)| g);
    let Some(graph) = graph.filter(|_| cluster.valid) else {
        report.line(
            Status::Fail,
            "config",
            "the repository does not validate for this cluster (errors above; `proxops validate` lists them)",
        );
        return;
    };
    let pve = args.backend.backend == BackendKind::Pve;
    if pve && cluster.entry.is_none() {
        report.line(
            Status::Fail,
            "config",
            &format!(
                "no `pve.clusters.{}` entry in clusters/{}/config.yaml",
                cluster.name, cluster.name
            ),
        );
        return;
    }
    report.line(
        Status::Ok,
        "config",
        &format!("{} resources validate", cluster.resources.len()),
    );

    // 2. Credentials.
    let who = if pve {
        match credentials(cluster, Some(&loaded.dir)) {
            Ok(c) => {
                let who = identity(&c);
                report.line(
                    Status::Ok,
                    "credentials",
                    &format!("{who} {}", credentials_source(cluster)),
                );
                who
            }
            Err(e) => {
                report.line(Status::Fail, "credentials", &e.to_string());
                return;
            }
        }
    } else {
        report.line(
            Status::Ok,
            "credentials",
            "the embedded simulator's own token",
        );
        "the simulator's token".to_owned()
    };

    // 3. The endpoint and its certificate; 4. authentication.
    let conn = match args.backend.connect(loaded, cluster).await {
        Ok(c) => c,
        Err(e) => {
            report.line(Status::Fail, "endpoint", &e.to_string());
            return;
        }
    };
    let entry = cluster.entry.as_ref();
    let trust = if !pve {
        "certificate pinned".to_owned()
    } else if let Some(fp) = entry.and_then(|e| e.fingerprint.as_deref()) {
        format!("certificate matches the pinned fingerprint {fp}")
    } else if let Some(ca) = entry.and_then(|e| e.ca_file.as_deref()) {
        format!("certificate verified with the CA file {ca}")
    } else if conn.client.is_insecure() {
        "certificate NOT verified".to_owned()
    } else {
        "certificate verified with the system's trusted roots".to_owned()
    };
    let url = conn.client.base_url().to_owned();
    let answered = match conn.client.version().await {
        Ok(v) => {
            report.line(
                Status::Ok,
                "endpoint",
                &format!("{url} answers (PVE {}); {trust}", v.version),
            );
            true
        }
        Err(e) if e.kind() == ErrorKind::Unauthorized => {
            report.line(Status::Ok, "endpoint", &format!("{url} answers; {trust}"));
            false
        }
        Err(e) if e.kind() == ErrorKind::Tls => {
            report.line(
                Status::Fail,
                "endpoint",
                &format!("{url}: the server's certificate is refused: {e}"),
            );
            return shutdown(conn).await;
        }
        Err(e) => {
            report.line(
                Status::Fail,
                "endpoint",
                &format!("{url} does not answer: {e}"),
            );
            return shutdown(conn).await;
        }
    };
    for w in &conn.warnings {
        report.line(Status::Warn, "endpoint", w);
    }
    if !answered {
        report.line(
            Status::Fail,
            "auth",
            &format!("{who} is refused: check the token id and secret (or user and password)"),
        );
        return shutdown(conn).await;
    }
    report.line(Status::Ok, "auth", &format!("authenticated as {who}"));

    // 5. Privileges: the planner's reads and every planned action.
    let budget = loaded
        .repo
        .config
        .as_ref()
        .and_then(|c| c.reconcile.as_ref())
        .and_then(|r| r.prune_budget);
    let options = plan_options(cluster, budget);
    let plan = match plan_cluster(&conn.client, &cluster.name, graph, &options).await {
        Ok(p) => p,
        Err(e) => {
            let reason = match &e {
                proxops_engine::planner::PlanError::Inventory(pe) => match pe.missing_privilege() {
                    Some((path, privilege)) => {
                        format!("cannot plan: {privilege} on {path} is missing ({e})")
                    }
                    None => format!("cannot plan: {e}"),
                },
            };
            report.line(Status::Fail, "privileges", &reason);
            return shutdown(conn).await;
        }
    };
    let needs = privileges::plan_needs(&plan, graph, &options.drivers);
    let paths = privileges::paths(&needs);
    let held = match privileges::held(&conn.client, paths.iter().cloned()).await {
        Ok(h) => h,
        Err(e) => {
            report.line(
                Status::Fail,
                "privileges",
                &format!("cannot read the token's privileges (GET /access/permissions): {e}"),
            );
            return shutdown(conn).await;
        }
    };
    let missing = privileges::missing(&needs, &held);
    for m in &missing {
        let status = if m.optional {
            Status::Warn
        } else {
            Status::Fail
        };
        report.line(
            status,
            "privileges",
            &format!("missing {}: needed to {}", m.requirement, m.needed_by()),
        );
    }
    if missing.iter().all(|m| m.optional) {
        let requirements: std::collections::BTreeSet<String> =
            needs.iter().map(privileges::Need::requirement).collect();
        report.line(
            Status::Ok,
            "privileges",
            &format!(
                "the token holds all {} privileges, on {} ACL paths, that the planner's reads and the {} planned action(s) need",
                requirements.len(),
                paths.len(),
                plan.actions.len()
            ),
        );
    }
    shutdown(conn).await;
}

async fn shutdown(conn: proxops_engine::backend::Connection) {
    if let Some(sim) = conn.sim {
        let _ = sim.shutdown().await;
    }
}
