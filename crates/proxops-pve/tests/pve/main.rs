//! Integration tests of the PVE client: against the in-process simulator (`proxops-pve-sim`)
//! for every endpoint, task waits, faults, TLS and auth; against the third-party `fakepve` for
//! the core read/create/wait/delete path; and the property-string codec against the schema.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

mod auth;
mod endpoints;
mod fakepve;
mod faults;
mod inventory;
mod props;
mod refusals;
mod support;
mod tasks;
mod tls;
mod tracing_spans;
