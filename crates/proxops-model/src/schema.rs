//! JSON Schema (draft-07, the version yaml-language-server reads) for every kind's manifest and
//! one combined schema that picks the kind's schema by `kind:`.

use crate::kind::{KindDef, Registry};
use crate::manifest::{API_VERSION, Metadata};
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

/// One schema for every kind: `kind` selects the kind's schema.
pub fn combined_schema(registry: &Registry) -> Value {
    let mut generator = generator();
    let names: Vec<&str> = registry.kinds().map(|k| k.name()).collect();
    let branches: Vec<Value> = registry
        .kinds()
        .map(|kind| {
            let properties = manifest_properties(kind, &mut generator);
            json!({
                "if": {"properties": {"kind": {"const": kind.name()}}, "required": ["kind"]},
                "then": {"properties": properties, "additionalProperties": false},
            })
        })
        .collect();
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

/// Every schema file to write: `<kind>.schema.json` per kind (lower-case kind name) and
/// `proxops.schema.json`, as (file name, pretty JSON with a trailing newline).
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
    out
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}
