//! `proxops run` end to end: the agent against a simulator and a git repository in a
//! temporary directory, observed through its HTTP endpoint, the simulator's state and the git
//! planes.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub(crate) mod support;

mod browser;

mod control;
mod control_api;
mod convergence;
mod dashboard;
mod embed;
mod hooks;
mod leases;
mod notifications;
mod notifier;
mod reload;
mod standin;
mod verify;
mod waits;
