//! The shapes of the generated table: an [`Endpoint`] with its [`Param`]s, a parameter's type
//! ([`Ty`]) and format ([`Fmt`]), the sub-keys of a property string ([`Sub`]), and the
//! endpoint's permission check ([`Permissions`], [`Check`]).

use crate::guest::{max_index, split_indexed};
use crate::{GuestType, PveRelease, Versions};

/// The JSON type of a parameter or property-string key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ty {
    /// `string`
    Str,
    /// `integer`
    Int,
    /// `number`
    Num,
    /// `boolean` (PVE takes `1|0|true|false|yes|no|on|off`, stores `1`/`0`)
    Bool,
    /// `array` (a form sends it as repeated keys)
    Array,
}

impl Ty {
    /// The schema's name of the type.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Str => "string",
            Ty::Int => "integer",
            Ty::Num => "number",
            Ty::Bool => "boolean",
            Ty::Array => "array",
        }
    }
}

/// A parameter's `format`.
#[derive(Debug, Clone, Copy)]
pub enum Fmt {
    /// No format.
    None,
    /// A named format of PVE's code (`pve-node`, `pve-volume-id`, `pve-configid-list`, ...).
    Named(&'static str),
    /// A property string (`key=value,...`) whose sub-keys the schema lists.
    Prop(&'static [Sub]),
    /// A named property-string format, its sub-keys read from the schema's `typetext` (the
    /// schema lists no sub-keys for these; PVE's code defines them).
    NamedProp(&'static str, &'static [Sub]),
}

impl Fmt {
    /// The sub-keys of a property string.
    pub fn sub_keys(self) -> Option<&'static [Sub]> {
        match self {
            Fmt::Prop(s) | Fmt::NamedProp(_, s) => Some(s),
            Fmt::None | Fmt::Named(_) => None,
        }
    }

    /// The name of a named format (property string or not).
    pub fn name(self) -> Option<&'static str> {
        match self {
            Fmt::Named(n) | Fmt::NamedProp(n, _) => Some(n),
            Fmt::None | Fmt::Prop(_) => None,
        }
    }
}

/// One key of a property-string format.
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// Key name.
    pub name: &'static str,
    /// Value type.
    pub ty: Ty,
    /// Whether the key may be left out.
    pub optional: bool,
    /// Whether a bare value (no `key=`) belongs to this key.
    pub default_key: bool,
    /// Allowed values, empty when any.
    pub enums: &'static [&'static str],
    /// Named format of the value (`disk-size`, `pve-volume-id`, ...).
    pub format: Option<&'static str>,
    /// Inclusive minimum for a number (`memory`'s `current` is at least 16).
    pub min: Option<f64>,
    /// Inclusive maximum for a number.
    pub max: Option<f64>,
    /// Maximum length.
    pub max_len: Option<usize>,
    /// The pattern the whole value must match (Perl syntax, as the schema spells it).
    pub pattern: Option<&'static str>,
    /// For an alias key: the key it stands for (`volume` for `file`).
    pub alias: Option<&'static str>,
    /// For a key alias (`virtio=MAC`): the key that receives the alias's own name.
    pub key_alias: Option<&'static str>,
}

impl Sub {
    /// A required string key without rules (the generated table's base).
    pub const DEFAULT: Sub = Sub {
        name: "",
        ty: Ty::Str,
        optional: false,
        default_key: false,
        enums: &[],
        format: None,
        min: None,
        max: None,
        max_len: None,
        pattern: None,
        alias: None,
        key_alias: None,
    };

    /// An alias entry (`volume` for `file`, `virtio` for `macaddr` with `model`).
    pub const fn alias(
        name: &'static str,
        alias: &'static str,
        key_alias: Option<&'static str>,
    ) -> Sub {
        Sub {
            name,
            optional: true,
            alias: Some(alias),
            key_alias,
            ..Sub::DEFAULT
        }
    }
}

/// One parameter of an endpoint, or one guest config key.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name; an indexed family is spelled `net[n]`.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// Whether it may be left out.
    pub optional: bool,
    /// Allowed values, empty when any.
    pub enums: &'static [&'static str],
    /// Format.
    pub format: Fmt,
    /// Inclusive minimum for numbers.
    pub min: Option<f64>,
    /// Inclusive maximum for numbers.
    pub max: Option<f64>,
    /// Maximum string length.
    pub max_len: Option<usize>,
    /// The pattern the whole value must match (Perl syntax, as the schema spells it).
    pub pattern: Option<&'static str>,
    /// Another parameter that must be given with this one.
    pub requires: Option<&'static str>,
    /// For an array: the format of each item (a mapping's `map` entries are property strings).
    pub items: Fmt,
    /// The releases whose schema defines the parameter so.
    pub versions: Versions,
}

impl Param {
    /// A required string parameter of every release without rules (the generated table's base).
    pub const DEFAULT: Param = Param {
        name: "",
        ty: Ty::Str,
        optional: false,
        enums: &[],
        format: Fmt::None,
        min: None,
        max: None,
        max_len: None,
        pattern: None,
        requires: None,
        items: Fmt::None,
        versions: Versions::ALL,
    };

    /// Whether the parameter is an indexed family (`net[n]`).
    pub fn is_family(&self) -> bool {
        self.name.ends_with("[n]")
    }
}

/// An endpoint's `permissions` as the schema states them, without the `description` prose.
///
/// How PVE's API server applies them (pve-access-control `PVE/RPCEnvironment.pm`,
/// `check_api2_permissions`): `user: world` lets anyone in, even unauthenticated; `root@pam`
/// passes every check; no `permissions` at all (or one with neither `user` nor `check`) lets
/// only `root@pam` in; `user: all` lets every authenticated user in (the handler checks by
/// itself) and then a `check` beside it is not run; otherwise the `check` decides.
/// [`crate::required`] resolves this for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permissions {
    /// `user`: `all` or `world`.
    pub user: Option<PermUser>,
    /// `check`.
    pub check: Option<Check>,
    /// The releases whose schema states it so.
    pub versions: Versions,
}

impl Permissions {
    /// No `user` and no `check`: only `root@pam` (the generated table's base).
    pub const DEFAULT: Permissions = Permissions {
        user: None,
        check: None,
        versions: Versions::ALL,
    };
}

/// The `user` of a method's `permissions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PermUser {
    /// `all`: any authenticated user; the handler checks what it needs itself.
    All,
    /// `world`: anyone, no login needed.
    World,
}

/// A permission check as PVE's schema writes it (`check` of a method's `permissions`), one
/// variant per form PVE's `exec_api2_perm_check` knows. Paths keep their `{param}` placeholders
/// as PVE writes them (`/vms/{vmid}`, `/pool/{poolid}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `["perm", path, [privs], options...]`: the privileges on the ACL path, all of them, or any
    /// one with `"any", 1`; with `"require_param", p` the check fails when the request lacks `p`.
    Perm {
        /// ACL path template.
        path: &'static str,
        /// Privilege names.
        privs: &'static [&'static str],
        /// `any`: one of `privs` is enough.
        any: bool,
        /// `require_param`: the parameter the request must carry.
        require_param: Option<&'static str>,
    },
    /// `["and", checks...]`: every one.
    And(&'static [Check]),
    /// `["or", checks...]`: at least one.
    Or(&'static [Check]),
    /// `["userid-param", test]`: a test on the request's `userid` parameter.
    UseridParam(UseridParam),
    /// `["userid-group", [privs], options...]`: any of `privs` on `/access/groups`, or on the
    /// groups concerned (the `userid`'s groups; with `groups_param`, the groups of the `groups`
    /// parameter too).
    UseridGroup {
        /// Privilege names (any one is enough).
        privs: &'static [&'static str],
        /// `groups_param`: the `groups` parameter names groups, of a new or an updated user.
        groups_param: Option<GroupsParam>,
    },
    /// `["perm-modify", path]`: the right to change the ACL of the path (`Permissions.Modify`, or
    /// the allocate privilege of the path's kind).
    PermModify(&'static str),
}

/// The test of a `userid-param` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UseridParam {
    /// `self`: the caller is the user the `userid` parameter names.
    SelfUser,
    /// `Realm.AllocateUser`: that privilege on `/access/realm/<realm of userid>`.
    RealmAllocateUser,
}

/// The `groups_param` option of a `userid-group` check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupsParam {
    /// `create`: the user is new (not required to exist).
    Create,
    /// `update`: the user exists.
    Update,
}

/// One endpoint: method, path template under `/api2/json`, and its parameters (path ones
/// included) in every release.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint {
    /// `GET`, `POST`, `PUT` or `DELETE`.
    pub method: &'static str,
    /// Path template such as `/nodes/{node}/qemu/{vmid}/config`.
    pub path: &'static str,
    /// Parameters in name order; a name whose definition differs between releases has one row
    /// per release.
    pub params: &'static [Param],
    /// The releases whose schema has the endpoint.
    pub versions: Versions,
    /// The permission check of each release: one row when the releases agree, else one per
    /// release. Empty only for an endpoint built by hand (not from the table): not known.
    pub permissions: &'static [Permissions],
}

impl Endpoint {
    /// An endpoint of every release with no parameters and no known permission check (the
    /// generated table's base).
    pub const DEFAULT: Endpoint = Endpoint {
        method: "",
        path: "",
        params: &[],
        versions: Versions::ALL,
        permissions: &[],
    };

    /// The permission check `release` defines, `None` when the table holds none for it (or the
    /// release lacks the endpoint).
    pub fn permissions_of(&self, release: PveRelease) -> Option<&'static Permissions> {
        if !self.versions.contains(release) {
            return None;
        }
        self.permissions
            .iter()
            .find(|p| p.versions.contains(release))
    }

    /// The parameters `release` defines.
    pub fn params_of(&self, release: PveRelease) -> impl Iterator<Item = &'static Param> + '_ {
        self.params
            .iter()
            .filter(move |p| p.versions.contains(release))
    }

    /// The definition a parameter name falls under in `release` (`scsi3` under `scsi[n]`,
    /// within the family's highest index).
    pub fn param(&self, release: PveRelease, name: &str) -> Option<&'static Param> {
        if let Some(p) = self.params_of(release).find(|p| p.name == name) {
            return Some(p);
        }
        let (family, index) = split_indexed(name)?;
        let guest = if self.path.contains("/lxc") {
            GuestType::Lxc
        } else {
            GuestType::Qemu
        };
        if index > max_index(guest, family) {
            return None;
        }
        let want = format!("{family}[n]");
        self.params_of(release).find(|p| p.name == want)
    }
}

/// The definition of an endpoint.
pub fn endpoint(method: &str, path: &str) -> Option<&'static Endpoint> {
    crate::table::ENDPOINTS
        .iter()
        .find(|e| e.method == method && e.path == path)
}
