//! params tests.
