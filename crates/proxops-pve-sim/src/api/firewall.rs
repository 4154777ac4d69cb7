//! The firewall's options and what the firewall handlers share, as pve-firewall
//! `src/PVE/API2/Firewall/{Cluster,VM,Host}.pm` answer them: which file a request works on
//! ([`Target`]: `cluster.fw` or a guest's `<vmid>.fw`), its permissions
//! (`rules_audit_permissions`/`rules_modify_permissions`: `Sys.Audit`/`Sys.Modify` on `/` for
//! the cluster and security groups, `VM.Audit`/`VM.Config.Network` on `/vms/<vmid>` for a
//! guest), loading and saving it ([`crate::firewall`]). A file that does not exist reads as
//! empty: options only `digest` (every option at its schema default), empty lists. The node's
//! `host.fw` is not modelled (its reads answer as an empty file). Rules are in
//! [`super::firewall_rules`], aliases and IP sets in [`super::firewall_sets`], security groups
//! in [`super::firewall_groups`].

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::error::ApiError;
use crate::firewall::verify::{Env, Scope};
use crate::firewall::{FwConf, options_json};
use crate::state::{GuestType, State};

/// The file a request works on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// `cluster.fw`.
    Cluster,
    /// `<vmid>.fw` through a guest kind's path.
    Guest(u32, GuestType),
}

impl Target {
    /// The target of a request from its path: `/cluster/...` or a guest's (its node checked).
    pub fn of(ctx: &Ctx) -> Result<Target, ApiError> {
        if ctx.template.starts_with("/cluster/") {
            return Ok(Target::Cluster);
        }
        check_node(&ctx.state(), &ctx.node())?;
        let kind = if ctx.template.contains("/lxc/") {
            GuestType::Lxc
        } else {
            GuestType::Qemu
        };
        Ok(Target::Guest(ctx.vmid(), kind))
    }

    /// `rules_audit_permissions`.
    pub fn audit(self, ctx: &Ctx) -> Result<(), ApiError> {
        match self {
            Target::Cluster => ctx.require("/", "Sys.Audit"),
            Target::Guest(vmid, _) => ctx.require(&format!("/vms/{vmid}"), "VM.Audit"),
        }
    }

    /// `rules_modify_permissions`.
    pub fn modify(self, ctx: &Ctx) -> Result<(), ApiError> {
        match self {
            Target::Cluster => ctx.require("/", "Sys.Modify"),
            Target::Guest(vmid, _) => ctx.require(&format!("/vms/{vmid}"), "VM.Config.Network"),
        }
    }

    /// `verify_rule`'s `$rule_env` for the file's own rules.
    pub fn env(self) -> Env {
        match self {
            Target::Cluster => Env::Cluster,
            Target::Guest(_, GuestType::Qemu) => Env::Vm,
            Target::Guest(_, GuestType::Lxc) => Env::Ct,
        }
    }

    /// The file as loaded (empty when it does not exist).
    pub fn load(self, st: &State) -> FwConf {
        match self {
            Target::Cluster => st.firewall.cluster.clone(),
            Target::Guest(vmid, _) => st.firewall.guests.get(&vmid).cloned().unwrap_or_default(),
        }
    }

    /// `save_clusterfw_conf`/`save_vmfw_conf`: the file written (removed when empty).
    pub fn save(self, st: &mut State, conf: &FwConf) {
        let conf = conf.saved();
        match self {
            Target::Cluster => st.firewall.cluster = conf,
            Target::Guest(vmid, _) if conf.is_empty() => {
                st.firewall.guests.remove(&vmid);
            }
            Target::Guest(vmid, _) => {
                st.firewall.guests.insert(vmid, conf);
            }
        }
    }

    /// The configs a loaded file's names resolve in (`generic_fw_config_parser` passes the
    /// cluster config and the file being read).
    pub fn load_scope<'a>(self, st: &'a State, conf: &'a FwConf) -> Scope<'a> {
        match self {
            Target::Cluster => Scope {
                cluster: Some(conf),
                local: Some(conf),
            },
            Target::Guest(..) => Scope {
                cluster: Some(&st.firewall.cluster),
                local: Some(conf),
            },
        }
    }

    /// The configs the API's `verify_rule` and `resolve_alias` get: the cluster handlers'
    /// `load_config` returns no cluster config beside the file.
    pub fn api_scope<'a>(self, st: &'a State, conf: &'a FwConf) -> Scope<'a> {
        match self {
            Target::Cluster => Scope {
                cluster: None,
                local: Some(conf),
            },
            Target::Guest(..) => self.load_scope(st, conf),
        }
    }
}

/// `PVE::Tools::assert_if_modified`.
pub(crate) fn assert_digest(ctx: &Ctx, digest: &str) -> Result<(), ApiError> {
    match ctx.p("digest") {
        Some(d) if !d.is_empty() && d != digest => Err(ApiError::fail(
            "detected modified configuration - file changed by other user? Try again.",
        )),
        _ => Ok(()),
    }
}

/// `$cluster_option_properties` and `$vm_option_properties`: the options and whether each is
/// a boolean (stored as 0 or 1).
const CLUSTER_OPTIONS: &[(&str, bool)] = &[
    ("enable", false),
    ("ebtables", true),
    ("policy_in", false),
    ("policy_out", false),
    ("policy_forward", false),
    ("log_ratelimit", false),
];
const VM_OPTIONS: &[(&str, bool)] = &[
    ("enable", true),
    ("macfilter", true),
    ("dhcp", true),
    ("ndp", true),
    ("radv", true),
    ("ipfilter", true),
    ("policy_in", false),
    ("policy_out", false),
    ("log_level_in", false),
    ("log_level_out", false),
];

/// `GET .../firewall/options`: pve-firewall `Cluster.pm` `get_options` (Sys.Audit on `/`) and
/// `VM.pm` `get_options` (VM.Audit on the guest, which need not exist: PVE reads `<vmid>.fw`
/// without asking): `copy_opject_with_digest` of the options.
pub(crate) fn get_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.audit(ctx)?;
    let conf = target.load(&ctx.state());
    Ok(options_json(target == Target::Cluster, &conf.options).0)
}

/// `PUT .../firewall/options`: `Cluster.pm` `set_options` (Sys.Modify on `/`) and `VM.pm`
/// `set_options` (VM.Config.Network on the guest): the digest, `delete` (an unknown option is
/// a parameter error), then the options given. A cluster `enable` above 1 is stored as the
/// current time (the anti-lockout call; it reads as 0 after a minute).
pub(crate) fn set_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let target = Target::of(ctx)?;
    target.modify(ctx)?;
    let cluster = target == Target::Cluster;
    let props = if cluster { CLUSTER_OPTIONS } else { VM_OPTIONS };
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let mut conf = target.load(&st);
    assert_digest(ctx, &options_json(cluster, &conf.options).1)?;
    for opt in crate::schema::split_list(ctx.p("delete").unwrap_or_default()) {
        if !props.iter().any(|(k, _)| *k == opt) {
            return Err(ApiError::param("delete", format!("no such option '{opt}'")));
        }
        conf.options.remove(&opt);
    }
    for (key, boolean) in props {
        let Some(value) = ctx.p(key) else { continue };
        let value = if *boolean {
            let on = crate::schema::parse_bool(value).unwrap_or(false);
            u8::from(on).to_string()
        } else if cluster && *key == "enable" && ctx.int("enable").is_some_and(|n| n > 1) {
            (crate::auth::now_ms() / 1000).to_string()
        } else {
            value.to_owned()
        };
        conf.options.insert((*key).to_owned(), value);
    }
    target.save(&mut st, &conf);
    shared.persist(&st);
    Ok(Value::Null)
}

/// `GET /nodes/{node}/firewall/options` and `.../rules` (`Host.pm`, Sys.Audit on the node):
/// the node's `host.fw`, which the simulator does not model, reads as empty.
pub(crate) fn host_options(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    check_node(&ctx.state(), &node)?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    Ok(options_json(false, &Default::default()).0)
}

pub(crate) fn host_rules(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    check_node(&ctx.state(), &node)?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    Ok(json!([]))
}
