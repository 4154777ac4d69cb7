//! Shared test support: a started simulator with an HTTPS client pinned to its certificate, request helpers that keep
//! status, reason phrase and body, and a bounded task wait.

use proxops_pve_sim::{PveVersion, SimConfig, SimHandle, TaskDurations, User, start};
use serde_json::Value;
use std::time::Duration;

pub const PASSWORD: &str = "s3cret";

/// How requests authenticate.
#[derive(Clone, Debug)]
pub enum Auth {
    None,
    Header(String),
    Ticket {
        ticket: String,
        csrf: Option<String>,
    },
}

/// A response: status, reason phrase and JSON body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub reason: String,
    pub body: Value,
}

impl Resp {
    /// The `data` of a 200, failing the test otherwise.
    pub fn ok(self) -> Value {
        assert_eq!(
            self.status, 200,
            "expected 200, got {} {} {}",
            self.status, self.reason, self.body
        );
        self.body["data"].clone()
    }

    /// The failure message of a non-200, checking status and that reason and `message` agree.
    pub fn fail(self, status: u16) -> String {
        assert_eq!(
            self.status, status,
            "expected {status}, got {} {} {}",
            self.status, self.reason, self.body
        );
        let message = self.body["message"]
            .as_str()
            .unwrap_or_default()
            .trim_end()
            .to_string();
        // A reason phrase is one line: a message of several has them joined by spaces.
        assert_eq!(
            self.reason,
            message.replace('\n', " "),
            "reason phrase and message differ"
        );
        message
    }

    /// The per-parameter errors of a 400.
    pub fn errors(self) -> Value {
        assert_eq!(
            self.status, 400,
            "expected 400, got {} {} {}",
            self.status, self.reason, self.body
        );
        assert!(self.body["data"].is_null());
        self.body["errors"].clone()
    }
}

/// A running simulator with a client.
pub struct Sim {
    pub h: SimHandle,
    pub client: reqwest::Client,
    pub auth: Auth,
}

/// The test configuration: fast tasks, a password user, the default version (9.1).
pub fn config() -> SimConfig {
    config_of(PveVersion::default())
}

/// The test configuration answering as `version`, with that version's demo cluster.
pub fn config_of(version: PveVersion) -> SimConfig {
    SimConfig::of_version(version)
        .with_task_durations(TaskDurations::uniform(Duration::from_millis(40)))
        .with_users(vec![User {
            userid: "root@pam".into(),
            password: PASSWORD.into(),
        }])
}

impl Sim {
    pub async fn start() -> Sim {
        Sim::with(config()).await
    }

    /// A simulator answering as `version`.
    pub async fn of(version: PveVersion) -> Sim {
        Sim::with(config_of(version)).await
    }

    pub async fn with(cfg: SimConfig) -> Sim {
        let h = start(cfg).await.unwrap();
        let client = proxops_test_support::sim::https_client(&h.fingerprint);
        let auth = Auth::Header(h.token.header());
        Sim { h, client, auth }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.h.base_url())
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        params: &[(&str, &str)],
        auth: &Auth,
    ) -> Resp {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let query = method == reqwest::Method::GET || method == reqwest::Method::DELETE;
        let mut url = self.url(path);
        if query && !params.is_empty() {
            let q: Vec<String> = params
                .iter()
                .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
                .collect();
            url = format!("{url}?{}", q.join("&"));
        }
        let mut rb = self.client.request(method.clone(), url);
        if !query {
            rb = rb.form(params);
        }
        rb = match auth {
            Auth::None => rb,
            Auth::Header(h) => rb.header("Authorization", h),
            Auth::Ticket { ticket, csrf } => {
                let rb = rb.header("Cookie", format!("PVEAuthCookie={ticket}"));
                match csrf {
                    Some(c) => rb.header("CSRFPreventionToken", c),
                    None => rb,
                }
            }
        };
        read(rb.send().await.unwrap()).await
    }

    pub async fn req(&self, method: &str, path: &str, params: &[(&str, &str)]) -> Resp {
        self.send(method, path, params, &self.auth).await
    }

    pub async fn get(&self, path: &str) -> Resp {
        self.req("GET", path, &[]).await
    }

    pub async fn post(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.req("POST", path, params).await
    }

    pub async fn put(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.req("PUT", path, params).await
    }

    pub async fn delete(&self, path: &str, params: &[(&str, &str)]) -> Resp {
        self.req("DELETE", path, params).await
    }

    /// Waits (bounded) for a task to stop; returns its status object.
    pub async fn wait(&self, upid: &Value) -> Value {
        let upid = upid.as_str().expect("a UPID string");
        let node = upid.split(':').nth(1).unwrap();
        let path = format!("/nodes/{node}/tasks/{}/status", enc(upid));
        for _ in 0..500 {
            let st = self.get(&path).await.ok();
            if st["status"] == "stopped" {
                return st;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("task {upid} did not stop in time");
    }

    /// A task's log, one string per line.
    pub async fn log(&self, upid: &Value) -> Vec<String> {
        let upid = upid.as_str().expect("a UPID string");
        let node = upid.split(':').nth(1).unwrap();
        let path = format!("/nodes/{node}/tasks/{}/log", enc(upid));
        let lines = self.req("GET", &path, &[("limit", "1000")]).await.ok();
        lines
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["t"].as_str().unwrap().to_owned())
            .collect()
    }

    /// Posts a call PVE answers with a worker, waits for the task, and returns how it ended
    /// (`OK` or the worker's error).
    pub async fn task_exit(&self, path: &str, params: &[(&str, &str)]) -> String {
        let upid = self.post(path, params).await.ok();
        let st = self.wait(&upid).await;
        st["exitstatus"]
            .as_str()
            .expect("an exit status")
            .to_owned()
    }

    /// Waits for a task and asserts it ended OK.
    pub async fn wait_ok(&self, upid: &Value) {
        let st = self.wait(upid).await;
        assert_eq!(st["exitstatus"], "OK", "task failed: {st}");
    }

    /// Creates a VM and waits for it.
    pub async fn create_vm(&self, vmid: &str, extra: &[(&str, &str)]) {
        let mut params = vec![("vmid", vmid)];
        params.extend_from_slice(extra);
        let upid = self.post("/nodes/pve1/qemu", &params).await.ok();
        self.wait_ok(&upid).await;
    }
}

/// Reads a reqwest response into a [`Resp`].
pub async fn read(resp: reqwest::Response) -> Resp {
    let status = resp.status();
    let reason = resp
        .extensions()
        .get::<hyper::ext::ReasonPhrase>()
        .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
        .unwrap_or_else(|| status.canonical_reason().unwrap_or("").to_string());
    let text = resp.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::Null);
    Resp {
        status: status.as_u16(),
        reason,
        body,
    }
}

/// Percent-encodes a path segment.
pub fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
