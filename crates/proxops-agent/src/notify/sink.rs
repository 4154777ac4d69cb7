//! The requests each kind of sink sends: the `webhook` JSON document (optionally signed), a
//! Slack-compatible message, an ntfy publication, and the forges' commit statuses.

use super::event::{EventDocument, cut};
use super::resolve::ResolvedSink;
use crate::hooks::generic_signature;
use proxops_model::config::{Forge, NotifySeverity, SinkKind};

/// One HTTP `POST`, ready to send. Its headers may carry a token: it has no `Debug`.
pub(crate) struct Outgoing {
    pub url: String,
    pub headers: Vec<(&'static str, String)>,
    pub body: Vec<u8>,
    /// What it is, for logs (never a secret).
    pub what: String,
}

const USER_AGENT: &str = concat!("proxops-agent/", env!("CARGO_PKG_VERSION"));

fn json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

/// The request telling `sink` of `doc`; `None` for a sink that takes no events
/// (`commit-status`).
pub(crate) fn event_request(
    sink: &ResolvedSink,
    doc: &EventDocument,
    severity: NotifySeverity,
) -> Option<Outgoing> {
    let url = sink.url.as_ref()?.expose().to_owned();
    let what = format!(
        "{} {}{}",
        doc.reason,
        doc.cluster.as_deref().unwrap_or("repository"),
        doc.resource
            .as_deref()
            .map(|r| format!(" {r}"))
            .unwrap_or_default()
    );
    let mut headers = vec![("user-agent", USER_AGENT.to_owned())];
    let title = format!(
        "proxops {}: {}",
        doc.cluster.as_deref().unwrap_or("repository"),
        doc.reason
    );
    let short = doc.revision.as_deref().map(|r| &r[..r.len().min(12)]);
    let body = match sink.config.kind {
        SinkKind::Webhook => {
            let body = json(doc);
            headers.push(("content-type", "application/json".to_owned()));
            headers.push(("x-proxops-event", doc.reason.to_owned()));
            if let Some(key) = &sink.signing {
                headers.push((
                    "x-proxops-signature",
                    generic_signature(key.expose().as_bytes(), &body),
                ));
            }
            body
        }
        SinkKind::Slack => {
            let icon = match severity {
                NotifySeverity::Info => ":white_check_mark:",
                NotifySeverity::Warning => ":warning:",
                NotifySeverity::Error => ":rotating_light:",
            };
            let mut text = format!("{icon} *{title}*");
            if let Some(r) = &doc.resource {
                text.push_str(&format!(" `{r}`"));
            }
            text.push_str(&format!("\n{}", doc.message));
            if let Some(r) = short {
                text.push_str(&format!("\nrevision `{r}`"));
            }
            headers.push(("content-type", "application/json".to_owned()));
            json(&serde_json::json!({ "text": text }))
        }
        SinkKind::Ntfy => {
            // ntfy's headers must be plain text: names and reasons are ASCII.
            headers.push(("title", title.replace(|c: char| !c.is_ascii(), "?")));
            headers.push((
                "priority",
                match severity {
                    NotifySeverity::Info => "3",
                    NotifySeverity::Warning => "4",
                    NotifySeverity::Error => "5",
                }
                .to_owned(),
            ));
            headers.push((
                "tags",
                match severity {
                    NotifySeverity::Info => "white_check_mark",
                    NotifySeverity::Warning => "warning",
                    NotifySeverity::Error => "rotating_light",
                }
                .to_owned(),
            ));
            if let Some(t) = &sink.token {
                headers.push(("authorization", format!("Bearer {}", t.expose())));
            }
            headers.push(("content-type", "text/plain; charset=utf-8".to_owned()));
            let mut text = doc.message.clone();
            if let Some(r) = &doc.resource {
                text = format!("{r}: {text}");
            }
            if let Some(r) = short {
                text.push_str(&format!(" (revision {r})"));
            }
            text.into_bytes()
        }
        SinkKind::CommitStatus => return None,
    };
    Some(Outgoing {
        url,
        headers,
        body,
        what,
    })
}

/// A commit status, in ProxOps's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatusState {
    /// The cycle runs (or, for a gated change, waits for its merge).
    Pending,
    /// PVE took it.
    Success,
    /// It failed, or could not be applied.
    Failure,
}

/// The request posting `state` on `revision` for `cluster`.
pub(crate) fn status_request(
    sink: &ResolvedSink,
    cluster: &str,
    revision: &str,
    state: StatusState,
    description: &str,
) -> Option<Outgoing> {
    let c = &sink.config;
    let forge = c.forge?;
    let repository = c.repository.as_deref()?;
    let token = sink.token.as_ref()?.expose();
    let api = c
        .api_url
        .as_deref()
        .unwrap_or("https://api.github.com")
        .trim_end_matches('/');
    let context = c
        .context
        .as_deref()
        .unwrap_or("proxops/{cluster}")
        .replace("{cluster}", cluster);
    // GitHub keeps 140 characters of a description.
    let description = cut(description, 140);
    let mut headers = vec![
        ("user-agent", USER_AGENT.to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    let word = |s: StatusState| match (forge, s) {
        (_, StatusState::Success) => "success",
        (Forge::Gitlab, StatusState::Pending) => "running",
        (_, StatusState::Pending) => "pending",
        (Forge::Gitlab, StatusState::Failure) => "failed",
        (_, StatusState::Failure) => "failure",
    };
    let (url, body) = match forge {
        Forge::Github | Forge::Gitea => {
            if forge == Forge::Github {
                headers.push(("accept", "application/vnd.github+json".to_owned()));
                headers.push(("x-github-api-version", "2022-11-28".to_owned()));
                headers.push(("authorization", format!("Bearer {token}")));
            } else {
                headers.push(("authorization", format!("token {token}")));
            }
            (
                format!("{api}/repos/{repository}/statuses/{revision}"),
                serde_json::json!({
                    "state": word(state),
                    "description": description,
                    "context": context,
                }),
            )
        }
        Forge::Gitlab => {
            headers.push(("private-token", token.to_owned()));
            (
                format!("{api}/projects/{}/statuses/{revision}", encode(repository)),
                serde_json::json!({
                    "state": word(state),
                    "description": description,
                    "name": context,
                }),
            )
        }
    };
    Some(Outgoing {
        url,
        headers,
        body: json(&body),
        what: format!(
            "commit status {} on {} for {cluster}",
            word(state),
            &revision[..revision.len().min(12)]
        ),
    })
}

/// Percent-encodes a path segment (GitLab's `group%2Fproject`).
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
