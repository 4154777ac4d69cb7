//! Desired against live: which owned keys differ, in PVE's canonical forms.

use crate::desired::{Compare, DesiredGuest, IDENTITY_PREFIX, Owned};
use crate::hotplug::stays_pending;
use proxops_pve::props::{PropertyString, canonical_value, parse_size};
use proxops_pve::{GuestType, PendingEntry};
use proxops_secrets::{REDACTED, Secret};
use std::collections::BTreeMap;

/// A config key to write.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Change {
    /// The config key.
    pub key: String,
    /// The live value, if the key is set.
    pub live: Option<String>,
    /// The value to write (for property strings: the live value with the owned sub-keys set).
    pub value: String,
    /// Whether it takes effect only after a restart.
    pub restart: bool,
    /// The value to write when it is secret; then `live` and `value` show
    /// [`proxops_secrets::REDACTED`].
    pub secret: Option<Secret>,
    /// Parts of the live value taken out: sub-keys of a property string or tags that the
    /// previous desired document wrote and the current one does not (for tags, also another
    /// resource's identity tag). Sorted.
    pub removed: Vec<String>,
}

impl Change {
    /// The value sent to PVE: the secret one, else [`Change::value`]. Never print it.
    pub fn wire(&self) -> &str {
        self.secret
            .as_ref()
            .map_or(self.value.as_str(), Secret::expose)
    }
}

/// A config key the previous desired document owned and the current one does not: deleted
/// (`delete=<key>`), which resets it to PVE's default.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Removal {
    /// The config key.
    pub key: String,
    /// Its live value ([`REDACTED`] when it was secret).
    pub live: String,
    /// Whether the deletion takes effect only after a restart.
    pub restart: bool,
}

/// A disk to grow (`PUT .../resize`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Resize {
    /// The slot (`scsi0`, `rootfs`, `mp0`).
    pub disk: String,
    /// The live size in bytes.
    pub from: u64,
    /// The desired size in bytes.
    pub to: u64,
}

/// A difference ProxOps never fixes by itself.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Anomaly {
    /// The config key concerned.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// Everything that differs for one guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GuestDiff {
    /// Keys to write, sorted by key.
    pub changes: Vec<Change>,
    /// Keys to delete, sorted by key.
    pub removals: Vec<Removal>,
    /// Disks to grow.
    pub resizes: Vec<Resize>,
    /// Differences left alone and reported.
    pub anomalies: Vec<Anomaly>,
    /// Live keys of a family the manifest manages (`net1` beside a declared `net0`) that it does
    /// not declare, when no previous desired document tells whether ProxOps wrote them: left
    /// alone, reported. Sorted.
    pub unproven: Vec<String>,
}

impl GuestDiff {
    /// Whether nothing needs doing (anomalies aside).
    pub fn is_converged(&self) -> bool {
        self.changes.is_empty() && self.removals.is_empty() && self.resizes.is_empty()
    }

    /// Whether a change takes effect only after a restart.
    pub fn needs_restart(&self) -> bool {
        self.changes.iter().any(|c| c.restart) || self.removals.iter().any(|r| r.restart)
    }
}

/// Compares a desired guest with its live config (`GET .../config`, values as strings), not
/// knowing what ProxOps wrote before: nothing is removed.
pub fn diff(desired: &DesiredGuest, live: &BTreeMap<String, String>) -> GuestDiff {
    diff_since(desired, None, live)
}

/// Compares a desired guest with its live config, knowing from `previous` (the guest as the
/// previous desired document wanted it, `None`: no such document) which keys, sub-keys and
/// tags ProxOps wrote before. What it wrote and no longer declares is removed; disks are only
/// reported. Without `previous`, undeclared keys of a managed family are only reported.
pub fn diff_since(
    desired: &DesiredGuest,
    previous: Option<&DesiredGuest>,
    live: &BTreeMap<String, String>,
) -> GuestDiff {
    let mut out = GuestDiff::default();
    for owned in &desired.owned {
        let before = previous.and_then(|p| p.owned(&owned.key));
        let default = absent_default(desired.guest, &owned.key, live);
        // An absent key PVE runs with the default of is that default: writing it would change
        // nothing but the config's text.
        if live.get(&owned.key).is_none()
            && default.is_some_and(|d| {
                canonical_value(desired.guest, &owned.key, d)
                    == canonical_value(desired.guest, &owned.key, &owned.value)
            })
        {
            continue;
        }
        compare(desired.guest, owned, before, live.get(&owned.key), &mut out);
    }
    match previous {
        Some(p) => removals(desired, p, live, &mut out),
        None => out.unproven = unproven(desired, live),
    }
    // PVE reads a cloud-init password back masked, so whether it changed cannot be seen: it is
    // written when the guest has none, and again when the user it belongs to (`ciuser`) changes.
    // Rotating only the SOPS value therefore needs `qm set <vmid> --delete cipassword` first.
    if out.changes.iter().any(|c| c.key == "ciuser") {
        for owned in desired
            .owned
            .iter()
            .filter(|o| o.compare == Compare::WhenAbsent)
        {
            if !out.changes.iter().any(|c| c.key == owned.key) {
                change(owned, live.get(&owned.key), owned.value.clone(), &mut out);
            }
        }
    }
    out.changes.sort_by(|a, b| a.key.cmp(&b.key));
    out
}

/// The CPU model a VM without a `cpu` key runs with: `kvm64` (`qemu64` without KVM), `host`
/// on aarch64 (`max` without KVM), as qemu-server `CPUConfig.pm` `get_default_cpu_type` says.
pub fn default_cpu_type(live: &BTreeMap<String, String>) -> &'static str {
    let kvm = live.get("kvm").is_none_or(|v| v != "0");
    match (live.get("arch").map(String::as_str), kvm) {
        (Some("aarch64"), true) => "host",
        (Some("aarch64"), false) => "max",
        (_, true) => "kvm64",
        (_, false) => "qemu64",
    }
}

/// The value PVE means by an absent key, where the planner needs it: the keys a manifest must
/// declare while many configs leave them to PVE (and `proxops adopt` fills with these defaults):
/// a VM's `cpu` (qemu-server `CPUConfig.pm` `get_default_cpu_type`), `cores` 1 and `memory` 512
/// (`QemuServer.pm` `$confdesc`), a container's `memory` 512 (pve-container `LXC/Config.pm`).
fn absent_default(
    guest: GuestType,
    key: &str,
    live: &BTreeMap<String, String>,
) -> Option<&'static str> {
    match (guest, key) {
        (GuestType::Qemu, "cpu") => Some(default_cpu_type(live)),
        (GuestType::Qemu, "cores") => Some("1"),
        (_, "memory") => Some("512"),
        _ => None,
    }
}

/// What a guest cloned from a template must have written at once: [`diff`], except that the
/// tags become exactly the desired ones (the template's own tags, its identity tag among them,
/// are not the clone's) and the template's `description` is deleted unless the manifest declares
/// one. PVE copies both: qemu-server `src/PVE/API2/Qemu.pm`, `clone_vm` (`$load_and_check`
/// copies every other key, `$clonefn` overrides only `name` and a given `description`).
pub fn after_clone(desired: &DesiredGuest, live: &BTreeMap<String, String>) -> GuestDiff {
    let mut out = diff(desired, live);
    // Nothing was ours on the guest before the clone: nothing to prove.
    out.unproven.clear();
    if let Some(tags) = desired.owned("tags") {
        out.changes.retain(|c| c.key != "tags");
        let have: Vec<String> = live
            .get("tags")
            .map(|t| words(t).map(str::to_ascii_lowercase).collect())
            .unwrap_or_default();
        let want: Vec<String> = words(&tags.value).map(str::to_ascii_lowercase).collect();
        if !same_set(&have, &want) {
            let mut removed: Vec<String> =
                have.iter().filter(|t| !want.contains(t)).cloned().collect();
            removed.sort();
            removed.dedup();
            out.changes.push(Change {
                removed,
                ..new_change(tags, live.get("tags"), tags.value.clone())
            });
            out.changes.sort_by(|a, b| a.key.cmp(&b.key));
        }
    }
    if desired.owned("description").is_none()
        && let Some(d) = live.get("description")
    {
        out.removals.push(Removal {
            key: "description".into(),
            live: d.clone(),
            restart: false,
        });
    }
    out
}

/// Marks what a running guest would keep pending until its next start: the changes and
/// removals `hotplug::stays_pending` predicts so, and every owned key PVE already lists
/// as pending (`GET .../pending`). An owned key that is pending while its current value matches
/// is written again with that value, so the restart leaves it as the manifest wants it. `live` is
/// the current config (`current=1`). A stopped guest takes every change at once: nothing to do.
pub fn mark_pending(
    desired: &DesiredGuest,
    found: &mut GuestDiff,
    live: &BTreeMap<String, String>,
    pending: &[PendingEntry],
) {
    let waiting = |key: &str| pending.iter().any(|p| p.key == key && p.is_pending());
    for c in &mut found.changes {
        c.restart = c.restart
            || waiting(&c.key)
            || stays_pending(desired.guest, &c.key, Some(&c.value), live);
    }
    for r in &mut found.removals {
        r.restart =
            r.restart || waiting(&r.key) || stays_pending(desired.guest, &r.key, None, live);
    }
    for owned in &desired.owned {
        let written = found.changes.iter().any(|c| c.key == owned.key)
            || found.removals.iter().any(|r| r.key == owned.key);
        // A secret or create-only key is not read back reliably; its pending value is PVE's.
        if written
            || !waiting(&owned.key)
            || owned.secret.is_some()
            || matches!(owned.compare, Compare::CreateOnly | Compare::Fixed)
        {
            continue;
        }
        match live.get(&owned.key) {
            Some(current) => found.changes.push(Change {
                restart: true,
                ..new_change(owned, Some(current), current.clone())
            }),
            None => found.changes.push(Change {
                restart: true,
                ..new_change(owned, None, owned.value.clone())
            }),
        }
    }
    found.changes.sort_by(|a, b| a.key.cmp(&b.key));
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|t| b.contains(t)) && b.iter().all(|t| a.contains(t))
}

/// The keys `previous` owned that `desired` does not and that the guest has: deleted, except
/// disks and volumes (deleting one detaches or destroys data: an anomaly instead) and keys PVE
/// cannot change after creation.
fn removals(
    desired: &DesiredGuest,
    previous: &DesiredGuest,
    live: &BTreeMap<String, String>,
    out: &mut GuestDiff,
) {
    for before in &previous.owned {
        if desired.owned(&before.key).is_some() {
            continue;
        }
        let Some(value) = live.get(&before.key) else {
            continue;
        };
        match before.compare {
            Compare::CreateOnly | Compare::Fixed => {}
            Compare::Disk | Compare::Volume => out.anomalies.push(Anomaly {
                key: before.key.clone(),
                message: format!(
                    "{} is no longer in the manifest; ProxOps never removes a disk (it holds data): detach or delete it by hand, or declare it again",
                    before.key
                ),
            }),
            _ => out.removals.push(Removal {
                key: before.key.clone(),
                live: match before.secret {
                    Some(_) => REDACTED.to_owned(),
                    None => value.clone(),
                },
                restart: before.restart,
            }),
        }
    }
    out.removals.sort_by(|a, b| a.key.cmp(&b.key));
}

/// The family of an indexed key (`net` of `net1`), `None` for a key without an index.
fn family(key: &str) -> Option<&str> {
    let stem = key.trim_end_matches(|c: char| c.is_ascii_digit());
    (stem.len() < key.len() && !stem.is_empty()).then_some(stem)
}

/// Live indexed keys the manifest does not declare, of a family it declares a key of.
fn unproven(desired: &DesiredGuest, live: &BTreeMap<String, String>) -> Vec<String> {
    let families: Vec<&str> = desired
        .owned
        .iter()
        .filter_map(|o| family(&o.key))
        .collect();
    live.keys()
        .filter(|k| desired.owned(k).is_none())
        .filter(|k| family(k).is_some_and(|f| families.contains(&f)))
        .cloned()
        .collect()
}

fn change(owned: &Owned, live: Option<&String>, value: String, out: &mut GuestDiff) {
    out.changes.push(new_change(owned, live, value));
}

fn new_change(owned: &Owned, live: Option<&String>, value: String) -> Change {
    let (live, value) = match &owned.secret {
        // The live value of a secret key is the secret too (or PVE's mask): never shown.
        Some(_) => (live.map(|_| REDACTED.to_owned()), REDACTED.to_owned()),
        None => (live.cloned(), value),
    };
    Change {
        key: owned.key.clone(),
        live,
        value,
        restart: owned.restart,
        secret: owned.secret.clone(),
        removed: Vec::new(),
    }
}

/// A change that also takes `removed` out of the live value.
fn change_removing(
    owned: &Owned,
    live: &str,
    value: String,
    removed: Vec<String>,
    out: &mut GuestDiff,
) {
    out.changes.push(Change {
        removed,
        ..new_change(owned, Some(&live.to_owned()), value)
    });
}

pub(crate) fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split([' ', ',', ';', '\t', '\n'])
        .filter(|w| !w.is_empty())
}

/// Compares one owned key; `before` is the same key as the previous desired document owned it.
fn compare(
    guest: GuestType,
    owned: &Owned,
    before: Option<&Owned>,
    live: Option<&String>,
    out: &mut GuestDiff,
) {
    if owned.compare == Compare::Fixed {
        // Unset is PVE's schema default, 0 (pve-container `src/PVE/LXC/Config.pm`).
        let have = live.map_or("0", String::as_str);
        let truth = |v: &str| matches!(v, "1" | "true" | "yes" | "on");
        if truth(have) != truth(&owned.value) {
            let mode = |b: bool| if b { "unprivileged" } else { "privileged" };
            out.anomalies.push(Anomaly {
                key: owned.key.clone(),
                message: format!(
                    "the container is {} but the manifest wants it {} (`{}: {}`); PVE cannot change it on an existing container: declare `{}: {}` to keep it, or recreate the container",
                    mode(truth(have)),
                    mode(truth(&owned.value)),
                    owned.key,
                    truth(&owned.value),
                    owned.key,
                    truth(have),
                ),
            });
        }
        return;
    }
    let Some(current) = live else {
        match owned.compare {
            Compare::CreateOnly | Compare::Fixed => {}
            // No media in the slot is what `none` asks for.
            Compare::Cdrom if owned.value.starts_with("none") => {}
            _ => change(owned, live, owned.value.clone(), out),
        }
        return;
    };
    match owned.compare {
        Compare::CreateOnly | Compare::Fixed | Compare::WhenAbsent => {}
        Compare::Canonical => {
            if canonical_value(guest, &owned.key, current)
                != canonical_value(guest, &owned.key, &owned.value)
            {
                change(owned, live, owned.value.clone(), out);
            }
        }
        Compare::Tags => {
            let have: Vec<String> = words(current).map(str::to_ascii_lowercase).collect();
            let want: Vec<String> = words(&owned.value).map(str::to_ascii_lowercase).collect();
            // Tags the previous document declared and this one does not were ProxOps's: they go.
            // Tags no document declared are the operator's and stay.
            let dropped: Vec<String> = before
                .map(|b| {
                    words(&b.value)
                        .map(str::to_ascii_lowercase)
                        .filter(|t| !want.contains(t))
                        .collect()
                })
                .unwrap_or_default();
            // Another resource's identity tag (a clone inherits its template's) must go: it
            // would make the guest look like that resource.
            let foreign = |t: &String| {
                !want.contains(t) && (t.starts_with(IDENTITY_PREFIX) || dropped.contains(t))
            };
            if want.iter().any(|t| !have.contains(t)) || have.iter().any(foreign) {
                // Keep the operator's own tags after ours.
                let mut all = want.clone();
                all.extend(
                    have.iter()
                        .filter(|t| !want.contains(t) && !foreign(t))
                        .cloned(),
                );
                let mut removed: Vec<String> =
                    have.iter().filter(|t| foreign(t)).cloned().collect();
                removed.sort();
                removed.dedup();
                change_removing(owned, current, all.join(";"), removed, out);
            }
        }
        Compare::WordSet => {
            let mut have: Vec<&str> = words(current).collect();
            let mut want: Vec<&str> = words(&owned.value).collect();
            have.sort_unstable();
            have.dedup();
            want.sort_unstable();
            want.dedup();
            if have != want {
                change(owned, live, owned.value.clone(), out);
            }
        }
        Compare::Number => {
            let n = |v: &str| v.trim().parse::<f64>().ok();
            let same = match (n(current), n(&owned.value)) {
                (Some(a), Some(b)) => a == b,
                _ => current.trim() == owned.value.trim(),
            };
            if !same {
                change(owned, live, owned.value.clone(), out);
            }
        }
        Compare::WordList => {
            if !words(current).eq(words(&owned.value)) {
                change(owned, live, owned.value.clone(), out);
            }
        }
        Compare::SshKeys => {
            // Compared decoded; a secret set is compared through `wire` and never printed.
            if ssh_key_set(current) != ssh_key_set(owned.wire()) {
                change(owned, live, owned.value.clone(), out);
            }
        }
        Compare::SubKeys => sub_keys(guest, owned, before, current, out),
        Compare::Volume | Compare::Disk => volume(guest, owned, before, current, out),
        Compare::Cdrom => cdrom(guest, owned, current, out),
    }
}

/// Decoded, trimmed, non-empty key lines, sorted and deduplicated.
fn ssh_key_set(encoded: &str) -> Vec<String> {
    let bytes = encoded.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (
            bytes[i],
            bytes.get(i + 1).and_then(|b| hex(*b)),
            bytes.get(i + 2).and_then(|b| hex(*b)),
        ) {
            (b'%', Some(h), Some(l)) => {
                decoded.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                decoded.push(b);
                i += 1;
            }
        }
    }
    let text = String::from_utf8_lossy(&decoded);
    let mut keys: Vec<String> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// Sub-keys PVE fills in itself when they are absent: taking one out would not reset it but
/// make up a new value (a new MAC address changes the NIC's identity), so they are never removed.
const SELF_FILLED: &[&str] = &["macaddr", "hwaddr"];

/// The live value laid over: the desired sub-keys set, and the sub-keys the previous desired
/// value (`before`) wrote and the desired one does not taken out (except `skip`, the default key
/// and [`SELF_FILLED`]). `None` when a value does not parse. Returns the live value and the
/// merged one, rendered, and the sub-keys taken out.
fn overlay(
    guest: GuestType,
    key: &str,
    live: &str,
    desired: &str,
    before: Option<&Owned>,
    skip: &[&str],
) -> Option<(String, String, Vec<String>)> {
    let current = PropertyString::parse_key(guest, key, live).ok()?;
    let want = PropertyString::parse_key(guest, key, desired).ok()?;
    let mut merged = current.clone();
    for (k, v) in want.entries() {
        if !skip.contains(&k.as_str()) {
            merged.set(k, v.clone());
        }
    }
    let mut removed = Vec::new();
    // A passed-through device is a host device or a mapping, never both (qemu-server
    // `PCI.pm` `parse_hostpci`: "Cannot set both 'host' and 'mapping'"): the one the manifest
    // names replaces the other.
    let family = key.trim_end_matches(|c: char| c.is_ascii_digit());
    if guest == GuestType::Qemu && matches!(family, "hostpci" | "usb") {
        for (have, other) in [("host", "mapping"), ("mapping", "host")] {
            if want.get(have).is_some() && merged.remove(other).is_some() {
                removed.push(other.to_owned());
            }
        }
    }
    // A previous value that does not parse proves nothing about its sub-keys.
    if let Some(previous) =
        before.and_then(|b| PropertyString::parse_key(guest, key, &b.value).ok())
    {
        let default_key = want.format().default_key;
        for k in previous.entries().keys() {
            let k = k.as_str();
            if want.get(k).is_none()
                && !skip.contains(&k)
                && !SELF_FILLED.contains(&k)
                && default_key != Some(k)
                && merged.remove(k).is_some()
            {
                removed.push(k.to_owned());
            }
        }
    }
    removed.sort();
    removed.dedup();
    Some((current.render(), merged.render(), removed))
}

fn sub_keys(
    guest: GuestType,
    owned: &Owned,
    before: Option<&Owned>,
    current: &str,
    out: &mut GuestDiff,
) {
    let respelled;
    let owned = match live_mac_spelling(&owned.key, &owned.value, current) {
        Some(value) => {
            respelled = Owned {
                value,
                ..owned.clone()
            };
            &respelled
        }
        None => owned,
    };
    match overlay(guest, &owned.key, current, &owned.value, before, &[]) {
        Some((live, merged, removed)) if live != merged => {
            change_removing(owned, current, merged, removed, out);
        }
        Some(_) => {}
        None => {
            if canonical_value(guest, &owned.key, current)
                != canonical_value(guest, &owned.key, &owned.value)
            {
                change(owned, Some(&current.to_owned()), owned.value.clone(), out);
            }
        }
    }
}

/// The desired NIC value with the live MAC's spelling when both name the same address in
/// another case: PVE takes and keeps either (`pve-mac-addr` is case-insensitive), so case
/// alone is never a change.
fn live_mac_spelling(key: &str, want: &str, live: &str) -> Option<String> {
    if !key.starts_with("net") {
        return None;
    }
    let mac = |v: &str| {
        v.split(',')
            .filter_map(|p| p.split_once('='))
            .map(|(_, x)| x)
            .find(|x| crate::guest_config::is_mac(x))
            .map(str::to_owned)
    };
    let (w, l) = (mac(want)?, mac(live)?);
    (w != l && w.eq_ignore_ascii_case(&l)).then(|| want.replacen(&w, &l, 1))
}

/// The storage of a volume value (`local-lvm:vm-100-disk-0` → `local-lvm`), or the whole value
/// for a bind mount's host path.
fn storage_of(volume: &str) -> &str {
    volume.split_once(':').map_or(volume, |(s, _)| s)
}

fn volume(
    guest: GuestType,
    owned: &Owned,
    before: Option<&Owned>,
    current: &str,
    out: &mut GuestDiff,
) {
    let (Ok(live), Ok(want)) = (
        PropertyString::parse_key(guest, &owned.key, current),
        PropertyString::parse_key(guest, &owned.key, &owned.value),
    ) else {
        return sub_keys(guest, owned, before, current, out);
    };
    let live_volume = live.default_value().unwrap_or_default();
    let want_volume = want.default_value().unwrap_or_default();
    let (from, to) = (storage_of(live_volume), storage_of(want_volume));
    if from != to {
        out.anomalies.push(Anomaly {
            key: owned.key.clone(),
            message: format!(
                "{} is on storage `{from}`, the manifest says `{to}`: moving a volume is not done automatically (use `qm disk move` / `pct move-volume`, or change the manifest)",
                owned.key
            ),
        });
        return;
    }
    // A manifest that names the slot's volume (`disks[].volume`) keeps exactly that one: a slot
    // holding another is reported, never swapped (nor the other volume detached or deleted).
    let allocation = want_volume
        .split_once(':')
        .and_then(|(_, gib)| gib.parse::<f64>().ok());
    if owned.compare == Compare::Disk && allocation.is_none() && live_volume != want_volume {
        out.anomalies.push(Anomaly {
            key: owned.key.clone(),
            message: format!(
                "{} holds volume `{live_volume}`, the manifest names `{want_volume}`: ProxOps never swaps a slot's volume (attach the named one by hand, or change `volume`)",
                owned.key
            ),
        });
        return;
    }
    if owned.compare == Compare::Disk {
        let wanted = match allocation {
            Some(gib) => Some((gib * f64::from(1u32 << 30)) as u64),
            None => want.get("size").and_then(parse_size),
        };
        let have = live.get("size").and_then(parse_size);
        if let (Some(to), Some(from)) = (wanted, have) {
            if to > from {
                out.resizes.push(Resize {
                    disk: owned.key.clone(),
                    from,
                    to,
                });
            } else if to < from {
                out.anomalies.push(Anomaly {
                    key: owned.key.clone(),
                    message: format!(
                        "{} is {from} bytes, the manifest says {to}: disks are never shrunk",
                        owned.key
                    ),
                });
            }
        }
    }
    // The other sub-keys the manifest writes, laid over the live value (which keeps its volume,
    // size and format: PVE converts a volume only by moving it, `qm disk move --format`).
    if let Some((live, merged, removed)) = overlay(
        guest,
        &owned.key,
        current,
        &owned.value,
        before,
        &["file", "volume", "size", "import-from", "format"],
    ) && live != merged
    {
        change_removing(owned, current, merged, removed, out);
    }
}

fn cdrom(guest: GuestType, owned: &Owned, current: &str, out: &mut GuestDiff) {
    let (Ok(live), Ok(want)) = (
        PropertyString::parse_key(guest, &owned.key, current),
        PropertyString::parse_key(guest, &owned.key, &owned.value),
    ) else {
        return sub_keys(guest, owned, None, current, out);
    };
    let same_media = live.default_value() == want.default_value()
        && live.get("media").unwrap_or("cdrom") == want.get("media").unwrap_or("cdrom");
    if !same_media {
        change(owned, Some(&current.to_owned()), owned.value.clone(), out);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::desired::owned;

    fn secret(key: &str, wire: &str, compare: Compare) -> Owned {
        Owned {
            secret: Some(Secret::new(wire)),
            ..owned(key, REDACTED, compare, false)
        }
    }

    fn guest(owned: Vec<Owned>) -> DesiredGuest {
        DesiredGuest {
            guest: GuestType::Qemu,
            template: false,
            node: "pve1".into(),
            nodes: vec!["pve1".into()],
            placed: false,
            ha: None,
            vmid: 100,
            power: None,
            clone: None,
            owned,
            create_only: Vec::new(),
            warnings: Vec::new(),
            update_policy: None,
            firewall: None,
            pool: None,
        }
    }

    fn live(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_description_read_back_with_pves_line_ends_is_converged() {
        // pve-container reads `#notes` back as `notes\n`, qemu-server trims: neither is a change.
        for kind in [GuestType::Lxc, GuestType::Qemu] {
            let desired = DesiredGuest {
                guest: kind,
                ..guest(vec![owned(
                    "description",
                    "notes",
                    Compare::Canonical,
                    false,
                )])
            };
            let found = diff(&desired, &live(&[("description", "notes\n")]));
            assert!(found.is_converged(), "{kind:?}: {found:?}");
            let found = diff(&desired, &live(&[("description", "other\n")]));
            assert_eq!(found.changes.len(), 1, "{kind:?}");
        }
    }

    #[test]
    fn sub_keys_written_before_are_taken_out_but_never_a_mac_or_the_operators() {
        let before = guest(vec![
            owned(
                "net0",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=10",
                Compare::SubKeys,
                false,
            ),
            owned("scsi0", "local-lvm:4,iothread=1,ssd=1", Compare::Disk, true),
        ]);
        let now = guest(vec![
            owned("net0", "virtio,bridge=vmbr0", Compare::SubKeys, false),
            owned("scsi0", "local-lvm:4", Compare::Disk, true),
        ]);
        let state = live(&[
            (
                "net0",
                "virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,queues=4,tag=10",
            ),
            ("scsi0", "local-lvm:vm-100-disk-0,iothread=1,size=4G,ssd=1"),
        ]);
        let found = diff_since(&now, Some(&before), &state);
        let got: Vec<(&str, &str, Vec<String>)> = found
            .changes
            .iter()
            .map(|c| (c.key.as_str(), c.value.as_str(), c.removed.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "net0",
                    "virtio=BC:24:11:00:00:01,bridge=vmbr0,queues=4",
                    vec!["firewall".to_owned(), "tag".to_owned()]
                ),
                (
                    "scsi0",
                    "local-lvm:vm-100-disk-0,size=4G",
                    vec!["iothread".to_owned(), "ssd".to_owned()]
                ),
            ]
        );
        assert!(found.removals.is_empty() && found.anomalies.is_empty());
        // Not knowing what was written before, nothing is taken out.
        assert!(diff(&now, &state).is_converged());
    }

    #[test]
    fn a_named_volume_is_never_swapped_grows_with_size_and_never_shrinks() {
        let named = |size: &str| {
            guest(vec![owned(
                "scsi0",
                format!("local-lvm:vm-100-disk-0,size={size},iothread=1"),
                Compare::Disk,
                true,
            )])
        };
        let holds = |volume: &str| live(&[("scsi0", &format!("{volume},iothread=1,size=8G"))]);
        // The slot holds the named volume at its size: nothing to do.
        assert!(diff(&named("8G"), &holds("local-lvm:vm-100-disk-0")).is_converged());
        // Another volume in the slot: an anomaly naming both, no write, no resize.
        let other = diff(&named("8G"), &holds("local-lvm:vm-100-disk-3"));
        assert!(other.changes.is_empty() && other.resizes.is_empty() && other.removals.is_empty());
        assert_eq!(other.anomalies.len(), 1);
        assert!(
            other.anomalies[0]
                .message
                .contains("`local-lvm:vm-100-disk-3`")
        );
        assert!(other.anomalies[0].message.contains("never swaps"));
        // Grown by `size`, never shrunk.
        let grow = diff(&named("16G"), &holds("local-lvm:vm-100-disk-0"));
        assert_eq!(
            grow.resizes,
            [Resize {
                disk: "scsi0".into(),
                from: 8 << 30,
                to: 16 << 30
            }]
        );
        assert!(grow.changes.is_empty());
        let shrink = diff(&named("4G"), &holds("local-lvm:vm-100-disk-0"));
        assert!(shrink.resizes.is_empty() && shrink.changes.is_empty());
        assert!(shrink.anomalies[0].message.contains("never shrunk"));
    }

    #[test]
    fn a_mapping_replaces_a_raw_device_and_the_other_way_round() {
        let now = guest(vec![
            owned("hostpci0", "mapping=hba,pcie=1", Compare::SubKeys, true),
            owned("usb0", "0951:1666", Compare::SubKeys, true),
        ]);
        let state = live(&[
            ("hostpci0", "0000:03:00.0,pcie=1,x-vga=1"),
            ("usb0", "mapping=stick,usb3=1"),
        ]);
        let found = diff(&now, &state);
        let got: Vec<(&str, &str, Vec<String>)> = found
            .changes
            .iter()
            .map(|c| (c.key.as_str(), c.value.as_str(), c.removed.clone()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "hostpci0",
                    "mapping=hba,pcie=1,x-vga=1",
                    vec!["host".to_owned()]
                ),
                ("usb0", "0951:1666,usb3=1", vec!["mapping".to_owned()]),
            ]
        );
        // PVE's canonical form: booleans as parsed, sub-keys in any order.
        let same = live(&[
            ("hostpci0", "pcie=true,mapping=hba"),
            ("usb0", "host=0951:1666"),
        ]);
        assert!(diff(&now, &same).is_converged(), "{:#?}", diff(&now, &same));
    }

    #[test]
    fn keys_owned_before_are_deleted_except_volumes_and_create_only_ones() {
        let before = guest(vec![
            owned("efidisk0", "local-lvm:1,efitype=4m", Compare::Volume, true),
            owned("unprivileged", "1", Compare::CreateOnly, false),
            secret("cipassword", "pw-1", Compare::WhenAbsent),
            owned("onboot", "1", Compare::Canonical, false),
            owned("numa", "1", Compare::Canonical, true),
            owned("startup", "order=2", Compare::SubKeys, false),
        ]);
        let now = guest(vec![owned("numa", "1", Compare::Canonical, true)]);
        let state = live(&[
            ("efidisk0", "local-lvm:vm-100-disk-1,efitype=4m,size=4M"),
            ("unprivileged", "1"),
            ("cipassword", "**********"),
            ("onboot", "1"),
            ("numa", "1"),
            ("hookscript", "local:snippets/x.pl"),
        ]);
        let found = diff_since(&now, Some(&before), &state);
        // `startup` is not on the guest; `hookscript` was never ProxOps's.
        assert_eq!(
            found.removals,
            [
                Removal {
                    key: "cipassword".into(),
                    live: REDACTED.into(),
                    restart: false
                },
                Removal {
                    key: "onboot".into(),
                    live: "1".into(),
                    restart: false
                },
            ]
        );
        assert!(found.changes.is_empty() && !found.needs_restart());
        let keys: Vec<&str> = found.anomalies.iter().map(|a| a.key.as_str()).collect();
        assert_eq!(keys, ["efidisk0"]);
    }

    /// A `pve-config` key is owned like a typed one: drift is restored and a key dropped from
    /// the manifest is deleted. Keys no document owned (raw `args`, PVE's `meta`, `lxc.*`
    /// lines) are never touched.
    #[test]
    fn pve_config_keys_are_owned_and_unowned_keys_are_never_removed() {
        let mut config = proxops_model::pve_config::PveConfig::new();
        config.insert("keyboard".into(), "de".into());
        config.insert("cpulimit".into(), "1.50".into());
        config.insert("spice_enhancements".into(), "foldersharing=1".into());
        let before = guest(crate::desired::pve_config(GuestType::Qemu, &config));
        let state = live(&[
            ("keyboard", "fr"),
            ("cpulimit", "1.5"),
            ("spice_enhancements", "foldersharing=0,videostreaming=all"),
            ("args", "-cpu host"),
            ("meta", "creation-qemu=9.2.0"),
        ]);
        let found = diff(&before, &state);
        let got: Vec<(&str, &str)> = found
            .changes
            .iter()
            .map(|c| (c.key.as_str(), c.value.as_str()))
            .collect();
        // A number compares as a number; a property string keeps the sub-keys it does not own.
        assert_eq!(
            got,
            [
                ("keyboard", "de"),
                ("spice_enhancements", "foldersharing=1,videostreaming=all"),
            ]
        );
        config.remove("keyboard");
        let now = guest(crate::desired::pve_config(GuestType::Qemu, &config));
        let found = diff_since(&now, Some(&before), &state);
        let removed: Vec<&str> = found.removals.iter().map(|r| r.key.as_str()).collect();
        assert_eq!(removed, ["keyboard"]);
    }

    #[test]
    fn without_a_previous_document_only_managed_families_are_reported() {
        let now = guest(vec![
            owned("net0", "virtio,bridge=vmbr0", Compare::SubKeys, false),
            owned("ipconfig0", "ip=dhcp", Compare::SubKeys, false),
            owned("onboot", "1", Compare::Canonical, false),
        ]);
        let state = live(&[
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
            ("ipconfig0", "ip=dhcp"),
            ("onboot", "1"),
            ("net3", "e1000=BC:24:11:00:00:02,bridge=vmbr1"),
            ("ipconfig3", "ip=dhcp"),
            ("serial0", "socket"),
            ("protection", "1"),
        ]);
        let found = diff(&now, &state);
        assert!(found.is_converged() && found.removals.is_empty());
        assert_eq!(found.unproven, ["ipconfig3", "net3"]);
    }

    /// PVE takes and keeps a MAC in either case (`PVE::JSONSchema` `pve-mac-addr`); adopt writes
    /// the live spelling and the desired value writes it upper case: the same address is
    /// never a change (a NIC rewrite a running VM would hot-plug), another one still is.
    #[test]
    fn a_mac_in_another_case_is_the_same_address() {
        let d = guest(vec![owned(
            "net0",
            "virtio=BC:24:11:0A:0B:0C,bridge=vmbr0",
            Compare::SubKeys,
            false,
        )]);
        let same = live(&[("net0", "virtio=bc:24:11:0a:0b:0c,bridge=vmbr0")]);
        let found = diff(&d, &same);
        assert!(found.is_converged(), "{found:?}");
        let other = live(&[("net0", "virtio=bc:24:11:0a:0b:0d,bridge=vmbr0")]);
        let found = diff(&d, &other);
        assert_eq!(found.changes.len(), 1, "{found:?}");
        assert_eq!(
            found.changes[0].value,
            "virtio=BC:24:11:0A:0B:0C,bridge=vmbr0"
        );
    }

    #[test]
    fn cloud_init_secrets_are_written_redacted_and_do_not_drift() {
        let d = guest(vec![
            secret("cipassword", "pw-1", Compare::WhenAbsent),
            secret("sshkeys", "ssh-ed25519%20AAAA%20a%40b", Compare::SshKeys),
            owned("ciuser", "debian", Compare::Canonical, false),
        ]);
        // Absent: both written, shown redacted, sent in clear.
        let found = diff(&d, &live(&[("ciuser", "debian")]));
        assert_eq!(found.changes.len(), 2);
        for c in &found.changes {
            assert_eq!(c.value, REDACTED);
            assert!(!format!("{c:?}").contains("pw-1"));
        }
        assert_eq!(found.changes[0].wire(), "pw-1");
        // PVE's mask and the same keys, encoded differently: converged.
        let converged = live(&[
            ("ciuser", "debian"),
            ("cipassword", "**********"),
            ("sshkeys", "ssh-ed25519 AAAA a@b"),
        ]);
        assert!(diff(&d, &converged).is_converged());
        // A new user gets the password again.
        let mut other = converged.clone();
        other.insert("ciuser".into(), "root".into());
        let keys: Vec<String> = diff(&d, &other)
            .changes
            .into_iter()
            .map(|c| c.key)
            .collect();
        assert_eq!(keys, ["cipassword", "ciuser"]);
        // A different key: redacted on both sides.
        let mut drift = converged;
        drift.insert("sshkeys".into(), "ssh-ed25519%20BBBB".into());
        let c = &diff(&d, &drift).changes[0];
        assert_eq!(
            (c.live.as_deref(), c.value.as_str()),
            (Some(REDACTED), REDACTED)
        );
    }
}
