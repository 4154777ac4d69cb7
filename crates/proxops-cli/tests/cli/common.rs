//! What the CLI test modules share beyond `proxops-test-support`.

use proxops_test_support::{ChildGuard, SimProcess, homelab};

/// A `proxops sim` server seeded from the example's lab cluster, with `extra` arguments: the
/// running process, its URL without the API path, and its certificate's fingerprint.
pub fn lab_sim(extra: &[&str]) -> (ChildGuard, String, String) {
    sim_of("lab", extra)
}

/// [`lab_sim`] for any cluster of the example.
pub fn sim_of(cluster: &str, extra: &[&str]) -> (ChildGuard, String, String) {
    let mut sim = std::process::Command::new(assert_cmd::cargo::cargo_bin("proxops"));
    sim.args(["sim", "--listen", "127.0.0.1:0"])
        .args(extra)
        .args(["--cluster", cluster, "--seed-repo"])
        .arg(homelab());
    let sim = SimProcess::spawn(sim);
    (sim.child, sim.url, sim.fingerprint)
}
