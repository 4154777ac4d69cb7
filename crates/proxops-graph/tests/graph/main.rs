//! Tests of the dependency graph: the compatibility expectations, the order rules, problems and
//! their diagnostics, deferral, exports and properties over random graphs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod expectations;
mod export;
mod order;
mod problems;
mod properties;
mod support;
