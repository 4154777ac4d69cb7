//! `kind: ApiToken` end to end (issue 32): `proxops apply --planes` on the homelab example's
//! lab cluster (persistent simulator, planes in its temporary git repository) creates a
//! declared token, and its secret reaches only the receipt's artifact, encrypted with SOPS to
//! the age recipients of the cluster's secrets file: the example's throw-away key opens it, the
//! simulator accepts the value as the token's secret, and no git object holds it in clear.
//! Then: a second apply has nothing to do, a comment change updates the token (its secret
//! stays on the plane), a token made by hand is never touched, and removing the manifest prunes
//! ProxOps's token. Without the planes, `apply` writes the encrypted secret into the repository
//! (`clusters/<c>/tokens/<name>.sops.yaml`), and a token whose secret cannot be written is
//! deleted again; a plan with nowhere to keep it, or no recipients, refuses to create it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::placement::{graph_of, sim};
use crate::support::Lab;
use proxops_engine::planner::{PlanOptions, TOKEN_NEEDS_PLANES, TOKEN_NO_RECIPIENTS, plan_cluster};
use proxops_engine::secrets::ClusterSecrets;
use proxops_model::ResourceKey;
use proxops_pve::{Credentials, Method, Params, PveClient};
use proxops_pve_sim::{SimConfig, SimHandle, start};
use proxops_secrets::{Identities, Secret, SopsFile};
use proxops_store::{PlaneRefs, Store};
use serde_json::Value;
use std::collections::BTreeSet;

const USER: &str = "apiVersion: proxops/v1alpha1\nkind: User\nmetadata:\n  name: ci\nspec:\n  userid: ci@pve\n  comment: CI account\n";

fn token(comment: &str) -> String {
    format!(
        "apiVersion: proxops/v1alpha1\nkind: ApiToken\nmetadata:\n  name: deploy\nspec:\n  userid: ci@pve\n  token: deploy\n  comment: {comment}\n"
    )
}

impl Lab {
    /// `proxops apply --planes --yes` on lab's persistent simulator; its standard output.
    fn apply_planes(&self) -> String {
        let out = self.apply_on("lab", &["--planes"]);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "apply failed: {stdout}\n{stderr}");
        stdout + &stderr
    }

    /// `proxops apply --no-planes --yes` on lab's persistent simulator; its output and status.
    fn apply_no_planes(&self) -> (bool, String) {
        let out = self.apply_on("lab", &["--no-planes"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        (out.status.success(), text)
    }

    /// Asserts that `ci@pve!deploy` authenticates with `secret` on lab's simulator.
    async fn deploy_token_authenticates(&self, secret: Secret) {
        let (sim, client) = self
            .lab_sim(Some(Credentials::Token {
                id: "ci@pve!deploy".into(),
                secret,
            }))
            .await;
        client
            .call_json(Method::GET, "/version", "/version", &Params::new())
            .await
            .expect("the token authenticates with the value");
        sim.shutdown().await.unwrap();
    }

    /// Lab's composition with the example's files and `extra` (repository paths).
    fn compose_lab(&self, extra: &[&str]) {
        let mut text = std::fs::read_to_string(self.path().join("clusters/lab/resources.yaml"))
            .unwrap()
            .lines()
            .filter(|l| !l.contains("apitoken/") && !l.contains("user/lab/"))
            .map(|l| format!("{l}\n"))
            .collect::<String>();
        for f in extra {
            text.push_str(&format!("  - ../../{f}\n"));
        }
        self.repo.write("clusters/lab/resources.yaml", &text);
    }

    /// A simulator on lab's state file (`lab.lab.json`: `--sim-state lab.json`, per cluster),
    /// and a client with `credentials` (its own token when
    /// `None`). Shut it down before the next `proxops` run.
    async fn lab_sim(&self, credentials: Option<Credentials>) -> (SimHandle, PveClient) {
        let config = SimConfig::default()
            .with_state_file(self.state.path().join("lab.lab.json"))
            .unwrap();
        let sim = start(config).await.unwrap();
        let credentials = credentials.unwrap_or_else(|| proxops_test_support::sim::token(&sim));
        let client = proxops_test_support::sim::client_builder(&sim, credentials)
            .build()
            .unwrap();
        (sim, client)
    }

    /// The payload of ApiToken/deploy's `secret` artifact on the observed plane.
    fn secret_artifact(&self) -> Option<Value> {
        let store = Store::open(self.path()).unwrap();
        let refs = PlaneRefs::for_cluster("lab").unwrap();
        let observed = store.read_observed(&refs, None).unwrap()?;
        let key = ResourceKey {
            kind: "ApiToken".into(),
            name: "deploy".into(),
        };
        observed
            .artifacts
            .get(&(key, "secret".to_owned()))
            .map(|a| a.doc.spec.clone())
    }
}

/// The tokens of `ci@pve` on lab's simulator: id → comment.
async fn tokens(client: &PveClient) -> Vec<(String, String)> {
    let path = "/access/users/ci@pve/token";
    let list = client
        .call_json(
            Method::GET,
            "/access/users/{userid}/token",
            path,
            &Params::new(),
        )
        .await
        .unwrap();
    let mut out: Vec<(String, String)> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["tokenid"].as_str().unwrap().to_owned(),
                t["comment"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

/// Every git object of the repository, as `git cat-file` prints it (decompressed).
fn all_objects(lab: &Lab) -> String {
    let out = std::process::Command::new("git")
        .args(["cat-file", "--batch-all-objects", "--batch"])
        .current_dir(lab.path())
        .output()
        .unwrap();
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_declared_token_is_created_its_secret_sealed_on_the_observed_plane_and_pruned() {
    let lab = Lab::new();
    lab.repo.write("user/lab/ci.yaml", USER);
    lab.repo
        .write("apitoken/lab/deploy.yaml", &token("deploys from CI"));
    lab.compose_lab(&["user/lab/ci.yaml", "apitoken/lab/deploy.yaml"]);
    lab.commit("a CI user and its deploy token");
    let first = lab.apply_planes();
    assert!(first.contains("cluster lab: 7 succeeded"), "{first}");

    // The receipt's artifact: the token id in clear, its value only inside the SOPS document,
    // encrypted to the recipient of clusters/lab/secrets.sops.yaml.
    let artifact = lab.secret_artifact().expect("the token's secret artifact");
    assert_eq!(artifact["fullTokenid"], "ci@pve!deploy");
    let sops = artifact["sops"].as_str().unwrap();
    let file = SopsFile::parse(sops).unwrap();
    let key = std::fs::read_to_string(proxops_test_support::homelab().join("example-age-key.txt"))
        .unwrap();
    let recipients: Vec<&str> = file
        .metadata()
        .age
        .iter()
        .map(|r| r.recipient.as_str())
        .collect();
    let identities = Identities::parse(&key).unwrap();
    assert_eq!(recipients, identities.public_keys());
    let doc = file.decrypt(&identities).unwrap();
    let get = |k: &str| doc.get(&[k]).and_then(|v| v.as_secret()).unwrap();
    assert_eq!(get("full-tokenid").expose(), "ci@pve!deploy");
    let value = get("value");
    assert!(value.expose().len() >= 16, "a real secret");

    // The simulator takes it as the token's secret; a wrong one is refused.
    let (sim, client) = lab
        .lab_sim(Some(Credentials::Token {
            id: "ci@pve!deploy".into(),
            secret: value.clone(),
        }))
        .await;
    client
        .call_json(Method::GET, "/version", "/version", &Params::new())
        .await
        .expect("the token authenticates with the sealed value");
    let wrong = proxops_test_support::sim::client_builder(
        &sim,
        Credentials::Token {
            id: "ci@pve!deploy".into(),
            secret: Secret::new("00000000-0000-0000-0000-000000000000"),
        },
    )
    .build()
    .unwrap();
    assert!(
        wrong
            .call_json(Method::GET, "/version", "/version", &Params::new())
            .await
            .is_err()
    );
    // A token made by hand for the same user, which ProxOps must never touch.
    let admin = proxops_test_support::sim::client(&sim);
    admin
        .call_json(
            Method::POST,
            "/access/users/{userid}/token/{tokenid}",
            "/access/users/ci@pve/token/manual",
            &Params::new().set("comment", "made by hand"),
        )
        .await
        .unwrap();
    sim.shutdown().await.unwrap();

    // Nowhere in clear: no git object, nor what apply printed.
    assert!(!all_objects(&lab).contains(value.expose()));
    assert!(!first.contains(value.expose()));

    // Converged: nothing to do, the artifact kept.
    let second = lab.apply_planes();
    assert!(second.contains("converged, nothing to do"), "{second}");
    assert_eq!(lab.secret_artifact().as_ref(), Some(&artifact));

    // A comment change: the token updated in place, its secret still on the plane.
    lab.repo
        .write("apitoken/lab/deploy.yaml", &token("deploys from CI, v2"));
    lab.commit("the token's comment");
    let third = lab.apply_planes();
    assert!(third.contains("cluster lab: 1 succeeded"), "{third}");
    assert_eq!(lab.secret_artifact().as_ref(), Some(&artifact));
    let (sim, client) = lab.lab_sim(None).await;
    assert_eq!(
        tokens(&client).await,
        [
            (
                "deploy".to_owned(),
                "deploys from CI, v2 [proxops.lab.apitoken.deploy]".to_owned()
            ),
            ("manual".to_owned(), "made by hand".to_owned()),
        ]
    );
    sim.shutdown().await.unwrap();

    // Removed from the composition: ProxOps's token is pruned, the hand-made one stays.
    std::fs::remove_file(lab.path().join("apitoken/lab/deploy.yaml")).unwrap();
    lab.compose_lab(&["user/lab/ci.yaml"]);
    lab.commit("no deploy token");
    let fourth = lab.apply_planes();
    assert!(fourth.contains("cluster lab: 1 succeeded"), "{fourth}");
    let (sim, client) = lab.lab_sim(None).await;
    assert_eq!(
        tokens(&client).await,
        [("manual".to_owned(), "made by hand".to_owned())]
    );
    sim.shutdown().await.unwrap();
    assert!(!all_objects(&lab).contains(value.expose()));
}

const TOKEN_T: &str = "apiVersion: proxops/v1alpha1\nkind: ApiToken\nmetadata:\n  name: deploy\nspec:\n  userid: ci@pve\n  token: deploy\n";
const USER_T: &str =
    "apiVersion: proxops/v1alpha1\nkind: User\nmetadata:\n  name: ci\nspec:\n  userid: ci@pve\n";

/// `options` with the SOPS recipient a new token's secret is encrypted to (a fresh age key):
/// what a cluster with a `secrets-file` gives the plan.
pub(crate) fn with_recipient(options: PlanOptions) -> PlanOptions {
    let key = proxops_secrets::generate_identity();
    options.with_secrets(Some(
        ClusterSecrets::not_loaded("t").with_recipients(vec![key.recipient.clone()]),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_is_never_created_without_the_planes_or_recipients_for_its_secret() {
    let (_sim, client) = sim().await;
    let graph = graph_of(&[USER_T.to_owned(), TOKEN_T.to_owned()]);
    let refused = |p: &proxops_engine::plan::ClusterPlan, code: &str| {
        assert!(
            p.errors
                .iter()
                .any(|e| e.code == code && e.subject == "ApiToken/deploy"),
            "{p:#?}"
        );
        assert!(p.actions.iter().all(|a| a.kind != "ApiToken"), "{p:#?}");
    };
    // No planes: nowhere to keep the secret.
    let p = plan_cluster(&client, "t", &graph, &PlanOptions::default())
        .await
        .unwrap();
    refused(&p, TOKEN_NEEDS_PLANES);
    // The planes, but no secrets file: no one to encrypt it to.
    let planes = PlanOptions::default()
        .with_previous(Some(Default::default()))
        .with_receipts(Some(BTreeSet::new()));
    let p = plan_cluster(&client, "t", &graph, &planes).await.unwrap();
    refused(&p, TOKEN_NO_RECIPIENTS);
    let none = planes
        .clone()
        .with_secrets(Some(ClusterSecrets::not_loaded("t")));
    let p = plan_cluster(&client, "t", &graph, &none).await.unwrap();
    refused(&p, TOKEN_NO_RECIPIENTS);
    // With a recipient: created, the plan showing no secret.
    let with = with_recipient(planes);
    let p = plan_cluster(&client, "t", &graph, &with).await.unwrap();
    assert!(p.errors.is_empty(), "{p:#?}");
    assert!(
        p.actions
            .iter()
            .any(|a| a.kind == "ApiToken" && a.verb == proxops_engine::plan::Verb::Create),
        "{p:#?}"
    );
}

/// The `value` of a SOPS file of a token's secret, opened with the example's key.
fn opened(sops: &str) -> (String, Secret) {
    let key = std::fs::read_to_string(proxops_test_support::homelab().join("example-age-key.txt"))
        .unwrap();
    let doc = SopsFile::parse(sops)
        .unwrap()
        .decrypt(&Identities::parse(&key).unwrap())
        .unwrap();
    let get = |k: &str| doc.get(&[k]).and_then(|v| v.as_secret()).unwrap().clone();
    (get("full-tokenid").expose().to_owned(), get("value"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_planes_apply_writes_the_secret_encrypted_into_the_repository() {
    let lab = Lab::new();
    lab.repo.write("user/lab/ci.yaml", USER);
    lab.repo
        .write("apitoken/lab/deploy.yaml", &token("deploys from CI"));
    lab.compose_lab(&["user/lab/ci.yaml", "apitoken/lab/deploy.yaml"]);
    lab.commit("a CI user and its deploy token");
    let (ok, first) = lab.apply_no_planes();
    assert!(ok, "{first}");
    assert!(
        first.contains("written to clusters/lab/tokens/deploy.sops.yaml"),
        "{first}"
    );
    let file = lab.path().join("clusters/lab/tokens/deploy.sops.yaml");
    let sops = std::fs::read_to_string(&file).unwrap();
    let (full, value) = opened(&sops);
    assert_eq!(full, "ci@pve!deploy");
    // The operator opens it with sops itself.
    if let Some(bin) = proxops_test_support::sops() {
        let out = std::process::Command::new(bin)
            .arg("-d")
            .arg(&file)
            .env(
                "SOPS_AGE_KEY_FILE",
                proxops_test_support::homelab().join("example-age-key.txt"),
            )
            .output()
            .unwrap();
        let clear = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            clear.contains("full-tokenid: ci@pve!deploy"),
            "sops -d printed other lines"
        );
        assert!(
            clear.contains(value.expose()),
            "sops -d printed another value"
        );
    }
    assert!(!first.contains(value.expose()));
    assert!(!sops.contains(value.expose()));
    // No plane was written, and the value is the token's.
    assert!(lab.secret_artifact().is_none());
    lab.deploy_token_authenticates(value).await;
    // The repository still validates with the file in it, and the next apply has nothing to do.
    let (ok, second) = lab.apply_no_planes();
    assert!(
        ok && second.contains("converged, nothing to do"),
        "{second}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), sops);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_whose_secret_cannot_be_written_is_deleted_again() {
    let (_sim, client) = sim().await;
    let graph = graph_of(&[USER_T.to_owned(), TOKEN_T.to_owned()]);
    // `clusters` is a file: the secret's directory cannot be made.
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("clusters"), "not a directory").unwrap();
    let key = proxops_secrets::generate_identity();
    let options = PlanOptions::default()
        .with_token_files(Some(root.path().to_path_buf()))
        .with_secrets(Some(
            ClusterSecrets::not_loaded("t").with_recipients(vec![key.recipient.clone()]),
        ));
    let p = plan_cluster(&client, "t", &graph, &options).await.unwrap();
    assert!(p.errors.is_empty(), "{p:#?}");
    let report = proxops_engine::execute::execute(
        &client,
        &p,
        &proxops_engine::execute::ExecOptions::default(),
    )
    .await;
    let token = report
        .results
        .iter()
        .find(|r| r.subject.starts_with("ApiToken/"))
        .unwrap();
    let failure = format!("{:?}", token.outcome);
    assert!(
        failure.contains("could not be kept") && failure.contains("deleted it again"),
        "{failure}"
    );
    // PVE has no token left whose secret no one holds.
    let list = client
        .call_json(
            Method::GET,
            "/access/users/{userid}/token",
            "/access/users/ci@pve/token",
            &Params::new(),
        )
        .await
        .unwrap();
    assert_eq!(list, serde_json::json!([]), "{list}");
    // With a directory it can write: created, and the file holds the value.
    let root = tempfile::tempdir().unwrap();
    let options = options.with_token_files(Some(root.path().to_path_buf()));
    let p = plan_cluster(&client, "t", &graph, &options).await.unwrap();
    let create = p.actions.iter().find(|a| a.kind == "ApiToken").unwrap();
    assert!(
        create
            .reason
            .contains("written to clusters/t/tokens/deploy.sops.yaml"),
        "{create:#?}"
    );
    let report = proxops_engine::execute::execute(
        &client,
        &p,
        &proxops_engine::execute::ExecOptions::default(),
    )
    .await;
    assert!(report.all_succeeded(), "{report:#?}");
    let sops =
        std::fs::read_to_string(root.path().join("clusters/t/tokens/deploy.sops.yaml")).unwrap();
    let ids = Identities::parse(key.identity.expose()).unwrap();
    let doc = SopsFile::parse(&sops).unwrap().decrypt(&ids).unwrap();
    let full = doc
        .get(&["full-tokenid"])
        .and_then(|v| v.as_secret())
        .unwrap();
    assert_eq!(full.expose(), "ci@pve!deploy");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_secret_whose_receipt_cannot_be_published_is_kept_in_the_repository() {
    let lab = Lab::new();
    lab.repo.write("user/lab/ci.yaml", USER);
    lab.repo
        .write("apitoken/lab/deploy.yaml", &token("deploys from CI"));
    lab.compose_lab(&["user/lab/ci.yaml", "apitoken/lab/deploy.yaml"]);
    lab.commit("a CI user and its deploy token");
    // Another writer holds the observed branch's ref lock: the receipts cannot be published.
    let lock = lab.path().join(".git/refs/heads/proxops/observed/lab.lock");
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, "").unwrap();
    let out = lab.apply_on("lab", &["--planes"]);
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("ApiToken/deploy: its receipt could not be published; its secret (encrypted) is kept in clusters/lab/tokens/deploy.sops.yaml"),
        "{text}"
    );
    let sops =
        std::fs::read_to_string(lab.path().join("clusters/lab/tokens/deploy.sops.yaml")).unwrap();
    let (full, value) = opened(&sops);
    assert_eq!(full, "ci@pve!deploy");
    assert!(!text.contains(value.expose()));
    // The kept value is the token's.
    lab.deploy_token_authenticates(value).await;
    // The lock gone, the next apply records the planes and makes no second token.
    std::fs::remove_file(&lock).unwrap();
    let next = lab.apply_planes();
    assert!(!next.contains("create    ApiToken"), "{next}");
    let (sim, client) = lab.lab_sim(None).await;
    assert_eq!(tokens(&client).await.len(), 1);
    sim.shutdown().await.unwrap();
}
