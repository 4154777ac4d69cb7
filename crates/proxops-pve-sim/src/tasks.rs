//! Tasks as PVE runs them: a UPID `UPID:node:PID:PSTART:STARTTIME:type:id:user:` (hex fields
//! 8 digits, uppercase), `running` for the configured duration of its type, then `stopped` with
//! `exitstatus` `OK` or the error text, and a log ending in `TASK OK` / `TASK ERROR: ...`.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use crate::auth::now;
use crate::faults;
use crate::server::{Shared, lock};
use crate::state::{GuestType, State, Task};

/// The work of a task, run when its time is up: it changes the state and returns log lines, or
/// the error text. `failed` says that an injected fault makes it fail: the job undoes what it
/// staged (a created guest, a lock) and returns its error.
pub(crate) type Job = Box<dyn FnOnce(&mut State, bool) -> Result<Vec<String>, String> + Send>;

/// Asynchronous work (a download) before the job runs.
pub(crate) type Work = Pin<Box<dyn Future<Output = Result<Vec<String>, String>> + Send>>;

/// The parts of a UPID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upid {
    /// Node.
    pub node: String,
    /// Worker pid.
    pub pid: u32,
    /// Process start (clock ticks).
    pub pstart: u64,
    /// Start time (epoch seconds).
    pub starttime: u64,
    /// Task type.
    pub kind: String,
    /// Task id.
    pub id: String,
    /// User (or token).
    pub user: String,
}

impl Upid {
    /// Formats the UPID string.
    pub fn format(&self) -> String {
        format!(
            "UPID:{}:{:08X}:{:08X}:{:08X}:{}:{}:{}:",
            self.node, self.pid, self.pstart, self.starttime, self.kind, self.id, self.user
        )
    }

    /// Parses a UPID string (PVE: `unable to parse worker upid '...'` otherwise).
    pub fn parse(s: &str) -> Option<Upid> {
        let rest = s.strip_prefix("UPID:")?.strip_suffix(':')?;
        let f: Vec<&str> = rest.splitn(7, ':').collect();
        if f.len() != 7 || f[1].len() < 8 || f[2].len() < 8 || f[3].len() < 8 {
            return None;
        }
        Some(Upid {
            node: f[0].into(),
            pid: u32::from_str_radix(f[1], 16).ok()?,
            pstart: u64::from_str_radix(f[2], 16).ok()?,
            starttime: u64::from_str_radix(f[3], 16).ok()?,
            kind: f[4].into(),
            id: f[5].into(),
            user: f[6].into(),
        })
    }
}

/// A job whose worker failed in its first step (PVE's checks inside the worker, under the
/// config lock): the task ends with `message`.
pub(crate) fn failed(message: String) -> Job {
    Box::new(move |_, _| Err(message))
}

/// Registers a running task and schedules its completion; returns the UPID.
// The UPID's fields are the arguments; a struct would only rename them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn(
    shared: &Arc<Shared>,
    st: &mut State,
    node: &str,
    kind: &str,
    id: &str,
    user: &str,
    work: Option<Work>,
    job: Job,
) -> String {
    spawn_inner(shared, st, node, kind, id, user, work, None, job)
}

/// [`spawn`] for a worker that holds the guest's config lock (the file lock, not the `lock`
/// property) from its start to its end, as `qmmove` and `qmigrate` run under
/// pve-guest-common `PVE/AbstractConfig.pm` `lock_config`: a config write meanwhile waits
/// PVE's 10 s for it, then fails `can't lock file ... - got timeout`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn_holding(
    shared: &Arc<Shared>,
    st: &mut State,
    node: &str,
    kind: &str,
    id: &str,
    user: &str,
    guest: (GuestType, u32),
    job: Job,
) -> String {
    spawn_inner(shared, st, node, kind, id, user, None, Some(guest), job)
}

#[allow(clippy::too_many_arguments)]
fn spawn_inner(
    shared: &Arc<Shared>,
    st: &mut State,
    node: &str,
    kind: &str,
    id: &str,
    user: &str,
    work: Option<Work>,
    hold: Option<(GuestType, u32)>,
    job: Job,
) -> String {
    // PIDs grow by small steps, as other processes take numbers in between.
    st.last_pid = st.last_pid.max(0x1000).wrapping_add(1 + st.last_pid % 7);
    let upid = Upid {
        node: node.into(),
        pid: st.last_pid,
        // Ticks since the simulated boot: 100 Hz, as /proc/stat counts them.
        pstart: 0x0010_0000 + shared.started.elapsed().as_millis() as u64 / 10,
        starttime: now(),
        kind: kind.into(),
        id: id.into(),
        user: user.into(),
    };
    let text = upid.format();
    st.tasks.push(Task {
        upid: text.clone(),
        node: node.into(),
        pid: upid.pid,
        pstart: upid.pstart,
        starttime: upid.starttime,
        kind: kind.into(),
        id: id.into(),
        user: user.into(),
        status: "running".into(),
        exitstatus: None,
        endtime: None,
        log: Vec::new(),
    });
    let fail = faults::task_fails(shared, kind, id);
    let duration = lock(&shared.durations).of(kind);
    let shared2 = shared.clone();
    let upid2 = text.clone();
    let handle = tokio::spawn(async move {
        let started = tokio::time::Instant::now();
        let _held = match hold {
            Some((kind, vmid)) => match crate::sync_work::lock_guest(&shared2, kind, vmid).await {
                Ok(guard) => Some(guard),
                Err(e) => {
                    let mut st = lock(&shared2.state);
                    // The job undoes what the handler staged (a `lock` property).
                    let _ = job(&mut st, true);
                    finish(&mut st, &upid2, Err(e.text()));
                    shared2.persist(&st);
                    drop(st);
                    lock(&shared2.running).remove(&upid2);
                    return;
                }
            },
            None => None,
        };
        let pre = match work {
            Some(w) if !fail => w.await,
            _ => Ok(Vec::new()),
        };
        tokio::time::sleep_until(started + duration).await;
        let mut st = lock(&shared2.state);
        let result = match pre {
            Ok(mut lines) => job(&mut st, fail).map(|more| {
                lines.extend(more);
                lines
            }),
            Err(e) => {
                // The job undoes what it staged (a created guest, a lock); the error is the download's.
                let _ = job(&mut st, true);
                Err(e)
            }
        };
        finish(&mut st, &upid2, result);
        shared2.persist(&st);
        drop(st);
        lock(&shared2.running).remove(&upid2);
    });
    lock(&shared.running).insert(text.clone(), handle.abort_handle());
    text
}

/// Marks a task stopped with its result.
pub(crate) fn finish(st: &mut State, upid: &str, result: Result<Vec<String>, String>) {
    let Some(task) = st.task_mut(upid) else {
        return;
    };
    task.status = "stopped".into();
    task.endtime = Some(now().max(task.starttime));
    match result {
        Ok(lines) => {
            task.log.extend(lines);
            task.log.push("TASK OK".into());
            task.exitstatus = Some("OK".into());
        }
        // A worker logs its errors and dies with a short text, which PVE reads back from the
        // log's last line (pve-common `PVE/Tools.pm` `upid_read_status`): the lines of a
        // multi-line error before its last are log lines.
        Err(e) => {
            let mut lines: Vec<&str> = e.trim_end().lines().collect();
            let last = lines.pop().unwrap_or_default().to_string();
            task.log.extend(lines.into_iter().map(str::to_string));
            task.log.push(format!("TASK ERROR: {last}"));
            task.exitstatus = Some(last);
        }
    }
}

/// The error text of an injected task failure.
pub(crate) const INJECTED: &str = "command failed: exit code 1 (injected task failure)";
