//! The API's route table ([`ROUTES`]: method, path template, handler) and the request context
//! [`Ctx`] handlers work with. Handler modules: [`cluster`] (version, nodes, resources, nextid,
//! status, login), [`ha`] (HA resources), [`ha_groups`], [`ha_rules`] (PVE 9), [`ha_status`], [`mapping`] (PCI/USB resource mappings), [`sdn`]
//! (the SDN index, apply and VNets), [`sdn_zones`], [`sdn_subnets`], [`firewall`] (options; [`firewall_rules`], [`firewall_sets`] and [`firewall_groups`]), [`join`] (cluster join info), [`perms`] (who may write which config keys), [`access`] (effective permissions), [`access_groups`], [`access_roles`], [`guest`](mod@guest) (what qemu and lxc share),
//! [`clone`], [`qemu`], [`lxc`], [`snapshot`], [`pool`], [`agent`] (guest agent), [`interfaces`] (a guest's addresses, agent and LXC), [`migrate`], [`move_disk`] (and unlink), [`move_volume`] (LXC), [`backup`] (vzdump jobs and runs), [`reads`] (what monitoring tools read), [`network`] (node interfaces, bridges at start), [`disks`] (volume allocation and import), [`storage`]
//! (storages, content, download-url), [`upload`], [`aplinfo`] (appliance templates), [`tasks`] and [`debug`].

pub(crate) mod access;
pub(crate) mod access_groups;
pub(crate) mod access_roles;
pub(crate) mod access_write;
pub(crate) mod agent;
pub(crate) mod aplinfo;
pub(crate) mod backup;
pub(crate) mod clone;
pub(crate) mod cluster;
pub(crate) mod debug;
pub(crate) mod disks;
pub(crate) mod firewall;
pub(crate) mod firewall_groups;
pub(crate) mod firewall_rules;
pub(crate) mod firewall_sets;
pub(crate) mod guest;
pub(crate) mod ha;
pub(crate) mod ha_groups;
pub(crate) mod ha_rules;
pub(crate) mod ha_status;
pub(crate) mod hotplug;
pub(crate) mod interfaces;
pub(crate) mod join;
pub(crate) mod locks;
pub(crate) mod lxc;
pub(crate) mod mapping;
pub(crate) mod migrate;
pub(crate) mod move_disk;
pub(crate) mod move_volume;
pub(crate) mod network;
pub(crate) mod perms;
pub(crate) mod pool;
pub(crate) mod power;
pub(crate) mod qemu;
pub(crate) mod reads;
pub(crate) mod sdn;
pub(crate) mod sdn_subnets;
pub(crate) mod sdn_zones;
pub(crate) mod setconfig;
pub(crate) mod snapshot;
pub(crate) mod storage;
pub(crate) mod storage_config;
pub(crate) mod tasks;
pub(crate) mod tokens;
pub(crate) mod upload;

use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, MutexGuard};

use crate::auth::{self, Principal};
use crate::dispatch::percent_decode;
use crate::error::ApiError;
use crate::schema::parse_bool;
use crate::server::{Shared, lock};
use crate::state::{Guest, GuestType, State};

/// A handler: reads the context, answers the `data` value.
pub(crate) type Handler = fn(&mut Ctx) -> Result<Value, ApiError>;

/// Everything a handler knows about its request.
pub(crate) struct Ctx {
    pub shared: Arc<Shared>,
    pub principal: Option<Principal>,
    pub params: BTreeMap<String, String>,
    pub method: String,
    pub template: &'static str,
    /// This request's number for its `METHOD /template` (fault draws use it).
    pub n: u64,
    /// A `total` attribute beside `data` (task logs).
    pub total: Option<u64>,
    /// Work the handler left to be done before the call answers (a synchronous allocation).
    pub deferred: Option<crate::sync_work::Deferred>,
    /// A task the call waits for before it answers (`background_delay`): its UPID and the wait.
    pub background: Option<(String, std::time::Duration)>,
    /// The file of an upload (`POST .../storage/{storage}/upload`), named by `tmpfilename`.
    pub upload: Option<crate::multipart::Upload>,
    /// The ACL and pool membership as the request found them.
    pub access: Arc<auth::Access>,
}

impl Ctx {
    /// The same request without deferred work, for a job that makes the change later.
    pub fn detached(&self) -> Ctx {
        Ctx {
            shared: self.shared.clone(),
            principal: self.principal.clone(),
            params: self.params.clone(),
            method: self.method.clone(),
            template: self.template,
            n: self.n,
            total: None,
            deferred: None,
            background: None,
            upload: self.upload.clone(),
            access: self.access.clone(),
        }
    }

    pub fn p(&self, k: &str) -> Option<&str> {
        self.params.get(k).map(String::as_str)
    }

    pub fn req(&self, k: &str) -> Result<String, ApiError> {
        self.p(k)
            .map(str::to_string)
            .ok_or_else(|| ApiError::param(k, "property is missing and it is not optional"))
    }

    pub fn flag(&self, k: &str) -> Option<bool> {
        self.p(k).and_then(parse_bool)
    }

    pub fn int(&self, k: &str) -> Option<i64> {
        self.p(k)
            .and_then(|v| v.trim_start_matches('+').parse().ok())
    }

    pub fn node(&self) -> String {
        self.p("node").unwrap_or_default().to_string()
    }

    pub fn vmid(&self) -> u32 {
        self.p("vmid").and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    pub fn who(&self) -> Principal {
        self.principal.clone().unwrap_or(Principal {
            userid: "root@pam".into(),
            tokenid: None,
        })
    }

    pub fn require(&self, path: &str, privilege: &str) -> Result<(), ApiError> {
        auth::require(&self.shared, &self.access, &self.who(), path, privilege)
    }

    pub fn require_any(&self, path: &str, privileges: &[&str]) -> Result<(), ApiError> {
        auth::require_any(&self.shared, &self.access, &self.who(), path, privileges)
    }

    /// Whether the request's user is `root@pam` itself (a token never is).
    pub fn root(&self) -> bool {
        self.who().is_root()
    }

    pub fn allowed(&self, path: &str, privilege: &str) -> bool {
        auth::allowed(&self.shared, &self.access, &self.who(), path, privilege)
    }

    pub fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.shared.state)
    }

    /// Key of this request for fault draws.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.template)
    }
}

/// PVE's answer for a node that is not part of the cluster.
pub(crate) fn check_node(st: &State, node: &str) -> Result<(), ApiError> {
    if st.node(node).is_some() {
        Ok(())
    } else {
        Err(ApiError::fail(format!(
            "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
        )))
    }
}

/// PVE's message for a guest whose config file is not on that node.
pub(crate) fn no_config(kind: GuestType, node: &str, vmid: u32) -> ApiError {
    let dir = match kind {
        GuestType::Qemu => "qemu-server",
        GuestType::Lxc => "lxc",
    };
    ApiError::fail(format!(
        "Configuration file 'nodes/{node}/{dir}/{vmid}.conf' does not exist"
    ))
}

/// The guest of a kind on a node.
pub(crate) fn guest<'a>(
    st: &'a State,
    kind: GuestType,
    node: &str,
    vmid: u32,
) -> Result<&'a Guest, ApiError> {
    check_node(st, node)?;
    st.guests
        .get(&vmid)
        .filter(|g| g.kind == kind && g.node == node)
        .ok_or_else(|| no_config(kind, node, vmid))
}

macro_rules! routes {
    ($($m:literal $p:literal => $h:path,)*) => {
        /// Every implemented endpoint: method, path template, handler.
        pub(crate) static ROUTES: &[(&str, &str, Handler)] = &[$(($m, $p, $h),)*];
    };
}

routes! {
    "GET" "/version" => cluster::version,
    "GET" "/nodes" => cluster::nodes,
    "GET" "/nodes/{node}/status" => cluster::node_status,
    "GET" "/cluster/resources" => cluster::resources,
    "GET" "/cluster/nextid" => cluster::nextid,
    "GET" "/cluster/status" => cluster::status,
    "GET" "/cluster/ha/resources" => ha::list,
    "POST" "/cluster/ha/resources" => ha::create,
    "GET" "/cluster/ha/resources/{sid}" => ha::read,
    "PUT" "/cluster/ha/resources/{sid}" => ha::update,
    "DELETE" "/cluster/ha/resources/{sid}" => ha::delete,
    "GET" "/cluster/ha/groups" => ha_groups::list,
    "POST" "/cluster/ha/groups" => ha_groups::create,
    "GET" "/cluster/ha/groups/{group}" => ha_groups::read,
    "PUT" "/cluster/ha/groups/{group}" => ha_groups::update,
    "DELETE" "/cluster/ha/groups/{group}" => ha_groups::delete,
    "GET" "/cluster/ha/rules" => ha_rules::list,
    "POST" "/cluster/ha/rules" => ha_rules::create,
    "GET" "/cluster/ha/rules/{rule}" => ha_rules::read,
    "PUT" "/cluster/ha/rules/{rule}" => ha_rules::update,
    "DELETE" "/cluster/ha/rules/{rule}" => ha_rules::delete,
    "GET" "/cluster/ha/status/current" => ha_status::current,
    "GET" "/cluster/mapping/pci" => mapping::pci_list,
    "POST" "/cluster/mapping/pci" => mapping::pci_create,
    "GET" "/cluster/mapping/pci/{id}" => mapping::pci_get,
    "PUT" "/cluster/mapping/pci/{id}" => mapping::pci_update,
    "DELETE" "/cluster/mapping/pci/{id}" => mapping::pci_delete,
    "GET" "/cluster/mapping/usb" => mapping::usb_list,
    "POST" "/cluster/mapping/usb" => mapping::usb_create,
    "GET" "/cluster/mapping/usb/{id}" => mapping::usb_get,
    "PUT" "/cluster/mapping/usb/{id}" => mapping::usb_update,
    "DELETE" "/cluster/mapping/usb/{id}" => mapping::usb_delete,
    "GET" "/cluster/sdn/vnets" => sdn::vnets,
    "GET" "/cluster/sdn" => sdn::index,
    "PUT" "/cluster/sdn" => sdn::apply,
    "GET" "/cluster/sdn/zones" => sdn_zones::list,
    "POST" "/cluster/sdn/zones" => sdn_zones::create,
    "GET" "/cluster/sdn/zones/{zone}" => sdn_zones::read,
    "PUT" "/cluster/sdn/zones/{zone}" => sdn_zones::update,
    "DELETE" "/cluster/sdn/zones/{zone}" => sdn_zones::delete,
    "POST" "/cluster/sdn/vnets" => sdn::create,
    "GET" "/cluster/sdn/vnets/{vnet}" => sdn::read,
    "PUT" "/cluster/sdn/vnets/{vnet}" => sdn::update,
    "DELETE" "/cluster/sdn/vnets/{vnet}" => sdn::delete,
    "GET" "/cluster/sdn/vnets/{vnet}/subnets" => sdn_subnets::list,
    "POST" "/cluster/sdn/vnets/{vnet}/subnets" => sdn_subnets::create,
    "GET" "/cluster/sdn/vnets/{vnet}/subnets/{subnet}" => sdn_subnets::read,
    "PUT" "/cluster/sdn/vnets/{vnet}/subnets/{subnet}" => sdn_subnets::update,
    "DELETE" "/cluster/sdn/vnets/{vnet}/subnets/{subnet}" => sdn_subnets::delete,
    "GET" "/cluster/config/join" => join::join_info,
    "GET" "/cluster/firewall/options" => firewall::get_options,
    "PUT" "/cluster/firewall/options" => firewall::set_options,
    "GET" "/cluster/firewall/rules" => firewall_rules::list,
    "POST" "/cluster/firewall/rules" => firewall_rules::create,
    "GET" "/cluster/firewall/rules/{pos}" => firewall_rules::read,
    "PUT" "/cluster/firewall/rules/{pos}" => firewall_rules::update,
    "DELETE" "/cluster/firewall/rules/{pos}" => firewall_rules::delete,
    "GET" "/cluster/firewall/aliases" => firewall_sets::alias_list,
    "POST" "/cluster/firewall/aliases" => firewall_sets::alias_create,
    "GET" "/cluster/firewall/aliases/{name}" => firewall_sets::alias_read,
    "PUT" "/cluster/firewall/aliases/{name}" => firewall_sets::alias_update,
    "DELETE" "/cluster/firewall/aliases/{name}" => firewall_sets::alias_delete,
    "GET" "/cluster/firewall/ipset" => firewall_sets::ipset_list,
    "POST" "/cluster/firewall/ipset" => firewall_sets::ipset_create,
    "GET" "/cluster/firewall/ipset/{name}" => firewall_sets::ipset_read,
    "POST" "/cluster/firewall/ipset/{name}" => firewall_sets::ip_create,
    "DELETE" "/cluster/firewall/ipset/{name}" => firewall_sets::ipset_delete,
    "GET" "/cluster/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_read,
    "PUT" "/cluster/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_update,
    "DELETE" "/cluster/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_delete,
    "GET" "/cluster/firewall/groups" => firewall_groups::list,
    "POST" "/cluster/firewall/groups" => firewall_groups::create,
    "GET" "/cluster/firewall/groups/{group}" => firewall_rules::list,
    "POST" "/cluster/firewall/groups/{group}" => firewall_rules::create,
    "DELETE" "/cluster/firewall/groups/{group}" => firewall_groups::delete,
    "GET" "/cluster/firewall/groups/{group}/{pos}" => firewall_rules::read,
    "PUT" "/cluster/firewall/groups/{group}/{pos}" => firewall_rules::update,
    "DELETE" "/cluster/firewall/groups/{group}/{pos}" => firewall_rules::delete,
    "GET" "/nodes/{node}/firewall/options" => firewall::host_options,
    "GET" "/nodes/{node}/firewall/rules" => firewall::host_rules,
    "GET" "/access/permissions" => access::permissions,
    "GET" "/access/users" => access::users,
    "GET" "/access/groups" => access::groups,
    "GET" "/access/domains" => access::domains,
    "GET" "/access/acl" => access::acl,
    "GET" "/access/roles" => access::roles,
    "PUT" "/access/acl" => access_write::update,
    "GET" "/access/users/{userid}" => access_write::read_user,
    "POST" "/access/users" => access_write::create_user,
    "PUT" "/access/users/{userid}" => access_write::update_user,
    "DELETE" "/access/users/{userid}" => access_write::delete_user,
    "GET" "/access/users/{userid}/token" => tokens::list,
    "GET" "/access/users/{userid}/token/{tokenid}" => tokens::read,
    "POST" "/access/users/{userid}/token/{tokenid}" => tokens::create,
    "PUT" "/access/users/{userid}/token/{tokenid}" => tokens::update,
    "DELETE" "/access/users/{userid}/token/{tokenid}" => tokens::delete,
    "PUT" "/access/password" => access_write::change_password,
    "POST" "/access/groups" => access_groups::create,
    "GET" "/access/groups/{groupid}" => access_groups::read,
    "PUT" "/access/groups/{groupid}" => access_groups::update,
    "DELETE" "/access/groups/{groupid}" => access_groups::delete,
    "POST" "/access/roles" => access_roles::create,
    "GET" "/access/roles/{roleid}" => access_roles::read,
    "PUT" "/access/roles/{roleid}" => access_roles::update,
    "DELETE" "/access/roles/{roleid}" => access_roles::delete,
    "DELETE" "/storage/{storage}" => storage_config::delete,
    "POST" "/storage" => storage_config::create,
    "PUT" "/nodes/{node}/dns" => reads::dns_update,
    "GET" "/cluster/config/qdevice" => reads::qdevice,
    "POST" "/access/ticket" => cluster::ticket,
    "GET" "/storage" => storage_config::index,
    "GET" "/storage/{storage}" => storage_config::read,
    "PUT" "/storage/{storage}" => storage_config::update,
    "GET" "/cluster/backup-info/not-backed-up" => reads::not_backed_up,
    "GET" "/cluster/backup" => backup::index,
    "POST" "/cluster/backup" => backup::create,
    "GET" "/cluster/backup/{id}" => backup::read,
    "PUT" "/cluster/backup/{id}" => backup::update,
    "DELETE" "/cluster/backup/{id}" => backup::delete,
    "GET" "/cluster/backup/{id}/included_volumes" => backup::included_volumes,
    "POST" "/nodes/{node}/vzdump" => backup::vzdump,
    "GET" "/nodes/{node}/replication" => reads::replication,
    "GET" "/nodes/{node}/subscription" => reads::subscription,
    "GET" "/nodes/{node}/dns" => reads::dns,
    "GET" "/nodes/{node}/network" => network::index,
    "GET" "/pools" => pool::index,
    "POST" "/pools" => pool::create,
    "PUT" "/pools" => pool::update,
    "DELETE" "/pools" => pool::delete,
    "GET" "/pools/{poolid}" => pool::read,
    "PUT" "/pools/{poolid}" => pool::update,
    "DELETE" "/pools/{poolid}" => pool::delete,
    "GET" "/nodes/{node}/qemu" => qemu::list,
    "POST" "/nodes/{node}/qemu" => qemu::create,
    "GET" "/nodes/{node}/qemu/{vmid}" => guest::qemu_index,
    "DELETE" "/nodes/{node}/qemu/{vmid}" => guest::qemu_destroy,
    "GET" "/nodes/{node}/qemu/{vmid}/config" => guest::qemu_config,
    "POST" "/nodes/{node}/qemu/{vmid}/config" => qemu::config_async,
    "PUT" "/nodes/{node}/qemu/{vmid}/config" => qemu::config_sync,
    "GET" "/nodes/{node}/qemu/{vmid}/pending" => guest::qemu_pending,
    "GET" "/nodes/{node}/qemu/{vmid}/status/current" => guest::qemu_current,
    "POST" "/nodes/{node}/qemu/{vmid}/status/start" => power::qemu_start,
    "POST" "/nodes/{node}/qemu/{vmid}/status/stop" => power::qemu_stop,
    "POST" "/nodes/{node}/qemu/{vmid}/status/shutdown" => power::qemu_shutdown,
    "POST" "/nodes/{node}/qemu/{vmid}/status/reboot" => power::qemu_reboot,
    "POST" "/nodes/{node}/qemu/{vmid}/status/reset" => power::qemu_reset,
    "POST" "/nodes/{node}/qemu/{vmid}/status/suspend" => power::qemu_suspend,
    "POST" "/nodes/{node}/qemu/{vmid}/status/resume" => power::qemu_resume,
    "POST" "/nodes/{node}/qemu/{vmid}/clone" => guest::qemu_clone,
    "GET" "/nodes/{node}/qemu/{vmid}/migrate" => migrate::qemu_precondition,
    "POST" "/nodes/{node}/qemu/{vmid}/migrate" => migrate::qemu,
    "POST" "/nodes/{node}/qemu/{vmid}/move_disk" => move_disk::move_disk,
    "PUT" "/nodes/{node}/qemu/{vmid}/unlink" => move_disk::unlink,
    "POST" "/nodes/{node}/qemu/{vmid}/template" => guest::qemu_template,
    "PUT" "/nodes/{node}/qemu/{vmid}/resize" => guest::qemu_resize,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/options" => firewall::get_options,
    "PUT" "/nodes/{node}/qemu/{vmid}/firewall/options" => firewall::set_options,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/rules" => firewall_rules::list,
    "POST" "/nodes/{node}/qemu/{vmid}/firewall/rules" => firewall_rules::create,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}" => firewall_rules::read,
    "PUT" "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}" => firewall_rules::update,
    "DELETE" "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}" => firewall_rules::delete,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/aliases" => firewall_sets::alias_list,
    "POST" "/nodes/{node}/qemu/{vmid}/firewall/aliases" => firewall_sets::alias_create,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_read,
    "PUT" "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_update,
    "DELETE" "/nodes/{node}/qemu/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_delete,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/ipset" => firewall_sets::ipset_list,
    "POST" "/nodes/{node}/qemu/{vmid}/firewall/ipset" => firewall_sets::ipset_create,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}" => firewall_sets::ipset_read,
    "POST" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}" => firewall_sets::ip_create,
    "DELETE" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}" => firewall_sets::ipset_delete,
    "GET" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_read,
    "PUT" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_update,
    "DELETE" "/nodes/{node}/qemu/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_delete,
    "GET" "/nodes/{node}/qemu/{vmid}/agent" => agent::index,
    "POST" "/nodes/{node}/qemu/{vmid}/agent/ping" => agent::ping,
    "GET" "/nodes/{node}/qemu/{vmid}/agent/info" => agent::info,
    "GET" "/nodes/{node}/qemu/{vmid}/agent/network-get-interfaces" => agent::interfaces,
    "GET" "/nodes/{node}/qemu/{vmid}/agent/get-osinfo" => agent::osinfo,
    "GET" "/nodes/{node}/qemu/{vmid}/agent/get-host-name" => agent::host_name,
    "GET" "/nodes/{node}/qemu/{vmid}/agent/get-time" => agent::time,
    "GET" "/nodes/{node}/qemu/{vmid}/snapshot" => snapshot::qemu_list,
    "POST" "/nodes/{node}/qemu/{vmid}/snapshot" => snapshot::qemu_create,
    "GET" "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}" => snapshot::qemu_index,
    "DELETE" "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}" => snapshot::qemu_delete,
    "GET" "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config" => snapshot::qemu_config,
    "PUT" "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config" => snapshot::qemu_update,
    "POST" "/nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback" => snapshot::qemu_rollback,
    "GET" "/nodes/{node}/lxc" => lxc::list,
    "POST" "/nodes/{node}/lxc" => lxc::create,
    "GET" "/nodes/{node}/lxc/{vmid}" => guest::lxc_index,
    "DELETE" "/nodes/{node}/lxc/{vmid}" => guest::lxc_destroy,
    "GET" "/nodes/{node}/lxc/{vmid}/config" => guest::lxc_config,
    "PUT" "/nodes/{node}/lxc/{vmid}/config" => lxc::config_sync,
    "GET" "/nodes/{node}/lxc/{vmid}/pending" => guest::lxc_pending,
    "GET" "/nodes/{node}/lxc/{vmid}/status/current" => guest::lxc_current,
    "GET" "/nodes/{node}/lxc/{vmid}/interfaces" => interfaces::lxc,
    "POST" "/nodes/{node}/lxc/{vmid}/status/start" => power::lxc_start,
    "POST" "/nodes/{node}/lxc/{vmid}/status/stop" => power::lxc_stop,
    "POST" "/nodes/{node}/lxc/{vmid}/status/shutdown" => power::lxc_shutdown,
    "POST" "/nodes/{node}/lxc/{vmid}/status/reboot" => power::lxc_reboot,
    "POST" "/nodes/{node}/lxc/{vmid}/status/suspend" => power::lxc_suspend,
    "POST" "/nodes/{node}/lxc/{vmid}/status/resume" => power::lxc_resume,
    "POST" "/nodes/{node}/lxc/{vmid}/clone" => guest::lxc_clone,
    "POST" "/nodes/{node}/lxc/{vmid}/migrate" => migrate::lxc,
    "POST" "/nodes/{node}/lxc/{vmid}/move_volume" => move_volume::move_volume,
    "POST" "/nodes/{node}/lxc/{vmid}/template" => guest::lxc_template,
    "PUT" "/nodes/{node}/lxc/{vmid}/resize" => guest::lxc_resize,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/options" => firewall::get_options,
    "PUT" "/nodes/{node}/lxc/{vmid}/firewall/options" => firewall::set_options,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/rules" => firewall_rules::list,
    "POST" "/nodes/{node}/lxc/{vmid}/firewall/rules" => firewall_rules::create,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}" => firewall_rules::read,
    "PUT" "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}" => firewall_rules::update,
    "DELETE" "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}" => firewall_rules::delete,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/aliases" => firewall_sets::alias_list,
    "POST" "/nodes/{node}/lxc/{vmid}/firewall/aliases" => firewall_sets::alias_create,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_read,
    "PUT" "/nodes/{node}/lxc/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_update,
    "DELETE" "/nodes/{node}/lxc/{vmid}/firewall/aliases/{name}" => firewall_sets::alias_delete,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/ipset" => firewall_sets::ipset_list,
    "POST" "/nodes/{node}/lxc/{vmid}/firewall/ipset" => firewall_sets::ipset_create,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}" => firewall_sets::ipset_read,
    "POST" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}" => firewall_sets::ip_create,
    "DELETE" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}" => firewall_sets::ipset_delete,
    "GET" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_read,
    "PUT" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_update,
    "DELETE" "/nodes/{node}/lxc/{vmid}/firewall/ipset/{name}/{cidr}" => firewall_sets::ip_delete,
    "GET" "/nodes/{node}/lxc/{vmid}/snapshot" => snapshot::lxc_list,
    "POST" "/nodes/{node}/lxc/{vmid}/snapshot" => snapshot::lxc_create,
    "GET" "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}" => snapshot::lxc_index,
    "DELETE" "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}" => snapshot::lxc_delete,
    "GET" "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config" => snapshot::lxc_config,
    "PUT" "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/config" => snapshot::lxc_update,
    "POST" "/nodes/{node}/lxc/{vmid}/snapshot/{snapname}/rollback" => snapshot::lxc_rollback,
    "GET" "/nodes/{node}/storage" => storage::list,
    "GET" "/nodes/{node}/storage/{storage}/content" => storage::content,
    "GET" "/nodes/{node}/storage/{storage}/content/{volume}" => storage::volume_info,
    "DELETE" "/nodes/{node}/storage/{storage}/content/{volume}" => storage::volume_delete,
    "POST" "/nodes/{node}/storage/{storage}/download-url" => storage::download_url,
    "POST" "/nodes/{node}/storage/{storage}/upload" => upload::upload,
    "GET" "/nodes/{node}/aplinfo" => aplinfo::list,
    "POST" "/nodes/{node}/aplinfo" => aplinfo::download,
    "GET" "/nodes/{node}/tasks" => tasks::list,
    "GET" "/nodes/{node}/tasks/{upid}/status" => tasks::status,
    "GET" "/nodes/{node}/tasks/{upid}/log" => tasks::log,
    "DELETE" "/nodes/{node}/tasks/{upid}" => tasks::stop,
}

/// The implemented `(method, path template)` pairs (the conformance test walks them).
pub fn implemented() -> Vec<(&'static str, &'static str)> {
    ROUTES.iter().map(|(m, p, _)| (*m, *p)).collect()
}

fn match_template(template: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let t: Vec<&str> = template.trim_start_matches('/').split('/').collect();
    let p: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    let mut vars = BTreeMap::new();
    for (i, seg) in t.iter().enumerate() {
        let last = i + 1 == t.len();
        match seg.strip_prefix('{').and_then(|s| s.strip_suffix('}')) {
            // A volume id may carry unescaped slashes (`local:iso/x.iso`): it takes the rest.
            // So may an IP set entry's CIDR (`fragmentDelimiter => ''` in pve-firewall
            // `IPSet.pm`): `.../ipset/{name}/10.0.0.0/8`.
            Some(rest @ ("volume" | "cidr")) if last && p.len() > i => {
                vars.insert(rest.into(), percent_decode(&p[i..].join("/"), false));
                return Some(vars);
            }
            Some(name) => {
                let v = p.get(i).filter(|v| !v.is_empty())?;
                vars.insert(name.to_string(), percent_decode(v, false));
            }
            None if p.get(i) == Some(seg) => {}
            None => return None,
        }
    }
    (p.len() == t.len()).then_some(vars)
}

/// Finds the route for a request path (relative to `/api2/json`).
pub(crate) fn route(
    method: &str,
    path: &str,
) -> Option<(&'static str, Handler, BTreeMap<String, String>)> {
    ROUTES.iter().find_map(|(m, t, h)| {
        if *m != method {
            return None;
        }
        match_template(t, path).map(|vars| (*t, *h, vars))
    })
}
