//! The in-process simulator backend (feature `sim`): a simulator per cluster seeded from the
//! cluster's config (nodes, PVE's default storages and the `simulation:` block, its release,
//! the resource mappings its VMs name, the guests of `simulation.guest-configs`).

use super::{ConnectError, Connection, credentials_from};
use crate::secrets::ClusterSecrets;
use proxops_model::config::{SimPveVersion, SimStorage};
use proxops_model::kinds::placement::allowed_nodes;
use proxops_model::settings::ClusterSettings;
use proxops_model::{Cluster, Registry, Spec};
use proxops_pve::{Credentials, PveClient, TlsVerification};
use proxops_pve_sim::{
    AclEntry, ApiToken, DeclaredStorage, Mapping, Mappings, PveVersion, SimConfig, SimError, State,
    Storage, TaskDurations, User, start,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Starts the simulator of `cluster` (its state kept in `state_file` when given) and connects
/// to it with the cluster's own credentials when they resolve, else the simulator's token.
pub(super) async fn connect(
    registry: &Registry,
    cluster: &Cluster,
    state_file: Option<&Path>,
    task_time: Duration,
    settings: ClusterSettings,
    secrets: ClusterSecrets,
    repo: Option<&Path>,
) -> Result<Connection, ConnectError> {
    let name = &cluster.name;
    let seed = SimSeed::default();
    let mut config = SimConfig::default()
        .with_state(seed_state(registry, cluster, &seed))
        .with_task_durations(TaskDurations::uniform(task_time))
        .with_offline_downloads(true);
    // A fresh simulator starts with the guests of the cluster's `guest-configs`; a
    // kept state already has them (and whatever was done to them since).
    if !state_file.is_some_and(Path::exists) {
        seed_cluster_guests(cluster, repo, &mut config.state)
            .map_err(|e| ConnectError::Sim(name.clone(), e))?;
    }
    if let Some(path) = state_file {
        config = config
            .with_state_file(path)
            .map_err(|e| ConnectError::Sim(name.clone(), e))?;
    }
    // The cluster config says which release the cluster runs, whatever a kept state
    // recorded.
    config.pve_version = sim_version(cluster, &seed);
    // The cluster's own credentials when they resolve, else the simulator's token.
    let configured = match credentials_from(&settings, &secrets) {
        Ok(c) => Some(c),
        Err(e) => {
            tracing::debug!(cluster = %name, reason = %e, "simulator: the cluster's credentials do not resolve; using a generated token");
            None
        }
    };
    match &configured {
        Some(Credentials::Token { id, secret }) => {
            config.token = ApiToken::new(id.clone(), secret.expose().to_owned());
        }
        Some(Credentials::Password { username, password }) => {
            config.users.push(User {
                userid: username.clone(),
                password: password.expose().to_owned(),
            });
            config.acl.push(AclEntry::admin(username));
        }
        None => {}
    }
    let sim = start(config)
        .await
        .map_err(|e| ConnectError::Sim(name.clone(), e))?;
    let fingerprint = sim
        .fingerprint
        .parse()
        .map_err(|e| ConnectError::Client(name.clone(), e))?;
    let credentials = match configured {
        Some(c) => c,
        None => Credentials::parse_token(&sim.token.to_string())
            .map_err(|e| ConnectError::Client(name.clone(), e))?,
    };
    let client = PveClient::builder(sim.base_url(), credentials)
        .tls(TlsVerification::Fingerprint(fingerprint))
        .build()
        .map_err(|e| ConnectError::Client(name.clone(), e))?;
    Ok(Connection {
        client,
        sim: Some(sim),
        warnings: Vec::new(),
        settings,
        secrets,
    })
}

/// Adds to `state` the guests of the cluster config's `simulation.guest-configs` directory
/// (`None`: it names none).
pub fn seed_cluster_guests(
    cluster: &Cluster,
    repo: Option<&Path>,
    state: &mut State,
) -> Result<Option<proxops_pve_sim::ConfigSeed>, SimError> {
    let Some(dir) = guest_configs_dir(cluster, repo) else {
        return Ok(None);
    };
    let seeded = proxops_pve_sim::seed_guest_configs(state, &dir)?;
    tracing::debug!(cluster = %cluster.name, guests = seeded.guests.len(), dir = %dir.display(), "simulator seeded from guest configs");
    Ok(Some(seeded))
}

/// The cluster config's `simulation.guest-configs` directory; a relative one is relative to
/// `clusters/<c>/` under `repo`.
fn guest_configs_dir(cluster: &Cluster, repo: Option<&Path>) -> Option<PathBuf> {
    let dir = cluster
        .entry
        .as_ref()?
        .simulation
        .as_ref()?
        .guest_configs
        .as_deref()?;
    let path = PathBuf::from(dir);
    Some(match repo {
        Some(repo) if path.is_relative() => repo.join("clusters").join(&cluster.name).join(path),
        _ => path,
    })
}

/// Storages and a PVE release for a simulator beyond what the cluster config's `simulation:`
/// says (`proxops sim --storage`, `--pve-version`; tests that run a repository whose config
/// does not describe its storages).
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct SimSeed {
    /// The release to answer as instead of the config's.
    pub pve_version: Option<PveVersion>,
    /// Storages added after the config's (one with a name already declared replaces it).
    pub storages: Vec<SimStorage>,
}

impl SimSeed {
    /// The release to answer as instead of the config's (`None`: the config's).
    pub fn with_pve_version(mut self, version: Option<PveVersion>) -> SimSeed {
        self.pve_version = version;
        self
    }

    /// Storages added after the config's.
    pub fn with_storages(mut self, storages: Vec<SimStorage>) -> SimSeed {
        self.storages = storages;
        self
    }
}

/// The PVE release a simulator of the cluster answers as: `seed`'s, else the cluster config's
/// `simulation.pve-version`, else 9.1.
pub fn sim_version(cluster: &Cluster, seed: &SimSeed) -> PveVersion {
    seed.pve_version.unwrap_or_else(|| {
        match cluster
            .entry
            .as_ref()
            .and_then(|e| e.simulation.as_ref())
            .and_then(|s| s.pve_version)
        {
            Some(SimPveVersion::V8_4) => PveVersion::V8_4,
            Some(SimPveVersion::V9_1) | None => PveVersion::default(),
        }
    })
}

/// A declared storage as the simulator keeps it.
pub fn declared_storage(s: &SimStorage) -> DeclaredStorage {
    DeclaredStorage {
        storage: Storage {
            storage: s.name.clone(),
            kind: s.kind.as_str().to_owned(),
            shared: s.shared.unwrap_or(false),
            content: s.content.iter().map(|c| c.as_str().to_owned()).collect(),
            ..Storage::default()
        },
        nodes: s.nodes.clone(),
    }
}

/// A simulator state with the cluster's nodes (its allowlist, plus any node a manifest names)
/// and the storages PVE has: a fresh install's defaults of the simulated release, plus the
/// storages the cluster config's `simulation.storages` and `seed` declare. No storage is made up
/// to fit the manifests: one that names a storage the cluster lacks, or puts content on one
/// that does not hold it, fails as it would on PVE.
pub fn seed_state(registry: &Registry, cluster: &Cluster, seed: &SimSeed) -> State {
    let mut nodes: Vec<String> = cluster
        .entry
        .as_ref()
        .map(|e| e.nodes.clone())
        .unwrap_or_default();
    for r in &cluster.resources {
        let Some(kind) = registry.get(r.kind) else {
            continue;
        };
        for n in kind.placement_view(&r.spec).nodes {
            if !nodes.iter().any(|x| *x == n) {
                nodes.push(n.into_owned());
            }
        }
    }
    nodes.sort();
    nodes.dedup();
    let configured = cluster
        .entry
        .as_ref()
        .and_then(|e| e.simulation.as_ref())
        .map(|s| s.storages.as_slice())
        .unwrap_or_default();
    let storages: Vec<DeclaredStorage> = configured
        .iter()
        .chain(&seed.storages)
        .map(declared_storage)
        .collect();
    let mut state = State::seeded(&cluster.name, &nodes, sim_version(cluster, seed), &storages);
    state.mappings = seed_mappings(cluster);
    seed_bridges(cluster, &mut state);
    state
}

/// The Linux bridges the cluster's guests name, on each node a guest may run on: an
/// administrator creates them in `/etc/network/interfaces` (a fresh install has only `vmbr0`),
/// and the simulator refuses to start a guest on a bridge its node lacks, as PVE does.
fn seed_bridges(cluster: &Cluster, state: &mut State) {
    for r in &cluster.resources {
        let (nodes, bridges): (Vec<String>, Vec<&str>) = match &r.spec {
            Spec::Vm(vm) => (
                allowed_nodes(vm.node.as_deref(), &vm.nodes),
                vm.networks.iter().map(|n| n.bridge.as_str()).collect(),
            ),
            Spec::Lxc(ct) => (
                allowed_nodes(ct.node.as_deref(), &ct.nodes),
                ct.networks.iter().map(|n| n.bridge.as_str()).collect(),
            ),
            _ => continue,
        };
        for n in state.nodes.iter_mut().filter(|n| nodes.contains(&n.node)) {
            for b in bridges.iter().filter(|b| !b.is_empty()) {
                if !n.bridges.iter().any(|x| x == b) {
                    n.bridges.push((*b).to_owned());
                }
            }
        }
    }
}

/// The PCI and USB resource mappings the cluster's VMs name and it does not declare, each with an entry for every node
/// the VM may run on: an administrator creates them in PVE (Datacenter > Resource Mappings), and the
/// simulator, having no hardware, maps each to a placeholder device (PCI `0000:00:00.0`, id
/// `0000:0000`).
fn seed_mappings(cluster: &Cluster) -> Mappings {
    let mut out = Mappings::default();
    // A mapping the repository declares (`kind: ResourceMapping`) is ProxOps's to create.
    let declared: std::collections::BTreeSet<&str> = cluster
        .resources
        .iter()
        .filter(|r| r.kind == "ResourceMapping")
        .map(|r| r.name())
        .collect();
    let add = |table: &mut BTreeMap<String, Mapping>, id: &str, entry: String| {
        let m = table.entry(id.to_owned()).or_default();
        if !m.map.contains(&entry) {
            m.map.push(entry);
        }
    };
    for r in &cluster.resources {
        let Spec::Vm(vm) = &r.spec else {
            continue;
        };
        let Some(hw) = &vm.hardware else {
            continue;
        };
        for node in allowed_nodes(vm.node.as_deref(), &vm.nodes) {
            let undeclared = |id: &&str| !declared.contains(id);
            for id in hw
                .pci_devices
                .iter()
                .filter_map(|d| d.mapping.as_deref())
                .filter(undeclared)
            {
                let entry = format!("id=0000:0000,node={node},path=0000:00:00.0");
                add(&mut out.pci, id, entry);
            }
            for id in hw
                .usb_devices
                .iter()
                .filter_map(|d| d.mapping.as_deref())
                .filter(undeclared)
            {
                add(&mut out.usb, id, format!("id=0000:0000,node={node}"));
            }
        }
    }
    out
}
