//! `proxops sim`.

use crate::error::CommandError;
use proxops_engine::backend::{
    SimSeed, declared_storage, seed_cluster_guests, seed_state, sim_version,
};
use proxops_model::config::{
    ContentType, SimPveVersion, SimStorage, SimulationConfig, StorageType,
};
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use proxops_pve_sim::{AclEntry, ApiToken, PveVersion, SimConfig, State, User, start};
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run the Proxmox VE API simulator as an HTTPS server, until Ctrl-C or SIGTERM.
///
/// It prints its URL, its certificate's SHA-256 fingerprint (pin it in a cluster's
/// `fingerprint:`) and the API token it accepts. It answers as PVE 9.1, or 8.4 with
/// `--pve-version 8.4`. With `--state FILE` the cluster state survives restarts; with
/// `--seed-repo DIR` a fresh state gets the nodes of a cluster's allowlist, each with the
/// storages of a fresh PVE install (`local` dir, `local-lvm` lvmthin) plus those the cluster
/// config's `simulation.storages` and `--storage` declare, and every PCI/USB resource mapping
/// its VMs name; without it, node `pve1` with them.
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
    /// Also accept this API token (repeatable), `USER@REALM!ID=SECRET`. It is
    /// privilege-separated, PVE's default: it holds what `--acl` grants both it and its user (a
    /// token of root@pam: what is granted to the token).
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
    /// How long a started guest runs before its QEMU guest agent answers and its DHCP
    /// addresses appear (a container's too), e.g. `2s` (default: 3 times the task time, PVE's
    /// 30 s of boot on the time scale).
    #[arg(long, value_name = "DURATION", value_parser = task_time)]
    pub agent_start: Option<std::time::Duration>,
    /// The PVE release to answer as: `8.4` or `9.1` (default: the release a kept `--state`
    /// records, else the seed cluster's `simulation.pve-version`, else 9.1). Its API schema
    /// checks the parameters; its rules apply (plain `.tar` templates only from 9.1).
    #[arg(long, value_name = "VERSION", value_parser = pve_version)]
    pub pve_version: Option<PveVersion>,
    /// Add a storage to every node (repeatable): `NAME:TYPE:CONTENT[,CONTENT...]`, e.g.
    /// `vm_disks:lvmthin:images,rootdir`. One named like a default (`local`, `local-lvm`) or a
    /// configured one replaces it.
    #[arg(long = "storage", value_name = "NAME:TYPE:CONTENT")]
    pub storages: Vec<String>,
}

fn pve_version(text: &str) -> Result<PveVersion, String> {
    text.parse()
}

/// One `--storage` value, checked as a cluster config's `simulation.storages` entry is.
fn storage_flag(text: &str) -> Result<SimStorage, CommandError> {
    let bad = |why: String| {
        CommandError::usage(
            format!("invalid --storage `{text}`: {why}"),
            Some(
                "the form is NAME:TYPE:CONTENT[,CONTENT...], e.g. vm_disks:lvmthin:images,rootdir"
                    .into(),
            ),
        )
    };
    let mut parts = text.splitn(3, ':');
    let (Some(name), Some(kind), Some(content)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("it needs a name, a type and content types".into()));
    };
    let word = |w: &str| serde_json::Value::String(w.trim().to_owned());
    let kind: StorageType = serde_json::from_value(word(kind)).map_err(|_| {
        bad(format!(
            "`{kind}` is not a PVE storage type (dir, lvmthin, nfs, zfspool, ...)"
        ))
    })?;
    let content = content
        .split(',')
        .filter(|c| !c.trim().is_empty())
        .map(|c| {
            serde_json::from_value::<ContentType>(word(c)).map_err(|_| {
                bad(format!(
                    "`{c}` is not a content type (images, rootdir, vztmpl, iso, backup, snippets, import)"
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(SimStorage::new(name, kind, content))
}

/// The `--storage` values, each valid for the simulated release.
fn storage_flags(args: &Args, version: PveVersion) -> Result<Vec<SimStorage>, CommandError> {
    let storages = args
        .storages
        .iter()
        .map(|s| storage_flag(s))
        .collect::<Result<Vec<_>, _>>()?;
    let problems = SimulationConfig::default()
        .with_pve_version(Some(match version {
            PveVersion::V8_4 => SimPveVersion::V8_4,
            PveVersion::V9_1 => SimPveVersion::V9_1,
        }))
        .with_storages(storages.clone())
        .check(&[]);
    match problems.first() {
        Some(p) => Err(CommandError::usage(
            format!("invalid --storage: {}", p.message),
            p.help.clone(),
        )),
        None => Ok(storages),
    }
}

fn task_time(text: &str) -> Result<std::time::Duration, String> {
    proxops_model::config::parse_duration(text)
        .ok_or_else(|| format!("`{text}` is not a duration such as 200ms or 5s"))
}

/// One `--acl` value.
fn acl_entry(text: &str) -> Result<AclEntry, CommandError> {
    let bad = || {
        CommandError::usage(
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
        propagate: true,
    })
}

/// `--task-time` sets the scale (the agent's start among it), `--agent-start` then its own.
fn durations(
    default: proxops_pve_sim::TaskDurations,
    task_time: Option<std::time::Duration>,
    agent_start: Option<std::time::Duration>,
) -> proxops_pve_sim::TaskDurations {
    let d = task_time.map_or(default, proxops_pve_sim::TaskDurations::uniform);
    match agent_start {
        Some(t) => d.with_agent_start(t),
        None => d,
    }
}

/// Runs `proxops sim`.
pub fn run(args: &Args) -> Result<ExitCode, CommandError> {
    let mut config = SimConfig::default()
        .with_listen(args.listen)
        .with_offline_downloads(args.offline_downloads);
    config.task_durations = durations(config.task_durations, args.task_time, args.agent_start);
    if let Some(t) = args.stats_interval {
        config.stats_interval = t;
    }
    (config.state, config.pve_version) = match &args.seed_repo {
        Some(dir) => seed(dir, args)?,
        None => {
            let version = args.pve_version.unwrap_or_default();
            let storages: Vec<_> = storage_flags(args, version)?
                .iter()
                .map(declared_storage)
                .collect();
            let state = State::seeded("sim", &["pve1".to_owned()], version, &storages);
            (state, version)
        }
    };
    if let Some(dir) = &args.seed_guest_configs {
        if config.state.nodes.is_empty() {
            config.state = proxops_pve_sim::State::demo();
        }
        let seeded = proxops_pve_sim::seed_guest_configs(&mut config.state, dir)
            .map_err(|e| CommandError::usage(e.to_string(), None))?;
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
            CommandError::usage(
                format!("cannot use state file {}: {e}", path.display()),
                None,
            )
        })?;
    }
    // A release given on the command line wins over a kept state's (an upgrade, say).
    if let Some(v) = args.pve_version {
        config.pve_version = v;
    }
    if let Some(token) = &args.token {
        config.token = token.parse::<ApiToken>().map_err(|e| {
            CommandError::usage(
                format!("invalid --token: {e}"),
                Some("the form is USER@REALM!TOKENID=SECRET, e.g. root@pam!ci=s3cret".into()),
            )
        })?;
    }
    for token in &args.extra_tokens {
        config
            .extra_tokens
            .push(token.parse::<ApiToken>().map_err(|e| {
                CommandError::usage(
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
        .map_err(|e| CommandError::internal("cannot start the async runtime").with_source(e))?;
    runtime.block_on(async {
        let sim = start(config)
            .await
            .map_err(|e| CommandError::user("cannot start the simulator").with_source(e))?;
        // Write the (seeded or loaded) state at once, so the file exists once the URL is out.
        sim.with_state(|_| ());
        let mut out = std::io::stdout().lock();
        let printed = writeln!(out, "url: {}", sim.base_url())
            .and_then(|()| writeln!(out, "fingerprint: {}", sim.fingerprint))
            .and_then(|()| writeln!(out, "token: {}", sim.token))
            .and_then(|()| out.flush());
        drop(out);
        printed.map_err(CommandError::output)?;
        shutdown_signal()
            .await
            .map_err(|e| CommandError::internal("cannot wait for a signal").with_source(e))?;
        sim.shutdown()
            .await
            .map_err(|e| CommandError::internal("the simulator's shutdown failed").with_source(e))
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

/// A simulator state with the nodes of one cluster, PVE's default storages and the declared
/// ones, and the release it runs.
fn seed(dir: &std::path::Path, args: &Args) -> Result<(State, PveVersion), CommandError> {
    let cluster = args.cluster.as_deref();
    let source = FsSource::new(dir).map_err(|e| {
        CommandError::usage(
            format!("cannot open repository {}: {e}", dir.display()),
            None,
        )
    })?;
    let registry = Registry::builtin();
    let options = LoadOptions::default().with_clusters(cluster);
    let repo = load_repository(&source, &registry, &options)?;
    let names: Vec<&str> = repo.clusters.iter().map(|c| c.name.as_str()).collect();
    let [chosen] = repo.clusters.as_slice() else {
        return Err(CommandError::usage(
            format!(
                "the repository has {} clusters; say which to seed from",
                names.len()
            ),
            Some(format!("add --cluster with one of: {}", names.join(", "))),
        ));
    };
    let mut seed = SimSeed::default().with_pve_version(args.pve_version);
    let version = sim_version(chosen, &seed);
    seed.storages = storage_flags(args, version)?;
    let mut state = seed_state(&registry, chosen, &seed);
    if let Some(seeded) = seed_cluster_guests(chosen, Some(dir), &mut state)
        .map_err(|e| CommandError::usage(e.to_string(), None))?
    {
        eprintln!(
            "seeded {} guest(s) from the cluster's simulation.guest-configs",
            seeded.guests.len()
        );
    }
    Ok((state, version))
}

#[cfg(test)]
mod tests {
    use super::durations;
    use proxops_pve_sim::TaskDurations;
    use std::time::Duration;

    #[test]
    fn the_agent_start_follows_the_task_time_unless_given() {
        let ms = Duration::from_millis;
        let default = TaskDurations::default();
        assert_eq!(durations(default.clone(), None, None), default);
        assert_eq!(
            durations(default.clone(), Some(ms(50)), None).agent_start,
            ms(150)
        );
        let both = durations(default, Some(ms(50)), Some(ms(7)));
        assert_eq!((both.default, both.agent_start), (ms(50), ms(7)));
    }
}
