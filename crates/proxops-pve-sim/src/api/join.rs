//! `GET /cluster/config/join` as pve-cluster `src/PVE/API2/ClusterConfig.pm` `join_info`
//! builds it from `corosync.conf`: the simulated cluster is one corosync cluster (the one
//! `/cluster/status` reports) whose config `PVE/Corosync.pm` `create_conf` wrote and each
//! `pvecm add` extended (one link per node at the node's address, a vote each). Values are
//! strings, as the corosync.conf parser leaves them; `pve_fp` is the node's certificate
//! fingerprint and `pve_addr` its address.

use serde_json::{Value, json};

use super::Ctx;
use crate::error::ApiError;
use crate::hashes::sha1_hex;

pub(crate) fn join_info(ctx: &mut Ctx) -> Result<Value, ApiError> {
    ctx.require("/", "Sys.Audit")?;
    let st = ctx.state();
    // The local node (`PVE::INotify::nodename()`) is the one the client talks to: the first.
    let local = st.nodes.first().map(|n| n.node.clone()).unwrap_or_default();
    let nodename = ctx.p("node").map_or(local, str::to_string);
    if !st.nodes.iter().any(|n| n.node == nodename) {
        return Err(ApiError::fail(format!("unknown node '{nodename}'")));
    }
    let version = (1 + st.nodes.len()).to_string();
    let mut conf = format!(
        "totem {{\n  cluster_name: {}\n  config_version: {version}\n  interface {{\n    linknumber: 0\n  }}\n  ip_version: ipv4-6\n  link_mode: passive\n  secauth: on\n  version: 2\n}}\n\nnodelist {{\n",
        st.cluster_name
    );
    let mut nodelist = Vec::new();
    for (i, n) in st.nodes.iter().enumerate() {
        let ip = format!("127.0.0.{}", i + 1);
        conf.push_str(&format!(
            "  node {{\n    name: {}\n    nodeid: {}\n    quorum_votes: 1\n    ring0_addr: {ip}\n  }}\n",
            n.node,
            i + 1
        ));
        nodelist.push(json!({
            "name": n.node, "nodeid": (i + 1).to_string(), "quorum_votes": "1", "ring0_addr": ip,
            "pve_addr": ip, "pve_fp": ctx.shared.fingerprint,
        }));
    }
    conf.push_str("}\n");
    Ok(json!({
        "nodelist": nodelist,
        "preferred_node": nodename,
        "totem": {
            "cluster_name": st.cluster_name, "config_version": version,
            "interface": { "0": { "linknumber": "0" } }, "ip_version": "ipv4-6",
            "link_mode": "passive", "secauth": "on", "version": "2",
        },
        "config_digest": sha1_hex(conf.as_bytes()),
    }))
}
