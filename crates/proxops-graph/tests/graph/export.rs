//! The JSON report and the DOT rendering.

use crate::support::*;
use proxops_graph::{Graph, GraphReport};

fn small() -> Graph {
    build(&[
        resource(
            "iso/x/i.yaml",
            &artifact("ISO", "installer", &["pve01", "pve02"]),
        ),
        resource(
            "vm/x/v.yaml",
            &vm_with_iso("web", "pve02", 101, "installer"),
        ),
        resource(
            "vm/x/w.yaml",
            &depends_on(&vm("worker", "pve01", 102), "VM:web"),
        ),
    ])
}

#[test]
fn json_report() {
    let g = small();
    let json = serde_json::to_string_pretty(&GraphReport::new([("dev", &g)])).unwrap();
    insta::assert_snapshot!(json, @r#"
    {
      "apiVersion": "proxops/v1alpha1",
      "kind": "Graph",
      "clusters": [
        {
          "name": "dev",
          "levels": 3,
          "resources": [
            {
              "kind": "ISO",
              "name": "installer",
              "level": 0,
              "steps": [
                0,
                1
              ],
              "dependsOn": []
            },
            {
              "kind": "VM",
              "name": "web",
              "level": 1,
              "steps": [
                2
              ],
              "dependsOn": [
                {
                  "kind": "ISO",
                  "name": "installer",
                  "field": "hardware.cdrom.iso",
                  "source": "structured",
                  "sameNode": true
                }
              ]
            },
            {
              "kind": "VM",
              "name": "worker",
              "level": 2,
              "steps": [
                3
              ],
              "dependsOn": [
                {
                  "kind": "VM",
                  "name": "web",
                  "field": "proxops/depends-on",
                  "source": "annotation",
                  "sameNode": false
                }
              ]
            }
          ],
          "steps": [
            {
              "index": 0,
              "level": 0,
              "kind": "ISO",
              "name": "installer",
              "node": "pve01",
              "vmid": null,
              "after": []
            },
            {
              "index": 1,
              "level": 0,
              "kind": "ISO",
              "name": "installer",
              "node": "pve02",
              "vmid": null,
              "after": []
            },
            {
              "index": 2,
              "level": 1,
              "kind": "VM",
              "name": "web",
              "node": "pve02",
              "vmid": 101,
              "after": [
                1
              ]
            },
            {
              "index": 3,
              "level": 2,
              "kind": "VM",
              "name": "worker",
              "node": "pve01",
              "vmid": 102,
              "after": [
                2
              ]
            }
          ]
        }
      ]
    }
    "#);
}

#[test]
fn dot_rendering() {
    insta::assert_snapshot!(small().to_dot("dev"), @r#"
    digraph proxops {
      rankdir=LR;
      node [shape=box, fontname="monospace"];
      subgraph "cluster_dev" {
        label="cluster dev";
        { rank=same; /* level 0 */ "dev#0"; "dev#1"; }
        { rank=same; /* level 1 */ "dev#2"; }
        { rank=same; /* level 2 */ "dev#3"; }
        "dev#0" [label="ISO/installer\npve01"];
        "dev#1" [label="ISO/installer\npve02"];
        "dev#2" [label="VM/web (101)\npve02"];
        "dev#3" [label="VM/worker (102)\npve01"];
        "dev#1" -> "dev#2" [label="hardware.cdrom.iso"];
        "dev#2" -> "dev#3" [label="proxops/depends-on", style=dashed];
      }
    }
    "#);
}
