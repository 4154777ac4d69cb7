//! Task endpoints and waiting: [`PveClient::task_status`], [`PveClient::task_log`] and
//! [`PveClient::wait_task`], which polls with growing intervals (not a fixed one-second poll) up to
//! an overall timeout per task type ([`WaitOptions::for_task`]). `OK` and `WARNINGS: N` are
//! success; any other exit status is a [`PveError::TaskFailed`] carrying the log's tail.

use reqwest::Method;
use std::time::{Duration, Instant};

use crate::client::PveClient;
use crate::error::PveError;
use crate::params::{Params, seg};
use crate::types::{TaskEntry, TaskLogLine, TaskStatus, exit_ok};
use crate::upid::Upid;

/// How to wait for a task.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct WaitOptions {
    /// Give up (with [`PveError::TaskTimeout`]) after this long.
    pub timeout: Duration,
    /// The first poll interval.
    pub first_poll: Duration,
    /// The largest poll interval.
    pub max_poll: Duration,
    /// Factor by which the interval grows after each poll.
    pub growth: f64,
    /// Log lines kept in a failure.
    pub log_tail: usize,
}

impl WaitOptions {
    // The timeout's setter is `WaitOptions::timeout`, below (older than these).
    /// Sets [`WaitOptions::first_poll`].
    pub fn with_first_poll(mut self, first_poll: Duration) -> Self {
        self.first_poll = first_poll;
        self
    }
    /// Sets [`WaitOptions::max_poll`].
    pub fn with_max_poll(mut self, max_poll: Duration) -> Self {
        self.max_poll = max_poll;
        self
    }
    /// Sets [`WaitOptions::growth`].
    pub fn with_growth(mut self, growth: f64) -> Self {
        self.growth = growth;
        self
    }
    /// Sets [`WaitOptions::log_tail`].
    pub fn with_log_tail(mut self, log_tail: usize) -> Self {
        self.log_tail = log_tail;
        self
    }
}

impl Default for WaitOptions {
    fn default() -> Self {
        WaitOptions {
            timeout: Duration::from_secs(30 * 60),
            first_poll: Duration::from_millis(100),
            max_poll: Duration::from_secs(3),
            growth: 1.5,
            log_tail: 20,
        }
    }
}

impl WaitOptions {
    /// Defaults with a timeout suited to the task type: downloads and clones copy data and may
    /// take long; power actions should not.
    pub fn for_task(kind: &str) -> WaitOptions {
        let minutes = match kind {
            "download" => 120,
            "qmclone" | "vzclone" | "qmigrate" | "vzmigrate" => 60,
            "qmcreate" | "vzcreate" | "qmtemplate" | "vztemplate" | "qmconfig" => 30,
            "qmdestroy" | "vzdestroy" | "resize" | "qmresize" | "vzresize" => 15,
            "qmshutdown" | "vzshutdown" => 15,
            "qmstart" | "vzstart" | "qmstop" | "vzstop" => 5,
            // The request, and then the HA stack acting on it (waited for separately).
            "hastart" | "hastop" => 15,
            _ => 30,
        };
        WaitOptions {
            timeout: Duration::from_secs(minutes * 60),
            ..WaitOptions::default()
        }
    }

    /// The same with another timeout.
    pub fn timeout(mut self, timeout: Duration) -> WaitOptions {
        self.timeout = timeout;
        self
    }
}

/// A task that ended successfully.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskOutcome {
    /// The final status.
    pub status: TaskStatus,
    /// Warnings counted by `WARNINGS: N` (0 for `OK`).
    pub warnings: u32,
    /// Status requests made.
    pub polls: u32,
    /// How long the wait took.
    pub waited: Duration,
}

fn task_path(upid: &Upid, rest: &str) -> String {
    format!(
        "/nodes/{}/tasks/{}/{rest}",
        seg(&upid.node),
        seg(upid.as_str())
    )
}

/// Filters of `GET /nodes/{node}/tasks`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskFilter {
    /// Only tasks of this guest.
    pub vmid: Option<u32>,
    /// Only tasks of this type (`vztemplate`, ...).
    pub typefilter: Option<String>,
    /// `archive` (PVE's default: finished only), `active` or `all`.
    pub source: Option<String>,
    /// At most this many rows (PVE's default is 50).
    pub limit: Option<u32>,
}

impl TaskFilter {
    /// Sets [`TaskFilter::vmid`].
    pub fn with_vmid(mut self, vmid: Option<u32>) -> Self {
        self.vmid = vmid;
        self
    }
    /// Sets [`TaskFilter::typefilter`].
    pub fn with_typefilter(mut self, typefilter: Option<String>) -> Self {
        self.typefilter = typefilter;
        self
    }
    /// Sets [`TaskFilter::source`].
    pub fn with_source(mut self, source: Option<String>) -> Self {
        self.source = source;
        self
    }
    /// Sets [`TaskFilter::limit`].
    pub fn with_limit(mut self, limit: Option<u32>) -> Self {
        self.limit = limit;
        self
    }
}

impl PveClient {
    /// `GET /nodes/{node}/tasks`, newest first.
    pub async fn node_tasks(
        &self,
        node: &str,
        filter: &TaskFilter,
    ) -> Result<Vec<TaskEntry>, PveError> {
        let params = Params::new()
            .opt("vmid", filter.vmid)
            .opt("typefilter", filter.typefilter.as_deref())
            .opt("source", filter.source.as_deref())
            .opt("limit", filter.limit);
        self.call(
            Method::GET,
            "/nodes/{node}/tasks",
            &format!("/nodes/{}/tasks", seg(node)),
            &params,
        )
        .await
    }

    /// `GET /nodes/{node}/tasks/{upid}/status`.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, PveError> {
        self.call(
            Method::GET,
            "/nodes/{node}/tasks/{upid}/status",
            &task_path(upid, "status"),
            &Params::new(),
        )
        .await
    }

    /// `GET /nodes/{node}/tasks/{upid}/log` from line `start` (0-based), at most `limit` lines.
    pub async fn task_log(
        &self,
        upid: &Upid,
        start: u64,
        limit: u64,
    ) -> Result<Vec<TaskLogLine>, PveError> {
        let params = Params::new().set("start", start).set("limit", limit);
        self.call(
            Method::GET,
            "/nodes/{node}/tasks/{upid}/log",
            &task_path(upid, "log"),
            &params,
        )
        .await
    }

    /// Polls a task until it stops, with intervals growing from `first_poll` to `max_poll`;
    /// success on `OK` or `WARNINGS: N`, else [`PveError::TaskFailed`] with the log's tail.
    pub async fn wait_task(
        &self,
        upid: &Upid,
        opts: &WaitOptions,
    ) -> Result<TaskOutcome, PveError> {
        let started = Instant::now();
        let deadline = started + opts.timeout;
        let mut interval = opts.first_poll;
        let mut polls = 0u32;
        loop {
            let status = self.task_status(upid).await?;
            polls += 1;
            if status.stopped() {
                let exit = status.exitstatus.clone().unwrap_or_default();
                tracing::debug!(%upid, exitstatus = %exit, polls, waited_ms = started.elapsed().as_millis() as u64, "task ended");
                if exit_ok(&exit) {
                    let warnings = exit
                        .strip_prefix("WARNINGS: ")
                        .and_then(|n| n.trim().parse().ok())
                        .unwrap_or(0);
                    return Ok(TaskOutcome {
                        status,
                        warnings,
                        polls,
                        waited: started.elapsed(),
                    });
                }
                let log_tail = self.log_tail(upid, opts.log_tail).await;
                return Err(PveError::TaskFailed {
                    upid: upid.to_string(),
                    exitstatus: exit,
                    log_tail,
                });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(PveError::TaskTimeout {
                    upid: upid.to_string(),
                    waited: started.elapsed(),
                });
            }
            tokio::time::sleep(interval.min(deadline - now)).await;
            interval = interval.mul_f64(opts.growth.max(1.0)).min(opts.max_poll);
        }
    }

    /// The last `n` log lines; empty if the log cannot be read (the failure itself matters more).
    async fn log_tail(&self, upid: &Upid, n: usize) -> Vec<String> {
        // PVE pages logs by line; one large page avoids a second request for the total.
        match self.task_log(upid, 0, 100_000).await {
            Ok(lines) => {
                let skip = lines.len().saturating_sub(n);
                lines.into_iter().skip(skip).map(|l| l.t).collect()
            }
            Err(e) => {
                tracing::debug!(error = %e, "task log unavailable");
                Vec::new()
            }
        }
    }
}
