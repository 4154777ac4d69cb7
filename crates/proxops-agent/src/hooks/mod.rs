//! Signed webhook receivers: `POST /v1/hooks/{github,gitlab,gitea,generic}`.
//!
//! A forge's push notice runs a pass at once instead of at the next interval. Each delivery is
//! checked, in this order: the receiver is configured (404), no browser sent it (`Origin`:
//! 403), its body is within the limit (413), it is signed with the receiver's secret the way
//! that forge signs (`verify`; 401), it was not handled before (`replay`; 200, nothing
//! done), and it reads as that forge's JSON (400). Then a push to the followed branch (with a
//! local work tree: any push notice) asks for a pass over every cluster, and a candidate merged
//! into a gated cluster's live desired branch for that cluster's (202); anything else is
//! acknowledged and ignored (200). Every answer is counted in `/metrics`
//! (`proxops_webhook_requests_total`). Secrets and signatures never reach a log.

mod payload;
mod replay;
mod verify;

pub use payload::Forge;
pub use verify::HookSecret;

pub(crate) use payload::Followed;

use super::{AgentError, Shared, lock};
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use payload::Decision;
use proxops_model::config::{DEFAULT_MAX_BODY_BYTES, ReceiverConfig, WebhooksConfig};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path as FsPath;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The receivers an agent serves, with their secrets.
#[derive(Debug, Clone, Default)]
pub struct Receivers {
    secrets: BTreeMap<Forge, HookSecret>,
    max_body: usize,
}

impl Receivers {
    /// Receivers with these secrets and the default body limit (for tests and embedders).
    pub fn new(secrets: impl IntoIterator<Item = (Forge, HookSecret)>) -> Receivers {
        Receivers {
            secrets: secrets.into_iter().collect(),
            max_body: DEFAULT_MAX_BODY_BYTES as usize,
        }
    }

    /// Sets the body limit.
    pub fn with_max_body(mut self, bytes: usize) -> Receivers {
        self.max_body = bytes.max(1);
        self
    }

    /// The receivers `agent.webhooks` configures, their secrets read from the files (relative
    /// to `dir`, the configuration file's directory) and variables it names.
    pub fn from_config(config: &WebhooksConfig, dir: &FsPath) -> Result<Receivers, AgentError> {
        let mut secrets = BTreeMap::new();
        for (forge, receiver) in [
            (Forge::Github, &config.github),
            (Forge::Gitlab, &config.gitlab),
            (Forge::Gitea, &config.gitea),
            (Forge::Generic, &config.generic),
        ] {
            if let Some(r) = receiver {
                secrets.insert(forge, read_secret(forge, r, dir)?);
            }
        }
        let max_body = config
            .max_body_bytes
            .unwrap_or(DEFAULT_MAX_BODY_BYTES)
            .try_into()
            .unwrap_or(usize::MAX);
        Ok(Receivers { secrets, max_body }.with_max_body(max_body))
    }

    /// The configured receivers.
    pub fn forges(&self) -> Vec<Forge> {
        self.secrets.keys().copied().collect()
    }
}

fn read_secret(forge: Forge, r: &ReceiverConfig, dir: &FsPath) -> Result<HookSecret, AgentError> {
    let bad = |reason: String| AgentError::Webhook {
        receiver: forge.name(),
        reason,
    };
    let (text, what) = match (&r.secret_file, &r.secret_env) {
        (Some(file), _) => {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path).map_err(|e| {
                bad(format!(
                    "cannot read its secret file {}: {e}",
                    path.display()
                ))
            })?;
            (text, path.display().to_string())
        }
        (None, Some(var)) => {
            let text = std::env::var(var)
                .map_err(|_| bad(format!("its secret variable {var} is not set")))?;
            (text, format!("${var}"))
        }
        (None, None) => return Err(bad("no `secret-file` or `secret-env`".to_owned())),
    };
    HookSecret::new(&text).ok_or_else(|| bad(format!("its secret in {what} is empty")))
}

/// The receivers' memory: handled deliveries, recent triggers, and what the agent follows.
#[derive(Debug, Default)]
pub(crate) struct HookState {
    seen: replay::Seen,
    /// Commits a pass was asked for lately: a merge announced as a pull request and as a push
    /// runs one pass, not two.
    recent: VecDeque<(Instant, String)>,
    /// Updated by every pass that loads a new commit.
    pub(crate) followed: Followed,
}

impl HookState {
    /// The state of an agent following `source`, before a pass read which clusters are gated.
    pub(crate) fn following(
        source: &super::SourceLocation,
        data_dir: &std::path::Path,
    ) -> HookState {
        HookState {
            seen: replay::Seen::kept_in(data_dir),
            followed: Followed {
                branch: match source {
                    super::SourceLocation::Local(_) => None,
                    super::SourceLocation::Remote { branch, .. } => Some(branch.clone()),
                },
                gated: BTreeMap::new(),
            },
            ..HookState::default()
        }
    }
}

/// How long an asked-for commit is not asked for again.
const RECENT: Duration = Duration::from_secs(600);

impl HookState {
    fn already_asked(&mut self, key: &str, now: Instant) -> bool {
        self.recent
            .retain(|(at, _)| now.duration_since(*at) < RECENT);
        if self.recent.iter().any(|(_, k)| k == key) {
            return true;
        }
        if self.recent.len() >= 256 {
            self.recent.pop_front();
        }
        self.recent.push_back((now, key.to_owned()));
        false
    }
}

/// `POST /v1/hooks/{forge}`.
pub(crate) async fn receive(
    State(shared): State<Arc<Shared>>,
    Path(name): Path<String>,
    request: Request,
) -> Response {
    let forge = Forge::from_name(&name);
    let label = forge.map_or("unknown", Forge::name);
    let (code, result, message) = handle(&shared, forge, request).await;
    shared.metrics.webhook(label, result);
    if code.is_client_error() {
        tracing::warn!(
            receiver = label,
            result,
            "webhook delivery refused: {message}"
        );
    } else {
        tracing::info!(receiver = label, result, "webhook delivery: {message}");
    }
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

async fn handle(
    shared: &Shared,
    forge: Option<Forge>,
    request: Request,
) -> (StatusCode, &'static str, String) {
    let Some(receivers) = &shared.options.webhooks else {
        return (
            StatusCode::NOT_FOUND,
            "not_configured",
            "this agent has no webhook receivers".to_owned(),
        );
    };
    let Some((forge, secret)) = forge.and_then(|f| Some((f, receivers.secrets.get(&f)?))) else {
        return (
            StatusCode::NOT_FOUND,
            "not_configured",
            "no such receiver is configured (see `agent.webhooks`)".to_owned(),
        );
    };
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    if headers.contains_key(header::ORIGIN) {
        return (
            StatusCode::FORBIDDEN,
            "forbidden",
            "forbidden: a page in a browser cannot deliver webhooks".to_owned(),
        );
    }
    let declared = one(&headers, "content-length").and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|n| n > receivers.max_body) {
        return too_large(receivers.max_body);
    }
    let Ok(body) = axum::body::to_bytes(body, receivers.max_body).await else {
        return too_large(receivers.max_body);
    };
    if !signed(forge, secret, &headers, &body) {
        return (
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!(
                "unauthorized: the delivery is not signed with the {} receiver's secret",
                forge.name()
            ),
        );
    }
    let mut keys = vec![format!(
        "body:{}",
        super::hooks::verify::to_hex(&Sha256::digest(&body))
    )];
    if let Some(id) = delivery_id(forge, &headers) {
        keys.push(format!("id:{}:{id}", forge.name()));
    }
    let notice = payload::read(forge, &|h| one(&headers, h), &body);
    let mut state = lock(&shared.hooks);
    if !state.seen.first_time(keys, std::time::SystemTime::now()) {
        return (
            StatusCode::OK,
            "replayed",
            "already handled: nothing done".to_owned(),
        );
    }
    let notice = match notice {
        Ok(n) => n,
        Err(why) => {
            return (
                StatusCode::BAD_REQUEST,
                "bad_request",
                format!("unreadable delivery: {why}"),
            );
        }
    };
    let decision = payload::decide(&notice, &state.followed);
    let (cluster, commit) = match decision {
        Decision::Ignore(why) => return (StatusCode::OK, "ignored", format!("ignored: {why}")),
        Decision::All(commit) => (None, commit),
        Decision::Cluster(c, commit) => (Some(c), commit),
    };
    if let Some(commit) = &commit
        && state.already_asked(
            &format!("{}@{commit}", cluster.as_deref().unwrap_or("*")),
            Instant::now(),
        )
    {
        return (
            StatusCode::OK,
            "ignored",
            format!("ignored: a pass was already asked for {commit}"),
        );
    }
    drop(state);
    let what = match &cluster {
        Some(c) => format!("a pass over cluster {c} is scheduled"),
        None => "a pass is scheduled".to_owned(),
    };
    shared.request_pass(cluster);
    (StatusCode::ACCEPTED, "triggered", what)
}

fn too_large(limit: usize) -> (StatusCode, &'static str, String) {
    (
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the body is larger than {limit} bytes (`agent.webhooks.max-body-bytes`)"),
    )
}

/// A header's value, when sent once and as text.
fn one(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return None;
    }
    first.to_str().ok().map(str::to_owned)
}

/// Whether the delivery carries the forge's proof of `secret`.
fn signed(forge: Forge, secret: &HookSecret, headers: &HeaderMap, body: &[u8]) -> bool {
    let h = |name: &str| one(headers, name);
    match forge {
        Forge::Github => h("x-hub-signature-256")
            .is_some_and(|s| verify::hmac_matches(secret, body, &s, Some("sha256="))),
        Forge::Gitlab => h("x-gitlab-token").is_some_and(|t| verify::token_matches(secret, &t)),
        Forge::Gitea => h("x-gitea-signature")
            .or_else(|| h("x-forgejo-signature"))
            .is_some_and(|s| verify::hmac_matches(secret, body, &s, None)),
        Forge::Generic => h("x-proxops-signature")
            .is_some_and(|s| verify::hmac_matches(secret, body, &s, Some("sha256="))),
    }
}

/// The delivery's id, as the forge names it.
fn delivery_id(forge: Forge, headers: &HeaderMap) -> Option<String> {
    let names: &[&str] = match forge {
        Forge::Github => &["x-github-delivery"],
        // GitLab keeps `Idempotency-Key` across its retries of one event.
        Forge::Gitlab => &["idempotency-key", "x-gitlab-event-uuid"],
        Forge::Gitea => &["x-gitea-delivery", "x-forgejo-delivery"],
        Forge::Generic => &["x-proxops-delivery"],
    };
    names
        .iter()
        .find_map(|n| one(headers, n))
        .filter(|id| !id.trim().is_empty())
}

/// The signature header value a sender puts on `body` for the generic receiver (and the
/// `webhook` notification sink's `signing-secret`): `sha256=<hex>`.
pub fn generic_signature(secret: &[u8], body: &[u8]) -> String {
    format!(
        "sha256={}",
        verify::to_hex(&verify::hmac_sha256(secret, body))
    )
}
