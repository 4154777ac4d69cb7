//! The spec types of the kinds of a cluster's own objects (issue 32): storages, pools, backup
//! jobs, resource mappings and access (users, groups, roles, ACL entries). Below
//! [`Spec`](crate::Spec), which holds them as [`ObjectSpec`]; their checks and kind definitions
//! are in `object`.
//!
//! Each spec has typed fields for what ProxOps reasons about (identity, references, the
//! free-text field that carries ProxOps's mark) and, where PVE has many more settings, an
//! `options` map of the create endpoint's other parameters, spelled as PVE spells them and
//! checked against the official schema (`proxops-pve-schema`).

use crate::pve_config::PveConfig;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `kind: Storage`: an entry of `/etc/pve/storage.cfg` (`POST /storage`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct StorageSpec {
    /// The PVE storage id; `metadata.name` when absent. Set it for an id a resource name cannot
    /// spell (`local_zfs`, `NAS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The storage type: one of pve-storage's plugins.
    #[serde(rename = "type")]
    pub storage_type: StorageType,
    /// The content types it holds (`images`, `rootdir`, `iso`, `vztmpl`, `backup`, `snippets`,
    /// `import`); PVE's default for the type when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<String>,
    /// The nodes it is available on; every node when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<String>,
    /// Whether every node sees the same content (a network or cluster storage).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared: Option<bool>,
    /// Whether the storage is disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable: Option<bool>,
    /// The resource pool it is a member of (a `Pool` the repository may declare: created
    /// first), as `pool:` on VM and LXC. Not the ZFS or Ceph pool a `zfspool` or `rbd` storage
    /// sits on: that is `options.pool`. A storage may be in other pools too; those are left
    /// alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// The type's other options as PVE names them (`path`, `server`, `export`, `vgname`,
    /// `thinpool`, `pool`, `datastore`, `prune-backups`, ...). Secrets (`password`,
    /// `encryption-key`, `keyring`) are refused: they would sit in the repository in clear.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
}

/// The storage types ProxOps manages (pve-storage `PVE/Storage/*Plugin.pm`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum StorageType {
    /// A directory (`DirPlugin`).
    Dir,
    /// An NFS export (`NFSPlugin`).
    Nfs,
    /// An SMB/CIFS share (`CIFSPlugin`).
    Cifs,
    /// An LVM volume group (`LVMPlugin`).
    Lvm,
    /// An LVM thin pool (`LvmThinPlugin`).
    Lvmthin,
    /// A ZFS pool (`ZFSPoolPlugin`).
    Zfspool,
    /// A Proxmox Backup Server datastore (`PBSPlugin`).
    Pbs,
}

impl StorageType {
    /// PVE's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            StorageType::Dir => "dir",
            StorageType::Nfs => "nfs",
            StorageType::Cifs => "cifs",
            StorageType::Lvm => "lvm",
            StorageType::Lvmthin => "lvmthin",
            StorageType::Zfspool => "zfspool",
            StorageType::Pbs => "pbs",
        }
    }
}

/// `kind: Pool`: a resource pool (`POST /pools`). Its members are the guests that name it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct PoolSpec {
    /// The pool id; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The operator's comment (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `kind: BackupJob`: a scheduled vzdump job (`POST /cluster/backup`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct BackupJobSpec {
    /// The job id; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// When it runs: a systemd-like calendar event (`daily`, `sun 01:00`, `*-*-* 02:30`).
    pub schedule: String,
    /// The storage the backups go to.
    pub storage: String,
    /// Back up every guest (minus `exclude`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
    /// Back up these guests.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vmids: Vec<u32>,
    /// Back up the guests of this pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Guests left out of `all`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<u32>,
    /// `snapshot`, `suspend` or `stop`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<BackupMode>,
    /// Run only on this node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Whether the job is enabled (PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Which backups to keep (`prune-backups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention: Option<Retention>,
    /// The operator's comment (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// vzdump's other options as PVE names them (`compress`, `notification-mode`, `mailto`,
    /// `notes-template`, `bwlimit`, ...). `script`, `tmpdir` and `dumpdir` are root@pam's only.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
}

/// vzdump's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum BackupMode {
    /// A live backup.
    Snapshot,
    /// Suspend the guest during the backup.
    Suspend,
    /// Stop the guest during the backup.
    Stop,
}

impl BackupMode {
    /// PVE's name of the mode.
    pub fn as_str(self) -> &'static str {
        match self {
            BackupMode::Snapshot => "snapshot",
            BackupMode::Suspend => "suspend",
            BackupMode::Stop => "stop",
        }
    }
}

/// Backup retention (PVE's `prune-backups` property string).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Retention {
    /// Keep every backup (the other keys must then be absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_all: Option<bool>,
    /// Keep the last N backups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_last: Option<u32>,
    /// Keep the last backup of each of the last N hours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_hourly: Option<u32>,
    /// Keep the last backup of each of the last N days.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_daily: Option<u32>,
    /// Keep the last backup of each of the last N weeks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_weekly: Option<u32>,
    /// Keep the last backup of each of the last N months.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_monthly: Option<u32>,
    /// Keep the last backup of each of the last N years.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_yearly: Option<u32>,
}

impl Retention {
    /// The `prune-backups` property string, keys in PVE's order.
    pub fn property_string(&self) -> String {
        let mut parts = Vec::new();
        if let Some(all) = self.keep_all {
            parts.push(format!("keep-all={}", u8::from(all)));
        }
        for (key, value) in [
            ("keep-last", self.keep_last),
            ("keep-hourly", self.keep_hourly),
            ("keep-daily", self.keep_daily),
            ("keep-weekly", self.keep_weekly),
            ("keep-monthly", self.keep_monthly),
            ("keep-yearly", self.keep_yearly),
        ] {
            if let Some(v) = value {
                parts.push(format!("{key}={v}"));
            }
        }
        parts.join(",")
    }
}

/// `kind: ResourceMapping`: a cluster-wide PCI or USB mapping (`POST /cluster/mapping/{pci,usb}`),
/// which a guest's `pci-devices[].mapping` or `usb-devices[].mapping` names.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct MappingSpec {
    /// The mapping id; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `pci` or `usb`.
    #[serde(rename = "type")]
    pub mapping_type: MappingType,
    /// The operator's description (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// One entry per node (several for a device a node has more than once), keys as PVE spells
    /// them: PCI `node`, `path`, `id`, `iommugroup`, `subsystem-id`, `description`; USB `node`,
    /// `id` or `path`.
    #[schemars(with = "Vec<BTreeMap<String, serde_json::Value>>")]
    pub map: Vec<PveConfig>,
    /// PCI: the device provides mediated devices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mdev: Option<bool>,
    /// PCI: guests using it may be live-migrated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live_migration_capable: Option<bool>,
}

/// The two resource mapping types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum MappingType {
    /// PCI(e) devices.
    Pci,
    /// USB devices.
    Usb,
}

impl MappingType {
    /// PVE's name of the type.
    pub fn as_str(self) -> &'static str {
        match self {
            MappingType::Pci => "pci",
            MappingType::Usb => "usb",
        }
    }
}

/// `kind: User`: a user of the cluster (`POST /access/users`). No password: one in the repository
/// would be in clear; a `pve` realm user without one logs in through API tokens only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct UserSpec {
    /// `name@realm` (`monitoring@pve`).
    pub userid: String,
    /// The operator's comment (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// E-mail address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub email: Option<String>,
    /// First name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firstname: Option<String>,
    /// Last name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lastname: Option<String>,
    /// Whether the account is enabled (PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enable: Option<bool>,
    /// Account expiry, seconds since the epoch (0: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u64>,
    /// The groups it belongs to (PVE group ids).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
}

/// `kind: Group`: a user group (`POST /access/groups`). Its members are the users naming it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct GroupSpec {
    /// The group id; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The operator's comment (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `kind: Role`: a custom role (`POST /access/roles`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct RoleSpec {
    /// The role id; `metadata.name` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its privileges (`VM.Audit`, `Datastore.Audit`, ...).
    pub privs: Vec<String>,
}

/// `kind: Acl`: roles granted on one path to users, groups and API tokens (`PUT /access/acl`).
/// Each (path, principal, role) is one ACL entry of PVE.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct AclSpec {
    /// The ACL path (`/`, `/vms/100`, `/storage/local`, `/pool/prod`).
    pub path: String,
    /// The roles granted.
    pub roles: Vec<String>,
    /// To these users (`name@realm`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<String>,
    /// To these groups.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// To these API tokens (`name@realm!token`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tokens: Vec<String>,
    /// Whether the grant holds below the path too (PVE's default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub propagate: Option<bool>,
}

/// `kind: ApiToken`: an API token of a user (`POST /access/users/{userid}/token/{tokenid}`).
/// PVE shows its secret once, in the create's answer: ProxOps encrypts it at once with SOPS to
/// the age recipients of the cluster's secrets file, and the receipt carries only that.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct ApiTokenSpec {
    /// The user it belongs to, `name@realm` (`ci@pve`).
    pub userid: String,
    /// The token id (`deploy`): the token is `<userid>!<token>`.
    pub token: String,
    /// Privilege separation: the token has only the ACLs granted to it, not its user's (PVE's
    /// default: yes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub privsep: Option<bool>,
    /// Expiry, seconds since the epoch (0 or absent: never).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expire: Option<u64>,
    /// The operator's comment (ProxOps appends its mark to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
    /// `<userid>!<token>`, set when the spec is decoded: what an ACL's `tokens` name it by.
    #[serde(skip)]
    #[schemars(skip)]
    pub(crate) full_tokenid: String,
}

impl ApiTokenSpec {
    /// `<userid>!<token>`, as PVE names the token.
    pub fn full_tokenid(&self) -> String {
        format!("{}!{}", self.userid, self.token)
    }
}

/// `kind: SdnZone`: an SDN zone (`POST /cluster/sdn/zones`). Pending until the SDN
/// configuration is applied (`PUT /cluster/sdn`), which ProxOps does after its SDN changes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SdnZoneSpec {
    /// The zone id; `metadata.name` when absent (8 characters at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The zone type: `simple` or `vlan` (`qinq`, `vxlan`, `evpn` with their options).
    #[serde(rename = "type")]
    pub zone_type: String,
    /// The type's other options as PVE names them (`bridge` for a VLAN zone, `mtu`, `nodes`,
    /// `ipam`, `dhcp`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
}

/// `kind: SdnVnet`: an SDN VNet (`POST /cluster/sdn/vnets`), a bridge guests' NICs name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SdnVnetSpec {
    /// The VNet id; `metadata.name` when absent (8 characters at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// Its zone.
    pub zone: String,
    /// The VLAN (or VXLAN) tag, which a VLAN zone needs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u32>,
    /// A display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Other options (`vlanaware`, `isolate-ports`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
}

/// `kind: SdnSubnet`: a subnet of a VNet (`POST /cluster/sdn/vnets/{vnet}/subnets`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct SdnSubnetSpec {
    /// Its VNet.
    pub vnet: String,
    /// The network (`10.0.10.0/24`).
    pub subnet: String,
    /// The gateway address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Source NAT for traffic leaving the subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snat: Option<bool>,
    /// Other options (`dhcp-range`, `dnszoneprefix`, `dhcp-dns-server`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(with = "BTreeMap<String, serde_json::Value>")]
    pub options: PveConfig,
}

/// The decoded spec of a cluster-object kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
#[non_exhaustive]
pub enum ObjectSpec {
    /// `Storage`.
    Storage(StorageSpec),
    /// `Pool`.
    Pool(PoolSpec),
    /// `BackupJob`.
    BackupJob(BackupJobSpec),
    /// `ResourceMapping`.
    Mapping(MappingSpec),
    /// `User`.
    User(UserSpec),
    /// `Group`.
    Group(GroupSpec),
    /// `Role`.
    Role(RoleSpec),
    /// `Acl`.
    Acl(AclSpec),
    /// `Firewall`: the cluster's firewall.
    Firewall(super::firewall_spec::FirewallSpec),
    /// `SdnZone`.
    SdnZone(SdnZoneSpec),
    /// `SdnVnet`.
    SdnVnet(SdnVnetSpec),
    /// `SdnSubnet`.
    SdnSubnet(SdnSubnetSpec),
    /// `ApiToken`.
    ApiToken(ApiTokenSpec),
}

impl ObjectSpec {
    /// The PVE id the spec sets explicitly (`id:`, or a user's `userid`), if any.
    pub fn explicit_id(&self) -> Option<&str> {
        match self {
            ObjectSpec::Storage(s) => s.id.as_deref(),
            ObjectSpec::Pool(s) => s.id.as_deref(),
            ObjectSpec::BackupJob(s) => s.id.as_deref(),
            ObjectSpec::Mapping(s) => s.id.as_deref(),
            ObjectSpec::User(s) => Some(&s.userid),
            ObjectSpec::Group(s) => s.id.as_deref(),
            ObjectSpec::Role(s) => s.id.as_deref(),
            ObjectSpec::Acl(_) => None,
            // One per cluster: every Firewall resource stands for the same object.
            ObjectSpec::Firewall(_) => Some("cluster"),
            ObjectSpec::SdnZone(s) => s.id.as_deref(),
            ObjectSpec::SdnVnet(s) => s.id.as_deref(),
            // Named by its network within its VNet, not by an id of its own.
            ObjectSpec::SdnSubnet(_) => None,
            // Named by its token id within its user's list; the graph knows it by
            // `<userid>!<token>` (`KindDef::pve_id`).
            ObjectSpec::ApiToken(t) => Some(&t.token),
        }
    }
}
