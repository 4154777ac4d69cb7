//! An embedder's own kind, registered through [`KindDef`]: it is loaded, decoded, validated,
//! referenced and described by the schemas exactly like a built-in kind.

use crate::support::{TempRepo, annotate, artifact, assert_valid, dump, find, only_error, vm};
use proxops_model::kind::{
    Identity, KindDef, Placement, Plane, Reference, ReferenceField, RegistryError, SpecContext,
};
use proxops_model::manifest::CustomSpec;
use proxops_model::schema::{combined_schema, kind_schema, schema_files};
use proxops_model::{
    Code, FsSource, LoadOptions, Registry, Repository, Resource, Spec, load_repository, path,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::any::Any;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// The toy kind: `kind: EdgeWall`, rooted at `firewall/`.

/// A node's firewall.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct FirewallSpec {
    /// The node whose firewall this is.
    pub node: String,
    /// What happens to traffic no rule matches.
    pub policy: Policy,
    /// Rules, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<Rule>,
    /// An ISO kept on the node for rescue boots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescue_iso: Option<String>,
}

/// A firewall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Policy {
    /// Let it through.
    Accept,
    /// Drop it silently.
    Drop,
}

/// One firewall rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Rule {
    /// The destination port.
    pub port: u16,
    /// The verdict.
    pub action: Policy,
    /// A source network, if the rule is limited to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl CustomSpec for FirewallSpec {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

fn firewall(spec: &Spec) -> Option<&FirewallSpec> {
    match spec {
        Spec::Custom(c) => c.as_any().downcast_ref::<FirewallSpec>(),
        _ => None,
    }
}

struct FirewallKind;

impl KindDef for FirewallKind {
    fn name(&self) -> &'static str {
        "EdgeWall"
    }

    fn aliases(&self) -> &'static [&'static str] {
        &["FW"]
    }

    fn root(&self) -> &'static str {
        "edgewall"
    }

    fn identity(&self) -> Identity {
        Identity::Other
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        &[ReferenceField {
            field: "rescue-iso",
            target: "ISO",
        }]
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec: FirewallSpec = cx.decode()?;
        for (i, rule) in spec.rules.iter().enumerate() {
            if rule.port == 0 {
                cx.invalid(
                    &path!["rules", i, "port"],
                    format!("port 0 in a rule of firewall `{}`", cx.metadata().name),
                    Some("ports are 1-65535".into()),
                );
            }
        }
        Some(Spec::Custom(Arc::new(spec)))
    }

    fn placement(&self, spec: &Spec) -> Placement {
        let nodes = firewall(spec)
            .map(|s| vec![(s.node.clone(), path!["node"].to_vec())])
            .unwrap_or_default();
        Placement { nodes, vmid: None }
    }

    fn references(&self, spec: &Spec) -> Vec<Reference> {
        firewall(spec)
            .and_then(|s| s.rescue_iso.as_deref())
            .map(|iso| {
                vec![Reference::structured(
                    "rescue-iso",
                    "ISO",
                    iso,
                    &path!["rescue-iso"],
                    true,
                )]
            })
            .unwrap_or_default()
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<FirewallSpec>()
    }
}

/// The built-in kinds plus `EdgeWall`.
fn registry() -> Registry {
    let mut r = Registry::builtin();
    r.register(Arc::new(FirewallKind))
        .expect("EdgeWall registers");
    r
}

fn load(repo: &TempRepo, registry: &Registry) -> Repository {
    let source = FsSource::new(repo.path()).expect("source");
    load_repository(&source, registry, &LoadOptions::default()).expect("load")
}

/// A firewall manifest with extra spec lines (each indented by two spaces).
fn firewall_manifest(name: &str, node: &str, extra: &[&str]) -> String {
    let mut text = format!(
        "apiVersion: proxops/v1alpha1\nkind: EdgeWall\nmetadata:\n  name: {name}\nspec:\n  node: {node}\n  policy: drop\n"
    );
    for l in extra {
        text.push_str("  ");
        text.push_str(l);
        text.push('\n');
    }
    text
}

const EDGE_RULES: &[&str] = &[
    "rules:",
    "  - port: 22",
    "    action: accept",
    "    source: 192.0.2.0/24",
    "  - port: 8006",
    "    action: accept",
    "rescue-iso: installer",
];

/// Cluster `c` (nodes pve01, pve02) with an ISO on both nodes, the firewall `edge` and a VM that
/// depends on the firewall through the annotation.
fn firewall_repo(edge: &str) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01", "pve02"]);
    let web = annotate(
        &vm("web", "pve01", 100),
        &[("proxops/depends-on", "EdgeWall:edge")],
    );
    repo.listing(
        "c",
        &[
            (
                "iso/base/installer.yaml",
                artifact("ISO", "installer", &["pve01", "pve02"]),
            ),
            ("edgewall/c/edge.yaml", edge.to_owned()),
            ("vm/c/web.yaml", web),
        ],
    );
    repo
}

fn the_resource<'r>(repo: &'r Repository, kind: &str, name: &str) -> &'r Resource {
    repo.clusters[0]
        .resources
        .iter()
        .find(|r| r.kind == kind && r.name() == name)
        .unwrap_or_else(|| panic!("no {kind}/{name}:\n{}", dump(repo)))
}

// ---------------------------------------------------------------------------------------------
// Registration and loading.

#[test]
fn a_custom_kind_registers_alongside_the_builtin_kinds() {
    let r = registry();
    assert_eq!(r.kinds().count(), Registry::builtin().kinds().count() + 1);
    assert_eq!(r.kinds().last().map(|k| k.name()), Some("EdgeWall"));
    assert_eq!(r.get("EdgeWall").map(|k| k.root()), Some("edgewall"));
    assert_eq!(r.by_root("edgewall").map(|k| k.name()), Some("EdgeWall"));
    assert!(r.is_root("edgewall"));
    assert_eq!(r.guess("fw").map(|k| k.name()), Some("EdgeWall"));
    assert_eq!(r.guess("EDGEWALL").map(|k| k.name()), Some("EdgeWall"));
    assert_eq!(r.get("edgewall").map(|k| k.name()), None, "get is exact");
    let kind = r.get("EdgeWall").expect("registered");
    assert_eq!(kind.identity(), Identity::Other);
    assert_eq!(kind.planes(), [Plane::Desired]);
    // The built-in registry is untouched.
    assert!(Registry::builtin().get("EdgeWall").is_none());
}

#[test]
fn a_repository_using_a_custom_kind_validates() {
    let repo = firewall_repo(&firewall_manifest("edge", "pve01", EDGE_RULES));
    let registry = registry();
    let loaded = load(&repo, &registry);
    assert_valid(&loaded);
    assert_eq!(loaded.clusters[0].resources.len(), 3);

    let edge = the_resource(&loaded, "EdgeWall", "edge");
    assert_eq!(edge.kind, "EdgeWall");
    let Spec::Custom(custom) = &edge.spec else {
        panic!("not a custom spec: {:?}", edge.spec);
    };
    let spec = custom
        .as_any()
        .downcast_ref::<FirewallSpec>()
        .expect("a FirewallSpec");
    assert_eq!(
        spec,
        &FirewallSpec {
            node: "pve01".into(),
            policy: Policy::Drop,
            rules: vec![
                Rule {
                    port: 22,
                    action: Policy::Accept,
                    source: Some("192.0.2.0/24".into()),
                },
                Rule {
                    port: 8006,
                    action: Policy::Accept,
                    source: None,
                },
            ],
            rescue_iso: Some("installer".into()),
        }
    );
    // The spec serialises through the kind's own JSON.
    let json = serde_json::to_value(&edge.spec).expect("json");
    assert_eq!(json, custom.to_json());
    assert_eq!(json["rescue-iso"], json!("installer"));

    // Its structured reference and the VM's annotation both resolve.
    let refs = proxops_model::validate::references(&registry, edge);
    assert_eq!(refs.len(), 1);
    assert_eq!(
        (refs[0].target_kind.as_str(), refs[0].target_name.as_str()),
        ("ISO", "installer")
    );
    assert_eq!(refs[0].field, "rescue-iso");
    let web = the_resource(&loaded, "VM", "web");
    // Its disk's `Storage` is an inferred reference, an edge only if a Storage is declared.
    let deps: Vec<String> = proxops_model::validate::references(&registry, web)
        .iter()
        .filter(|r| r.source != proxops_model::kind::ReferenceSource::Inferred)
        .map(|r| format!("{}/{}", r.target_kind, r.target_name))
        .collect();
    assert_eq!(deps, ["EdgeWall/edge"]);
    // Its placement is what validation checks against the node allowlist.
    let placement = registry
        .get("EdgeWall")
        .expect("kind")
        .placement(&edge.spec);
    assert_eq!(placement.nodes.len(), 1);
    assert_eq!(placement.nodes[0].0, "pve01");
    assert_eq!(placement.vmid, None);
}

#[test]
fn the_same_repository_without_the_kind_is_refused() {
    let repo = firewall_repo(&firewall_manifest("edge", "pve01", EDGE_RULES));
    let loaded = load(&repo, &Registry::builtin());
    assert!(!loaded.is_valid());
    let d = find(&loaded, Code::NotUnderKindRoot);
    assert!(d.message.contains("edgewall/c/edge.yaml"), "{d}");
    let d = find(&loaded, Code::InvalidDependsOn);
    assert!(d.message.contains("EdgeWall"), "{d}");
}

#[test]
fn a_custom_manifest_can_depend_on_a_builtin_kind_and_be_depended_on() {
    // Edges into and out of the custom kind resolve like any other. The two edges make a cycle,
    // which the graph crate reports (its tests cover cycles); the model's own rules accept it.
    let edge = annotate(
        &firewall_manifest("edge", "pve01", &[]),
        &[("proxops/depends-on", "VM:web")],
    );
    let repo = firewall_repo(&edge);
    let loaded = load(&repo, &registry());
    assert!(loaded.is_valid(), "{}", dump(&loaded));
    let edge = the_resource(&loaded, "EdgeWall", "edge");
    assert_eq!(edge.depends_on.len(), 1);
    assert_eq!(
        (
            edge.depends_on[0].target_kind.as_str(),
            edge.depends_on[0].target_name.as_str()
        ),
        ("VM", "web")
    );
    let web = the_resource(&loaded, "VM", "web");
    assert_eq!(web.depends_on[0].target_kind, "EdgeWall");
}

// ---------------------------------------------------------------------------------------------
// Diagnostics of the custom kind.

#[test]
fn unknown_fields_of_a_custom_kind_get_did_you_mean() {
    let edge = firewall_manifest(
        "edge",
        "pve01",
        &[
            "rescue-isos: installer",
            "rules:",
            "  - prot: 22",
            "    action: accept",
        ],
    );
    let repo = firewall_repo(&edge);
    let loaded = load(&repo, &registry());
    let unknown: Vec<_> = loaded
        .diagnostics
        .iter()
        .filter(|d| d.code == Code::UnknownField)
        .collect();
    assert_eq!(unknown.len(), 2, "{}", dump(&loaded));
    let top = unknown
        .iter()
        .find(|d| d.message.contains("`rescue-isos`"))
        .unwrap_or_else(|| panic!("{}", dump(&loaded)));
    assert_eq!(top.help.as_deref(), Some("did you mean `rescue-iso`?"));
    assert_eq!(top.primary_file(), Some("edgewall/c/edge.yaml"));
    assert_eq!(top.labels[0].line_col(), (8, 3), "{top}");
    let nested = unknown
        .iter()
        .find(|d| d.message.contains("`prot`"))
        .unwrap_or_else(|| panic!("{}", dump(&loaded)));
    assert_eq!(nested.help.as_deref(), Some("did you mean `port`?"));
    assert_eq!(nested.labels[0].line_col(), (10, 7), "{nested}");
    // The rule then lacks its port.
    let missing = find(&loaded, Code::MissingField);
    assert!(missing.message.contains("`port`"), "{missing}");
    // No resource is made of a manifest with errors.
    assert!(
        loaded.clusters[0]
            .resources
            .iter()
            .all(|r| r.kind != "EdgeWall")
    );
}

#[test]
fn a_misspelt_custom_kind_name_gets_a_hint() {
    for (word, hint) in [
        ("FW", "the canonical spelling is `EdgeWall`"),
        ("edgewall", "the canonical spelling is `EdgeWall`"),
        ("EdgeWal", "did you mean `EdgeWall`?"),
    ] {
        let edge = firewall_manifest("edge", "pve01", &[])
            .replace("kind: EdgeWall", &format!("kind: {word}"));
        let loaded = load(&firewall_repo(&edge), &registry());
        let d = find(&loaded, Code::UnknownKind);
        assert_eq!(d.help.as_deref(), Some(hint), "{word}: {d}");
    }
}

#[test]
fn a_reference_to_a_missing_iso_is_an_unknown_reference() {
    let edge = firewall_manifest("edge", "pve01", &["rescue-iso: missing"]);
    let loaded = load(&firewall_repo(&edge), &registry());
    let d = only_error(
        &loaded,
        Code::UnknownReference,
        &["EdgeWall/edge", "rescue-iso", "ISO", "missing"],
    );
    assert_eq!(d.primary_file(), Some("edgewall/c/edge.yaml"));
    assert_eq!(d.labels[0].line_col(), (8, 15), "{d}");
    assert_eq!(d.cluster.as_deref(), Some("c"));
    // Naming a resource of another kind gets a pointed hint.
    let edge = firewall_manifest("edge", "pve01", &["rescue-iso: web"]);
    let loaded = load(&firewall_repo(&edge), &registry());
    let d = only_error(&loaded, Code::UnknownReference, &["ISO", "web"]);
    assert!(
        d.help.as_deref().is_some_and(|h| h.contains("VM/web")),
        "{d:?}"
    );
}

#[test]
fn a_referenced_iso_must_be_on_the_firewall_node() {
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01", "pve02"]);
    repo.listing(
        "c",
        &[
            (
                "iso/base/installer.yaml",
                artifact("ISO", "installer", &["pve01"]),
            ),
            (
                "edgewall/c/edge.yaml",
                firewall_manifest("edge", "pve02", &["rescue-iso: installer"]),
            ),
        ],
    );
    let loaded = load(&repo, &registry());
    only_error(
        &loaded,
        Code::ReferenceNotOnNode,
        &["ISO/installer", "pve02"],
    );
}

/// Cluster `c` (nodes pve01, pve02) with an ISO and the firewall `edge` only.
fn lone_firewall(edge: &str) -> TempRepo {
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01", "pve02"]);
    repo.listing(
        "c",
        &[
            (
                "iso/base/installer.yaml",
                artifact("ISO", "installer", &["pve01", "pve02"]),
            ),
            ("edgewall/c/edge.yaml", edge.to_owned()),
        ],
    );
    repo
}

#[test]
fn custom_checks_and_required_fields_are_reported() {
    let no_policy = firewall_manifest("edge", "pve01", &[]).replace("  policy: drop\n", "");
    let loaded = load(&lone_firewall(&no_policy), &registry());
    only_error(&loaded, Code::MissingField, &["`policy`"]);

    let bad_policy =
        firewall_manifest("edge", "pve01", &[]).replace("policy: drop", "policy: dropp");
    let loaded = load(&lone_firewall(&bad_policy), &registry());
    let d = only_error(&loaded, Code::InvalidValue, &["dropp"]);
    assert_eq!(d.help.as_deref(), Some("did you mean `drop`?"));

    let port0 = firewall_manifest(
        "edge",
        "pve01",
        &["rules:", "  - port: 0", "    action: drop"],
    );
    let loaded = load(&lone_firewall(&port0), &registry());
    let d = only_error(&loaded, Code::InvalidValue, &["port 0", "`edge`"]);
    assert_eq!(d.labels[0].line_col(), (9, 13), "{d}");

    let big_port = firewall_manifest(
        "edge",
        "pve01",
        &["rules:", "  - port: 65536", "    action: drop"],
    );
    let loaded = load(&lone_firewall(&big_port), &registry());
    only_error(&loaded, Code::InvalidValue, &["65536"]);

    let elsewhere = firewall_manifest("edge", "pve09", &[]);
    let loaded = load(&lone_firewall(&elsewhere), &registry());
    only_error(&loaded, Code::NodeNotAllowed, &["pve09", "EdgeWall/edge"]);

    let wrong_root = TempRepo::new();
    wrong_root.cluster("c", &["pve01"]);
    wrong_root.listing(
        "c",
        &[("vm/c/edge.yaml", firewall_manifest("edge", "pve01", &[]))],
    );
    let loaded = load(&wrong_root, &registry());
    only_error(&loaded, Code::WrongKindRoot, &["EdgeWall", "vm/"]);
}

#[test]
fn two_custom_resources_of_one_name_are_duplicates() {
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01"]);
    repo.listing(
        "c",
        &[
            (
                "edgewall/base/edge.yaml",
                firewall_manifest("edge", "pve01", &[]),
            ),
            (
                "edgewall/c/edge.yaml",
                firewall_manifest("edge", "pve01", &[]),
            ),
        ],
    );
    let loaded = load(&repo, &registry());
    only_error(&loaded, Code::DuplicateResource, &["EdgeWall/edge"]);
}

// ---------------------------------------------------------------------------------------------
// Schemas.

#[test]
fn a_custom_kind_appears_in_the_schemas() {
    let registry = registry();
    let combined = combined_schema(&registry);
    let kinds = combined["properties"]["kind"]["enum"]
        .as_array()
        .expect("enum");
    assert!(kinds.contains(&json!("EdgeWall")), "{kinds:?}");
    let builtin = Registry::builtin().kinds().count();
    assert_eq!(
        kinds.len(),
        builtin + 3,
        "the built-in kinds, EdgeWall, StackTemplate and Stack"
    );
    for def in ["FirewallSpec", "Rule", "Policy"] {
        assert!(
            combined["definitions"].get(def).is_some(),
            "no {def} in the combined schema"
        );
    }
    let own = kind_schema(registry.get("EdgeWall").expect("kind"));
    assert_eq!(own["properties"]["kind"]["const"], json!("EdgeWall"));
    assert_eq!(
        own["definitions"]["FirewallSpec"]["required"],
        json!(["node", "policy"])
    );

    let files = schema_files(&registry);
    assert_eq!(
        files.len(),
        builtin + 4,
        "the built-in kinds, EdgeWall, the combined schema, Stack and StackTemplate"
    );
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert!(names.contains(&"edgewall.schema.json"), "{names:?}");
    assert!(names.contains(&"proxops.schema.json"), "{names:?}");
    assert_eq!(files, schema_files(&registry), "deterministic");

    let combined = jsonschema::draft7::new(&combined).expect("combined compiles");
    let own = jsonschema::draft7::new(&own).expect("own compiles");
    let manifest = json!({
        "apiVersion": "proxops/v1alpha1",
        "kind": "EdgeWall",
        "metadata": {"name": "edge"},
        "spec": {
            "node": "pve01",
            "policy": "drop",
            "rules": [{"port": 22, "action": "accept", "source": "192.0.2.0/24"}],
            "rescue-iso": "installer"
        }
    });
    assert!(combined.is_valid(&manifest));
    assert!(own.is_valid(&manifest));
    let mut misspelt = manifest.clone();
    misspelt["spec"]["rescue-isos"] = json!("installer");
    assert!(!combined.is_valid(&misspelt));
    assert!(!own.is_valid(&misspelt));
    let mut missing = manifest.clone();
    missing["spec"]
        .as_object_mut()
        .expect("object")
        .remove("policy");
    assert!(!combined.is_valid(&missing));
    assert!(!own.is_valid(&missing));
    let mut wrong = manifest;
    wrong["spec"]["rules"][0]["port"] = json!(70000);
    assert!(!combined.is_valid(&wrong));
    // The built-in kinds' schemas are unchanged by the registration.
    for k in Registry::builtin().kinds() {
        let mine = registry.get(k.name()).expect("builtin");
        assert_eq!(kind_schema(k), kind_schema(mine), "{}", k.name());
    }
}

// ---------------------------------------------------------------------------------------------
// Clashes.

/// A kind with a chosen name, aliases and root, and nothing else.
struct Named {
    name: &'static str,
    aliases: &'static [&'static str],
    root: &'static str,
}

impl KindDef for Named {
    fn name(&self) -> &'static str {
        self.name
    }
    fn aliases(&self) -> &'static [&'static str] {
        self.aliases
    }
    fn root(&self) -> &'static str {
        self.root
    }
    fn identity(&self) -> Identity {
        Identity::Other
    }
    fn planes(&self) -> &'static [Plane] {
        &[]
    }
    fn reference_fields(&self) -> &'static [ReferenceField] {
        &[]
    }
    fn decode(&self, _: &SpecContext<'_>) -> Option<Spec> {
        None
    }
    fn placement(&self, _: &Spec) -> Placement {
        Placement::default()
    }
    fn references(&self, _: &Spec) -> Vec<Reference> {
        Vec::new()
    }
    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<()>()
    }
}

fn clash(kind: Named) -> Option<(String, String, &'static str, String)> {
    let mut r = registry();
    let before: Vec<&str> = r.kinds().map(|k| k.name()).collect();
    let result = r.register(Arc::new(kind));
    let after: Vec<&str> = r.kinds().map(|k| k.name()).collect();
    match result {
        Ok(()) => None,
        Err(e) => {
            assert_eq!(before, after, "a refused kind must not be registered");
            let message = e.to_string();
            let RegistryError::Clash {
                kind,
                existing,
                what,
                value,
            } = e
            else {
                unreachable!("only clashes are refused here: {message}")
            };
            assert!(
                message.contains(&kind) && message.contains(&existing),
                "{message}"
            );
            Some((kind, existing, what, value))
        }
    }
}

#[test]
fn clashing_kinds_are_refused() {
    let own = |kind: &str, existing: &str, what: &'static str, value: &str| {
        Some((kind.to_owned(), existing.to_owned(), what, value.to_owned()))
    };
    // Registering the same kind twice.
    let mut r = registry();
    assert_eq!(
        r.register(Arc::new(FirewallKind)),
        Err(RegistryError::Clash {
            kind: "EdgeWall".into(),
            existing: "EdgeWall".into(),
            what: "name",
            value: "edgewall".into(),
        })
    );
    // A name equal to a built-in name, in any case.
    assert_eq!(
        clash(Named {
            name: "vm",
            aliases: &[],
            root: "vms"
        }),
        own("vm", "VM", "name", "vm")
    );
    // A name equal to a built-in alias.
    assert_eq!(
        clash(Named {
            name: "Disk",
            aliases: &[],
            root: "disks"
        }),
        own("Disk", "DiskImage", "name", "disk")
    );
    // An alias equal to a built-in name, or to the custom kind's alias.
    assert_eq!(
        clash(Named {
            name: "Installer",
            aliases: &["Iso"],
            root: "installer"
        }),
        own("Installer", "ISO", "alias", "iso")
    );
    assert_eq!(
        clash(Named {
            name: "Wall",
            aliases: &["fw"],
            root: "wall"
        }),
        own("Wall", "EdgeWall", "alias", "fw")
    );
    // A directory root already taken.
    assert_eq!(
        clash(Named {
            name: "Machine",
            aliases: &[],
            root: "vm"
        }),
        own("Machine", "VM", "root", "vm")
    );
    assert_eq!(
        clash(Named {
            name: "Wall",
            aliases: &[],
            root: "edgewall"
        }),
        own("Wall", "EdgeWall", "root", "edgewall")
    );
    // Nothing in common: accepted.
    assert_eq!(
        clash(Named {
            name: "Backup",
            aliases: &["BK"],
            root: "backup"
        }),
        None
    );
}

/// Found by this test: roots were compared with `==`, although documented (and needed, on a
/// case-insensitive file system) to clash case-insensitively.
#[test]
fn roots_clash_case_insensitively() {
    assert_eq!(
        clash(Named {
            name: "Machine",
            aliases: &[],
            root: "VM"
        }),
        Some(("Machine".into(), "VM".into(), "root", "VM".into()))
    );
}

/// An embedder's spec with a nested struct that happens to share its name with a built-in type.
mod lookalike {
    use super::*;

    /// A backup job.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "kebab-case", deny_unknown_fields)]
    pub struct BackupSpec {
        /// What to check the archive with.
        pub checksum: Checksum,
    }

    /// Named like the built-in artifacts' `Checksum`, with other fields.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
    #[serde(rename_all = "kebab-case", deny_unknown_fields)]
    pub struct Checksum {
        /// The tool.
        pub tool: String,
    }

    impl CustomSpec for BackupSpec {
        fn as_any(&self) -> &dyn Any {
            self
        }
        fn to_json(&self) -> serde_json::Value {
            serde_json::to_value(self).unwrap_or_default()
        }
    }

    pub struct BackupKind;

    impl KindDef for BackupKind {
        fn name(&self) -> &'static str {
            "Backup"
        }
        fn root(&self) -> &'static str {
            "backup"
        }
        fn identity(&self) -> Identity {
            Identity::Other
        }
        fn planes(&self) -> &'static [Plane] {
            &[Plane::Desired]
        }
        fn reference_fields(&self) -> &'static [ReferenceField] {
            &[]
        }
        fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
            let spec: BackupSpec = cx.decode()?;
            Some(Spec::Custom(Arc::new(spec)))
        }
        fn placement(&self, _: &Spec) -> Placement {
            Placement::default()
        }
        fn references(&self, _: &Spec) -> Vec<Reference> {
            Vec::new()
        }
        fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
            generator.subschema_for::<BackupSpec>()
        }
    }
}

#[test]
fn an_embedder_type_named_like_a_builtin_type_changes_nothing_builtin() {
    let mut registry = Registry::builtin();
    registry
        .register(Arc::new(lookalike::BackupKind))
        .expect("no clash");
    let iso = format!(
        "{}  checksum:\n    algorithm: sha256\n    value: {}\n",
        artifact("ISO", "installer", &["pve01"]),
        "a".repeat(64)
    );
    let repo = TempRepo::new();
    repo.cluster("c", &["pve01"]);
    repo.listing(
        "c",
        &[
            ("iso/base/installer.yaml", iso),
            ("backup/c/nightly.yaml", "apiVersion: proxops/v1alpha1\nkind: Backup\nmetadata:\n  name: nightly\nspec:\n  checksum:\n    tool: sha256sum\n".into()),
        ],
    );
    // Without the embedder kind, the ISO is fine.
    let builtin_only = TempRepo::new();
    builtin_only.cluster("c", &["pve01"]);
    builtin_only.listing(
        "c",
        &[(
            "iso/base/installer.yaml",
            std::fs::read_to_string(repo.path().join("iso/base/installer.yaml")).expect("iso"),
        )],
    );
    assert_valid(&builtin_only.load());
    // With it, both the ISO and the backup must still be fine.
    assert_valid(&load(&repo, &registry));
}
