//! The simulated cluster: [`State`] holds [`Node`]s with their [`Storage`]s, [`Guest`]s with
//! config key/values as PVE stores them, storage [`Volume`]s and [`Task`]s. It is plain serde
//! data: dumped to and loaded from JSON, and a seed is simply a partial state (every field has a
//! default), e.g. `{"nodes":[{"node":"pve1","storages":[{"storage":"local","type":"dir",
//! "content":["iso","vztmpl"]}]}]}`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::SimError;
use crate::version::PveVersion;

/// The whole simulated cluster.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct State {
    /// Cluster name (`/cluster/status`).
    pub cluster_name: String,
    /// Nodes and their storages.
    pub nodes: Vec<Node>,
    /// Guests by VMID (the VMID namespace is cluster-wide).
    pub guests: BTreeMap<u32, Guest>,
    /// Storage content.
    pub volumes: Vec<Volume>,
    /// Tasks, oldest first.
    pub tasks: Vec<Task>,
    /// Last process id handed out to a task.
    pub last_pid: u32,
    /// The guest stats `/cluster/resources` serves, as pvestatd last broadcast them. Kept in
    /// the state so that another process reading the same state file within the refresh
    /// interval serves the same stale snapshot.
    pub stats: Stats,
    /// HA resources by sid (`vm:100`, `ct:101`), as `/etc/pve/ha/resources.cfg` holds them.
    pub ha_resources: BTreeMap<String, HaResource>,
    /// HA groups by name (`/etc/pve/ha/groups.cfg`, PVE 8; PVE 9 migrates them to rules).
    pub ha_groups: BTreeMap<String, HaGroup>,
    /// HA rules by id (`/etc/pve/ha/rules.cfg`, PVE 9: node and resource affinity).
    pub ha_rules: BTreeMap<String, HaRule>,
    /// Cluster resource mappings (`/etc/pve/mapping/pci.cfg` and `usb.cfg`).
    pub mappings: Mappings,
    /// API tokens created through the API (`user.cfg` `token:` lines, secrets in
    /// `priv/token.cfg`), by `USER@REALM!TOKENID`; the configured ones are `SimConfig`'s.
    pub tokens: BTreeMap<String, UserToken>,
    /// SDN VNets by name (`/etc/pve/sdn/vnets.cfg`); a bridge not listed is a plain Linux
    /// bridge of the `localnetwork` zone.
    pub vnets: BTreeMap<String, Vnet>,
    /// The SDN section config files and running configuration written through the API
    /// (`/cluster/sdn/...`); `vnets` are the running VNets the nodes have.
    #[serde(skip_serializing_if = "crate::sdn::Sdn::is_untouched")]
    pub sdn: crate::sdn::Sdn,
    /// The PVE version the cluster runs. [`crate::start`] sets it from
    /// [`crate::SimConfig::pve_version`]; a state file records it, so that a restart without a
    /// version of its own keeps the cluster's.
    pub pve_version: PveVersion,
    /// Resource pools by id (`user.cfg`); a guest's membership is its `pool`.
    pub pools: BTreeMap<String, Pool>,
    /// vzdump jobs by id (`jobs.cfg`): their options as given.
    pub backup_jobs: BTreeMap<String, BTreeMap<String, String>>,
    /// HA guests the CRM was asked to migrate and has not moved yet: vmid -> target node.
    pub ha_migrations: BTreeMap<u32, String>,
    /// The users (`user.cfg` `user:` lines, their passwords as `shadow.cfg` keeps them hashed):
    /// [`crate::SimConfig::users`] when the simulator starts, then what `POST`, `PUT` and
    /// `DELETE /access/users` change.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub users: BTreeMap<String, UserAccount>,
    /// The ACL (`user.cfg` `acl:` lines): [`crate::SimConfig::acl`] when the simulator starts,
    /// then what `PUT /access/acl` grants and revokes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub acl: Vec<crate::config::AclEntry>,
    /// The firewall configuration (`/etc/pve/firewall/cluster.fw` and `<vmid>.fw`).
    #[serde(skip_serializing_if = "crate::firewall::Firewall::is_empty")]
    pub firewall: crate::firewall::Firewall,
    /// The groups (`user.cfg` `group:` lines) by id, with their members; a user's groups are
    /// the groups listing it.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub groups: BTreeMap<String, AccessGroup>,
    /// The roles made through the API (`user.cfg` `role:` lines) by id, with their privileges;
    /// the built-in ones are the simulator's `roles` module's.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub roles: BTreeMap<String, std::collections::BTreeSet<String>>,
}

/// One group (pve-access-control `user.cfg` `group:` lines).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct AccessGroup {
    /// Its comment.
    pub comment: Option<String>,
    /// Its members (`user@realm`).
    pub users: std::collections::BTreeSet<String>,
}

/// One user (pve-access-control `user.cfg`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UserAccount {
    /// Whether the user may log in (`enable`, PVE's default 1).
    pub enable: bool,
    /// Account expiry, seconds since the epoch (0: never).
    pub expire: u64,
    /// First name.
    pub firstname: Option<String>,
    /// Last name.
    pub lastname: Option<String>,
    /// E-mail.
    pub email: Option<String>,
    /// Comment.
    pub comment: Option<String>,
    /// Two-factor keys (`keys`), as given.
    pub keys: Option<String>,
    /// The password's SHA-256, hex (none: the user cannot log in with a password).
    pub password_sha256: Option<String>,
}

impl UserAccount {
    /// The hash a password is kept as.
    pub fn hash(password: &str) -> String {
        use sha2::{Digest, Sha256};
        hex::encode(Sha256::digest(password.as_bytes()))
    }
}

/// One resource pool (pve-access-control `user.cfg` `pool:` lines).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Pool {
    /// Its comment.
    pub comment: Option<String>,
    /// Member storages.
    pub storage: Vec<String>,
}

/// The PCI and USB resource mappings by id (pve-guest-common `src/PVE/Mapping/PCI.pm` and
/// `USB.pm`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Mappings {
    /// PCI mappings (`hostpciN: mapping=<id>`).
    pub pci: BTreeMap<String, Mapping>,
    /// USB mappings (`usbN: mapping=<id>`).
    pub usb: BTreeMap<String, Mapping>,
}

/// An API token created through the API (pve-access-control `PVE/API2/User.pm`
/// `generate_token`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct UserToken {
    /// The secret `generate_token` returned (a UUID).
    pub secret: String,
    /// Privilege separation (PVE's default 1).
    pub privsep: bool,
    /// Expiry, seconds since the epoch (0: never).
    pub expire: u64,
    /// Comment.
    pub comment: Option<String>,
}

/// One resource mapping: a logical device with one entry per node that has it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Mapping {
    /// Free-form description.
    pub description: Option<String>,
    /// PCI: whether the device is a mediated-device parent (`mdev`).
    pub mdev: Option<bool>,
    /// PCI: whether guests with the device may be live-migrated (`live-migration-capable`).
    #[serde(rename = "live-migration-capable")]
    pub live_migration_capable: Option<bool>,
    /// Per-node entries as PVE stores them: `id=1000:0087,node=pve2,path=0000:03:00.0` (PCI) or
    /// `id=0951:1666,node=pve1` (USB).
    pub map: Vec<String>,
}

impl Mapping {
    /// Whether an entry names the node (`get_node_mapping`: `node=<name>` among its keys).
    pub fn on_node(&self, node: &str) -> bool {
        self.map.iter().any(|entry| {
            entry
                .split(',')
                .any(|part| part.trim().strip_prefix("node=") == Some(node))
        })
    }
}

/// One SDN VNet (pve-network `PVE::Network::SDN::Vnets`): the zone its ACL paths live under.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Vnet {
    /// The zone (`/sdn/zones/<zone>/<vnet>`).
    pub zone: String,
    /// VLAN tag or VXLAN VNI.
    pub tag: Option<u32>,
    /// Alias name.
    pub alias: Option<String>,
}

/// One HA resource (pve-ha-manager `src/PVE/HA/Resources.pm` properties).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HaResource {
    /// `vm` or `ct`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Requested state (`started`, `stopped`, `disabled`, `ignored`).
    pub state: String,
    /// Free-form comment.
    pub comment: Option<String>,
    /// Restart attempts on the same node.
    pub max_restart: Option<u64>,
    /// Relocation attempts.
    pub max_relocate: Option<u64>,
    /// The HA group (PVE 8) whose nodes it prefers.
    pub group: Option<String>,
}

/// One HA rule (pve-ha-manager `src/PVE/HA/Rules.pm` and its plugins `Rules/NodeAffinity.pm`,
/// `Rules/ResourceAffinity.pm`), decoded as `decode_value` does.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HaRule {
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its HA resources (`vm:100`, ...).
    pub resources: std::collections::BTreeSet<String>,
    /// Node affinity: node -> priority.
    pub nodes: BTreeMap<String, u64>,
    /// Node affinity: restricted to its nodes.
    pub strict: Option<bool>,
    /// Resource affinity: `positive` or `negative`.
    pub affinity: Option<String>,
    /// Disabled rules are kept but not applied.
    pub disable: bool,
    /// Free-form comment.
    pub comment: Option<String>,
    /// Its ordinal (`$rules->{order}`).
    pub order: u64,
}

/// One HA group (pve-ha-manager `src/PVE/HA/Groups.pm` properties).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct HaGroup {
    /// Its nodes, as given (`node[:priority]`, comma-separated).
    pub nodes: String,
    /// Resources of the group may run only on its nodes.
    pub restricted: bool,
    /// Resources do not move back to a node of higher priority that comes back.
    pub nofailback: bool,
    /// Free-form comment.
    pub comment: Option<String>,
}

/// A snapshot of guest stats (pve-manager `PVE/Service/pvestatd.pm` `update_qemu_status` and
/// `update_lxc_status` broadcast them every `$updatetime = 10` seconds; `PVE/API2Tools.pm`
/// `extract_vm_stats` reads them for `/cluster/resources`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Stats {
    /// When the snapshot was taken, in milliseconds since the epoch (0: never).
    pub taken_ms: u64,
    /// Stats by VMID; a guest missing here shows `status: unknown`.
    pub guests: BTreeMap<u32, GuestStats>,
}

/// One guest's stats as pvestatd broadcast them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct GuestStats {
    /// Name (`name` or `hostname`).
    pub name: String,
    /// `running` or `stopped`.
    pub status: String,
    /// Whether the config marked it a template.
    pub template: bool,
    /// Uptime in seconds when taken.
    pub uptime: u64,
    /// CPUs.
    pub maxcpu: u64,
    /// Memory in bytes.
    pub maxmem: u64,
    /// Used memory in bytes.
    pub mem: u64,
    /// Largest disk in bytes.
    pub maxdisk: u64,
}

/// One cluster node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Node {
    /// Node name.
    pub node: String,
    /// Whether the node is online.
    pub online: bool,
    /// CPU threads.
    pub maxcpu: u32,
    /// Memory in bytes.
    pub maxmem: u64,
    /// Storages available on this node.
    pub storages: Vec<Storage>,
    /// Its Linux bridges (`/etc/network/interfaces`): a fresh install has `vmbr0`. A guest NIC
    /// on a bridge that is neither one of these nor an SDN VNet fails to start.
    pub bridges: Vec<String>,
    /// Its resolver (`/etc/resolv.conf` as `GET/PUT /nodes/{node}/dns` serve it): `search`,
    /// `dns1`..`dns3`.
    #[serde(default = "default_dns")]
    pub dns: BTreeMap<String, String>,
}

fn default_dns() -> BTreeMap<String, String> {
    [("search", "lan"), ("dns1", "192.0.2.53")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

impl Default for Node {
    fn default() -> Self {
        Node {
            node: String::new(),
            online: true,
            maxcpu: 8,
            maxmem: 32 << 30,
            storages: Vec::new(),
            bridges: vec!["vmbr0".into()],
            dns: default_dns(),
        }
    }
}

/// One storage as a node sees it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Storage {
    /// Storage id (`local`, `local-lvm`).
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`, `nfs`, `zfspool`, `rbd`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether every node sees the same content.
    pub shared: bool,
    /// Enabled content types (`images`, `rootdir`, `iso`, `vztmpl`, `import`, `backup`, `snippets`).
    pub content: Vec<String>,
    /// Capacity in bytes.
    pub total: u64,
    /// Its other options as `storage.cfg` has them and `GET /storage/{storage}` returns them
    /// (`path`, `server`, `export`, `vgname`, `nodes`, `disable`, `prune-backups`, ...).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub options: BTreeMap<String, serde_json::Value>,
    /// Its sensitive options (`password`, `encryption-key`, ...), which PVE keeps under
    /// `/etc/pve/priv` and never returns.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub secrets: BTreeMap<String, String>,
}

impl Default for Storage {
    fn default() -> Self {
        Storage {
            storage: String::new(),
            kind: "dir".into(),
            shared: false,
            content: Vec::new(),
            total: 100 << 30,
            options: BTreeMap::new(),
            secrets: BTreeMap::new(),
        }
    }
}

impl Storage {
    /// Whether the plugin stores files in a directory (needed by download-url and uploads).
    pub fn file_based(&self) -> bool {
        matches!(
            self.kind.as_str(),
            "dir" | "nfs" | "cifs" | "cephfs" | "glusterfs" | "btrfs"
        )
    }

    /// Whether a content type is enabled.
    pub fn has_content(&self, content: &str) -> bool {
        self.content.iter().any(|c| c == content)
    }
}

/// A storage an administrator added (`/etc/pve/storage.cfg`), on some nodes or all.
#[derive(Debug, Clone, PartialEq)]
pub struct DeclaredStorage {
    /// The storage.
    pub storage: Storage,
    /// The nodes that have it (empty: every node).
    pub nodes: Vec<String>,
}

/// One volume of storage content.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Volume {
    /// Node holding it (ignored for shared storages).
    pub node: String,
    /// Storage id.
    pub storage: String,
    /// Volume id (`local:iso/debian.iso`, `local-lvm:vm-100-disk-0`).
    pub volid: String,
    /// Content type.
    pub content: String,
    /// Format (`raw`, `qcow2`, `iso`, `tzst`, `subvol`).
    pub format: String,
    /// Size in bytes.
    pub size: u64,
    /// Creation time (seconds since the epoch).
    pub ctime: u64,
    /// Owning guest, for images.
    pub vmid: Option<u32>,
}

/// Guest type: PVE's two, as `proxops-pve-schema` defines them once.
pub use proxops_pve_schema::GuestType;

/// One guest.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Guest {
    /// VMID.
    pub vmid: u32,
    /// qemu or lxc.
    #[serde(rename = "type")]
    pub kind: GuestType,
    /// Node it lives on.
    pub node: String,
    /// `running` or `stopped`.
    pub status: String,
    /// Config key/values as PVE stores them (`template`, `lock`, `tags` included).
    pub config: BTreeMap<String, String>,
    /// Pending changes (applied at the next start).
    pub pending: BTreeMap<String, String>,
    /// Keys pending deletion.
    pub pending_delete: Vec<String>,
    /// Snapshot names, oldest first.
    pub snapshots: Vec<String>,
    /// What each snapshot holds (a snapshot made through the API; one seeded by name only has
    /// none).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub snapshot_data: BTreeMap<String, Snapshot>,
    /// When it was last started.
    pub started_at: Option<u64>,
    /// The same in milliseconds since the epoch: the guest agent's start and a DHCP lease
    /// count from it ([`crate::TaskDurations::agent_start`]). A state written before it was
    /// kept falls back to `started_at`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<u64>,
    /// A VM paused (`qm suspend` without `--todisk`): still `running`, `qmpstatus` `paused`. A
    /// container suspended (`pct suspend`, `lxc-checkpoint -s`): `stopped` with a checkpoint
    /// that `pct resume` restores.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// Resource pool it belongs to (PVE keeps pools outside the guest config).
    pub pool: Option<String>,
    /// A container's raw `lxc.*` lines, in file order (a key may repeat), which `GET .../config`
    /// returns as `lxc: [[key, value], ...]` and no API call can set.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub raw_lxc: Vec<(String, String)>,
    /// The guest OS of a VM runs no QEMU guest agent (none installed, or the OS does not come
    /// up): with `agent` enabled in the config, PVE answers every agent command with `QEMU
    /// guest agent is not running` (qemu-server `PVE/QemuServer/Agent.pm`
    /// `assert_agent_available`, whose `guest-ping` gets no answer). What a test sets to make a
    /// VM's agent never answer.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub agent_missing: bool,
}

/// One snapshot section of a guest config (pve-guest-common `AbstractConfig`).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Snapshot {
    /// The config as it was.
    pub config: BTreeMap<String, String>,
    /// Its description.
    pub description: String,
    /// When it was taken (seconds since the epoch).
    pub snaptime: u64,
    /// Whether it holds the RAM of a running VM.
    pub vmstate: bool,
    /// The snapshot it was taken on top of.
    pub parent: Option<String>,
}

impl Guest {
    /// Whether the config marks it a template.
    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|v| v == "1")
    }

    /// The config lock, if any.
    pub fn lock(&self) -> Option<&str> {
        self.config.get("lock").map(String::as_str)
    }

    /// Whether it runs.
    pub fn running(&self) -> bool {
        self.status == "running"
    }

    /// Records that it started now (`started_at`, `started_at_ms`).
    pub fn mark_started(&mut self) {
        let ms = crate::auth::now_ms();
        self.started_at = Some(ms / 1000);
        self.started_at_ms = Some(ms);
    }

    /// Records that it stopped: no start time.
    pub fn mark_stopped(&mut self) {
        self.started_at = None;
        self.started_at_ms = None;
    }

    /// How long it has been running (zero when stopped); a running guest without a start
    /// time (a seed's) has run for ever.
    pub fn uptime(&self) -> std::time::Duration {
        if !self.running() {
            return std::time::Duration::ZERO;
        }
        match self.started_at_ms.or(self.started_at.map(|s| s * 1000)) {
            Some(ms) => std::time::Duration::from_millis(crate::auth::now_ms().saturating_sub(ms)),
            None => std::time::Duration::MAX,
        }
    }

    /// Its name (`name` for qemu, `hostname` for lxc).
    pub fn name(&self) -> String {
        let key = match self.kind {
            GuestType::Qemu => "name",
            GuestType::Lxc => "hostname",
        };
        self.config
            .get(key)
            .cloned()
            .unwrap_or_else(|| format!("{}{}", self.kind.word(), self.vmid))
    }
}

/// One task (worker) as PVE records it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Task {
    /// The UPID.
    pub upid: String,
    /// Node it ran on.
    pub node: String,
    /// Worker pid.
    pub pid: u32,
    /// Process start time (clock ticks).
    pub pstart: u64,
    /// Start time (seconds since the epoch).
    pub starttime: u64,
    /// Task type (`qmcreate`, `qmclone`, `download`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Task id (usually the VMID; the filename for downloads).
    pub id: String,
    /// `user@realm` or `user@realm!token`.
    pub user: String,
    /// `running` or `stopped`.
    pub status: String,
    /// `OK`, `WARNINGS: N` or the error text, once stopped.
    pub exitstatus: Option<String>,
    /// End time, once stopped.
    pub endtime: Option<u64>,
    /// Log lines.
    pub log: Vec<String>,
}

impl State {
    /// A small cluster of the default version (9.1): node `pve1` with PVE's default storages,
    /// `local` (dir: iso, vztmpl, backup, import) and `local-lvm` (lvmthin: images, rootdir).
    pub fn demo() -> State {
        State::demo_of(PveVersion::default())
    }

    /// A small cluster of a version: node `pve1` with the storages a fresh install of that
    /// version has ([`PveVersion::default_storages`]).
    pub fn demo_of(version: PveVersion) -> State {
        State {
            cluster_name: "sim".into(),
            nodes: vec![Node {
                node: "pve1".into(),
                storages: version.default_storages(),
                ..Node::default()
            }],
            pve_version: version,
            ..State::default()
        }
    }

    /// A cluster of `nodes` as a fresh install of `version` with the administrator's storages
    /// added: each node has PVE's default storages ([`PveVersion::default_storages`]) and every
    /// declared storage that names it (or no node); a declared storage named like a default
    /// replaces it. Nothing else: a storage no one declared does not exist.
    pub fn seeded(
        cluster_name: &str,
        nodes: &[String],
        version: PveVersion,
        declared: &[DeclaredStorage],
    ) -> State {
        let nodes = nodes
            .iter()
            .map(|node| {
                let mut storages = version.default_storages();
                for d in declared
                    .iter()
                    .filter(|d| d.nodes.is_empty() || d.nodes.contains(node))
                {
                    match storages.iter_mut().find(|s| s.storage == d.storage.storage) {
                        Some(s) => *s = d.storage.clone(),
                        None => storages.push(d.storage.clone()),
                    }
                }
                Node {
                    node: node.clone(),
                    storages,
                    ..Node::default()
                }
            })
            .collect();
        State {
            cluster_name: cluster_name.to_owned(),
            nodes,
            pve_version: version,
            ..State::default()
        }
    }

    /// Parses a state or seed from JSON.
    pub fn from_json(text: &str) -> Result<State, SimError> {
        let mut st: State = serde_json::from_str(text).map_err(SimError::StateJson)?;
        if st.cluster_name.is_empty() {
            st.cluster_name = "sim".into();
        }
        for (vmid, g) in st.guests.iter_mut() {
            g.vmid = *vmid;
            if g.status.is_empty() {
                g.status = "stopped".into();
            }
        }
        Ok(st)
    }

    /// Loads a state or seed from a JSON file.
    pub fn load(path: &Path) -> Result<State, SimError> {
        let text = std::fs::read_to_string(path).map_err(|e| SimError::Io(path.into(), e))?;
        State::from_json(&text)
    }

    /// Pretty JSON dump.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Saves the JSON dump atomically (temporary file, then rename).
    pub fn save(&self, path: &Path) -> Result<(), SimError> {
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, self.to_json()).map_err(|e| SimError::Io(tmp.clone(), e))?;
        std::fs::rename(&tmp, path).map_err(|e| SimError::Io(path.into(), e))
    }

    /// A node by name.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.node == name)
    }

    /// A storage as seen from a node.
    pub fn storage(&self, node: &str, storage: &str) -> Option<&Storage> {
        self.node(node)?
            .storages
            .iter()
            .find(|s| s.storage == storage)
    }

    /// The volumes of a storage as seen from a node.
    pub fn volumes_on<'a>(
        &'a self,
        node: &'a str,
        storage: &'a Storage,
    ) -> impl Iterator<Item = &'a Volume> + 'a {
        self.volumes
            .iter()
            .filter(move |v| v.storage == storage.storage && (storage.shared || v.node == node))
    }

    /// A volume by volid as seen from a node.
    pub fn volume<'a>(&'a self, node: &'a str, volid: &str) -> Option<&'a Volume> {
        let (sid, _) = volid.split_once(':')?;
        let st = self.storage(node, sid)?;
        self.volumes_on(node, st).find(|v| v.volid == volid)
    }

    /// Removes a volume as seen from a node; returns whether it existed.
    pub fn remove_volume(&mut self, node: &str, volid: &str) -> bool {
        let shared = volid
            .split_once(':')
            .and_then(|(sid, _)| self.storage(node, sid))
            .is_some_and(|s| s.shared);
        let before = self.volumes.len();
        self.volumes
            .retain(|v| !(v.volid == volid && (shared || v.node == node)));
        before != self.volumes.len()
    }

    /// The task with a UPID.
    pub fn task(&self, upid: &str) -> Option<&Task> {
        self.tasks.iter().find(|t| t.upid == upid)
    }

    /// The task with a UPID, mutably.
    pub fn task_mut(&mut self, upid: &str) -> Option<&mut Task> {
        self.tasks.iter_mut().find(|t| t.upid == upid)
    }

    /// The SDN zone of a bridge: its VNet's, else `localnetwork` (pve-guest-common
    /// `src/PVE/GuestHelpers.pm` `check_vnet_access`).
    pub fn zone_of(&self, bridge: &str) -> &str {
        crate::sdn::zone_of(self, bridge)
    }

    /// The HA resource managing a guest, if any (pve-ha-manager `src/PVE/HA/Config.pm`
    /// `service_is_configured("vm:$vmid")`).
    pub fn ha_of(&self, vmid: u32) -> Option<&HaResource> {
        let kind = self.guests.get(&vmid)?.kind;
        self.ha_resources.get(&ha_sid(kind, vmid))
    }

    /// Volids referenced by any guest config (for in-use checks).
    pub fn referenced_by(&self, volid: &str) -> Option<u32> {
        self.guests.values().find_map(|g| {
            g.config
                .values()
                .any(|v| v.split(',').next() == Some(volid))
                .then_some(g.vmid)
        })
    }
}

/// The HA sid of a guest: `vm:<vmid>` or `ct:<vmid>` (pve-ha-manager `PVE::HA::Tools::get_ha_resource_type`).
pub fn ha_sid(kind: GuestType, vmid: u32) -> String {
    match kind {
        GuestType::Qemu => format!("vm:{vmid}"),
        GuestType::Lxc => format!("ct:{vmid}"),
    }
}
