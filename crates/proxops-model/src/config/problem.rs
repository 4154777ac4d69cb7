//! What the checks of the configuration files and their sinks report, and the helpers they
//! share: below `config` and its parts, which all import it from here.

use crate::diagnostic::Code;
use crate::yaml::PathSeg;

/// A problem in a configuration value, at a path from the file's root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigProblem {
    /// The diagnostic code (mostly [`Code::InvalidValue`]).
    pub code: Code,
    /// Where.
    pub path: Vec<PathSeg>,
    /// What.
    pub message: String,
    /// How to fix it.
    pub help: Option<String>,
}

/// A path from the file's root, one segment per key.
pub(super) fn at(segs: &[&str]) -> Vec<PathSeg> {
    segs.iter().map(|s| PathSeg::from(*s)).collect()
}

/// `[A-Za-z_][A-Za-z0-9_]*`, the names a shell and systemd's `Environment=` accept.
pub(super) fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}
