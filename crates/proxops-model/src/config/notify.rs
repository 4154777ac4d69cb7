//! The agent's webhook receivers (`agent.webhooks`) and notification sinks (`notifications:`,
//! in `proxops.yaml`, the agent's `--config` and, per cluster, its `pve.clusters.<c>` entry).
//!
//! Secrets (a receiver's shared secret, a sink's URL or token) are never written in these
//! files, which are committed or world-readable: they name where the secret is, an environment
//! variable, a file, or a key of a SOPS file. A value written in place is refused with
//! [`Code::PlainSecret`] and masked in what the diagnostic shows ([`plain_secret_spans`]).

use super::problem::{ConfigProblem, is_env_name};
use super::typed::{FromConfigText, Typed};
use super::url::redact_url;
use crate::diagnostic::Code;
use crate::yaml::{Node, NodeValue, PathSeg, Span};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The webhook receivers of `proxops run`: `POST /v1/hooks/<forge>`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct WebhooksConfig {
    /// GitHub (`X-Hub-Signature-256`, HMAC-SHA256 of the body).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_even_if_empty"
    )]
    pub github: Option<ReceiverConfig>,
    /// GitLab (`X-Gitlab-Token`, the secret token itself).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_even_if_empty"
    )]
    pub gitlab: Option<ReceiverConfig>,
    /// Gitea and Forgejo (`X-Gitea-Signature`, hex HMAC-SHA256 of the body).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_even_if_empty"
    )]
    pub gitea: Option<ReceiverConfig>,
    /// Anything else (`X-ProxOps-Signature: sha256=<hex HMAC-SHA256 of the body>`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present_even_if_empty"
    )]
    pub generic: Option<ReceiverConfig>,
    /// The largest body accepted, in bytes (default 1048576); larger ones get 413.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body_bytes: Option<u64>,
}

/// A receiver written with no value (`gitlab:`) is there, with nothing set: its check then says
/// what it lacks, rather than the receiver silently missing.
fn present_even_if_empty<'de, D>(deserializer: D) -> Result<Option<ReceiverConfig>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    Ok(Some(
        Option::<ReceiverConfig>::deserialize(deserializer)?.unwrap_or_default(),
    ))
}

/// Where a receiver's shared secret is: exactly one of a file or an environment variable.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct ReceiverConfig {
    /// A file holding the secret (relative to the configuration file); surrounding whitespace
    /// is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_file: Option<String>,
    /// An environment variable holding the secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret_env: Option<String>,
}

/// The default body limit of the receivers.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;

/// Where a sink's secret (URL, token, signing secret) is: exactly one of these. Written as a
/// mapping, e.g. `url: {env: PROXOPS_SLACK_URL}`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct SecretSource {
    /// An environment variable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<String>,
    /// A file (relative to the configuration file); surrounding whitespace is ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    /// A key of the `secrets:` map of the sink's SOPS `secrets-file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sops: Option<String>,
}

/// What a sink talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SinkKind {
    /// A JSON `Event` document per event, optionally HMAC-signed.
    Webhook,
    /// A Slack-compatible incoming webhook (Mattermost and Discord's `/slack` accept it too).
    Slack,
    /// A topic on an ntfy server, with the priority by severity.
    Ntfy,
    /// A commit status on the source commit a cycle reconciled.
    CommitStatus,
}

impl SinkKind {
    /// The name as written in YAML.
    pub fn name(self) -> &'static str {
        match self {
            SinkKind::Webhook => "webhook",
            SinkKind::Slack => "slack",
            SinkKind::Ntfy => "ntfy",
            SinkKind::CommitStatus => "commit-status",
        }
    }
}

/// The forges a `commit-status` sink posts to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Forge {
    /// GitHub (`POST /repos/{owner}/{repo}/statuses/{sha}`).
    Github,
    /// GitLab (`POST /projects/{id}/statuses/{sha}`).
    Gitlab,
    /// Gitea or Forgejo (`POST /repos/{owner}/{repo}/statuses/{sha}`).
    Gitea,
}

/// The events a sink can ask for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum EventKind {
    /// A cluster's cycle failed (an action failed, PVE could not be reached, ...).
    CycleFailed,
    /// A cluster (or the repository) works again after failing.
    CycleRecovered,
    /// PVE differed from the repository without a new commit: corrected, or reported (`drift:
    /// report`).
    Drift,
    /// A difference ProxOps never fixes by itself.
    Anomaly,
    /// Prunes held back by the prune budget or the empty-composition guard.
    DeferredPrunes,
    /// A resource WAITing longer than the sink's `wait-cycles`.
    ResourceWaiting,
    /// A cluster lease changed hands: taken over from a holder that expired or died, or lost
    /// to another writer during a cycle.
    LeaseTakenOver,
    /// The repository cannot be read, or a cluster's configuration or manifests are invalid.
    RepositoryInvalid,
}

impl EventKind {
    /// Every event, in declaration order.
    pub const ALL: [EventKind; 8] = [
        EventKind::CycleFailed,
        EventKind::CycleRecovered,
        EventKind::Drift,
        EventKind::Anomaly,
        EventKind::DeferredPrunes,
        EventKind::ResourceWaiting,
        EventKind::LeaseTakenOver,
        EventKind::RepositoryInvalid,
    ];
}

/// How serious an event is; a sink takes those at or above its `min-severity`.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum NotifySeverity {
    /// Good news (a recovery).
    #[default]
    Info,
    /// Worth a look (drift, anomalies, deferred prunes, waiting resources, leases).
    Warning,
    /// Something failed.
    Error,
}

impl NotifySeverity {
    /// The name as written in YAML and in event documents.
    pub fn name(self) -> &'static str {
        match self {
            NotifySeverity::Info => "info",
            NotifySeverity::Warning => "warning",
            NotifySeverity::Error => "error",
        }
    }
}

/// One notification sink.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub struct SinkConfig {
    /// Its name in `/metrics` and logs (default: its type); unique in its list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `webhook`, `slack`, `ntfy` or `commit-status`.
    #[serde(rename = "type")]
    pub kind: SinkKind,
    /// The events it wants (default: all). Not for `commit-status`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<EventKind>,
    /// The least severity it takes: `info` (default), `warning` or `error`. Not for
    /// `commit-status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_severity: Option<NotifySeverity>,
    /// How long until an event still true is sent again, e.g. `4h` (default), or `never`. Not
    /// for `commit-status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reminder: Option<Typed<Reminder>>,
    /// A resource WAITing for more than this many cycles in a row is an event (default 3). Not
    /// for `commit-status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_cycles: Option<u32>,
    /// Where to send (`webhook`, `slack`: the URL; `ntfy`: the topic's URL, e.g.
    /// `https://ntfy.sh/<topic>`): a secret, from the environment, a file or SOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<SecretSource>,
    /// A token: `ntfy` (optional, sent as a bearer token), `commit-status` (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<SecretSource>,
    /// `webhook` only: an HMAC-SHA256 key; each request then carries
    /// `X-ProxOps-Signature: sha256=<hex>` of its body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<SecretSource>,
    /// The SOPS file holding the `sops:` keys (relative to the configuration file; a cluster's
    /// sinks default to the cluster's own `secrets-file`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secrets_file: Option<String>,
    /// `commit-status`: `github`, `gitlab` or `gitea` (Forgejo too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forge: Option<Forge>,
    /// `commit-status`: the forge's API root (default for GitHub `https://api.github.com`;
    /// GitLab e.g. `https://gitlab.example/api/v4`, Gitea `https://gitea.example/api/v1`). It
    /// carries no credentials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
    /// `commit-status`: `owner/name` (GitLab: the project's path or numeric id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// `commit-status`: the status's context (GitLab: name), default `proxops/<cluster>`;
    /// `{cluster}` in it is replaced by the cluster's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// The default reminder interval.
pub const DEFAULT_REMINDER: std::time::Duration = std::time::Duration::from_secs(4 * 3600);

/// The default of `wait-cycles`.
pub const DEFAULT_WAIT_CYCLES: u32 = 3;

/// When an event still true is sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reminder {
    /// After this long.
    After(std::time::Duration),
    /// Never: only changes are sent.
    Never,
}

/// `never`, or a positive duration.
impl FromConfigText for Reminder {
    fn from_config_text(text: &str) -> Option<Reminder> {
        if text == "never" {
            Some(Reminder::Never)
        } else {
            std::time::Duration::from_config_text(text).map(Reminder::After)
        }
    }
}

impl SinkConfig {
    /// Its name: `name`, else its type.
    pub fn label(&self) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| self.kind.name().to_owned())
    }

    /// Its reminder interval (unreadable values were refused by [`check_sinks`]).
    pub fn reminder(&self) -> Reminder {
        self.reminder
            .as_ref()
            .and_then(Typed::value)
            .unwrap_or(Reminder::After(DEFAULT_REMINDER))
    }

    /// Whether it wants events of `kind`.
    pub fn wants(&self, kind: EventKind) -> bool {
        self.kind != SinkKind::CommitStatus
            && (self.events.is_empty() || self.events.contains(&kind))
    }
}

fn problem(path: Vec<PathSeg>, message: String, help: Option<&str>) -> ConfigProblem {
    ConfigProblem {
        code: Code::InvalidValue,
        path,
        message,
        help: help.map(str::to_owned),
    }
}

fn join(base: &[PathSeg], rest: &[&str]) -> Vec<PathSeg> {
    base.iter()
        .cloned()
        .chain(rest.iter().map(|s| PathSeg::from(*s)))
        .collect()
}

impl WebhooksConfig {
    /// Checks, with paths under `base` (`agent.webhooks`).
    pub fn check(&self, base: &[PathSeg]) -> Vec<ConfigProblem> {
        let mut out = Vec::new();
        for (name, receiver) in [
            ("github", &self.github),
            ("gitlab", &self.gitlab),
            ("gitea", &self.gitea),
            ("generic", &self.generic),
        ] {
            let Some(r) = receiver else { continue };
            let at = |key: &str| join(base, &[name, key]);
            match (&r.secret_file, &r.secret_env) {
                (Some(_), Some(_)) => out.push(problem(
                    at("secret-env"),
                    format!("`{name}` names its secret twice: `secret-file` and `secret-env`"),
                    Some("keep one place for the secret"),
                )),
                (None, None) => out.push(ConfigProblem {
                    code: Code::MissingField,
                    path: join(base, &[name]),
                    message: format!("the `{name}` receiver has no secret"),
                    help: Some(
                        "add `secret-file: /etc/proxops/webhook.secret` or `secret-env: VAR`; \
                         the forge signs each delivery with it"
                            .into(),
                    ),
                }),
                _ => {}
            }
            if r.secret_file
                .as_deref()
                .is_some_and(|f| f.trim().is_empty())
            {
                out.push(problem(
                    at("secret-file"),
                    "`secret-file` must not be empty".into(),
                    None,
                ));
            }
            if let Some(var) = &r.secret_env
                && !is_env_name(var)
            {
                out.push(env_problem(at("secret-env"), var));
            }
        }
        if self.max_body_bytes == Some(0) {
            out.push(problem(
                join(base, &["max-body-bytes"]),
                "`max-body-bytes` must be positive".into(),
                Some("e.g. 1048576 (1 MiB)"),
            ));
        }
        out
    }
}

fn env_problem(path: Vec<PathSeg>, var: &str) -> ConfigProblem {
    problem(
        path,
        format!("`{var}` is not an environment variable name"),
        Some("letters, digits and `_`, not starting with a digit"),
    )
}

/// Checks a list of sinks at `base` (`notifications`, or an entry's `notifications`).
pub fn check_sinks(sinks: &[SinkConfig], base: &[PathSeg]) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    let mut names: Vec<String> = Vec::new();
    for (i, sink) in sinks.iter().enumerate() {
        let at_sink: Vec<PathSeg> = base.iter().cloned().chain([PathSeg::Index(i)]).collect();
        let label = sink.label();
        if names.contains(&label) {
            out.push(problem(
                join(&at_sink, &["name"]),
                format!("two sinks are named `{label}`"),
                Some("give each sink its own `name`"),
            ));
        }
        names.push(label);
        if let Some(n) = &sink.name
            && (n.is_empty()
                || !n
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        {
            out.push(problem(
                join(&at_sink, &["name"]),
                format!("`{n}` is not a sink name"),
                Some("letters, digits, `-`, `_` and `.`"),
            ));
        }
        out.extend(check_sink(sink, &at_sink));
    }
    out
}

fn check_sink(sink: &SinkConfig, at: &[PathSeg]) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    let kind = sink.kind.name();
    let not_for = |out: &mut Vec<ConfigProblem>, key: &str, present: bool, only: &str| {
        if present {
            out.push(problem(
                join(at, &[key]),
                format!("`{key}` does nothing for a `{kind}` sink"),
                Some(only),
            ));
        }
    };
    let required = |out: &mut Vec<ConfigProblem>, key: &str, present: bool, help: &str| {
        if !present {
            out.push(ConfigProblem {
                code: Code::MissingField,
                path: at.to_vec(),
                message: format!("a `{kind}` sink needs `{key}`"),
                help: Some(help.to_owned()),
            });
        }
    };
    let event_sink = sink.kind != SinkKind::CommitStatus;
    let status_only = "only `commit-status` sinks take it";
    let events_only =
        "a commit-status sink posts the state of every cycle; it takes no event filter";
    match sink.kind {
        SinkKind::Webhook | SinkKind::Slack | SinkKind::Ntfy => {
            required(
                &mut out,
                "url",
                sink.url.is_some(),
                "e.g. `url: {env: PROXOPS_NOTIFY_URL}`",
            );
            not_for(&mut out, "forge", sink.forge.is_some(), status_only);
            not_for(&mut out, "api-url", sink.api_url.is_some(), status_only);
            not_for(
                &mut out,
                "repository",
                sink.repository.is_some(),
                status_only,
            );
            not_for(&mut out, "context", sink.context.is_some(), status_only);
        }
        SinkKind::CommitStatus => {
            not_for(
                &mut out,
                "url",
                sink.url.is_some(),
                "give `forge`, `api-url` and `repository`",
            );
            required(
                &mut out,
                "forge",
                sink.forge.is_some(),
                "`github`, `gitlab` or `gitea`",
            );
            required(
                &mut out,
                "repository",
                sink.repository.is_some(),
                "e.g. `infra/homelab`",
            );
            required(
                &mut out,
                "token",
                sink.token.is_some(),
                "e.g. `token: {env: GITHUB_TOKEN}`",
            );
            if matches!(sink.forge, Some(Forge::Gitlab | Forge::Gitea)) && sink.api_url.is_none() {
                required(
                    &mut out,
                    "api-url",
                    false,
                    "e.g. `https://gitlab.example/api/v4` or `https://gitea.example/api/v1`",
                );
            }
            not_for(&mut out, "events", !sink.events.is_empty(), events_only);
            not_for(
                &mut out,
                "min-severity",
                sink.min_severity.is_some(),
                events_only,
            );
            not_for(&mut out, "reminder", sink.reminder.is_some(), events_only);
            not_for(
                &mut out,
                "wait-cycles",
                sink.wait_cycles.is_some(),
                events_only,
            );
        }
    }
    if sink.kind != SinkKind::Webhook {
        not_for(
            &mut out,
            "signing-secret",
            sink.signing_secret.is_some(),
            "only `webhook` sinks sign their requests",
        );
    }
    if sink.kind == SinkKind::Webhook || sink.kind == SinkKind::Slack {
        not_for(
            &mut out,
            "token",
            sink.token.is_some(),
            "the URL is the credential of a webhook; `ntfy` and `commit-status` take a token",
        );
    }
    if event_sink {
        if let Some(r) = &sink.reminder
            && r.value().is_none()
        {
            out.push(problem(
                join(at, &["reminder"]),
                format!("`{}` is not a positive duration or `never`", r.text()),
                Some("e.g. `4h`, `30m`, or `never` to send only changes"),
            ));
        }
        if sink.wait_cycles == Some(0) {
            out.push(problem(
                join(at, &["wait-cycles"]),
                "`wait-cycles` must be at least 1".into(),
                None,
            ));
        }
    }
    for (key, source) in [
        ("url", &sink.url),
        ("token", &sink.token),
        ("signing-secret", &sink.signing_secret),
    ] {
        if let Some(s) = source {
            out.extend(check_source(s, &join(at, &[key])));
        }
    }
    if let Some(url) = &sink.api_url {
        let shown = redact_url(url);
        if shown != *url {
            out.push(ConfigProblem {
                code: Code::CredentialsInUrl,
                path: join(at, &["api-url"]),
                message: format!("`{shown}` carries credentials in the URL"),
                help: Some("give the token with `token: {env: VAR}`".into()),
            });
        } else if !(url.starts_with("https://") || url.starts_with("http://")) {
            out.push(problem(
                join(at, &["api-url"]),
                format!("`{url}` is not an http(s) URL"),
                Some("e.g. `https://api.github.com`"),
            ));
        }
    }
    if let Some(repo) = &sink.repository {
        let slash = matches!(sink.forge, Some(Forge::Github | Forge::Gitea));
        let ok = !repo.is_empty()
            && !repo.contains(char::is_whitespace)
            && !repo.starts_with('/')
            && !repo.ends_with('/')
            && (!slash || repo.split('/').count() == 2);
        if !ok {
            out.push(problem(
                join(at, &["repository"]),
                format!("`{repo}` is not a repository"),
                Some(if slash {
                    "`owner/name`"
                } else {
                    "the project's path, e.g. `group/project`, or its numeric id"
                }),
            ));
        }
    }
    if sink
        .secrets_file
        .as_deref()
        .is_some_and(|f| f.trim().is_empty())
    {
        out.push(problem(
            join(at, &["secrets-file"]),
            "`secrets-file` must not be empty".into(),
            None,
        ));
    }
    out
}

fn check_source(source: &SecretSource, at: &[PathSeg]) -> Vec<ConfigProblem> {
    let mut out = Vec::new();
    let given = [
        source.env.is_some(),
        source.file.is_some(),
        source.sops.is_some(),
    ]
    .iter()
    .filter(|x| **x)
    .count();
    if given != 1 {
        out.push(problem(
            at.to_vec(),
            "name exactly one of `env`, `file` and `sops`".into(),
            Some("e.g. `{env: PROXOPS_SLACK_URL}` or `{sops: slack-url}`"),
        ));
    }
    if let Some(var) = &source.env
        && !is_env_name(var)
    {
        out.push(env_problem(join(at, &["env"]), var));
    }
    for (key, value) in [("file", &source.file), ("sops", &source.sops)] {
        if value.as_deref().is_some_and(|v| v.trim().is_empty()) {
            out.push(problem(
                join(at, &[key]),
                format!("`{key}` must not be empty"),
                None,
            ));
        }
    }
    out
}

/// The fields of a sink whose value is a secret.
const SECRET_FIELDS: [&str; 3] = ["url", "token", "signing-secret"];

/// The spans of secrets written in place in a configuration document (a scalar where a sink's
/// `url`, `token` or `signing-secret` should name a source): what diagnostics must not show.
pub fn plain_secret_spans(doc: &Node) -> Vec<Span> {
    let mut out = Vec::new();
    let mut lists: Vec<&Node> = doc.get("notifications").into_iter().collect();
    if let Some(NodeValue::Map(clusters)) = doc
        .get("pve")
        .and_then(|p| p.get("clusters"))
        .map(|c| &c.value)
    {
        lists.extend(clusters.iter().filter_map(|(_, e)| e.get("notifications")));
    }
    for list in lists {
        let NodeValue::Seq(items) = &list.value else {
            continue;
        };
        for item in items {
            for field in SECRET_FIELDS {
                if let Some(v) = item.get(field)
                    && matches!(v.value, NodeValue::Scalar(..))
                    && !v.is_null()
                {
                    out.push(v.span);
                }
            }
        }
    }
    out
}

/// `text` with the bytes of `spans` masked by `*`, one per byte, so that other spans still fit
/// (a multi-byte character becomes as many `*`).
pub fn mask_spans(text: &str, spans: &[Span]) -> String {
    let mut bytes = text.as_bytes().to_vec();
    for s in spans {
        let end = s.end.min(bytes.len());
        if s.start < end {
            bytes[s.start..end].fill(b'*');
        }
    }
    // Spans start and end on character boundaries (they come from the parser), so whole
    // characters were replaced; a malformed span falls back to a lossy copy.
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sink(kind: SinkKind) -> SinkConfig {
        SinkConfig {
            name: None,
            kind,
            events: Vec::new(),
            min_severity: None,
            reminder: None,
            wait_cycles: None,
            url: None,
            token: None,
            signing_secret: None,
            secrets_file: None,
            forge: None,
            api_url: None,
            repository: None,
            context: None,
        }
    }

    fn env(var: &str) -> Option<SecretSource> {
        Some(SecretSource {
            env: Some(var.into()),
            ..SecretSource::default()
        })
    }

    #[test]
    fn sinks_need_their_fields_and_refuse_others() {
        let mut slack = sink(SinkKind::Slack);
        assert_eq!(check_sinks(std::slice::from_ref(&slack), &[]).len(), 1);
        slack.url = env("SLACK_URL");
        assert!(check_sinks(std::slice::from_ref(&slack), &[]).is_empty());
        slack.forge = Some(Forge::Github);
        slack.token = env("T");
        assert_eq!(check_sinks(std::slice::from_ref(&slack), &[]).len(), 2);

        let mut status = sink(SinkKind::CommitStatus);
        status.forge = Some(Forge::Gitlab);
        status.repository = Some("group/sub/project".into());
        status.token = env("GITLAB_TOKEN");
        let p = check_sinks(std::slice::from_ref(&status), &[]);
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(p[0].message.contains("api-url"));
        status.api_url = Some("https://gitlab.example/api/v4".into());
        status.events = vec![EventKind::Drift];
        let p = check_sinks(std::slice::from_ref(&status), &[]);
        assert_eq!(p.len(), 1, "{p:?}");
        status.events.clear();
        status.api_url = Some("https://u:pw@gitlab.example/api/v4".into());
        let p = check_sinks(std::slice::from_ref(&status), &[]);
        assert_eq!(p[0].code, Code::CredentialsInUrl);
        assert!(!format!("{p:?}").contains("pw@"));
    }

    #[test]
    fn names_reminders_and_sources_are_checked() {
        let mut a = sink(SinkKind::Webhook);
        a.url = Some(SecretSource {
            env: Some("A".into()),
            sops: Some("a".into()),
            ..SecretSource::default()
        });
        a.reminder = Some("soon".into());
        let b = SinkConfig {
            url: env("1BAD"),
            ..sink(SinkKind::Webhook)
        };
        let p = check_sinks(&[a.clone(), b], &[PathSeg::from("notifications")]);
        let messages: Vec<&str> = p.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(p.len(), 4, "{messages:?}");
        assert!(messages.iter().any(|m| m.contains("two sinks")));
        assert!(messages.iter().any(|m| m.contains("exactly one")));
        assert!(messages.iter().any(|m| m.contains("`soon`")));
        assert!(messages.iter().any(|m| m.contains("`1BAD`")));
        a.reminder = Some("never".into());
        assert_eq!(a.reminder(), Reminder::Never);
        a.reminder = Some("30m".into());
        assert_eq!(
            a.reminder(),
            Reminder::After(std::time::Duration::from_secs(1800))
        );
        assert!(a.wants(EventKind::Anomaly));
        a.events = vec![EventKind::CycleFailed];
        assert!(!a.wants(EventKind::Anomaly));
    }

    #[test]
    fn receivers_need_one_secret() {
        let hooks = WebhooksConfig {
            github: Some(ReceiverConfig::default()),
            gitlab: Some(ReceiverConfig {
                secret_file: Some("f".into()),
                secret_env: Some("E".into()),
            }),
            gitea: Some(ReceiverConfig {
                secret_env: Some("GITEA_SECRET".into()),
                ..ReceiverConfig::default()
            }),
            generic: None,
            max_body_bytes: Some(0),
        };
        let p = hooks.check(&[]);
        assert_eq!(p.len(), 3, "{p:?}");
        assert_eq!(p[0].code, Code::MissingField);
    }

    #[test]
    fn plain_secrets_are_found_and_masked() {
        let text = "notifications:\n  - type: slack\n    url: https://hooks.example/T0/B0/XYZ\n  - type: webhook\n    url: {env: A}\npve:\n  clusters:\n    lab:\n      notifications:\n        - type: ntfy\n          token: tk_ü\n";
        let doc = crate::yaml::parse_documents(text)
            .ok()
            .and_then(|d| d.into_iter().next());
        let Some(doc) = doc else {
            unreachable!("the document parses");
        };
        let spans = plain_secret_spans(&doc);
        assert_eq!(spans.len(), 2);
        let masked = mask_spans(text, &spans);
        assert_eq!(masked.len(), text.len());
        assert!(
            !masked.contains("XYZ") && !masked.contains("tk_"),
            "{masked}"
        );
        assert!(masked.contains("url: {env: A}"));
    }
}
