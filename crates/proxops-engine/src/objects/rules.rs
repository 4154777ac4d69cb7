//! Firewall rule lists (the cluster's, a security group's, a guest's): ProxOps's rules carry
//! `[<owner>#<index>]` in their comment, which says whose they are and where they belong in the
//! manifest's order. Rules without that mark were added by hand: never changed, moved or
//! deleted. The plan decides from one read whether the list needs work ([`diff`]); the
//! executor reads it again and converges it one write at a time ([`apply`]), since every write
//! shifts the positions PVE identifies rules by.

use super::class::Endpoints;
use super::desired::marks_in;
use super::live::{LiveParams, parse};
use super::value::{ObjValue, same};
use proxops_pve::{Method, Params, PveClient, PveError};
use proxops_pve_schema::{Param, endpoint};
use std::collections::BTreeMap;

/// One desired rule: its parameters, the comment marked.
pub type Rule = BTreeMap<String, ObjValue>;

/// A live rule: its position and fields.
#[derive(Debug, Clone)]
pub struct LiveRule {
    /// Its position (0 at the top).
    pub pos: u32,
    /// Its fields as the list shows them.
    pub fields: LiveParams,
}

/// The rules of a list read, in position order.
pub fn ordered(list: &BTreeMap<String, LiveParams>) -> Vec<LiveRule> {
    let mut out: Vec<LiveRule> = list
        .iter()
        .filter_map(|(pos, fields)| {
            Some(LiveRule {
                pos: pos.parse().ok()?,
                fields: fields.clone(),
            })
        })
        .collect();
    out.sort_by_key(|r| r.pos);
    out
}

/// The manifest index a rule's mark gives it, if the mark is `owner`'s.
pub fn index_of(rule: &LiveRule, owner: &str) -> Option<usize> {
    let Some(ObjValue::One(comment)) = rule.fields.get("comment") else {
        return None;
    };
    marks_in(comment).into_iter().find_map(|m| {
        m.strip_prefix(owner)?
            .strip_prefix('#')?
            .parse::<usize>()
            .ok()
    })
}

/// The settings a rule list's create endpoint takes (what a rule is made of).
fn settings(e: &Endpoints) -> Vec<&'static Param> {
    endpoint("POST", e.create)
        .map(|ep| {
            ep.params
                .iter()
                .filter(|p| !matches!(p.name, "pos" | "digest" | "node" | "vmid" | "group"))
                .collect()
        })
        .unwrap_or_default()
}

/// What a rule list needs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct RuleDiff {
    /// Manifest indexes with no rule of ours.
    pub missing: Vec<usize>,
    /// Manifest indexes whose rule differs.
    pub changed: Vec<usize>,
    /// Positions of rules of ours the manifest no longer has (or has twice).
    pub stale: Vec<u32>,
    /// Whether ours are out of the manifest's order.
    pub reorder: bool,
}

impl RuleDiff {
    /// Whether the list is as the manifest says.
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.changed.is_empty() && self.stale.is_empty() && !self.reorder
    }

    /// In a few words.
    pub fn summary(&self) -> String {
        let mut parts = Vec::new();
        if !self.missing.is_empty() {
            parts.push(format!("{} to add", self.missing.len()));
        }
        if !self.changed.is_empty() {
            parts.push(format!("{} changed", self.changed.len()));
        }
        if !self.stale.is_empty() {
            parts.push(format!("{} to remove", self.stale.len()));
        }
        if self.reorder {
            parts.push("out of order".to_owned());
        }
        format!("rules: {}", parts.join(", "))
    }
}

/// The fields of `have` to write and to delete for it to be `want`.
fn rule_delta(
    e: &Endpoints,
    want: &Rule,
    have: &LiveParams,
) -> (Vec<(String, ObjValue)>, Vec<String>) {
    let params = settings(e);
    let param = |k: &str| params.iter().copied().find(|p| p.name == k);
    let mut set = Vec::new();
    for (k, v) in want {
        if !have.get(k).is_some_and(|h| same(param(k), v, h)) {
            set.push((k.clone(), v.clone()));
        }
    }
    let unset = params
        .iter()
        .map(|p| p.name)
        .filter(|k| !want.contains_key(*k) && have.contains_key(*k))
        .map(str::to_owned)
        .collect();
    (set, unset)
}

/// How `live` differs from `desired` on the rules of `owner`.
pub fn diff(e: &Endpoints, desired: &[Rule], live: &[LiveRule], owner: &str) -> RuleDiff {
    let mut d = RuleDiff::default();
    let mut seen: BTreeMap<usize, &LiveRule> = BTreeMap::new();
    let mut last_index = None;
    for rule in live {
        let Some(i) = index_of(rule, owner) else {
            continue;
        };
        if i >= desired.len() || seen.contains_key(&i) {
            d.stale.push(rule.pos);
            continue;
        }
        if last_index.is_some_and(|l| l > i) {
            d.reorder = true;
        }
        last_index = Some(i);
        seen.insert(i, rule);
    }
    for (i, want) in desired.iter().enumerate() {
        match seen.get(&i) {
            None => d.missing.push(i),
            Some(have) => {
                let (set, unset) = rule_delta(e, want, &have.fields);
                if !set.is_empty() || !unset.is_empty() {
                    d.changed.push(i);
                }
            }
        }
    }
    d
}

async fn read(client: &PveClient, e: &Endpoints) -> Result<Vec<LiveRule>, PveError> {
    let path = e.list_path();
    let data = client
        .call_json(Method::GET, e.list, &path, &Params::new())
        .await?;
    Ok(ordered(&parse(e, &data)))
}

fn push(p: &mut Params, k: &str, v: &ObjValue) {
    match v {
        ObjValue::One(s) => p.push(k, s),
        ObjValue::Many(items) => {
            for i in items {
                p.push(k, i);
            }
        }
    }
}

/// Brings the rule list to `desired`, one write at a time, reading it again after each: stale
/// rules of ours go, changed ones are rewritten, missing ones are inserted after the rule of
/// ours before them (at the top when there is none), and ours are moved back into order.
/// Bounded: at most one pass per rule, then an error if the list still differs.
pub async fn apply(
    client: &PveClient,
    e: &Endpoints,
    desired: &[Rule],
    owner: &str,
) -> Result<(), PveError> {
    let budget = 4 * (desired.len() + 4);
    for _ in 0..budget {
        let live = read(client, e).await?;
        let d = diff(e, desired, &live, owner);
        if d.is_empty() {
            return Ok(());
        }
        let item = |pos: u32| e.item_path(&pos.to_string());
        if let Some(pos) = d.stale.iter().max() {
            client
                .call_json_once(Method::DELETE, e.item, &item(*pos), &Params::new())
                .await?;
            continue;
        }
        let by_index: BTreeMap<usize, &LiveRule> = live
            .iter()
            .filter_map(|r| index_of(r, owner).map(|i| (i, r)))
            .collect();
        if let Some(i) = d.changed.first() {
            let have = by_index[i];
            let (set, unset) = rule_delta(e, &desired[*i], &have.fields);
            let mut params = Params::new();
            for (k, v) in &set {
                push(&mut params, k, v);
            }
            if !unset.is_empty() {
                params.push("delete", unset.join(","));
            }
            client
                .call_json_once(Method::PUT, e.item, &item(have.pos), &params)
                .await?;
            continue;
        }
        // The place right after the rule of ours before `i` (the top without one).
        let after = |i: usize| {
            by_index
                .range(..i)
                .next_back()
                .map_or(0, |(_, r)| r.pos + 1)
        };
        if let Some(i) = d.missing.first() {
            let mut params = Params::new();
            for (k, v) in &desired[*i] {
                push(&mut params, k, v);
            }
            params.push("pos", after(*i));
            let path = e.create_path();
            client
                .call_json_once(Method::POST, e.create, &path, &params)
                .await?;
            continue;
        }
        // Out of order: the first rule of ours that is not right after its predecessor moves
        // there.
        let misplaced = by_index
            .iter()
            .zip(by_index.iter().skip(1))
            .find(|((_, a), (_, b))| b.pos < a.pos);
        if let Some(((_, a), (_, b))) = misplaced {
            let params = Params::new().set("moveto", a.pos + 1);
            client
                .call_json_once(Method::PUT, e.item, &item(b.pos), &params)
                .await?;
            continue;
        }
        break;
    }
    Err(PveError::Config(format!(
        "the rules of {} still differ from the manifest after {budget} writes",
        e.list_path()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::objects::class::{FirewallPart, firewall};

    fn rule(pairs: &[(&str, &str)]) -> Rule {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), ObjValue::One((*v).to_owned())))
            .collect()
    }

    fn live(pos: u32, pairs: &[(&str, &str)]) -> LiveRule {
        LiveRule {
            pos,
            fields: rule(pairs),
        }
    }

    #[test]
    fn hand_rules_are_never_ours_and_ours_are_found_by_their_index() {
        let e = firewall(FirewallPart::Rules, &[]);
        let owner = "proxops.t.firewall.home";
        let want = vec![
            rule(&[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("macro", "SSH"),
                ("comment", "[proxops.t.firewall.home#0]"),
                ("enable", "1"),
            ]),
            rule(&[
                ("type", "in"),
                ("action", "DROP"),
                ("comment", "[proxops.t.firewall.home#1]"),
                ("enable", "1"),
            ]),
        ];
        let have = vec![
            live(
                0,
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("macro", "HTTP"),
                    ("comment", "by hand"),
                    ("enable", "1"),
                ],
            ),
            live(
                1,
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("macro", "SSH"),
                    ("comment", "[proxops.t.firewall.home#0]"),
                    ("enable", "1"),
                ],
            ),
            live(
                2,
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("comment", "[proxops.t.firewall.home#1]"),
                    ("enable", "1"),
                ],
            ),
            live(
                3,
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("comment", "[proxops.t.firewall.home#5]"),
                    ("enable", "1"),
                ],
            ),
            live(
                4,
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("comment", "[proxops.other.firewall.x#0]"),
                    ("enable", "1"),
                ],
            ),
        ];
        let d = diff(&e, &want, &have, owner);
        assert_eq!(d.missing, Vec::<usize>::new());
        assert_eq!(d.changed, vec![1]);
        assert_eq!(d.stale, vec![3]);
        assert!(!d.reorder);
    }

    #[test]
    fn a_field_set_by_hand_on_a_rule_of_ours_is_drift() {
        let e = firewall(FirewallPart::Rules, &[]);
        let owner = "proxops.t.firewall.home";
        let want = vec![rule(&[
            ("type", "in"),
            ("action", "ACCEPT"),
            ("comment", "[proxops.t.firewall.home#0]"),
            ("enable", "1"),
        ])];
        let have = vec![live(
            0,
            &[
                ("type", "in"),
                ("action", "ACCEPT"),
                ("log", "info"),
                ("comment", "[proxops.t.firewall.home#0]"),
                ("enable", "1"),
            ],
        )];
        assert_eq!(diff(&e, &want, &have, owner).changed, vec![0]);
    }
}
