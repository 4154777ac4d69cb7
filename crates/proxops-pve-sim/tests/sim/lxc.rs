//! lxc tests.
