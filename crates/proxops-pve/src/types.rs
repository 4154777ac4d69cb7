//! Typed requests and responses of the endpoints the engine uses. Responses decode leniently
//! ([`crate::lenient`]); unknown fields are ignored so newer PVE versions still decode.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

use crate::lenient;
use crate::params::Params;

/// A guest's type, as in paths and `/cluster/resources` (the one definition, in
/// `proxops-pve-schema`).
pub use proxops_pve_schema::GuestType;

/// Where a guest lives: what every guest endpoint's path needs.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct GuestRef {
    /// Node name.
    pub node: String,
    /// qemu or lxc.
    pub kind: GuestType,
    /// VMID.
    pub vmid: u32,
}

impl GuestRef {
    /// A QEMU VM on a node.
    pub fn qemu(node: &str, vmid: u32) -> GuestRef {
        GuestRef {
            node: node.into(),
            kind: GuestType::Qemu,
            vmid,
        }
    }

    /// An LXC container on a node.
    pub fn lxc(node: &str, vmid: u32) -> GuestRef {
        GuestRef {
            node: node.into(),
            kind: GuestType::Lxc,
            vmid,
        }
    }
}

/// `GET /version`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct Version {
    /// `8.4.1`.
    pub version: String,
    /// `8.4`.
    pub release: String,
    /// Git commit of pve-manager.
    pub repoid: String,
}

impl Version {
    /// The point release as (major, minor): from `release` (`9.1`), else from the first two
    /// numbers of `version` (`9.1.3`); `None` when neither reads as one.
    pub fn release_number(&self) -> Option<(u32, u32)> {
        let parse = |text: &str| {
            let mut parts = text.trim().split('.');
            let major = parts.next()?.parse().ok()?;
            let minor = parts.next()?.parse().ok()?;
            Some((major, minor))
        };
        parse(&self.release).or_else(|| parse(&self.version))
    }
}

/// One row of `GET /nodes`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct NodeInfo {
    /// Node name.
    pub node: String,
    /// `online`, `offline` or `unknown`.
    pub status: String,
    /// CPU threads.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub maxcpu: Option<u64>,
    /// Memory in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Memory used in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    /// CPU load (0..1).
    #[serde(deserialize_with = "lenient::opt_f64")]
    pub cpu: Option<f64>,
    /// Seconds since boot.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// SHA-256 of the node's certificate, `AA:BB:..`.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub ssl_fingerprint: Option<String>,
}

/// One SDN VNet of `GET /cluster/sdn/vnets`: the zone its ACL paths live under
/// (`/sdn/zones/<zone>/<vnet>`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SdnVnet {
    /// The VNet's name, which guests use as their bridge.
    pub vnet: String,
    /// Its zone.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub zone: Option<String>,
}

/// One row of `GET /cluster/resources` (guests, nodes, storages, pools, SDN zones).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct ClusterResource {
    /// `qemu/100`, `node/pve1`, `storage/pve1/local`.
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Node.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub node: Option<String>,
    /// VMID of a guest.
    #[serde(deserialize_with = "lenient::opt_vmid")]
    pub vmid: Option<u32>,
    /// Guest name.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub name: Option<String>,
    /// `running`/`stopped` for guests, `online`/`offline` for nodes, `available` for storages.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub status: Option<String>,
    /// Whether a guest is a template (0/1).
    #[serde(deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// A guest's config lock (`clone`, `backup`, `migrate`, ...).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub lock: Option<String>,
    /// A guest's tags, `;`-separated.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub tags: Option<String>,
    /// Resource pool.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub pool: Option<String>,
    /// Storage id.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub storage: Option<String>,
    /// A storage's content types, `,`-separated.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub content: Option<String>,
    /// A storage's plugin type.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub plugintype: Option<String>,
    /// Whether a storage is shared (0/1).
    #[serde(deserialize_with = "lenient::bool01")]
    pub shared: bool,
    /// Disk (guests) or capacity (storages) in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
    /// Memory in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Memory in use in bytes (a node's counts its running guests).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    /// A guest's HA state, when an HA resource manages it.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub hastate: Option<String>,
    /// CPUs.
    #[serde(deserialize_with = "lenient::opt_f64")]
    pub maxcpu: Option<f64>,
}

/// `GET /nodes/{node}/{qemu|lxc}/{vmid}/status/current`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(default)]
pub struct GuestStatus {
    /// VMID.
    #[serde(deserialize_with = "lenient::opt_vmid")]
    pub vmid: Option<u32>,
    /// `running` or `stopped`.
    pub status: String,
    /// QEMU's own state (`running`, `paused`, `prelaunch`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub qmpstatus: Option<String>,
    /// Name.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub name: Option<String>,
    /// Config lock.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub lock: Option<String>,
    /// Whether it is a template.
    #[serde(deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// Tags, `;`-separated.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub tags: Option<String>,
    /// Seconds since start.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// Configured memory in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
}

impl GuestStatus {
    /// Whether the guest runs.
    pub fn running(&self) -> bool {
        self.status == "running"
    }
}

/// A guest's configuration as PVE stores it: key → value text (numbers and booleans as PVE writes
/// them in the config file), and the digest to send back with a change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestConfig {
    /// The config digest (changes with every write).
    pub digest: Option<String>,
    /// Keys and values, e.g. `scsi0` → `local-lvm:vm-100-disk-0,size=32G`.
    pub values: BTreeMap<String, String>,
    /// A container's raw `lxc.*` lines, in order: PVE returns them as the `lxc` array of
    /// `[key, value]` pairs (pve-container `PVE/API2/LXC/Config.pm` `vm_config`).
    pub raw_lxc: Vec<(String, String)>,
}

impl GuestConfig {
    /// Builds a config from the `data` object of a config read.
    pub fn from_json(data: &serde_json::Value) -> GuestConfig {
        let mut cfg = GuestConfig::default();
        if let Some(obj) = data.as_object() {
            for (k, v) in obj {
                if k == "lxc"
                    && let Some(lines) = v.as_array()
                {
                    cfg.raw_lxc = lines
                        .iter()
                        .filter_map(|pair| match pair.as_array()?.as_slice() {
                            [k, v] => Some((k.as_str()?.to_owned(), lenient::scalar_text(v)?)),
                            _ => None,
                        })
                        .collect();
                    continue;
                }
                let Some(text) = lenient::scalar_text(v) else {
                    continue;
                };
                if k == "digest" {
                    cfg.digest = Some(text);
                } else {
                    cfg.values.insert(k.clone(), text);
                }
            }
        }
        cfg
    }

    /// The config a running guest runs with, from the rows of `GET .../pending` (each key's
    /// current `value`, and the `digest` row): one read instead of a config read and a pending
    /// read.
    pub fn from_pending(rows: &[PendingEntry]) -> GuestConfig {
        let mut cfg = GuestConfig::default();
        for row in rows {
            let Some(value) = &row.value else { continue };
            if row.key == "digest" {
                cfg.digest = Some(value.clone());
            } else {
                cfg.values.insert(row.key.clone(), value.clone());
            }
        }
        cfg
    }

    /// A value.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.values.get(key).map(String::as_str)
    }

    /// Tags, split on `;` (and `,`/space, which PVE accepts on input), in stored order.
    pub fn tags(&self) -> Vec<String> {
        split_tags(self.get("tags").unwrap_or_default())
    }
}

/// One row of `GET .../pending`: a config key with its current value, the value waiting for the
/// next start, and whether its deletion waits.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingEntry {
    /// The config key.
    pub key: String,
    /// The value the running guest uses (`None`: unset).
    pub value: Option<String>,
    /// The value applied at the next start, if one waits.
    pub pending: Option<String>,
    /// Whether the key is deleted at the next start.
    pub delete: bool,
}

impl PendingEntry {
    /// Whether something waits for the next start.
    pub fn is_pending(&self) -> bool {
        self.pending.is_some() || self.delete
    }

    /// Builds the rows of a pending read; rows without a `key` are skipped.
    pub fn rows_from_json(data: &serde_json::Value) -> Vec<PendingEntry> {
        let mut rows: Vec<PendingEntry> = data
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|row| {
                let key = row.get("key")?.as_str()?.to_string();
                let text = |k: &str| row.get(k).and_then(lenient::scalar_text);
                Some(PendingEntry {
                    key,
                    value: text("value"),
                    pending: text("pending"),
                    // PVE answers 1, or 2 for a forced deletion.
                    delete: text("delete").is_some_and(|d| d != "0"),
                })
            })
            .collect();
        rows.sort_by(|a, b| a.key.cmp(&b.key));
        rows
    }
}

/// Splits a tag list as PVE stores it (`;`) or accepts it (`,`, spaces).
pub fn split_tags(text: &str) -> Vec<String> {
    text.split([';', ',', ' '])
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// A config change: values to set, keys to delete, and the digest it was computed against (PVE
/// refuses the change if the config changed meanwhile).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigChange {
    /// Keys to set.
    pub set: BTreeMap<String, String>,
    /// Keys to delete (`delete=a,b`).
    pub delete: BTreeSet<String>,
    /// The digest of the config read the change was based on.
    pub digest: Option<String>,
}

impl ConfigChange {
    /// Sets a key.
    pub fn set(mut self, key: &str, value: impl Into<String>) -> ConfigChange {
        self.set.insert(key.into(), value.into());
        self
    }

    /// Deletes a key.
    pub fn delete(mut self, key: &str) -> ConfigChange {
        self.delete.insert(key.into());
        self
    }

    /// Guards the change with a digest.
    pub fn digest(mut self, digest: impl Into<String>) -> ConfigChange {
        self.digest = Some(digest.into());
        self
    }

    pub(crate) fn params(&self) -> Params {
        let mut p = Params::new().extend_map(&self.set);
        if !self.delete.is_empty() {
            p.push(
                "delete",
                self.delete.iter().cloned().collect::<Vec<_>>().join(","),
            );
        }
        p.opt("digest", self.digest.as_deref())
    }
}

/// `POST /nodes/{node}/{qemu|lxc}/{vmid}/clone`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloneRequest {
    /// VMID of the new guest.
    pub newid: u32,
    /// Name (qemu `name`, lxc `hostname`).
    pub name: Option<String>,
    /// Target node.
    pub target: Option<String>,
    /// Full clone (PVE's default: full unless the source is a template).
    pub full: Option<bool>,
    /// Target storage (full clones only).
    pub storage: Option<String>,
    /// Disk format (qemu full clones only).
    pub format: Option<String>,
    /// Resource pool.
    pub pool: Option<String>,
    /// Description.
    pub description: Option<String>,
    /// Clone from a snapshot.
    pub snapname: Option<String>,
}

impl CloneRequest {
    /// A clone into the new vmid `newid`, every option left to PVE.
    pub fn new(newid: u32) -> CloneRequest {
        CloneRequest {
            newid,
            ..CloneRequest::default()
        }
    }

    /// Sets [`CloneRequest::name`]: name (qemu `name`, lxc `hostname`).
    pub fn with_name(mut self, name: Option<String>) -> CloneRequest {
        self.name = name;
        self
    }

    /// Sets [`CloneRequest::target`]: target node.
    pub fn with_target(mut self, target: Option<String>) -> CloneRequest {
        self.target = target;
        self
    }

    /// Sets [`CloneRequest::full`]: full clone (PVE's default: full unless the source is a
    /// template).
    pub fn with_full(mut self, full: Option<bool>) -> CloneRequest {
        self.full = full;
        self
    }

    /// Sets [`CloneRequest::storage`]: target storage (full clones only).
    pub fn with_storage(mut self, storage: Option<String>) -> CloneRequest {
        self.storage = storage;
        self
    }

    /// Sets [`CloneRequest::format`]: disk format (qemu full clones only).
    pub fn with_format(mut self, format: Option<String>) -> CloneRequest {
        self.format = format;
        self
    }

    /// Sets [`CloneRequest::pool`]: resource pool.
    pub fn with_pool(mut self, pool: Option<String>) -> CloneRequest {
        self.pool = pool;
        self
    }

    /// Sets [`CloneRequest::description`]: description.
    pub fn with_description(mut self, description: Option<String>) -> CloneRequest {
        self.description = description;
        self
    }

    /// Sets [`CloneRequest::snapname`]: clone from a snapshot.
    pub fn with_snapname(mut self, snapname: Option<String>) -> CloneRequest {
        self.snapname = snapname;
        self
    }
}

impl CloneRequest {
    pub(crate) fn params(&self, kind: GuestType) -> Params {
        let name_key = match kind {
            GuestType::Qemu => "name",
            GuestType::Lxc => "hostname",
        };
        let mut p = Params::new()
            .set("newid", self.newid)
            .opt(name_key, self.name.as_deref())
            .opt("target", self.target.as_deref())
            .flag("full", self.full)
            .opt("storage", self.storage.as_deref())
            .opt("pool", self.pool.as_deref())
            .opt("description", self.description.as_deref())
            .opt("snapname", self.snapname.as_deref());
        if kind == GuestType::Qemu {
            p = p.opt("format", self.format.as_deref());
        }
        p
    }
}

/// `DELETE /nodes/{node}/{qemu|lxc}/{vmid}` options.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DestroyOptions {
    /// Remove the VMID from backup jobs, replication and HA.
    pub purge: Option<bool>,
    /// Also destroy disks not referenced in the config.
    pub destroy_unreferenced_disks: Option<bool>,
    /// Ignore locks (qemu only; root only).
    pub skiplock: Option<bool>,
    /// Stop a running container first (lxc only).
    pub force: Option<bool>,
}

impl DestroyOptions {
    /// Sets [`DestroyOptions::purge`].
    pub fn with_purge(mut self, purge: Option<bool>) -> Self {
        self.purge = purge;
        self
    }
    /// Sets [`DestroyOptions::destroy_unreferenced_disks`].
    pub fn with_destroy_unreferenced_disks(
        mut self,
        destroy_unreferenced_disks: Option<bool>,
    ) -> Self {
        self.destroy_unreferenced_disks = destroy_unreferenced_disks;
        self
    }
    /// Sets [`DestroyOptions::skiplock`].
    pub fn with_skiplock(mut self, skiplock: Option<bool>) -> Self {
        self.skiplock = skiplock;
        self
    }
    /// Sets [`DestroyOptions::force`].
    pub fn with_force(mut self, force: Option<bool>) -> Self {
        self.force = force;
        self
    }

    pub(crate) fn params(&self, kind: GuestType) -> Params {
        let p = Params::new().flag("purge", self.purge).flag(
            "destroy-unreferenced-disks",
            self.destroy_unreferenced_disks,
        );
        match kind {
            GuestType::Qemu => p.flag("skiplock", self.skiplock),
            GuestType::Lxc => p.flag("force", self.force),
        }
    }
}

/// `POST /nodes/{node}/storage/{storage}/download-url`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DownloadUrl {
    /// Source URL.
    pub url: String,
    /// `iso`, `vztmpl` or `import`.
    pub content: String,
    /// Target file name.
    pub filename: String,
    /// Expected checksum.
    pub checksum: Option<String>,
    /// `md5`, `sha1`, `sha224`, `sha256`, `sha384`, `sha512` (required with `checksum`).
    pub checksum_algorithm: Option<String>,
    /// Verify the source's TLS certificate (PVE's default: yes).
    pub verify_certificates: Option<bool>,
    /// Decompression (`gz`, `lzo`, `zst`, `bz2`).
    pub compression: Option<String>,
}

impl DownloadUrl {
    /// `url` downloaded as `filename` with content type `content` (`iso`, `vztmpl`,
    /// `import`), without a checksum, every option left to PVE.
    pub fn new(
        url: impl Into<String>,
        content: impl Into<String>,
        filename: impl Into<String>,
    ) -> DownloadUrl {
        DownloadUrl {
            url: url.into(),
            content: content.into(),
            filename: filename.into(),
            ..DownloadUrl::default()
        }
    }

    /// Sets [`DownloadUrl::checksum`]: expected checksum.
    pub fn with_checksum(mut self, checksum: Option<String>) -> DownloadUrl {
        self.checksum = checksum;
        self
    }

    /// Sets [`DownloadUrl::checksum_algorithm`]: `md5`, `sha1`, `sha224`, `sha256`, `sha384`,
    /// `sha512` (required with `checksum`).
    pub fn with_checksum_algorithm(mut self, checksum_algorithm: Option<String>) -> DownloadUrl {
        self.checksum_algorithm = checksum_algorithm;
        self
    }

    /// Sets [`DownloadUrl::verify_certificates`]: verify the source's TLS certificate (PVE's
    /// default: yes).
    pub fn with_verify_certificates(mut self, verify_certificates: Option<bool>) -> DownloadUrl {
        self.verify_certificates = verify_certificates;
        self
    }

    /// Sets [`DownloadUrl::compression`]: decompression (`gz`, `lzo`, `zst`, `bz2`).
    pub fn with_compression(mut self, compression: Option<String>) -> DownloadUrl {
        self.compression = compression;
        self
    }
}

impl DownloadUrl {
    pub(crate) fn params(&self) -> Params {
        Params::new()
            .set("url", &self.url)
            .set("content", &self.content)
            .set("filename", &self.filename)
            .opt("checksum", self.checksum.as_deref())
            .opt("checksum-algorithm", self.checksum_algorithm.as_deref())
            .flag("verify-certificates", self.verify_certificates)
            .opt("compression", self.compression.as_deref())
    }
}

/// One row of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct StorageVolume {
    /// `local:iso/debian.iso`.
    pub volid: String,
    /// Content type (`iso`, `vztmpl`, `images`, `rootdir`, `import`, `backup`, `snippets`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub content: Option<String>,
    /// Format (`iso`, `tzst`, `raw`, `qcow2`, `subvol`).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub format: Option<String>,
    /// Size in bytes.
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    /// Used bytes (thin volumes).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
    /// Creation time (seconds since the epoch).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub ctime: Option<u64>,
    /// Owning guest.
    #[serde(deserialize_with = "lenient::opt_vmid")]
    pub vmid: Option<u32>,
    /// Notes.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub notes: Option<String>,
}

/// One guest of `GET /nodes/{node}/qemu` or `GET /nodes/{node}/lxc`. Unlike
/// `/cluster/resources` (stats pvestatd refreshes every 10 s), these lists read the running
/// state and the config live (qemu-server `PVE/QemuServer.pm` `vmstatus`, pve-container
/// `PVE/LXC.pm` `vmstatus`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct NodeGuest {
    /// VMID.
    #[serde(deserialize_with = "lenient::vmid")]
    pub vmid: u32,
    /// `running` or `stopped`.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub status: Option<String>,
    /// Whether it is a template (absent: no).
    #[serde(deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// Name.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub name: Option<String>,
}

/// One row of `GET /nodes/{node}/tasks`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TaskEntry {
    /// The UPID.
    pub upid: String,
    /// Task type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Task id (usually the VMID).
    #[serde(deserialize_with = "lenient::opt_string")]
    pub id: Option<String>,
    /// The exit status once stopped (the list calls it `status`); absent while running.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub status: Option<String>,
    /// Start time (seconds since the epoch).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub starttime: Option<u64>,
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TaskStatus {
    /// The UPID.
    pub upid: String,
    /// Node.
    pub node: String,
    /// `running` or `stopped`.
    pub status: String,
    /// Once stopped: `OK`, `WARNINGS: N` or the error text.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub exitstatus: Option<String>,
    /// Task type.
    #[serde(rename = "type")]
    pub kind: String,
    /// Task id.
    #[serde(deserialize_with = "lenient::opt_string")]
    pub id: Option<String>,
    /// User.
    pub user: String,
    /// Start time (seconds since the epoch).
    #[serde(deserialize_with = "lenient::opt_u64")]
    pub starttime: Option<u64>,
}

impl TaskStatus {
    /// Whether the task has stopped.
    pub fn stopped(&self) -> bool {
        self.status == "stopped"
    }

    /// Whether it stopped successfully (`OK` or `WARNINGS: N`).
    pub fn succeeded(&self) -> bool {
        self.stopped() && self.exitstatus.as_deref().is_some_and(exit_ok)
    }
}

/// Whether an exit status means success: `OK` or `WARNINGS: N`.
pub fn exit_ok(exitstatus: &str) -> bool {
    exitstatus == "OK" || exitstatus.starts_with("WARNINGS: ")
}

/// One line of `GET /nodes/{node}/tasks/{upid}/log`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct TaskLogLine {
    /// Line number (1-based).
    #[serde(deserialize_with = "lenient::u64_req")]
    pub n: u64,
    /// Text.
    pub t: String,
}
