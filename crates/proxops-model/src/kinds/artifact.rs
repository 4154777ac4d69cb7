//! `kind: ISO`, `kind: CTTemplate` and `kind: DiskImage`: files downloaded onto PVE storage
//! (SPEC.md section 8.5). They have no vmid; PVE identifies them by (node, storage, filename).
//! Their checks and kind definitions; the spec types are defined in `artifact_spec` (below
//! `Spec`) and re-exported here.

pub use super::artifact_spec::{ArtifactClass, ArtifactSpec, Checksum, ChecksumAlgorithm};
use super::common::{self, check_node};
use crate::kind::context::SpecContext;
use crate::kind::def::KindDef;
use crate::kind::terms::{
    Identity, Placement, PlacementView, Plane, Reference, ReferenceField, ReferenceView, StorageUse,
};
use crate::manifest::spec::Spec;
use std::borrow::Cow;

/// The definitions of the three artifact kinds.
pub struct ArtifactKind {
    class: ArtifactClass,
}

impl ArtifactKind {
    /// `kind: ISO`.
    pub const ISO: ArtifactKind = ArtifactKind {
        class: ArtifactClass::Iso,
    };
    /// `kind: CTTemplate`.
    pub const CT_TEMPLATE: ArtifactKind = ArtifactKind {
        class: ArtifactClass::CtTemplate,
    };
    /// `kind: DiskImage`.
    pub const DISK_IMAGE: ArtifactKind = ArtifactKind {
        class: ArtifactClass::DiskImage,
    };
}

fn validate(spec: &ArtifactSpec, class: ArtifactClass, cx: &SpecContext<'_>) {
    if spec.nodes.is_empty() && spec.node.is_none() {
        cx.report_missing(
            &path!["nodes"],
            "an artifact needs at least one node in `nodes`",
        );
    }
    if !spec.nodes.is_empty() && spec.node.is_some() {
        cx.invalid(
            &path!["node"],
            "set either `nodes` or the older `node`, not both",
            None,
        );
    }
    for (i, node) in spec.nodes.iter().enumerate() {
        check_node(cx, node, &path!["nodes", i]);
    }
    if let Some(node) = &spec.node {
        check_node(cx, node, &path!["node"]);
    }
    common::check_storage_id(cx, &spec.storage, &path!["storage"]);
    let name_ok = spec
        .filename
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphanumeric())
        && spec
            .filename
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    // pve-storage `PVE/Storage.pm`: `$ISO_EXT_RE_0` and `$VZTMPL_EXT_RE_1` match any case,
    // `$IMPORT_EXT_RE_1` only lower case (`disk.QCOW2` is not import content).
    let compared = match class {
        ArtifactClass::DiskImage => spec.filename.clone(),
        _ => spec.filename.to_ascii_lowercase(),
    };
    if !name_ok {
        cx.invalid(
            &path!["filename"],
            format!("`{}` is not a plain file name", spec.filename),
            Some("letters, digits, `.`, `_` and `-`, starting with a letter or digit".into()),
        );
    } else if class == ArtifactClass::DiskImage && compared.to_ascii_lowercase().ends_with(".ova") {
        cx.invalid(
            &path!["filename"],
            format!(
                "`{}` is a whole OVA appliance: PVE cannot import it as one disk",
                spec.filename
            ),
            Some("use the appliance's disk image (.qcow2, .raw or .vmdk) as the DiskImage".into()),
        );
    } else if !class.extensions().iter().any(|ext| compared.ends_with(ext)) {
        cx.invalid(
            &path!["filename"],
            format!(
                "`{}` does not have an extension PVE accepts for `{}` content",
                spec.filename,
                class.content()
            ),
            Some(format!("use one of: {}", class.extensions().join(", "))),
        );
    }
    let url_ok = ["https://", "http://"].iter().any(|scheme| {
        spec.url
            .strip_prefix(scheme)
            .is_some_and(|rest| rest.split('/').next().is_some_and(|host| !host.is_empty()))
    });
    if !url_ok || spec.url.contains(char::is_whitespace) {
        cx.invalid(
            &path!["url"],
            format!("`{}` is not an http(s) URL", spec.url),
            None,
        );
    }
    if let Some(sum) = &spec.checksum {
        let value = sum.value.trim();
        if value.len() != sum.algorithm.hex_len() || !value.bytes().all(|b| b.is_ascii_hexdigit()) {
            cx.invalid(
                &path!["checksum", "value"],
                format!("not a {}-digit hexadecimal digest", sum.algorithm.hex_len()),
                None,
            );
        }
    }
}

impl KindDef for ArtifactKind {
    fn name(&self) -> &'static str {
        match self.class {
            ArtifactClass::Iso => "ISO",
            ArtifactClass::CtTemplate => "CTTemplate",
            ArtifactClass::DiskImage => "DiskImage",
        }
    }

    fn aliases(&self) -> &'static [&'static str] {
        match self.class {
            ArtifactClass::Iso => &[],
            ArtifactClass::CtTemplate => &["CTT"],
            ArtifactClass::DiskImage => &["DISK"],
        }
    }

    fn root(&self) -> &'static str {
        match self.class {
            ArtifactClass::Iso => "iso",
            ArtifactClass::CtTemplate => "ctt",
            ArtifactClass::DiskImage => "diskimage",
        }
    }

    fn identity(&self) -> Identity {
        Identity::StorageArtifact {
            content: self.class.content(),
        }
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired, Plane::Observed]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        &[]
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec: ArtifactSpec = cx.decode()?;
        validate(&spec, self.class, cx);
        Some(Spec::Artifact(spec))
    }

    fn placement(&self, spec: &Spec) -> Placement {
        let Spec::Artifact(s) = spec else {
            return Placement::default();
        };
        let nodes = if s.nodes.is_empty() {
            s.node
                .iter()
                .map(|n| (n.clone(), path!["node"].to_vec()))
                .collect()
        } else {
            s.nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.clone(), path!["nodes", i].to_vec()))
                .collect()
        };
        Placement { nodes, vmid: None }
    }

    fn references(&self, _spec: &Spec) -> Vec<Reference> {
        Vec::new()
    }

    fn storages(&self, spec: &Spec) -> Vec<StorageUse> {
        let (Spec::Artifact(s), Identity::StorageArtifact { content }) = (spec, self.identity())
        else {
            return Vec::new();
        };
        vec![StorageUse {
            storage: s.storage.clone(),
            content,
        }]
    }

    fn placement_view<'s>(&self, spec: &'s Spec) -> PlacementView<'s> {
        let Spec::Artifact(s) = spec else {
            return PlacementView::default();
        };
        let nodes = if s.nodes.is_empty() {
            s.node.iter().map(|n| Cow::Borrowed(n.as_str())).collect()
        } else {
            s.nodes.iter().map(|n| Cow::Borrowed(n.as_str())).collect()
        };
        PlacementView { nodes, vmid: None }
    }

    fn reference_views<'s>(&self, _spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        Vec::new()
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        generator.subschema_for::<ArtifactSpec>()
    }

    fn artifact_unreachable(
        &self,
        spec: &Spec,
        name: &str,
        pointer: &crate::pointer::Pointer,
    ) -> Option<crate::kind::terms::Unreachable> {
        let Spec::Artifact(file) = spec else {
            return None;
        };
        super::reach::file(file, name, pointer)
    }
}
