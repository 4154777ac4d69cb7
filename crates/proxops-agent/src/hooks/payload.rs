//! What a verified delivery says, in each forge's words, and whether it calls for a pass.

use serde_json::Value;
use std::collections::BTreeMap;

/// The receivers, one per way of signing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Forge {
    /// GitHub.
    Github,
    /// GitLab.
    Gitlab,
    /// Gitea and Forgejo.
    Gitea,
    /// Anything that signs with `X-ProxOps-Signature`.
    Generic,
}

impl Forge {
    /// Its route segment and metric label.
    pub fn name(self) -> &'static str {
        match self {
            Forge::Github => "github",
            Forge::Gitlab => "gitlab",
            Forge::Gitea => "gitea",
            Forge::Generic => "generic",
        }
    }

    /// The forge of a route segment.
    pub fn from_name(name: &str) -> Option<Forge> {
        match name {
            "github" => Some(Forge::Github),
            "gitlab" => Some(Forge::Gitlab),
            "gitea" | "forgejo" => Some(Forge::Gitea),
            "generic" => Some(Forge::Generic),
            _ => None,
        }
    }
}

/// A delivery, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Notice {
    /// Refs moved: the full ref name (`None`: the generic receiver's bare "something changed"),
    /// the commit it moved to, and whether it was deleted.
    Push {
        git_ref: Option<String>,
        after: Option<String>,
        deleted: bool,
    },
    /// A pull (merge) request was merged: its head and base branches and the merge commit.
    Merged {
        head: String,
        base: String,
        commit: Option<String>,
    },
    /// The forge checks the hook works.
    Ping,
    /// Any other event, named.
    Other(String),
}

/// The header naming the event, per forge (Forgejo also sends Gitea's).
fn event_header(forge: Forge) -> &'static [&'static str] {
    match forge {
        Forge::Github => &["x-github-event"],
        Forge::Gitlab => &["x-gitlab-event"],
        Forge::Gitea => &["x-gitea-event", "x-forgejo-event", "x-gogs-event"],
        Forge::Generic => &["x-proxops-event"],
    }
}

/// Reads a delivery. `event` gives a header's value by (lower-case) name.
pub(crate) fn read(
    forge: Forge,
    event: &dyn Fn(&str) -> Option<String>,
    body: &[u8],
) -> Result<Notice, String> {
    let name = event_header(forge).iter().find_map(|h| event(h));
    let name = match (forge, name) {
        (Forge::Generic, None) => "push".to_owned(),
        (_, Some(n)) => n,
        (_, None) => {
            return Err(format!(
                "no {} header: not a {} delivery",
                event_header(forge)[0],
                forge.name()
            ));
        }
    };
    let json = || -> Result<Value, String> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_slice(body).map_err(|e| format!("the body is not JSON: {e}"))
    };
    let text = |v: &Value, path: &[&str]| -> Option<String> {
        let mut at = v;
        for p in path {
            at = at.get(p)?;
        }
        at.as_str().map(str::to_owned)
    };
    let zero = |sha: &Option<String>| {
        sha.as_deref()
            .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b == b'0'))
    };
    let push = |v: &Value| {
        let after = text(v, &["after"]);
        Notice::Push {
            git_ref: text(v, &["ref"]),
            deleted: v.get("deleted").and_then(Value::as_bool) == Some(true) || zero(&after),
            after,
        }
    };
    match (forge, name.as_str()) {
        (Forge::Github | Forge::Gitea, "ping") | (Forge::Generic, "ping") => Ok(Notice::Ping),
        (Forge::Github | Forge::Gitea | Forge::Generic, "push") | (Forge::Gitlab, "Push Hook") => {
            let v = json()?;
            let notice = push(&v);
            if forge != Forge::Generic && matches!(notice, Notice::Push { git_ref: None, .. }) {
                return Err("a push without `ref`".to_owned());
            }
            Ok(notice)
        }
        (Forge::Github | Forge::Gitea, "pull_request") => {
            let v = json()?;
            let merged = text(&v, &["action"]).as_deref() == Some("closed")
                && v.pointer("/pull_request/merged").and_then(Value::as_bool) == Some(true);
            match (
                merged,
                text(&v, &["pull_request", "head", "ref"]),
                text(&v, &["pull_request", "base", "ref"]),
            ) {
                (true, Some(head), Some(base)) => Ok(Notice::Merged {
                    head,
                    base,
                    commit: text(&v, &["pull_request", "merge_commit_sha"]),
                }),
                (true, _, _) => Err("a merged pull request without head and base".to_owned()),
                (false, _, _) => Ok(Notice::Other(format!(
                    "pull_request {}",
                    text(&v, &["action"]).unwrap_or_default()
                ))),
            }
        }
        (Forge::Gitlab, "Merge Request Hook") => {
            let v = json()?;
            let attrs = |key: &str| text(&v, &["object_attributes", key]);
            if attrs("action").as_deref() != Some("merge") {
                return Ok(Notice::Other(format!(
                    "merge request {}",
                    attrs("action").unwrap_or_default()
                )));
            }
            match (attrs("source_branch"), attrs("target_branch")) {
                (Some(head), Some(base)) => Ok(Notice::Merged {
                    head,
                    base,
                    commit: attrs("merge_commit_sha"),
                }),
                _ => Err("a merge without source and target branch".to_owned()),
            }
        }
        (_, other) => Ok(Notice::Other(other.to_owned())),
    }
}

/// What the agent follows, as the last pass read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Followed {
    /// The branch of a remote repository (`None`: a local work tree, where any push notice
    /// calls for a pass: which branch its owner pulls into it is not known here).
    pub branch: Option<String>,
    /// The live desired branch of each gated (`pullRequest`) cluster: a push to it is a
    /// candidate merged.
    pub gated: BTreeMap<String, String>,
}

/// What to do about a delivery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// A pass over every cluster, after a fetch; the commit, when the delivery names it.
    All(Option<String>),
    /// A pass over one gated cluster whose candidate was merged.
    Cluster(String, Option<String>),
    /// Acknowledged, nothing to do: why.
    Ignore(String),
}

/// The candidate branches' prefix (`proxops/candidates/<cluster>/<id>`).
const CANDIDATES: &str = "proxops/candidates/";

/// Decides what `notice` calls for.
pub(crate) fn decide(notice: &Notice, followed: &Followed) -> Decision {
    match notice {
        Notice::Ping => Decision::Ignore("ping: the hook works".to_owned()),
        Notice::Other(event) => Decision::Ignore(format!("event `{event}` is not acted on")),
        Notice::Push {
            deleted: true,
            git_ref,
            ..
        } => Decision::Ignore(format!(
            "`{}` was deleted",
            git_ref.as_deref().unwrap_or_default()
        )),
        Notice::Push { git_ref, after, .. } => {
            let branch = git_ref
                .as_deref()
                .and_then(|r| r.strip_prefix("refs/heads/"));
            if let Some(cluster) = branch.and_then(|b| followed.gated.get(b)) {
                return Decision::Cluster(cluster.clone(), after.clone());
            }
            match (&followed.branch, git_ref) {
                (None, _) | (Some(_), None) => Decision::All(after.clone()),
                (Some(want), Some(_)) if branch == Some(want.as_str()) => {
                    Decision::All(after.clone())
                }
                (Some(want), Some(r)) => Decision::Ignore(format!(
                    "a push to `{r}`, not to the followed branch `{want}`"
                )),
            }
        }
        Notice::Merged { head, base, commit } => {
            match followed.gated.get(base) {
                Some(cluster) if head.starts_with(CANDIDATES) => {
                    Decision::Cluster(cluster.clone(), commit.clone())
                }
                // A merge into the followed branch is also a push, which triggers the pass.
                _ => Decision::Ignore(format!(
                    "a merge of `{head}` into `{base}`: its push notice triggers any pass"
                )),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    }

    fn followed() -> Followed {
        Followed {
            branch: Some("main".into()),
            gated: BTreeMap::from([("proxops/desired/lab".into(), "lab".into())]),
        }
    }

    #[test]
    fn pushes_to_the_followed_branch_call_for_a_pass_and_others_do_not() {
        let body = br#"{"ref":"refs/heads/main","after":"abc"}"#;
        let gh = read(Forge::Github, &headers(&[("x-github-event", "push")]), body);
        assert_eq!(
            decide(&gh.clone().unwrap_or(Notice::Ping), &followed()),
            Decision::All(Some("abc".into()))
        );
        let gl = read(
            Forge::Gitlab,
            &headers(&[("x-gitlab-event", "Push Hook")]),
            body,
        );
        assert_eq!(gl, gh);
        let other = read(
            Forge::Gitea,
            &headers(&[("x-forgejo-event", "push")]),
            br#"{"ref":"refs/heads/feature","after":"abc"}"#,
        );
        let decision = decide(&other.unwrap_or(Notice::Ping), &followed());
        assert!(
            matches!(decision, Decision::Ignore(ref why) if why.contains("feature")),
            "{decision:?}"
        );
        // A local work tree takes any push notice.
        let local = Followed::default();
        let any = read(
            Forge::Github,
            &headers(&[("x-github-event", "push")]),
            br#"{"ref":"refs/heads/feature"}"#,
        );
        assert_eq!(
            decide(&any.unwrap_or(Notice::Ping), &local),
            Decision::All(None)
        );
        let deleted = read(
            Forge::Github,
            &headers(&[("x-github-event", "push")]),
            br#"{"ref":"refs/heads/main","after":"0000000000000000000000000000000000000000","deleted":true}"#,
        );
        assert!(matches!(
            decide(&deleted.unwrap_or(Notice::Ping), &local),
            Decision::Ignore(_)
        ));
    }

    #[test]
    fn pings_other_events_and_bad_bodies() {
        let ping = read(
            Forge::Github,
            &headers(&[("x-github-event", "ping")]),
            b"{}",
        );
        assert_eq!(ping, Ok(Notice::Ping));
        let issue = read(
            Forge::Github,
            &headers(&[("x-github-event", "issues")]),
            b"{}",
        );
        assert!(matches!(
            decide(&issue.unwrap_or(Notice::Ping), &followed()),
            Decision::Ignore(_)
        ));
        assert!(read(Forge::Github, &headers(&[]), b"{}").is_err());
        assert!(
            read(
                Forge::Github,
                &headers(&[("x-github-event", "push")]),
                b"{not json"
            )
            .is_err()
        );
        assert!(
            read(
                Forge::Github,
                &headers(&[("x-github-event", "push")]),
                b"{}"
            )
            .is_err()
        );
        // The generic receiver: no event header and no body is a poke of the followed branch.
        let poke = read(Forge::Generic, &headers(&[]), b"");
        assert_eq!(
            decide(&poke.unwrap_or(Notice::Ping), &followed()),
            Decision::All(None)
        );
    }

    #[test]
    fn a_merged_candidate_calls_for_its_clusters_pass() {
        let body = br#"{"action":"closed","pull_request":{"merged":true,"merge_commit_sha":"m1","head":{"ref":"proxops/candidates/lab/0001"},"base":{"ref":"proxops/desired/lab"}}}"#;
        for forge in [Forge::Github, Forge::Gitea] {
            let header: &'static [(&str, &str)] = match forge {
                Forge::Github => &[("x-github-event", "pull_request")],
                _ => &[("x-gitea-event", "pull_request")],
            };
            let n = read(forge, &headers(header), body).unwrap_or(Notice::Ping);
            assert_eq!(
                decide(&n, &followed()),
                Decision::Cluster("lab".into(), Some("m1".into()))
            );
        }
        let gl = br#"{"object_attributes":{"action":"merge","source_branch":"proxops/candidates/lab/0001","target_branch":"proxops/desired/lab","merge_commit_sha":"m1"}}"#;
        let n = read(
            Forge::Gitlab,
            &headers(&[("x-gitlab-event", "Merge Request Hook")]),
            gl,
        );
        assert_eq!(
            decide(&n.unwrap_or(Notice::Ping), &followed()),
            Decision::Cluster("lab".into(), Some("m1".into()))
        );
        // An opened one, or one merged elsewhere, is not.
        let opened = String::from_utf8_lossy(body).replace("closed", "opened");
        let n = read(
            Forge::Github,
            &headers(&[("x-github-event", "pull_request")]),
            opened.as_bytes(),
        );
        assert!(matches!(
            decide(&n.unwrap_or(Notice::Ping), &followed()),
            Decision::Ignore(_)
        ));
        // The push that merging makes on the live desired branch works the same.
        let push = read(
            Forge::Github,
            &headers(&[("x-github-event", "push")]),
            br#"{"ref":"refs/heads/proxops/desired/lab","after":"m1"}"#,
        );
        assert_eq!(
            decide(&push.unwrap_or(Notice::Ping), &followed()),
            Decision::Cluster("lab".into(), Some("m1".into()))
        );
    }
}
