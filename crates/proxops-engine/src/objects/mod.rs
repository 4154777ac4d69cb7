//! A cluster's own objects (issue 32): storages, pools, backup jobs, resource mappings, users,
//! groups, roles and ACL entries, as the planner and executor handle them.
//!
//! - [`DesiredObject`] (`desired.rs`): what a manifest asks, as the parameters PVE's create
//!   endpoint takes, with ProxOps's mark in the free-text field where PVE has one.
//! - [`Endpoints`] (`class.rs`): where PVE keeps each class.
//! - `live.rs`: one list request per class, read into objects by id.
//! - [`ObjValue`] and [`same`] (`value.rs`): values compared in the form PVE keeps.
//! - `request.rs`: the create, update and delete calls.
//! - [`rules`]: firewall rule lists, ProxOps's rules marked with their index.
//! - [`token`]: an API token's create, its secret encrypted with SOPS at once.

mod class;
mod desired;
mod live;
mod request;
pub mod rules;
pub mod token;
mod value;

pub use class::{
    Endpoints, FirewallPart, Shape, endpoints, endpoints_of_class, firewall, guest_firewall,
};
pub use desired::{
    DesiredObject, acl_id, guest_firewall_objects, mark, marks_in, objects, strip_marks,
};
pub use live::{
    LiveList, LiveParams, OPTIONS, parse, parse_with_deletions, pending, read, read_with_deletions,
};
pub(crate) use request::{
    Found, ObjectRequest, carried, create_request, delete_request, update_request,
};
pub use value::{ObjValue, same};
