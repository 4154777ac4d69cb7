//! The two kinds' names, roots and spec types, and a decoded Stack file: below decoding and
//! projection, which both read them.

use crate::diagnostic::SourceFile;
use crate::manifest::metadata::Metadata;
use crate::names::ResourceKey;
use crate::yaml::Node;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;

/// `kind:` of a Stack.
pub const STACK: &str = "Stack";
/// `kind:` of a StackTemplate.
pub const STACK_TEMPLATE: &str = "StackTemplate";
/// The directory root of Stacks (`stack/<cluster>/`).
pub const STACK_ROOT: &str = "stack";
/// The directory root of StackTemplates (`stacktemplate/base/`, `stacktemplate/<cluster>/`).
pub const TEMPLATE_ROOT: &str = "stacktemplate";

/// The kind whose files live under the directory root `root`, if it is one of the two.
pub fn kind_of_root(root: &str) -> Option<&'static str> {
    match root {
        STACK_ROOT => Some(STACK),
        TEMPLATE_ROOT => Some(STACK_TEMPLATE),
        _ => None,
    }
}

/// A parameter's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ParameterType {
    /// Text (a number or boolean must be quoted).
    String,
    /// An integer.
    Integer,
    /// `true` or `false`.
    Boolean,
    /// A list of objects (mappings), e.g. one per agent; `forEach` projects one resource per item.
    List,
}

/// The type of one field of a list parameter's items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ItemFieldType {
    /// Text.
    String,
    /// An integer.
    Integer,
    /// `true` or `false`.
    Boolean,
}

/// One declared parameter of a StackTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParameterDecl {
    /// The type every value must have.
    #[serde(rename = "type")]
    pub ty: ParameterType,
    /// The value when a Stack does not supply one; without it a Stack must.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<serde_json::Value>,
    /// For `list`: the fields every item has, with their types (each required, no others
    /// allowed). Without it items are any mappings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub items: BTreeMap<String, ItemFieldType>,
    /// What the parameter is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// One resource template of a StackTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateResource {
    /// The kind of the projected resource (`VM`, `LXC`, ...).
    pub kind: String,
    /// The logical name: the projected resource is `<stack>-<name>` (`<stack>-<name>-<item>`
    /// with `forEach`).
    pub name: String,
    /// The projected resource's `spec`, in which `{fromParameter: {name: x}}` (and, with
    /// `forEach`, `{fromItem: {pointer: /field}}`) stand for values.
    pub spec: serde_json::Value,
    /// Logical names of the template's resources this one depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// `{fromParameter: {name: <list parameter>}}`: one resource per item of the list, named
    /// after the item's `name` field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub for_each: Option<serde_json::Value>,
}

/// `spec` of a StackTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackTemplateSpec {
    /// The parameters a Stack supplies, by name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, ParameterDecl>,
    /// The resources a Stack projects.
    pub resources: Vec<TemplateResource>,
}

/// `spec` of a Stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StackSpec {
    /// The `metadata.name` of the StackTemplate, listed by the same cluster.
    pub template: String,
    /// A value for every parameter the template declares without a default, and no others.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, serde_json::Value>,
    /// Logical names of the template's resources to project (default: all of them); the set
    /// must hold every resource a chosen one depends on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
}

/// A decoded Stack or StackTemplate file.
#[derive(Debug, Clone)]
pub struct StackDocument {
    /// [`STACK`] or [`STACK_TEMPLATE`].
    pub kind: &'static str,
    /// `metadata`.
    pub metadata: Metadata,
    /// The file.
    pub file: Arc<SourceFile>,
    /// The whole document, kept for projection (values are taken with their spans).
    pub(crate) doc: Node,
    /// The document as JSON (YAML 1.2 core schema typing), for the desired plane.
    pub json: serde_json::Value,
}

impl StackDocument {
    /// The name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }
}

/// A Stack projected in one cluster: what the desired plane records.
#[derive(Debug, Clone)]
pub struct StackInstance {
    /// The Stack.
    pub stack: Arc<StackDocument>,
    /// Its template.
    pub template: Arc<StackDocument>,
    /// The resources it projected, in projection order.
    pub resources: Vec<ResourceKey>,
}
