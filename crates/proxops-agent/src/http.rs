//! The agent's HTTP endpoint.
//!
//! | route | answers |
//! | --- | --- |
//! | `GET /healthz` | 200 `ok` while passes complete in time; 503 with the reason when not |
//! | `GET /readyz` | 200 once a first pass loaded the repository and ran; 503 before and while stopping |
//! | `GET /metrics` | Prometheus text format 0.0.4; OpenMetrics 1.0.0 when `Accept` prefers it |
//! | `GET /status` | [`AgentStatus`](super::AgentStatus) as JSON |
//! | `POST /v1/clusters/{cluster}/reconcile` | runs the cluster's cycle now; its [`ClusterState`](super::ClusterState); 404 for a cluster the repository does not have |
//! | `POST /v1/clusters/{cluster}/suspend[?resource=Kind/name]` | suspends the cluster or a resource; 404 for one the repository does not declare (nothing is saved) |
//! | `POST /v1/clusters/{cluster}/resume[?resource=Kind/name]` | resumes it (also one no longer declared, if it is suspended) |
//! | `POST /v1/hooks/{github,gitlab,gitea,generic}` | a forge's signed delivery; a push to the followed branch runs a pass now: see [`hooks`](super::hooks) |
//! | `GET /`, `GET /ui/...` | the web dashboard: overview, cluster, resource and graph pages of the same status, live through server-sent events (`/ui/events`) |
//!
//! The read-only routes (the dashboard's pages too) are open; the dashboard's buttons post to
//! the control routes. The `POST` routes need `Authorization: Bearer <token>`
//! ([`AgentOptions::token`](super::AgentOptions::token); 401 without it or with another, and
//! always when the agent has none), a `Host` that is the agent's own address and no `Origin`
//! but the agent's own (403 otherwise): see [`auth`](super::auth). The webhook routes are
//! authenticated by their signatures instead.

use super::{Declared, Shared, Trigger, lock};
use axum::Router;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{oneshot, watch};

/// Serves until `stop` turns true.
pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let control = Router::new()
        .route("/v1/clusters/{cluster}/reconcile", post(reconcile))
        .route("/v1/clusters/{cluster}/suspend", post(suspend))
        .route("/v1/clusters/{cluster}/resume", post(resume))
        .route_layer(middleware::from_fn_with_state(
            Arc::clone(&shared),
            guard_control,
        ));
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/status", get(status))
        .route("/v1/hooks/{forge}", post(super::hooks::receive))
        .merge(control)
        .merge(super::dashboard::routes())
        .with_state(shared);
    let shutdown = async move {
        while !*stop.borrow() {
            if stop.changed().await.is_err() {
                return;
            }
        }
    };
    if let Err(e) = axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
    {
        tracing::error!(error = %e, "the HTTP endpoint stopped");
    }
}

/// Lets a control request through only past [`auth::Guard`](super::auth).
async fn guard_control(
    State(shared): State<Arc<Shared>>,
    request: Request,
    next: Next,
) -> Response {
    let headers = request.headers();
    let one = |h: header::HeaderName| header_text(headers, &h);
    let checked = shared.guard.check(
        one(header::HOST).as_deref(),
        one(header::ORIGIN).as_deref(),
        one(header::AUTHORIZATION).as_deref(),
    );
    match checked {
        Ok(()) => next.run(request).await,
        Err(refusal) => {
            tracing::warn!(path = %request.uri().path(), reason = %refusal, "control request refused");
            let code = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
            let mut response = text(code, format!("{refusal}\n"));
            if code == StatusCode::UNAUTHORIZED {
                response.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    header::HeaderValue::from_static("Bearer"),
                );
            }
            response
        }
    }
}

/// A header's value; a header sent twice or not as text counts as one nobody can trust, and
/// reads as `\u{0}` so that it matches nothing.
fn header_text(headers: &HeaderMap, name: &header::HeaderName) -> Option<String> {
    let mut values = headers.get_all(name).iter();
    let first = values.next()?;
    if values.next().is_some() {
        return Some("\u{0}".to_owned());
    }
    Some(
        first
            .to_str()
            .map_or_else(|_| "\u{0}".to_owned(), str::to_owned),
    )
}

fn text(code: StatusCode, body: String) -> Response {
    (
        code,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body,
    )
        .into_response()
}

async fn healthz(State(shared): State<Arc<Shared>>) -> Response {
    match unhealthy_reason(&shared) {
        None => text(StatusCode::OK, "ok\n".to_owned()),
        Some(why) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("unhealthy: {why}\n"),
        ),
    }
}

/// Why the agent is not healthy, if it is not: a pass stuck, or passes no longer happening.
fn unhealthy_reason(shared: &Shared) -> Option<String> {
    let h = lock(&shared.health);
    let limit = shared.options.stall_timeout;
    let secs = |d: Duration| d.as_secs();
    if h.stopping {
        return Some("stopping".to_owned());
    }
    if let Some(started) = h.pass_started
        && started.elapsed() > limit
    {
        return Some(format!(
            "a pass has been running for {}s (limit {}s)",
            secs(started.elapsed()),
            secs(limit)
        ));
    }
    match h.last_pass_end {
        None if h.pass_started.is_none() && h.started.elapsed() > limit => Some(format!(
            "no pass has run in the {}s since the agent started",
            secs(h.started.elapsed())
        )),
        Some(end)
            if h.pass_started.is_none()
                && end.elapsed() > shared.options.interval.mul_f64(1.1) + limit =>
        {
            Some(format!("no pass for {}s", secs(end.elapsed())))
        }
        _ => None,
    }
}

async fn readyz(State(shared): State<Arc<Shared>>) -> Response {
    let h = lock(&shared.health);
    if h.stopping {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: stopping\n".to_owned(),
        )
    } else if h.ready {
        text(StatusCode::OK, "ready\n".to_owned())
    } else {
        text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: no pass has completed yet\n".to_owned(),
        )
    }
}

async fn metrics(State(shared): State<Arc<Shared>>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = super::metrics::Format::negotiate(accept);
    match format.encode(&shared.exposition) {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, format.content_type())],
            body,
        )
            .into_response(),
        Err(_) => text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the metrics could not be encoded\n".to_owned(),
        ),
    }
}

async fn status(State(shared): State<Arc<Shared>>) -> Response {
    match shared.status_json() {
        Ok(body) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            body,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn reconcile(State(shared): State<Arc<Shared>>, Path(cluster): Path<String>) -> Response {
    let (reply, answer) = oneshot::channel();
    let sent = shared
        .triggers
        .send(Trigger {
            cluster: cluster.clone(),
            reply,
        })
        .await;
    if sent.is_err() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the agent is stopping\n".to_owned(),
        );
    }
    match answer.await {
        Ok(Some(state)) => axum::Json(state).into_response(),
        Ok(None) => text(
            StatusCode::NOT_FOUND,
            format!("no cluster `{cluster}` in the repository\n"),
        ),
        Err(_) => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the agent is stopping\n".to_owned(),
        ),
    }
}

/// `?resource=Kind/name`.
#[derive(Debug, Deserialize)]
pub(crate) struct Target {
    resource: Option<String>,
}

/// The answer to suspend and resume.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Suspension {
    /// The cluster.
    pub cluster: String,
    /// The resource (`Kind/name`), or none for the whole cluster.
    pub resource: Option<String>,
    /// Whether it is suspended now.
    pub suspended: bool,
    /// Whether this request changed anything.
    pub changed: bool,
}

async fn suspend(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    Query(target): Query<Target>,
) -> Response {
    set_suspension(&shared, cluster, target.resource, true)
}

async fn resume(
    State(shared): State<Arc<Shared>>,
    Path(cluster): Path<String>,
    Query(target): Query<Target>,
) -> Response {
    set_suspension(&shared, cluster, target.resource, false)
}

fn set_suspension(
    shared: &Shared,
    cluster: String,
    resource: Option<String>,
    on: bool,
) -> Response {
    if let Some(r) = &resource
        && r.split_once('/')
            .is_none_or(|(k, n)| k.is_empty() || n.is_empty())
    {
        return text(
            StatusCode::BAD_REQUEST,
            format!("`{r}` is not Kind/name, e.g. VM/web-01\n"),
        );
    }
    let mut suspensions = lock(&shared.suspensions);
    // Resuming what is suspended is always allowed: it may have left the repository since.
    let suspended = match &resource {
        None => suspensions.clusters.contains(&cluster),
        Some(r) => suspensions.resources_of(&cluster).contains(r),
    };
    if on || !suspended {
        match shared.declares(&cluster, resource.as_deref()) {
            Declared::Yes => {}
            Declared::NotLoaded => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "the agent has not loaded the repository yet; try again after its first pass\n"
                        .to_owned(),
                );
            }
            Declared::NoCluster => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!("no cluster `{cluster}` in the repository\n"),
                );
            }
            Declared::NoResource => {
                return text(
                    StatusCode::NOT_FOUND,
                    format!(
                        "cluster `{cluster}` has no resource `{}`\n",
                        resource.as_deref().unwrap_or_default()
                    ),
                );
            }
        }
    }
    let mut next = suspensions.clone();
    let changed = next.set(&cluster, resource.as_deref(), on);
    if changed && let Err(e) = next.save(&shared.options.data_dir) {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("cannot save the suspensions: {e}\n"),
        );
    }
    *suspensions = next;
    drop(suspensions);
    shared.changed();
    tracing::info!(cluster = %cluster, resource = ?resource, suspended = on, "suspension changed");
    axum::Json(Suspension {
        cluster,
        resource,
        suspended: on,
        changed,
    })
    .into_response()
}
