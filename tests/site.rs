//! A site for end-to-end tests: the homelab example committed in a temporary git repository,
//! its cluster lab pointed at a `proxops sim` server, a PVE client of that server (the
//! operator's hands) and the simulator's debug endpoints.

// Test code may panic: a panic is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::agent::support::{Repo, SimServer, TOKEN};
use crate::support::{git, proxops_bin};
use proxops_pve::{Credentials, PveClient, TlsVerification};
use serde_json::Value;
use std::collections::BTreeMap;
use std::process::{Command, Output};

/// Cluster lab of the homelab example on a simulator server, and a PVE client of it (the
/// operator's hands).
pub(crate) struct Site {
    pub repo: Repo,
    pub sim: SimServer,
    pub client: PveClient,
    pub rt: tokio::runtime::Runtime,
}

impl Site {
    pub(crate) fn new() -> Site {
        let repo = Repo::new();
        let sim = SimServer::start(&repo, "50ms");
        repo.point_lab_at(&sim);
        let client = PveClient::builder(
            format!("{}/api2/json", sim.process.url),
            Credentials::parse_token(TOKEN).unwrap(),
        )
        .tls(TlsVerification::Fingerprint(
            sim.process.fingerprint.parse().unwrap(),
        ))
        .build()
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Site {
            repo,
            sim,
            client,
            rt,
        }
    }

    /// `proxops ARGS --repo <repo>` with lab's token.
    pub(crate) fn proxops(&self, args: &[&str]) -> Output {
        Command::new(proxops_bin())
            .args(args)
            .arg("--repo")
            .arg(self.repo.path())
            .env("PROXOPS_PVE_TOKEN_LAB", TOKEN)
            .env_remove("PROXOPS_PVE_TOKEN")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }

    /// `proxops verify --cluster lab ARGS`: exit code and standard output.
    pub(crate) fn verify(&self, args: &[&str]) -> (Option<i32>, String) {
        let mut all = vec!["verify", "--cluster", "lab"];
        all.extend_from_slice(args);
        let out = self.proxops(&all);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        (out.status.code(), stdout)
    }

    /// The simulator's request counters (`METHOD /path/{template}` -> count).
    pub(crate) fn counters(&self) -> BTreeMap<String, u64> {
        let answer = self.raw("GET", "/_sim/counters");
        serde_json::from_value(answer["data"].clone()).unwrap()
    }

    pub(crate) fn reset_counters(&self) {
        self.raw("DELETE", "/_sim/counters");
    }

    /// A debug request to the simulator (`/_sim/...`, outside the API), over its pinned TLS.
    pub(crate) fn raw(&self, method: &str, path: &str) -> Value {
        let http = proxops_test_support::sim::https_client(&self.sim.process.fingerprint);
        let url = format!("{}{path}", self.sim.process.url);
        let text = self.rt.block_on(async {
            let request = match method {
                "DELETE" => http.delete(&url),
                _ => http.get(&url),
            };
            request.send().await.unwrap().text().await.unwrap()
        });
        serde_json::from_str(&text).unwrap()
    }

    /// Every ref of the repository with its commit (planes, leases, branches).
    pub(crate) fn refs(&self) -> String {
        git(
            self.repo.path(),
            &["for-each-ref", "--format=%(objectname) %(refname)"],
        )
    }

    /// The simulator's journal of answered writes (`/_sim/journal`), oldest first.
    pub(crate) fn journal(&self) -> Vec<Value> {
        self.raw("GET", "/_sim/journal")["data"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}
