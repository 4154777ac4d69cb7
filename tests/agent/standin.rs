//! A local HTTP server on 127.0.0.1 standing in for GitHub, GitLab and Gitea (their commit
//! status APIs), Slack and ntfy (their publishing endpoints), a webhook receiver, and a file
//! server for the simulator's downloads. It records every request.

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
}

impl Received {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map_or("", String::as_str)
    }
}

#[derive(Default)]
struct Log {
    requests: Vec<Received>,
    /// How many more times each path prefix answers 503 before it answers normally.
    failing: BTreeMap<String, u32>,
}

/// The running stand-in; it stops when dropped.
pub struct StandIn {
    pub port: u16,
    log: Arc<Mutex<Log>>,
    _runtime: tokio::runtime::Runtime,
}

impl StandIn {
    pub fn start() -> StandIn {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = axum::Router::new()
            .fallback(record)
            .with_state(Arc::clone(&log));
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        StandIn {
            port,
            log,
            _runtime: runtime,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Makes requests under `prefix` fail (503) `times` times first.
    pub fn fail_first(&self, prefix: &str, times: u32) {
        self.log
            .lock()
            .unwrap()
            .failing
            .insert(prefix.to_owned(), times);
    }

    /// The requests whose path starts with `prefix`, in order (failed ones included).
    pub fn received(&self, prefix: &str) -> Vec<Received> {
        self.log
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|r| r.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    /// Waits until `count(prefix)` requests arrived, for at most `limit`; returns them.
    pub fn wait_for(&self, prefix: &str, count: usize, limit: Duration) -> Vec<Received> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let got = self.received(prefix);
            if got.len() >= count || std::time::Instant::now() > deadline {
                return got;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

async fn record(State(log): State<Arc<Mutex<Log>>>, request: Request) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body: Bytes = axum::body::to_bytes(body, 16 * 1024 * 1024)
        .await
        .unwrap_or_default();
    let path = parts.uri.path().to_owned();
    let headers = parts
        .headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_ascii_lowercase(),
                v.to_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let mut log = log.lock().unwrap();
    log.requests.push(Received {
        path: path.clone(),
        headers,
        body: body.to_vec(),
    });
    if let Some(n) = log
        .failing
        .iter_mut()
        .find(|(p, _)| path.starts_with(p.as_str()))
        .map(|(_, n)| n)
        && *n > 0
    {
        *n -= 1;
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    drop(log);
    if path.starts_with("/files/missing/") {
        return StatusCode::NOT_FOUND.into_response();
    }
    if path.starts_with("/files/") {
        return (StatusCode::OK, vec![7u8; 4096]).into_response();
    }
    if path.contains("/statuses/") {
        return (StatusCode::CREATED, "{}").into_response();
    }
    (StatusCode::OK, "ok").into_response()
}
