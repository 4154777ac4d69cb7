//! Where PVE keeps each kind of cluster object: its list, create, update and delete endpoints,
//! the field its list names it by, and the free-text field ProxOps marks it in (if any). Facts of
//! PVE's API (`../shared/pve-api/pve-api-9.1.3.tree.json`); the parameters themselves come
//! from the schema table (`proxops-pve-schema`).

use proxops_model::kinds::ObjectClass;
use proxops_model::kinds::object::MappingType;

/// How objects of a list are reconciled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Shape {
    /// One object of a list, by id: created, updated, deleted.
    Item,
    /// An ACL entry: granted and revoked through `PUT /access/acl`.
    AclEntry,
    /// The options of a singleton (the cluster's or a guest's firewall): only updated, the
    /// keys the manifest sets.
    Options,
    /// An ordered list of firewall rules: ProxOps's rules (marked with their index) are
    /// created, changed, moved and deleted; rules added by hand stay where they are.
    Rules,
}

/// The endpoints and fields of one list of cluster objects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoints {
    /// The list's template (`GET`; one request per plan).
    pub list: &'static str,
    /// The template that creates an object (`POST`; `PUT` for ACL entries). When it is `item`
    /// (an API token's), the object is created at its own path, the id in the path rather than
    /// a parameter ([`Endpoints::creates_at_item`]).
    pub create: &'static str,
    /// The object's own template, its id as the last `{...}` (`PUT` updates, `DELETE`
    /// removes); for [`Shape::Options`] the options' own path.
    pub item: &'static str,
    /// Values of the templates' other placeholders (`node`, `vmid`, a set's `name`).
    pub vars: Vec<(&'static str, String)>,
    /// The list field that holds the id (what desired objects are matched by).
    pub id_field: &'static str,
    /// The create parameter that holds the id (`id_field` unless they differ: a subnet is
    /// created with `subnet=<cidr>` and listed with its `cidr`).
    pub id_param: &'static str,
    /// The list field whose value names the object in its own path when it is not the id
    /// (a subnet's `<zone>-<network>-<mask>`).
    pub path_field: Option<&'static str>,
    /// SDN configuration: read with `pending=1`, its values the pending ones, and applied by
    /// `PUT /cluster/sdn` once written.
    pub sdn: bool,
    /// The free-text field that carries ProxOps's mark, where PVE has one. Without one,
    /// ownership is proven by a receipt on the observed plane.
    pub marker: Option<&'static str>,
    /// How its objects are reconciled.
    pub shape: Shape,
}

impl Endpoints {
    fn fixed(
        list: &'static str,
        item: &'static str,
        id_field: &'static str,
        marker: Option<&'static str>,
    ) -> Endpoints {
        Endpoints {
            list,
            create: list,
            item,
            vars: Vec::new(),
            id_field,
            id_param: id_field,
            path_field: None,
            sdn: false,
            marker,
            shape: Shape::Item,
        }
    }

    fn sdn(mut self) -> Endpoints {
        self.sdn = true;
        self
    }

    /// `template` with the placeholders of `vars` filled in.
    fn fill(&self, template: &str) -> String {
        let mut out = template.to_owned();
        for (k, v) in &self.vars {
            out = out.replace(&format!("{{{k}}}"), &encode_segment(v));
        }
        out
    }

    /// The concrete list path: what the plan reads, and the key its reads are kept under.
    pub fn list_path(&self) -> String {
        self.fill(self.list)
    }

    /// The concrete create path.
    pub fn create_path(&self) -> String {
        self.fill(self.create)
    }

    /// Whether an object is created by a `POST` to its own path (`/access/users/{userid}/token/
    /// {tokenid}`), the id in the path, rather than to its list with the id as a parameter.
    pub fn creates_at_item(&self) -> bool {
        self.shape == Shape::Item && self.create == self.item
    }

    /// The item path of object `id`.
    pub fn item_path(&self, id: &str) -> String {
        let filled = self.fill(self.item);
        match (self.shape, filled.rfind('{')) {
            (Shape::Options, _) | (_, None) => filled,
            (_, Some(at)) => format!("{}{}", &filled[..at], encode_segment(id)),
        }
    }
}

/// The endpoints of `class` (a mapping's depend on its type). The firewall's parts have their
/// own ([`firewall`]).
pub fn endpoints(class: ObjectClass, mapping: Option<MappingType>) -> Endpoints {
    match class {
        ObjectClass::Storage => Endpoints::fixed("/storage", "/storage/{storage}", "storage", None),
        ObjectClass::Pool => {
            Endpoints::fixed("/pools", "/pools/{poolid}", "poolid", Some("comment"))
        }
        ObjectClass::BackupJob => Endpoints::fixed(
            "/cluster/backup",
            "/cluster/backup/{id}",
            "id",
            Some("comment"),
        ),
        ObjectClass::Mapping => match mapping {
            Some(MappingType::Usb) => Endpoints::fixed(
                "/cluster/mapping/usb",
                "/cluster/mapping/usb/{id}",
                "id",
                Some("description"),
            ),
            _ => Endpoints::fixed(
                "/cluster/mapping/pci",
                "/cluster/mapping/pci/{id}",
                "id",
                Some("description"),
            ),
        },
        ObjectClass::User => Endpoints::fixed(
            "/access/users",
            "/access/users/{userid}",
            "userid",
            Some("comment"),
        ),
        ObjectClass::Group => Endpoints::fixed(
            "/access/groups",
            "/access/groups/{groupid}",
            "groupid",
            Some("comment"),
        ),
        ObjectClass::Role => {
            Endpoints::fixed("/access/roles", "/access/roles/{roleid}", "roleid", None)
        }
        // A user's tokens: `vars` name the user (`userid`); created by a `POST` to the token's
        // own path.
        ObjectClass::ApiToken => Endpoints {
            create: "/access/users/{userid}/token/{tokenid}",
            ..Endpoints::fixed(
                "/access/users/{userid}/token",
                "/access/users/{userid}/token/{tokenid}",
                "tokenid",
                Some("comment"),
            )
        },
        ObjectClass::Firewall => firewall(FirewallPart::Options, &[]),
        ObjectClass::SdnZone => Endpoints::fixed(
            "/cluster/sdn/zones",
            "/cluster/sdn/zones/{zone}",
            "zone",
            None,
        )
        .sdn(),
        ObjectClass::SdnVnet => Endpoints::fixed(
            "/cluster/sdn/vnets",
            "/cluster/sdn/vnets/{vnet}",
            "vnet",
            None,
        )
        .sdn(),
        ObjectClass::SdnSubnet => Endpoints {
            id_param: "subnet",
            path_field: Some("subnet"),
            ..Endpoints::fixed(
                "/cluster/sdn/vnets/{vnet}/subnets",
                "/cluster/sdn/vnets/{vnet}/subnets/{subnet}",
                "cidr",
                None,
            )
            .sdn()
        },
        _ => Endpoints {
            shape: Shape::AclEntry,
            ..Endpoints::fixed("/access/acl", "/access/acl", "", None)
        },
    }
}

/// A part of a firewall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirewallPart {
    /// The cluster's options.
    Options,
    /// The cluster's rules.
    Rules,
    /// Aliases.
    Aliases,
    /// IP sets.
    IpSets,
    /// The entries of IP set `name` (var).
    IpSetEntries,
    /// Security groups.
    Groups,
    /// The rules of security group `group` (var).
    GroupRules,
    /// A guest's options (`node`, `vmid` vars; `qemu` or `lxc` by [`guest_firewall`]).
    GuestOptions,
    /// A guest's rules.
    GuestRules,
}

/// The endpoints of a part of the cluster's firewall, `vars` filling its placeholders.
pub fn firewall(part: FirewallPart, vars: &[(&'static str, String)]) -> Endpoints {
    let mut e = match part {
        FirewallPart::Options | FirewallPart::GuestOptions => Endpoints {
            shape: Shape::Options,
            ..Endpoints::fixed(
                "/cluster/firewall/options",
                "/cluster/firewall/options",
                "",
                None,
            )
        },
        FirewallPart::Rules | FirewallPart::GuestRules => Endpoints {
            shape: Shape::Rules,
            ..Endpoints::fixed(
                "/cluster/firewall/rules",
                "/cluster/firewall/rules/{pos}",
                "pos",
                Some("comment"),
            )
        },
        FirewallPart::Aliases => Endpoints::fixed(
            "/cluster/firewall/aliases",
            "/cluster/firewall/aliases/{name}",
            "name",
            Some("comment"),
        ),
        FirewallPart::IpSets => Endpoints::fixed(
            "/cluster/firewall/ipset",
            "/cluster/firewall/ipset/{name}",
            "name",
            Some("comment"),
        ),
        FirewallPart::IpSetEntries => Endpoints::fixed(
            "/cluster/firewall/ipset/{name}",
            "/cluster/firewall/ipset/{name}/{cidr}",
            "cidr",
            Some("comment"),
        ),
        FirewallPart::Groups => Endpoints::fixed(
            "/cluster/firewall/groups",
            "/cluster/firewall/groups/{group}",
            "group",
            Some("comment"),
        ),
        FirewallPart::GroupRules => Endpoints {
            shape: Shape::Rules,
            ..Endpoints::fixed(
                "/cluster/firewall/groups/{group}",
                "/cluster/firewall/groups/{group}/{pos}",
                "pos",
                Some("comment"),
            )
        },
    };
    e.vars = vars.to_vec();
    e
}

/// The endpoints of a guest's firewall options or rules (`qemu` or `lxc`).
pub fn guest_firewall(rules: bool, lxc: bool, node: &str, vmid: u32) -> Endpoints {
    let vars = vec![("node", node.to_owned()), ("vmid", vmid.to_string())];
    let (list, item) = match (rules, lxc) {
        (false, false) => (
            "/nodes/{node}/qemu/{vmid}/firewall/options",
            "/nodes/{node}/qemu/{vmid}/firewall/options",
        ),
        (false, true) => (
            "/nodes/{node}/lxc/{vmid}/firewall/options",
            "/nodes/{node}/lxc/{vmid}/firewall/options",
        ),
        (true, false) => (
            "/nodes/{node}/qemu/{vmid}/firewall/rules",
            "/nodes/{node}/qemu/{vmid}/firewall/rules/{pos}",
        ),
        (true, true) => (
            "/nodes/{node}/lxc/{vmid}/firewall/rules",
            "/nodes/{node}/lxc/{vmid}/firewall/rules/{pos}",
        ),
    };
    Endpoints {
        list,
        create: list,
        item,
        vars,
        id_field: if rules { "pos" } else { "" },
        id_param: if rules { "pos" } else { "" },
        path_field: None,
        sdn: false,
        marker: rules.then_some("comment"),
        shape: if rules { Shape::Rules } else { Shape::Options },
    }
}

/// The endpoints of `class` whose list is `list` (a mapping's type follows from its list).
pub fn endpoints_of_class(class: ObjectClass, list: &str) -> Endpoints {
    let mapping = if list.ends_with("/usb") {
        MappingType::Usb
    } else {
        MappingType::Pci
    };
    endpoints(class, Some(mapping))
}

/// `id` as one path segment: `@` and `!` stay (PVE's user and token ids), anything that is not
/// an id character is percent-encoded.
fn encode_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        // An IP set entry's CIDR keeps its `/` (PVE's clients send it so), IPv6 its `:`.
        if b.is_ascii_alphanumeric()
            || matches!(b, b'-' | b'_' | b'.' | b'@' | b'!' | b'~' | b'/' | b':')
        {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
