//! The proxops-model test binary: one binary, one module per area.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod api_token;
mod codes;
mod custom_kind;
mod expectations;
mod fuzz;
mod guest_options;
mod passthrough;
mod placement;
mod pve_config;
mod pve_enums;
mod references;
mod schema;
mod snapshots;
mod stacks;
mod takeover;
mod update_policy;
