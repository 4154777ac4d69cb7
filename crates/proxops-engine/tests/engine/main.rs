//! Engine tests: the drivers' wire mapping, and desired state created on the simulator reading
//! back as converged.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod adopt;
mod adopt_corpus;
mod adopt_lxc;
mod artifacts;
mod background;
mod cycle;
mod edits;
mod guarded;
mod guest_options;
mod ha;
mod object_edits;
mod ownership;
mod pending;
mod proxy;
mod roundtrip;
mod support;
mod unprivileged;
mod versions;
mod wire;
