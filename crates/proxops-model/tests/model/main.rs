//! The proxops-model test binary: one binary, one module per area.

mod support;

mod codes;
mod custom_kind;
mod expectations;
mod fuzz;
mod schema;
mod snapshots;
