//! What one request needs to pass PVE's permission check ([`required`]): the endpoint's
//! [`Permissions`] from the table, resolved with the request's path variables and parameters
//! into alternatives of conjunctions of grants ([`Requirement`], [`Term`]).
//!
//! The semantics are those of pve-access-control `PVE/RPCEnvironment.pm` (read at the 9.1.1
//! release): `check_api2_permissions` (the order of `user: world`, `root@pam`, no permissions,
//! `user: all`, `check`), `exec_api2_perm_check` (each check form), `check_perm_modify` (the
//! lesser privileges it accepts on `/storage/...`, `/vms/...`, `/pool/...`); with pve-common
//! `PVE/Tools.pm` `template_replace` (an absent, empty or `0` value becomes `-`) and
//! pve-access-control `PVE/AccessControl.pm` `normalize_path`.

use crate::def::{Check, GroupsParam, PermUser, Permissions, UseridParam};
use crate::{PveRelease, endpoint};

/// What a request needs to pass PVE's permission check. `root@pam` passes every check; this
/// says what everyone else needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Requirement {
    /// `user: world`: nothing, not even a login.
    World,
    /// `user: all`: any authenticated user passes the API server; the handler checks by itself
    /// what it needs (a `check` beside `user: all` is not run).
    AnyUser,
    /// The schema states no check: only `root@pam`.
    RootOnly,
    /// The `check`: at least one alternative whose terms all hold (an empty alternative: nothing
    /// needed). No alternative at all means no one but `root@pam` passes with these parameters
    /// (a `require_param` parameter missing, a path PVE cannot normalize, a `userid` that is not
    /// one).
    AnyOf(Vec<Vec<Term>>),
}

impl Requirement {
    /// The alternatives of a check, each a conjunction; none for the other cases.
    pub fn alternatives(&self) -> &[Vec<Term>] {
        match self {
            Requirement::AnyOf(alts) => alts,
            Requirement::World | Requirement::AnyUser | Requirement::RootOnly => &[],
        }
    }

    /// Whether an authenticated user other than `root@pam`, for whom `holds` says which terms
    /// hold, passes.
    pub fn is_met(&self, holds: &dyn Fn(&Term) -> bool) -> bool {
        match self {
            Requirement::World | Requirement::AnyUser => true,
            Requirement::RootOnly => false,
            Requirement::AnyOf(alts) => alts.iter().any(|alt| alt.iter().all(holds)),
        }
    }
}

/// One condition of a [`Requirement`] alternative.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Term {
    /// The user holds `privilege` on the ACL path `path` (normalized as PVE does: placeholders
    /// filled, `/vms/100`, `/pool/web`, `/access/realm/pve`).
    Grant {
        /// ACL path.
        path: String,
        /// Privilege name.
        privilege: &'static str,
    },
    /// `userid-param self`: the user is the one the `userid` parameter names (who must exist).
    IsUser(String),
    /// `userid-group`, for an existing user: the caller holds `privilege` on
    /// `/access/groups/<g>` for some group `g` the user `userid` is a member of (a fact of the
    /// cluster's groups, not of the request).
    GroupOfUser {
        /// The user the request is about.
        userid: String,
        /// Privilege name.
        privilege: &'static str,
    },
}

impl Term {
    fn grant(path: impl Into<String>, privilege: &'static str) -> Term {
        Term::Grant {
            path: path.into(),
            privilege,
        }
    }
}

/// What the request `method` `template` (a path template of the table, such as
/// `/pools/{poolid}`) needs in `release` (`None`: the newest release that has the endpoint), its
/// path variables and parameters given by `vars` (`poolid` -> `web`); `None` when the table
/// lacks the endpoint, the release lacks it, or the table holds no permissions for it.
pub fn required(
    method: &str,
    template: &str,
    release: Option<PveRelease>,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Option<Requirement> {
    let ep = endpoint(method, template)?;
    let release = match release {
        Some(r) => r,
        None => ep.versions.releases().last()?,
    };
    Some(ep.permissions_of(release)?.requirement(vars))
}

impl Permissions {
    /// What a request needs under these permissions, its path variables and parameters given by
    /// `vars` (PVE's `check_api2_permissions` for a user other than `root@pam`).
    pub fn requirement(&self, vars: &dyn Fn(&str) -> Option<String>) -> Requirement {
        match (self.user, self.check) {
            (Some(PermUser::World), _) => Requirement::World,
            (Some(PermUser::All), _) => Requirement::AnyUser,
            (None, Some(check)) => Requirement::AnyOf(alternatives(&check, vars)),
            (None, None) => Requirement::RootOnly,
        }
    }
}

/// Disjunctive normal form: alternatives of conjunctions. `[]` is false, `[[]]` true.
type Dnf = Vec<Vec<Term>>;

fn alternatives(check: &Check, vars: &dyn Fn(&str) -> Option<String>) -> Dnf {
    match *check {
        Check::And(checks) => checks
            .iter()
            .fold(vec![Vec::new()], |acc, c| and(&acc, &alternatives(c, vars))),
        Check::Or(checks) => simplify(checks.iter().flat_map(|c| alternatives(c, vars)).collect()),
        Check::Perm {
            path,
            privs,
            any,
            require_param,
        } => {
            // A missing `require_param` fails the check (`!defined`: an empty value is there).
            if require_param.is_some_and(|p| vars(p).is_none()) {
                return Vec::new();
            }
            let Some(path) = normalize_path(&template_replace(path, vars)) else {
                return Vec::new();
            };
            privileges(&path, privs, any)
        }
        Check::UseridParam(test) => {
            // PVE's `verify_username` dies on a missing or malformed `userid`.
            let Some(userid) = vars("userid") else {
                return Vec::new();
            };
            let Some(realm) = realm_of(&userid) else {
                return Vec::new();
            };
            match test {
                UseridParam::SelfUser => vec![vec![Term::IsUser(userid)]],
                UseridParam::RealmAllocateUser => vec![vec![Term::grant(
                    format!("/access/realm/{realm}"),
                    "Realm.AllocateUser",
                )]],
            }
        }
        Check::UseridGroup {
            privs,
            groups_param,
        } => userid_group(privs, groups_param, vars),
        Check::PermModify(template) => {
            // `return 0 if !defined($path)`: PVE's ACL handler refuses such a path anyway.
            let Some(path) = normalize_path(&template_replace(template, vars)) else {
                return Vec::new();
            };
            // `check_perm_modify`: `Permissions.Modify`, or the allocate privilege of the
            // path's kind, on the path itself. (Its `/access` case for an empty path cannot
            // arise: a normalized path is never empty.)
            let lesser = if has_tail(&path, "/storage/") {
                Some("Datastore.Allocate")
            } else if has_tail(&path, "/vms/") {
                Some("VM.Allocate")
            } else if has_tail(&path, "/pool/") {
                Some("Pool.Allocate")
            } else {
                None
            };
            std::iter::once("Permissions.Modify")
                .chain(lesser)
                .map(|p| vec![Term::grant(path.clone(), p)])
                .collect()
        }
    }
}

/// `userid-group` as `exec_api2_perm_check` runs it: any of `privs` on `/access/groups` (every
/// group), or else any of them on each group of the `groups` parameter (with `groups_param`;
/// none given fails) and, for an existing user (not `groups_param create`), on some group the
/// user is a member of. That the user exists, and that the named groups do, are facts of the
/// cluster the terms do not repeat.
fn userid_group(
    privs: &'static [&'static str],
    groups_param: Option<GroupsParam>,
    vars: &dyn Fn(&str) -> Option<String>,
) -> Dnf {
    let existing_user = groups_param != Some(GroupsParam::Create);
    let userid = vars("userid");
    if existing_user && userid.is_none() {
        return Vec::new();
    }
    let mut alts = privileges("/access/groups", privs, true);
    let mut per_group: Dnf = vec![Vec::new()];
    if groups_param.is_some() {
        let list = vars("groups").unwrap_or_default();
        let groups = split_list(&list);
        if groups.is_empty() {
            per_group = Vec::new();
        }
        for g in groups {
            per_group = and(
                &per_group,
                &privileges(&format!("/access/groups/{g}"), privs, true),
            );
        }
    }
    if let (true, Some(userid)) = (existing_user, userid) {
        let member: Dnf = privs
            .iter()
            .map(|&p| {
                vec![Term::GroupOfUser {
                    userid: userid.clone(),
                    privilege: p,
                }]
            })
            .collect();
        per_group = and(&per_group, &member);
    }
    alts.extend(per_group);
    simplify(alts)
}

fn and(a: &Dnf, b: &Dnf) -> Dnf {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            let mut both = x.clone();
            for t in y {
                if !both.contains(t) {
                    both.push(t.clone());
                }
            }
            out.push(both);
        }
    }
    simplify(out)
}

/// `check_full`: every privilege on the path, or with `any` one of them.
fn privileges(path: &str, privs: &'static [&'static str], any: bool) -> Dnf {
    if any {
        privs.iter().map(|&p| vec![Term::grant(path, p)]).collect()
    } else {
        vec![privs.iter().map(|&p| Term::grant(path, p)).collect()]
    }
}

/// Drops repeated alternatives and those that ask more than another one (`a or (a and b)` is
/// `a`), keeping the order.
fn simplify(alts: Dnf) -> Dnf {
    let mut out: Dnf = Vec::new();
    for (i, alt) in alts.iter().enumerate() {
        let weaker_elsewhere = alts.iter().enumerate().any(|(j, other)| {
            j != i && other.iter().all(|t| alt.contains(t)) && (other.len() < alt.len() || j < i)
        });
        if !weaker_elsewhere {
            out.push(alt.clone());
        }
    }
    out
}

/// `$path =~ m|^<prefix>.+$|`.
fn has_tail(path: &str, prefix: &str) -> bool {
    path.strip_prefix(prefix)
        .is_some_and(|rest| !rest.is_empty())
}

/// pve-common `PVE::Tools::template_replace`: each `{name}` becomes the value of `name`, or `-`
/// when it is absent, empty or `0` (Perl's `||`).
fn template_replace(template: &str, vars: &dyn Fn(&str) -> Option<String>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if close > 0 => {
                let value = vars(&after[..close]).filter(|v| !v.is_empty() && v != "0");
                out.push_str(value.as_deref().unwrap_or("-"));
                rest = &after[close + 1..];
            }
            // Perl's loop steps over a `{` that opens no `{name}`.
            _ => rest = after,
        }
    }
    out.push_str(rest);
    out
}

/// pve-access-control `PVE::AccessControl::normalize_path`: slashes collapsed, no trailing one,
/// a leading one; `None` for an empty path or one with other characters than
/// `[[:alnum:]._/-]`.
fn normalize_path(path: &str) -> Option<String> {
    if path.is_empty() || path == "0" {
        return None;
    }
    let mut p = String::with_capacity(path.len() + 1);
    for c in path.chars() {
        if !(c == '/' && p.ends_with('/')) {
            p.push(c);
        }
    }
    if p.ends_with('/') {
        p.pop();
    }
    if !p.starts_with('/') {
        p.insert(0, '/');
    }
    p.chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/'))
        .then_some(p)
}

/// The realm of a user id as pve-access-control `PVE::Auth::Plugin::verify_username` reads it
/// (3 to 64 characters, `<user>@<realm>`, the realm after the last `@`), `None` when it is not
/// one.
fn realm_of(userid: &str) -> Option<&str> {
    if !(3..=64).contains(&userid.len()) {
        return None;
    }
    let (user, realm) = userid.rsplit_once('@')?;
    let user_ok = !user.is_empty()
        && !user
            .chars()
            .any(|c| c.is_whitespace() || c == ':' || c == '/');
    let mut rc = realm.chars();
    let realm_ok = rc.next().is_some_and(|c| c.is_ascii_alphabetic())
        && realm.len() >= 2
        && rc.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    (user_ok && realm_ok).then_some(realm)
}

/// pve-common `PVE::ParseUtils::split_list`: split at NUL when there is one, else at commas,
/// semicolons and white space.
fn split_list(list: &str) -> Vec<&str> {
    if list.contains('\0') {
        return list.split('\0').collect();
    }
    list.split(|c: char| c == ',' || c == ';' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    fn grant(path: &str, privilege: &'static str) -> Term {
        Term::grant(path, privilege)
    }

    fn need(method: &str, path: &str, pairs: &[(&str, &str)]) -> Requirement {
        required(method, path, None, &vars(pairs)).unwrap_or(Requirement::RootOnly)
    }

    #[test]
    fn creating_a_pool_needs_pool_allocate_on_the_pool() {
        assert_eq!(
            need("POST", "/pools", &[("poolid", "web")]),
            Requirement::AnyOf(vec![vec![grant("/pool/web", "Pool.Allocate")]])
        );
        // Without the parameter PVE checks `/pool/-`.
        assert_eq!(
            need("POST", "/pools", &[]),
            Requirement::AnyOf(vec![vec![grant("/pool/-", "Pool.Allocate")]])
        );
    }

    #[test]
    fn setting_an_acl_needs_permissions_modify_or_the_paths_allocate_privilege() {
        let acl = |path: &str| need("PUT", "/access/acl", &[("path", path)]);
        assert_eq!(
            acl("/vms/100"),
            Requirement::AnyOf(vec![
                vec![grant("/vms/100", "Permissions.Modify")],
                vec![grant("/vms/100", "VM.Allocate")],
            ])
        );
        assert_eq!(
            acl("//storage/local/"),
            Requirement::AnyOf(vec![
                vec![grant("/storage/local", "Permissions.Modify")],
                vec![grant("/storage/local", "Datastore.Allocate")],
            ])
        );
        assert_eq!(
            acl("/pool/web").alternatives()[1],
            [grant("/pool/web", "Pool.Allocate")]
        );
        // `/storage` itself, `/nodes/...`, `/`: only `Permissions.Modify`.
        for path in ["/storage", "/nodes/pve1", "/"] {
            assert_eq!(
                acl(path),
                Requirement::AnyOf(vec![vec![grant(path, "Permissions.Modify")]]),
                "{path}"
            );
        }
        // A path PVE cannot normalize: no one but root.
        assert_eq!(acl("/vms/1 00"), Requirement::AnyOf(vec![]));
    }

    #[test]
    fn creating_a_user_needs_the_realm_and_the_groups() {
        let r = need(
            "POST",
            "/access/users",
            &[("userid", "alice@corp"), ("groups", "ops,dev")],
        );
        let realm = grant("/access/realm/corp", "Realm.AllocateUser");
        assert_eq!(
            r,
            Requirement::AnyOf(vec![
                vec![realm.clone(), grant("/access/groups", "User.Modify")],
                vec![
                    realm.clone(),
                    grant("/access/groups/ops", "User.Modify"),
                    grant("/access/groups/dev", "User.Modify"),
                ],
            ])
        );
        // No groups: only the right on every group will do.
        assert_eq!(
            need("POST", "/access/users", &[("userid", "alice@corp")]),
            Requirement::AnyOf(vec![vec![realm, grant("/access/groups", "User.Modify")]])
        );
        // A user id without a realm: PVE refuses it.
        assert_eq!(
            need("POST", "/access/users", &[("userid", "alice")]),
            Requirement::AnyOf(vec![])
        );
    }

    #[test]
    fn updating_a_user_needs_a_group_of_the_user_and_the_new_groups() {
        let r = need(
            "PUT",
            "/access/users/{userid}",
            &[("userid", "bob@pve"), ("groups", "ops")],
        );
        assert_eq!(
            r,
            Requirement::AnyOf(vec![
                vec![grant("/access/groups", "User.Modify")],
                vec![
                    grant("/access/groups/ops", "User.Modify"),
                    Term::GroupOfUser {
                        userid: "bob@pve".into(),
                        privilege: "User.Modify"
                    },
                ],
            ])
        );
        // Reading a user: any of two privileges, on every group or on one of the user's.
        let r = need("GET", "/access/users/{userid}", &[("userid", "bob@pve")]);
        assert_eq!(r.alternatives().len(), 4);
    }

    #[test]
    fn a_users_tokens_are_theirs_or_their_group_admins() {
        let r = need(
            "POST",
            "/access/users/{userid}/token/{tokenid}",
            &[("userid", "bob@pve"), ("tokenid", "ci")],
        );
        assert_eq!(
            r.alternatives(),
            [
                vec![Term::IsUser("bob@pve".into())],
                vec![grant("/access/groups", "User.Modify")],
                vec![Term::GroupOfUser {
                    userid: "bob@pve".into(),
                    privilege: "User.Modify"
                }],
            ]
        );
        let is_bob = |t: &Term| *t == Term::IsUser("bob@pve".into());
        assert!(r.is_met(&is_bob));
        assert!(!r.is_met(&|_| false));
    }

    #[test]
    fn adding_a_storage_needs_datastore_allocate_on_storage() {
        assert_eq!(
            need("POST", "/storage", &[("storage", "nfs1")]),
            Requirement::AnyOf(vec![vec![grant("/storage", "Datastore.Allocate")]])
        );
    }

    #[test]
    fn a_backup_job_needs_sys_modify_on_the_root() {
        assert_eq!(
            need("POST", "/cluster/backup", &[("id", "nightly")]),
            Requirement::AnyOf(vec![vec![grant("/", "Sys.Modify")]])
        );
    }

    #[test]
    fn a_clone_needs_the_source_and_the_target_or_its_pool() {
        let clone = "/nodes/{node}/qemu/{vmid}/clone";
        let source = grant("/vms/100", "VM.Clone");
        assert_eq!(
            need("POST", clone, &[("vmid", "100"), ("newid", "200")]).alternatives(),
            [vec![source.clone(), grant("/vms/200", "VM.Allocate")]]
        );
        assert_eq!(
            need(
                "POST",
                clone,
                &[("vmid", "100"), ("newid", "200"), ("pool", "web")]
            )
            .alternatives(),
            [
                vec![source.clone(), grant("/vms/200", "VM.Allocate")],
                vec![source, grant("/pool/web", "VM.Allocate")],
            ]
        );
    }

    #[test]
    fn any_privilege_expands_to_alternatives_and_releases_differ() {
        let ping = "/nodes/{node}/qemu/{vmid}/agent/ping";
        let v = vars(&[("vmid", "100")]);
        assert_eq!(
            required("POST", ping, Some(PveRelease::V8_4), &v),
            Some(Requirement::AnyOf(vec![vec![grant(
                "/vms/100",
                "VM.Monitor"
            )]]))
        );
        let newest = Some(Requirement::AnyOf(vec![
            vec![grant("/vms/100", "VM.GuestAgent.Audit")],
            vec![grant("/vms/100", "VM.GuestAgent.Unrestricted")],
        ]));
        assert_eq!(required("POST", ping, Some(PveRelease::V9_1), &v), newest);
        assert_eq!(required("POST", ping, None, &v), newest);
    }

    #[test]
    fn user_all_world_and_unknown_endpoints() {
        assert_eq!(need("GET", "/version", &[]), Requirement::AnyUser);
        assert_eq!(need("POST", "/access/ticket", &[]), Requirement::World);
        assert_eq!(required("GET", "/nowhere", None, &|_| None), None);
        // The HA rules are 9.x only.
        assert_eq!(
            required("GET", "/cluster/ha/rules", Some(PveRelease::V8_4), &|_| {
                None
            }),
            None
        );
        let root_only = Permissions::DEFAULT;
        assert_eq!(root_only.requirement(&|_| None), Requirement::RootOnly);
        assert!(!Requirement::RootOnly.is_met(&|_| true));
    }

    #[test]
    fn pve_helpers_read_as_perl_does() {
        let v = vars(&[("a", "x"), ("zero", "0"), ("empty", "")]);
        assert_eq!(
            template_replace("/p/{a}/{zero}/{empty}/{none}", &v),
            "/p/x/-/-/-"
        );
        assert_eq!(template_replace("{a", &v), "a");
        assert_eq!(normalize_path("vms//100/").as_deref(), Some("/vms/100"));
        assert_eq!(normalize_path("/").as_deref(), Some("/"));
        assert_eq!(normalize_path("/a b"), None);
        assert_eq!(realm_of("a@b@pve"), Some("pve"));
        assert_eq!(realm_of("a@1x"), None);
        assert_eq!(realm_of("a b@pve"), None);
        assert_eq!(split_list(" a, b;c  d"), ["a", "b", "c", "d"]);
        assert_eq!(split_list("a b\0c"), ["a b", "c"]);
    }
}
