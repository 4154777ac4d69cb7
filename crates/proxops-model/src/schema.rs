//! JSON Schema (draft-07, the version yaml-language-server reads) for every kind's manifest, for
//! Stacks and StackTemplates, and one combined schema that picks the kind's schema by `kind:`.

pub use crate::kind::generator;
use crate::kind::{KindDef, Registry};
use crate::manifest::{API_VERSION, Metadata};
use crate::stack::{STACK, STACK_TEMPLATE, StackSpec, StackTemplateSpec};
use serde_json::{Map, Value, json};

fn manifest_properties(kind: &dyn KindDef, generator: &mut schemars::SchemaGenerator) -> Value {
    let metadata = generator.subschema_for::<Metadata>();
    let mut spec = kind.spec_schema(generator).to_value();
    // An inline spec schema (an embedder's kind) gets the expression forms here; definitions
    // get them in `document`.
    if spec.get("$ref").is_none() {
        allow_expressions(&mut spec, IDENTITY);
    }
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
    let spec_roots = spec_roots(&doc);
    let mut definitions = generator.definitions().clone();
    for (name, def) in definitions.iter_mut() {
        if name != "Metadata" {
            let skip = if spec_roots.contains(name) {
                IDENTITY
            } else {
                &[]
            };
            allow_expressions(def, skip);
        }
    }
    definitions.insert(EXPRESSION_DEF.into(), expression_schema());
    doc.insert("definitions".into(), Value::Object(definitions));
    Value::Object(doc)
}

/// The name of the definition of the reference expression forms.
const EXPRESSION_DEF: &str = "ReferenceExpression";

/// Top-level spec fields that cannot be expressions (`crate::expr`).
const IDENTITY: &[&str] = &["vmid", "node", "nodes", "storage", "filename"];

/// The definitions the manifests' `spec` properties name.
fn spec_roots(doc: &Map<String, Value>) -> Vec<String> {
    let mut out = Vec::new();
    let mut visit = |props: Option<&Value>| {
        if let Some(r) = props
            .and_then(|p| p.get("spec"))
            .and_then(|s| s.get("$ref"))
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("#/definitions/"))
        {
            out.push(r.to_owned());
        }
    };
    visit(doc.get("properties"));
    for branch in doc
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        visit(branch.get("then").and_then(|t| t.get("properties")));
    }
    out
}

/// The reference expression forms: `fromArtifact`, `fromReceipt`, `fromPromotion`.
fn expression_schema() -> Value {
    let pointer = json!({"type": "string", "pattern": "^(/([^~]|~[01])*)*$",
        "description": "An RFC 6901 JSON pointer (empty: the whole value)."});
    let resource = json!({"type": "string", "pattern": "^[A-Za-z][A-Za-z0-9]*/[a-z0-9]+(-[a-z0-9]+)*$",
        "description": "The producer, `Kind/name`, in the same cluster's composition."});
    let fallback =
        json!({"description": "The value dry runs use while the reference is unavailable."});
    let form = |key: &str, description: &str, properties: Value, required: Value| {
        json!({
            "type": "object",
            "description": description,
            "required": [key],
            "additionalProperties": false,
            "properties": {key: {
                "type": "object",
                "additionalProperties": false,
                "required": required,
                "properties": properties,
            }},
        })
    };
    let wait_timeout = json!({
        "type": "string",
        "pattern": "^([0-9]+(ms|s|m|h))+$",
        "description": "How long the consumer may wait for this value before the agent reports the wait as an anomaly (default 15m).",
    });
    json!({
        "description": "A reference expression: a value read when the desired plane is published.",
        "oneOf": [
            form("fromArtifact", "A value of an artifact the producer's current receipt lists.",
                json!({"resource": resource, "name": {"type": "string", "pattern": "^[a-z0-9]+(-[a-z0-9]+)*$"},
                    "pointer": pointer, "dryFallback": fallback, "waitTimeout": wait_timeout}),
                json!(["resource", "name"])),
            form("fromReceipt", "A value of the producer's current receipt (`spec.result`).",
                json!({"resource": resource, "pointer": pointer, "dryFallback": fallback, "waitTimeout": wait_timeout}),
                json!(["resource"])),
            form("fromPromotion", "The same field of the promotion source's pinned desired document.",
                json!({"resource": resource, "pointer": pointer, "dryFallback": fallback}),
                json!([])),
        ],
    })
}

/// `schema` with each property, item and map value allowed to be a reference expression
/// instead (`skip`: top-level properties that may not).
fn allow_expressions(schema: &mut Value, skip: &[&str]) {
    let either = |v: &mut Value| {
        let inner = std::mem::take(v);
        *v = json!({"anyOf": [inner, {"$ref": format!("#/definitions/{EXPRESSION_DEF}")}]});
    };
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for (name, p) in props.iter_mut() {
            allow_expressions(p, &[]);
            if !skip.contains(&name.as_str()) {
                either(p);
            }
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(p) = obj.get_mut(key).filter(|p| p.is_object()) {
            allow_expressions(p, &[]);
            either(p);
        }
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        if let Some(Value::Array(items)) = obj.get_mut(key) {
            for item in items {
                allow_expressions(item, skip);
            }
        }
    }
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
