//! The executor's knobs, and the task wait every PVE task of an action goes through (the
//! executor's and the config writes' alike).

use super::report::ProgressFn;
use proxops_pve::{PveClient, PveError, Upid, WaitOptions};
use std::time::Duration;
use tokio::sync::watch;

/// Knobs of the executor.
#[derive(Clone)]
#[non_exhaustive]
pub struct ExecOptions {
    /// Actions in flight at once over the cluster (the client also bounds each node).
    pub concurrency: usize,
    /// Task wait settings by task type; `None` uses [`WaitOptions::for_task`].
    pub wait: Option<WaitOptions>,
    /// Seconds a guest gets to shut down before it is stopped.
    pub shutdown_timeout: u32,
    /// When it turns true, no new action starts.
    pub stop: Option<watch::Receiver<bool>>,
    /// Called as actions start and end.
    pub progress: Option<ProgressFn>,
    /// How long a config write whose answer was lost (pveproxy's 596 after its 30 s, a reset,
    /// a timeout) is watched for landing, by reading the guest back, before the part not landed
    /// is written again (the engine's `config_write`).
    pub outcome_wait: Duration,
}

impl Default for ExecOptions {
    fn default() -> Self {
        ExecOptions {
            concurrency: 8,
            wait: None,
            shutdown_timeout: 120,
            stop: None,
            progress: None,
            // Twice pveproxy's limit: work it cut off has usually finished by then.
            outcome_wait: Duration::from_secs(60),
        }
    }
}

impl ExecOptions {
    /// Sets how many actions are in flight at once over the cluster (at least one).
    pub fn with_concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }
    /// Sets the task wait settings (`None`: [`WaitOptions::for_task`] by task type).
    pub fn with_wait(mut self, wait: Option<WaitOptions>) -> Self {
        self.wait = wait;
        self
    }
    /// Sets the seconds a guest gets to shut down before it is stopped.
    pub fn with_shutdown_timeout(mut self, seconds: u32) -> Self {
        self.shutdown_timeout = seconds;
        self
    }
    /// Sets the stop signal: when it turns true, no new action starts.
    pub fn with_stop(mut self, stop: watch::Receiver<bool>) -> Self {
        self.stop = Some(stop);
        self
    }
    /// Sets the progress callback.
    pub fn with_progress(mut self, progress: ProgressFn) -> Self {
        self.progress = Some(progress);
        self
    }
    /// Sets how long a config write whose answer was lost is watched for landing.
    pub fn with_outcome_wait(mut self, wait: Duration) -> Self {
        self.outcome_wait = wait;
        self
    }
}

/// Waits for a PVE task and records its UPID: with [`ExecOptions::wait`], else the wait
/// settings of the task's type.
pub(crate) async fn wait(
    client: &PveClient,
    options: &ExecOptions,
    upid: Upid,
    upids: &mut Vec<String>,
) -> Result<(), PveError> {
    upids.push(upid.to_string());
    let wait = options
        .wait
        .clone()
        .unwrap_or_else(|| WaitOptions::for_task(&upid.kind));
    client.wait_task(&upid, &wait).await.map(|_| ())
}
