//! [`Credentials`]: how the client authenticates (API token or user/password for tickets), with
//! the secret parts held as [`Secret`]s that never show in `Debug`, `Display` or errors.

use crate::error::PveError;

/// The one secret type of ProxOps (redacted in `Debug`, `Display` and serialisation, wiped on
/// drop), shared with the SOPS decryption so secrets pass from one to the other unexposed.
pub use proxops_secrets::Secret;

/// How requests authenticate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// An API token: `Authorization: PVEAPIToken=USER@REALM!TOKENID=SECRET`. Needs no CSRF token.
    Token {
        /// `USER@REALM!TOKENID`.
        id: String,
        /// The token's secret (a UUID in PVE).
        secret: Secret,
    },
    /// A user and password: the client logs in at `POST /access/ticket`, sends the ticket as the
    /// `PVEAuthCookie` cookie and the CSRF token on writes, and logs in again before the ticket's
    /// two-hour lifetime ends.
    Password {
        /// `USER@REALM`.
        username: String,
        /// The password.
        password: Secret,
    },
}

impl Credentials {
    /// An API token from its id and secret.
    pub fn token(id: impl Into<String>, secret: impl Into<Secret>) -> Credentials {
        Credentials::Token {
            id: id.into(),
            secret: secret.into(),
        }
    }

    /// A user and password (ticket auth).
    pub fn password(username: impl Into<String>, password: impl Into<Secret>) -> Credentials {
        Credentials::Password {
            username: username.into(),
            password: password.into(),
        }
    }

    /// Parses `USER@REALM!TOKENID=SECRET` (the form PVE shows once when a token is made).
    pub fn parse_token(text: &str) -> Result<Credentials, PveError> {
        let bad = || {
            // Only the part before the secret may appear in the error.
            let id = text.split('=').next().unwrap_or_default();
            PveError::Config(format!(
                "invalid API token '{id}=***': expected USER@REALM!TOKENID=SECRET"
            ))
        };
        let (id, secret) = text.split_once('=').ok_or_else(bad)?;
        let (user, name) = id.split_once('!').ok_or_else(bad)?;
        let (u, realm) = user.split_once('@').ok_or_else(bad)?;
        if u.is_empty() || realm.is_empty() || name.is_empty() || secret.is_empty() {
            return Err(bad());
        }
        Ok(Credentials::token(id, secret))
    }

    /// The user (`root@pam`), for task ownership checks and messages.
    pub fn user(&self) -> &str {
        match self {
            Credentials::Token { id, .. } => id.split_once('!').map_or(id.as_str(), |(u, _)| u),
            Credentials::Password { username, .. } => username,
        }
    }
}
