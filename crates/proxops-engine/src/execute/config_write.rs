//! Writing one guest's config, and learning what happened when the answer was lost.
//!
//! pveproxy gives up on a proxied call after 30 s (pve-http-server
//! `src/PVE/APIServer/AnyEvent.pm` `proxy_request`, `timeout => 30`) and answers `596
//! Connection timed out`, while pvedaemon goes on with the work. A synchronous write
//! (`PUT .../config`, qemu-server `src/PVE/API2/Qemu.pm` `update_vm_api` with `$sync`) does all
//! its work inside the call, disk allocation and `import-from` copies included, so:
//!
//! - qemu writes that allocate or import storage use `POST .../config` (`update_vm_async`:
//!   always a `qmconfig` worker, whose UPID is awaited); the others stay on PUT.
//! - LXC has no asynchronous config write: pve-container `src/PVE/API2/LXC/Config.pm`
//!   `update_vm` allocates a new mount point inside the PUT (`update_pct_config` →
//!   `vmconfig_apply_pending` → `apply_pending_mountpoint` → `PVE::LXC::create_disks`, under
//!   `lock_config`, no `fork_worker`), so its writes are PUTs whatever they do.
//! - When a write's answer is lost ([`PveError::outcome_unknown`]: 595/596, a reset, a
//!   timeout) the guest is read back (`GET .../pending`: values, pending values, digest) until
//!   the write shows as landed, within [`ExecOptions::outcome_wait`]: all set keys hold the
//!   written values and the deleted keys are gone → done. Keys still as they were → written
//!   again, only those, guarded by the fresh digest so that a first write still at work makes
//!   the second one fail (`checksum mismatch`) rather than do it twice; a partial landing is
//!   written on only when the write carried a digest. A key that holds neither its old nor the
//!   written value (someone else's write) ends it with [`PveError::Unsettled`]. At most
//!   [`ROUNDS`] writes follow the first.

use super::options::{ExecOptions, wait};
use crate::desired::DesiredGuest;
use crate::diff::{Change, Removal, diff};
use crate::guest_config::is_volume;
use proxops_pve::{ConfigChange, GuestRef, GuestType, PendingEntry, PveClient, PveError, Upid};
use proxops_secrets::REDACTED;
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::time::Instant;

/// Writes after the first one whose answer was lost.
pub(crate) const ROUNDS: usize = 3;

/// One config write to a guest.
pub(crate) struct Write<'a> {
    /// The guest.
    pub target: &'a GuestRef,
    /// What it should be (to tell a landed write in PVE's stored form: an allocated disk reads
    /// back as its volume).
    pub desired: &'a DesiredGuest,
    /// Keys to set.
    pub changes: &'a [Change],
    /// Keys to delete.
    pub removals: &'a [Removal],
    /// The digest of the config read the write was computed from.
    pub digest: Option<String>,
}

/// Whether writing `value` to `key` makes PVE allocate a volume (`local-lvm:8`,
/// `local-lvm:cloudinit`) or import one (`local-lvm:0,import-from=...`).
pub(crate) fn storage_work(guest: GuestType, key: &str, value: &str) -> bool {
    if !is_volume(guest, key) {
        return false;
    }
    let mut parts = value.split(',');
    let first = parts.next().unwrap_or_default();
    if parts.any(|p| p.starts_with("import-from=")) {
        return true;
    }
    let file = first
        .strip_prefix("file=")
        .or_else(|| first.strip_prefix("volume="))
        .unwrap_or(first);
    let Some((_, rest)) = file.split_once(':') else {
        return false;
    };
    rest == "cloudinit"
        || (!rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit() || b == b'.'))
}

/// Whether a write goes through `POST .../config`: qemu with storage work.
pub(crate) fn asynchronous(target: &GuestRef, changes: &[&Change]) -> bool {
    target.kind == GuestType::Qemu
        && changes
            .iter()
            .any(|c| storage_work(target.kind, &c.key, c.wire()))
}

pub(crate) fn request(
    changes: &[&Change],
    removals: &[&Removal],
    digest: Option<String>,
) -> ConfigChange {
    let mut change = ConfigChange::default();
    change.set = changes
        .iter()
        .map(|c| (c.key.clone(), c.wire().to_owned()))
        .collect();
    change.delete = removals.iter().map(|r| r.key.clone()).collect();
    change.digest = digest;
    change
}

/// Sends one write: POST (returning its task) or PUT.
async fn send(
    client: &PveClient,
    target: &GuestRef,
    changes: &[&Change],
    removals: &[&Removal],
    digest: Option<String>,
) -> Result<Option<Upid>, PveError> {
    let change = request(changes, removals, digest);
    if asynchronous(target, changes) {
        client.set_config_async(target, &change).await
    } else {
        client.set_config(target, &change).await.map(|()| None)
    }
}

/// Writes the keys and waits for the write to be done; reads back after a lost answer.
pub(crate) async fn write(
    client: &PveClient,
    w: Write<'_>,
    options: &ExecOptions,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    let changes: Vec<&Change> = w.changes.iter().collect();
    let removals: Vec<&Removal> = w.removals.iter().collect();
    let mut lost = match send(client, w.target, &changes, &removals, w.digest.clone()).await {
        Ok(Some(upid)) => return wait(client, options, upid, upids).await,
        Ok(None) => return Ok(()),
        Err(e) if e.outcome_unknown() => e,
        Err(e) => return Err(e),
    };
    for round in 0..=ROUNDS {
        // A 595 never reached the node, and a digest refusal proves the config changed: one
        // read tells. Otherwise the first write may still be at work.
        let watch = if lost.not_delivered() || lost.is_digest_mismatch() {
            Duration::ZERO
        } else {
            options.outcome_wait
        };
        let (seen, verdict) = watch_landing(client, &w, watch).await?;
        let (todo_changes, todo_removals, some_landed) = match verdict {
            Verdict::Landed => return Ok(()),
            Verdict::Foreign(what) => return Err(unsettled(&w, &what, &lost)),
            Verdict::AsBefore {
                changes,
                removals,
                some_landed,
                ..
            } => (changes, removals, some_landed),
        };
        if round == ROUNDS {
            break;
        }
        if some_landed && w.digest.is_none() {
            return Err(unsettled(
                &w,
                "part of it landed and it carried no digest to write the rest safely",
                &lost,
            ));
        }
        let Some(fresh) = seen.digest else {
            return Err(unsettled(
                &w,
                "the read-back has no digest to guard a second write",
                &lost,
            ));
        };
        tracing::info!(
            vmid = w.target.vmid,
            error = %lost,
            keys = todo_changes.len() + todo_removals.len(),
            "config write not landed after a lost answer: writing it again under the fresh digest"
        );
        match send(client, w.target, &todo_changes, &todo_removals, Some(fresh)).await {
            Ok(Some(upid)) => return wait(client, options, upid, upids).await,
            Ok(None) => return Ok(()),
            Err(e) if e.outcome_unknown() || e.is_digest_mismatch() => lost = e,
            Err(e) => return Err(e),
        }
    }
    Err(unsettled(
        &w,
        &format!("still not landed after {ROUNDS} more writes"),
        &lost,
    ))
}

fn unsettled(w: &Write<'_>, what: &str, lost: &PveError) -> PveError {
    let changes: Vec<&Change> = w.changes.iter().collect();
    let method = if asynchronous(w.target, &changes) {
        "POST"
    } else {
        "PUT"
    };
    PveError::Unsettled {
        method: method.into(),
        path: format!(
            "/nodes/{}/{}/{}/config",
            w.target.node,
            w.target.kind.as_str(),
            w.target.vmid
        ),
        detail: format!(
            "the config write's answer was lost ({lost}) and reading the guest back does not settle it: {what}; not written again"
        ),
    }
}

/// The guest as read back: what it runs with, and with its pending changes laid over.
#[derive(Debug, Default)]
struct Seen {
    current: BTreeMap<String, String>,
    merged: BTreeMap<String, String>,
    digest: Option<String>,
}

impl Seen {
    fn from_rows(rows: &[PendingEntry]) -> Seen {
        let mut seen = Seen::default();
        for row in rows {
            if row.key == "digest" {
                seen.digest = row.value.clone();
                continue;
            }
            if let Some(v) = &row.value {
                seen.current.insert(row.key.clone(), v.clone());
            }
            // A deletion waiting for the next start is the write landed.
            if !row.delete
                && let Some(v) = row.pending.as_ref().or(row.value.as_ref())
            {
                seen.merged.insert(row.key.clone(), v.clone());
            }
        }
        seen
    }
}

/// What a read-back says about a write.
#[derive(Debug)]
enum Verdict<'a> {
    /// Every key holds what was written.
    Landed,
    /// The keys not landed are as they were before the write.
    AsBefore {
        changes: Vec<&'a Change>,
        removals: Vec<&'a Removal>,
        some_landed: bool,
        /// Whether a key in it can show the write landing (a secret that was set already
        /// reads back masked, the same before and after: waiting for it shows nothing).
        telling: bool,
    },
    /// A key holds what neither it held nor the write set.
    Foreign(String),
}

fn judge<'a>(w: &Write<'a>, seen: &Seen) -> Verdict<'a> {
    let converged: Vec<String> = {
        let found = diff(w.desired, &seen.merged);
        w.changes
            .iter()
            .filter(|c| !found.changes.iter().any(|f| f.key == c.key))
            .map(|c| c.key.clone())
            .collect()
    };
    let (mut changes, mut removals, mut landed) = (Vec::new(), Vec::new(), 0usize);
    let (mut telling, mut blind) = (false, Vec::new());
    for c in w.changes {
        let merged = seen.merged.get(&c.key);
        let current = seen.current.get(&c.key);
        if c.secret.is_some() && c.live.is_some() {
            // Set before and read back masked: it cannot show whether it landed. It follows
            // the others: written again with them, taken as landed with them.
            blind.push(c);
            continue;
        }
        let done = if c.secret.is_some() {
            // Read back masked: only its presence tells.
            merged.is_some()
        } else {
            merged.map(String::as_str) == Some(c.wire())
                || (merged != c.live.as_ref() && converged.contains(&c.key))
        };
        if done {
            landed += 1;
        } else if c.secret.is_some() || current == c.live.as_ref() {
            telling = true;
            changes.push(c);
        } else {
            return Verdict::Foreign(format!(
                "{} is now {}, neither {} nor the value written",
                c.key,
                current.map_or("unset", String::as_str),
                c.live.as_deref().unwrap_or("unset")
            ));
        }
    }
    for r in w.removals {
        match seen.current.get(&r.key) {
            _ if !seen.merged.contains_key(&r.key) => landed += 1,
            Some(v) if r.live == REDACTED || *v == r.live => {
                telling = true;
                removals.push(r);
            }
            v => {
                return Verdict::Foreign(format!(
                    "{} is now {}, neither {} nor deleted",
                    r.key,
                    v.map_or("pending", String::as_str),
                    r.live
                ));
            }
        }
    }
    if changes.is_empty() && removals.is_empty() && landed > 0 {
        return Verdict::Landed;
    }
    changes.extend(blind);
    Verdict::AsBefore {
        changes,
        removals,
        some_landed: landed > 0,
        telling,
    }
}

/// Reads the guest back until the write shows as landed or not ours, polling with growing
/// pauses for at most `watch`; returns the last read and its verdict.
async fn watch_landing<'a>(
    client: &PveClient,
    w: &Write<'a>,
    watch: Duration,
) -> Result<(Seen, Verdict<'a>), PveError> {
    let deadline = Instant::now() + watch;
    let mut pause = Duration::from_millis(100);
    loop {
        let seen = Seen::from_rows(&client.guest_pending(w.target).await?);
        let verdict = judge(w, &seen);
        let now = Instant::now();
        if !matches!(verdict, Verdict::AsBefore { telling: true, .. }) || now >= deadline {
            return Ok((seen, verdict));
        }
        tokio::time::sleep(pause.min(deadline - now)).await;
        pause = pause.mul_f64(1.5).min(Duration::from_secs(3));
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::panic)]

    use super::*;
    use crate::desired::{Compare, Owned};

    fn owned(key: &str, value: &str, compare: Compare) -> Owned {
        Owned {
            key: key.into(),
            value: value.into(),
            compare,
            restart: false,
            secret: None,
        }
    }

    fn desired(owned: Vec<Owned>) -> DesiredGuest {
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

    fn change(key: &str, live: Option<&str>, value: &str) -> Change {
        Change {
            key: key.into(),
            live: live.map(str::to_owned),
            value: value.into(),
            restart: false,
            secret: None,
            removed: Vec::new(),
        }
    }

    fn row(key: &str, value: Option<&str>, pending: Option<&str>, delete: bool) -> PendingEntry {
        PendingEntry {
            key: key.into(),
            value: value.map(str::to_owned),
            pending: pending.map(str::to_owned),
            delete,
        }
    }

    fn verdict<'a>(w: &Write<'a>, rows: &[PendingEntry]) -> Verdict<'a> {
        judge(w, &Seen::from_rows(rows))
    }

    #[test]
    fn landed_as_written_in_pves_stored_form_or_pending() {
        let target = GuestRef::qemu("pve1", 100);
        let d = desired(vec![
            owned("memory", "2048", Compare::Canonical),
            owned("scsi1", "local-lvm:2", Compare::Disk),
        ]);
        let changes = [
            change("memory", Some("1024"), "2048"),
            change("scsi1", None, "local-lvm:2"),
        ];
        let removals = [Removal {
            key: "description".into(),
            live: "old".into(),
            restart: false,
        }];
        let w = Write {
            target: &target,
            desired: &d,
            changes: &changes,
            removals: &removals,
            digest: Some("d0".into()),
        };
        // A running guest: the memory waits as pending, the description's deletion too; the
        // disk reads back as its allocated volume.
        let rows = [
            row("digest", Some("d1"), None, false),
            row("memory", Some("1024"), Some("2048"), false),
            row(
                "scsi1",
                Some("local-lvm:vm-100-disk-1,size=2G"),
                None,
                false,
            ),
            row("description", Some("old"), None, true),
        ];
        assert!(matches!(verdict(&w, &rows), Verdict::Landed));
        // Nothing yet: all as before, and telling.
        let rows = [
            row("digest", Some("d0"), None, false),
            row("memory", Some("1024"), None, false),
            row("description", Some("old"), None, false),
        ];
        match verdict(&w, &rows) {
            Verdict::AsBefore {
                changes,
                removals,
                some_landed,
                telling,
            } => {
                assert_eq!((changes.len(), removals.len()), (2, 1));
                assert!(!some_landed && telling);
            }
            other => panic!("{other:?}"),
        }
        // Partly: the rest is still as before.
        let rows = [
            row("memory", Some("2048"), None, false),
            row("description", Some("old"), None, false),
        ];
        match verdict(&w, &rows) {
            Verdict::AsBefore {
                changes,
                removals,
                some_landed,
                ..
            } => {
                assert_eq!(
                    changes.iter().map(|c| &c.key).collect::<Vec<_>>(),
                    ["scsi1"]
                );
                assert_eq!(removals.len(), 1);
                assert!(some_landed);
            }
            other => panic!("{other:?}"),
        }
        // Someone else's value.
        let rows = [row("memory", Some("4096"), None, false)];
        match verdict(&w, &rows) {
            Verdict::Foreign(what) => {
                assert_eq!(
                    what,
                    "memory is now 4096, neither 1024 nor the value written"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_secret_set_before_cannot_tell_and_follows_the_others() {
        let target = GuestRef::qemu("pve1", 100);
        let d = desired(vec![owned("ciuser", "ops", Compare::Canonical)]);
        let mut password = change("cipassword", Some(REDACTED), REDACTED);
        password.secret = Some(proxops_secrets::Secret::new("pw".to_owned()));
        let changes = [change("ciuser", Some("root"), "ops"), password];
        let w = Write {
            target: &target,
            desired: &d,
            changes: &changes,
            removals: &[],
            digest: None,
        };
        let rows = [
            row("ciuser", Some("ops"), None, false),
            row("cipassword", Some("**********"), None, false),
        ];
        assert!(matches!(verdict(&w, &rows), Verdict::Landed));
        let only = std::slice::from_ref(&changes[1]);
        let w = Write { changes: only, ..w };
        assert!(matches!(
            verdict(&w, &rows),
            Verdict::AsBefore { telling: false, .. }
        ));
    }

    #[test]
    fn storage_work_is_allocation_or_import() {
        let q = GuestType::Qemu;
        assert!(storage_work(q, "scsi1", "local-lvm:8,ssd=1"));
        assert!(storage_work(
            q,
            "scsi0",
            "local-lvm:0,import-from=local:import/x.qcow2"
        ));
        assert!(storage_work(q, "ide2", "local-lvm:cloudinit"));
        assert!(storage_work(q, "efidisk0", "local-lvm:1,efitype=4m"));
        assert!(!storage_work(
            q,
            "scsi0",
            "local-lvm:vm-100-disk-0,size=8G,ssd=1"
        ));
        assert!(!storage_work(q, "ide2", "local:iso/x.iso,media=cdrom"));
        assert!(!storage_work(q, "ide2", "none,media=cdrom"));
        assert!(!storage_work(q, "hookscript", "local:1"));
        assert!(storage_work(GuestType::Lxc, "mp0", "local-lvm:8,mp=/data"));
        assert!(!storage_work(
            GuestType::Lxc,
            "mp0",
            "local-lvm:vm-200-disk-1,mp=/data,size=8G"
        ));
    }
}
