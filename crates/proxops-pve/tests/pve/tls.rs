//! tls
