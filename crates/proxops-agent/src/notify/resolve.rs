//! From a sink's configuration to a usable sink: its URL and tokens read from the environment,
//! a file or a SOPS document. Errors name where a secret was looked for, never its value.

use proxops_model::config::{SecretSource, SinkConfig, SinkKind};
use proxops_secrets::{Document, IdentitySource, Secret, decrypt_file};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A sink as configured, with where its relative paths start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SinkSpec {
    /// Its name in metrics (cluster sinks: `<cluster>/<name>`).
    pub label: String,
    pub config: SinkConfig,
    /// The directory of the file that configures it.
    pub dir: PathBuf,
    /// The SOPS file of `sops:` secrets when the sink names none (a cluster's `secrets-file`).
    pub default_secrets_file: Option<PathBuf>,
}

/// A sink with its secrets.
pub(crate) struct ResolvedSink {
    pub config: SinkConfig,
    pub url: Option<Secret>,
    pub token: Option<Secret>,
    pub signing: Option<Secret>,
    /// Changes when the configuration or a secret does.
    pub fingerprint: [u8; 32],
}

/// Decrypted SOPS documents, kept while their file does not change.
#[derive(Default)]
pub(crate) struct SopsCache {
    documents: BTreeMap<PathBuf, ([u8; 32], Arc<Document>)>,
}

impl SopsCache {
    fn document(&mut self, path: &Path) -> Result<Arc<Document>, String> {
        let shown = path.display();
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
        let digest: [u8; 32] = Sha256::digest(&bytes).into();
        if let Some((d, doc)) = self.documents.get(path)
            && *d == digest
        {
            return Ok(Arc::clone(doc));
        }
        let doc = Arc::new(
            decrypt_file(path, &IdentitySource::from_env()).map_err(|e| format!("{shown}: {e}"))?,
        );
        self.documents
            .insert(path.to_path_buf(), (digest, Arc::clone(&doc)));
        Ok(doc)
    }
}

/// Resolves `spec`.
pub(crate) fn resolve(spec: &SinkSpec, sops: &mut SopsCache) -> Result<ResolvedSink, String> {
    let c = &spec.config;
    let mut hasher = Sha256::new();
    hasher.update(serde_json::to_vec(c).unwrap_or_default());
    let mut one = |field: &str, source: &Option<SecretSource>| -> Result<Option<Secret>, String> {
        let Some(source) = source else {
            return Ok(None);
        };
        let secret = read(spec, field, source, sops)?;
        hasher.update(field.as_bytes());
        hasher.update(Sha256::digest(secret.expose().as_bytes()));
        Ok(Some(secret))
    };
    let url = one("url", &c.url)?;
    let token = one("token", &c.token)?;
    let signing = one("signing-secret", &c.signing_secret)?;
    if let Some(u) = &url {
        let u = u.expose();
        let ok = ["https://", "http://"]
            .iter()
            .any(|s| u.strip_prefix(s).is_some_and(|rest| !rest.is_empty()))
            && !u.contains(char::is_whitespace);
        if !ok {
            return Err("its `url` secret is not an http(s) URL".to_owned());
        }
    }
    if c.kind == SinkKind::CommitStatus && token.is_none() {
        return Err("a commit-status sink needs `token`".to_owned());
    }
    Ok(ResolvedSink {
        config: c.clone(),
        url,
        token,
        signing,
        fingerprint: hasher.finalize().into(),
    })
}

fn read(
    spec: &SinkSpec,
    field: &str,
    source: &SecretSource,
    sops: &mut SopsCache,
) -> Result<Secret, String> {
    let empty = |what: String| format!("its `{field}` secret in {what} is empty");
    let secret = if let Some(var) = &source.env {
        let value = std::env::var(var)
            .map_err(|_| format!("its `{field}` secret variable {var} is not set"))?;
        (Secret::new(value).trimmed(), format!("${var}"))
    } else if let Some(file) = &source.file {
        let path = spec.dir.join(file);
        let value = std::fs::read_to_string(&path).map_err(|e| {
            format!(
                "cannot read its `{field}` secret file {}: {e}",
                path.display()
            )
        })?;
        (Secret::new(value).trimmed(), path.display().to_string())
    } else if let Some(key) = &source.sops {
        let path = spec
            .config
            .secrets_file
            .as_ref()
            .map(|f| spec.dir.join(f))
            .or_else(|| spec.default_secrets_file.clone())
            .ok_or_else(|| {
                format!("its `{field}` names SOPS key `{key}`, but the sink has no `secrets-file`")
            })?;
        let doc = sops.document(&path)?;
        let value = doc
            .get(&["secrets", key])
            .and_then(proxops_secrets::Value::as_secret)
            .ok_or_else(|| {
                format!(
                    "{} has no scalar `secrets.{key}` for its `{field}`",
                    path.display()
                )
            })?;
        (
            value.trimmed(),
            format!("{} (secrets.{key})", path.display()),
        )
    } else {
        return Err(format!("its `{field}` names no source"));
    };
    let (value, what) = secret;
    if value.is_blank() {
        return Err(empty(what));
    }
    Ok(value)
}
