//! The proxops-secrets test binary: decryption against the real `sops` binary, refusals with
//! named errors, and secret hygiene. One module per area.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod errors;
mod interop;
