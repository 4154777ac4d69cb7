//! One request's way through the simulator: route by path template, count, inject faults,
//! authenticate, read parameters (query, form or JSON body), validate them against the schema
//! table, run the handler, and answer `{"data": ...}` or PVE's error shape.

use axum::body::Bytes;
use axum::extract::{ConnectInfo, State};
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::api::{self, Ctx};
use crate::error::{ApiError, with_reason};
use crate::server::{Shared, lock};
use crate::{auth, faults, schema};

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

fn parse_form(text: &str, into: &mut BTreeMap<String, String>) {
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        into.insert(percent_decode(k, true), percent_decode(v, true));
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

fn read_params(
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<BTreeMap<String, String>, ApiError> {
    let mut params = BTreeMap::new();
    if let Some(q) = uri.query() {
        parse_form(q, &mut params);
    }
    if body.is_empty() {
        return Ok(params);
    }
    let ctype = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if ctype.starts_with("application/json") {
        let v: serde_json::Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::Status(400, format!("malformed JSON body - {e}")))?;
        if let serde_json::Value::Object(map) = v {
            for (k, v) in map {
                params.insert(k, json_scalar(&v));
            }
        }
    } else {
        parse_form(&String::from_utf8_lossy(body), &mut params);
    }
    Ok(params)
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
    let routed = api::route(&method_s, &rel);
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
    let Some((template, handler, vars)) = routed.filter(|_| path.starts_with("/api2/json")) else {
        return ApiError::Status(501, format!("Method '{method_s} {rel}' not implemented"))
            .into_response();
    };

    let mut params = match read_params(&uri, &headers, &body) {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let principal = if template == "/access/ticket" {
        None
    } else {
        match auth::authenticate(&shared, &method_s, &headers) {
            Ok(p) => Some(p),
            Err(e) => return e.into_response(),
        }
    };
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

    let mut ctx = Ctx {
        shared: shared.clone(),
        principal,
        params,
        method: method_s.clone(),
        template,
        n,
        total: None,
    };
    match handler(&mut ctx) {
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
    }
}
