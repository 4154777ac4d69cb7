//! A manifest's `metadata`: below the kinds' checks, which read it through
//! [`SpecContext`](crate::kind::SpecContext).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `metadata` of a manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Metadata {
    /// The resource's identity within its kind and cluster: lowercase letters and digits in words
    /// joined by single hyphens, at most 63 characters.
    pub name: String,
    /// Unused; accepted for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Free-form labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Annotations; `proxops/depends-on` adds dependencies.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}
