//! PVE's guest config keys, as the official API schemas of PVE 8.4 and 9.1 define them
//! (`proxops-pve-schema`'s generated table, facts only), and what ProxOps makes
//! of each key ([`classify`]): set by a typed manifest field, set through a manifest's
//! `pve-config:` map, or left to PVE and reported.
//!
//! [`check_value`] checks a value as PVE's `PVE::JSONSchema` does before an update runs: type
//! (`integer`, `number`, `boolean`), enum, range, length, pattern, named format, and for a
//! property string (`key=value,...`) each sub-key with its own rules, the required ones and the
//! default key.

pub(crate) mod check;
mod classify;
mod formats;
mod schema;
mod value;

pub use check::{
    check_param_item, check_param_value, check_sub_value, check_value, normalize_value,
    parse_property_string,
};

/// Checks a value against one of PVE's named formats (`pve-volume-id`, `pve-cpuset`, ...);
/// formats ProxOps does not know pass.
pub fn check_format(format: &str, value: &str) -> Result<(), String> {
    formats::check_named(format, value)
}
pub use classify::{KeyClass, TypedField, classify, typed_fields, typed_sub_keys};
pub use schema::pve_config_schema;
pub(crate) use schema::{LxcPveConfig, QemuPveConfig};
pub(crate) use value::check_pve_config;
pub use value::{PveConfig, PveValue};

/// The facts, from the one generated table of `proxops-pve-schema`: a config key's definition
/// is the parameter of the config update endpoint (`Key`).
pub use proxops_pve_schema::{
    Fmt, Param as Key, PveRelease, Sub, Ty, Versions, key, keys, max_index, releases_of,
    split_indexed,
};
