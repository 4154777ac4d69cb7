//! An artifact's payload: a download-url per node; a file whose source changed is deleted and
//! downloaded again (download-url refuses to overwrite).

use super::api_request;
use crate::desired::DesiredArtifact;
use crate::execute::download_request;
use proxops_pve::Request;
use proxops_store::materialized::Materialization;

/// What downloads `a` on each of its nodes.
pub(super) fn create(a: &DesiredArtifact) -> Materialization {
    let requests = a
        .nodes
        .iter()
        .map(|node| {
            api_request(Request::download_url(
                node,
                &a.storage,
                &download_request(a),
            ))
        })
        .collect();
    Materialization::new(
        requests,
        vec!["a node that already has the file is left alone".to_owned()],
    )
}

/// What takes the files of the applied document `p` to `a`.
pub(super) fn update(a: &DesiredArtifact, p: &DesiredArtifact) -> Materialization {
    let same_file = a.volid == p.volid;
    let source_changed = ["url", "checksum", "checksum-algorithm"]
        .iter()
        .any(|k| value(a, k) != value(p, k));
    let mut requests = Vec::new();
    for node in &a.nodes {
        let had = same_file && p.nodes.contains(node);
        if had && !source_changed {
            continue;
        }
        if had {
            requests.push(api_request(Request::delete_volume(
                node, &a.storage, &a.volid,
            )));
        }
        requests.push(api_request(Request::download_url(
            node,
            &a.storage,
            &download_request(a),
        )));
    }
    let mut notes = Vec::new();
    if same_file && source_changed {
        notes.push("the file is replaced only where no guest uses it".to_owned());
    }
    Materialization::new(requests, notes)
}

fn value<'a>(a: &'a DesiredArtifact, key: &str) -> Option<&'a str> {
    a.download
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}
