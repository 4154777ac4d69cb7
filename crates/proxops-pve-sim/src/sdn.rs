//! The SDN configuration as pve-network keeps it: the section config files
//! (`/etc/pve/sdn/zones.cfg`, `vnets.cfg`, `subnets.cfg`), which every write changes, and the
//! running configuration (`/etc/pve/sdn/.running-config`), which only `PUT /cluster/sdn`
//! (`PVE::Network::SDN::commit_config`) replaces with a copy of the files. The difference is
//! what the reads show with `pending=1` (`pending_view`, `PVE::Network::SDN::pending_config`).
//!
//! [`State::vnets`](crate::State::vnets) stays what guests see: the VNets the nodes have as
//! bridges once the apply's `reloadnetworkall` worker ran. Until the SDN config is first written
//! through the API ([`Sdn::written`]), both configurations are those VNets (a seed or an older
//! state file lists only them).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::state::{State, Vnet};

/// One section's options as the config holds them (`type` included, the id not).
pub type Section = Map<String, Value>;

/// Sections by id.
pub type Sections = BTreeMap<String, Section>;

/// The three section config files of a configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct SdnConfig {
    /// `zones.cfg`.
    pub zones: Sections,
    /// `vnets.cfg`.
    pub vnets: Sections,
    /// `subnets.cfg` (ids `<zone>-<network>-<mask>`).
    pub subnets: Sections,
}

/// Which of the files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Zones,
    Vnets,
    Subnets,
}

impl SdnConfig {
    /// One file.
    pub(crate) fn of(&self, kind: Kind) -> &Sections {
        match kind {
            Kind::Zones => &self.zones,
            Kind::Vnets => &self.vnets,
            Kind::Subnets => &self.subnets,
        }
    }
}

/// The SDN state: the files and the running configuration.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct Sdn {
    /// Whether the SDN config has been written through the API; before, both configurations
    /// are [`State::vnets`].
    pub written: bool,
    /// The running configuration's `version` (0: never applied).
    pub version: u64,
    /// The running configuration.
    pub running: SdnConfig,
    /// The section config files.
    pub files: SdnConfig,
}

impl Sdn {
    /// Whether nothing was written (the state file leaves it out).
    pub fn is_untouched(&self) -> bool {
        !self.written
    }
}

/// The configuration [`State::vnets`] stands for: each VNet's section.
fn derived(vnets: &BTreeMap<String, Vnet>) -> SdnConfig {
    let vnets = vnets
        .iter()
        .map(|(id, v)| {
            let mut s = Section::new();
            s.insert("type".into(), "vnet".into());
            s.insert("zone".into(), v.zone.clone().into());
            if let Some(t) = v.tag {
                s.insert("tag".into(), t.into());
            }
            if let Some(a) = &v.alias {
                s.insert("alias".into(), a.clone().into());
            }
            (id.clone(), s)
        })
        .collect();
    SdnConfig {
        vnets,
        ..SdnConfig::default()
    }
}

/// The running configuration and the files, as they are now.
pub(crate) fn configs(st: &State) -> (SdnConfig, SdnConfig) {
    if st.sdn.written {
        (st.sdn.running.clone(), st.sdn.files.clone())
    } else {
        let d = derived(&st.vnets);
        (d.clone(), d)
    }
}

/// The files, to be written (the configuration [`State::vnets`] stood for becomes explicit).
pub(crate) fn files_mut(st: &mut State) -> &mut SdnConfig {
    if !st.sdn.written {
        let d = derived(&st.vnets);
        st.sdn.running = d.clone();
        st.sdn.files = d;
        st.sdn.written = true;
    }
    &mut st.sdn.files
}

/// `PVE::Network::SDN::commit_config`: the files become the running configuration, its
/// version one up.
pub(crate) fn commit(st: &mut State) {
    let files = files_mut(st).clone();
    st.sdn.running = files;
    st.sdn.version += 1;
}

/// The VNets the running configuration gives the nodes (what the apply's worker brings up).
pub(crate) fn running_vnets(st: &State) -> BTreeMap<String, Vnet> {
    configs(st)
        .0
        .vnets
        .iter()
        .map(|(id, s)| {
            let vnet = Vnet {
                zone: s.get("zone").and_then(Value::as_str).unwrap_or("").into(),
                tag: s
                    .get("tag")
                    .and_then(Value::as_u64)
                    .and_then(|t| u32::try_from(t).ok()),
                alias: s.get("alias").and_then(Value::as_str).map(str::to_owned),
            };
            (id.clone(), vnet)
        })
        .collect()
}

/// The zone a bridge's VNet has in the files (pve-guest-common `check_vnet_access` reads
/// `PVE::Network::SDN::Vnets::config()`), `localnetwork` for a plain bridge.
pub(crate) fn zone_of<'a>(st: &'a State, bridge: &str) -> &'a str {
    let vnets = if st.sdn.written {
        st.sdn
            .files
            .vnets
            .get(bridge)
            .and_then(|s| s.get("zone"))
            .and_then(Value::as_str)
    } else {
        st.vnets.get(bridge).map(|v| v.zone.as_str())
    };
    vnets.unwrap_or("localnetwork")
}

/// A file's digest (cfs digests change with every write).
pub(crate) fn digest(sections: &Sections) -> String {
    crate::hashes::sha1_hex(
        serde_json::to_string(sections)
            .unwrap_or_default()
            .as_bytes(),
    )
}

/// `PVE::Network::SDN::encode_value`: node lists and DHCP ranges compare as sorted lists.
fn encode(key: &str, v: Option<&Value>) -> Option<String> {
    match v? {
        Value::Null => None,
        Value::String(s) => Some(s.clone()),
        Value::Array(items) => {
            let mut parts: Vec<String> = items
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect();
            if matches!(key, "nodes" | "exitnodes" | "dhcp-range") {
                parts.sort();
            }
            Some(parts.join(","))
        }
        other => Some(other.to_string()),
    }
}

/// `PVE::Network::SDN::pending_config`: each object with the running values, `state`
/// (`new`, `changed`, `deleted`) and `pending` (the files' values that differ, `deleted` for a
/// key the files dropped); `type` (and a subnet's `vnet`) come from the files. Each id's entry
/// depends on that id alone, so both of PVE's passes run per id.
pub(crate) fn pending_view(running: &Sections, files: &Sections) -> Sections {
    let empty = Section::new();
    let ids: std::collections::BTreeSet<&String> = running.keys().chain(files.keys()).collect();
    ids.into_iter()
        .map(|id| {
            let r = running.get(id);
            let c = files.get(id);
            (
                id.clone(),
                pending_entry(r, c.unwrap_or(&empty), c.is_some()),
            )
        })
        .collect()
}

/// One id of [`pending_view`]: `r` running (if any), `c` the files' section.
fn pending_entry(r: Option<&Section>, c: &Section, in_files: bool) -> Section {
    let empty = Section::new();
    let mut o = Section::new();
    let mut state: Option<&str> = None;
    let mut pending: Option<Section> = None;
    if let Some(r) = r {
        for (key, value) in r {
            o.insert(key.clone(), value.clone());
            if c.is_empty() {
                state = Some("deleted");
            } else if c.get(key).is_none_or(Value::is_null) {
                pending
                    .get_or_insert_with(Section::new)
                    .insert(key.clone(), "deleted".into());
                state = Some("changed");
            } else if encode(key, Some(value)) != encode(key, c.get(key)) {
                state = Some("changed");
            }
        }
        if state.is_some() {
            pending.get_or_insert_with(Section::new);
        }
    }
    if in_files {
        let r = r.unwrap_or(&empty);
        for (key, value) in c {
            let config_value = encode(key, Some(value));
            let running_value = encode(key, r.get(key));
            if key == "type" || key == "vnet" {
                o.insert(
                    key.clone(),
                    config_value.clone().map_or(Value::Null, Value::from),
                );
            } else if running_value.is_none() || config_value != running_value {
                pending
                    .get_or_insert_with(Section::new)
                    .insert(key.clone(), value.clone());
            }
            if r.is_empty() {
                state = Some("new");
            } else if running_value.is_none() && config_value.is_some() {
                state = Some("changed");
            }
        }
        if state.is_some() {
            pending.get_or_insert_with(Section::new);
        }
    }
    if let Some(s) = state {
        o.insert("state".into(), s.into());
    }
    if let Some(p) = pending {
        o.insert("pending".into(), Value::Object(p));
    }
    o
}

/// Which configuration a read shows: the files, `running=1` or `pending=1` (which wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum View {
    Files,
    Running,
    Pending,
}

impl View {
    /// The view a read's `pending` and `running` flags ask for.
    pub(crate) fn of(pending: Option<bool>, running: Option<bool>) -> View {
        if pending == Some(true) {
            View::Pending
        } else if running == Some(true) {
            View::Running
        } else {
            View::Files
        }
    }
}

/// A file as a read shows it, and its digest (`undef`, JSON null, for the running and pending
/// views, which have none).
pub(crate) fn view(st: &State, kind: Kind, which: View) -> (Sections, Value) {
    let (running, files) = configs(st);
    match which {
        View::Files => {
            let d = digest(files.of(kind));
            (files.of(kind).clone(), d.into())
        }
        View::Running => (running.of(kind).clone(), Value::Null),
        View::Pending => (pending_view(running.of(kind), files.of(kind)), Value::Null),
    }
}

/// The error of a failed `lock_sdn_config` body: `"<what>: <error>"`, a parameter exception
/// stringified as `PVE::Exception` does (`400 Parameter verification failed.` and its lines).
pub(crate) fn locked(what: &str, e: ApiError) -> ApiError {
    match e {
        ApiError::Params(errors) => {
            let mut msg = format!("{what}: 400 Parameter verification failed.\n");
            for (k, v) in errors {
                msg.push_str(&format!("{k}: {v}\n"));
            }
            ApiError::fail(msg)
        }
        other => ApiError::fail(format!("{what}: {}", other.text())),
    }
}

/// `PVE::SectionConfig::assert_if_modified`.
pub(crate) fn assert_digest(given: Option<&str>, sections: &Sections) -> Result<(), ApiError> {
    match given {
        Some(d) if d != digest(sections) => Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        )),
        _ => Ok(()),
    }
}

/// A boolean option as the section config stores it (1 or 0).
pub(crate) fn bool_value(v: &str) -> Value {
    Value::from(u8::from(crate::schema::parse_bool(v).unwrap_or(false)))
}

/// `PVE::SectionConfig::delete_from_config`: each key must be an option of the type, optional,
/// and not set in the same request.
pub(crate) fn delete_keys(
    section: &mut Section,
    options: &[(&str, bool)],
    set: &Section,
    delete: &str,
) -> Result<(), ApiError> {
    for key in crate::schema::split_list(delete) {
        let Some((_, optional)) = options.iter().find(|(k, _)| *k == key) else {
            return Err(ApiError::fail(format!("no such option '{key}'")));
        };
        if !optional {
            return Err(ApiError::fail(format!(
                "unable to delete required option '{key}'"
            )));
        }
        if set.contains_key(&key) {
            return Err(ApiError::fail(format!(
                "cannot set and delete property '{key}' at the same time!"
            )));
        }
        section.remove(&key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sec(v: Value) -> Section {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn pending_states_follow_pve() {
        let running: Sections = [
            (
                "a".into(),
                sec(json!({"type": "vnet", "zone": "z", "tag": 5})),
            ),
            ("b".into(), sec(json!({"type": "vnet", "zone": "z"}))),
        ]
        .into();
        let files: Sections = [
            (
                "a".into(),
                sec(json!({"type": "vnet", "zone": "z", "tag": 6})),
            ),
            ("c".into(), sec(json!({"type": "vnet", "zone": "y"}))),
        ]
        .into();
        let v = pending_view(&running, &files);
        assert_eq!(v["a"]["state"], "changed");
        assert_eq!(v["a"]["tag"], 5);
        assert_eq!(v["a"]["pending"], json!({"tag": 6}));
        assert_eq!(v["b"]["state"], "deleted");
        assert_eq!(v["b"]["pending"], json!({}));
        assert_eq!(v["c"]["state"], "new");
        assert_eq!(v["c"]["type"], "vnet");
        assert_eq!(v["c"]["pending"], json!({"zone": "y"}));
        assert!(v["c"].get("zone").is_none());
    }
}
