//! One task per sink: it sends what the notifier queued, retrying with backoff, so that a slow
//! or failing sink never holds up a cycle. A full queue drops (the notifier counts it).

use super::sink::Outgoing;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

/// How sinks are driven. Build with [`NotifyOptions::default`] and the `with_*` setters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NotifyOptions {
    /// Tries per notification (the first included).
    pub attempts: u32,
    /// The wait before the first retry; doubled for each further one.
    pub backoff: Duration,
    /// The longest wait between tries.
    pub max_backoff: Duration,
    /// How long one request may take.
    pub timeout: Duration,
    /// Notifications waiting per sink; more are dropped.
    pub queue: usize,
    /// How long a stopping agent waits for queued notifications.
    pub flush_timeout: Duration,
}

impl Default for NotifyOptions {
    fn default() -> Self {
        NotifyOptions {
            attempts: 5,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
            queue: 64,
            flush_timeout: Duration::from_secs(10),
        }
    }
}

impl NotifyOptions {
    /// Sets the tries per notification (at least one).
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts.max(1);
        self
    }
    /// Sets the wait before the first retry.
    pub fn with_backoff(mut self, backoff: Duration) -> Self {
        self.backoff = backoff;
        self
    }
    /// Sets the longest wait between tries.
    pub fn with_max_backoff(mut self, max: Duration) -> Self {
        self.max_backoff = max;
        self
    }
    /// Sets how long one request may take.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Sets how many notifications wait per sink.
    pub fn with_queue(mut self, queue: usize) -> Self {
        self.queue = queue;
        self
    }
    /// Sets how long a stopping agent waits for queued notifications.
    pub fn with_flush_timeout(mut self, timeout: Duration) -> Self {
        self.flush_timeout = timeout;
        self
    }
}

/// Sent, failed (after every try) and dropped notifications of one sink.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub sent: AtomicU64,
    pub failed: AtomicU64,
    pub dropped: AtomicU64,
}

impl Counters {
    pub(crate) fn add(n: &AtomicU64) {
        n.fetch_add(1, Ordering::Relaxed);
    }
}

/// A queued notification and what to undo if it never arrives.
pub(crate) struct Job {
    pub out: Outgoing,
    /// Called when it finally failed, so that the notifier sends it again next time.
    pub on_failure: Option<Box<dyn FnOnce() + Send>>,
}

/// Whether an answer is worth another try.
fn retryable(status: reqwest::StatusCode) -> bool {
    status.is_server_error()
        || status == reqwest::StatusCode::TOO_MANY_REQUESTS
        || status == reqwest::StatusCode::REQUEST_TIMEOUT
}

/// Sends the jobs of one sink until its queue closes.
pub(crate) async fn run(
    label: String,
    mut jobs: mpsc::Receiver<Job>,
    client: reqwest::Client,
    counters: Arc<Counters>,
    options: NotifyOptions,
    busy: Arc<Mutex<usize>>,
) {
    while let Some(job) = jobs.recv().await {
        let ok = send(&label, &job.out, &client, &options).await;
        if ok {
            Counters::add(&counters.sent);
        } else {
            Counters::add(&counters.failed);
            if let Some(undo) = job.on_failure {
                undo();
            }
        }
        if let Ok(mut n) = busy.lock() {
            *n = n.saturating_sub(1);
        }
    }
}

async fn send(
    label: &str,
    out: &Outgoing,
    client: &reqwest::Client,
    options: &NotifyOptions,
) -> bool {
    let mut wait = options.backoff;
    for attempt in 1..=options.attempts.max(1) {
        let mut request = client
            .post(&out.url)
            .timeout(options.timeout)
            .body(out.body.clone());
        for (name, value) in &out.headers {
            request = request.header(*name, value);
        }
        // The error's text may hold the URL, which may be the secret: only its kind is logged.
        let retry = match request.send().await {
            Ok(resp) if resp.status().is_success() => {
                tracing::debug!(sink = label, what = %out.what, "notification sent");
                return true;
            }
            Ok(resp) => {
                let status = resp.status();
                tracing::warn!(sink = label, what = %out.what, status = status.as_u16(), attempt, "notification refused");
                retryable(status)
            }
            Err(e) => {
                let kind = if e.is_timeout() {
                    "timed out"
                } else if e.is_connect() {
                    "cannot connect"
                } else {
                    "request failed"
                };
                tracing::warn!(sink = label, what = %out.what, attempt, "notification not sent: {kind}");
                true
            }
        };
        if !retry || attempt == options.attempts.max(1) {
            break;
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(options.max_backoff);
    }
    tracing::error!(sink = label, what = %out.what, "notification failed");
    false
}
