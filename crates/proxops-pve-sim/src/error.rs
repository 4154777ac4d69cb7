//! Errors: [`SimError`] for the library API (start, state files), [`ApiError`] for what the
//! HTTP API answers, shaped as PVE sends it.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A failure of the simulator itself (not of an API request).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SimError {
    /// Reading or writing a file failed.
    #[error("{0}: {1}")]
    Io(PathBuf, #[source] std::io::Error),
    /// A state or seed file is not valid JSON for a state.
    #[error("invalid state JSON: {0}")]
    StateJson(#[source] serde_json::Error),
    /// Binding the listen address failed.
    #[error("cannot listen on {0}: {1}")]
    Bind(std::net::SocketAddr, #[source] std::io::Error),
    /// Generating the certificate or building the TLS configuration failed.
    #[error("TLS setup failed: {0}")]
    Tls(String),
    /// A token string is not `USER@REALM!TOKENID=SECRET`.
    #[error("invalid API token '{0}': expected USER@REALM!TOKENID=SECRET")]
    Token(String),
    /// The server task ended with an error.
    #[error("server failed: {0}")]
    Server(String),
    /// The OS gave no randomness for the ticket-signing secret.
    #[error("no randomness from the OS for the ticket secret: {0}")]
    Random(String),
    /// Guest config files could not be seeded.
    #[error("cannot seed guests: {0}")]
    Seed(String),
}

/// An API failure as PVE answers it.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ApiError {
    /// 400 with per-parameter messages.
    Params(BTreeMap<String, String>),
    /// A failure with a status and message (500 unless said otherwise); the message goes into the
    /// reason phrase and into `message`.
    Status(u16, String),
}

impl ApiError {
    /// A 500 with a message.
    pub fn fail(msg: impl Into<String>) -> ApiError {
        ApiError::Status(500, msg.into())
    }

    /// A 400 for one parameter.
    pub fn param(name: &str, msg: impl Into<String>) -> ApiError {
        ApiError::Params(BTreeMap::from([(name.to_string(), msg.into())]))
    }

    /// The error as a task's exit status would carry it: the message, or PVE's
    /// `parameter verification failed` with each parameter's text.
    pub fn text(&self) -> String {
        match self {
            ApiError::Status(_, msg) => msg.trim_end().to_string(),
            ApiError::Params(errors) => {
                let parts: Vec<String> = errors
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.trim_end()))
                    .collect();
                format!("parameter verification failed - {}", parts.join(", "))
            }
        }
    }

    /// The HTTP status code.
    pub fn status(&self) -> u16 {
        match self {
            ApiError::Params(_) => 400,
            ApiError::Status(code, _) => *code,
        }
    }
}

/// A response with a custom HTTP/1.1 reason phrase (PVE puts error texts there).
pub(crate) fn with_reason(status: u16, reason: &str, body: serde_json::Value) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut resp = (
        code,
        [(
            axum::http::header::CONTENT_TYPE,
            "application/json;charset=UTF-8",
        )],
        body.to_string(),
    )
        .into_response();
    // The reason phrase is one line of visible ASCII-ish text; PVE flattens its messages too.
    let line: String = reason
        .trim()
        .chars()
        .map(|c| {
            if c == '\n' || c == '\r' || c.is_control() {
                ' '
            } else {
                c
            }
        })
        .filter(char::is_ascii)
        .collect();
    if let Ok(phrase) = hyper::ext::ReasonPhrase::try_from(line) {
        resp.extensions_mut().insert(phrase);
    }
    resp
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        match self {
            ApiError::Params(errors) => with_reason(
                400,
                "Parameter verification failed.",
                serde_json::json!({ "data": null, "errors": errors }),
            ),
            ApiError::Status(code, msg) => {
                let message = if msg.ends_with('\n') {
                    msg.clone()
                } else {
                    format!("{msg}\n")
                };
                with_reason(
                    code,
                    &msg,
                    serde_json::json!({ "data": null, "message": message }),
                )
            }
        }
    }
}
