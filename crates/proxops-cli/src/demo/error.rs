//! Why the demo could not run, with a stable code per reason.

use std::path::PathBuf;

/// Why the demo could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoError {
    /// The repository directory does not exist.
    #[error("no repository at {0}")]
    NoRepository(PathBuf),
    /// A file could not be read or written.
    #[error("cannot {what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// git failed in the private copy.
    #[error("git {args} failed in the demo's copy: {stderr}")]
    Git {
        /// The git arguments.
        args: String,
        /// What git said.
        stderr: String,
    },
    /// The repository has errors, or lacks what the demo shows.
    #[error("{0}")]
    Repository(String),
    /// Reading or writing the planes failed.
    #[error("the planes: {0}")]
    Store(#[from] proxops_store::StoreError),
    /// The simulator could not be reached.
    #[error("the simulator: {0}")]
    Simulator(String),
}

impl DemoError {
    /// The stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            DemoError::NoRepository(_) => "proxops::demo::no_repository",
            DemoError::Io { .. } => "proxops::demo::io",
            DemoError::Git { .. } => "proxops::demo::git",
            DemoError::Repository(_) => "proxops::demo::repository",
            DemoError::Store(_) => "proxops::demo::planes",
            DemoError::Simulator(_) => "proxops::demo::simulator",
        }
    }
}
