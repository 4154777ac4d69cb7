//! The one error type of the command line: library errors mapped to a message, a hint and an
//! exit code.

use std::process::ExitCode;

/// A failure that ends the command.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad usage: an unknown cluster, a missing repository.
    #[error("{message}")]
    Usage {
        /// What went wrong.
        message: String,
        /// What to do about it.
        hint: Option<String>,
    },
    /// Reading or writing files failed.
    #[error("{0}")]
    Io(String),
    /// The planes refused an operation (a promotion source not reconciled, a rollback target
    /// that is not an ancestor, a lost race, ...): a stable code and the reason; exit 1.
    #[error("{message}")]
    Refused {
        /// The stable code (`proxops::<area>::<name>`).
        code: &'static str,
        /// Why.
        message: String,
    },
}

impl CliError {
    /// A usage error with a hint.
    pub fn usage(message: impl Into<String>, hint: Option<String>) -> CliError {
        CliError::Usage {
            message: message.into(),
            hint,
        }
    }

    /// A refusal of the planes, with the store's stable code.
    pub fn refused(e: proxops_store::StoreError) -> CliError {
        CliError::Refused {
            code: e.code(),
            message: e.to_string(),
        }
    }

    /// Prints the error to stderr and returns its exit code (1: refused; 2: usage or I/O).
    pub fn report(&self) -> ExitCode {
        if let CliError::Refused { code, message } = self {
            eprintln!("error[{code}]: {message}");
            return ExitCode::from(1);
        }
        eprintln!("error: {self}");
        if let CliError::Usage {
            hint: Some(hint), ..
        } = self
        {
            eprintln!("hint: {hint}");
        }
        ExitCode::from(2)
    }
}

impl From<proxops_model::LoadError> for CliError {
    fn from(e: proxops_model::LoadError) -> Self {
        match e {
            proxops_model::LoadError::UnknownCluster { name, known } => CliError::usage(
                format!("no cluster named `{name}` in this repository"),
                Some(format!("clusters here: {known}")),
            ),
            other => CliError::Io(other.to_string()),
        }
    }
}
