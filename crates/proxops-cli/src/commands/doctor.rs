//! `proxops doctor`.

use crate::error::CommandError;
use crate::session::{BackendKind, LiveArgs, Loaded, load, runtime};
use proxops_engine::backend::credentials_from;
use proxops_engine::planner::plan_cluster;
use proxops_engine::privileges;
use proxops_engine::secrets::ClusterSecrets;
use proxops_model::Cluster;
use proxops_model::config::AuthMethod;
use proxops_model::settings::{ClusterSettings, Tls};
use proxops_pve::{Credentials, ErrorKind};
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

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    Info,
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
            Status::Info => "info",
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
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let dir = args.live.repo.resolve()?;
    let loaded = load(&dir, &args.live.repo.clusters)?;
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

/// Where a cluster's secret credential comes from.
fn credentials_source(settings: &ClusterSettings) -> String {
    let c = &settings.credentials;
    let secret = match c.auth.value {
        AuthMethod::Ticket => c.password.as_ref(),
        AuthMethod::Token => c.token_value.as_ref().or(c.token.as_ref()),
    };
    secret.map_or_else(String::new, |s| format!("from {}", s.origin))
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
    let pve = args.live.backend.backend == BackendKind::Pve;
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

    // The effective settings, each with its layer.
    let settings = loaded.settings(cluster);
    for (name, value) in settings.lines() {
        report.line(Status::Info, "setting", &format!("{name} = {value}"));
    }

    // 2. Credentials.
    let secrets = ClusterSecrets::load(Some(&loaded.dir), cluster);
    // Only a password login as root@pam skips PVE's checks; every token is checked.
    let mut root = false;
    let who = match credentials_from(&settings, &secrets) {
        Ok(c) => {
            root = privileges::is_root(&c);
            let who = identity(&c);
            report.line(
                Status::Ok,
                "credentials",
                &format!("{who} {}", credentials_source(&settings)),
            );
            who
        }
        Err(e) if pve => {
            report.line(Status::Fail, "credentials", &e.to_string());
            return;
        }
        Err(_) => {
            report.line(
                Status::Ok,
                "credentials",
                "the embedded simulator's own token (the cluster's credentials do not resolve)",
            );
            "the simulator's token".to_owned()
        }
    };

    // 3. The endpoint and its certificate; 4. authentication.
    let conn = match args.live.backend.connect(loaded, cluster).await {
        Ok(c) => c,
        Err(e) => {
            report.line(Status::Fail, "endpoint", &e.to_string());
            return;
        }
    };
    let trust = match &settings.tls.value {
        _ if !pve => "certificate pinned".to_owned(),
        Tls::Fingerprint(fp) => format!("certificate matches the pinned fingerprint {fp}"),
        Tls::CaFile(ca) => format!("certificate verified with the CA file {ca}"),
        Tls::Insecure => "certificate NOT verified".to_owned(),
        Tls::System => "certificate verified with the system's trusted roots".to_owned(),
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
    let options = conn.plan_options(cluster);
    let plan = match plan_cluster(&conn.client, &cluster.name, graph, &options).await {
        Ok(p) => p,
        Err(e) => {
            let reason = match &e {
                proxops_engine::planner::PlanError::Inventory(pe)
                | proxops_engine::planner::PlanError::Version(pe) => match pe.missing_privilege() {
                    Some((path, privilege)) => {
                        format!("cannot plan: {privilege} on {path} is missing ({e})")
                    }
                    None => format!("cannot plan: {e}"),
                },
                _ => format!("cannot plan: {e}"),
            };
            report.line(Status::Fail, "privileges", &reason);
            return shutdown(conn).await;
        }
    };
    // The VNets' zones, which the bridges' SDN.Use paths name.
    let net = match privileges::Network::read(&conn.client).await {
        Ok(n) => n,
        Err(e) => {
            report.line(
                Status::Warn,
                "privileges",
                &format!("cannot read the SDN VNets (GET /cluster/sdn/vnets), every bridge is taken as a plain one of zone localnetwork: {e}"),
            );
            privileges::Network::default()
        }
    };
    // What some privileges are depends on the release (`VM.Monitor` became `VM.GuestAgent.*`).
    let major = conn
        .client
        .version()
        .await
        .ok()
        .and_then(|v| v.version.split('.').next()?.parse::<u32>().ok());
    let needs = privileges::plan_needs(&plan, graph, &options.drivers, &net, major);
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
    let missing = privileges::missing(&needs, &held, root);
    for m in &missing {
        let status = if m.optional {
            Status::Warn
        } else {
            Status::Fail
        };
        let line = if m.root_only {
            format!("{}: needed to {}", m.requirement, m.needed_by())
        } else {
            format!("missing {}: needed to {}", m.requirement, m.needed_by())
        };
        report.line(status, "privileges", &line);
    }
    if missing.iter().all(|m| m.optional) {
        let requirements: std::collections::BTreeSet<String> = needs
            .iter()
            .filter(|n| n.root_only.is_none())
            .map(privileges::Need::requirement)
            .collect();
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
