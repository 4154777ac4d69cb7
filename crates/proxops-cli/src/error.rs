//! The one error type of the command line, [`CommandError`]: a [`ErrorKind`] that decides the
//! exit code, a message, the library error it came from (printed as a `caused by:` chain) and
//! hints. Library errors convert through `From`, each variant classified once here.

use proxops_engine::backend::ConnectError;
use std::error::Error as StdError;
use std::fmt;
use std::process::ExitCode;

/// What kind of failure ended a command; [`ErrorKind::exit_code`] is the one table from kind to
/// exit status (README "Exit status").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The invocation: a flag, an unknown cluster, a missing repository, a local file that
    /// cannot be read or written. Exit 2, as clap's own usage errors.
    User,
    /// The repository's or agent's configuration is invalid or incomplete (no credentials, a
    /// config that does not load). Exit 2: fix the input.
    Config,
    /// ProxOps refused on purpose: a lease held by another writer, a promotion source not
    /// reconciled, a rollback target that is not an ancestor, a lost race. Exit 1.
    Refused,
    /// A PVE cluster, a git remote or the agent could not be reached or failed to answer.
    /// Exit 4: trying again later may work.
    Unreachable,
    /// A failure that is ProxOps's own (an async runtime that does not start, a document that
    /// does not serialize). Exit 70 (`EX_SOFTWARE`); please report it.
    Internal,
}

impl ErrorKind {
    /// The exit status of the kind.
    pub fn exit_code(self) -> u8 {
        match self {
            ErrorKind::Refused => 1,
            ErrorKind::User | ErrorKind::Config => 2,
            ErrorKind::Unreachable => 4,
            ErrorKind::Internal => 70,
        }
    }
}

/// A failure that ends the command.
#[derive(Debug)]
pub struct CommandError {
    kind: ErrorKind,
    message: String,
    code: Option<&'static str>,
    source: Option<Box<dyn StdError + Send + Sync>>,
    hints: Vec<String>,
}

impl CommandError {
    /// A failure of `kind` saying `message`.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> CommandError {
        CommandError {
            kind,
            message: message.into(),
            code: None,
            source: None,
            hints: Vec::new(),
        }
    }

    /// A usage error ([`ErrorKind::User`]).
    pub fn user(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::User, message)
    }

    /// A configuration error ([`ErrorKind::Config`]).
    pub fn config(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::Config, message)
    }

    /// Something could not be reached ([`ErrorKind::Unreachable`]).
    pub fn unreachable(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::Unreachable, message)
    }

    /// ProxOps's own failure ([`ErrorKind::Internal`]).
    pub fn internal(message: impl Into<String>) -> CommandError {
        CommandError::new(ErrorKind::Internal, message)
    }

    /// A local file or stream that could not be read or written: `context` says which.
    pub fn io(context: impl Into<String>, e: std::io::Error) -> CommandError {
        CommandError::user(context).with_source(e)
    }

    /// The output could not be written or serialized.
    pub fn output(e: impl StdError + Send + Sync + 'static) -> CommandError {
        CommandError::new(ErrorKind::User, "cannot write the output").with_source(e)
    }

    /// The same error with the library error it came from.
    pub fn with_source(mut self, e: impl StdError + Send + Sync + 'static) -> CommandError {
        self.source = Some(Box::new(e));
        self
    }

    /// The same error with one more hint.
    pub fn hint(mut self, hint: impl Into<String>) -> CommandError {
        self.hints.push(hint.into());
        self
    }

    /// The same error with a hint when there is one.
    pub fn maybe_hint(self, hint: Option<String>) -> CommandError {
        match hint {
            Some(h) => self.hint(h),
            None => self,
        }
    }

    /// The same error with a stable code (`proxops::<area>::<name>`), printed as `error[code]`.
    pub fn with_code(mut self, code: &'static str) -> CommandError {
        self.code = Some(code);
        self
    }

    /// A usage error with an optional hint (the common case of the subcommands).
    pub fn usage(message: impl Into<String>, hint: Option<String>) -> CommandError {
        CommandError::user(message).maybe_hint(hint)
    }

    /// The text printed to stderr: `error[code]: message`, the cause chain, then the hints.
    pub fn render(&self) -> String {
        let mut out = match self.code {
            Some(code) => format!("error[{code}]: {}\n", self.message),
            None => format!("error: {}\n", self.message),
        };
        let mut cause: Option<&(dyn StdError + 'static)> = self
            .source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static));
        // A message that already says its source (`cannot connect: <why>`) prints it once.
        let mut said = self.message.clone();
        while let Some(e) = cause {
            let text = e.to_string();
            if !said.contains(&text) {
                out.push_str(&format!("caused by: {text}\n"));
                said.push_str(&text);
            }
            cause = e.source();
        }
        for h in &self.hints {
            out.push_str(&format!("hint: {h}\n"));
        }
        out
    }

    /// Prints the error to stderr and returns its kind's exit code.
    pub fn report(&self) -> ExitCode {
        eprint!("{}", self.render());
        ExitCode::from(self.kind.exit_code())
    }
}

impl fmt::Display for CommandError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl StdError for CommandError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn StdError + 'static))
    }
}

impl From<proxops_model::LoadError> for CommandError {
    fn from(e: proxops_model::LoadError) -> Self {
        match &e {
            proxops_model::LoadError::UnknownCluster { name, known } => {
                CommandError::user(format!("no cluster named `{name}` in this repository"))
                    .hint(format!("clusters here: {known}"))
            }
            // A newer kind of load failure: still about the user's repository.
            _ => {
                let message = e.to_string();
                CommandError::user(message).with_source(e)
            }
        }
    }
}

impl From<proxops_store::StoreError> for CommandError {
    fn from(e: proxops_store::StoreError) -> Self {
        use proxops_store::StoreError as S;
        let kind = match &e {
            S::Open { .. } | S::Revision { .. } | S::RefName { .. } | S::Io(_) => ErrorKind::User,
            S::Corrupt { .. } => ErrorKind::Config,
            // The store's refusals of an operation it cannot do as asked (a promotion source
            // without a desired plane, a rollback without a reason, ...).
            S::Invalid(_)
            | S::Conflict { .. }
            | S::Leased { .. }
            | S::Exhausted { .. }
            | S::PromotionNotAllowed { .. }
            | S::NotReconciled { .. }
            | S::NotAncestor { .. }
            | S::NeverClean { .. }
            | S::StaleUid { .. } => ErrorKind::Refused,
            S::Reference { .. } => ErrorKind::Config,
            // `git push`/`git fetch` against a remote.
            S::GitCli { .. } => ErrorKind::Unreachable,
            S::RefUpdate { .. } | S::Git(_) => ErrorKind::Internal,
            // A kind of failure newer than this table: not the user's to fix until classified.
            _ => ErrorKind::Internal,
        };
        let code = e.code();
        let message = e.to_string();
        CommandError::new(kind, message)
            .with_code(code)
            .with_source(e)
    }
}

impl From<ConnectError> for CommandError {
    fn from(e: ConnectError) -> Self {
        let kind = match &e {
            ConnectError::NoConfig(_)
            | ConnectError::NoToken { .. }
            | ConnectError::NoPassword { .. }
            | ConnectError::Secrets(..) => ErrorKind::Config,
            // A bad token form, CA file or fingerprint: the configuration's.
            ConnectError::Client(..) => ErrorKind::Config,
            _ => ErrorKind::Internal,
        };
        let message = e.to_string();
        CommandError::new(kind, message).with_source(e)
    }
}

impl From<proxops_engine::adopt::AdoptError> for CommandError {
    fn from(e: proxops_engine::adopt::AdoptError) -> Self {
        use proxops_engine::adopt::AdoptError as A;
        let kind = match &e {
            A::Pve(_) => ErrorKind::Unreachable,
            A::NoSuchGuest(_) | A::Write(..) => ErrorKind::User,
            _ => ErrorKind::Internal,
        };
        let message = e.to_string();
        CommandError::new(kind, message).with_source(e)
    }
}

impl From<proxops_engine::init::InitError> for CommandError {
    fn from(e: proxops_engine::init::InitError) -> Self {
        use proxops_engine::init::InitError as I;
        match e {
            I::Connect(c) => CommandError::from(c),
            I::Adopt(a) => CommandError::from(a),
            I::NotEmpty { .. } => {
                let message = e.to_string();
                CommandError::user(message).with_source(e).hint(
                    "pass --force to add only the missing files, or choose an empty directory",
                )
            }
            I::Invalid { .. } | I::Io { .. } | I::Git { .. } => {
                let message = e.to_string();
                CommandError::user(message).with_source(e)
            }
            I::Validation(_) => {
                let message = e.to_string();
                CommandError::config(message).with_source(e)
            }
            _ => {
                let message = e.to_string();
                CommandError::internal(message).with_source(e)
            }
        }
    }
}

impl From<crate::demo::DemoError> for CommandError {
    fn from(e: crate::demo::DemoError) -> Self {
        use crate::demo::DemoError as D;
        let kind = match &e {
            D::NoRepository(_) | D::Io { .. } => ErrorKind::User,
            D::Repository(_) => ErrorKind::Config,
            _ => ErrorKind::Internal,
        };
        let code = e.code();
        let message = e.to_string();
        CommandError::new(kind, message)
            .with_code(code)
            .with_source(e)
    }
}

impl From<proxops_agent::AgentError> for CommandError {
    fn from(e: proxops_agent::AgentError) -> Self {
        use proxops_agent::AgentError as A;
        let kind = match &e {
            A::Listen { .. } | A::Unprotected { .. } | A::DataDir { .. } => ErrorKind::User,
            A::Source(_) => ErrorKind::Config,
            _ => ErrorKind::Internal,
        };
        let message = e.to_string();
        CommandError::new(kind, message).with_source(e)
    }
}

impl From<serde_json::Error> for CommandError {
    fn from(e: serde_json::Error) -> Self {
        CommandError::internal("cannot serialize the output").with_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_exit_code_and_usage_matches_clap() {
        let codes: Vec<u8> = [
            ErrorKind::Refused,
            ErrorKind::User,
            ErrorKind::Unreachable,
            ErrorKind::Internal,
        ]
        .iter()
        .map(|k| k.exit_code())
        .collect();
        assert_eq!(codes, [1, 2, 4, 70]);
        // clap exits 2 on a usage error; ours must agree.
        assert_eq!(ErrorKind::User.exit_code(), 2);
        assert_eq!(ErrorKind::Config.exit_code(), 2);
    }

    #[test]
    fn the_rendering_prints_code_cause_chain_once_and_hints() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = CommandError::io("cannot read agent.yaml", io)
            .with_code("proxops::io")
            .hint("check the path");
        assert_eq!(
            e.render(),
            "error[proxops::io]: cannot read agent.yaml\ncaused by: no such file\nhint: check the path\n"
        );
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let said = CommandError::user("cannot read x: no such file").with_source(io);
        assert_eq!(said.render(), "error: cannot read x: no such file\n");
    }

    #[test]
    fn store_refusals_exit_1_and_a_missing_repository_is_a_usage_error() {
        let refused: CommandError = proxops_store::StoreError::Invalid("x".into()).into();
        assert_eq!(refused.kind, ErrorKind::Refused);
        let leased: CommandError = proxops_store::StoreError::Leased {
            cluster: "lab".into(),
            holder: "agent".into(),
            host: "h".into(),
            pid: 1,
            expires: "never".into(),
        }
        .into();
        assert_eq!(leased.kind.exit_code(), 1);
        assert!(
            leased
                .render()
                .starts_with("error[proxops::store::leased]: ")
        );
        let missing: CommandError = proxops_model::LoadError::UnknownCluster {
            name: "x".into(),
            known: "lab".into(),
        }
        .into();
        assert_eq!(missing.kind, ErrorKind::User);
        assert!(missing.render().contains("hint: clusters here: lab"));
    }
}
