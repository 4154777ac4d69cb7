//! Where age identities come from: sops's own places (`SOPS_AGE_KEY`, `SOPS_AGE_KEY_FILE`, and
//! `$XDG_CONFIG_HOME/sops/age/keys.txt` or `~/.config/sops/age/keys.txt`). The process
//! environment is read only by [`IdentitySource::from_env`]; everything else takes its inputs
//! explicitly, so tests can run in parallel without touching the environment.

use crate::{Error, Secret};
use age::x25519;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// The places to look for age identities, as sops looks: every place that has keys contributes.
#[derive(Debug, Clone, Default)]
pub struct IdentitySource {
    /// The contents of `SOPS_AGE_KEY`: keys separated by white space or lines, `#` comments.
    pub sops_age_key: Option<Secret>,
    /// The value of `SOPS_AGE_KEY_FILE`: a key file (one key a line, `#` comments).
    pub sops_age_key_file: Option<PathBuf>,
    /// sops's default key file, read if it exists.
    pub default_key_file: Option<PathBuf>,
}

impl IdentitySource {
    /// The places sops would use, from the process environment.
    pub fn from_env() -> Self {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The places sops would use, with environment variables read through `var` (which returns
    /// `None` for an unset variable).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Self {
        // Go's os.UserConfigDir: $XDG_CONFIG_HOME if set and absolute, else $HOME/.config.
        let config_dir = match var("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
            Some(dir) => Some(PathBuf::from(dir)).filter(|d| d.is_absolute()),
            None => var("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| Path::new(&h).join(".config")),
        };
        IdentitySource {
            sops_age_key: var("SOPS_AGE_KEY").map(Secret::from),
            sops_age_key_file: var("SOPS_AGE_KEY_FILE").map(PathBuf::from),
            default_key_file: config_dir.map(|d| d.join("sops").join("age").join("keys.txt")),
        }
    }

    /// Only the key file at `path`.
    pub fn key_file(path: impl Into<PathBuf>) -> Self {
        IdentitySource {
            sops_age_key_file: Some(path.into()),
            ..Self::default()
        }
    }

    /// Only the given key text (as `SOPS_AGE_KEY` would hold it).
    pub fn keys(text: impl Into<String>) -> Self {
        IdentitySource {
            sops_age_key: Some(Secret::new(text)),
            ..Self::default()
        }
    }

    /// Loads every identity found. Fails with [`Error::NoIdentity`] (naming each place and what
    /// was there) when none is found, and on a key file that is set but unreadable or holds
    /// something other than age X25519 identities.
    pub fn load(&self) -> Result<Identities, Error> {
        let mut found = Vec::new();
        let mut looked = Vec::new();
        match &self.sops_age_key {
            None => looked.push("SOPS_AGE_KEY (not set)".to_owned()),
            Some(text) => {
                let ids = parse_keys(text.expose(), "SOPS_AGE_KEY", true)?;
                if ids.is_empty() {
                    looked.push("SOPS_AGE_KEY (set, but holds no key)".to_owned());
                }
                found.extend(ids);
            }
        }
        match &self.sops_age_key_file {
            None => looked.push("SOPS_AGE_KEY_FILE (not set)".to_owned()),
            Some(path) => {
                let text = read_key_file(path)?;
                let ids = parse_keys(text.expose(), &path.display().to_string(), false)?;
                if ids.is_empty() {
                    looked.push(format!(
                        "SOPS_AGE_KEY_FILE={} (no key in it)",
                        path.display()
                    ));
                }
                found.extend(ids);
            }
        }
        match &self.default_key_file {
            None => looked.push("the default key file (no XDG_CONFIG_HOME or HOME)".to_owned()),
            Some(path) if !path.exists() => looked.push(format!("{} (absent)", path.display())),
            Some(path) => {
                let text = read_key_file(path)?;
                let ids = parse_keys(text.expose(), &path.display().to_string(), false)?;
                if ids.is_empty() {
                    looked.push(format!("{} (no key in it)", path.display()));
                }
                found.extend(ids);
            }
        }
        if found.is_empty() {
            return Err(Error::NoIdentity { looked });
        }
        Ok(Identities(found))
    }
}

fn read_key_file(path: &Path) -> Result<Secret, Error> {
    std::fs::read_to_string(path)
        .map(Secret::from)
        .map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })
}

/// Parses key text as sops does: blank lines and `#` lines skipped; `SOPS_AGE_KEY` may hold
/// several keys on one line.
fn parse_keys(
    text: &str,
    location: &str,
    several_per_line: bool,
) -> Result<Vec<x25519::Identity>, Error> {
    let mut ids = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<&str> = if several_per_line {
            line.split_whitespace().collect()
        } else {
            vec![line]
        };
        for word in words {
            // The parse error is dropped: it could echo part of the key.
            let id = x25519::Identity::from_str(word).map_err(|_| Error::BadIdentity {
                location: location.to_owned(),
                line: n + 1,
            })?;
            ids.push(id);
        }
    }
    Ok(ids)
}

/// Loaded age X25519 identities. `Debug` shows only their public keys.
pub struct Identities(Vec<x25519::Identity>);

impl Identities {
    /// Identities from key text (as in a key file; several keys a line allowed).
    pub fn parse(text: &str) -> Result<Identities, Error> {
        let ids = parse_keys(text, "the key text", true)?;
        if ids.is_empty() {
            return Err(Error::NoIdentity {
                looked: vec!["the key text given (no key in it)".to_owned()],
            });
        }
        Ok(Identities(ids))
    }

    /// The public keys (`age1...`) of the identities.
    pub fn public_keys(&self) -> Vec<String> {
        self.0.iter().map(|id| id.to_public().to_string()).collect()
    }

    pub(crate) fn as_age(&self) -> impl Iterator<Item = &dyn age::Identity> {
        self.0.iter().map(|id| id as &dyn age::Identity)
    }
}

impl std::fmt::Debug for Identities {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Identities")
            .field(&self.public_keys())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use age::secrecy::ExposeSecret;

    fn key() -> (String, String) {
        let id = x25519::Identity::generate();
        (
            id.to_string().expose_secret().to_owned(),
            id.to_public().to_string(),
        )
    }

    #[test]
    fn several_keys_and_comments() {
        let (a, pa) = key();
        let (b, pb) = key();
        let text = format!("# created: now\n# public key: {pa}\n{a} {b}\n\n");
        let ids = IdentitySource::keys(text).load().unwrap();
        assert_eq!(ids.public_keys(), [pa.clone(), pb]);
        assert!(!format!("{ids:?}").contains(&a));
        assert!(format!("{ids:?}").contains(&pa));
    }

    #[test]
    fn key_file_and_default_path() {
        let dir = tempfile::tempdir().unwrap();
        let (a, pa) = key();
        let config = dir.path().join("cfg");
        std::fs::create_dir_all(config.join("sops/age")).unwrap();
        std::fs::write(config.join("sops/age/keys.txt"), format!("{a}\n")).unwrap();
        let vars = |name: &str| match name {
            "XDG_CONFIG_HOME" => Some(config.display().to_string()),
            "HOME" => Some("/nonexistent".to_owned()),
            _ => None,
        };
        let src = IdentitySource::from_vars(vars);
        assert_eq!(
            src.default_key_file.as_deref(),
            Some(config.join("sops/age/keys.txt").as_path())
        );
        assert_eq!(src.load().unwrap().public_keys(), [pa]);

        let home = IdentitySource::from_vars(|n| (n == "HOME").then(|| "/home/u".to_owned()));
        assert_eq!(
            home.default_key_file.as_deref(),
            Some(Path::new("/home/u/.config/sops/age/keys.txt"))
        );
    }

    #[test]
    fn nothing_found_names_every_place() {
        let dir = tempfile::tempdir().unwrap();
        let src = IdentitySource {
            default_key_file: Some(dir.path().join("keys.txt")),
            ..IdentitySource::default()
        };
        let err = src.load().unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::NoIdentity { .. }));
        assert!(msg.contains("SOPS_AGE_KEY (not set)"), "{msg}");
        assert!(msg.contains("SOPS_AGE_KEY_FILE (not set)"), "{msg}");
        assert!(
            msg.contains(&format!(
                "{} (absent)",
                dir.path().join("keys.txt").display()
            )),
            "{msg}"
        );
    }

    #[test]
    fn bad_key_is_named_by_line_without_its_text() {
        let err = IdentitySource::keys("# c\nAGE-SECRET-KEY-1NOTAKEY\n")
            .load()
            .unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::BadIdentity { line: 2, .. }), "{msg}");
        assert!(!msg.contains("NOTAKEY"), "{msg}");
        let missing = IdentitySource::key_file("/nonexistent/keys.txt")
            .load()
            .unwrap_err();
        assert!(matches!(missing, Error::Io { .. }));
    }
}
