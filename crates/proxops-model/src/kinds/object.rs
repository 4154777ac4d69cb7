//! The kinds of a cluster's own objects (issue 32): `Storage`, `Pool`, `BackupJob`,
//! `ResourceMapping`, `User`, `Group`, `Role`, `Acl`, `ApiToken`, the firewall and SDN. Their checks and [`KindDef`]s; the spec
//! types are in `object_spec` (below `Spec`) and re-exported here.
//!
//! They have no node and no vmid: PVE identifies each by an id of its own (a storage id, a pool
//! id, a job id, a `name@realm`), which is `metadata.name` unless the spec sets `id` (or
//! `userid`). Other resources reach them through inferred references: a guest's disk storage
//! and passthrough mapping, a backup job's storage and pool, a user's groups, an ACL's roles and
//! principals. An inferred reference orders the two when both are declared and is nothing when
//! the target is not (a storage PVE ships with, a group made by hand).

pub use super::object_spec::{
    AclSpec, ApiTokenSpec, BackupJobSpec, BackupMode, GroupSpec, MappingSpec, MappingType,
    ObjectSpec, PoolSpec, Retention, RoleSpec, StorageSpec, StorageType, UserSpec,
};
use crate::kind::context::SpecContext;
use crate::kind::def::KindDef;
use crate::kind::terms::{
    Identity, Placement, Plane, Reference, ReferenceField, ReferenceSource, ReferenceView,
};
use crate::manifest::spec::Spec;
use crate::yaml::PathSeg;
use std::borrow::Cow;

/// One of the cluster-object kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ObjectClass {
    /// `Storage`.
    Storage,
    /// `Pool`.
    Pool,
    /// `BackupJob`.
    BackupJob,
    /// `ResourceMapping`.
    Mapping,
    /// `User`.
    User,
    /// `Group`.
    Group,
    /// `Role`.
    Role,
    /// `Acl`.
    Acl,
    /// `Firewall`.
    Firewall,
    /// `SdnZone`.
    SdnZone,
    /// `SdnVnet`.
    SdnVnet,
    /// `SdnSubnet`.
    SdnSubnet,
    /// `ApiToken`. Last: prunes run in reverse class order, a token before its user.
    ApiToken,
}

impl ObjectClass {
    /// Every class, in the order their objects are created.
    pub const ALL: [ObjectClass; 13] = [
        ObjectClass::Storage,
        ObjectClass::SdnZone,
        ObjectClass::SdnVnet,
        ObjectClass::SdnSubnet,
        ObjectClass::Pool,
        ObjectClass::Mapping,
        ObjectClass::Group,
        ObjectClass::Role,
        ObjectClass::User,
        ObjectClass::ApiToken,
        ObjectClass::Acl,
        ObjectClass::Firewall,
        ObjectClass::BackupJob,
    ];

    /// The kind's canonical name.
    pub fn kind(self) -> &'static str {
        match self {
            ObjectClass::Storage => "Storage",
            ObjectClass::Pool => "Pool",
            ObjectClass::BackupJob => "BackupJob",
            ObjectClass::Mapping => "ResourceMapping",
            ObjectClass::User => "User",
            ObjectClass::Group => "Group",
            ObjectClass::Role => "Role",
            ObjectClass::Acl => "Acl",
            ObjectClass::Firewall => "Firewall",
            ObjectClass::SdnZone => "SdnZone",
            ObjectClass::SdnVnet => "SdnVnet",
            ObjectClass::SdnSubnet => "SdnSubnet",
            ObjectClass::ApiToken => "ApiToken",
        }
    }

    /// Whether its objects are SDN configuration: pending until `PUT /cluster/sdn`.
    pub fn is_sdn(self) -> bool {
        matches!(
            self,
            ObjectClass::SdnZone | ObjectClass::SdnVnet | ObjectClass::SdnSubnet
        )
    }

    /// The class of a kind name.
    pub fn of_kind(kind: &str) -> Option<ObjectClass> {
        ObjectClass::ALL.into_iter().find(|c| c.kind() == kind)
    }

    fn root(self) -> &'static str {
        match self {
            ObjectClass::Storage => "storage",
            ObjectClass::Pool => "pool",
            ObjectClass::BackupJob => "backupjob",
            ObjectClass::Mapping => "mapping",
            ObjectClass::User => "user",
            ObjectClass::Group => "group",
            ObjectClass::Role => "role",
            ObjectClass::Acl => "acl",
            ObjectClass::Firewall => "firewall",
            ObjectClass::SdnZone => "sdnzone",
            ObjectClass::SdnVnet => "sdnvnet",
            ObjectClass::SdnSubnet => "sdnsubnet",
            ObjectClass::ApiToken => "apitoken",
        }
    }

    fn aliases(self) -> &'static [&'static str] {
        match self {
            ObjectClass::BackupJob => &["VzdumpJob"],
            ObjectClass::Mapping => &["Mapping", "PciMapping", "UsbMapping"],
            ObjectClass::Acl => &["ACL", "Permission"],
            ObjectClass::ApiToken => &["APIToken"],
            _ => &[],
        }
    }
}

/// The definition of one cluster-object kind.
pub struct ObjectKind(pub ObjectClass);

impl ObjectKind {
    /// Every cluster-object kind.
    pub fn all() -> impl Iterator<Item = ObjectKind> {
        ObjectClass::ALL.into_iter().map(ObjectKind)
    }
}

/// The PVE id of a cluster object: the spec's `id` (a user's `userid`) or `metadata.name`;
/// `None` for an ACL, whose entries are identified by path, principal and role, and for the
/// firewall, whose parts are.
pub fn object_id<'s>(spec: &'s ObjectSpec, name: &'s str) -> Option<&'s str> {
    match spec {
        ObjectSpec::Acl(_) | ObjectSpec::Firewall(_) => None,
        // Found by its network within its VNet's list.
        ObjectSpec::SdnSubnet(s) => Some(&s.subnet),
        s => Some(s.explicit_id().unwrap_or(name)),
    }
}

fn view<'s>(field: &'static str, kind: &'static str, name: &'s str) -> ReferenceView<'s> {
    ReferenceView {
        field,
        target_kind: Cow::Borrowed(kind),
        target_name: Cow::Borrowed(name),
        same_node: false,
        source: ReferenceSource::Inferred,
    }
}

/// The inferred references of a cluster object, each with its spec path.
fn each_reference<'s>(
    spec: &'s ObjectSpec,
    mut visit: impl FnMut(ReferenceView<'s>, Vec<PathSeg>),
) {
    match spec {
        ObjectSpec::Storage(st) => {
            if let Some(pool) = &st.pool {
                visit(view("pool", "Pool", pool), path!["pool"].to_vec());
            }
        }
        ObjectSpec::BackupJob(j) => {
            visit(
                view("storage", "Storage", &j.storage),
                path!["storage"].to_vec(),
            );
            if let Some(pool) = &j.pool {
                visit(view("pool", "Pool", pool), path!["pool"].to_vec());
            }
        }
        ObjectSpec::SdnVnet(v) => {
            visit(view("zone", "SdnZone", &v.zone), path!["zone"].to_vec());
        }
        ObjectSpec::SdnSubnet(s) => {
            visit(view("vnet", "SdnVnet", &s.vnet), path!["vnet"].to_vec());
        }
        ObjectSpec::User(u) => {
            for (i, g) in u.groups.iter().enumerate() {
                visit(view("groups[]", "Group", g), path!["groups", i].to_vec());
            }
        }
        ObjectSpec::Acl(a) => {
            for (i, r) in a.roles.iter().enumerate() {
                visit(view("roles[]", "Role", r), path!["roles", i].to_vec());
            }
            for (i, u) in a.users.iter().enumerate() {
                visit(view("users[]", "User", u), path!["users", i].to_vec());
            }
            for (i, g) in a.groups.iter().enumerate() {
                visit(view("groups[]", "Group", g), path!["groups", i].to_vec());
            }
            for (i, t) in a.tokens.iter().enumerate() {
                visit(view("tokens[]", "ApiToken", t), path!["tokens", i].to_vec());
            }
        }
        ObjectSpec::ApiToken(t) => {
            visit(view("userid", "User", &t.userid), path!["userid"].to_vec());
        }
        _ => {}
    }
}

impl KindDef for ObjectKind {
    fn name(&self) -> &'static str {
        self.0.kind()
    }

    fn aliases(&self) -> &'static [&'static str] {
        self.0.aliases()
    }

    fn root(&self) -> &'static str {
        self.0.root()
    }

    fn identity(&self) -> Identity {
        Identity::ClusterObject
    }

    fn planes(&self) -> &'static [Plane] {
        &[Plane::Desired, Plane::Observed]
    }

    fn reference_fields(&self) -> &'static [ReferenceField] {
        match self.0 {
            ObjectClass::Storage => &[ReferenceField {
                field: "pool",
                target: "Pool",
            }],
            ObjectClass::BackupJob => &[
                ReferenceField {
                    field: "storage",
                    target: "Storage",
                },
                ReferenceField {
                    field: "pool",
                    target: "Pool",
                },
            ],
            ObjectClass::SdnVnet => &[ReferenceField {
                field: "zone",
                target: "SdnZone",
            }],
            ObjectClass::SdnSubnet => &[ReferenceField {
                field: "vnet",
                target: "SdnVnet",
            }],
            ObjectClass::User => &[ReferenceField {
                field: "groups[]",
                target: "Group",
            }],
            ObjectClass::Acl => &[
                ReferenceField {
                    field: "roles[]",
                    target: "Role",
                },
                ReferenceField {
                    field: "users[]",
                    target: "User",
                },
                ReferenceField {
                    field: "groups[]",
                    target: "Group",
                },
                ReferenceField {
                    field: "tokens[]",
                    target: "ApiToken",
                },
            ],
            ObjectClass::ApiToken => &[ReferenceField {
                field: "userid",
                target: "User",
            }],
            _ => &[],
        }
    }

    fn decode(&self, cx: &SpecContext<'_>) -> Option<Spec> {
        let spec = match self.0 {
            ObjectClass::Storage => ObjectSpec::Storage(cx.decode()?),
            ObjectClass::Pool => ObjectSpec::Pool(cx.decode()?),
            ObjectClass::BackupJob => ObjectSpec::BackupJob(cx.decode()?),
            ObjectClass::Mapping => ObjectSpec::Mapping(cx.decode()?),
            ObjectClass::User => ObjectSpec::User(cx.decode()?),
            ObjectClass::Group => ObjectSpec::Group(cx.decode()?),
            ObjectClass::Role => ObjectSpec::Role(cx.decode()?),
            ObjectClass::Acl => ObjectSpec::Acl(cx.decode()?),
            ObjectClass::Firewall => ObjectSpec::Firewall(cx.decode()?),
            ObjectClass::SdnZone => ObjectSpec::SdnZone(cx.decode()?),
            ObjectClass::SdnVnet => ObjectSpec::SdnVnet(cx.decode()?),
            ObjectClass::SdnSubnet => ObjectSpec::SdnSubnet(cx.decode()?),
            ObjectClass::ApiToken => {
                let mut t: ApiTokenSpec = cx.decode()?;
                t.full_tokenid = t.full_tokenid();
                ObjectSpec::ApiToken(t)
            }
        };
        super::object_checks::check(cx, &spec);
        Some(Spec::Object(spec))
    }

    fn placement(&self, _spec: &Spec) -> Placement {
        Placement::default()
    }

    fn references(&self, spec: &Spec) -> Vec<Reference> {
        let Spec::Object(s) = spec else {
            return Vec::new();
        };
        let mut out = Vec::new();
        each_reference(s, |v, at| {
            let mut r = Reference::structured(v.field, &v.target_kind, &v.target_name, &at, false);
            r.source = ReferenceSource::Inferred;
            out.push(r);
        });
        out
    }

    fn reference_views<'s>(&self, spec: &'s Spec) -> Vec<ReferenceView<'s>> {
        let Spec::Object(s) = spec else {
            return Vec::new();
        };
        let mut out = Vec::new();
        each_reference(s, |v, _| out.push(v));
        out
    }

    fn pve_id<'s>(&self, spec: &'s Spec) -> Option<&'s str> {
        match spec {
            // Reached by `<userid>!<token>` (an ACL's `tokens`), unique in the cluster.
            Spec::Object(ObjectSpec::ApiToken(t)) => Some(&t.full_tokenid),
            Spec::Object(s) => s.explicit_id(),
            _ => None,
        }
    }

    fn spec_schema(&self, generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        match self.0 {
            ObjectClass::Storage => generator.subschema_for::<StorageSpec>(),
            ObjectClass::Pool => generator.subschema_for::<PoolSpec>(),
            ObjectClass::BackupJob => generator.subschema_for::<BackupJobSpec>(),
            ObjectClass::Mapping => generator.subschema_for::<MappingSpec>(),
            ObjectClass::User => generator.subschema_for::<UserSpec>(),
            ObjectClass::Group => generator.subschema_for::<GroupSpec>(),
            ObjectClass::Role => generator.subschema_for::<RoleSpec>(),
            ObjectClass::Acl => generator.subschema_for::<AclSpec>(),
            ObjectClass::Firewall => {
                generator.subschema_for::<super::firewall_spec::FirewallSpec>()
            }
            ObjectClass::SdnZone => generator.subschema_for::<super::object_spec::SdnZoneSpec>(),
            ObjectClass::SdnVnet => generator.subschema_for::<super::object_spec::SdnVnetSpec>(),
            ObjectClass::SdnSubnet => {
                generator.subschema_for::<super::object_spec::SdnSubnetSpec>()
            }
            ObjectClass::ApiToken => generator.subschema_for::<ApiTokenSpec>(),
        }
    }
}
