//! The proxops-store test binary: one binary, one module per area, on real repositories in
//! temporary directories, read back with the git CLI.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod canonical;
mod desired;
mod lease;
mod observed;
mod operations;
mod processes;
mod remote;
mod secrets;
mod source;
