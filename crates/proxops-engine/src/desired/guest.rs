//! A guest as its manifest wants it: the config keys it owns and how each is compared, where
//! a clone comes from, and the tags that say a guest is ProxOps's and which resource it is;
//! with the helpers the VM and LXC drivers build it with.

use super::context::Context;
use proxops_model::Resource;
use proxops_model::kinds::{HaSpec, PowerState};
use proxops_pve::GuestType;
use proxops_secrets::Secret;
use std::collections::BTreeMap;

pub use crate::identity::{IDENTITY_PREFIX, OWNER_TAG, identity_tag};

/// How a live value is compared with the desired one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Compare {
    /// Equal in PVE's canonical form of the key (property strings parsed and re-rendered).
    Canonical,
    /// A property string of which only the sub-keys the manifest writes are owned; a change is
    /// written merged into the live value, keeping the sub-keys PVE or the operator set.
    SubKeys,
    /// A volume slot (EFI disk, TPM state, cloud-init drive): the storage of the volume and the
    /// sub-keys the manifest writes; a different storage is an anomaly.
    Volume,
    /// Written when the guest is created, never compared afterwards (PVE masks or forgets it).
    CreateOnly,
    /// A boolean written when the guest is created that PVE cannot change afterwards (an LXC's
    /// `unprivileged`): a live value that differs (unset reads as PVE's default, `0`) is an
    /// anomaly, never an update.
    Fixed,
    /// Written only when the live config lacks the key (a cloud-init password PVE masks), or
    /// with another change of the same guest that says so ([`crate::diff`]).
    WhenAbsent,
    /// A set of tags (`;`, `,` or spaces between them, case-insensitive): the live set must hold
    /// the desired tags (other tags are the operator's).
    Tags,
    /// A number (`cpulimit`): equal as numbers (`1.50` is `1.5`).
    Number,
    /// A set of words separated by spaces or commas, order ignored.
    WordSet,
    /// A list of words separated by spaces or commas, order kept.
    WordList,
    /// Percent-encoded SSH public keys, one per line; compared as a set of decoded keys.
    SshKeys,
    /// A disk slot: storage and size of the volume plus the sub-keys the manifest sets; growth is
    /// a resize, shrinking or moving is an anomaly.
    Disk,
    /// The cdrom slot: the ISO volume and media.
    Cdrom,
}

/// One config key a manifest sets.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Owned {
    /// The PVE config key (`memory`, `scsi0`, `net0`, ...).
    pub key: String,
    /// The value to write; [`proxops_secrets::REDACTED`] when the value is secret.
    pub value: String,
    /// How to compare it with the live value.
    pub compare: Compare,
    /// Whether a change takes effect only after the guest restarts.
    pub restart: bool,
    /// The value to write when it is secret (cloud-init password and keys from SOPS): it never
    /// shows in a plan, a log line or `Debug`.
    pub secret: Option<Secret>,
}

impl Owned {
    /// The value sent to PVE: the secret one, else [`Owned::value`]. Never print it.
    pub fn wire(&self) -> &str {
        self.secret
            .as_ref()
            .map_or(self.value.as_str(), Secret::expose)
    }
}

/// Where a cloned guest comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CloneSource {
    /// The template's vmid.
    pub vmid: u32,
    /// The template's node.
    pub node: String,
}

/// A guest as its manifest wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DesiredGuest {
    /// QEMU or LXC.
    pub guest: GuestType,
    /// Whether it is a template (TemplateVM, TemplateCT).
    pub template: bool,
    /// Its node: the pinned one, or (placed) the one the planner picked or found it on; the
    /// first listed node until then.
    pub node: String,
    /// The nodes it may run on, in manifest order: `[node]` when pinned.
    pub nodes: Vec<String>,
    /// Whether the manifest lists `nodes` (placed) rather than one `node` (pinned).
    pub placed: bool,
    /// Its vmid.
    pub vmid: u32,
    /// The power state to keep (`None` for templates, which are never started, and for HA
    /// guests whose HA state is `ignored`). An HA guest's comes from its HA state.
    pub power: Option<PowerState>,
    /// Its HA resource (`/cluster/ha/resources`), if the manifest declares one.
    pub ha: Option<HaSpec>,
    /// The template to clone from instead of creating.
    pub clone: Option<CloneSource>,
    /// Owned config keys, sorted by key.
    pub owned: Vec<Owned>,
    /// Create parameters that are not config keys, never compared (`ostemplate`).
    pub create_only: Vec<(String, String)>,
    /// Things the manifest asks for that PVE cannot express; reported, not written.
    pub warnings: Vec<String>,
    /// Its `update-policy` when it asks for snapshot-guarded updates (`snapshot: true`):
    /// a disruptive update is planned between a snapshot and a check, rolled back when either
    /// fails ([`crate::guard`]). `None`: updates are not guarded.
    pub update_policy: Option<proxops_model::kinds::UpdatePolicy>,
    /// Its own firewall (`firewall:`): options and rules, written after the guest exists
    /// ([`crate::objects`]).
    pub firewall: Option<proxops_model::kinds::firewall_spec::GuestFirewall>,
    /// The resource pool it is a member of: sent with the create, and restored by
    /// `PUT /pools/{poolid}` when the guest is found outside it.
    pub pool: Option<String>,
}

impl DesiredGuest {
    /// The config of the create call (`POST /nodes/{node}/qemu` or `/lxc`, besides `vmid` and
    /// `start`): every owned key and the create-only ones. Holds secret values: never print it.
    pub fn create_config(&self) -> BTreeMap<String, String> {
        let mut config: BTreeMap<String, String> = self
            .owned
            .iter()
            .map(|o| (o.key.clone(), o.wire().to_owned()))
            .collect();
        config.extend(self.create_only.iter().cloned());
        config
    }

    /// Whether ProxOps can create it: a container needs the template it is made from
    /// (`ostemplate`); one declared without `template` can only be taken over.
    pub fn creatable(&self) -> bool {
        self.guest != GuestType::Lxc || self.create_only.iter().any(|(k, _)| k == "ostemplate")
    }

    /// The slots whose manifest names an existing volume (`disks[].volume`, `root.volume`,
    /// `mount-points[].volume`) rather than a size to allocate: a guest is taken over with
    /// them, never created around them.
    pub fn named_volumes(&self) -> Vec<String> {
        self.owned
            .iter()
            .filter(|o| o.compare == Compare::Disk)
            .filter(|o| {
                let volume = o.value.split(',').next().unwrap_or_default();
                volume
                    .split_once(':')
                    .is_some_and(|(_, name)| name.parse::<f64>().is_err())
            })
            .map(|o| o.key.clone())
            .collect()
    }

    /// The owned key `key`.
    pub fn owned(&self, key: &str) -> Option<&Owned> {
        self.owned.iter().find(|o| o.key == key)
    }
}

/// `tags=`: the manifest's tags (lowercased, deduplicated, in order), then the ownership and
/// identity tags, joined with `;` as PVE stores them.
pub(crate) fn tags(cx: &Context<'_>, resource: &Resource, user: &[String]) -> Owned {
    let mut all: Vec<String> = Vec::new();
    let identity = identity_tag(cx.cluster, resource.kind, resource.name());
    for t in user
        .iter()
        .map(|t| t.trim().to_ascii_lowercase())
        .chain([OWNER_TAG.to_owned(), identity])
    {
        if !t.is_empty() && !all.contains(&t) {
            all.push(t);
        }
    }
    Owned {
        key: "tags".into(),
        value: all.join(";"),
        compare: Compare::Tags,
        restart: false,
        secret: None,
    }
}

pub(crate) fn owned(
    key: impl Into<String>,
    value: impl Into<String>,
    compare: Compare,
    restart: bool,
) -> Owned {
    Owned {
        key: key.into(),
        value: value.into(),
        compare,
        restart,
        secret: None,
    }
}

pub(crate) fn flag(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// The owned keys of a `pve-config:` map: each value as PVE stores it (booleans `1`/`0`),
/// property strings owned by the sub-keys written (like the typed property strings), numbers
/// compared as numbers, anything else in PVE's canonical form. A change is not marked as
/// needing a restart here: `hotplug` predicts that per key.
pub(crate) fn pve_config(
    guest: GuestType,
    config: &proxops_model::pve_config::PveConfig,
) -> Vec<Owned> {
    use proxops_model::pve_config::{Ty, key, normalize_value};
    let model = guest;
    config
        .iter()
        .map(|(k, v)| {
            let def = key(model, k, None);
            let compare = match def {
                Some(d) if d.format.sub_keys().is_some() => Compare::SubKeys,
                Some(d) if matches!(d.ty, Ty::Int | Ty::Num) => Compare::Number,
                _ => Compare::Canonical,
            };
            owned(
                k.clone(),
                normalize_value(model, k, v.as_str()),
                compare,
                false,
            )
        })
        .collect()
}
