//! A cluster object's payload: what takes PVE from the applied document's objects to the
//! desired ones (or creates them), computed without reading PVE, as every payload is.

use super::api_request;
use crate::objects::{DesiredObject, Found, create_request, delete_request, update_request};
use proxops_store::materialized::Materialization;

/// What creates the objects of `d`.
pub(super) fn create(d: &[DesiredObject]) -> Materialization {
    let requests = d.iter().map(|o| api_request(create_request(o))).collect();
    Materialization::new(
        requests,
        vec!["an object that exists and matches is taken over, not created again".to_owned()],
    )
}

/// What takes the objects of the applied document `p` to `d`.
pub(super) fn update(d: &[DesiredObject], p: &[DesiredObject]) -> Materialization {
    let mut requests = Vec::new();
    for o in d {
        let Some(before) = p.iter().find(|b| b.id == o.id && b.class == o.class) else {
            requests.push(api_request(create_request(o)));
            continue;
        };
        let mut found = Found::default();
        for (k, v) in &o.params {
            if before.params.get(k) != Some(v) {
                found
                    .set
                    .push((k.clone(), v.clone(), before.params.get(k).cloned()));
            }
        }
        for (k, v) in &before.params {
            if !o.params.contains_key(k) {
                found.unset.push((k.clone(), v.clone()));
            }
        }
        if !found.is_empty() {
            requests.push(api_request(update_request(o, &found)));
        }
    }
    for b in p {
        if !d.iter().any(|o| o.id == b.id && o.class == b.class) {
            requests.push(api_request(delete_request(b)));
        }
    }
    Materialization::new(requests, Vec::new())
}
