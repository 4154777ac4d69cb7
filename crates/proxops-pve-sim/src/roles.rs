//! PVE's built-in roles, as pve-access-control `src/PVE/AccessControl.pm` `create_roles` derives
//! them from `$privgroups`: `PVE<Group>Admin` (admin, user and audit privileges of a group),
//! `PVE<Group>User` (user and audit, for a group with user privileges), `PVEAdmin` (every
//! group's admin, user and audit privileges, `Mapping.Modify` excepted), `PVEAuditor`,
//! `PVETemplateUser`, `Administrator` (every privilege) and `NoAccess`.

use crate::version::PveVersion;
use std::collections::BTreeMap;

/// One privilege group: (name, root, admin, user, audit).
type Group = (
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
    &'static [&'static str],
);

/// `$privgroups` of PVE 9.
const GROUPS_9: &[Group] = &[
    (
        "VM",
        &[],
        &[
            "VM.Config.Disk",
            "VM.Config.CPU",
            "VM.Config.Memory",
            "VM.Config.Network",
            "VM.Config.HWType",
            "VM.Config.Options",
            "VM.Allocate",
            "VM.Clone",
            "VM.GuestAgent.Unrestricted",
            "VM.Migrate",
            "VM.Replicate",
            "VM.Snapshot",
            "VM.Snapshot.Rollback",
        ],
        &[
            "VM.Config.CDROM",
            "VM.Config.Cloudinit",
            "VM.Console",
            "VM.Backup",
            "VM.GuestAgent.FileRead",
            "VM.GuestAgent.FileSystemMgmt",
            "VM.GuestAgent.FileWrite",
            "VM.PowerMgmt",
        ],
        &["VM.Audit", "VM.GuestAgent.Audit"],
    ),
    (
        "Sys",
        &[
            "Sys.PowerMgmt",
            "Sys.Modify",
            "Sys.Incoming",
            "Sys.AccessNetwork",
        ],
        &["Sys.Console", "Sys.Syslog"],
        &[],
        &["Sys.Audit"],
    ),
    (
        "Datastore",
        &[],
        &["Datastore.Allocate", "Datastore.AllocateTemplate"],
        &["Datastore.AllocateSpace"],
        &["Datastore.Audit"],
    ),
    (
        "SDN",
        &[],
        &["SDN.Allocate", "SDN.Audit"],
        &["SDN.Use"],
        &["SDN.Audit"],
    ),
    (
        "User",
        &["Realm.Allocate"],
        &["User.Modify", "Group.Allocate", "Realm.AllocateUser"],
        &[],
        &[],
    ),
    (
        "Pool",
        &[],
        &["Pool.Allocate"],
        &["Pool.Audit"],
        &["Pool.Audit"],
    ),
    (
        "Mapping",
        &[],
        &["Mapping.Modify"],
        &["Mapping.Use"],
        &["Mapping.Audit"],
    ),
];

/// The VM group of PVE 8.4: `VM.Monitor` where 9 has the `VM.GuestAgent.*` privileges, no
/// `VM.Replicate`.
fn vm_group_8(privs: &[&'static str]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = privs
        .iter()
        .filter(|p| !p.starts_with("VM.GuestAgent.") && **p != "VM.Replicate")
        .copied()
        .collect();
    if privs.contains(&"VM.Migrate") {
        out.push("VM.Monitor");
    }
    out
}

/// Every built-in role of `version` and its privileges, by role id.
pub(crate) fn builtin(version: PveVersion) -> BTreeMap<&'static str, Vec<String>> {
    let v9 = version >= PveVersion::V9_1;
    let mut roles: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
    let mut add = |role: &'static str, privs: &[&'static str]| {
        let entry = roles.entry(role).or_default();
        entry.extend(privs.iter().map(|p| (*p).to_owned()));
    };
    for &(name, _root, admin, user, audit) in GROUPS_9 {
        let fit = |privs: &[&'static str]| -> Vec<&'static str> {
            if name == "VM" && !v9 {
                vm_group_8(privs)
            } else {
                privs.to_vec()
            }
        };
        let (admin, user, audit) = (fit(admin), fit(user), fit(audit));
        let group_admin: &'static str = match name {
            "VM" => "PVEVMAdmin",
            "Sys" => "PVESysAdmin",
            "Datastore" => "PVEDatastoreAdmin",
            "SDN" => "PVESDNAdmin",
            "User" => "PVEUserAdmin",
            "Pool" => "PVEPoolAdmin",
            _ => "PVEMappingAdmin",
        };
        for privs in [&admin, &user, &audit] {
            add(group_admin, privs);
            add("PVEAdmin", privs);
        }
        if !user.is_empty() {
            let group_user: &'static str = match name {
                "VM" => "PVEVMUser",
                "Datastore" => "PVEDatastoreUser",
                "SDN" => "PVESDNUser",
                "Pool" => "PVEPoolUser",
                _ => "PVEMappingUser",
            };
            add(group_user, &user);
            add(group_user, &audit);
        }
        add("PVEAuditor", &audit);
    }
    add("PVETemplateUser", &["VM.Clone", "VM.Audit"]);
    if let Some(admin) = roles.get_mut("PVEAdmin") {
        admin.retain(|p| p != "Mapping.Modify");
    }
    roles.insert("NoAccess", Vec::new());
    roles.insert(
        "Administrator",
        crate::auth::privileges(version)
            .iter()
            .map(|p| (*p).to_owned())
            .collect(),
    );
    for privs in roles.values_mut() {
        privs.sort();
        privs.dedup();
    }
    roles
}

/// How an ACL entry names a role made through the API (`POST /access/roles`): its one
/// "privilege" is this prefix and the role id, so that the grant follows the role's later
/// changes, and grants nothing once the role is gone (PVE ignores an ACL line whose role
/// `user.cfg` no longer has). Privilege names never hold a `:`.
pub(crate) const ROLE_MARK: &str = "role:";

/// The custom role an ACL entry grants, if it grants one.
pub(crate) fn custom_of(privs: &[String]) -> Option<&str> {
    match privs {
        [one] => one.strip_prefix(ROLE_MARK),
        _ => None,
    }
}

/// An entry's privileges with each custom role replaced by its current privileges.
pub(crate) fn expand(
    custom: &BTreeMap<String, std::collections::BTreeSet<String>>,
    privs: &[String],
) -> Vec<String> {
    privs
        .iter()
        .flat_map(|p| match p.strip_prefix(ROLE_MARK) {
            Some(role) => custom
                .get(role)
                .map(|set| set.iter().cloned().collect())
                .unwrap_or_default(),
            None => vec![p.clone()],
        })
        .collect()
}

/// The built-in role holding exactly `privs`, if one does.
pub(crate) fn named(version: PveVersion, privs: &[String]) -> Option<&'static str> {
    let mut sorted = privs.to_vec();
    sorted.sort();
    sorted.dedup();
    builtin(version)
        .into_iter()
        .find(|(_, p)| *p == sorted)
        .map(|(id, _)| id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_follow_the_release() {
        let v9 = builtin(PveVersion::V9_1);
        let v8 = builtin(PveVersion::V8_4);
        assert!(v9["PVEVMAdmin"].contains(&"VM.GuestAgent.Unrestricted".to_owned()));
        assert!(!v9["PVEVMAdmin"].contains(&"VM.Monitor".to_owned()));
        assert!(v8["PVEVMAdmin"].contains(&"VM.Monitor".to_owned()));
        assert_eq!(v9["PVETemplateUser"], ["VM.Audit", "VM.Clone"]);
        assert_eq!(v9["PVEAuditor"].len(), 7, "{:?}", v9["PVEAuditor"]);
        assert!(!v9["PVEAdmin"].contains(&"Mapping.Modify".to_owned()));
        assert!(
            !v9["PVEAdmin"].contains(&"Sys.Modify".to_owned()),
            "root privileges stay out"
        );
        assert_eq!(v9.len(), 17, "{:?}", v9.keys().collect::<Vec<_>>());
        assert_eq!(
            named(PveVersion::V9_1, &["VM.Clone".into(), "VM.Audit".into()]),
            Some("PVETemplateUser")
        );
    }
}
