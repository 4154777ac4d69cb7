//! One request's way through the simulator: route by path template, count, inject faults,
//! authenticate, read parameters (query, form or JSON body), validate them against the schema
//! table, run the handler, answer `{"data": ...}` or PVE's error shape, and journal a write
//! that reached its handler.

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::api::{self, Ctx};
use crate::error::{ApiError, with_reason};
use crate::journal::JournalEntry;
use crate::server::{Shared, lock};
use crate::{auth, faults, multipart, schema, sync_work};

/// Decodes `%XX` escapes (and `+` as space in forms).
pub(crate) fn percent_decode(s: &str, plus_is_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_is_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parameters as pve-http-server `PVE::APIServer::AnyEvent::decode_urlencoded` reads them:
/// pairs split at `&` or `;`, and a repeated key collects every value.
type Multi = BTreeMap<String, Vec<String>>;

fn parse_form(text: &str) -> Multi {
    let mut out = Multi::new();
    for pair in text.split(['&', ';']).filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        out.entry(percent_decode(k, true))
            .or_default()
            .push(percent_decode(v, true));
    }
    out
}

/// One value per parameter, as pve-common `PVE::RESTHandler` (`$normalize_legacy_param_formats`)
/// and `PVE::JSONSchema::check_type` treat repeated ones: joined with `,` for a string whose
/// format is a `-list` (`tags`, `delete`), else refused ("type check ('string') failed - got
/// ARRAY").
fn single_values(
    params: Multi,
    endpoint: Option<&schema::Endpoint>,
    version: crate::PveVersion,
) -> Result<BTreeMap<String, String>, ApiError> {
    let mut out = BTreeMap::new();
    let mut errors = BTreeMap::new();
    for (k, mut values) in params {
        if values.len() == 1 {
            out.insert(k, values.pop().unwrap_or_default());
            continue;
        }
        let param = endpoint.and_then(|ep| ep.param(version.schema(), &k));
        let list = param.is_some_and(|p| {
            p.ty == schema::Ty::Str && p.format.name().is_some_and(|f| f.ends_with("-list"))
        });
        if list {
            out.insert(k, values.join(","));
        } else if param.is_some_and(|p| p.ty == schema::Ty::Array) {
            out.insert(k, values.join("\n"));
        } else {
            let ty = param.map_or("string", |p| p.ty.name());
            errors.insert(k, format!("type check ('{ty}') failed - got ARRAY"));
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(ApiError::Params(errors))
    }
}

fn json_scalar(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn read_params(uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Result<Multi, ApiError> {
    let mut params = Multi::new();
    if !body.is_empty() {
        let ctype = headers
            .get(axum::http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ctype.starts_with("application/json") {
            let v: serde_json::Value = serde_json::from_slice(body)
                .map_err(|e| ApiError::Status(400, format!("malformed JSON body - {e}")))?;
            if let serde_json::Value::Object(map) = v {
                for (k, v) in map {
                    let values = match &v {
                        serde_json::Value::Array(items) => items.iter().map(json_scalar).collect(),
                        other => vec![json_scalar(other)],
                    };
                    params.insert(k, values);
                }
            }
        } else {
            params = parse_form(&String::from_utf8_lossy(body));
        }
    }
    // `extract_params`: the query's parameters replace the body's.
    if let Some(q) = uri.query() {
        params.extend(parse_form(q));
    }
    Ok(params)
}

/// The upload endpoint's template.
const UPLOAD: &str = "/nodes/{node}/storage/{storage}/upload";

/// pve-http-server `AnyEvent.pm` `$limit_max_post`: 512 KiB for a body that is not an upload.
const LIMIT_MAX_POST: usize = 512 * 1024;

/// An upload's parameters as `AnyEvent.pm` collects them: the query's (`tmpfilename` refused
/// there), then the multipart form's fields and the file.
fn read_upload(
    shared: &Shared,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(Multi, multipart::Upload), ApiError> {
    let ctype = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = multipart::boundary(ctype)?;
    let mut params = uri.query().map(parse_form).unwrap_or_default();
    if params.contains_key("tmpfilename") {
        return Err(ApiError::fail(
            "'tmpfilename' query parameter is not allowed for file uploads",
        ));
    }
    let seq = shared.started.elapsed().as_nanos() as u64;
    let (fields, upload) = multipart::parse(body, &boundary, seq)?;
    for (k, v) in fields {
        params.insert(k, vec![v]);
    }
    params.insert("tmpfilename".into(), vec![upload.tmpfilename.clone()]);
    Ok((params, upload))
}

/// The single axum handler: everything under `/api2/json` and the debug endpoints.
pub(crate) async fn handle(
    State(shared): State<Arc<Shared>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if let Some(debug) = path.strip_prefix("/_sim/") {
        return api::debug::handle(&shared, method.as_str(), debug);
    }
    let rel = match path.strip_prefix("/api2/json") {
        Some("") => "/".to_string(),
        Some(r) if r.starts_with('/') => r.trim_end_matches('/').to_string(),
        _ => path.clone(),
    };
    let rel = if rel.is_empty() { "/".to_string() } else { rel };
    let method_s = method.as_str().to_string();
    // An endpoint the simulated version's schema lacks (the HA rules on 8.4) has no handler.
    let version = lock(&shared.state).pve_version;
    let routed = api::route(&method_s, &rel).filter(|(template, _, _)| {
        schema::endpoint(&method_s, template)
            .is_none_or(|ep| ep.versions.contains(version.schema()))
    });
    let key = match &routed {
        Some((template, _, _)) => format!("{method_s} {template}"),
        None => format!("{method_s} <unknown>"),
    };
    let n = {
        let mut counters = lock(&shared.counters);
        let c = counters.entry(key.clone()).or_insert(0);
        *c += 1;
        *c
    };

    if let Some(resp) = faults::before_request(&shared, &method_s, &key, n, peer).await {
        return resp;
    }
    // pveproxy's clock for a proxied call starts when it forwards the request.
    let arrived = tokio::time::Instant::now();
    let Some((template, handler, vars)) = routed.filter(|_| path.starts_with("/api2/json")) else {
        // pve-http-server `AnyEvent.pm`: `handle_request` authenticates before
        // `handle_api2_request` asks `rest_handler`, whose answer for a path or method without a
        // handler is 501 "Method '$method $rel_uri' not implemented".
        if path.starts_with("/api2/json")
            && let Err(e) = auth::authenticate(&shared, &method_s, &headers, false)
        {
            return e.into_response();
        }
        return ApiError::Status(501, format!("Method '{method_s} {rel}' not implemented"))
            .into_response();
    };

    // pve-manager `PVE/HTTPServer.pm` `auth_handler`: this path is an upload, exempt from the
    // CSRF check and read as a multipart stream.
    let is_upload = method_s == "POST" && template == UPLOAD;
    let principal = if template == "/access/ticket" {
        None
    } else {
        match auth::authenticate(&shared, &method_s, &headers, is_upload) {
            Ok(p) => Some(p),
            Err(e) => return e.into_response(),
        }
    };
    // pve-http-server `AnyEvent.pm` `handle_request`: a plain body is at most
    // `$limit_max_post`.
    if !is_upload && body.len() > LIMIT_MAX_POST {
        return ApiError::Status(501, "for data too large".into()).into_response();
    }
    let mut upload = None;
    let read = if is_upload {
        read_upload(&shared, &uri, &headers, &body).map(|(p, u)| {
            upload = Some(u);
            p
        })
    } else {
        read_params(&uri, &headers, &body)
    };
    let mut params = match read.and_then(|p| {
        let version = lock(&shared.state).pve_version;
        single_values(p, schema::endpoint(&method_s, template), version)
    }) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    // The journal keeps what the client sent (the path's variables are in its path); reads are
    // not journaled, so they clone nothing.
    let journaled = (method != Method::GET).then(|| params.clone());
    for (k, v) in vars {
        params.insert(k, v);
    }
    if let Some(ep) = schema::endpoint(&method_s, template) {
        let version = lock(&shared.state).pve_version;
        let errors = schema::validate(ep, version, &params);
        if !errors.is_empty() {
            return ApiError::Params(errors).into_response();
        }
    }

    // Synchronous config writes wait for the guest's config lock (held by a write still at
    // work), as their handlers do in PVE; the wait counts against pveproxy's timeout.
    let guard = match sync_work::locking_route(&method_s, template) {
        Some(kind) => {
            let vmid = params.get("vmid").and_then(|v| v.parse().ok()).unwrap_or(0);
            match sync_work::lock_guest(&shared, kind, vmid).await {
                Ok(g) => Some(g),
                Err(e) => return e.into_response(),
            }
        }
        None => None,
    };
    // The principal token and root@pam hold everything: no snapshot to take for them.
    let privileged = principal.as_ref().is_none_or(|p| {
        p.is_root() || p.tokenid.as_deref() == Some(shared.config.token.id.as_str())
    });
    let access = if privileged {
        Default::default()
    } else {
        Arc::new(crate::auth::Access::of(&crate::server::lock(&shared.state)))
    };
    let mut ctx = Ctx {
        access,
        shared: shared.clone(),
        principal,
        params,
        method: method_s.clone(),
        template,
        n,
        total: None,
        deferred: None,
        background: None,
        upload,
    };
    let resp = match handler(&mut ctx) {
        Ok(_) if ctx.deferred.is_some() => match ctx.deferred.take() {
            Some(deferred) => {
                let deadline = arrived + lock(&shared.durations).proxy_timeout;
                sync_work::respond(shared.clone(), deferred, guard, deadline).await
            }
            None => ApiError::fail("no deferred work").into_response(),
        },
        Ok(data) if ctx.background.is_some() => match ctx.background.take() {
            Some((upid, wait)) => {
                sync_work::background_delay(&shared, data, &upid, wait, ctx.vmid()).await
            }
            None => ApiError::fail("no task to wait for").into_response(),
        },
        Ok(data) => {
            if method != Method::GET {
                let st = lock(&shared.state);
                shared.persist(&st);
            }
            let mut body = serde_json::json!({ "data": data });
            if let Some(total) = ctx.total {
                body["total"] = total.into();
            }
            with_reason(200, "OK", body)
        }
        Err(e) => e.into_response(),
    };
    if let Some(params) = journaled {
        let entry = JournalEntry::new(&method_s, &rel, template, resp.status().as_u16(), params);
        lock(&shared.journal).push(entry);
    }
    resp
}
