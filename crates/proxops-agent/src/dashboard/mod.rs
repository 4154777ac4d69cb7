//! The agent's web dashboard: server-rendered pages of the agent's own status, live through
//! server-sent events, its actions sent to the control API by the page's script.
//!
//! | route | answers |
//! | --- | --- |
//! | `GET /` | every cluster: state, plane heads, last pass, resources by state, candidates |
//! | `GET /ui/clusters/{cluster}` | its resources (filterable, sortable) and its last cycle |
//! | `GET /ui/clusters/{cluster}/graph` | its dependency graph as SVG, one box per step |
//! | `GET /ui/clusters/{cluster}/resources/{kind}/{name}` | desired document, receipt, artifacts, last plan, history |
//! | `GET /ui/events` | `text/event-stream`: an `status` event ([`AgentStatus`](super::AgentStatus) JSON) on every change |
//! | `GET /ui/assets/{style.css,app.js}` | the stylesheet and script, embedded in the binary |
//!
//! The pages render what `/status` serialises (no second model of the state); only a resource
//! page reads documents from the git planes. They are read-only and open like `/status`. The
//! buttons post to the control routes, so the token (entered once per tab, kept in the tab's
//! `sessionStorage`) and the `Host`/`Origin` checks of [`auth`](super::auth) apply unchanged.

mod detail;
mod detail_pages;
mod graph;
mod pages;

use super::{Shared, lock};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use maud::Markup;
use proxops_engine::workspace::Workspace;
use proxops_graph::Graph;
use proxops_model::ResourceKey;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Live-update streams open at once; more are answered 503 (browsers retry).
pub(crate) const MAX_STREAMS: usize = 32;
/// How long one stream stays open; the browser's `EventSource` then reconnects, so that no
/// stream (nor a test's) outlives its use by long.
const STREAM_LIFETIME: Duration = Duration::from_secs(300);
/// Changes coming together are sent as one event.
const COALESCE: Duration = Duration::from_millis(100);

const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");

/// What the last loaded pass read: the planes' store, the repository with its graphs.
pub(crate) struct View {
    pub(crate) store: proxops_store::Store,
    pub(crate) workspace: Arc<Workspace>,
}

/// The dashboard's routes.
pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/", get(overview))
        .route("/ui/clusters/{cluster}", get(cluster))
        .route("/ui/clusters/{cluster}/graph", get(graph_page))
        .route(
            "/ui/clusters/{cluster}/resources/{kind}/{name}",
            get(resource),
        )
        .route("/ui/events", get(events))
        .route("/ui/assets/style.css", get(|| asset(STYLE, "text/css")))
        .route(
            "/ui/assets/app.js",
            get(|| asset(SCRIPT, "text/javascript")),
        )
}

async fn asset(body: &'static str, mime: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_str(&format!("{mime}; charset=utf-8"))
            .unwrap_or(HeaderValue::from_static("text/plain")),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// An HTML page; no script but the agent's own, no frame of another site.
fn page(code: StatusCode, markup: Markup) -> Response {
    let mut r = (code, markup.into_string()).into_response();
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn not_found(what: String) -> Response {
    page(StatusCode::NOT_FOUND, pages::missing(&what))
}

async fn overview(State(shared): State<Arc<Shared>>) -> Response {
    page(StatusCode::OK, pages::overview(&shared.status()))
}

async fn cluster(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    match shared.cluster_state(&name) {
        Some(c) => page(StatusCode::OK, pages::cluster(&c)),
        None => not_found(format!("The agent has no cluster `{name}`.")),
    }
}

async fn graph_page(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let Some(state) = shared.cluster_state(&name) else {
        return not_found(format!("The agent has no cluster `{name}`."));
    };
    let view = lock(&shared.view).clone();
    let graph = view.as_ref().and_then(|v| v.workspace.graph(&name));
    let markup = detail_pages::graph(
        &name,
        graph.map(|g| graph::svg(&name, g, Some(&state))),
        graph.map_or(0, Graph::step_count),
        graph.map_or(0, Graph::level_count),
    );
    page(StatusCode::OK, markup)
}

async fn resource(
    State(shared): State<Arc<Shared>>,
    Path((name, kind, resource)): Path<(String, String, String)>,
) -> Response {
    let Some(state) = shared.cluster_state(&name) else {
        return not_found(format!("The agent has no cluster `{name}`."));
    };
    let view = lock(&shared.view).clone();
    let declared = view.as_ref().is_some_and(|v| {
        v.workspace
            .graph(&name)
            .is_some_and(|g| g.find(&kind, &resource).is_some())
    });
    let in_planes = state
        .resources
        .iter()
        .any(|r| r.kind == kind && r.name == resource);
    let (Some(view), true) = (view, declared || in_planes) else {
        return not_found(format!(
            "Cluster `{name}` has no resource {kind}/{resource}."
        ));
    };
    let key = ResourceKey {
        kind: kind.clone(),
        name: resource.clone(),
    };
    let cluster = name.clone();
    let read = tokio::task::spawn_blocking(move || detail::read(&view, &cluster, &key)).await;
    let detail = match read {
        Ok(Ok(d)) => d,
        Ok(Err(e)) => {
            tracing::warn!(cluster = %name, error = %e, "the dashboard cannot read the planes");
            detail::Detail::default()
        }
        Err(_) => detail::Detail::default(),
    };
    page(
        StatusCode::OK,
        detail_pages::resource(&state, &kind, &resource, &detail),
    )
}

/// `status` events: one at once, then one per change of the status, until the agent stops or
/// [`STREAM_LIFETIME`] passed; at most [`MAX_STREAMS`] at a time.
async fn events(State(shared): State<Arc<Shared>>) -> Response {
    let Ok(permit) = Arc::clone(&shared.streams).try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [(header::RETRY_AFTER, "5")],
            "too many live-update streams are open\n",
        )
            .into_response();
    };
    let changes = shared.changes.subscribe();
    let opened = Instant::now();
    let state = (shared, changes, permit, true);
    let stream = futures_util::stream::unfold(
        state,
        move |(shared, mut changes, permit, first)| async move {
            if !first {
                let left = STREAM_LIFETIME.checked_sub(opened.elapsed())?;
                match tokio::time::timeout(left, changes.changed()).await {
                    Ok(Ok(())) => tokio::time::sleep(COALESCE).await,
                    _ => return None,
                }
            }
            changes.borrow_and_update();
            if lock(&shared.health).stopping {
                return None;
            }
            let json = shared.status_json().ok()?;
            let event = Event::default()
                .event("status")
                .data(String::from_utf8_lossy(&json));
            Some((Ok::<_, Infallible>(event), (shared, changes, permit, false)))
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

#[cfg(test)]
mod tests;
