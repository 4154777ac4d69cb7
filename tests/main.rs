//! ProxOps end to end, in one test binary (one link instead of one per area): each module
//! drives the `proxops` binary, the engine, the simulator and git repositories in temporary
//! directories. Shared helpers are `proxops-test-support` and `support.rs`.

mod addresses;
mod adopt;
mod agent;
mod ansible;
mod api_token;
mod delete;
mod engine;
mod examples;
mod firewall;
mod git_http;
mod guarded;
mod honest;
mod init;
mod interop;
mod kinds;
mod locks;
mod materialized;
mod migration_refusals;
mod objects;
mod placement;
mod placement_prop;
mod placement_rules;
mod planes;
mod references;
mod references_prop;
mod safety;
mod sdn;
mod site;
mod stacks;
mod support;
mod verify;
mod waits;
