//! JSON Schema (draft-07, the version yaml-language-server reads) for every kind's manifest, for
//! Stacks and StackTemplates, and one combined schema that picks the kind's schema by `kind:`.

use crate::kind::{KindDef, Registry};
use crate::manifest::{API_VERSION, Metadata};
use crate::stack::{STACK, STACK_TEMPLATE, StackSpec, StackTemplateSpec};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The schema generator every schema of ProxOps is made with.
pub fn generator() -> schemars::SchemaGenerator {
    SchemaSettings::draft07().into_generator()
}

fn manifest_properties(kind: &dyn KindDef, generator: &mut schemars::SchemaGenerator) -> Value {
    let metadata = generator.subschema_for::<Metadata>();
    let spec = kind.spec_schema(generator);
    json!({
        "apiVersion": {"const": API_VERSION, "description": "The manifest format version."},
        "kind": {"const": kind.name(), "description": format!("`{}`", kind.name())},
        "metadata": metadata,
        "spec": spec,
    })
}

fn document(
    title: String,
    body: Map<String, Value>,
    generator: schemars::SchemaGenerator,
) -> Value {
    let mut doc = Map::new();
    doc.insert(
        "$schema".into(),
        json!("http://json-schema.org/draft-07/schema#"),
    );
    doc.insert("title".into(), json!(title));
    doc.extend(body);
    doc.insert(
        "definitions".into(),
        Value::Object(generator.definitions().clone()),
    );
    Value::Object(doc)
}

/// The schema of one kind's manifests.
pub fn kind_schema(kind: &dyn KindDef) -> Value {
    let mut generator = generator();
    let properties = manifest_properties(kind, &mut generator);
    let body = json!({
        "description": format!("A ProxOps {} manifest.", kind.name()),
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": false,
        "properties": properties,
    });
    let Value::Object(body) = body else {
        return Value::Null;
    };
    document(format!("ProxOps {}", kind.name()), body, generator)
}

fn stack_properties(kind: &'static str, generator: &mut schemars::SchemaGenerator) -> Value {
    let metadata = generator.subschema_for::<Metadata>();
    let spec = if kind == STACK {
        generator.subschema_for::<StackSpec>()
    } else {
        generator.subschema_for::<StackTemplateSpec>()
    };
    json!({
        "apiVersion": {"const": API_VERSION, "description": "The manifest format version."},
        "kind": {"const": kind, "description": format!("`{kind}`")},
        "metadata": metadata,
        "spec": spec,
    })
}

/// The schema of `Stack` or `StackTemplate` files ([`crate::stack`]); `kind` is
/// [`STACK`] or [`STACK_TEMPLATE`].
pub fn stack_schema(kind: &'static str) -> Value {
    let mut generator = generator();
    let properties = stack_properties(kind, &mut generator);
    let body = json!({
        "description": format!("A ProxOps {kind}."),
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "additionalProperties": false,
        "properties": properties,
    });
    let Value::Object(body) = body else {
        return Value::Null;
    };
    document(format!("ProxOps {kind}"), body, generator)
}

/// One schema for every kind (and for Stacks and StackTemplates): `kind` selects the kind's
/// schema.
pub fn combined_schema(registry: &Registry) -> Value {
    let mut generator = generator();
    let mut names: Vec<&str> = registry.kinds().map(|k| k.name()).collect();
    let branch = |name: &str, properties: Value| {
        json!({
            "if": {"properties": {"kind": {"const": name}}, "required": ["kind"]},
            "then": {"properties": properties, "additionalProperties": false},
        })
    };
    let mut branches: Vec<Value> = registry
        .kinds()
        .map(|kind| branch(kind.name(), manifest_properties(kind, &mut generator)))
        .collect();
    for kind in [STACK_TEMPLATE, STACK] {
        names.push(kind);
        branches.push(branch(kind, stack_properties(kind, &mut generator)));
    }
    let body = json!({
        "description": "A ProxOps manifest of any kind.",
        "type": "object",
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": API_VERSION},
            "kind": {"enum": names},
        },
        "allOf": branches,
    });
    let Value::Object(body) = body else {
        return Value::Null;
    };
    document("ProxOps manifest".into(), body, generator)
}

/// Every schema file to write: `<kind>.schema.json` per kind (lower-case kind name),
/// `proxops.schema.json`, then `stacktemplate.schema.json` and `stack.schema.json`, as (file
/// name, pretty JSON with a trailing newline).
pub fn schema_files(registry: &Registry) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = registry
        .kinds()
        .map(|k| {
            (
                format!("{}.schema.json", k.name().to_ascii_lowercase()),
                pretty(&kind_schema(k)),
            )
        })
        .collect();
    out.push((
        "proxops.schema.json".into(),
        pretty(&combined_schema(registry)),
    ));
    for kind in [STACK_TEMPLATE, STACK] {
        out.push((
            format!("{}.schema.json", kind.to_ascii_lowercase()),
            pretty(&stack_schema(kind)),
        ));
    }
    out
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}
