//! `proxops init`: a new GitOps repository for one cluster, ready to validate and apply.
//!
//! [`init`] takes [`InitOptions`] (the cluster's name, endpoint, nodes, TLS pin, the
//! [`InitCredentials`] read from stdin and the age recipient to encrypt them to) and writes
//! `proxops.yaml`, `clusters/<c>/{config.yaml,resources.yaml,secrets.sops.yaml}`, the kind
//! directories, `.gitignore`, `.sops.yaml`, the JSON Schema and editor settings; checks that the
//! result validates; with [`InitOptions::with_adopt`] takes over the live cluster's guests
//! (`adopt --all`); then runs `git init` and makes the first commit. It never overwrites a file:
//! a directory that is not empty is refused unless [`InitOptions::with_force`], which only adds
//! what is missing. When anything fails before the commit, every file it created is removed
//! again. The credentials exist in clear only in memory: on disk and in git they are encrypted.

mod files;
mod git;

use crate::adopt::{AdoptContext, AdoptError, Outcome, Selection, adopt_live, write};
use crate::backend::{Backend, ConnectError, connect_with};
use proxops_model::config::LogLevel;
use proxops_model::settings::{FlagSettings, Layers, effective};
use proxops_model::{FsSource, LoadOptions, Registry, load_repository};
use proxops_secrets::Secret;
use std::path::{Path, PathBuf};

pub use git::CommitIdentity;

/// The credentials a new repository keeps, encrypted.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum InitCredentials {
    /// None: they will come from the environment (`PROXOPS_PVE_TOKEN_<C>`).
    #[default]
    None,
    /// An API token, whole: `user@realm!id=secret`.
    Token(Secret),
    /// A user and its password (ticket authentication).
    Password {
        /// `root@pam`, `proxops@pve`, ...
        user: String,
        /// The password.
        password: Secret,
    },
}

/// What to make.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct InitOptions {
    /// The cluster's name (its directory under `clusters/`).
    pub cluster: String,
    /// The API endpoint, `https://host:8006`.
    pub base_url: String,
    /// The node allowlist.
    pub nodes: Vec<String>,
    /// The SHA-256 fingerprint of the API certificate.
    pub fingerprint: Option<String>,
    /// The credentials to encrypt.
    pub credentials: InitCredentials,
    /// The age recipient (`age1...`) the secrets file and `.sops.yaml` name.
    pub recipient: Option<String>,
    /// Add missing files to a directory that is not empty.
    pub force: bool,
    /// Take over the live cluster's guests through this backend before the first commit.
    pub adopt: Option<Backend>,
    /// Who the first commit is by when git has no identity configured.
    pub fallback_identity: CommitIdentity,
}

impl InitOptions {
    /// A repository for `cluster` at `base_url`, no credentials, nothing else.
    pub fn new(cluster: impl Into<String>, base_url: impl Into<String>) -> InitOptions {
        InitOptions {
            cluster: cluster.into(),
            base_url: base_url.into(),
            nodes: Vec::new(),
            fingerprint: None,
            credentials: InitCredentials::None,
            recipient: None,
            force: false,
            adopt: None,
            fallback_identity: CommitIdentity::default(),
        }
    }

    /// The node allowlist.
    pub fn with_nodes(mut self, nodes: Vec<String>) -> Self {
        self.nodes = nodes;
        self
    }

    /// The certificate pin.
    pub fn with_fingerprint(mut self, fingerprint: Option<String>) -> Self {
        self.fingerprint = fingerprint;
        self
    }

    /// The credentials and the age recipient they are encrypted to.
    pub fn with_credentials(
        mut self,
        credentials: InitCredentials,
        recipient: Option<String>,
    ) -> Self {
        self.credentials = credentials;
        self.recipient = recipient;
        self
    }

    /// Whether a directory that is not empty gets the missing files.
    pub fn with_force(mut self, force: bool) -> Self {
        self.force = force;
        self
    }

    /// Adopt the live cluster's guests through `backend` before the first commit.
    pub fn with_adopt(mut self, backend: Option<Backend>) -> Self {
        self.adopt = backend;
        self
    }
}

/// What [`init`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct InitReport {
    /// Files written, relative to the repository, in path order.
    pub written: Vec<String>,
    /// Files that were there already and were kept as they are (`--force`).
    pub kept: Vec<String>,
    /// Manifests adopt wrote (and the composition lists).
    pub adopted: Vec<String>,
    /// Guests adopt left alone, with why.
    pub not_adopted: Vec<String>,
    /// Whether `git init` made the repository.
    pub git_initialized: bool,
    /// The first commit (`None`: nothing new to commit).
    pub commit: Option<String>,
    /// Whether the commit was made as [`InitOptions::fallback_identity`] (git has none).
    pub fallback_identity_used: bool,
}

/// Why [`init`] stopped. Nothing it created is left behind.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// An option is not usable.
    #[error("{what}: {reason}")]
    Invalid {
        /// The option.
        what: String,
        /// Why.
        reason: String,
    },
    /// The directory holds files and `--force` was not given.
    #[error("{} is not empty ({})", dir.display(), entries.join(", "))]
    NotEmpty {
        /// The directory.
        dir: PathBuf,
        /// Some of what is in it.
        entries: Vec<String>,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The credentials could not be encrypted.
    #[error("cannot encrypt the credentials: {0}")]
    Encrypt(proxops_secrets::Error),
    /// What was written does not validate (a bug, or an existing file that `--force` kept).
    #[error("the repository does not validate:\n{0}")]
    Validation(String),
    /// git failed.
    #[error("git {args} failed: {stderr}")]
    Git {
        /// Its arguments.
        args: String,
        /// What it said.
        stderr: String,
    },
    /// The live cluster could not be reached for adopt.
    #[error(transparent)]
    Connect(#[from] ConnectError),
    /// Adopt failed.
    #[error(transparent)]
    Adopt(#[from] AdoptError),
}

/// `user@realm!id=secret` into its three parts.
pub(crate) fn split_token(token: &str) -> Result<(&str, &str, &str), String> {
    let token = token.trim();
    let (user, rest) = token
        .split_once('!')
        .ok_or("not of the form user@realm!id=secret (no `!`)")?;
    let (id, secret) = rest
        .split_once('=')
        .ok_or("not of the form user@realm!id=secret (no `=`)")?;
    if !user.contains('@') || user.starts_with('@') || user.ends_with('@') {
        return Err("the user is not of the form user@realm".into());
    }
    if id.is_empty() || secret.is_empty() {
        return Err("the token id or the secret is empty".into());
    }
    Ok((user, id, secret))
}

fn invalid(what: &str, reason: impl Into<String>) -> InitError {
    InitError::Invalid {
        what: what.to_owned(),
        reason: reason.into(),
    }
}

/// Checks every option before anything is written.
fn check(opts: &InitOptions) -> Result<(), InitError> {
    if !proxops_model::kinds::common::is_valid_name(&opts.cluster) {
        return Err(invalid(
            "--cluster",
            format!(
                "`{}` is not a cluster name (lowercase letters and digits in words joined by single hyphens, at most 63)",
                opts.cluster
            ),
        ));
    }
    let url = &opts.base_url;
    // Never echo a password given in the URL: redacted, or not shown at all without a scheme.
    let shown = if url.contains('@') && !url.contains("://") {
        "the URL given".to_owned()
    } else {
        format!("`{}`", proxops_model::config::redact_url(url))
    };
    let host = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| invalid("--url", format!("{shown} is not an http(s) URL")))?;
    let authority = host.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') || url.chars().any(char::is_whitespace) {
        return Err(invalid(
            "--url",
            format!("{shown} has no host, or carries credentials (they go on stdin)"),
        ));
    }
    for node in &opts.nodes {
        if !proxops_model::kinds::common::is_valid_node(node) {
            return Err(invalid("--node", format!("`{node}` is not a node name")));
        }
    }
    if let Some(fp) = &opts.fingerprint {
        let parts: Vec<&str> = fp.split(':').collect();
        let hex = parts.len() == 32
            && parts
                .iter()
                .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()));
        if !hex {
            return Err(invalid(
                "--fingerprint",
                "not a SHA-256 fingerprint (32 hex byte pairs separated by `:`)",
            ));
        }
    }
    match &opts.credentials {
        InitCredentials::Token(token) => {
            split_token(token.expose()).map_err(|reason| invalid("the token on stdin", reason))?;
        }
        InitCredentials::Password { user, password } => {
            if !user.contains('@') {
                return Err(invalid("--user", "not of the form user@realm"));
            }
            if password.is_blank() {
                return Err(invalid("the password on stdin", "it is empty"));
            }
        }
        InitCredentials::None => {}
    }
    if let Some(r) = &opts.recipient {
        proxops_secrets::check_recipient(r)
            .map_err(|e| invalid("--age-recipient", e.to_string()))?;
    }
    if opts.recipient.is_none() && !matches!(opts.credentials, InitCredentials::None) {
        return Err(invalid(
            "credentials",
            "given without an age recipient to encrypt them to",
        ));
    }
    Ok(())
}

/// Makes the repository in `dir` (created if missing): see the module's documentation.
/// `now` is the time the secrets file is stamped with (RFC 3339, UTC, seconds).
pub async fn init(
    dir: &Path,
    opts: &InitOptions,
    registry: &Registry,
    now: &str,
) -> Result<InitReport, InitError> {
    check(opts)?;
    let planned = files::plan(opts, registry, now)?;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| InitError::Io { path, source }
    };
    let existing: Vec<String> = match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name != ".git")
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io(dir)(e)),
    };
    if !existing.is_empty() && !opts.force {
        let mut entries = existing;
        entries.sort();
        entries.truncate(5);
        return Err(InitError::NotEmpty {
            dir: dir.to_path_buf(),
            entries,
        });
    }
    let mut created = Created::new(dir);
    let mut report = InitReport::default();
    let result = async {
        created.dir(dir).map_err(io(dir))?;
        for f in &planned {
            let path = dir.join(&f.path);
            if path.exists() {
                report.kept.push(f.path.clone());
                continue;
            }
            created.file(&path, &f.text).map_err(io(&path))?;
            report.written.push(f.path.clone());
        }
        validate(dir, registry, &opts.cluster)?;
        if let Some(backend) = &opts.adopt {
            adopt(dir, registry, opts, backend, &mut created, &mut report).await?;
        }
        Ok::<(), InitError>(())
    }
    .await;
    if let Err(e) = result {
        created.undo();
        return Err(e);
    }
    let mut paths = report.written.clone();
    paths.extend(report.adopted.iter().cloned());
    // The composition adopt edited is committed too (it may have been one init kept).
    if !report.adopted.is_empty() {
        paths.push(format!("clusters/{}/resources.yaml", opts.cluster));
    }
    let had_git = dir.join(".git").exists();
    match git::commit_new(dir, &paths, &opts.cluster, &opts.fallback_identity) {
        Ok(outcome) => {
            report.git_initialized = outcome.initialized;
            report.commit = outcome.commit;
            report.fallback_identity_used = outcome.fallback_identity_used;
            Ok(report)
        }
        Err(e) => {
            if !had_git {
                let _ = std::fs::remove_dir_all(dir.join(".git"));
            }
            created.undo();
            Err(e)
        }
    }
}

/// Loads the repository as `validate` does; any error (in the new cluster or one `--force`
/// kept) stops init.
fn validate(dir: &Path, registry: &Registry, cluster: &str) -> Result<(), InitError> {
    let source = FsSource::new(dir).map_err(|e| InitError::Validation(e.to_string()))?;
    let options = LoadOptions::default().with_clusters([cluster]);
    let mut repo = load_repository(&source, registry, &options)
        .map_err(|e| InitError::Validation(e.to_string()))?;
    proxops_graph::check_repository(registry, &mut repo);
    let errors: Vec<String> = repo
        .diagnostics
        .iter()
        .filter(|d| d.is_error())
        .map(ToString::to_string)
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(InitError::Validation(errors.join("\n")))
    }
}

/// `adopt --all` into the new repository, with the credentials given (not yet decryptable: the
/// age identity may be elsewhere) standing in for the environment's.
async fn adopt(
    dir: &Path,
    registry: &Registry,
    opts: &InitOptions,
    backend: &Backend,
    created: &mut Created,
    report: &mut InitReport,
) -> Result<(), InitError> {
    let source = FsSource::new(dir).map_err(|e| InitError::Validation(e.to_string()))?;
    let options = LoadOptions::default().with_clusters([opts.cluster.as_str()]);
    let repo = load_repository(&source, registry, &options)
        .map_err(|e| InitError::Validation(e.to_string()))?;
    let cluster = repo
        .cluster(&opts.cluster)
        .ok_or_else(|| InitError::Validation(format!("no cluster `{}` loaded", opts.cluster)))?;
    let suffix = opts.cluster.to_ascii_uppercase().replace('-', "_");
    let given = |name: &str| -> Option<String> {
        match &opts.credentials {
            InitCredentials::Token(t) if name == format!("PROXOPS_PVE_TOKEN_{suffix}") => {
                Some(t.expose().trim().to_owned())
            }
            InitCredentials::Password { user, .. }
                if name == format!("PROXOPS_PVE_USER_{suffix}") =>
            {
                Some(user.clone())
            }
            InitCredentials::Password { password, .. }
                if name == format!("PROXOPS_PVE_PASSWORD_{suffix}") =>
            {
                Some(password.expose().to_owned())
            }
            _ => std::env::var(name).ok(),
        }
    };
    let settings = effective(&Layers {
        cluster: &cluster.name,
        repository: repo.config.as_ref(),
        cluster_config: cluster.config.as_ref(),
        flags: &FlagSettings::default(),
        env: &given,
        default_log_level: LogLevel::Warn,
    });
    let conn = connect_with(registry, cluster, backend, settings, Some(dir)).await?;
    let ctx = AdoptContext::for_cluster(cluster);
    let outcomes = adopt_live(&conn.client, &ctx, &Selection::All).await;
    #[cfg(feature = "sim")]
    if let Some(sim) = conn.sim {
        // adopt wrote nothing to the simulator: a failed stop loses nothing.
        let _ = sim.shutdown().await;
    }
    let mut adopted = Vec::new();
    for (vmid, outcome) in outcomes? {
        match outcome {
            Outcome::Adopted(a) => adopted.push(a),
            Outcome::Refused(r) => report.not_adopted.push(format!("vmid {vmid}: {r}")),
        }
    }
    if adopted.is_empty() {
        return Ok(());
    }
    let composition = dir
        .join("clusters")
        .join(&opts.cluster)
        .join("resources.yaml");
    created.remember_contents(&composition);
    let refs: Vec<&crate::adopt::Adopted> = adopted.iter().map(AsRef::as_ref).collect();
    let written = write(dir, &opts.cluster, &refs)?;
    for path in &written.manifests {
        created.remember(&dir.join(path));
        report
            .adopted
            .push(path.to_string_lossy().replace('\\', "/"));
    }
    validate(dir, registry, &opts.cluster)
}

/// What init created, so that a failure removes it again (and restores a file adopt edited).
struct Created {
    root: PathBuf,
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    restore: Vec<(PathBuf, Vec<u8>)>,
}

impl Created {
    fn new(root: &Path) -> Created {
        Created {
            root: root.to_path_buf(),
            files: Vec::new(),
            dirs: Vec::new(),
            restore: Vec::new(),
        }
    }

    /// Creates `dir` and its missing parents, remembering each one made.
    fn dir(&mut self, dir: &Path) -> std::io::Result<()> {
        let mut missing = Vec::new();
        let mut at = dir;
        while !at.exists() {
            missing.push(at.to_path_buf());
            match at.parent() {
                Some(p) => at = p,
                None => break,
            }
        }
        std::fs::create_dir_all(dir)?;
        self.dirs.extend(missing.into_iter().rev());
        Ok(())
    }

    /// Writes a new file, refusing one that appeared meanwhile (a failure removes it again).
    fn file(&mut self, path: &Path, text: &str) -> std::io::Result<()> {
        if let Some(parent) = path.parent() {
            self.dir(parent)?;
        }
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)?;
        self.files.push(path.to_path_buf());
        std::io::Write::write_all(&mut f, text.as_bytes())?;
        f.sync_all()
    }

    fn remember(&mut self, path: &Path) {
        if !self.files.iter().any(|p| p == path) {
            self.files.push(path.to_path_buf());
        }
    }

    /// Keeps a file's bytes to put back on failure (one init did not create).
    fn remember_contents(&mut self, path: &Path) {
        if !self.files.iter().any(|p| p == path)
            && let Ok(bytes) = std::fs::read(path)
        {
            self.restore.push((path.to_path_buf(), bytes));
        }
    }

    /// Removes what was created, newest first; best effort, never beyond the root's parent.
    fn undo(&mut self) {
        for (path, bytes) in self.restore.drain(..) {
            let _ = std::fs::write(&path, bytes);
        }
        for f in self.files.drain(..).rev() {
            let _ = std::fs::remove_file(f);
        }
        for d in self.dirs.drain(..).rev() {
            if d.starts_with(&self.root) || self.root.starts_with(&d) {
                let _ = std::fs::remove_dir(d);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_split_into_user_id_and_secret() {
        assert_eq!(
            split_token("proxops@pve!agent=5f1c-aa\n"),
            Ok(("proxops@pve", "agent", "5f1c-aa"))
        );
        for bad in [
            "proxops@pve",
            "proxops!agent=x",
            "a@b!=x",
            "a@b!id=",
            "@pve!id=x",
        ] {
            assert!(split_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_are_checked_before_anything_is_written() {
        let ok = InitOptions::new("lab", "https://pve.lan:8006");
        assert!(check(&ok).is_ok());
        for bad in [
            InitOptions::new("Lab", "https://pve.lan:8006"),
            InitOptions::new("lab", "pve.lan:8006"),
            InitOptions::new("lab", "https://root:pw@pve.lan:8006"),
            InitOptions::new("lab", "root:pw@pve.lan:8006"),
            InitOptions::new("lab", "https://pve.lan:8006").with_nodes(vec!["pve 1".into()]),
            InitOptions::new("lab", "https://pve.lan:8006").with_fingerprint(Some("AA:BB".into())),
            InitOptions::new("lab", "https://pve.lan:8006")
                .with_credentials(InitCredentials::Token(Secret::new("a@b!c=d")), None),
            InitOptions::new("lab", "https://pve.lan:8006").with_credentials(
                InitCredentials::Token(Secret::new("a@b!c=d")),
                Some("age1nope".into()),
            ),
        ] {
            let refused = check(&bad);
            assert!(matches!(refused, Err(InitError::Invalid { .. })), "{bad:?}");
            let text = refused.err().map(|e| e.to_string()).unwrap_or_default();
            assert!(
                !text.contains(":pw@"),
                "a password in the URL is echoed: {text}"
            );
        }
    }
}
