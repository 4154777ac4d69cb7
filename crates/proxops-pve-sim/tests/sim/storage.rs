//! storage tests.
