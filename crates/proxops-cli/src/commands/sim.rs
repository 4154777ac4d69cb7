//! `proxops sim`.

use crate::error::CliError;
use proxops_engine::backend::seed_state;
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use proxops_pve_sim::{AclEntry, ApiToken, SimConfig, State, User, start};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run the Proxmox VE API simulator as an HTTPS server, until Ctrl-C or SIGTERM.
///
/// It prints its URL, its certificate's SHA-256 fingerprint (pin it in a cluster's
/// `fingerprint:`) and the API token it accepts. With `--state FILE` the cluster state survives
/// restarts; with `--seed-repo DIR` a fresh state gets the nodes of a cluster's allowlist, with
/// `local` (dir) and `local-lvm` (lvmthin) on each, plus every storage its manifests use and
/// every PCI/USB resource mapping its VMs name.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8006")]
    pub listen: SocketAddr,
    /// Load the cluster state from FILE if it exists, and save every change to it.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// The API token to accept, `USER@REALM!ID=SECRET` (default: a fresh random one).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "PROXOPS_SIM_TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
    /// Also accept ticket logins of `root@pam` with this password.
    #[arg(
        long,
        value_name = "PASSWORD",
        env = "PROXOPS_SIM_PASSWORD",
        hide_env_values = true
    )]
    pub password: Option<String>,
    /// Seed nodes, storages and resource mappings from this repository's cluster config and
    /// manifests.
    #[arg(long, value_name = "DIR")]
    pub seed_repo: Option<PathBuf>,
    /// Create guests from PVE config files laid out as `/etc/pve` holds them
    /// (`DIR/nodes/<node>/qemu-server/<vmid>.conf`, `DIR/nodes/<node>/lxc/<vmid>.conf`; files in
    /// `DIR/qemu-server/` or `DIR/lxc/` go to the first node), with the volumes they name. Only
    /// a fresh state is seeded: an existing `--state` file is loaded as it is.
    #[arg(long, value_name = "DIR")]
    pub seed_guest_configs: Option<PathBuf>,
    /// download-url makes up the files instead of fetching the URLs (for machines without a
    /// network; checksums are then not checked).
    #[arg(long)]
    pub offline_downloads: bool,
    /// The cluster to seed from (needed when the repository has several).
    #[arg(long, value_name = "C", requires = "seed_repo")]
    pub cluster: Option<String>,
    /// Also accept this API token (repeatable), `USER@REALM!ID=SECRET`; it holds only what
    /// `--acl` grants it (or its user).
    #[arg(long = "extra-token", value_name = "TOKEN")]
    pub extra_tokens: Vec<String>,
    /// Grant privileges (repeatable): `PRINCIPAL:PATH:PRIV[,PRIV...]`, e.g.
    /// `ops@pve!ci:/vms:VM.Audit,VM.PowerMgmt`; `*` grants every privilege. A grant holds on the
    /// path and below it.
    #[arg(long = "acl", value_name = "PRINCIPAL:PATH:PRIVS")]
    pub acl: Vec<String>,
    /// How long every task (create, clone, download, start, ...) runs, e.g. `200ms` (the
    /// default) or `5s` to watch an apply, or interrupt one, at leisure. It sets the time scale
    /// (a task at PVE speed is 10 s): pveproxy's 30 s limit on a call becomes 3 times this, and a
    /// synchronous call allocating or importing storage works this long per volume.
    #[arg(long, value_name = "DURATION", value_parser = task_time)]
    pub task_time: Option<std::time::Duration>,
    /// How often guest stats in `/cluster/resources` (status, template, name, memory) are
    /// refreshed, e.g. `10s` (PVE's pvestatd interval, the default) or `0s` for always current.
    #[arg(long, value_name = "DURATION", value_parser = task_time)]
    pub stats_interval: Option<std::time::Duration>,
}

fn task_time(text: &str) -> Result<std::time::Duration, String> {
    proxops_model::config::parse_duration(text)
        .ok_or_else(|| format!("`{text}` is not a duration such as 200ms or 5s"))
}

/// One `--acl` value.
fn acl_entry(text: &str) -> Result<AclEntry, CliError> {
    let bad = || {
        CliError::usage(
            format!("invalid --acl `{text}`"),
            Some(
                "the form is PRINCIPAL:PATH:PRIV[,PRIV...], e.g. ops@pve!ci:/vms/100:VM.Audit"
                    .into(),
            ),
        )
    };
    let mut parts = text.splitn(3, ':');
    let (Some(principal), Some(path), Some(privs)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad());
    };
    let privs: Vec<String> = privs
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    if !principal.contains('@') || !path.starts_with('/') || privs.is_empty() {
        return Err(bad());
    }
    Ok(AclEntry {
        principal: principal.to_owned(),
        path: path.to_owned(),
        privs,
    })
}

/// Runs `proxops sim`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    let mut config = SimConfig {
        listen: args.listen,
        offline_downloads: args.offline_downloads,
        ..SimConfig::default()
    };
    if let Some(t) = args.task_time {
        config.task_durations = proxops_pve_sim::TaskDurations::uniform(t);
    }
    if let Some(t) = args.stats_interval {
        config.stats_interval = t;
    }
    if let Some(dir) = &args.seed_repo {
        config.state = seed(dir, args.cluster.as_deref())?;
    }
    if let Some(dir) = &args.seed_guest_configs {
        if config.state.nodes.is_empty() {
            config.state = proxops_pve_sim::State::demo();
        }
        let seeded = proxops_pve_sim::seed_guest_configs(&mut config.state, dir)
            .map_err(|e| CliError::usage(e.to_string(), None))?;
        eprintln!(
            "seeded {} guest(s) from {}",
            seeded.guests.len(),
            dir.display()
        );
        for s in &seeded.storages_added {
            eprintln!("  storage added for the configs: {s}");
        }
        for w in &seeded.warnings {
            eprintln!("  warning: {w}");
        }
    }
    if let Some(path) = &args.state {
        config = config.with_state_file(path).map_err(|e| {
            CliError::usage(
                format!("cannot use state file {}: {e}", path.display()),
                None,
            )
        })?;
    }
    if let Some(token) = &args.token {
        config.token = token.parse::<ApiToken>().map_err(|e| {
            CliError::usage(
                format!("invalid --token: {e}"),
                Some("the form is USER@REALM!TOKENID=SECRET, e.g. root@pam!ci=s3cret".into()),
            )
        })?;
    }
    for token in &args.extra_tokens {
        config
            .extra_tokens
            .push(token.parse::<ApiToken>().map_err(|e| {
                CliError::usage(
                    format!("invalid --extra-token: {e}"),
                    Some("the form is USER@REALM!TOKENID=SECRET".into()),
                )
            })?);
    }
    config.acl = args
        .acl
        .iter()
        .map(|a| acl_entry(a))
        .collect::<Result<_, _>>()?;
    if let Some(password) = &args.password {
        config.users.push(User {
            userid: "root@pam".into(),
            password: password.clone(),
        });
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Io(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let sim = start(config)
            .await
            .map_err(|e| CliError::Io(format!("cannot start the simulator: {e}")))?;
        // Write the (seeded or loaded) state at once, so the file exists once the URL is out.
        sim.with_state(|_| ());
        let mut out = std::io::stdout().lock();
        let printed = writeln!(out, "url: {}", sim.base_url())
            .and_then(|()| writeln!(out, "fingerprint: {}", sim.fingerprint))
            .and_then(|()| writeln!(out, "token: {}", sim.token))
            .and_then(|()| out.flush());
        drop(out);
        printed.map_err(|e| CliError::Io(e.to_string()))?;
        shutdown_signal()
            .await
            .map_err(|e| CliError::Io(format!("cannot wait for a signal: {e}")))?;
        sim.shutdown()
            .await
            .map_err(|e| CliError::Io(format!("shutdown failed: {e}")))
    })?;
    Ok(ExitCode::SUCCESS)
}

/// Ctrl-C, or SIGTERM from a service manager.
async fn shutdown_signal() -> std::io::Result<()> {
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            r = tokio::signal::ctrl_c() => r,
            _ = term.recv() => Ok(()),
        }
    }
    #[cfg(not(unix))]
    {
        tokio::signal::ctrl_c().await
    }
}

/// A simulator state with the nodes of one cluster and the storages and mappings its manifests
/// use.
fn seed(dir: &std::path::Path, cluster: Option<&str>) -> Result<State, CliError> {
    let source = FsSource::new(dir).map_err(|e| {
        CliError::usage(
            format!("cannot open repository {}: {e}", dir.display()),
            None,
        )
    })?;
    let registry = Registry::builtin();
    let options = LoadOptions {
        clusters: cluster.map(|c| vec![c.to_owned()]).unwrap_or_default(),
    };
    let repo = load_repository(&source, &registry, &options)?;
    let names: Vec<&str> = repo.clusters.iter().map(|c| c.name.as_str()).collect();
    let [chosen] = repo.clusters.as_slice() else {
        return Err(CliError::usage(
            format!(
                "the repository has {} clusters; say which to seed from",
                names.len()
            ),
            Some(format!("add --cluster with one of: {}", names.join(", "))),
        ));
    };
    Ok(seed_state(&registry, chosen))
}
