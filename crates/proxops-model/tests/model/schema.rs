//! The JSON Schemas (draft-07) that editors use: well-formed, complete, deterministic, accepting
//! every example manifest and rejecting the mistakes the loader rejects.
//!
//! YAML is turned into JSON the way a YAML 1.2 editor sees it: the model's own parser
//! ([`proxops_model::yaml::parse_documents`]) gives the tree, and plain scalars that read as
//! null, a boolean, an integer or a float become those JSON types; every other scalar is a string.

use crate::support::{artifact, example, lxc, shared, vm, with_spec};
use jsonschema::Validator;
use proptest::prelude::*;
use proxops_model::diagnostic::SourceFile;
use proxops_model::manifest::load_manifest;
use proxops_model::quantity::{Quantity, QuantityError};
use proxops_model::schema::{combined_schema, kind_schema, schema_files, stack_schema};
use proxops_model::stack::{STACK, STACK_TEMPLATE};
use proxops_model::yaml::{Node, NodeValue, ScalarKind, parse_documents};
use proxops_model::{Code, Registry};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::OnceLock;

const DRAFT_07: &str = "http://json-schema.org/draft-07/schema#";

// ---------------------------------------------------------------------------------------------
// YAML to JSON, validators, example manifests.

/// A plain scalar as YAML 1.2's core schema types it.
fn plain_scalar(s: &str) -> Value {
    match s {
        "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
        "true" | "True" | "TRUE" => return Value::Bool(true),
        "false" | "False" | "FALSE" => return Value::Bool(false),
        _ => {}
    }
    if let Ok(i) = s.parse::<i64>() {
        return json!(i);
    }
    let radix = |digits: &str, radix| u64::from_str_radix(digits, radix).ok();
    if let Some(u) = s
        .strip_prefix("0x")
        .filter(|d| d.bytes().all(|b| b.is_ascii_hexdigit()))
        .and_then(|d| radix(d, 16))
        .or_else(|| {
            s.strip_prefix("0o")
                .filter(|d| d.bytes().all(|b| matches!(b, b'0'..=b'7')))
                .and_then(|d| radix(d, 8))
        })
    {
        return json!(u);
    }
    if let Ok(u) = s.parse::<u64>() {
        return json!(u);
    }
    let numeric = s
        .bytes()
        .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-'));
    if numeric
        && let Ok(f) = s.parse::<f64>()
        && let Some(n) = serde_json::Number::from_f64(f)
    {
        return Value::Number(n);
    }
    Value::String(s.to_owned())
}

/// A YAML node as JSON.
fn to_json(node: &Node) -> Value {
    match &node.value {
        NodeValue::Scalar(s, ScalarKind::Plain) => plain_scalar(s),
        NodeValue::Scalar(s, ScalarKind::Quoted) => Value::String(s.clone()),
        NodeValue::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        NodeValue::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), to_json(v)))
                .collect(),
        ),
    }
}

/// The single document of a YAML text, as JSON.
fn yaml_json(text: &str) -> Value {
    let docs = parse_documents(text).unwrap_or_else(|e| panic!("{}: {text}", e.message));
    let docs: Vec<&Node> = docs.iter().filter(|d| !d.is_null()).collect();
    assert_eq!(docs.len(), 1, "{text}");
    to_json(docs[0])
}

fn validator(schema: &Value) -> Validator {
    jsonschema::draft7::new(schema).unwrap_or_else(|e| panic!("schema does not compile: {e}"))
}

/// Every validation error, one line each.
fn errors(v: &Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{}: {e}", e.instance_path))
        .collect()
}

fn builtin() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(Registry::builtin)
}

/// The combined schema and each kind's own schema, compiled once.
struct Validators {
    combined: Validator,
    kinds: Vec<(&'static str, Validator)>,
}

impl Validators {
    fn kind(&self, name: &str) -> &Validator {
        self.kinds
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v)
            .unwrap_or_else(|| panic!("no schema for {name}"))
    }
}

fn validators() -> &'static Validators {
    static VALIDATORS: OnceLock<Validators> = OnceLock::new();
    VALIDATORS.get_or_init(|| Validators {
        combined: validator(&combined_schema(builtin())),
        kinds: builtin()
            .kinds()
            .map(|k| (k.name(), validator(&kind_schema(k))))
            .collect(),
    })
}

/// Every manifest (a YAML file under a kind root) of an example repository: (path, kind, text).
fn manifests_under(root: &Path) -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            let Some(kind) = rel
                .split('/')
                .next()
                .and_then(|r| builtin().by_root(r))
                .map(|k| k.name())
            else {
                continue;
            };
            if rel.ends_with(".yaml") || rel.ends_with(".yml") {
                out.push((rel, kind, std::fs::read_to_string(&path).expect("read")));
            }
        }
    }
    out.sort();
    out
}

/// The manifests of the shared compatibility examples (when present) and of homelab.
fn example_manifests() -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    if let Some(compat) = shared("compat/examples") {
        out.extend(
            manifests_under(&compat)
                .into_iter()
                .map(|(p, k, t)| (format!("compat/examples/{p}"), k, t)),
        );
    }
    out.extend(
        manifests_under(&example("homelab"))
            .into_iter()
            .map(|(p, k, t)| (format!("examples/homelab/{p}"), k, t)),
    );
    out
}

/// The error codes the loader reports for one manifest on its own.
fn loader_codes(kind: &str, text: &str) -> Vec<Code> {
    let root = builtin().get(kind).map_or("vm", |k| k.root());
    let file = SourceFile::new(format!("{root}/c/x.yaml"), text);
    load_manifest(&file, builtin(), Some(kind))
        .diagnostics
        .iter()
        .filter(|d| d.invalidates())
        .map(|d| d.code)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The schema files.

#[test]
fn schema_files_are_one_per_kind_plus_the_combined_schema() {
    let files = schema_files(builtin());
    let mut expected: Vec<String> = builtin()
        .kinds()
        .map(|k| format!("{}.schema.json", k.name().to_ascii_lowercase()))
        .collect();
    expected.push("proxops.schema.json".to_owned());
    expected.push("stacktemplate.schema.json".to_owned());
    expected.push("stack.schema.json".to_owned());
    let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, expected);
    assert_eq!(files.len(), builtin().kinds().count() + 3);
    assert_eq!(
        names,
        [
            "vm.schema.json",
            "templatevm.schema.json",
            "lxc.schema.json",
            "templatect.schema.json",
            "iso.schema.json",
            "cttemplate.schema.json",
            "diskimage.schema.json",
            "storage.schema.json",
            "sdnzone.schema.json",
            "sdnvnet.schema.json",
            "sdnsubnet.schema.json",
            "pool.schema.json",
            "resourcemapping.schema.json",
            "group.schema.json",
            "role.schema.json",
            "user.schema.json",
            "apitoken.schema.json",
            "acl.schema.json",
            "firewall.schema.json",
            "backupjob.schema.json",
            "proxops.schema.json",
            "stacktemplate.schema.json",
            "stack.schema.json",
        ]
    );
    let kinds: Vec<_> = builtin().kinds().collect();
    for (i, (name, text)) in files.iter().enumerate() {
        assert!(text.ends_with("}\n"), "{name} does not end with a newline");
        let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let want = match (kinds.get(i), i - kinds.len().min(i)) {
            (Some(k), _) => kind_schema(*k),
            (None, 0) => combined_schema(builtin()),
            (None, 1) => stack_schema(STACK_TEMPLATE),
            (None, _) => stack_schema(STACK),
        };
        assert_eq!(value, want, "{name} differs from the schema it should hold");
        // Pretty-printed, so that diffs of committed schemas are readable.
        assert!(text.lines().count() > 20, "{name} is not pretty-printed");
    }
}

#[test]
fn schemas_are_valid_draft07() {
    for (name, text) in schema_files(builtin()) {
        let schema: Value = serde_json::from_str(&text).expect("json");
        assert_eq!(schema["$schema"], json!(DRAFT_07), "{name}");
        assert!(
            schema["title"]
                .as_str()
                .is_some_and(|t| t.starts_with("ProxOps")),
            "{name}"
        );
        if let Err(e) = jsonschema::draft7::meta::validate(&schema) {
            panic!("{name} is not a valid draft-07 schema: {e}");
        }
        // Every `$ref` resolves (the validator resolves them while compiling).
        let v = validator(&schema);
        assert_eq!(v.draft(), jsonschema::Draft::Draft7);
        let refs = text.matches("\"$ref\"").count();
        assert!(refs > 0, "{name} has no $ref: definitions are not shared");
        const PREFIX: &str = "\"#/definitions/";
        for (at, _) in text.match_indices(PREFIX) {
            let rest = &text[at + PREFIX.len()..];
            let def = &rest[..rest.find('"').expect("closing quote")];
            assert!(
                schema["definitions"].get(def).is_some(),
                "{name}: dangling $ref {def}"
            );
        }
    }
}

#[test]
fn schema_output_is_deterministic() {
    let first = schema_files(builtin());
    let second = schema_files(builtin());
    assert_eq!(first, second, "two calls differ");
    let fresh = schema_files(&Registry::builtin());
    assert_eq!(first, fresh, "two registries differ");
    for k in builtin().kinds() {
        assert_eq!(
            serde_json::to_string(&kind_schema(k)).expect("json"),
            serde_json::to_string(&kind_schema(k)).expect("json")
        );
    }
}

#[test]
fn the_combined_schema_lists_every_kind_and_no_alias() {
    let schema = combined_schema(builtin());
    let mut names: Vec<&str> = builtin().kinds().map(|k| k.name()).collect();
    names.extend([STACK_TEMPLATE, STACK]);
    assert_eq!(schema["properties"]["kind"]["enum"], json!(names));
    assert_eq!(schema["allOf"].as_array().map(Vec::len), Some(names.len()));
    assert_eq!(
        schema["required"],
        json!(["apiVersion", "kind", "metadata", "spec"])
    );
    for k in builtin().kinds() {
        let own = kind_schema(k);
        assert_eq!(own["properties"]["kind"]["const"], json!(k.name()));
        assert_eq!(own["additionalProperties"], json!(false));
    }
}

// ---------------------------------------------------------------------------------------------
// Acceptance of the examples.

#[test]
fn the_stack_example_is_accepted_by_its_schemas_and_mistakes_are_not() {
    let dir = example("stacks");
    let combined = &validators().combined;
    for (path, kind) in [
        ("stacktemplate/base/k3s.yaml", STACK_TEMPLATE),
        ("stack/home/k3s.yaml", STACK),
    ] {
        let text = std::fs::read_to_string(dir.join(path)).expect("read");
        let json = yaml_json(&text);
        let own = validator(&stack_schema(kind));
        assert_eq!(errors(&own, &json), Vec::<String>::new(), "{path}");
        assert_eq!(errors(combined, &json), Vec::<String>::new(), "{path}");
        // What the loader refuses, the schema refuses: an unknown field of the spec.
        let wrong = yaml_json(&text.replacen("spec:\n", "spec:\n  bogus: 1\n", 1));
        assert!(!errors(&own, &wrong).is_empty(), "{path}");
        assert!(!errors(combined, &wrong).is_empty(), "{path}");
    }
    // A parameter type the template cannot declare.
    let text = std::fs::read_to_string(dir.join("stacktemplate/base/k3s.yaml")).expect("read");
    let wrong = yaml_json(&text.replacen("type: integer", "type: float", 1));
    assert!(!errors(&validator(&stack_schema(STACK_TEMPLATE)), &wrong).is_empty());
}

#[test]
fn every_example_manifest_matches_the_combined_and_its_kind_schema() {
    let manifests = example_manifests();
    assert!(manifests.len() >= 13, "only {} manifests", manifests.len());
    let v = validators();
    let mut failures = Vec::new();
    for (path, kind, text) in &manifests {
        let instance = yaml_json(text);
        assert_eq!(
            instance["kind"],
            json!(kind),
            "{path} is filed under another kind's root"
        );
        for e in errors(&v.combined, &instance) {
            failures.push(format!("{path} (combined schema): {e}"));
        }
        for e in errors(v.kind(kind), &instance) {
            failures.push(format!("{path} ({kind} schema): {e}"));
        }
        // And the loader agrees that the file is fine on its own.
        assert_eq!(loader_codes(kind, text), [], "{path}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_kind_is_covered_by_the_examples() {
    let manifests = example_manifests();
    // An `ApiToken` is created only with the planes recorded (its secret is kept on the
    // observed plane): the homelab is planned without them (its README's first steps, many
    // tests), so its token example lives in tests/api_token.rs and docs/cluster-kinds.md.
    for k in builtin().kinds().filter(|k| k.name() != "ApiToken") {
        assert!(
            manifests.iter().any(|(_, kind, _)| *kind == k.name()),
            "no example of {}",
            k.name()
        );
    }
}

#[test]
fn a_manifest_matches_no_other_kind_schema() {
    let v = validators();
    for (path, kind, text) in example_manifests() {
        let instance = yaml_json(&text);
        for (other, validator) in &v.kinds {
            if *other != kind {
                assert!(
                    !validator.is_valid(&instance),
                    "{path} ({kind}) matches the {other} schema"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Rejections: the schema rejects what the loader rejects.

/// The minimal manifests of the support module, one per kind family.
fn minimal() -> Vec<(&'static str, String)> {
    vec![
        ("VM", vm("web", "pve01", 100)),
        ("LXC", lxc("db", "pve01", 101, "debian")),
        ("ISO", artifact("ISO", "installer", &["pve01"])),
        ("CTTemplate", artifact("CTTemplate", "debian", &["pve01"])),
        ("DiskImage", artifact("DiskImage", "cloud", &["pve01"])),
    ]
}

#[test]
fn the_minimal_manifests_are_accepted() {
    let v = validators();
    for (kind, text) in minimal() {
        let instance = yaml_json(&text);
        assert_eq!(
            errors(&v.combined, &instance),
            Vec::<String>::new(),
            "{kind}"
        );
        assert_eq!(
            errors(v.kind(kind), &instance),
            Vec::<String>::new(),
            "{kind}"
        );
        assert_eq!(loader_codes(kind, &text), [], "{kind}");
    }
}

/// Asserts that both schemas reject `text` (a `kind` manifest) and that the loader reports
/// `code`; returns the combined schema's errors.
#[track_caller]
fn rejected(kind: &str, text: &str, code: Code) -> Vec<String> {
    let v = validators();
    let instance = yaml_json(text);
    let combined = errors(&v.combined, &instance);
    assert!(!combined.is_empty(), "the combined schema accepts:\n{text}");
    if let Some((_, own)) = v.kinds.iter().find(|(k, _)| *k == kind) {
        assert!(
            !own.is_valid(&instance),
            "the {kind} schema accepts:\n{text}"
        );
    }
    let codes = loader_codes(kind, text);
    assert!(
        codes.contains(&code),
        "the loader reports {codes:?}, not {code}, for:\n{text}"
    );
    combined
}

fn replaced(text: &str, from: &str, to: &str) -> String {
    assert!(text.contains(from), "{from:?} not in {text}");
    text.replacen(from, to, 1)
}

#[test]
fn a_misspelt_field_is_rejected() {
    let base = vm("web", "pve01", 100);
    // `cpus:` instead of `cpu:`: an unknown field and a missing one.
    let errs = rejected(
        "VM",
        &replaced(&base, "  cpu:\n", "  cpus:\n"),
        Code::UnknownField,
    );
    assert!(errs.iter().any(|e| e.contains("cpus")), "{errs:#?}");
    // Next to the real field: rejected for the unknown field alone.
    let errs = rejected("VM", &with_spec(&base, &["cpus: 2"]), Code::UnknownField);
    assert!(
        errs.iter()
            .any(|e| e.starts_with("/spec:") && e.contains("cpus")),
        "{errs:#?}"
    );
    // Deeper down, in metadata, and in the envelope.
    rejected(
        "VM",
        &replaced(&base, "    cores: 1", "    core: 1"),
        Code::UnknownField,
    );
    rejected(
        "VM",
        &replaced(&base, "      size: 8GiB", "      sise: 8GiB"),
        Code::UnknownField,
    );
    rejected(
        "VM",
        &replaced(&base, "  name: web", "  name: web\n  label: {}"),
        Code::UnknownField,
    );
    rejected(
        "VM",
        &replaced(&base, "spec:", "specs: {}\nspec:"),
        Code::UnknownField,
    );
    for (kind, text) in minimal() {
        rejected(
            kind,
            &replaced(&text, "storage:", "storag:"),
            Code::UnknownField,
        );
    }
}

#[test]
fn a_wrongly_typed_field_is_rejected() {
    let base = vm("web", "pve01", 100);
    for (from, to) in [
        ("vmid: 100", "vmid: hundred"),
        ("vmid: 100", "vmid: \"100\""),
        ("vmid: 100", "vmid: -100"),
        ("vmid: 100", "vmid: [100]"),
        ("cores: 1", "cores: one"),
        ("cores: 1", "cores: true"),
        ("memory: 1GiB", "memory: 1.5GiB"),
        ("memory: 1GiB", "memory: 1 GiB"),
        ("memory: 1GiB", "memory: {}"),
        ("memory: 1GiB", "memory: -1"),
        ("  cpu:\n    type: host\n    cores: 1\n", "  cpu: host\n"),
        (
            "  disks:\n    - storage: local-lvm\n      size: 8GiB\n",
            "  disks: local-lvm\n",
        ),
        ("  node: pve01", "  node: [pve01]"),
        ("  name: web", "  name: {web: 1}"),
    ] {
        rejected("VM", &replaced(&base, from, to), Code::InvalidValue);
    }
    let iso = artifact("ISO", "installer", &["pve01"]);
    rejected(
        "ISO",
        &replaced(&iso, "  nodes:\n    - pve01", "  nodes: pve01"),
        Code::InvalidValue,
    );
    rejected(
        "ISO",
        &with_spec(&iso, &["checksum:", "  algorithm: crc32", "  value: abc"]),
        Code::InvalidValue,
    );
}

#[test]
fn a_missing_required_field_is_rejected() {
    let base = vm("web", "pve01", 100);
    rejected(
        "VM",
        &replaced(&base, "  node: pve01\n", ""),
        Code::MissingField,
    );
    rejected(
        "VM",
        &replaced(&base, "  vmid: 100\n", ""),
        Code::MissingField,
    );
    rejected(
        "VM",
        &replaced(&base, "    type: host\n", ""),
        Code::MissingField,
    );
    rejected(
        "VM",
        &replaced(
            &base,
            "    - storage: local-lvm\n      size: 8GiB\n",
            "    - size: 8GiB\n",
        ),
        Code::MissingField,
    );
    rejected(
        "VM",
        &replaced(&base, "  name: web\n", "  labels: {a: b}\n"),
        Code::MissingField,
    );
    let no_spec = &base[..base.find("spec:").expect("spec")];
    rejected("VM", no_spec, Code::MissingField);
    let no_metadata = replaced(&base, "metadata:\n  name: web\n", "");
    rejected("VM", &no_metadata, Code::MissingField);
    rejected(
        "VM",
        &replaced(&base, "apiVersion: proxops/v1alpha1\n", ""),
        Code::ApiVersion,
    );
    let iso = artifact("ISO", "installer", &["pve01"]);
    let errs = rejected(
        "ISO",
        &replaced(&iso, "  url: https://example.invalid/installer.iso\n", ""),
        Code::MissingField,
    );
    assert!(errs.iter().any(|e| e.contains("url")), "{errs:#?}");
}

#[test]
fn an_unknown_kind_is_rejected() {
    let base = vm("web", "pve01", 100);
    let v = validators();
    // (`Firewall` is a kind now: `Wall` is not.)
    for kind in ["Wall", "vm", "CTT", "DISK", "Vm", ""] {
        let text = replaced(&base, "kind: VM", &format!("kind: {kind}"));
        let instance = yaml_json(&text);
        let errs = errors(&v.combined, &instance);
        assert!(
            errs.iter().any(|e| e.starts_with("/kind:")),
            "{kind}: {errs:#?}"
        );
        for (name, validator) in &v.kinds {
            assert!(
                !validator.is_valid(&instance),
                "{name} schema accepts kind {kind:?}"
            );
        }
        assert!(
            loader_codes("VM", &text).contains(&Code::UnknownKind),
            "{kind}"
        );
    }
    let text = replaced(&base, "kind: VM\n", "");
    rejected("VM", &text, Code::UnknownKind);
    rejected(
        "VM",
        &replaced(&base, "proxops/v1alpha1", "proxops/v1"),
        Code::ApiVersion,
    );
}

// ---------------------------------------------------------------------------------------------
// Sizes: the schema's pattern and the decoder's parser agree.

fn quantity_validator() -> &'static Validator {
    static V: OnceLock<Validator> = OnceLock::new();
    V.get_or_init(|| {
        let vm_schema = kind_schema(builtin().get("VM").expect("VM"));
        let mut q = vm_schema["definitions"]["Quantity"].clone();
        q["$schema"] = json!(DRAFT_07);
        validator(&q)
    })
}

/// Whether the decoder accepts `text` as the spelling of a size (a too-large value is a range
/// problem the schema cannot see).
fn decoder_accepts(text: &str) -> bool {
    !matches!(
        Quantity::parse(text),
        Err(QuantityError::Syntax(_) | QuantityError::Unit(..))
    )
}

#[test]
fn quantity_schema_matches_examples() {
    let v = quantity_validator();
    for ok in [
        "8GiB", "8gib", "512Mi", "4M", "42", "42B", "1kb", "3TiB", "7P",
    ] {
        assert!(v.is_valid(&json!(ok)), "{ok}");
        assert!(decoder_accepts(ok), "{ok}");
    }
    for bad in [
        "1.5GiB", "8 GiB", "GiB", "8XB", "8GiBB", "-1", "8GiB\n", "", "８GiB", "8Gi B",
    ] {
        assert!(!v.is_valid(&json!(bad)), "{bad:?}");
        assert!(!decoder_accepts(bad), "{bad:?}");
    }
    assert!(v.is_valid(&json!(1_073_741_824u64)));
    assert!(!v.is_valid(&json!(-1)));
}

proptest! {
    #![proptest_config(crate::fuzz::cases(256))]

    #[test]
    fn quantity_schema_and_decoder_agree(
        text in prop_oneof![
            "[0-9]{0,24}[kKmMgGtTpPiIbBeE .\n-]{0,4}",
            "[0-9]{1,3}(K|M|G|T|P|E|k|m|g|t|p)?(i|I)?(b|B)?",
            any::<String>(),
        ]
    ) {
        let schema = quantity_validator().is_valid(&json!(text));
        prop_assert_eq!(schema, decoder_accepts(&text), "{:?}", text);
    }
}

/// Plain scalars where the schema (as a YAML 1.2 editor applies it) and the decoder disagree.
/// Each case is written the way a user might; the test lists every disagreement at once.
#[test]
fn schema_and_decoder_agree_on_plain_scalars() {
    let base = vm("web", "pve01", 100);
    let v = validators();
    let mut disagreements = Vec::new();
    for (from, to) in [
        // Accepted by the schema, refused by the decoder.
        ("memory: 1GiB", "memory: 1.0"),
        ("memory: 1GiB", "memory: 1e9"),
        ("memory: 1GiB", "memory: +1073741824"),
        ("vmid: 100", "vmid: 100.0"),
        ("vmid: 100", "vmid: 1e2"),
        // Refused by the schema, accepted by the decoder.
        ("vmid: 100", "vmid: 1_000"),
        ("  node: pve01", "  node: 1"),
        ("  name: web", "  name: web\n  labels:\n    tier: 1"),
        ("    type: host", "    type: 486"),
        ("  node: pve01", "  node: pve01\n  pve-description: 42"),
        ("  node: pve01", "  node: pve01\n  tags: [2024]"),
    ] {
        let text = replaced(&base, from, to);
        let schema_ok = v.combined.is_valid(&yaml_json(&text));
        let loader_ok = loader_codes("VM", &text).is_empty();
        if schema_ok != loader_ok {
            disagreements.push(format!(
                "`{}`: schema {schema_ok}, loader {loader_ok}",
                to.trim()
            ));
        }
    }
    assert!(disagreements.is_empty(), "{}", disagreements.join("\n"));
}

/// More plain scalars, each with whether it is accepted: the schema and the loader agree on each.
#[test]
fn schema_and_decoder_agree_on_more_plain_scalars() {
    let vm_base = vm("web", "pve01", 100);
    let lxc_base = lxc("db", "pve01", 101, "debian");
    let v = validators();
    let mut wrong = Vec::new();
    for (kind, base, from, to, accepted) in [
        // Integers: any YAML 1.2 spelling of a whole number.
        ("VM", &vm_base, "vmid: 100", "vmid: 0x64", true),
        ("VM", &vm_base, "vmid: 100", "vmid: 0o144", true),
        ("VM", &vm_base, "vmid: 100", "vmid: +100", true),
        ("VM", &vm_base, "cores: 1", "cores: 1e0", true),
        ("VM", &vm_base, "vmid: 100", "vmid: 100.5", false),
        ("VM", &vm_base, "vmid: 100", "vmid: .inf", false),
        ("VM", &vm_base, "vmid: 100", "vmid: 1_0_0", false),
        // Memory: bytes, whole MiB, not zero.
        ("VM", &vm_base, "memory: 1GiB", "memory: 1073741824", true),
        ("VM", &vm_base, "memory: 1GiB", "memory: 1073741824.0", true),
        ("VM", &vm_base, "memory: 1GiB", "memory: 0x40000000", true),
        ("VM", &vm_base, "memory: 1GiB", "memory: 1048576", true),
        ("VM", &vm_base, "memory: 1GiB", "memory: 1000000", false),
        ("VM", &vm_base, "memory: 1GiB", "memory: 0", false),
        ("VM", &vm_base, "memory: 1GiB", "memory: -1048576", false),
        ("VM", &vm_base, "memory: 1GiB", "memory: 1.5e6", false),
        ("VM", &vm_base, "memory: 1GiB", "memory: true", false),
        (
            "LXC",
            &lxc_base,
            "memory: 512MiB",
            "memory: 536870912",
            true,
        ),
        (
            "LXC",
            &lxc_base,
            "memory: 512MiB",
            "memory: 512000000",
            false,
        ),
        (
            "LXC",
            &lxc_base,
            "memory: 512MiB",
            "memory: 512MiB\n  swap: 0",
            true,
        ),
        (
            "LXC",
            &lxc_base,
            "memory: 512MiB",
            "memory: 512MiB\n  swap: 2097152",
            true,
        ),
        (
            "LXC",
            &lxc_base,
            "memory: 512MiB",
            "memory: 512MiB\n  swap: 1e6",
            false,
        ),
        // Disk sizes are bytes of any count.
        ("VM", &vm_base, "size: 8GiB", "size: 8589934592", true),
        ("VM", &vm_base, "size: 8GiB", "size: +8589934592", true),
        ("VM", &vm_base, "size: 8GiB", "size: 8.5e9", true),
        ("VM", &vm_base, "size: 8GiB", "size: 8.5", false),
        // Strings: numbers and booleans must be quoted; keys are text anyway.
        ("VM", &vm_base, "  node: pve01", "  node: \"1\"", true),
        ("VM", &vm_base, "  node: pve01", "  node: true", false),
        ("VM", &vm_base, "  node: pve01", "  node: 1.5", false),
        ("VM", &vm_base, "  node: pve01", "  node: 0x1f", false),
        (
            "VM",
            &vm_base,
            "  node: pve01",
            "  node: pve01\n  tags: ['2024']",
            true,
        ),
        (
            "VM",
            &vm_base,
            "  node: pve01",
            "  node: pve01\n  tags: [v1.2]",
            true,
        ),
        (
            "VM",
            &vm_base,
            "  node: pve01",
            "  node: pve01\n  tags: [1_000]",
            true,
        ),
        (
            "VM",
            &vm_base,
            "  node: pve01",
            "  node: pve01\n  extra: {args: 1}",
            false,
        ),
        (
            "VM",
            &vm_base,
            "  name: web",
            "  name: web\n  labels: {2024: x}",
            true,
        ),
        (
            "VM",
            &vm_base,
            "  name: web",
            "  name: web\n  labels: {x: true}",
            false,
        ),
        (
            "VM",
            &vm_base,
            "  name: web",
            "  name: web\n  annotations: {x: 1.0}",
            false,
        ),
        // Enums are strings too.
        (
            "VM",
            &vm_base,
            "  node: pve01",
            "  node: pve01\n  state: true",
            false,
        ),
    ] {
        let text = replaced(base, from, to);
        let schema_ok = v.combined.is_valid(&yaml_json(&text));
        let loader_ok = loader_codes(kind, &text).is_empty();
        if (schema_ok, loader_ok) != (accepted, accepted) {
            wrong.push(format!(
                "`{}`: schema {schema_ok}, loader {loader_ok}, want {accepted}",
                to.trim()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn a_field_may_be_its_type_or_a_reference_expression() {
    let v = validators();
    let ok = with_spec(
        &vm("web", "pve01", 142),
        &[
            "cloud-init-data:",
            "  nameservers: [{fromArtifact: {resource: LXC/pihole, name: ip-addresses, pointer: /net0/ipv4/0}}]",
            "pve-description: {fromReceipt: {resource: LXC/pihole, pointer: /outcome, dryFallback: x}}",
        ],
    );
    let instance = yaml_json(&ok);
    for validator in [&v.combined, v.kind("VM")] {
        assert_eq!(errors(validator, &instance), Vec::<String>::new(), "{ok}");
    }
    let image = replaced(
        &artifact("DiskImage", "img", &["pve01"]),
        "  url: https://example.invalid/img.qcow2\n",
        "  url: {fromPromotion: {}}\n  checksum: {fromPromotion: {pointer: /checksum}}\n",
    );
    assert_eq!(
        errors(v.kind("DiskImage"), &yaml_json(&image)),
        Vec::<String>::new()
    );
    // What the loader refuses, the schema refuses: a second key, an unknown field, an
    // expression standing for the vmid, a bad pointer.
    for bad in [
        "pve-description: {fromReceipt: {resource: LXC/pihole}, extra: 1}",
        "pve-description: {fromReceipt: {resource: LXC/pihole, nme: x}}",
        "pve-description: {fromReceipt: {resource: LXC/pihole, pointer: outcome}}",
        "pve-description: {fromReceipt: {resource: pihole}}",
    ] {
        let text = with_spec(&vm("web", "pve01", 142), &[bad]);
        assert!(!errors(v.kind("VM"), &yaml_json(&text)).is_empty(), "{bad}");
    }
    let vmid = replaced(
        &vm("web", "pve01", 142),
        "  vmid: 142\n",
        "  vmid: {fromReceipt: {resource: LXC/pihole}}\n",
    );
    assert!(!errors(v.kind("VM"), &yaml_json(&vmid)).is_empty());
}
