//! download tests.
