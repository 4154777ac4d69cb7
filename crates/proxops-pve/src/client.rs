//! [`PveClient`] and its [`ClientBuilder`]: one pooled HTTPS connection set to a PVE endpoint, the
//! auth header or ticket session, request counting, tracing spans, and the retry loop that every
//! typed endpoint goes through.

use reqwest::Method;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::Instrument;

use crate::auth::Auth;
use crate::counters::RequestCounters;
use crate::error::{ApiFailure, ErrorKind, PveError, classify};
use crate::limits::{MutationLimits, MutationPermit};
use crate::params::Params;
use crate::retry::{Jitter, RetryPolicy};
use crate::secret::Credentials;
use crate::tls::TlsVerification;

/// A callback that receives warnings (e.g. that certificate verification is off).
pub type WarningSink = Arc<dyn Fn(&str) + Send + Sync>;

/// Configures and builds a [`PveClient`].
pub struct ClientBuilder {
    base_url: String,
    credentials: Credentials,
    tls: TlsVerification,
    timeout: Duration,
    connect_timeout: Duration,
    pool_max_idle_per_host: usize,
    retry: RetryPolicy,
    ticket_renew_after: Duration,
    mutations_per_node: usize,
    on_warning: Option<WarningSink>,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base_url", &self.base_url)
            .field("credentials", &self.credentials)
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// A builder for `https://host:8006` (with or without `/api2/json`), verifying the server
    /// against the system roots by default.
    pub fn new(base_url: impl Into<String>, credentials: Credentials) -> ClientBuilder {
        ClientBuilder {
            base_url: base_url.into(),
            credentials,
            tls: TlsVerification::System,
            timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            pool_max_idle_per_host: 16,
            retry: RetryPolicy::default(),
            // PVE tickets live two hours; renewing well before leaves room for clock skew.
            ticket_renew_after: Duration::from_secs(90 * 60),
            mutations_per_node: 4,
            on_warning: None,
        }
    }

    /// How the certificate is verified.
    pub fn tls(mut self, tls: TlsVerification) -> ClientBuilder {
        self.tls = tls;
        self
    }

    /// The timeout of one request (connect to last byte). Default 60 s.
    pub fn timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.timeout = timeout;
        self
    }

    /// The TCP+TLS connect timeout. Default 10 s.
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.connect_timeout = timeout;
        self
    }

    /// Idle pooled connections kept per host. Default 16.
    pub fn pool_max_idle_per_host(mut self, n: usize) -> ClientBuilder {
        self.pool_max_idle_per_host = n;
        self
    }

    /// The retry policy for retryable errors.
    pub fn retry(mut self, retry: RetryPolicy) -> ClientBuilder {
        self.retry = retry;
        self
    }

    /// Age at which a ticket is renewed (by logging in again). Default 90 minutes; PVE's tickets
    /// expire after two hours.
    pub fn ticket_renew_after(mut self, age: Duration) -> ClientBuilder {
        self.ticket_renew_after = age;
        self
    }

    /// The limit of in-flight mutations per node ([`PveClient::mutation_permit`]). Default 4.
    pub fn mutations_per_node(mut self, n: usize) -> ClientBuilder {
        self.mutations_per_node = n.max(1);
        self
    }

    /// Receives warnings, such as that certificate verification is off.
    pub fn on_warning(mut self, sink: impl Fn(&str) + Send + Sync + 'static) -> ClientBuilder {
        self.on_warning = Some(Arc::new(sink));
        self
    }

    /// Builds the client (no request is made).
    pub fn build(self) -> Result<PveClient, PveError> {
        let base = normalize_base(&self.base_url)?;
        let insecure = self.tls == TlsVerification::Insecure;
        let tls = self.tls.client_config()?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .timeout(self.timeout)
            .connect_timeout(self.connect_timeout)
            .pool_max_idle_per_host(self.pool_max_idle_per_host)
            .pool_idle_timeout(Duration::from_secs(30))
            .http1_only()
            .tcp_keepalive(Duration::from_secs(30))
            .user_agent(concat!("proxops-pve/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| PveError::Config(format!("HTTP client setup failed: {e}")))?;
        if insecure {
            let text = format!(
                "TLS certificate verification is disabled for {base}: anyone on the path can \
                 read the credentials"
            );
            tracing::warn!("{text}");
            if let Some(sink) = &self.on_warning {
                sink(&text);
            }
        }
        Ok(PveClient {
            inner: Arc::new(Inner {
                http,
                base,
                auth: Auth::new(self.credentials, self.ticket_renew_after),
                jitter: Jitter::new(self.retry.seed),
                retry: self.retry,
                counters: RequestCounters::default(),
                limits: MutationLimits::new(self.mutations_per_node),
                insecure,
                version: tokio::sync::OnceCell::new(),
            }),
        })
    }
}

fn normalize_base(url: &str) -> Result<String, PveError> {
    let url = url.trim().trim_end_matches('/');
    if !url.starts_with("https://") {
        return Err(PveError::Config(format!(
            "PVE base URL must start with https://: '{url}'"
        )));
    }
    let url = url.strip_suffix("/api2/json").unwrap_or(url);
    Ok(format!("{url}/api2/json"))
}

struct Inner {
    http: reqwest::Client,
    base: String,
    auth: Auth,
    retry: RetryPolicy,
    jitter: Jitter,
    counters: RequestCounters,
    limits: MutationLimits,
    insecure: bool,
    /// The cluster's `/version`, read once per client (see [`PveClient::pve_version`]).
    version: tokio::sync::OnceCell<crate::types::Version>,
}

/// An async PVE API client. Cheap to clone (shared pool, session, counters and limits).
#[derive(Clone)]
pub struct PveClient {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PveClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PveClient")
            .field("base", &self.inner.base)
            .field("insecure", &self.inner.insecure)
            .finish_non_exhaustive()
    }
}

impl PveClient {
    /// A builder.
    pub fn builder(base_url: impl Into<String>, credentials: Credentials) -> ClientBuilder {
        ClientBuilder::new(base_url, credentials)
    }

    /// `https://host:port/api2/json`.
    pub fn base_url(&self) -> &str {
        &self.inner.base
    }

    /// Whether certificate verification is off (callers warn on every cycle).
    pub fn is_insecure(&self) -> bool {
        self.inner.insecure
    }

    /// The cluster's `GET /version`, read once per client (a connection) and kept: the PVE
    /// version decides what a plan may ask of the cluster. A failed read is not kept.
    pub async fn pve_version(&self) -> Result<crate::types::Version, PveError> {
        self.inner
            .version
            .get_or_try_init(|| self.version())
            .await
            .cloned()
    }

    /// Requests sent, by `METHOD /path/{template}` (each attempt and login counts).
    pub fn counters(&self) -> &RequestCounters {
        &self.inner.counters
    }

    /// Waits for the right to mutate a guest: at most one mutation in flight per VMID and the
    /// configured number per node. Hold the permit across the request and its task wait.
    pub async fn mutation_permit(&self, node: &str, vmid: u32) -> MutationPermit {
        self.inner.limits.acquire(node, vmid).await
    }

    /// The limits behind [`PveClient::mutation_permit`].
    pub fn limits(&self) -> &MutationLimits {
        &self.inner.limits
    }

    /// Any API call, decoded into `T` from the response's `data`. `template` names the endpoint
    /// in counters and traces (`/nodes/{node}/qemu`); `path` is the concrete path.
    pub async fn call<T: DeserializeOwned>(
        &self,
        method: Method,
        template: &str,
        path: &str,
        params: &Params,
    ) -> Result<T, PveError> {
        let data = self
            .call_json(method.clone(), template, path, params)
            .await?;
        serde_json::from_value(data).map_err(|e| PveError::Decode {
            method: method.to_string(),
            path: path.to_string(),
            detail: e.to_string(),
        })
    }

    /// Any API call; the response's `data` as JSON. Retries retryable failures per the policy;
    /// with ticket auth, a 401 triggers one fresh login.
    ///
    /// Writes are retried too: PVE refuses with a lock or server error before doing anything.
    /// After a connection reset a create may have happened; its retry then fails permanently with
    /// `already exists`, which the caller resolves by checking the guest's ownership tags.
    pub async fn call_json(
        &self,
        method: Method,
        template: &str,
        path: &str,
        params: &Params,
    ) -> Result<serde_json::Value, PveError> {
        self.call_json_retrying(method, template, path, params, true)
            .await
    }

    /// [`PveClient::call_json`] for a write that must not be sent twice: a failure that leaves
    /// its outcome unknown ([`PveError::outcome_unknown`]: 595/596, a reset, a timeout) is
    /// returned at once instead of retried, so the caller can read back what happened. Refusals
    /// PVE makes before doing anything (locks, other server errors) are still retried.
    pub async fn call_json_once(
        &self,
        method: Method,
        template: &str,
        path: &str,
        params: &Params,
    ) -> Result<serde_json::Value, PveError> {
        self.call_json_retrying(method, template, path, params, false)
            .await
    }

    async fn call_json_retrying(
        &self,
        method: Method,
        template: &str,
        path: &str,
        params: &Params,
        blind: bool,
    ) -> Result<serde_json::Value, PveError> {
        let mut retry = 0u32;
        let mut relogged = false;
        loop {
            match self.attempt(&method, template, path, params, retry).await {
                Ok(v) => return Ok(v),
                Err(e) if e.kind() == ErrorKind::Unauthorized && !relogged => {
                    // A ticket can be invalidated early (restarted pveproxy, changed key).
                    if !self.inner.auth.invalidate().await {
                        return Err(e);
                    }
                    relogged = true;
                }
                Err(e) if !blind && e.outcome_unknown() => return Err(e),
                Err(e) if e.is_retryable() && retry + 1 < self.inner.retry.max_attempts => {
                    let wait = self.inner.retry.delay(retry, &self.inner.jitter);
                    tracing::debug!(error = %e, ?wait, "retrying");
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn attempt(
        &self,
        method: &Method,
        template: &str,
        path: &str,
        params: &Params,
        attempt: u32,
    ) -> Result<serde_json::Value, PveError> {
        let span = tracing::debug_span!(
            "pve_request",
            method = %method,
            path = template,
            attempt,
            status = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
            upid = tracing::field::Empty,
        );
        // Recorded through this handle rather than `Span::current()`, which depends on the
        // subscriber tracking entered spans.
        let record = span.clone();
        async move {
            let write = !(method == Method::GET || method == Method::HEAD);
            let headers = self.inner.auth.headers(self, write).await?;
            let started = Instant::now();
            let result = self.send(method, template, path, params, &headers).await;
            let span = record;
            let duration_ms = started.elapsed().as_millis() as u64;
            span.record("duration_ms", duration_ms);
            // One event per exchange, so a plain `fmt` subscriber shows requests at debug level.
            // Only method, path, status and UPID: never parameters, headers or bodies.
            match &result {
                Ok(data) => {
                    span.record("status", 200u16);
                    let upid = data.as_str().filter(|s| s.starts_with("UPID:"));
                    if let Some(upid) = upid {
                        span.record("upid", upid);
                    }
                    tracing::debug!(%method, path, status = 200u16, duration_ms, upid, "PVE request");
                }
                Err(e) => {
                    if let Some(s) = e.status() {
                        span.record("status", s);
                    }
                    tracing::debug!(%method, path, status = e.status(), duration_ms, error = %e, "PVE request failed");
                }
            }
            result
        }
        .instrument(span)
        .await
    }

    /// One HTTP exchange without auth logic; used for the login too.
    pub(crate) async fn send(
        &self,
        method: &Method,
        template: &str,
        path: &str,
        params: &Params,
        headers: &[(&'static str, String)],
    ) -> Result<serde_json::Value, PveError> {
        let mut url = format!("{}{path}", self.inner.base);
        let query = method == Method::GET || method == Method::DELETE;
        if query && !params.is_empty() {
            url.push('?');
            url.push_str(&form_encode(params));
        }
        let mut rb = self.inner.http.request(method.clone(), url);
        if !query {
            rb = rb
                .header(
                    reqwest::header::CONTENT_TYPE,
                    "application/x-www-form-urlencoded",
                )
                .body(form_encode(params));
        }
        for (name, value) in headers {
            rb = rb.header(*name, value.as_str());
        }
        self.inner.counters.hit(method.as_str(), template);
        let transport = |e: reqwest::Error| transport_error(method, path, &e);
        let sent = std::time::Instant::now();
        let resp = rb.send().await;
        self.inner
            .counters
            .took(method.as_str(), template, sent.elapsed());
        let resp = resp.map_err(transport)?;
        let status = resp.status();
        let reason = resp
            .extensions()
            .get::<hyper::ext::ReasonPhrase>()
            .map(|r| String::from_utf8_lossy(r.as_bytes()).into_owned())
            .unwrap_or_else(|| status.canonical_reason().unwrap_or_default().to_string());
        let body = resp.bytes().await.map_err(transport)?;
        let json: Option<serde_json::Value> = serde_json::from_slice(&body).ok();
        if status.is_success() {
            let Some(mut json) = json else {
                return Err(PveError::Decode {
                    method: method.to_string(),
                    path: path.to_string(),
                    detail: "the body is not JSON".into(),
                });
            };
            return Ok(json
                .get_mut("data")
                .map(serde_json::Value::take)
                .unwrap_or_default());
        }
        Err(api_error(method, path, status.as_u16(), &reason, json))
    }
}

fn api_error(
    method: &Method,
    path: &str,
    status: u16,
    reason: &str,
    json: Option<serde_json::Value>,
) -> PveError {
    let json = json.unwrap_or_default();
    let errors: std::collections::BTreeMap<String, String> = json
        .get("errors")
        .and_then(|e| e.as_object())
        .map(|o| {
            o.iter()
                .map(|(k, v)| {
                    let text = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.clone(), text.trim_end().to_string())
                })
                .collect()
        })
        .unwrap_or_default();
    // Newer PVE: JSON `message`; older: only the reason phrase.
    let message = json
        .get("message")
        .and_then(|m| m.as_str())
        .map(|m| m.trim().to_string())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| reason.trim().to_string());
    let kind = classify(status, &message);
    PveError::Api(Box::new(ApiFailure {
        method: method.to_string(),
        path: path.to_string(),
        status,
        message,
        errors,
        kind,
    }))
}

fn transport_error(method: &Method, path: &str, e: &reqwest::Error) -> PveError {
    let mut chain = Vec::new();
    let mut tls = false;
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        chain.push(err.to_string());
        if err.is::<rustls::Error>() {
            tls = true;
        }
        // io::Error hides its payload from `source()`; rustls errors travel inside (nested) ones.
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io_holds_rustls(io)
        {
            tls = true;
        }
        source = err.source();
    }
    chain.dedup();
    let kind = if tls {
        ErrorKind::Tls
    } else if e.is_timeout() {
        ErrorKind::Timeout
    } else {
        ErrorKind::Connection
    };
    PveError::Transport {
        method: method.to_string(),
        path: path.to_string(),
        kind,
        detail: chain.join(": "),
    }
}

fn io_holds_rustls(io: &std::io::Error) -> bool {
    let mut inner = io.get_ref();
    // Bounded: connectors wrap at most a few layers.
    for _ in 0..8 {
        let Some(e) = inner else { return false };
        if e.is::<rustls::Error>() {
            return true;
        }
        inner = e
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref());
    }
    false
}

/// `application/x-www-form-urlencoded` as PVE's own clients send it.
fn form_encode(params: &Params) -> String {
    let enc = |s: &str| {
        let mut out = String::with_capacity(s.len());
        for b in s.bytes() {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    };
    params
        .pairs()
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls() {
        assert_eq!(
            normalize_base("https://pve:8006/").ok().as_deref(),
            Some("https://pve:8006/api2/json")
        );
        assert_eq!(
            normalize_base("https://pve:8006/api2/json").ok().as_deref(),
            Some("https://pve:8006/api2/json")
        );
        assert!(normalize_base("http://pve:8006").is_err());
    }

    #[test]
    fn form() {
        let p = Params::new()
            .set("net0", "virtio,bridge=vmbr0")
            .set("description", "a b&c");
        assert_eq!(
            form_encode(&p),
            "net0=virtio%2Cbridge%3Dvmbr0&description=a%20b%26c"
        );
    }
}
