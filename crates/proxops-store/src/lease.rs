//! Per-cluster leases: one process at a time reconciles a cluster.
//!
//! A lease is the ref `refs/proxops/leases/<cluster>`, pointing at a parentless commit whose tree
//! holds one document, `lease.yaml` ([`LeaseRecord`]): who holds it, its fencing token, and when
//! it expires. Acquiring, renewing and releasing are compare-and-swap updates of that ref, so two
//! processes on one repository cannot both hold it.
//!
//! A holder that dies leaves its lease behind. It is taken over when it expired (holders renew
//! well before expiry), or at once when it names this host and a process id that no longer
//! runs (a crashed or killed agent restarted on the same machine). [`Store::break_lease`] removes
//! any lease, for an operator who knows its holder is gone. With a remote
//! ([`Store::with_remote`]) the remote's lease ref is the one that counts, moved by
//! `git push --force-with-lease`, so agents on different machines exclude each other too.

use crate::documents::utc_timestamp;
use crate::error::{Result, StoreError};
use crate::git;
use crate::id::ObjectId;
use crate::store::Store;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The file of a lease commit.
const LEASE_FILE: &str = "lease.yaml";

/// The full ref name of a cluster's lease.
pub fn lease_ref(cluster: &str) -> Result<String> {
    crate::refs::check_segment(cluster, "cluster name")?;
    Ok(format!("refs/proxops/leases/{cluster}"))
}

/// Who asks for a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// A name for people (`agent@host`, `apply@host`).
    pub name: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
}

impl Holder {
    /// This process, named `name`.
    pub fn this_process(name: &str) -> Holder {
        Holder {
            name: name.to_owned(),
            host: hostname(),
            pid: std::process::id(),
        }
    }
}

/// The document a lease commit holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaseRecord {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `ClusterLease`.
    pub kind: String,
    /// The cluster.
    pub cluster: String,
    /// The holder's name.
    pub holder: String,
    /// The holder's host.
    pub host: String,
    /// The holder's process id.
    pub pid: u32,
    /// A fencing token, new at each acquisition.
    pub token: String,
    /// When it was acquired (RFC 3339, UTC).
    pub acquired: String,
    /// When it was last renewed.
    pub renewed: String,
    /// When it expires unless renewed.
    pub expires: String,
}

impl LeaseRecord {
    /// Whether it has expired at `now`. An unreadable expiry counts as expired: a lease nobody
    /// can interpret must not block a cluster forever.
    pub fn expired_at(&self, now: SystemTime) -> bool {
        parse_utc(&self.expires).is_none_or(|t| t <= now)
    }

    /// Whether its holder is a process of this host that no longer runs.
    pub fn holder_is_dead(&self) -> bool {
        self.host == hostname() && self.pid != std::process::id() && !process_runs(self.pid)
    }
}

/// A lease this process holds. Renew it before it expires; release it when done. Dropping it
/// releases it too (a lease taken over in between is left alone); only a process that dies
/// leaves its lease behind.
#[derive(Debug)]
pub struct Lease {
    store: Store,
    refname: String,
    commit: ObjectId,
    record: LeaseRecord,
    released: bool,
    taken_over: Option<LeaseRecord>,
}

impl Lease {
    /// What it records.
    pub fn record(&self) -> &LeaseRecord {
        &self.record
    }

    /// The lease of another holder this acquisition replaced (it had expired, or its process
    /// on this host was gone), if any.
    pub fn taken_over(&self) -> Option<&LeaseRecord> {
        self.taken_over.as_ref()
    }

    /// Extends it by `ttl` from now. Fails with [`StoreError::Conflict`] when it was broken or
    /// taken over in between (the holder must stop).
    pub fn renew(&mut self, ttl: Duration) -> Result<()> {
        let now = SystemTime::now();
        let mut record = self.record.clone();
        record.renewed = utc_timestamp(now);
        record.expires = utc_timestamp(now + ttl);
        let repo = self.store.repo();
        let (commit, tree) = write_record(&repo, &record, "Renew")?;
        self.store.move_ref(
            &repo,
            &self.refname,
            Some(self.commit),
            (commit, tree),
            "proxops: renew lease",
        )?;
        self.commit = commit;
        self.record = record;
        Ok(())
    }

    /// Gives it up. A lease that was taken over in between is left alone (and reported as a
    /// [`StoreError::Conflict`]).
    pub fn release(mut self) -> Result<()> {
        self.released = true;
        delete_lease_ref(&self.store, &self.refname, self.commit)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.released {
            let _ = delete_lease_ref(&self.store, &self.refname, self.commit);
        }
    }
}

impl Store {
    /// Takes the lease of `cluster` for `ttl`, unless another live holder has it
    /// ([`StoreError::Leased`]).
    pub fn acquire_lease(&self, cluster: &str, holder: &Holder, ttl: Duration) -> Result<Lease> {
        // A lost race is retried: the next look then finds the winner's lease.
        let mut attempt = 0;
        loop {
            match self.try_acquire_lease(cluster, holder, ttl) {
                Err(e) if e.is_retryable() && attempt < 4 => attempt += 1,
                other => return other,
            }
        }
    }

    fn try_acquire_lease(&self, cluster: &str, holder: &Holder, ttl: Duration) -> Result<Lease> {
        let refname = lease_ref(cluster)?;
        let repo = self.repo();
        let now = SystemTime::now();
        let current = self.current_head(&repo, &refname)?;
        let mut taken_over = None;
        if let Some(commit) = current {
            match read_record(&repo, &refname, commit) {
                Ok(existing) => {
                    let ours = existing.host == holder.host && existing.pid == holder.pid;
                    if !ours && !existing.expired_at(now) && !existing.holder_is_dead() {
                        return Err(StoreError::Leased {
                            cluster: cluster.to_owned(),
                            holder: existing.holder,
                            host: existing.host,
                            pid: existing.pid,
                            expires: existing.expires,
                        });
                    }
                    if !ours {
                        taken_over = Some(existing);
                    }
                }
                // A lease nobody can read is treated like an expired one.
                Err(StoreError::Corrupt { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let record = LeaseRecord {
            api_version: "proxops/v1alpha1".to_owned(),
            kind: "ClusterLease".to_owned(),
            cluster: cluster.to_owned(),
            holder: holder.name.clone(),
            host: holder.host.clone(),
            pid: holder.pid,
            token: token(cluster, holder, now),
            acquired: utc_timestamp(now),
            renewed: utc_timestamp(now),
            expires: utc_timestamp(now + ttl),
        };
        let (commit, tree) = write_record(&repo, &record, "Acquire")?;
        self.move_ref(
            &repo,
            &refname,
            current,
            (commit, tree),
            "proxops: acquire lease",
        )?;
        Ok(Lease {
            store: self.clone(),
            refname,
            commit,
            record,
            released: false,
            taken_over,
        })
    }

    /// The lease of `cluster`, if any.
    pub fn read_lease(&self, cluster: &str) -> Result<Option<LeaseRecord>> {
        let refname = lease_ref(cluster)?;
        let repo = self.repo();
        match self.current_head(&repo, &refname)? {
            Some(commit) => read_record(&repo, &refname, commit).map(Some),
            None => Ok(None),
        }
    }

    /// Removes the lease of `cluster` whoever holds it, and returns what it said (`None`: there
    /// was none). With `token`, only a lease with that token is removed.
    pub fn break_lease(&self, cluster: &str, token: Option<&str>) -> Result<Option<LeaseRecord>> {
        let refname = lease_ref(cluster)?;
        let repo = self.repo();
        let Some(commit) = self.current_head(&repo, &refname)? else {
            return Ok(None);
        };
        let record = read_record(&repo, &refname, commit).ok();
        if let (Some(want), Some(r)) = (token, &record)
            && r.token != want
        {
            return Err(StoreError::Invalid(format!(
                "the lease of cluster `{cluster}` has token {}, not {want}: it changed hands",
                r.token
            )));
        }
        delete_lease_ref(self, &refname, commit)?;
        Ok(record)
    }
}

fn write_record(
    repo: &gix::Repository,
    record: &LeaseRecord,
    verb: &str,
) -> Result<(ObjectId, ObjectId)> {
    let bytes = crate::documents::canonical_bytes(record)?;
    let blob = git::write_blob(repo, &bytes)?;
    let tree = git::write_tree(repo, &[(LEASE_FILE.to_owned(), blob)].into_iter().collect())?;
    let message = format!(
        "{verb} lease of cluster {} for {}\n\nLease-Token: {}\nLease-Expires: {}\n",
        record.cluster, record.holder, record.token, record.expires
    );
    Ok((git::write_commit(repo, tree, None, &message)?, tree))
}

/// Deletes the lease ref if it still points at `expected`: on the remote when the store has
/// one, else locally.
fn delete_lease_ref(store: &Store, refname: &str, expected: ObjectId) -> Result<()> {
    let repo = store.repo();
    match store.remote() {
        Some(remote) => crate::remote::delete(&repo, remote, refname, expected),
        None => git::delete_ref(&repo, refname, Some(expected)),
    }
}

fn read_record(repo: &gix::Repository, refname: &str, commit: ObjectId) -> Result<LeaseRecord> {
    let plane = crate::store::Plane::read(repo, refname, commit)?;
    let value = plane
        .document(repo, LEASE_FILE)?
        .ok_or_else(|| StoreError::Corrupt {
            plane: refname.to_owned(),
            path: LEASE_FILE.to_owned(),
            reason: "missing".to_owned(),
        })?;
    serde_json::from_value(value).map_err(|e| StoreError::Corrupt {
        plane: refname.to_owned(),
        path: LEASE_FILE.to_owned(),
        reason: e.to_string(),
    })
}

/// A token no other acquisition shares: time, host, pid and a process-wide counter, hashed.
fn token(cluster: &str, holder: &Holder, now: SystemTime) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let digest = Sha256::digest(format!(
        "{cluster}\0{}\0{}\0{nanos}\0{n}",
        holder.host, holder.pid
    ));
    format!("lease-{}", hex::encode(&digest[..16]))
}

/// This machine's host name (empty when it cannot be read).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_owned())
        .or_else(|_| std::env::var("HOSTNAME"))
        .unwrap_or_default()
}

/// Whether a process with this id runs here. Without `/proc` nobody can tell: assume it runs,
/// so a lease is then only taken over after it expired.
fn process_runs(pid: u32) -> bool {
    let proc = std::path::Path::new("/proc");
    if !proc.join("self").exists() {
        return true;
    }
    match std::fs::read_to_string(proc.join(pid.to_string()).join("stat")) {
        // A zombie (state Z) has exited; it only waits for its parent to reap it.
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Reads the `YYYY-MM-DDTHH:MM:SSZ` form [`utc_timestamp`] writes.
pub fn parse_utc(text: &str) -> Option<SystemTime> {
    let b = text.as_bytes();
    if b.len() != 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[19] != b'Z' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| text.get(r)?.parse::<i64>().ok();
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm), the inverse of utc_timestamp's.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(secs)
        .ok()
        .map(|s| UNIX_EPOCH + Duration::from_secs(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        for secs in [0u64, 951_782_400, 1_796_000_000, 4_102_444_799] {
            let t = UNIX_EPOCH + Duration::from_secs(secs);
            assert_eq!(parse_utc(&utc_timestamp(t)), Some(t), "{secs}");
        }
        assert_eq!(parse_utc("2026-13-01T00:00:00Z"), None);
        assert_eq!(parse_utc("yesterday"), None);
    }

    #[test]
    fn this_process_runs_and_a_reaped_one_does_not() {
        assert!(process_runs(std::process::id()));
        let Ok(mut child) = std::process::Command::new("true").spawn() else {
            return;
        };
        let pid = child.id();
        let _ = child.wait();
        assert!(!process_runs(pid));
    }
}
