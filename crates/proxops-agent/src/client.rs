//! [`AgentClient`]: what `proxops reconcile`, `suspend` and `resume` use to talk to a running
//! agent's control API.

use super::auth::ControlToken;
use super::http::Suspension;
use super::status::{AgentStatus, ClusterState};

/// Why a request to the agent failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentClientError {
    /// No agent answered.
    #[error("no agent answers at {url}: {reason}")]
    Unreachable {
        /// The agent's URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The agent answered with an error.
    #[error("the agent answered {status}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its message.
        message: String,
    },
    /// The answer was not what this version expects.
    #[error("unexpected answer from the agent: {0}")]
    Decode(String),
}

/// A client of one agent, e.g. `http://127.0.0.1:9494`.
#[derive(Debug, Clone)]
pub struct AgentClient {
    base: String,
    http: reqwest::Client,
    token: Option<ControlToken>,
}

impl AgentClient {
    /// A client of the agent at `base`.
    pub fn new(base: &str) -> Result<AgentClient, AgentClientError> {
        let unreachable = |reason: String| AgentClientError::Unreachable {
            url: base.to_owned(),
            reason,
        };
        // The workspace's reqwest has no built-in crypto provider: hand it ring's, with the
        // system's roots for an agent behind HTTPS.
        let tls = proxops_pve::TlsVerification::System
            .client_config()
            .map_err(|e| unreachable(e.to_string()))?;
        let http = reqwest::Client::builder()
            .tls_backend_preconfigured(tls)
            .build()
            .map_err(|e| unreachable(e.to_string()))?;
        Ok(AgentClient {
            base: base.trim_end_matches('/').to_owned(),
            http,
            token: None,
        })
    }

    /// Sends `token` as `Authorization: Bearer` on the control requests.
    pub fn with_token(mut self, token: Option<ControlToken>) -> AgentClient {
        self.token = token;
        self
    }

    /// Runs `cluster`'s cycle now and returns its state afterwards.
    pub async fn reconcile(&self, cluster: &str) -> Result<ClusterState, AgentClientError> {
        self.post(&format!("/v1/clusters/{cluster}/reconcile"), None)
            .await
    }

    /// Suspends the cluster, or one of its resources (`Kind/name`).
    pub async fn suspend(
        &self,
        cluster: &str,
        resource: Option<&str>,
    ) -> Result<Suspension, AgentClientError> {
        self.post(&format!("/v1/clusters/{cluster}/suspend"), resource)
            .await
    }

    /// Resumes the cluster, or one of its resources.
    pub async fn resume(
        &self,
        cluster: &str,
        resource: Option<&str>,
    ) -> Result<Suspension, AgentClientError> {
        self.post(&format!("/v1/clusters/{cluster}/resume"), resource)
            .await
    }

    /// The agent's status.
    pub async fn status(&self) -> Result<AgentStatus, AgentClientError> {
        let resp = self
            .http
            .get(format!("{}/status", self.base))
            .send()
            .await
            .map_err(|e| self.unreachable(&e))?;
        decode(resp).await
    }

    async fn post<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        resource: Option<&str>,
    ) -> Result<T, AgentClientError> {
        let mut url = format!("{}{path}", self.base);
        if let Some(r) = resource {
            url.push_str("?resource=");
            url.push_str(&encode(r));
        }
        let mut request = self.http.post(url);
        if let Some(t) = &self.token {
            request = request.bearer_auth(t.expose());
        }
        let resp = request.send().await.map_err(|e| self.unreachable(&e))?;
        decode(resp).await
    }

    fn unreachable(&self, e: &reqwest::Error) -> AgentClientError {
        AgentClientError::Unreachable {
            url: self.base.clone(),
            reason: e.to_string(),
        }
    }
}

async fn decode<T: serde::de::DeserializeOwned>(
    resp: reqwest::Response,
) -> Result<T, AgentClientError> {
    let status = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| AgentClientError::Decode(e.to_string()))?;
    if !status.is_success() {
        return Err(AgentClientError::Refused {
            status: status.as_u16(),
            message: String::from_utf8_lossy(&body).trim().to_owned(),
        });
    }
    serde_json::from_slice(&body).map_err(|e| AgentClientError::Decode(e.to_string()))
}

/// Percent-encodes a query value (everything but RFC 3986's unreserved characters).
fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
