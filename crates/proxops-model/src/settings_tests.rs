use super::*;
use std::collections::BTreeMap;

fn config(json: serde_json::Value) -> ConfigFile {
    serde_json::from_value(json).unwrap()
}

fn lab(extra: serde_json::Value) -> ConfigFile {
    let mut entry = serde_json::json!({"base-url": "https://pve-lab.lan:8006", "nodes": ["pve1"]});
    if let (Some(e), serde_json::Value::Object(x)) = (entry.as_object_mut(), extra) {
        e.extend(x);
    }
    config(serde_json::json!({"pve": {"clusters": {"lab": entry}}}))
}

fn settings(
    repo: Option<&ConfigFile>,
    cluster: Option<&ConfigFile>,
    flags: &FlagSettings,
    env: &[(&str, &str)],
) -> ClusterSettings {
    let env: BTreeMap<String, String> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |k: &str| env.get(k).cloned();
    effective(&Layers {
        cluster: "lab",
        repository: repo,
        cluster_config: cluster,
        flags,
        env: &lookup,
        default_log_level: LogLevel::Warn,
    })
}

#[test]
fn defaults_alone() {
    let s = settings(None, None, &FlagSettings::default(), &[]);
    assert_eq!(s.prune_budget, Sourced::new(3, Origin::Default));
    assert_eq!(s.poll_interval.value, Duration::from_secs(30));
    assert_eq!(s.task_timeout.value, Duration::from_secs(1800));
    assert_eq!(s.log_level, Sourced::new(LogLevel::Warn, Origin::Default));
    assert_eq!(s.listen.value, "127.0.0.1:9494");
    assert_eq!(s.data_dir.value, "/tmp/proxops-data");
    assert_eq!(s.tls, Sourced::new(Tls::System, Origin::Default));
    assert_eq!(s.credentials.auth.value, AuthMethod::Token);
    assert!(s.credentials.token.is_none() && s.credentials.token_value.is_none());
}

#[test]
fn each_layer_overrides_the_one_below() {
    let repo = config(serde_json::json!({
        "log": {"level": "info"},
        "pve": {"auth": "token", "ca-file": "/etc/pve-ca.pem", "user": "repo@pve"},
        "reconcile": {"prune-budget": 2, "poll-interval": "60s", "task-timeout": "20m"},
        "listen": "0.0.0.0:9000",
        "data-dir": "~/proxops",
    }));
    let cluster = config(serde_json::json!({
        "pve": {"auth": "ticket", "clusters": {"lab": {"base-url": "https://x.invalid:8006"}}},
        "reconcile": {"prune-budget": 5},
    }));
    let s = settings(
        Some(&repo),
        Some(&cluster),
        &FlagSettings::default(),
        &[("HOME", "/home/ops")],
    );
    let lab = Origin::ClusterConfig("clusters/lab/config.yaml".into());
    assert_eq!(s.prune_budget, Sourced::new(5, lab.clone()));
    assert_eq!(
        s.poll_interval,
        Sourced::new(Duration::from_secs(60), Origin::RepositoryConfig)
    );
    assert_eq!(s.task_timeout.value, Duration::from_secs(1200));
    assert_eq!(s.credentials.auth, Sourced::new(AuthMethod::Ticket, lab));
    assert_eq!(
        s.tls,
        Sourced::new(
            Tls::CaFile("/etc/pve-ca.pem".into()),
            Origin::RepositoryConfig
        )
    );
    assert_eq!(
        s.log_level,
        Sourced::new(LogLevel::Info, Origin::RepositoryConfig)
    );
    assert_eq!(s.data_dir.value, "/home/ops/proxops");
    let user = s.credentials.user.as_ref().unwrap();
    assert_eq!(
        (user.value(), &user.origin),
        (Some("repo@pve"), &Origin::RepositoryConfig)
    );

    // Flags beat both files.
    let flags = FlagSettings {
        log_level: Some(LogLevel::Debug),
        prune_budget: Some(0),
        ..FlagSettings::default()
    };
    let s = settings(Some(&repo), Some(&cluster), &flags, &[]);
    assert_eq!(
        s.log_level,
        Sourced::new(LogLevel::Debug, Origin::Flag("--log-level".into()))
    );
    assert_eq!(s.prune_budget.value, 0);
}

#[test]
fn tls_of_the_cluster_entry() {
    let s = settings(
        None,
        Some(&lab(
            serde_json::json!({"fingerprint": "AA", "insecure": true}),
        )),
        &FlagSettings::default(),
        &[],
    );
    assert_eq!(s.tls.value, Tls::Fingerprint("AA".into()));
    let s = settings(
        None,
        Some(&lab(serde_json::json!({"ca-file": "ca.pem"}))),
        &FlagSettings::default(),
        &[],
    );
    assert_eq!(s.tls.value, Tls::CaFile("ca.pem".into()));
    let s = settings(
        None,
        Some(&lab(serde_json::json!({"insecure": true}))),
        &FlagSettings::default(),
        &[],
    );
    assert_eq!(s.tls.value, Tls::Insecure);
}

fn sops_lab() -> ConfigFile {
    lab(serde_json::json!({
        "secrets-file": "secrets.sops.yaml",
        "secrets": {"pve": {"user": "u", "token-id": "id", "token": "tok", "password": "pw"}},
    }))
}

#[test]
fn credentials_environment_then_sops_then_yaml() {
    let flags = FlagSettings::default();
    let repo = config(serde_json::json!({"pve": {"token-value": "root@pam!y=yaml-secret"}}));
    // SOPS holds the token: the YAML token-value is not used for this cluster.
    let s = settings(Some(&repo), Some(&sops_lab()), &flags, &[]);
    let c = &s.credentials;
    assert!(c.token_value.is_none());
    let token = c.token.as_ref().unwrap();
    assert_eq!(
        token.origin,
        Origin::Sops {
            file: "clusters/lab/secrets.sops.yaml".into(),
            key: "tok".into()
        }
    );
    assert_eq!(token.value(), None);
    assert_eq!(
        token.describe(),
        "set (from SOPS key tok of clusters/lab/secrets.sops.yaml)"
    );
    // Without SOPS, the YAML token-value is used.
    let s = settings(Some(&repo), Some(&lab(serde_json::json!({}))), &flags, &[]);
    assert_eq!(
        s.credentials.token_value.as_ref().unwrap().origin,
        Origin::RepositoryConfig
    );
    // The environment wins over SOPS; the per-cluster variable over the global one.
    let env = [
        ("PROXOPS_PVE_TOKEN", "a@pam!x=global"),
        ("PROXOPS_PVE_TOKEN_LAB", "a@pam!x=lab"),
    ];
    let s = settings(Some(&repo), Some(&sops_lab()), &flags, &env);
    let t = s.credentials.token_value.as_ref().unwrap();
    assert_eq!(t.origin, Origin::Env("PROXOPS_PVE_TOKEN_LAB".into()));
    assert_eq!(t.value(), Some("a@pam!x=lab"));
    assert!(
        !format!("{s:?}").contains("a@pam!x=lab"),
        "Debug hides secrets"
    );
    assert_eq!(t.describe(), "set (from env PROXOPS_PVE_TOKEN_LAB)");
}

#[test]
fn ticket_credentials() {
    let flags = FlagSettings::default();
    let cluster = {
        let mut c = sops_lab();
        if let Some(p) = c.pve.as_mut() {
            p.auth = Some(AuthMethod::Ticket);
        }
        c
    };
    let s = settings(
        None,
        Some(&cluster),
        &flags,
        &[("PROXOPS_PVE_TOKEN", "ignored")],
    );
    let c = &s.credentials;
    assert!(c.token_value.is_none() && c.token.is_none());
    assert!(
        matches!(&c.password.as_ref().unwrap().origin, Origin::Sops { key, .. } if key == "pw")
    );
    let env = [
        ("PROXOPS_PVE_USER_LAB", "ops@pve"),
        ("PROXOPS_PVE_PASSWORD", "hunter2"),
    ];
    let s = settings(None, Some(&cluster), &flags, &env);
    let c = &s.credentials;
    assert_eq!(
        c.user.as_ref().unwrap().describe(),
        "ops@pve (from env PROXOPS_PVE_USER_LAB)"
    );
    assert_eq!(c.password.as_ref().unwrap().value(), Some("hunter2"));
    let lines = s.lines();
    assert!(
        lines.iter().all(|(_, v)| !v.contains("hunter2")),
        "{lines:?}"
    );
    assert!(lines.contains(&("pve.password", "set (from env PROXOPS_PVE_PASSWORD)".into())));
}

#[test]
fn variables_per_cluster() {
    assert_eq!(
        cluster_variable("PROXOPS_PVE_TOKEN", "lab-2"),
        "PROXOPS_PVE_TOKEN_LAB_2"
    );
}
