//! The proxops-pve-sim test binary: drives the simulator over real HTTPS with reqwest, one module
//! per area, plus the conformance test against PVE's API schema.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod support;

mod access_groups;
mod access_write;
mod addresses;
mod auth;
mod clone;
mod cluster;
mod conformance;
mod download;
mod faults;
mod firewall;
mod ha;
mod ha_config;
mod ha_rules;
mod journal;
mod lxc;
mod mapping;
mod migrate;
mod params;
mod pool;
mod power;
mod privileges;
mod proxy;
mod qemu;
mod reads;
mod sdn;
mod seed;
mod snapshot;
mod state;
mod storage;
mod storage_config;
mod tasks;
mod tls;
mod tokens;
mod tools;
mod versions;
