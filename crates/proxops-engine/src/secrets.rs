//! A cluster's SOPS secrets, decrypted once per connection: PVE credentials and the cloud-init
//! material that manifests reference (`ssh-key-refs`, `ci-password-ref`).
//!
//! A file that cannot be read is not an error until something needs it: the reason is kept and
//! reported by whoever asks (the credentials, or the resource whose reference cannot resolve).

use proxops_model::Cluster;
use proxops_secrets::{Document, IdentitySource, Secret, SopsFile, decrypt_file};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

/// A cluster's decrypted secrets document, or why there is none.
#[derive(Clone)]
pub struct ClusterSecrets {
    cluster: String,
    state: State,
    /// The age recipients the file is encrypted to (its `sops` metadata, read without a key):
    /// what a new API token's secret is encrypted to. Or why there are none.
    recipients: Result<Vec<String>, String>,
}

#[derive(Clone)]
enum State {
    /// The cluster names no `secrets-file`.
    NotConfigured,
    /// The secrets were not loaded (an embedder planning without a connection).
    NotLoaded,
    /// Decrypted.
    Loaded {
        file: String,
        document: Arc<Document>,
    },
    /// Configured but unusable: the file, and why (never a value).
    Failed { file: String, reason: String },
}

/// Why a secrets file cannot be used, and what to do about it.
fn unusable(e: &proxops_secrets::Error, shown: &str) -> String {
    const ELSEWHERE: &str = "(credentials may also come from the environment, e.g. PROXOPS_PVE_TOKEN_<CLUSTER>; to try ProxOps without Proxmox VE, use --backend sim)";
    match e {
        proxops_secrets::Error::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            format!(
                "the file does not exist: create it with `sops encrypt --age <your age public key> <plain.yaml> > {shown}` (a `secrets:` map with the keys the config names), or drop `secrets-file` from the cluster's config {ELSEWHERE}"
            )
        }
        proxops_secrets::Error::NoIdentity { .. }
        | proxops_secrets::Error::WrongIdentity { .. } => {
            format!("{e} {ELSEWHERE}")
        }
        other => other.to_string(),
    }
}

impl fmt::Debug for ClusterSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = match &self.state {
            State::NotConfigured => "not configured".to_owned(),
            State::NotLoaded => "not loaded".to_owned(),
            State::Loaded { file, .. } => format!("loaded from {file}"),
            State::Failed { file, .. } => format!("{file} unusable"),
        };
        f.debug_struct("ClusterSecrets")
            .field("cluster", &self.cluster)
            .field("state", &state)
            .finish()
    }
}

impl ClusterSecrets {
    /// Decrypts the cluster's `secrets-file` (relative to `clusters/<c>/` under `repo`) with the
    /// age identities the environment names; keeps the reason if that fails.
    pub fn load(repo: Option<&Path>, cluster: &Cluster) -> ClusterSecrets {
        let file = cluster
            .entry
            .as_ref()
            .and_then(|e| e.secrets_file.as_deref());
        let mut recipients = Err(String::new());
        let state = match (repo, file) {
            (_, None) => State::NotConfigured,
            (None, Some(_)) => State::NotLoaded,
            (Some(repo), Some(file)) => {
                let shown = format!(
                    "clusters/{}/{}",
                    cluster.name,
                    file.trim_start_matches("./")
                );
                let path = repo.join("clusters").join(&cluster.name).join(file);
                recipients = match SopsFile::read(&path) {
                    Ok(f) => Ok(f
                        .metadata()
                        .age
                        .iter()
                        .map(|r| r.recipient.clone())
                        .collect()),
                    Err(e) => Err(format!("{shown}: {}", unusable(&e, &shown))),
                };
                match decrypt_file(&path, &IdentitySource::from_env())
                    .and_then(|d| d.check_layout().map(|()| d))
                {
                    Ok(document) => State::Loaded {
                        file: shown,
                        document: Arc::new(document),
                    },
                    Err(e) => State::Failed {
                        reason: unusable(&e, &shown),
                        file: shown,
                    },
                }
            }
        };
        let mut out = ClusterSecrets {
            cluster: cluster.name.clone(),
            state,
            recipients: Ok(Vec::new()),
        };
        out.recipients = match recipients {
            Err(e) if e.is_empty() => Err(out.missing()),
            other => other,
        };
        out
    }

    /// No secrets: for planning without a connection (references then fail, saying so).
    pub fn not_loaded(cluster: &str) -> ClusterSecrets {
        let mut out = ClusterSecrets {
            cluster: cluster.to_owned(),
            state: State::NotLoaded,
            recipients: Ok(Vec::new()),
        };
        out.recipients = Err(out.missing());
        out
    }

    /// A decrypted document, for tests and embedders that decrypt themselves.
    pub fn from_document(cluster: &str, file: &str, document: Document) -> ClusterSecrets {
        ClusterSecrets {
            cluster: cluster.to_owned(),
            state: State::Loaded {
                file: file.to_owned(),
                document: Arc::new(document),
            },
            recipients: Err(format!(
                "{file}: the age recipients of the file were not given (`ClusterSecrets::with_recipients`)"
            )),
        }
    }

    /// The same secrets, with the age recipients their file is encrypted to (for tests and
    /// embedders that read the file themselves).
    pub fn with_recipients(mut self, recipients: Vec<String>) -> ClusterSecrets {
        self.recipients = Ok(recipients);
        self
    }

    /// The age recipients of the cluster's secrets file (from its `sops` metadata: no key is
    /// needed), to which a new API token's secret is encrypted; or why there are none.
    pub fn recipients(&self) -> Result<&[String], String> {
        match &self.recipients {
            Ok(r) if r.is_empty() => Err(format!(
                "the SOPS secrets file of cluster `{}` lists no age recipient (ProxOps encrypts to age keys only)",
                self.cluster
            )),
            Ok(r) => Ok(r),
            Err(e) => Err(e.clone()),
        }
    }

    /// Why there are no recipients: the state's reason.
    fn missing(&self) -> String {
        match self.document() {
            Err(e) => e,
            Ok(_) => "no age recipients were read".to_owned(),
        }
    }

    /// The decrypted document, or why there is none (a sentence naming the file and what to do).
    pub fn document(&self) -> Result<&Document, String> {
        let cluster = &self.cluster;
        match &self.state {
            State::Loaded { document, .. } => Ok(document),
            State::Failed { file, reason } => Err(format!("{file}: {reason}")),
            State::NotConfigured => Err(format!(
                "cluster `{cluster}` has no SOPS secrets: add `secrets-file: secrets.sops.yaml` to its entry in clusters/{cluster}/config.yaml and create the file with `sops`"
            )),
            State::NotLoaded => Err(format!(
                "the SOPS secrets of cluster `{cluster}` were not loaded (plan through a connection from proxops_engine::backend::connect)"
            )),
        }
    }

    /// Resolves one `cloud-init.passwords.<name>` or `cloud-init.ssh-keys.<name>` reference.
    pub fn resolve(&self, reference: &str) -> Result<Secret, String> {
        let document = self.document()?;
        document.resolve(reference).map_err(|e| e.to_string())
    }

    /// Resolves `cloud-init.ssh-keys.<name>` references, in order, without repeated values.
    pub fn resolve_ssh_keys(&self, references: &[String]) -> Result<Vec<Secret>, String> {
        let document = self.document()?;
        document
            .resolve_ssh_keys(references)
            .map_err(|e| e.to_string())
    }
}
