//! The lifecycle every cluster kind goes through, and its table entry ([`Case`]).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::api_token::with_recipient;
use crate::objects::{adopted, remembered, repository};
use crate::placement::{plan_with, sim};
use proxops_engine::adopt::{ObjectOutcome, adopt_objects};
use proxops_engine::execute::{ExecOptions, execute};
use proxops_engine::objects::strip_marks;
use proxops_engine::plan::{ClusterPlan, Verb};
use proxops_engine::planner::PlanOptions;
use proxops_model::kinds::ObjectClass;
use proxops_pve::{Method, Params, PveClient};
use serde_json::Value;

pub(super) fn manifest(kind: &str, name: &str, spec: &str) -> String {
    format!("apiVersion: proxops/v1alpha1\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}")
}

/// What proves an object ProxOps's, and so what the plans are given.
#[derive(Clone, Copy, PartialEq, Default)]
pub(super) enum Proof {
    /// The mark in its free-text field: plans without the planes.
    Mark(&'static str),
    /// A receipt: plans with what the planes remember of the previous texts.
    #[default]
    Receipt,
    /// An API token: marked, and created only with the planes and a SOPS recipient.
    Token,
}

impl Proof {
    fn options(self, previous: &[String]) -> PlanOptions {
        match self {
            Proof::Mark(_) => PlanOptions::default(),
            Proof::Receipt => remembered(previous),
            Proof::Token => with_recipient(remembered(previous)),
        }
    }

    /// What a prune is planned with: what the planes remember, always. Without them the plan
    /// reads no list of a kind the composition no longer declares, so it sees nothing to prune.
    fn prune_options(self, previous: &[String]) -> PlanOptions {
        match self {
            Proof::Mark(_) => remembered(previous),
            other => other.options(previous),
        }
    }

    fn marker(self) -> Option<&'static str> {
        match self {
            Proof::Mark(f) => Some(f),
            Proof::Token => Some("comment"),
            Proof::Receipt => None,
        }
    }
}

/// A call made by hand: method, path, parameters.
pub(super) type Hand = (Method, String, Params);

/// One kind's table entry.
#[derive(Default)]
pub(super) struct Case {
    pub(super) kind: &'static str,
    pub(super) name: &'static str,
    pub(super) proof: Proof,
    /// Manifests it needs, kept in every composition (a VNet's zone, a token's user).
    pub(super) needs: Vec<String>,
    /// Its manifest, and the same with one key changed.
    pub(super) v1: String,
    pub(super) v2: String,
    /// Where its row is read back, and the fields that pick the row.
    pub(super) list: String,
    pub(super) at: Vec<(&'static str, String)>,
    /// Fields the row has once created (as text), besides the mark.
    pub(super) declared: Vec<(&'static str, &'static str)>,
    /// The key `v2` changes, its value under `v1` and under `v2`.
    pub(super) key: &'static str,
    pub(super) was: &'static str,
    pub(super) now: &'static str,
    /// A hand change of `key`.
    pub(super) drift: Hand,
    /// The calls that make an object of the kind by hand, and the fields that pick its row.
    pub(super) hand: Vec<Hand>,
    pub(super) hand_at: Vec<(&'static str, String)>,
    /// When adopt refuses the kind: the manifest that takes the hand-made object over.
    pub(super) take_over: Option<String>,
    /// Other lists adopt must leave as they were but for the marks.
    pub(super) watched: Vec<&'static str>,
}

/// Another object, so that no composition of the lifecycle is empty (which prunes nothing).
fn keep() -> String {
    manifest("Pool", "keep", "  comment: stays declared\n")
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text).collect::<Vec<_>>().join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

async fn get(client: &PveClient, path: &str) -> Value {
    client
        .call_json(Method::GET, path, path, &Params::new())
        .await
        .unwrap()
}

async fn call(client: &PveClient, (method, path, params): &Hand) {
    client
        .call_json(method.clone(), path, path, params)
        .await
        .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
}

/// The row of `list` whose fields are `at`.
async fn row(client: &PveClient, list: &str, at: &[(&str, String)]) -> Option<Value> {
    get(client, list)
        .await
        .as_array()
        .unwrap()
        .iter()
        .find(|r| at.iter().all(|(k, v)| text(&r[*k]) == *v))
        .cloned()
}

async fn run(client: &PveClient, p: &ClusterPlan) {
    let report = execute(client, p, &ExecOptions::default()).await;
    assert!(report.all_succeeded(), "{p:#?}\n{report:#?}");
}

/// Nothing to do and nothing wrong.
fn settled(p: &ClusterPlan) {
    assert!(
        p.actions.is_empty() && p.anomalies.is_empty() && p.errors.is_empty(),
        "{p:#?}"
    );
}

/// The plan's actions but the SDN apply that follows SDN writes (asserted present for them).
fn actions(c: &Case, p: &ClusterPlan) -> Vec<(String, String, Verb)> {
    let sdn = ObjectClass::of_kind(c.kind).is_some_and(ObjectClass::is_sdn);
    let applies = p.actions.iter().filter(|a| a.kind == "SDN").count();
    assert_eq!(applies, usize::from(sdn), "{p:#?}");
    p.actions
        .iter()
        .filter(|a| a.kind != "SDN")
        .map(|a| (a.kind.clone(), a.name.clone(), a.verb))
        .collect()
}

fn only(c: &Case, verb: Verb) -> Vec<(String, String, Verb)> {
    vec![(c.kind.to_owned(), c.name.to_owned(), verb)]
}

/// One update of `c`'s `key`.
fn one_update(c: &Case, p: &ClusterPlan) {
    assert_eq!(actions(c, p), only(c, Verb::Update), "{p:#?}");
    let a = p.actions.iter().find(|a| a.kind == c.kind).unwrap();
    let keys: Vec<&str> = a.changes.iter().map(|k| k.key.as_str()).collect();
    assert_eq!(keys, [c.key], "{a:#?}");
}

/// A list with ProxOps's marks taken out of `marker`, and what PVE computes left out.
fn unmarked(list: &Value, marker: Option<&str>) -> Value {
    let mut list = list.clone();
    for r in list.as_array_mut().into_iter().flatten() {
        let r = r.as_object_mut().unwrap();
        r.remove("digest");
        r.remove("next-run");
        // A mark written where there was no text leaves none.
        if let Some(f) = marker
            && let Some(Value::String(t)) = r.get(f)
        {
            match strip_marks(t) {
                t if t.is_empty() => r.remove(f),
                t => r.insert(f.to_owned(), t.into()),
            };
        }
    }
    list
}

pub(super) async fn lifecycle(c: Case) {
    let (_sim, client) = sim().await;
    let mut base = c.needs.clone();
    base.push(keep());
    let with = |m: &String| {
        let mut t = base.clone();
        t.push(m.clone());
        t
    };
    let (v1, v2) = (with(&c.v1), with(&c.v2));
    let value = |r: &Value| text(&r[c.key]);

    // 1. Created as declared, marked where PVE has a field for it; then nothing to do.
    let p = plan_with(&client, &v1, &c.proof.options(&[])).await;
    assert!(
        p.actions
            .iter()
            .any(|a| a.kind == c.kind && a.name == c.name && a.verb == Verb::Create),
        "{p:#?}"
    );
    run(&client, &p).await;
    let live = row(&client, &c.list, &c.at).await.expect("created");
    for (k, v) in &c.declared {
        assert_eq!(text(&live[*k]), *v, "{k}: {live:#?}");
    }
    assert_eq!(value(&live), c.was, "{live:#?}");
    if let Some(f) = c.proof.marker() {
        let mark = format!("[proxops.t.{}.{}]", c.kind.to_ascii_lowercase(), c.name);
        assert!(text(&live[f]).ends_with(&mark), "{live:#?}");
    }
    settled(&plan_with(&client, &v1, &c.proof.options(&v1)).await);

    // 2. One key changed in the manifest: one update of that key.
    let p = plan_with(&client, &v2, &c.proof.options(&v1)).await;
    one_update(&c, &p);
    run(&client, &p).await;
    assert_eq!(value(&row(&client, &c.list, &c.at).await.unwrap()), c.now);
    settled(&plan_with(&client, &v2, &c.proof.options(&v2)).await);

    // 3. The key changed by hand: restored.
    call(&client, &c.drift).await;
    let edited = row(&client, &c.list, &c.at).await.unwrap();
    assert_ne!(value(&edited), c.now, "the hand change took: {edited:#?}");
    let p = plan_with(&client, &v2, &c.proof.options(&v2)).await;
    one_update(&c, &p);
    run(&client, &p).await;
    assert_eq!(value(&row(&client, &c.list, &c.at).await.unwrap()), c.now);
    settled(&plan_with(&client, &v2, &c.proof.options(&v2)).await);

    // 4. Out of the composition: pruned, a hand-made one of the kind never. An empty
    // composition prunes nothing.
    for h in &c.hand {
        call(&client, h).await;
    }
    let p = plan_with(&client, &[], &c.proof.prune_options(&v2)).await;
    assert!(p.actions.iter().all(|a| a.verb != Verb::Delete), "{p:#?}");
    let p = plan_with(&client, &base, &c.proof.prune_options(&v2)).await;
    assert_eq!(actions(&c, &p), only(&c, Verb::Delete), "{p:#?}");
    run(&client, &p).await;
    assert!(row(&client, &c.list, &c.at).await.is_none(), "pruned");
    assert!(
        row(&client, &c.list, &c.hand_at).await.is_some(),
        "hand-made"
    );
    settled(&plan_with(&client, &base, &c.proof.options(&base)).await);

    // 5. The hand-made one adopted: the written manifests load, and the plan writes the mark
    // and nothing else (nothing at all for a kind proven by its receipt).
    let tmp = tempfile::tempdir().unwrap();
    let cluster = repository(tmp.path(), &base);
    let class = ObjectClass::of_kind(c.kind).unwrap();
    let found = match &c.take_over {
        None => adopted(&client, &cluster, class).await,
        Some(m) => {
            let outcomes = adopt_objects(&client, &cluster, class, None).await.unwrap();
            assert!(!outcomes.is_empty());
            for o in &outcomes {
                assert!(
                    matches!(o, ObjectOutcome::Refused { reason, .. } if reason.contains("would not hold their secret")),
                    "{o:#?}"
                );
            }
            vec![m.clone()]
        }
    };
    assert!(
        found
            .iter()
            .any(|t| c.hand_at.iter().all(|(_, v)| t.contains(v.as_str()))),
        "the hand-made one is not adopted: {found:#?}"
    );
    let mut texts = base.clone();
    texts.extend(found.iter().cloned());
    let tmp = tempfile::tempdir().unwrap();
    assert_eq!(repository(tmp.path(), &texts).resources.len(), texts.len());
    let lists: Vec<&str> = std::iter::once(c.list.as_str())
        .chain(c.watched.iter().copied())
        .collect();
    let mut before = Vec::new();
    for l in &lists {
        before.push(unmarked(&get(&client, l).await, c.proof.marker()));
    }
    let p = plan_with(&client, &texts, &c.proof.options(&base)).await;
    match c.proof.marker() {
        Some(f) => {
            let clean = p.anomalies.is_empty() && p.errors.is_empty();
            assert!(!p.actions.is_empty() && clean, "{p:#?}");
            for a in &p.actions {
                let keys: Vec<&str> = a.changes.iter().map(|k| k.key.as_str()).collect();
                assert_eq!((a.verb, keys), (Verb::Adopt, vec![f]), "{a:#?}");
            }
        }
        None => settled(&p),
    }
    run(&client, &p).await;
    settled(&plan_with(&client, &texts, &c.proof.options(&texts)).await);
    for (l, before) in lists.iter().zip(&before) {
        assert_eq!(
            *before,
            unmarked(&get(&client, l).await, c.proof.marker()),
            "{l}"
        );
    }
    if let Some(f) = c.proof.marker() {
        let hand = row(&client, &c.list, &c.hand_at).await.unwrap();
        assert!(text(&hand[f]).contains("[proxops.t."), "{hand:#?}");
    }
}

pub(super) fn at(pairs: &[(&'static str, &str)]) -> Vec<(&'static str, String)> {
    pairs.iter().map(|(k, v)| (*k, (*v).to_owned())).collect()
}

pub(super) fn hand(method: Method, path: &str, params: &[(&str, &str)]) -> Hand {
    let mut p = Params::new();
    for (k, v) in params {
        p.push(k, v);
    }
    (method, path.to_owned(), p)
}

pub(super) const PUT: Method = Method::PUT;
pub(super) const POST: Method = Method::POST;
