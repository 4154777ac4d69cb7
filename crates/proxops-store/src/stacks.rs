//! Stacks in the desired plane (`planes-spec.md` 4.9): each Stack of the cluster at
//! `stacks/<name>.yaml` and its StackTemplate at `stack-templates/<name>.yaml`, both with a UID
//! minted at first publication; the resources a Stack projected carry an owner reference to
//! the Stack's UID. A Stack removed from the source leaves the plane with its projection: the
//! projected resources become deletion intents like any other removed resource, and are
//! pruned by the normal path.

use crate::documents::{API_VERSION, DesiredMetadata, OwnerReference, canonical_bytes};
use crate::error::{Result, StoreError};
use crate::refs::check_segment;
use proxops_model::ResourceKey;
use proxops_model::stack::{STACK, STACK_TEMPLATE, StackDocument, StackInstance};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Directory of Stacks in the desired plane.
pub const STACKS_DIR: &str = "stacks";
/// Directory of StackTemplates in the desired plane.
pub const TEMPLATES_DIR: &str = "stack-templates";

/// `stacks/<name>.yaml`.
pub fn stack_path(name: &str) -> Result<String> {
    check_segment(name, "Stack name")?;
    Ok(format!("{STACKS_DIR}/{name}.yaml"))
}

/// `stack-templates/<name>.yaml`.
pub fn template_path(name: &str) -> Result<String> {
    check_segment(name, "StackTemplate name")?;
    Ok(format!("{TEMPLATES_DIR}/{name}.yaml"))
}

/// The name a `<dir>/<name>.yaml` path names.
pub fn name_of_path<'p>(dir: &str, path: &'p str) -> Option<&'p str> {
    let name = path
        .strip_prefix(dir)?
        .strip_prefix('/')?
        .strip_suffix(".yaml")?;
    (!name.contains('/')).then_some(name)
}

/// The Stack's binding to the template it projected from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TemplateRef {
    /// The StackTemplate's name.
    pub name: String,
    /// Its UID.
    pub uid: String,
    /// [`content_digest`] of its spec.
    pub content_digest: String,
}

/// A desired Stack (`stacks/<name>.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `Stack`.
    pub kind: String,
    /// Name, UID, labels, annotations.
    pub metadata: DesiredMetadata,
    /// The Stack's spec as written (template, parameters, subset).
    pub spec: Value,
    /// The template it projected from.
    pub template_ref: TemplateRef,
    /// The resources it projected, as `Kind/name`, in projection order.
    pub projection: Vec<String>,
}

/// A desired StackTemplate (`stack-templates/<name>.yaml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StackTemplateDoc {
    /// `proxops/v1alpha1`.
    pub api_version: String,
    /// `StackTemplate`.
    pub kind: String,
    /// Name, UID, labels, annotations.
    pub metadata: DesiredMetadata,
    /// The template's spec as written.
    pub spec: Value,
    /// [`content_digest`] of `spec`.
    pub content_digest: String,
}

/// `sha256:<hex>` of a value's canonical bytes: what a Stack's `templateRef` pins.
pub fn content_digest(value: &Value) -> Result<String> {
    let digest = Sha256::digest(canonical_bytes(value)?);
    Ok(format!("sha256:{}", hex::encode(digest)))
}

fn spec_of(doc: &StackDocument) -> Value {
    doc.json.get("spec").cloned().unwrap_or(Value::Null)
}

fn metadata(doc: &StackDocument, uid: String) -> DesiredMetadata {
    DesiredMetadata {
        name: doc.name().to_owned(),
        uid,
        labels: doc.metadata.labels.clone(),
        annotations: doc.metadata.annotations.clone(),
        owner_references: Vec::new(),
    }
}

/// The desired StackTemplate of `template` with `uid`.
pub fn template_doc(template: &StackDocument, uid: String) -> Result<StackTemplateDoc> {
    let spec = spec_of(template);
    Ok(StackTemplateDoc {
        api_version: API_VERSION.to_owned(),
        kind: STACK_TEMPLATE.to_owned(),
        metadata: metadata(template, uid),
        content_digest: content_digest(&spec)?,
        spec,
    })
}

/// The desired Stack of `instance` with `uid`, bound to its template's document.
pub fn stack_doc(instance: &StackInstance, uid: String, template: &StackTemplateDoc) -> StackDoc {
    StackDoc {
        api_version: API_VERSION.to_owned(),
        kind: STACK.to_owned(),
        metadata: metadata(&instance.stack, uid),
        spec: spec_of(&instance.stack),
        template_ref: TemplateRef {
            name: template.metadata.name.clone(),
            uid: template.metadata.uid.clone(),
            content_digest: template.content_digest.clone(),
        },
        projection: instance.resources.iter().map(ToString::to_string).collect(),
    }
}

/// The owner reference a resource projected by `stack` carries.
pub fn owner_reference(stack: &StackDoc) -> OwnerReference {
    OwnerReference {
        api_version: API_VERSION.to_owned(),
        kind: STACK.to_owned(),
        name: stack.metadata.name.clone(),
        uid: stack.metadata.uid.clone(),
    }
}

/// Checks the plane's ownership graph: every owner reference names a Stack of the plane with
/// that UID, every Stack's template is in the plane with the pinned UID and digest, and every
/// resource a Stack lists names it as owner.
pub(crate) fn check_graph<'a>(
    refname: &str,
    stacks: &std::collections::BTreeMap<String, crate::desired::plane::StackEntry>,
    templates: &std::collections::BTreeMap<String, crate::desired::plane::TemplateEntry>,
    resources: impl Iterator<Item = (&'a ResourceKey, &'a crate::desired::plane::DesiredEntry)>,
) -> Result<()> {
    let corrupt = |path: &str, reason: String| StoreError::Corrupt {
        plane: refname.to_owned(),
        path: path.to_owned(),
        reason,
    };
    for stack in stacks.values() {
        let pin = &stack.doc.template_ref;
        let bound = templates.get(&pin.name).is_some_and(|t| {
            t.doc.metadata.uid == pin.uid && t.doc.content_digest == pin.content_digest
        });
        if !bound {
            return Err(corrupt(
                &stack.path,
                format!("its template `{}` is not in the plane as pinned", pin.name),
            ));
        }
    }
    for (key, entry) in resources {
        for owner in &entry.doc.metadata.owner_references {
            let owned = owner.kind == STACK
                && stacks.get(&owner.name).is_some_and(|s| {
                    s.doc.metadata.uid == owner.uid && s.doc.projection.contains(&key.to_string())
                });
            if !owned {
                return Err(corrupt(
                    &entry.path,
                    format!(
                        "owner {}/{} ({}) is not in the plane",
                        owner.kind, owner.name, owner.uid
                    ),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::desired::{DesiredEntry, StackEntry, TemplateEntry};
    use crate::documents::ResourceDoc;
    use crate::id::ObjectId;
    use std::collections::BTreeMap;

    fn meta(name: &str, uid: &str, owners: Vec<OwnerReference>) -> DesiredMetadata {
        DesiredMetadata {
            name: name.to_owned(),
            uid: uid.to_owned(),
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            owner_references: owners,
        }
    }

    type Plane = (
        BTreeMap<String, StackEntry>,
        BTreeMap<String, TemplateEntry>,
        BTreeMap<ResourceKey, DesiredEntry>,
    );

    /// A plane with template `k3s`, Stack `k3s` projecting `VM/k3s-server`, and that VM owned
    /// by the Stack.
    fn plane() -> Plane {
        let blob = ObjectId::from_bytes([1; 20]);
        let spec = serde_json::json!({"resources": []});
        let template = StackTemplateDoc {
            api_version: API_VERSION.to_owned(),
            kind: STACK_TEMPLATE.to_owned(),
            metadata: meta("k3s", "u1-t", Vec::new()),
            content_digest: content_digest(&spec).unwrap(),
            spec,
        };
        let stack = StackDoc {
            api_version: API_VERSION.to_owned(),
            kind: STACK.to_owned(),
            metadata: meta("k3s", "u1-s", Vec::new()),
            spec: serde_json::json!({"template": "k3s"}),
            template_ref: TemplateRef {
                name: "k3s".to_owned(),
                uid: "u1-t".to_owned(),
                content_digest: template.content_digest.clone(),
            },
            projection: vec!["VM/k3s-server".to_owned()],
        };
        let key = ResourceKey {
            kind: "VM".to_owned(),
            name: "k3s-server".to_owned(),
        };
        let doc = ResourceDoc {
            api_version: API_VERSION.to_owned(),
            kind: "VM".to_owned(),
            metadata: meta("k3s-server", "u1-r", vec![owner_reference(&stack)]),
            spec: serde_json::json!({}),
            resolved_inputs: None,
        };
        let path = |p: &str| p.to_owned();
        (
            [(
                "k3s".to_owned(),
                StackEntry {
                    path: path("stacks/k3s.yaml"),
                    blob,
                    doc: stack,
                },
            )]
            .into(),
            [(
                "k3s".to_owned(),
                TemplateEntry {
                    path: path("stack-templates/k3s.yaml"),
                    blob,
                    doc: template,
                },
            )]
            .into(),
            [(
                key,
                DesiredEntry {
                    path: path("resources/VM/k3s-server.yaml"),
                    blob,
                    doc,
                    materialized: None,
                },
            )]
            .into(),
        )
    }

    fn check(p: &Plane) -> Result<()> {
        check_graph("proxops/desired/x", &p.0, &p.1, p.2.iter())
    }

    #[test]
    fn owner_references_and_template_bindings_must_resolve() {
        let good = plane();
        assert!(check(&good).is_ok());
        // The owner's UID differs: another incarnation of the Stack.
        let mut p = plane();
        p.0.get_mut("k3s").unwrap().doc.metadata.uid = "u1-other".to_owned();
        assert!(
            matches!(check(&p), Err(StoreError::Corrupt { reason, .. }) if reason.contains("owner Stack/k3s"))
        );
        // The owner is gone.
        let mut p = plane();
        p.0.clear();
        assert!(check(&p).is_err());
        // The Stack does not list the resource.
        let mut p = plane();
        p.0.get_mut("k3s").unwrap().doc.projection.clear();
        assert!(check(&p).is_err());
        // The template changed under the Stack's pin.
        let mut p = plane();
        p.1.get_mut("k3s").unwrap().doc.content_digest = "sha256:00".to_owned();
        assert!(
            matches!(check(&p), Err(StoreError::Corrupt { reason, .. }) if reason.contains("template `k3s`"))
        );
    }

    #[test]
    fn paths() {
        assert_eq!(stack_path("k3s").unwrap(), "stacks/k3s.yaml");
        assert_eq!(template_path("k3s").unwrap(), "stack-templates/k3s.yaml");
        assert_eq!(name_of_path(STACKS_DIR, "stacks/k3s.yaml"), Some("k3s"));
        assert_eq!(name_of_path(STACKS_DIR, "stacks/a/k3s.yaml"), None);
        assert_eq!(name_of_path(TEMPLATES_DIR, "stacks/k3s.yaml"), None);
        assert!(stack_path("../x").is_err());
    }
}
