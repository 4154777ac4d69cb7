//! Desired against live: which owned keys differ, in PVE's canonical forms.

use crate::desired::{Compare, DesiredGuest, IDENTITY_PREFIX, Owned};
use proxops_pve::GuestType;
use proxops_pve::props::{PropertyString, canonical_value, parse_size};
use proxops_secrets::{REDACTED, Secret};
use std::collections::BTreeMap;

/// A config key to write.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl Change {
    /// The value sent to PVE: the secret one, else [`Change::value`]. Never print it.
    pub fn wire(&self) -> &str {
        self.secret
            .as_ref()
            .map_or(self.value.as_str(), Secret::expose)
    }
}

/// A disk to grow (`PUT .../resize`).
#[derive(Debug, Clone, PartialEq, Eq)]
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
pub struct Anomaly {
    /// The config key concerned.
    pub key: String,
    /// What is wrong and what to do.
    pub message: String,
}

/// Everything that differs for one guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestDiff {
    /// Keys to write, sorted by key.
    pub changes: Vec<Change>,
    /// Disks to grow.
    pub resizes: Vec<Resize>,
    /// Differences left alone and reported.
    pub anomalies: Vec<Anomaly>,
}

impl GuestDiff {
    /// Whether nothing needs doing (anomalies aside).
    pub fn is_converged(&self) -> bool {
        self.changes.is_empty() && self.resizes.is_empty()
    }

    /// Whether a change takes effect only after a restart.
    pub fn needs_restart(&self) -> bool {
        self.changes.iter().any(|c| c.restart)
    }
}

/// Compares a desired guest with its live config (`GET .../config`, values as strings).
pub fn diff(desired: &DesiredGuest, live: &BTreeMap<String, String>) -> GuestDiff {
    let mut out = GuestDiff::default();
    for owned in &desired.owned {
        compare(desired.guest, owned, live.get(&owned.key), &mut out);
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

fn change(owned: &Owned, live: Option<&String>, value: String, out: &mut GuestDiff) {
    let (live, value) = match &owned.secret {
        // The live value of a secret key is the secret too (or PVE's mask): never shown.
        Some(_) => (live.map(|_| REDACTED.to_owned()), REDACTED.to_owned()),
        None => (live.cloned(), value),
    };
    out.changes.push(Change {
        key: owned.key.clone(),
        live,
        value,
        restart: owned.restart,
        secret: owned.secret.clone(),
    });
}

fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split([' ', ',', ';', '\t', '\n'])
        .filter(|w| !w.is_empty())
}

fn compare(guest: GuestType, owned: &Owned, live: Option<&String>, out: &mut GuestDiff) {
    let Some(current) = live else {
        match owned.compare {
            Compare::CreateOnly => {}
            // No media in the slot is what `none` asks for.
            Compare::Cdrom if owned.value.starts_with("none") => {}
            _ => change(owned, live, owned.value.clone(), out),
        }
        return;
    };
    match owned.compare {
        Compare::CreateOnly | Compare::WhenAbsent => {}
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
            // Another resource's identity tag (a clone inherits its template's) must go: it
            // would make the guest look like that resource.
            let foreign = |t: &String| t.starts_with(IDENTITY_PREFIX) && !want.contains(t);
            if want.iter().any(|t| !have.contains(t)) || have.iter().any(foreign) {
                // Keep the operator's own tags after ours.
                let mut all = want.clone();
                all.extend(
                    have.iter()
                        .filter(|t| !want.contains(t) && !foreign(t))
                        .cloned(),
                );
                change(owned, live, all.join(";"), out);
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
        Compare::SubKeys => sub_keys(guest, owned, current, out),
        Compare::Volume | Compare::Disk => volume(guest, owned, current, out),
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

/// The live value with the desired sub-keys laid over it, if both parse.
fn overlay(
    guest: GuestType,
    key: &str,
    live: &str,
    desired: &str,
    skip: &[&str],
) -> Option<(String, String)> {
    let current = PropertyString::parse_key(guest, key, live).ok()?;
    let want = PropertyString::parse_key(guest, key, desired).ok()?;
    let mut merged = current.clone();
    for (k, v) in want.entries() {
        if !skip.contains(&k.as_str()) {
            merged.set(k, v.clone());
        }
    }
    Some((current.render(), merged.render()))
}

fn sub_keys(guest: GuestType, owned: &Owned, current: &str, out: &mut GuestDiff) {
    match overlay(guest, &owned.key, current, &owned.value, &[]) {
        Some((before, after)) if before != after => {
            change(owned, Some(&current.to_owned()), after, out);
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

/// The storage of a volume value (`local-lvm:vm-100-disk-0` → `local-lvm`), or the whole value
/// for a bind mount's host path.
fn storage_of(volume: &str) -> &str {
    volume.split_once(':').map_or(volume, |(s, _)| s)
}

fn volume(guest: GuestType, owned: &Owned, current: &str, out: &mut GuestDiff) {
    let (Ok(live), Ok(want)) = (
        PropertyString::parse_key(guest, &owned.key, current),
        PropertyString::parse_key(guest, &owned.key, &owned.value),
    ) else {
        return sub_keys(guest, owned, current, out);
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
    if owned.compare == Compare::Disk {
        let wanted = want_volume
            .split_once(':')
            .and_then(|(_, gib)| gib.parse::<f64>().ok())
            .map(|gib| (gib * f64::from(1u32 << 30)) as u64);
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
    // The other sub-keys the manifest writes, laid over the live value (which keeps its volume
    // and size).
    if let Some((before, after)) = overlay(
        guest,
        &owned.key,
        current,
        &owned.value,
        &["file", "volume", "size", "import-from"],
    ) && before != after
    {
        change(owned, Some(&current.to_owned()), after, out);
    }
}

fn cdrom(guest: GuestType, owned: &Owned, current: &str, out: &mut GuestDiff) {
    let (Ok(live), Ok(want)) = (
        PropertyString::parse_key(guest, &owned.key, current),
        PropertyString::parse_key(guest, &owned.key, &owned.value),
    ) else {
        return sub_keys(guest, owned, current, out);
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
            vmid: 100,
            power: None,
            clone: None,
            owned,
            create_only: Vec::new(),
            warnings: Vec::new(),
        }
    }

    fn live(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
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
