//! Where PVE keeps each kind of cluster object: its list, create, update and delete endpoints,
//! the field its list names it by, and the free-text field ProxOps marks it in (if any). Facts of
//! PVE's API (`../shared/pve-api/pve-api-9.1.3.tree.json`); the parameters themselves come
//! from the schema table (`proxops-pve-schema`).

use proxops_model::kinds::ObjectClass;
use proxops_model::kinds::object::MappingType;

/// The endpoints and fields of one class of cluster object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Endpoints {
    /// `GET` of every object of the class (one request per plan).
    pub list: &'static str,
    /// `POST` that creates one (`PUT` for ACL entries).
    pub create: &'static str,
    /// The object's own path, `{id}` standing for its id (`PUT` updates, `DELETE` removes).
    pub item: &'static str,
    /// The create parameter and list field that hold the id.
    pub id_field: &'static str,
    /// The free-text field that carries ProxOps's mark, where PVE has one. Without one,
    /// ownership is proven by a receipt on the observed plane.
    pub marker: Option<&'static str>,
}

/// The endpoints of `class` (a mapping's depend on its type).
pub fn endpoints(class: ObjectClass, mapping: Option<MappingType>) -> Endpoints {
    match class {
        ObjectClass::Storage => Endpoints {
            list: "/storage",
            create: "/storage",
            item: "/storage/{storage}",
            id_field: "storage",
            marker: None,
        },
        ObjectClass::Pool => Endpoints {
            list: "/pools",
            create: "/pools",
            item: "/pools/{poolid}",
            id_field: "poolid",
            marker: Some("comment"),
        },
        ObjectClass::BackupJob => Endpoints {
            list: "/cluster/backup",
            create: "/cluster/backup",
            item: "/cluster/backup/{id}",
            id_field: "id",
            marker: Some("comment"),
        },
        ObjectClass::Mapping => match mapping {
            Some(MappingType::Usb) => Endpoints {
                list: "/cluster/mapping/usb",
                create: "/cluster/mapping/usb",
                item: "/cluster/mapping/usb/{id}",
                id_field: "id",
                marker: Some("description"),
            },
            _ => Endpoints {
                list: "/cluster/mapping/pci",
                create: "/cluster/mapping/pci",
                item: "/cluster/mapping/pci/{id}",
                id_field: "id",
                marker: Some("description"),
            },
        },
        ObjectClass::User => Endpoints {
            list: "/access/users",
            create: "/access/users",
            item: "/access/users/{userid}",
            id_field: "userid",
            marker: Some("comment"),
        },
        ObjectClass::Group => Endpoints {
            list: "/access/groups",
            create: "/access/groups",
            item: "/access/groups/{groupid}",
            id_field: "groupid",
            marker: Some("comment"),
        },
        ObjectClass::Role => Endpoints {
            list: "/access/roles",
            create: "/access/roles",
            item: "/access/roles/{roleid}",
            id_field: "roleid",
            marker: None,
        },
        // Entries are written and removed through `PUT /access/acl`; `item` is unused.
        _ => Endpoints {
            list: "/access/acl",
            create: "/access/acl",
            item: "/access/acl",
            id_field: "",
            marker: None,
        },
    }
}

impl Endpoints {
    /// The item path of object `id`.
    pub fn item_path(&self, id: &str) -> String {
        match self.item.find('{') {
            Some(at) => format!("{}{}", &self.item[..at], encode_segment(id)),
            None => self.item.to_owned(),
        }
    }
}

/// `id` as one path segment: `@` and `!` stay (PVE's user and token ids), anything that is not
/// an id character is percent-encoded.
fn encode_segment(id: &str) -> String {
    let mut out = String::with_capacity(id.len());
    for b in id.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@' | b'!' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
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
