//! What PVE says about the resources a cycle records receipts for, kept as their artifacts: a
//! downloaded file's volume id, size and format on each node (and the checksum PVE verified),
//! a guest's MAC addresses and, when it runs and can tell them, its IP addresses
//! ([`super::addresses`]). Read after executing, with one content listing per (node, storage),
//! one config read per guest and one interfaces read per guest of
//! [`super::BuiltBatch::addresses`] and [`super::BuiltBatch::awaiting`]; what cannot be read is
//! left out and the receipt is written all the same.

use super::addresses;
use super::batch::BuiltBatch;
use crate::guest_config::is_mac;
use proxops_model::kinds::reach::{FILE_ARTIFACT, MAC_ADDRESSES, PLACEMENT};
use proxops_pve::{GuestRef, GuestType, PveClient, StorageVolume};
use proxops_store::observed::Observation;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Adds the facts PVE gives to the observations of `built`, replacing artifacts of the same
/// name, and moves each awaiting receipt whose guest now reports new addresses into the batch.
pub async fn enrich(client: &PveClient, built: &mut BuiltBatch) {
    let mut listings: BTreeMap<(String, String), Option<Vec<StorageVolume>>> = BTreeMap::new();
    for obs in &mut built.batch.observations {
        let read_addresses = built.addresses.contains(&obs.subject.key());
        let kind = obs.subject.kind.as_str();
        let identity = Value::Object(obs.pve_identity.clone().into_iter().collect());
        let fact = match kind {
            "ISO" | "CTTemplate" | "DiskImage" => {
                let file = obs
                    .artifacts
                    .iter()
                    .find(|(n, _, _)| n == FILE_ARTIFACT)
                    .cloned();
                match file {
                    Some(file) => file_fact(client, file, &identity, &mut listings).await,
                    None => None,
                }
            }
            "VM" | "TemplateVM" | "LXC" | "TemplateCT" => {
                let kind = if kind.contains("VM") {
                    GuestType::Qemu
                } else {
                    GuestType::Lxc
                };
                // A placed guest has no `node` in its identity: its placement names it.
                let mut identity = identity;
                if identity.get("node").is_none()
                    && let Some((_, _, p)) = obs.artifacts.iter().find(|(n, _, _)| n == PLACEMENT)
                {
                    identity["node"] = p["node"].clone();
                }
                let macs = guest_fact(client, kind, &identity).await;
                if read_addresses && let Some(guest) = guest_of(kind, &identity) {
                    let empty = Map::new();
                    let known = macs.as_ref().and_then(|(_, _, m)| m.as_object());
                    if let Some(fact) =
                        addresses::read(client, &guest, known.unwrap_or(&empty)).await
                    {
                        replace(obs, fact);
                    }
                }
                macs
            }
            _ => None,
        };
        if let Some(fact) = fact {
            replace(obs, fact);
        }
    }
    // The awaiting receipts' guests, asked together (a bounded number at once).
    let mut awaiting = Vec::new();
    for obs in std::mem::take(&mut built.awaiting) {
        let kind = if obs.subject.kind == "LXC" {
            GuestType::Lxc
        } else {
            GuestType::Qemu
        };
        let mut identity = Value::Object(obs.pve_identity.clone().into_iter().collect());
        if identity.get("node").is_none()
            && let Some((_, _, p)) = obs.artifacts.iter().find(|(n, _, _)| n == PLACEMENT)
        {
            identity["node"] = p["node"].clone();
        }
        if let Some(guest) = guest_of(kind, &identity) {
            awaiting.push((guest, obs));
        }
    }
    let guests: Vec<GuestRef> = awaiting.iter().map(|(g, _)| g.clone()).collect();
    let mut answers = client
        .guests_interfaces(guests, addresses::CONCURRENCY)
        .await;
    for (guest, mut obs) in awaiting {
        let Some(answer) = answers.remove(&guest.vmid) else {
            continue;
        };
        // The MACs of the receipt's own `mac-addresses`: no config read.
        let empty = Map::new();
        let macs = obs
            .artifacts
            .iter()
            .find(|(n, _, _)| n == MAC_ADDRESSES)
            .and_then(|(_, _, m)| m.as_object())
            .unwrap_or(&empty);
        let Some(fact) = addresses::artifact(&guest, answer, macs) else {
            continue;
        };
        let unchanged = obs
            .artifacts
            .iter()
            .any(|(n, _, p)| n == addresses::NAME && *p == fact.2);
        if !unchanged {
            replace(&mut obs, fact);
            built.batch.observations.push(obs);
        }
    }
}

fn replace(obs: &mut Observation, (name, kind, payload): (String, String, Value)) {
    obs.artifacts.retain(|(n, _, _)| *n != name);
    obs.artifacts.push((name, kind, payload));
}

/// The guest an identity (with its node) names.
fn guest_of(kind: GuestType, identity: &Value) -> Option<GuestRef> {
    Some(GuestRef {
        node: identity.get("node")?.as_str()?.to_owned(),
        kind,
        vmid: u32::try_from(identity.get("vmid")?.as_u64()?).ok()?,
    })
}

/// The `file` artifact ([`super::downloaded_file`]) with, per node, the volume's size and format as PVE
/// lists them.
async fn file_fact(
    client: &PveClient,
    (name, artifact_kind, mut payload): (String, String, Value),
    identity: &Value,
    listings: &mut BTreeMap<(String, String), Option<Vec<StorageVolume>>>,
) -> Option<(String, String, Value)> {
    let volid = payload.get("volid")?.as_str()?.to_owned();
    let storage = identity.get("storage")?.as_str()?.to_owned();
    let nodes: Vec<String> = payload.get("nodes")?.as_object()?.keys().cloned().collect();
    let mut per_node = Map::new();
    for node in nodes {
        let key = (node.clone(), storage.clone());
        if !listings.contains_key(&key) {
            let listed = client.storage_content(&node, &storage, None).await.ok();
            listings.insert(key.clone(), listed);
        }
        let mut entry = json!({ "volid": volid });
        if let Some(vol) = listings
            .get(&key)
            .and_then(Option::as_ref)
            .and_then(|l| l.iter().find(|v| v.volid == volid))
        {
            if let Some(size) = vol.size {
                entry["size"] = json!(size);
            }
            if let Some(format) = &vol.format {
                entry["format"] = json!(format);
            }
        }
        per_node.insert(node, entry);
    }
    payload["nodes"] = Value::Object(per_node);
    Some((name, artifact_kind, payload))
}

/// The `mac-addresses` artifact: each network device's MAC, from the guest's config.
async fn guest_fact(
    client: &PveClient,
    kind: GuestType,
    identity: &Value,
) -> Option<(String, String, Value)> {
    let guest = guest_of(kind, identity)?;
    let config = client.guest_config(&guest).await.ok()?;
    let macs = mac_addresses(&config.values);
    (!macs.is_empty()).then(|| {
        (
            MAC_ADDRESSES.to_owned(),
            "MacAddresses".to_owned(),
            Value::Object(macs),
        )
    })
}

/// `netN` -> MAC: QEMU writes `virtio=BC:24:11:..,bridge=..`, LXC `name=eth0,hwaddr=BC:..`.
fn mac_addresses(config: &BTreeMap<String, String>) -> Map<String, Value> {
    config
        .iter()
        .filter(|(k, _)| {
            k.strip_prefix("net")
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|(k, v)| {
            v.split(',')
                .filter_map(|part| part.split_once('='))
                .map(|(_, value)| value)
                .find(|value| is_mac(value))
                .map(|mac| (k.clone(), json!(mac.to_ascii_uppercase())))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_come_from_qemu_and_lxc_network_devices_only() {
        let config: BTreeMap<String, String> = [
            ("net0", "virtio=bc:24:11:32:34:0a,bridge=vmbr0,tag=50"),
            (
                "net1",
                "name=eth0,bridge=vmbr0,hwaddr=BC:24:11:00:00:01,ip=dhcp",
            ),
            ("net2", "virtio,bridge=vmbr1"),
            ("netmask", "virtio=BC:24:11:00:00:02"),
            ("ipconfig0", "ip=10.0.0.2/24,gw=10.0.0.1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(
            Value::Object(mac_addresses(&config)),
            json!({"net0": "BC:24:11:32:34:0A", "net1": "BC:24:11:00:00:01"})
        );
    }
}
