//! Shared test support: a simulator with a pinned client (the lookups of `../shared` and the
//! test Python, and the file server, are `proxops-test-support`'s).

use proxops_pve::{GuestRef, PveClient, RetryPolicy, WaitOptions};
use proxops_pve_sim::{SimConfig, SimHandle, TaskDurations, User, Volume, start};
use std::collections::BTreeMap;
use std::time::Duration;

pub const PASSWORD: &str = "s3cret";
pub const CT_TEMPLATE: &str = "local:vztmpl/debian-12-standard_12.7-1_amd64.tar.zst";

/// Fast tasks and a password user.
pub fn config() -> SimConfig {
    SimConfig::default()
        .with_task_durations(TaskDurations::uniform(Duration::from_millis(40)))
        .with_users(vec![User {
            userid: "root@pam".into(),
            password: PASSWORD.into(),
        }])
}

/// Quick retries for tests (bounded, seeded).
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy::default()
        .with_max_attempts(6)
        .with_base_delay(Duration::from_millis(5))
        .with_max_delay(Duration::from_millis(40))
        .with_seed(Some(42))
}

/// A client for a simulator: token auth, fingerprint pin, fast retries.
pub fn client(h: &SimHandle) -> PveClient {
    client_with(h, fast_retry())
}

/// [`client`] with `retry`.
pub fn client_with(h: &SimHandle, retry: RetryPolicy) -> PveClient {
    proxops_test_support::sim::client_builder(h, proxops_test_support::sim::token(h))
        .retry(retry)
        .build()
        .unwrap()
}

pub struct Sim {
    pub h: SimHandle,
    pub c: PveClient,
}

impl Sim {
    pub async fn start() -> Sim {
        Sim::with(config()).await
    }

    pub async fn with(cfg: SimConfig) -> Sim {
        let h = start(cfg).await.unwrap();
        let c = client(&h);
        Sim { h, c }
    }

    /// Adds an LXC template volume to `local` on pve1.
    pub fn add_ct_template(&self) {
        self.h.with_state(|st| {
            st.volumes.push(Volume {
                node: "pve1".into(),
                storage: "local".into(),
                volid: CT_TEMPLATE.into(),
                content: "vztmpl".into(),
                format: "tzst".into(),
                size: 120 << 20,
                ..Default::default()
            })
        });
    }

    /// Creates a VM and waits for it.
    pub async fn create_vm(&self, vmid: u32, cfg: &[(&str, &str)]) -> GuestRef {
        let g = GuestRef::qemu("pve1", vmid);
        let upid = self.c.create_guest(&g, &map(cfg)).await.unwrap();
        self.c.wait_task(&upid, &wait()).await.unwrap();
        g
    }
}

pub fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// A bounded wait for tests.
pub fn wait() -> WaitOptions {
    WaitOptions::default()
        .timeout(Duration::from_secs(20))
        .with_first_poll(Duration::from_millis(10))
        .with_max_poll(Duration::from_millis(100))
}
