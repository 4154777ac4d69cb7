//! [`Secret`]: a token secret or password that never shows in `Debug`, `Display` or errors, and
//! [`Credentials`]: how the client authenticates (API token or user/password for tickets).

use std::fmt;

use crate::error::PveError;

/// A secret string. `Debug` and `Display` print `***`; only [`Secret::expose`] gives the text.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(text: impl Into<String>) -> Secret {
        Secret(text.into())
    }

    /// The secret text, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Secret {
        Secret(s)
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Secret {
        Secret(s.to_string())
    }
}

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
