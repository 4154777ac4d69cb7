//! `proxops init`.

use crate::error::CommandError;
use crate::session::{BackendArgs, RepoArgs, runtime};
use proxops_engine::init::{InitCredentials, InitOptions, InitReport, init};
use proxops_model::Registry;
use proxops_secrets::Secret;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Make a new GitOps repository for one cluster: layout, credentials encrypted, first commit.
///
/// Writes proxops.yaml, clusters/NAME/{config.yaml,resources.yaml,secrets.sops.yaml}, the kind
/// directories, .gitignore, .sops.yaml, the JSON Schema with editor settings, runs `git init`
/// and commits. The API token (`user@realm!id=secret`), or with `--auth ticket` the password,
/// is read from stdin (prompted for, not echoed, on a terminal) and only ever written encrypted
/// to the age recipient. A directory that is not empty is refused unless `--force`, which only
/// adds the missing files. With `--from-cluster` the live cluster's guests are adopted into the
/// first commit.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository to make (or give it as `--repo`) [default: the current directory].
    #[arg(value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// The cluster's name (lowercase words joined by `-`).
    #[arg(long, value_name = "NAME")]
    pub cluster: String,
    /// The cluster's API endpoint, e.g. `https://pve1.lan:8006`.
    #[arg(long, value_name = "URL")]
    pub url: String,
    /// A node of the allowlist (repeat for each node).
    #[arg(long = "node", value_name = "N")]
    pub nodes: Vec<String>,
    /// Pin the API certificate by its SHA-256 fingerprint (`AA:BB:...`).
    #[arg(long, value_name = "SHA256")]
    pub fingerprint: Option<String>,
    /// Encrypt the credentials to this age public key (`age1...`).
    #[arg(long, value_name = "KEY", conflicts_with = "new_age_key")]
    pub age_recipient: Option<String>,
    /// Make a new age key, write it to FILE (outside the repository, mode 0600) and encrypt
    /// the credentials to it.
    #[arg(long, value_name = "FILE")]
    pub new_age_key: Option<PathBuf>,
    /// How ProxOps logs in: `token` (an API token on stdin) or `ticket` (`--user` and its
    /// password on stdin).
    #[arg(long, value_enum, default_value_t = Auth::Token)]
    pub auth: Auth,
    /// With `--auth ticket`: the user, e.g. root@pam.
    #[arg(long, value_name = "USER@REALM")]
    pub user: Option<String>,
    /// Keep no credentials in the repository (they come from `PROXOPS_PVE_TOKEN_<CLUSTER>`);
    /// nothing is read from stdin.
    #[arg(long, conflicts_with_all = ["age_recipient", "new_age_key", "user"])]
    pub no_credentials: bool,
    /// Add the missing files to a directory that is not empty (never overwrites one).
    #[arg(long)]
    pub force: bool,
    /// Adopt the cluster's guests (`adopt --all`) into the first commit.
    #[arg(long)]
    pub from_cluster: bool,
    #[command(flatten)]
    pub backend: BackendArgs,
}

/// The login methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Auth {
    /// An API token.
    Token,
    /// A user and its password.
    Ticket,
}

/// Runs `proxops init`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let dir = match (&args.dir, &repo.dir) {
        (Some(_), Some(_)) => {
            return Err(CommandError::usage(
                "the repository is given twice, as DIR and as --repo",
                Some("give one of them".into()),
            ));
        }
        (Some(d), None) | (None, Some(d)) => d.clone(),
        (None, None) => std::env::current_dir()
            .map_err(|e| CommandError::io("cannot read the current directory", e))?,
    };
    if args.auth == Auth::Ticket && args.user.is_none() && !args.no_credentials {
        return Err(CommandError::usage(
            "--auth ticket needs --user",
            Some("e.g. --user root@pam; the password comes on stdin".into()),
        ));
    }
    let wants_credentials = !args.no_credentials;
    if wants_credentials && args.age_recipient.is_none() && args.new_age_key.is_none() {
        return Err(CommandError::usage(
            "the credentials need an age key to be encrypted to",
            Some(
                "pass --age-recipient age1... (your public key), or --new-age-key FILE to make one, or --no-credentials"
                    .into(),
            ),
        ));
    }
    if let Some(key) = &args.new_age_key {
        refuse_key_inside(&dir, key)?;
    }
    let credentials = if wants_credentials {
        read_credentials(args)?
    } else {
        InitCredentials::None
    };
    let new_key = args
        .new_age_key
        .as_ref()
        .map(|_| proxops_secrets::generate_identity());
    let recipient = match (&args.age_recipient, &new_key) {
        (Some(r), _) => Some(r.trim().to_owned()),
        (None, Some(k)) => Some(k.recipient.clone()),
        (None, None) => None,
    };
    let now = proxops_store::documents::utc_timestamp(std::time::SystemTime::now());
    // The key first: a repository encrypted to a key that could not be written is useless.
    if let (Some(path), Some(key)) = (&args.new_age_key, &new_key) {
        write_key(path, &key.key_file_text(&now))?;
    }
    let adopt = args
        .from_cluster
        .then(|| args.backend.backend(&args.cluster));
    let opts = InitOptions::new(&args.cluster, &args.url)
        .with_nodes(args.nodes.clone())
        .with_fingerprint(args.fingerprint.clone())
        .with_credentials(credentials, recipient)
        .with_force(args.force)
        .with_adopt(adopt);
    let registry = Registry::builtin();
    let result = runtime()?.block_on(init(&dir, &opts, &registry, &now));
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if let Some(path) = &args.new_age_key {
                let _ = std::fs::remove_file(path);
            }
            return Err(CommandError::from(e));
        }
    };
    let text = render(
        &dir,
        args,
        new_key.as_ref().map(|k| k.recipient.as_str()),
        &report,
    );
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(if report.not_adopted.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The token, or the password, from stdin: prompted for without echo on a terminal, else the
/// first line of what is piped in.
fn read_credentials(args: &Args) -> Result<InitCredentials, CommandError> {
    let what = match args.auth {
        Auth::Token => "the API token (user@realm!id=secret)",
        Auth::Ticket => "the password",
    };
    let text = if std::io::stdin().is_terminal() {
        rpassword::prompt_password(format!("{what}: "))
            .map_err(|e| CommandError::io(format!("cannot read {what} from the terminal"), e))?
    } else {
        let mut text = String::new();
        std::io::stdin()
            .lock()
            .take(64 * 1024)
            .read_to_string(&mut text)
            .map_err(|e| CommandError::io(format!("cannot read {what} from stdin"), e))?;
        text
    };
    let secret = Secret::new(
        text.lines()
            .next()
            .unwrap_or_default()
            .trim_end_matches('\r'),
    );
    if secret.is_blank() {
        return Err(CommandError::usage(
            format!("no {what} on stdin"),
            Some(
                "pipe it in, e.g. `proxops init ... < token.txt`, or pass --no-credentials".into(),
            ),
        ));
    }
    Ok(match args.auth {
        Auth::Token => InitCredentials::Token(secret.trimmed()),
        Auth::Ticket => InitCredentials::Password {
            user: args.user.clone().unwrap_or_default(),
            password: secret,
        },
    })
}

/// A new key inside the repository would be committed with it.
fn refuse_key_inside(dir: &Path, key: &Path) -> Result<(), CommandError> {
    let absolute = |p: &Path| {
        std::path::absolute(p).map(|a| {
            // Resolve what exists (symlinks), keep the rest as given.
            let mut existing = a.as_path();
            let mut rest = Vec::new();
            while !existing.exists() {
                match (existing.parent(), existing.file_name()) {
                    (Some(parent), Some(name)) => {
                        rest.push(name.to_owned());
                        existing = parent;
                    }
                    _ => break,
                }
            }
            let mut out = existing
                .canonicalize()
                .unwrap_or_else(|_| existing.to_path_buf());
            out.extend(rest.iter().rev());
            out
        })
    };
    let (Ok(dir), Ok(key)) = (absolute(dir), absolute(key)) else {
        return Ok(());
    };
    if key.starts_with(&dir) {
        return Err(CommandError::usage(
            format!(
                "{} is inside the repository, where it would be committed",
                key.display()
            ),
            Some("keep the age key outside, e.g. --new-age-key ~/.config/sops/age/keys.txt".into()),
        ));
    }
    Ok(())
}

/// Writes the key file, never over an existing one, readable by its owner only.
fn write_key(path: &Path, text: &Secret) -> Result<(), CommandError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| CommandError::io(format!("cannot create {}", parent.display()), e))?;
    }
    let mut file = options.open(path).map_err(|e| {
        CommandError::io(format!("cannot create the age key {}", path.display()), e)
    })?;
    file.write_all(text.expose().as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| CommandError::io(format!("cannot write the age key {}", path.display()), e))
}

fn render(dir: &Path, args: &Args, new_recipient: Option<&str>, report: &InitReport) -> String {
    let mut out = String::new();
    if report.git_initialized {
        out.push_str(&format!(
            "initialized a git repository in {}\n",
            dir.display()
        ));
    }
    out.push_str(&format!("wrote {} files:\n", report.written.len()));
    for path in report.written.iter().filter(|p| !p.ends_with(".gitkeep")) {
        out.push_str(&format!("  {path}\n"));
    }
    let kept_dirs = report
        .written
        .iter()
        .filter(|p| p.ends_with(".gitkeep"))
        .count();
    if kept_dirs > 0 {
        out.push_str(&format!("  and {kept_dirs} kind directories (.gitkeep)\n"));
    }
    for path in &report.kept {
        out.push_str(&format!("kept {path} (already there)\n"));
    }
    if let (Some(path), Some(recipient)) = (&args.new_age_key, new_recipient) {
        out.push_str(&format!(
            "age key {} (public key {recipient}): keep it safe and out of git; `sops` and the agent read it as SOPS_AGE_KEY_FILE\n",
            path.display()
        ));
    }
    for path in &report.adopted {
        out.push_str(&format!("adopted {path}\n"));
    }
    for why in &report.not_adopted {
        out.push_str(&format!("not adopted: {why}\n"));
    }
    match &report.commit {
        Some(id) => {
            let short = id.get(..12).unwrap_or(id);
            out.push_str(&format!(
                "committed {short}: proxops init: cluster {}\n",
                args.cluster
            ));
            if report.fallback_identity_used {
                let who = proxops_engine::init::CommitIdentity::default();
                out.push_str(&format!(
                    "note: git has no user.name/user.email here: committed as \"{} <{}>\"\n",
                    who.name, who.email
                ));
            }
        }
        None => out.push_str("nothing new to commit\n"),
    }
    let repo = dir.display();
    out.push_str(&format!(
        "next: proxops validate --repo {repo}, then proxops diff --repo {repo} (add --backend sim to try it on the simulator)\n"
    ));
    out
}
