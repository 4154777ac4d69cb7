//! Safety, round three: ProxOps never reports success falsely, never breaks the repository it
//! writes and never shows a credential. Each story drives the `proxops` binary on a real git
//! repository and the persistent simulator, as an operator would.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::agent::support::wait_for;
use crate::git_http::{GitHttp, bare_copy};
use crate::safety::{Site, guest, text};
use crate::support::{ChildGuard, http_get, proxops_bin, wait_for_port};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

const WEB: &str = "vm/lab/web.yaml";

/// Strips ProxOps's tags from every guest, leaving `tags`: guests ProxOps did not create,
/// long enough ago for the guest list to show them.
fn disown(site: &Site, tags: &str) {
    site.stage(|s| {
        for g in s["guests"].as_object_mut().unwrap().values_mut() {
            g["config"]["tags"] = tags.into();
        }
        s["stats"]["taken_ms"] = 0.into();
    });
}

#[test]
fn adopt_takes_over_a_guest_only_when_its_tags_match_but_for_our_own() {
    let site = Site::new(&[(WEB, guest("VM", "web", 120, "  tags: [frontend]\n"))]);
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    // The guest as an operator made it by hand: only their tag.
    disown(&site, "frontend");

    // The manifest, edited before the first apply, declares a tag the guest lacks.
    site.compose(&[(
        WEB,
        guest("VM", "web", 120, "  tags: [frontend, payments]\n"),
    )]);
    site.commit("declare a tag the guest lacks");
    let (code, out) = site.apply();
    assert_ne!(code, Some(0), "a differing tag was adopted: {out}");
    assert!(out.contains("these differ: tags"), "{out}");
    assert_eq!(
        site.guests()[&120].0,
        "frontend",
        "the guest was written: {out}"
    );

    // The same tags but for ProxOps's own: adopted, tagged, in sync.
    site.compose(&[(WEB, guest("VM", "web", 120, "  tags: [frontend]\n"))]);
    site.commit("say what the guest has");
    let (code, out) = site.apply();
    assert_eq!(code, Some(0), "{out}");
    let tags = site.guests()[&120].0.clone();
    assert!(
        tags.split(';').any(|t| t.starts_with("proxops.lab.")),
        "{tags}"
    );
    let diff = site.run(&["diff", "--detailed-exitcode"]);
    assert_eq!(diff.status.code(), Some(0), "{}", text(&diff));
}

const GIT_TOKEN: &str = "glpat-0123456789abcdef";

/// `proxops run ARGS` on lab following `url` with the simulator, data under `data`; with
/// `token` in PROXOPS_GIT_TOKEN.
fn agent_from(url: &str, data: &Path, work: &Path, token: Option<&str>, args: &[&str]) -> Command {
    let mut command = Command::new(proxops_bin());
    command
        .args(["run", "--cluster", "lab"])
        .args(args)
        .args(["--url", url, "--backend", "sim", "--sim-state"])
        .arg(data.join("sim.json"))
        .arg("--data-dir")
        .arg(data)
        .env("SOPS_AGE_KEY_FILE", work.join("example-age-key.txt"))
        .env_remove("PROXOPS_GIT_TOKEN")
        .env("NO_COLOR", "1");
    if let Some(t) = token {
        command.env("PROXOPS_GIT_TOKEN", t);
    }
    command
}

/// One pass of [`agent_from`].
fn agent_once_from(url: &str, data: &Path, work: &Path, token: Option<&str>) -> Output {
    agent_from(
        url,
        data,
        work,
        token,
        &["--once", "--listen", "127.0.0.1:0"],
    )
    .output()
    .unwrap()
}

#[test]
fn a_remote_asking_for_a_token_gets_it_from_the_environment_and_no_credential_is_shown() {
    let work = proxops_test_support::TestRepo::homelab();
    let root = tempfile::tempdir().unwrap();
    let bare = bare_copy(work.path(), root.path(), "infra.git");
    let server = GitHttp::start(root.path(), GIT_TOKEN);

    // The token from the environment: cloned, reconciled, planes pushed to the remote.
    let data = tempfile::tempdir().unwrap();
    let out = agent_once_from(
        &server.url(None, "infra.git"),
        data.path(),
        work.path(),
        Some(GIT_TOKEN),
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(GIT_TOKEN), "{}", text(&out));
    let refs = proxops_test_support::git(&bare, &["show-ref"]);
    assert!(refs.contains("refs/heads/proxops/desired/lab"), "{refs}");
    assert!(refs.contains("refs/heads/proxops/observed/lab"), "{refs}");
    let config = std::fs::read_to_string(data.path().join("source/.git/config")).unwrap();
    assert!(!config.contains(GIT_TOKEN), "{config}");
    // Every answered git request was authenticated, none was refused after the challenge.
    let requests = server.requests();
    assert!(
        requests
            .iter()
            .any(|(path, _, _)| path.ends_with("/git-receive-pack")),
        "{requests:?}"
    );
    assert!(
        requests
            .iter()
            .all(|(_, auth, code)| auth.is_none() || *code != 401),
        "{requests:?}"
    );

    // No token: refused, and the message says where.
    let data = tempfile::tempdir().unwrap();
    let out = agent_once_from(
        &server.url(None, "infra.git"),
        data.path(),
        work.path(),
        None,
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("127.0.0.1"), "{}", text(&out));

    // A wrong token in the URL: refused, the URL shown without it.
    let wrong = "glpat-wrong-one";
    let data = tempfile::tempdir().unwrap();
    let out = agent_once_from(
        &server.url(Some(&format!("ci:{wrong}")), "infra.git"),
        data.path(),
        work.path(),
        None,
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(wrong), "{}", text(&out));

    // The token in the URL works, with a warning; neither the log, /status nor the dashboard
    // shows it.
    let data = tempfile::tempdir().unwrap();
    let url = server.url(Some(&format!("ci:{GIT_TOKEN}")), "infra.git");
    let out = agent_once_from(&url, data.path(), work.path(), None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(GIT_TOKEN), "{}", text(&out));
    assert!(
        text(&out).contains("carries a credential"),
        "{}",
        text(&out)
    );
    let port = proxops_test_support::free_port();
    let log = data.path().join("agent.log");
    let _agent = ChildGuard(
        agent_from(
            &url,
            data.path(),
            work.path(),
            None,
            &["--interval", "1h", "--listen", &format!("127.0.0.1:{port}")],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap(),
    );
    assert!(wait_for_port(port, Duration::from_secs(30)));
    let status = wait_for(Duration::from_secs(60), "the first pass", || {
        let (code, body) = http_get(port, "/status")?;
        (code == 200 && body.contains("\"passes\":1")).then_some(body)
    });
    assert!(!status.contains(GIT_TOKEN), "{status}");
    assert!(status.contains("***@127.0.0.1"), "{status}");
    let (_, page) = http_get(port, "/").unwrap();
    assert!(!page.contains(GIT_TOKEN), "{page}");
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(!logged.contains(GIT_TOKEN), "{logged}");
}

#[test]
fn a_webhook_receiver_written_with_no_value_is_an_error_not_a_receiver_missing() {
    let work = proxops_test_support::TestRepo::homelab();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agent.yaml");
    std::fs::write(&config, "agent:\n  webhooks:\n    gitlab:\n").unwrap();
    let out = Command::new(proxops_bin())
        .args([
            "run",
            "--once",
            "--cluster",
            "lab",
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--repo")
        .arg(work.path())
        .args(["--backend", "sim", "--sim-state"])
        .arg(dir.path().join("sim.json"))
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("the `gitlab` receiver has no secret"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("data").exists(), "it ran: {}", text(&out));
}

/// examples/adopt with its guests seeded from `etc-pve` and lab's composition written as
/// `composition`, listing a manifest of its own (`vm/lab/extra.yaml`).
fn adopt_site(composition: &str) -> (tempfile::TempDir, PathBuf) {
    let (tmp, repo) = crate::adopt::seeded_from_guest_configs();
    proxops_test_support::write(&repo, "vm/lab/extra.yaml", &guest("VM", "extra", 150, ""));
    proxops_test_support::write(&repo, "clusters/lab/resources.yaml", composition);
    (tmp, repo)
}

fn adopt_all(tmp: &Path, repo: &Path) -> Output {
    Command::new(proxops_bin())
        .args(["adopt", "--cluster", "lab", "--all", "--repo"])
        .arg(repo)
        .args(["--backend", "sim", "--sim-state"])
        .arg(tmp.join("sim.json"))
        .env_remove("PROXOPS_PVE_TOKEN")
        .output()
        .unwrap()
}

fn validates(repo: &Path) -> Output {
    Command::new(proxops_bin())
        .args(["validate", "--repo"])
        .arg(repo)
        .output()
        .unwrap()
}

#[test]
fn adopt_writes_a_repository_that_validates_or_nothing() {
    let block = "# lab's guests\nresources:\n- ../../vm/lab/extra.yaml # by hand\n";
    let (tmp, repo) = adopt_site(block);
    // One target already holds something else: refused before anything is written.
    proxops_test_support::write(&repo, "lxc/lab/dns.yaml", "# someone's notes\n");
    let out = adopt_all(tmp.path(), &repo);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("the file exists"), "{}", text(&out));
    assert!(!repo.join("vm/lab/proxy.yaml").exists(), "{}", text(&out));
    assert!(!repo.join("vm/lab/db.yaml").exists(), "{}", text(&out));
    let composition = || std::fs::read_to_string(repo.join("clusters/lab/resources.yaml")).unwrap();
    assert_eq!(composition(), block);
    let leftovers: Vec<_> = walk(&repo)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("proxops-adopt"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Once the conflict is gone the rerun succeeds, and the repository validates with the
    // composition's comments kept.
    std::fs::remove_file(repo.join("lxc/lab/dns.yaml")).unwrap();
    let out = adopt_all(tmp.path(), &repo);
    assert!(out.status.success(), "{}", text(&out));
    let v = validates(&repo);
    assert!(v.status.success(), "{}", text(&v));
    let listed = composition();
    assert!(listed.starts_with(block), "{listed}");
    assert!(listed.contains("- ../../lxc/lab/dns.yaml\n"), "{listed}");
    assert!(!listed.contains("rewritten"), "{listed}");

    // A flow list gains the entries inside its brackets.
    let (tmp, repo) = adopt_site("resources: [../../vm/lab/extra.yaml]\n");
    let out = adopt_all(tmp.path(), &repo);
    assert!(out.status.success(), "{}", text(&out));
    let v = validates(&repo);
    assert!(v.status.success(), "{}", text(&v));
    assert_eq!(
        std::fs::read_to_string(repo.join("clusters/lab/resources.yaml")).unwrap(),
        "resources: [../../vm/lab/extra.yaml, ../../vm/lab/proxy.yaml, ../../vm/lab/db.yaml, ../../lxc/lab/dns.yaml]\n"
    );
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .flat_map(|e| match e.path().is_dir() {
            true => walk(&e.path()),
            false => vec![e.path()],
        })
        .collect()
}

#[test]
fn the_git_token_of_a_clusters_sops_file_fetches_the_repository_once_it_is_cloned() {
    let Some(sops) = proxops_test_support::sops() else {
        return; // `tool` said why (and fails under PROXOPS_REQUIRE_SHARED).
    };
    let work = proxops_test_support::TestRepo::homelab();
    // Lab's SOPS file gains the git token, and its config maps `secrets.git.token` to it.
    let key = work.path().join("example-age-key.txt");
    let secrets = work.path().join("clusters/lab/secrets.sops.yaml");
    let plain = Command::new(&sops)
        .args(["decrypt"])
        .arg(&secrets)
        .env("SOPS_AGE_KEY_FILE", &key)
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain));
    let plain = String::from_utf8(plain.stdout).unwrap();
    let plain = plain.replacen(
        "secrets:\n",
        &format!("secrets:\n    proxops-git-token: {GIT_TOKEN}\n"),
        1,
    );
    let plain_file = work.path().join("plain.yaml");
    std::fs::write(&plain_file, &plain).unwrap();
    let encrypted = Command::new(&sops)
        .args([
            "encrypt",
            "--age",
            "age17d46x7n7v7dj4vtes2hjskx7fqjjpp6v8dy59e5tlnu78mt5nqyqzqg08f",
        ])
        .args(["--input-type", "yaml", "--output-type", "yaml"])
        .arg(&plain_file)
        .output()
        .unwrap();
    assert!(encrypted.status.success(), "{}", text(&encrypted));
    std::fs::remove_file(&plain_file).unwrap();
    std::fs::write(&secrets, &encrypted.stdout).unwrap();
    let config = work.path().join("clusters/lab/config.yaml");
    let text_of = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        text_of.replace(
            "          token: proxops-token\n",
            "          token: proxops-token\n        git:\n          token: proxops-git-token\n",
        ),
    )
    .unwrap();
    work.commit_all("lab: the git token in SOPS");
    let root = tempfile::tempdir().unwrap();
    bare_copy(work.path(), root.path(), "infra.git");
    let server = GitHttp::start(root.path(), GIT_TOKEN);
    let url = server.url(None, "infra.git");
    // The first clone needs the token from the environment: the SOPS file is in the clone.
    let data = tempfile::tempdir().unwrap();
    let out = agent_once_from(&url, data.path(), work.path(), Some(GIT_TOKEN));
    assert!(out.status.success(), "{}", text(&out));
    // From then on the SOPS token fetches and pushes, with nothing in the environment.
    let out = agent_once_from(&url, data.path(), work.path(), None);
    assert!(out.status.success(), "{}", text(&out));
    assert!(!text(&out).contains(GIT_TOKEN), "{}", text(&out));
    let config = std::fs::read_to_string(data.path().join("source/.git/config")).unwrap();
    assert!(!config.contains(GIT_TOKEN), "{config}");
}
