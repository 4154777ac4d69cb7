//! state tests.
