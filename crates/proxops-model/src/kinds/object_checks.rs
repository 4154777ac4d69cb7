//! The checks of the cluster-object kinds: every value PVE would refuse is reported against the
//! official schema of the endpoint that creates the object (`proxops-pve-schema`), so ids,
//! formats and option names follow PVE's own rules rather than a copy of them.

use super::basics::check_node;
use super::object_spec::{
    AclSpec, ApiTokenSpec, BackupJobSpec, MappingSpec, ObjectSpec, Retention, RoleSpec,
    StorageSpec, UserSpec,
};
use crate::Code;
use crate::kind::context::SpecContext;
use crate::pve_config::{PveConfig, check_param_item, check_param_value};
use crate::yaml::PathSeg;
use proxops_pve_schema::{Param, endpoint};

/// Options that hold a secret: refused, since the repository would hold them in clear.
const SECRET_OPTIONS: &[&str] = proxops_pve_schema::SENSITIVE_STORAGE_OPTIONS;

/// vzdump options PVE restricts to root@pam.
const ROOT_ONLY_BACKUP_OPTIONS: &[&str] = proxops_pve_schema::ROOT_ONLY_BACKUP_OPTIONS;

/// The newest definition of parameter `name` of `method path`.
pub fn create_param(method: &str, path: &str, name: &str) -> Option<&'static Param> {
    endpoint(method, path)?
        .params
        .iter()
        .rev()
        .find(|p| p.name == name)
}

/// Reports `value` at `at` when the parameter `name` of `method path` would refuse it.
fn check_as(
    cx: &SpecContext<'_>,
    (method, path): (&str, &str),
    name: &str,
    value: &str,
    at: &[PathSeg],
) {
    let Some(param) = create_param(method, path, name) else {
        return;
    };
    if let Err(why) = check_param_value(param, value) {
        cx.invalid(
            at,
            format!("`{value}` is not a valid `{name}` for PVE: {why}"),
            None,
        );
    }
}

/// Checks an `options:` map against `method path`'s parameters: known to PVE, not one a typed
/// field sets, not a secret, and a value PVE takes.
fn check_options(
    cx: &SpecContext<'_>,
    (method, path): (&str, &str),
    options: &PveConfig,
    typed: &[&str],
    refused: &[(&[&str], &str)],
) {
    let Some(ep) = endpoint(method, path) else {
        return;
    };
    for (key, value) in options {
        let at = cx.key_path(&path!["options"], key);
        if typed.contains(&key.as_str()) {
            cx.report(
                Code::InvalidValue,
                &at,
                format!("`{key}` has a field of its own: set it there, not in `options`"),
                "set by a typed field",
                Some(format!("use `{key}:` at the top of `spec`")),
            );
            continue;
        }
        if let Some((_, why)) = refused
            .iter()
            .find(|(keys, _)| keys.contains(&key.as_str()))
        {
            cx.invalid(
                &at,
                format!("`{key}` cannot be set from the repository: {why}"),
                None,
            );
            continue;
        }
        let Some(param) = ep.params.iter().rev().find(|p| p.name == key) else {
            let names = ep.params.iter().map(|p| p.name);
            let help =
                crate::diagnostic::did_you_mean(key, names).map(|n| format!("did you mean `{n}`?"));
            cx.report(
                Code::InvalidValue,
                &at,
                format!("`{key}` is not a parameter of `{method} {path}`"),
                "unknown option",
                help,
            );
            continue;
        };
        if let Err(why) = check_param_value(param, value.as_str()) {
            cx.invalid(&at, format!("PVE refuses `{key}: {value}`: {why}"), None);
        }
    }
}

/// Checks a decoded cluster-object spec.
pub(crate) fn check(cx: &SpecContext<'_>, spec: &ObjectSpec) {
    let name = cx.metadata().name.clone();
    match spec {
        ObjectSpec::Storage(s) => storage(cx, s, &name),
        ObjectSpec::Pool(p) => {
            let id = p.id.as_deref().unwrap_or(&name);
            check_as(
                cx,
                ("POST", "/pools"),
                "poolid",
                id,
                &id_path(p.id.is_some()),
            );
            if let Some(c) = &p.comment {
                check_as(cx, ("POST", "/pools"), "comment", c, &path!["comment"]);
            }
        }
        ObjectSpec::BackupJob(j) => backup_job(cx, j, &name),
        ObjectSpec::Mapping(m) => mapping(cx, m, &name),
        ObjectSpec::User(u) => user(cx, u),
        ObjectSpec::Group(g) => {
            let id = g.id.as_deref().unwrap_or(&name);
            check_as(
                cx,
                ("POST", "/access/groups"),
                "groupid",
                id,
                &id_path(g.id.is_some()),
            );
        }
        ObjectSpec::Role(r) => role(cx, r, &name),
        ObjectSpec::Acl(a) => acl(cx, a),
        ObjectSpec::ApiToken(t) => api_token(cx, t),
        ObjectSpec::Firewall(f) => firewall(cx, f),
        ObjectSpec::SdnZone(z) => {
            let create = ("POST", "/cluster/sdn/zones");
            let id = z.id.as_deref().unwrap_or(&name);
            check_as(cx, create, "zone", id, &id_path(z.id.is_some()));
            check_as(cx, create, "type", &z.zone_type, &path!["type"]);
            check_options(
                cx,
                create,
                &z.options,
                &["zone", "type"],
                &[(&["lock-token"], "ProxOps takes no SDN lock")],
            );
            if z.zone_type == "vlan" && !z.options.contains_key("bridge") {
                cx.report_missing(&path!["options"], "a `vlan` zone needs `options.bridge`");
            }
        }
        ObjectSpec::SdnVnet(v) => {
            let create = ("POST", "/cluster/sdn/vnets");
            let id = v.id.as_deref().unwrap_or(&name);
            check_as(cx, create, "vnet", id, &id_path(v.id.is_some()));
            check_as(cx, create, "zone", &v.zone, &path!["zone"]);
            if let Some(a) = &v.alias {
                check_as(cx, create, "alias", a, &path!["alias"]);
            }
            check_options(
                cx,
                create,
                &v.options,
                &["vnet", "zone", "tag", "alias", "type"],
                &[(&["lock-token"], "ProxOps takes no SDN lock")],
            );
        }
        ObjectSpec::SdnSubnet(s) => {
            let create = ("POST", "/cluster/sdn/vnets/{vnet}/subnets");
            check_as(cx, create, "vnet", &s.vnet, &path!["vnet"]);
            check_as(cx, create, "subnet", &s.subnet, &path!["subnet"]);
            if let Some(g) = &s.gateway {
                check_as(cx, create, "gateway", g, &path!["gateway"]);
            }
            check_options(
                cx,
                create,
                &s.options,
                &["subnet", "vnet", "gateway", "snat", "type"],
                &[(&["lock-token"], "ProxOps takes no SDN lock")],
            );
        }
    }
}

/// Where an id is labelled: `spec.id` when set, else the spec (the id is `metadata.name`).
fn id_path(explicit: bool) -> Vec<PathSeg> {
    if explicit {
        path!["id"].to_vec()
    } else {
        Vec::new()
    }
}

fn storage(cx: &SpecContext<'_>, s: &StorageSpec, name: &str) {
    let create = ("POST", "/storage");
    let id = s.id.as_deref().unwrap_or(name);
    check_as(cx, create, "storage", id, &id_path(s.id.is_some()));
    for (i, c) in s.content.iter().enumerate() {
        check_as(cx, create, "content", c, &path!["content", i]);
    }
    for (i, node) in s.nodes.iter().enumerate() {
        check_node(cx, node, &path!["nodes", i]);
    }
    if let Some(pool) = &s.pool {
        // What `PUT /pools/{poolid}` takes: the pool's id.
        check_as(cx, ("POST", "/pools"), "poolid", pool, &path!["pool"]);
    }
    check_options(
        cx,
        create,
        &s.options,
        &["storage", "type", "content", "nodes", "shared", "disable"],
        &[(
            SECRET_OPTIONS,
            "a secret would sit in the repository in clear; set it on PVE by hand",
        )],
    );
    // pve-storage's plugins: only some take `shared` (of the types ProxOps manages, dir and
    // LVM); a network storage is shared by nature.
    let plugin = proxops_pve_schema::storage_plugin(s.storage_type.as_str());
    if s.shared.is_some() && plugin.is_some_and(|p| p.option("shared").is_none()) {
        cx.invalid(
            &path!["shared"],
            format!(
                "a `{}` storage has no `shared` option",
                s.storage_type.as_str()
            ),
            Some("PVE sets it for network storages by itself: leave it out".into()),
        );
    }
    // pve-storage's plugins: the options each type cannot do without (those not `optional`,
    // but the `path` PVE derives for a network share).
    for key in plugin.into_iter().flat_map(|p| p.required()) {
        if !s.options.contains_key(key) {
            cx.report_missing(
                &path!["options"],
                format!(
                    "a `{}` storage needs `options.{key}`",
                    s.storage_type.as_str()
                ),
            );
        }
    }
}

fn backup_job(cx: &SpecContext<'_>, j: &BackupJobSpec, name: &str) {
    let create = ("POST", "/cluster/backup");
    let id = j.id.as_deref().unwrap_or(name);
    check_as(cx, create, "id", id, &id_path(j.id.is_some()));
    check_as(cx, create, "schedule", &j.schedule, &path!["schedule"]);
    check_as(cx, create, "storage", &j.storage, &path!["storage"]);
    let selections = [j.all, !j.vmids.is_empty(), j.pool.is_some()];
    if selections.iter().filter(|s| **s).count() != 1 {
        cx.invalid(
            &[],
            "a backup job selects its guests one way: `all: true`, `vmids` or `pool`",
            Some("PVE's vzdump takes exactly one of them".into()),
        );
    }
    if !j.exclude.is_empty() && !j.all {
        cx.invalid(
            &path!["exclude"],
            "`exclude` applies only with `all: true`",
            None,
        );
    }
    if let Some(pool) = &j.pool {
        check_as(cx, create, "pool", pool, &path!["pool"]);
    }
    if let Some(node) = &j.node {
        check_node(cx, node, &path!["node"]);
    }
    if let Some(r) = &j.retention {
        retention(cx, r);
    }
    check_options(
        cx,
        create,
        &j.options,
        &[
            "id",
            "schedule",
            "storage",
            "all",
            "vmid",
            "pool",
            "exclude",
            "mode",
            "node",
            "enabled",
            "prune-backups",
            "comment",
            "starttime",
            "dow",
        ],
        &[(
            ROOT_ONLY_BACKUP_OPTIONS,
            "PVE lets only root@pam set it, never an API token",
        )],
    );
}

fn retention(cx: &SpecContext<'_>, r: &Retention) {
    let others = [
        r.keep_last,
        r.keep_hourly,
        r.keep_daily,
        r.keep_weekly,
        r.keep_monthly,
        r.keep_yearly,
    ];
    if r.keep_all == Some(true) && others.iter().any(Option::is_some) {
        cx.invalid(
            &path!["retention", "keep-all"],
            "`keep-all` keeps every backup: the other `keep-*` settings must then be absent",
            None,
        );
    }
    if r.property_string().is_empty() {
        cx.invalid(
            &path!["retention"],
            "an empty retention keeps nothing apart",
            Some("set `keep-all: true` or some `keep-*`".into()),
        );
    }
}

fn mapping(cx: &SpecContext<'_>, m: &MappingSpec, name: &str) {
    let path = format!("/cluster/mapping/{}", m.mapping_type.as_str());
    let create = ("POST", path.as_str());
    let id = m.id.as_deref().unwrap_or(name);
    check_as(cx, create, "id", id, &id_path(m.id.is_some()));
    if m.map.is_empty() {
        cx.report_missing(
            &path!["map"],
            "a mapping needs an entry for at least one node",
        );
    }
    let usb = m.mapping_type.as_str() == "usb";
    if usb && (m.mdev.is_some() || m.live_migration_capable.is_some()) {
        cx.invalid(
            &[],
            "`mdev` and `live-migration-capable` are PCI mapping settings",
            None,
        );
    }
    let Some(param) = create_param("POST", &path, "map") else {
        return;
    };
    for (i, entry) in m.map.iter().enumerate() {
        let text = entry_string(entry);
        if let Some(node) = entry.get("node") {
            check_node(cx, node.as_str(), &path!["map", i, "node"]);
        }
        if let Err(why) = check_param_item(param, &text) {
            cx.invalid(
                &path!["map", i],
                format!("PVE refuses this entry: {why}"),
                None,
            );
        }
    }
}

/// A `map` entry as the property string PVE takes (keys in name order).
pub fn entry_string(entry: &PveConfig) -> String {
    entry
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

fn user(cx: &SpecContext<'_>, u: &UserSpec) {
    let create = ("POST", "/access/users");
    check_as(cx, create, "userid", &u.userid, &path!["userid"]);
    for (field, value) in [
        ("comment", &u.comment),
        ("email", &u.email),
        ("firstname", &u.firstname),
        ("lastname", &u.lastname),
    ] {
        if let Some(v) = value {
            check_as(cx, create, field, v, &path![field]);
        }
    }
    for (i, g) in u.groups.iter().enumerate() {
        check_as(
            cx,
            ("POST", "/access/groups"),
            "groupid",
            g,
            &path!["groups", i],
        );
    }
}

fn role(cx: &SpecContext<'_>, r: &RoleSpec, name: &str) {
    let create = ("POST", "/access/roles");
    let id = r.id.as_deref().unwrap_or(name);
    check_as(cx, create, "roleid", id, &id_path(r.id.is_some()));
    // pve-access-control `PVE/AccessControl.pm`: the roles PVE defines are read-only.
    if id.starts_with("PVE") || matches!(id, "Administrator" | "NoAccess") {
        cx.invalid(
            &id_path(r.id.is_some()),
            format!("`{id}` is one of PVE's built-in roles, which cannot be changed"),
            Some("name the custom role differently".into()),
        );
    }
    for (i, p) in r.privs.iter().enumerate() {
        let ok = p.split_once('.').is_some_and(|(a, b)| {
            !a.is_empty()
                && !b.is_empty()
                && p.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'.')
        });
        if !ok {
            cx.invalid(
                &path!["privs", i],
                format!("`{p}` is not a PVE privilege name"),
                Some("privileges look like `VM.Audit` or `Datastore.AllocateSpace`".into()),
            );
        }
    }
}

fn acl(cx: &SpecContext<'_>, a: &AclSpec) {
    let update = ("PUT", "/access/acl");
    check_as(cx, update, "path", &a.path, &path!["path"]);
    if !a.path.starts_with('/') {
        cx.invalid(
            &path!["path"],
            format!("`{}` is not an ACL path", a.path),
            Some("ACL paths start with `/`: `/`, `/vms/100`, `/storage/local`".into()),
        );
    }
    if a.roles.is_empty() {
        cx.report_missing(&path!["roles"], "an ACL grants at least one role");
    }
    if a.users.is_empty() && a.groups.is_empty() && a.tokens.is_empty() {
        cx.report_missing(
            &path!["users"],
            "an ACL grants its roles to at least one user, group or token",
        );
    }
    for (i, u) in a.users.iter().enumerate() {
        check_as(
            cx,
            ("POST", "/access/users"),
            "userid",
            u,
            &path!["users", i],
        );
    }
    for (i, g) in a.groups.iter().enumerate() {
        check_as(
            cx,
            ("POST", "/access/groups"),
            "groupid",
            g,
            &path!["groups", i],
        );
    }
    for (i, t) in a.tokens.iter().enumerate() {
        let ok = t
            .split_once('!')
            .is_some_and(|(user, token)| user.contains('@') && !token.is_empty());
        if !ok {
            cx.invalid(
                &path!["tokens", i],
                format!("`{t}` is not an API token id"),
                Some("token ids look like `name@realm!token`".into()),
            );
        }
    }
}

fn api_token(cx: &SpecContext<'_>, t: &ApiTokenSpec) {
    let create = ("POST", "/access/users/{userid}/token/{tokenid}");
    check_as(cx, create, "userid", &t.userid, &path!["userid"]);
    check_as(cx, create, "tokenid", &t.token, &path!["token"]);
    if let Some(c) = &t.comment {
        check_as(cx, create, "comment", c, &path!["comment"]);
    }
    if let Some(e) = t.expire {
        check_as(cx, create, "expire", &e.to_string(), &path!["expire"]);
    }
}

/// The cluster firewall: options, aliases, IP sets, groups and rules as PVE would take them.
fn firewall(cx: &SpecContext<'_>, f: &super::firewall_spec::FirewallSpec) {
    check_map(
        cx,
        &path!["options"],
        ("PUT", "/cluster/firewall/options"),
        &f.options,
        &["delete", "digest"],
    );
    for (i, a) in f.aliases.iter().enumerate() {
        let create = ("POST", "/cluster/firewall/aliases");
        check_as(cx, create, "name", &a.name, &path!["aliases", i, "name"]);
        check_as(cx, create, "cidr", &a.cidr, &path!["aliases", i, "cidr"]);
    }
    for (i, s) in f.ipsets.iter().enumerate() {
        check_as(
            cx,
            ("POST", "/cluster/firewall/ipset"),
            "name",
            &s.name,
            &path!["ipsets", i, "name"],
        );
        for (j, e) in s.entries.iter().enumerate() {
            let add = ("POST", "/cluster/firewall/ipset/{name}");
            check_as(
                cx,
                add,
                "cidr",
                &e.cidr,
                &path!["ipsets", i, "entries", j, "cidr"],
            );
        }
    }
    for (i, g) in f.groups.iter().enumerate() {
        check_as(
            cx,
            ("POST", "/cluster/firewall/groups"),
            "group",
            &g.name,
            &path!["groups", i, "name"],
        );
        check_rules(
            cx,
            &path!["groups", i, "rules"],
            "/cluster/firewall/rules",
            &g.rules,
        );
    }
    check_rules(cx, &path!["rules"], "/cluster/firewall/rules", &f.rules);
}

/// A guest's `firewall:` (at `base`): its options and rules, as the guest endpoints take them.
pub(crate) fn guest_firewall(
    cx: &SpecContext<'_>,
    base: &[PathSeg],
    f: &super::firewall_spec::GuestFirewall,
) {
    let mut at = base.to_vec();
    at.push(PathSeg::from("options"));
    check_map(
        cx,
        &at,
        ("PUT", "/nodes/{node}/qemu/{vmid}/firewall/options"),
        &f.options,
        &["delete", "digest", "node", "vmid"],
    );
    let mut at = base.to_vec();
    at.push(PathSeg::from("rules"));
    check_rules(
        cx,
        &at,
        "/nodes/{node}/qemu/{vmid}/firewall/rules",
        &f.rules,
    );
}

/// Each rule at `base[i]`: keys the rule endpoint takes, values it accepts, `type` and `action`
/// given.
fn check_rules(cx: &SpecContext<'_>, base: &[PathSeg], list: &str, rules: &[PveConfig]) {
    for (i, rule) in rules.iter().enumerate() {
        let mut at = base.to_vec();
        at.push(PathSeg::from(i));
        for required in ["type", "action"] {
            if !rule.contains_key(required) {
                cx.report_missing(&at, format!("a firewall rule needs `{required}`"));
            }
        }
        check_map(
            cx,
            &at,
            ("POST", list),
            rule,
            &["digest", "pos", "node", "vmid"],
        );
    }
}

/// Keys of `map` (at `at`) against the parameters of `method path`, less `control`.
fn check_map(
    cx: &SpecContext<'_>,
    at: &[PathSeg],
    (method, path): (&str, &str),
    map: &PveConfig,
    control: &[&str],
) {
    let Some(ep) = endpoint(method, path) else {
        return;
    };
    for (key, value) in map {
        let here = cx.key_path(at, key);
        let param = ep
            .params
            .iter()
            .rev()
            .find(|p| p.name == key && !control.contains(&p.name));
        let Some(param) = param else {
            let names = ep
                .params
                .iter()
                .map(|p| p.name)
                .filter(|n| !control.contains(n));
            let help =
                crate::diagnostic::did_you_mean(key, names).map(|n| format!("did you mean `{n}`?"));
            cx.report(
                Code::InvalidValue,
                &here,
                format!("`{key}` is not a setting of `{method} {path}`"),
                "unknown key",
                help,
            );
            continue;
        };
        if let Err(why) = check_param_value(param, value.as_str()) {
            cx.invalid(&here, format!("PVE refuses `{key}: {value}`: {why}"), None);
        }
    }
}

/// A guest's `pool`: a pool id PVE takes.
pub(crate) fn guest_pool(cx: &SpecContext<'_>, pool: &str) {
    check_as(cx, ("POST", "/pools"), "poolid", pool, &path!["pool"]);
}
