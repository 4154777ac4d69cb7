//! `proxops doctor`'s checks of one cluster, in order, each failure skipping what follows:
//! the configuration validates, the effective settings, the credentials resolve, the endpoint
//! answers with the expected certificate, the credentials authenticate, and the token holds
//! every privilege the planner's reads and the planned actions need. [`check`] streams each
//! [`DoctorLine`] to its caller as it is found (an endpoint can take its timeout to answer) and
//! returns the [`DoctorReport`]; rendering is the caller's.

use crate::backend::{Connection, credentials_from};
use crate::planner::{PlanError, plan_cluster};
use crate::privileges;
use crate::secrets::ClusterSecrets;
use proxops_graph::Graph;
use proxops_model::Cluster;
use proxops_model::config::AuthMethod;
use proxops_model::settings::{ClusterSettings, Tls};
use proxops_pve::{Credentials, ErrorKind};
use std::future::Future;

/// The outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Status {
    /// Information (an effective setting).
    Info,
    /// Passed.
    Ok,
    /// Passed with a caveat.
    Warn,
    /// Failed.
    Fail,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorLine {
    /// What it found.
    pub status: Status,
    /// The check: `config`, `setting`, `credentials`, `endpoint`, `auth`, `privileges`.
    pub check: &'static str,
    /// Why, in words.
    pub reason: String,
}

/// Every finding of one cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DoctorReport {
    /// The findings, in the order of the checks.
    pub lines: Vec<DoctorLine>,
}

impl DoctorReport {
    /// Whether a check failed.
    pub fn failed(&self) -> bool {
        self.lines.iter().any(|l| l.status == Status::Fail)
    }
}

/// What the checks of one cluster start from.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct DoctorInput<'a> {
    /// The cluster as loaded.
    pub cluster: &'a Cluster,
    /// Its graph (`None`: the repository does not validate for it).
    pub graph: Option<&'a Graph>,
    /// Its effective settings.
    pub settings: &'a ClusterSettings,
    /// Its SOPS secrets, as loaded.
    pub secrets: &'a ClusterSecrets,
    /// Whether it is checked against a real PVE (else the embedded simulator).
    pub pve: bool,
}

impl<'a> DoctorInput<'a> {
    /// The checks of `cluster` with these settings and secrets.
    pub fn new(
        cluster: &'a Cluster,
        graph: Option<&'a Graph>,
        settings: &'a ClusterSettings,
        secrets: &'a ClusterSecrets,
        pve: bool,
    ) -> Self {
        DoctorInput {
            cluster,
            graph,
            settings,
            secrets,
            pve,
        }
    }
}

/// The findings so far, each handed to the caller's sink as it is made.
struct Findings<'s> {
    report: DoctorReport,
    sink: &'s mut dyn FnMut(&DoctorLine),
}

impl Findings<'_> {
    fn line(&mut self, status: Status, check: &'static str, reason: impl Into<String>) {
        let line = DoctorLine {
            status,
            check,
            reason: reason.into(),
        };
        (self.sink)(&line);
        self.report.lines.push(line);
    }
}

/// Runs the checks of one cluster; `connect` opens the connection (only once the credentials
/// resolved), `sink` sees every line as it is found.
pub async fn check<F, Fut, E>(
    input: DoctorInput<'_>,
    connect: F,
    sink: &mut dyn FnMut(&DoctorLine),
) -> DoctorReport
where
    F: FnOnce() -> Fut,
    Fut: Future<Output = Result<Connection, E>>,
    E: std::fmt::Display,
{
    let mut f = Findings {
        report: DoctorReport::default(),
        sink,
    };
    if let Some(who) = prepare(&input, &mut f) {
        match connect().await {
            Ok(conn) => {
                if let Some(graph) = input.graph {
                    live_checks(&input, graph, &conn, &who, &mut f).await;
                }
                shutdown(conn).await;
            }
            Err(e) => f.line(Status::Fail, "endpoint", e.to_string()),
        }
    }
    f.report
}

/// Checks 1 and 2, the configuration and the credentials: who the credentials are, or `None`
/// after a failure.
fn prepare(input: &DoctorInput<'_>, f: &mut Findings<'_>) -> Option<String> {
    let cluster = input.cluster;
    if input.graph.is_none() || !cluster.valid {
        f.line(
            Status::Fail,
            "config",
            "the repository does not validate for this cluster (errors above; `proxops validate` lists them)",
        );
        return None;
    }
    if input.pve && cluster.entry.is_none() {
        f.line(
            Status::Fail,
            "config",
            format!(
                "no `pve.clusters.{}` entry in clusters/{}/config.yaml",
                cluster.name, cluster.name
            ),
        );
        return None;
    }
    f.line(
        Status::Ok,
        "config",
        format!("{} resources validate", cluster.resources.len()),
    );
    for (name, value) in input.settings.lines() {
        f.line(Status::Info, "setting", format!("{name} = {value}"));
    }
    match credentials_from(input.settings, input.secrets) {
        Ok(c) => {
            let who = identity(&c);
            let source = credentials_source(input.settings);
            f.line(Status::Ok, "credentials", format!("{who} {source}"));
            Some(who)
        }
        Err(e) if input.pve => {
            f.line(Status::Fail, "credentials", e.to_string());
            None
        }
        Err(_) => {
            f.line(
                Status::Ok,
                "credentials",
                "the embedded simulator's own token (the cluster's credentials do not resolve)",
            );
            Some("the simulator's token".to_owned())
        }
    }
}

/// Checks 3 to 5 on an open connection: endpoint and certificate, authentication, privileges.
async fn live_checks(
    input: &DoctorInput<'_>,
    graph: &Graph,
    conn: &Connection,
    who: &str,
    f: &mut Findings<'_>,
) {
    let trust = match &input.settings.tls.value {
        _ if !input.pve => "certificate pinned".to_owned(),
        Tls::Fingerprint(fp) => format!("certificate matches the pinned fingerprint {fp}"),
        Tls::CaFile(ca) => format!("certificate verified with the CA file {ca}"),
        Tls::Insecure => "certificate NOT verified".to_owned(),
        Tls::System => "certificate verified with the system's trusted roots".to_owned(),
    };
    let url = conn.client.base_url().to_owned();
    let answered = match conn.client.version().await {
        Ok(v) => {
            let text = format!("{url} answers (PVE {}); {trust}", v.version);
            f.line(Status::Ok, "endpoint", text);
            true
        }
        Err(e) if e.kind() == ErrorKind::Unauthorized => {
            f.line(Status::Ok, "endpoint", format!("{url} answers; {trust}"));
            false
        }
        Err(e) if e.kind() == ErrorKind::Tls => {
            let text = format!("{url}: the server's certificate is refused: {e}");
            return f.line(Status::Fail, "endpoint", text);
        }
        Err(e) => {
            return f.line(
                Status::Fail,
                "endpoint",
                format!("{url} does not answer: {e}"),
            );
        }
    };
    for w in &conn.warnings {
        f.line(Status::Warn, "endpoint", w.clone());
    }
    if !answered {
        let text =
            format!("{who} is refused: check the token id and secret (or user and password)");
        return f.line(Status::Fail, "auth", text);
    }
    f.line(Status::Ok, "auth", format!("authenticated as {who}"));
    privilege_check(input, graph, conn, f).await;
}

/// Check 5: the privileges the planner's reads and every planned action need, on their ACL
/// paths. Only a password login as root@pam skips PVE's checks; every token is checked.
async fn privilege_check(
    input: &DoctorInput<'_>,
    graph: &Graph,
    conn: &Connection,
    f: &mut Findings<'_>,
) {
    let cluster = input.cluster;
    let root = credentials_from(input.settings, input.secrets)
        .map(|c| privileges::is_root(&c))
        .unwrap_or(false);
    // Planned as `apply` would, an API token's create included: where its secret would be
    // written does not matter, since the doctor never executes the plan.
    let options = conn
        .plan_options(cluster)
        .with_token_files(Some(std::path::PathBuf::from(".")));
    let plan = match plan_cluster(&conn.client, &cluster.name, graph, &options).await {
        Ok(p) => p,
        Err(e) => return f.line(Status::Fail, "privileges", plan_failure(&e)),
    };
    // The VNets' zones, which the bridges' SDN.Use paths name.
    let net = match privileges::Network::read(&conn.client).await {
        Ok(n) => n,
        Err(e) => {
            f.line(
                Status::Warn,
                "privileges",
                format!("cannot read the SDN VNets (GET /cluster/sdn/vnets), every bridge is taken as a plain one of zone localnetwork: {e}"),
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
            let text = format!("cannot read the token's privileges (GET /access/permissions): {e}");
            return f.line(Status::Fail, "privileges", text);
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
        f.line(status, "privileges", line);
    }
    if missing.iter().all(|m| m.optional) {
        let requirements: std::collections::BTreeSet<String> = needs
            .iter()
            .filter(|n| n.root_only.is_none())
            .map(privileges::Need::requirement)
            .collect();
        f.line(
            Status::Ok,
            "privileges",
            format!(
                "the token holds all {} privileges, on {} ACL paths, that the planner's reads and the {} planned action(s) need",
                requirements.len(),
                paths.len(),
                plan.actions.len()
            ),
        );
    }
}

/// Why planning failed, naming the missing privilege when PVE said which.
fn plan_failure(e: &PlanError) -> String {
    match e {
        PlanError::Inventory(pe) | PlanError::Version(pe) => match pe.missing_privilege() {
            Some((path, privilege)) => {
                format!("cannot plan: {privilege} on {path} is missing ({e})")
            }
            None => format!("cannot plan: {e}"),
        },
    }
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

async fn shutdown(conn: Connection) {
    #[cfg(feature = "sim")]
    if let Some(sim) = conn.sim {
        let _ = sim.shutdown().await;
    }
    #[cfg(not(feature = "sim"))]
    drop(conn);
}
