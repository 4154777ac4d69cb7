//! The files of a new repository: their paths and text, built from [`InitOptions`] without
//! touching the disk (the secrets file is encrypted here, so its text never holds a secret).

use super::{InitCredentials, InitError, InitOptions};
use proxops_model::Registry;
use proxops_model::stack::{STACK_ROOT, TEMPLATE_ROOT};
use proxops_secrets::{Document, Secret, Value};

/// One file `init` writes: a path relative to the repository and its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedFile {
    pub(crate) path: String,
    pub(crate) text: String,
}

/// The keys of the secrets file's `secrets:` map that the cluster's config names.
const USER_KEY: &str = "proxops-user";
const TOKEN_ID_KEY: &str = "proxops-token-id";
const TOKEN_KEY: &str = "proxops-token";
const PASSWORD_KEY: &str = "proxops-password";

/// Where the JSON Schema goes, for editors.
const SCHEMA_DIR: &str = "schema";

/// A YAML double-quoted scalar (JSON's string syntax is YAML's).
fn quoted(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Every file of the new repository, in path order.
pub(crate) fn plan(
    opts: &InitOptions,
    registry: &Registry,
    last_modified: &str,
) -> Result<Vec<PlannedFile>, InitError> {
    let c = &opts.cluster;
    let mut files = vec![
        file("proxops.yaml", proxops_yaml()),
        file(&format!("clusters/{c}/config.yaml"), config_yaml(opts)),
        file(&format!("clusters/{c}/resources.yaml"), resources_yaml(c)),
        file(".gitignore", GITIGNORE.to_owned()),
        file(".vscode/settings.json", editor_settings(registry)),
    ];
    if let Some(recipient) = &opts.recipient {
        files.push(file(".sops.yaml", sops_rules(recipient)));
    }
    if let (Some(recipient), Some(doc)) = (&opts.recipient, secrets_document(&opts.credentials)) {
        let text = proxops_secrets::encrypt_document(&doc, &[recipient], last_modified)
            .map_err(InitError::Encrypt)?;
        files.push(file(&format!("clusters/{c}/secrets.sops.yaml"), text));
    }
    for (name, text) in proxops_model::schema::schema_files(registry) {
        files.push(file(&format!("{SCHEMA_DIR}/{name}"), text));
    }
    let roots = registry
        .kinds()
        .map(|k| k.root())
        .chain([TEMPLATE_ROOT, STACK_ROOT]);
    for root in roots {
        // Shared definitions go to base/ (Stacks are per cluster only).
        if root != STACK_ROOT {
            files.push(file(&format!("{root}/base/.gitkeep"), String::new()));
        }
        files.push(file(&format!("{root}/{c}/.gitkeep"), String::new()));
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(files)
}

fn file(path: &str, text: String) -> PlannedFile {
    PlannedFile {
        path: path.to_owned(),
        text,
    }
}

fn proxops_yaml() -> String {
    "# Process-wide ProxOps settings. Each cluster is a directory under clusters/: its endpoint\n\
     # and credentials (config.yaml, secrets.sops.yaml) and the manifests it consumes\n\
     # (resources.yaml), which live under the kind directories (vm/, lxc/, ...): base/ for what\n\
     # clusters share, <cluster>/ for one cluster's own.\n\
     log:\n  level: info\n\n\
     git:\n  branch: main\n\n\
     reconcile:\n  poll-interval: 60s\n  task-timeout: 20m\n  \
     # At most this many deletions per cycle and cluster.\n  prune-budget: 2\n"
        .to_owned()
}

fn config_yaml(opts: &InitOptions) -> String {
    let c = &opts.cluster;
    let mut out =
        format!("# Cluster `{c}`: its PVE endpoint, node allowlist and credentials.\npve:\n");
    if matches!(opts.credentials, InitCredentials::Password { .. }) {
        out.push_str("  # A user's password (a ticket), not an API token.\n  auth: ticket\n");
    }
    out.push_str(&format!(
        "  clusters:\n    {c}:\n      base-url: {}\n",
        quoted(&opts.base_url)
    ));
    if opts.nodes.is_empty() {
        out.push_str(
            "      # The node allowlist (the cluster boundary): every node a manifest names must\n      \
             # be listed here. Empty: no check.\n      # nodes: [pve1, pve2]\n",
        );
    } else {
        out.push_str("      # The node allowlist (the cluster boundary): every node a manifest names must\n      # be listed here.\n      nodes:\n");
        for n in &opts.nodes {
            out.push_str(&format!("        - {}\n", quoted(n)));
        }
    }
    match &opts.fingerprint {
        Some(fp) => out.push_str(&format!(
            "      # The SHA-256 fingerprint of the API certificate (PVE's own is self-signed).\n      fingerprint: {}\n",
            quoted(fp)
        )),
        None => out.push_str(
            "      # PVE's own certificate is self-signed: pin it (Datacenter > node > Certificates,\n      \
             # or `openssl x509 -in /etc/pve/local/pve-ssl.pem -noout -fingerprint -sha256`).\n      \
             # fingerprint: \"AA:BB:...\"\n",
        ),
    }
    let mapping = match (&opts.recipient, &opts.credentials) {
        (Some(_), InitCredentials::Token(_)) => Some(format!(
            "          user: {USER_KEY}\n          token-id: {TOKEN_ID_KEY}\n          token: {TOKEN_KEY}\n"
        )),
        (Some(_), InitCredentials::Password { .. }) => Some(format!(
            "          user: {USER_KEY}\n          password: {PASSWORD_KEY}\n"
        )),
        _ => None,
    };
    match mapping {
        Some(keys) => out.push_str(&format!(
            "      # The credentials, encrypted to the age recipient of .sops.yaml; edit them with\n      \
             # `sops clusters/{c}/secrets.sops.yaml`. The agent decrypts them with the age key\n      \
             # that SOPS_AGE_KEY_FILE names.\n      secrets-file: secrets.sops.yaml\n      \
             secrets:\n        pve:\n{keys}"
        )),
        None => out.push_str(&format!(
            "      # No credentials in the repository: they come from the environment\n      \
             # (PROXOPS_PVE_TOKEN_{} = user@realm!id=secret).\n",
            c.to_ascii_uppercase().replace('-', "_")
        )),
    }
    out
}

fn resources_yaml(cluster: &str) -> String {
    format!(
        "# The composition of cluster `{cluster}`: every manifest it consumes, as paths relative to\n\
         # this directory (e.g. ../../vm/{cluster}/web.yaml). `proxops adopt` adds the guests it\n\
         # takes over here.\nresources: []\n"
    )
}

const GITIGNORE: &str = "# Never commit a decrypted secret or an age key.\n\
*.key\n\
keys.txt\n\
*.dec.yaml\n\
*.decrypted.yaml\n\
# Local state of `--backend sim` runs and editors.\n\
/.proxops/\n\
*.tmp\n";

/// sops's creation rule: `sops clusters/<c>/secrets.sops.yaml` encrypts to the recipient.
fn sops_rules(recipient: &str) -> String {
    format!(
        "# sops: new and edited secrets files under clusters/ are encrypted to this age recipient.\n\
         creation_rules:\n  - path_regex: clusters/[^/]+/secrets\\.sops\\.yaml$\n    age: {recipient}\n"
    )
}

/// VS Code's YAML extension (and any editor reading its settings): each kind root's manifests
/// against that kind's schema.
fn editor_settings(registry: &Registry) -> String {
    let mut schemas = serde_json::Map::new();
    for kind in registry.kinds() {
        let name = kind.name().to_ascii_lowercase();
        schemas.insert(
            format!("./{SCHEMA_DIR}/{name}.schema.json"),
            serde_json::json!([format!("{}/**/*.yaml", kind.root())]),
        );
    }
    for (kind, root) in [
        (proxops_model::stack::STACK_TEMPLATE, TEMPLATE_ROOT),
        (proxops_model::stack::STACK, STACK_ROOT),
    ] {
        schemas.insert(
            format!("./{SCHEMA_DIR}/{}.schema.json", kind.to_ascii_lowercase()),
            serde_json::json!([format!("{root}/**/*.yaml")]),
        );
    }
    let settings = serde_json::json!({ "yaml.schemas": schemas });
    let mut text = serde_json::to_string_pretty(&settings).unwrap_or_default();
    text.push('\n');
    text
}

/// The plaintext of the secrets file, or `None` when there is nothing to keep.
fn secrets_document(credentials: &InitCredentials) -> Option<Document> {
    let entry = |k: &str, v: &str| (k.to_owned(), Value::Str(Secret::new(v)));
    let secrets = match credentials {
        InitCredentials::None => return None,
        InitCredentials::Token(token) => {
            let (user, id, secret) = super::split_token(token.expose()).ok()?;
            vec![
                entry(USER_KEY, user),
                entry(TOKEN_ID_KEY, id),
                entry(TOKEN_KEY, secret),
            ]
        }
        InitCredentials::Password { user, password } => vec![
            entry(USER_KEY, user),
            entry(PASSWORD_KEY, password.expose()),
        ],
    };
    Some(Document::new(Value::Map(vec![(
        "secrets".to_owned(),
        Value::Map(secrets),
    )])))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECIPIENT: &str = "age1wf30pqcjptpe2qlcepnxd80ju4cdzezumymha3rht5am4qzp5qqqm2y43s";

    fn text<'a>(files: &'a [PlannedFile], path: &str) -> &'a str {
        &files
            .iter()
            .find(|f| f.path == path)
            .unwrap_or_else(|| panic!("no {path}"))
            .text
    }

    #[test]
    fn the_same_options_plan_the_same_files_but_fresh_ciphertext() {
        let registry = Registry::builtin();
        let opts = InitOptions::new("home", "https://pve1.lan:8006")
            .with_nodes(vec!["pve1".into(), "pve2".into()])
            .with_credentials(
                InitCredentials::Token(Secret::new("proxops@pve!agent=s3cret")),
                Some(RECIPIENT.into()),
            );
        let a = plan(&opts, &registry, "2026-12-06T01:30:00Z").unwrap();
        let b = plan(&opts, &registry, "2026-12-06T01:30:00Z").unwrap();
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.path, y.path);
            if x.path.ends_with("secrets.sops.yaml") {
                assert_ne!(x.text, y.text, "a new data key and nonces each time");
                assert!(!x.text.contains("s3cret"));
            } else {
                assert_eq!(x.text, y.text, "{}", x.path);
            }
        }
        insta::assert_snapshot!("token_config", text(&a, "clusters/home/config.yaml"));
    }

    #[test]
    fn ticket_auth_names_the_password_and_says_so() {
        let registry = Registry::builtin();
        let opts = InitOptions::new("lab", "https://10.0.0.5:8006")
            .with_fingerprint(Some(["AB"; 32].join(":")))
            .with_credentials(
                InitCredentials::Password {
                    user: "root@pam".into(),
                    password: Secret::new("hunter2"),
                },
                Some(RECIPIENT.into()),
            );
        let files = plan(&opts, &registry, "2026-12-06T01:30:00Z").unwrap();
        insta::assert_snapshot!("ticket_config", text(&files, "clusters/lab/config.yaml"));
        let none = plan(
            &InitOptions::new("lab", "https://10.0.0.5:8006"),
            &registry,
            "x",
        )
        .unwrap();
        assert!(
            none.iter()
                .all(|f| !f.path.ends_with("secrets.sops.yaml") && f.path != ".sops.yaml")
        );
        assert!(text(&none, "clusters/lab/config.yaml").contains("PROXOPS_PVE_TOKEN_LAB"));
    }
}
