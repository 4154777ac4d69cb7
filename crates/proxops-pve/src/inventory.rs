//! [`Inventory`]: a live snapshot of a cluster from one `GET /cluster/resources` call — guests
//! (node, status, template, lock, tags), nodes and storages — plus storage contents fetched per
//! (node, storage) on demand and cached for the snapshot's life, and guest configs for a set of
//! VMIDs with bounded concurrency ([`PveClient::guest_configs`]).
//!
//! `/cluster/resources` is a cache: a guest's `status`, `template` and `name` there are the
//! stats pvestatd broadcast up to 10 s ago (pve-manager `PVE/API2Tools.pm` `extract_vm_stats`);
//! only `lock` and `tags` are read live. [`Inventory::read_live_power`] replaces the status (and
//! template flag) of the guests that matter with the per-node lists' live values.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use tokio::sync::{Mutex, Semaphore};

use crate::client::PveClient;
use crate::error::PveError;
use crate::types::{
    ClusterResource, GuestConfig, GuestRef, GuestType, NodeGuest, PendingEntry, StorageVolume,
    split_tags,
};

/// Storage contents fetched so far, by (node, storage).
type ContentCache = BTreeMap<(String, String), Arc<Vec<StorageVolume>>>;

/// One guest as `/cluster/resources` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuestInfo {
    /// VMID.
    pub vmid: u32,
    /// qemu or lxc.
    pub kind: GuestType,
    /// Node.
    pub node: String,
    /// Name.
    pub name: Option<String>,
    /// `running`, `stopped`; `unknown` for a guest the stats do not know yet, or whose live
    /// list could not be read. From `/cluster/resources` (stale) unless
    /// [`Inventory::read_live_power`] replaced it.
    pub status: String,
    /// Whether it is a template (the same caveat).
    pub template: bool,
    /// Config lock (`clone`, `backup`, ...), if any.
    pub lock: Option<String>,
    /// Tags, split on `;`, in stored order.
    pub tags: Vec<String>,
    /// Resource pool.
    pub pool: Option<String>,
    /// Its HA state (`started`, `stopped`, ...) when an HA resource manages it.
    pub hastate: Option<String>,
}

impl GuestInfo {
    /// The reference the guest endpoints take.
    pub fn guest_ref(&self) -> GuestRef {
        GuestRef {
            node: self.node.clone(),
            kind: self.kind,
            vmid: self.vmid,
        }
    }
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeEntry {
    /// Name.
    pub node: String,
    /// `online`, `offline`, `unknown`.
    pub status: String,
    /// Memory in use, in bytes (the host's and its running guests'), if reported.
    pub mem: Option<u64>,
    /// Memory installed, in bytes, if reported.
    pub maxmem: Option<u64>,
}

impl NodeEntry {
    /// Free memory in bytes (`maxmem - mem`), if both are reported.
    pub fn free_memory(&self) -> Option<u64> {
        Some(self.maxmem?.saturating_sub(self.mem?))
    }
}

/// One storage as one node sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StorageEntry {
    /// Node.
    pub node: String,
    /// Storage id.
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`, `nfs`, ...).
    pub plugintype: Option<String>,
    /// Enabled content types.
    pub content: Vec<String>,
    /// Whether all nodes see the same content.
    pub shared: bool,
    /// `available`, ...
    pub status: Option<String>,
}

/// A snapshot of the cluster.
#[derive(Debug)]
pub struct Inventory {
    /// Guests by VMID.
    pub guests: BTreeMap<u32, GuestInfo>,
    /// Nodes, sorted by name.
    pub nodes: Vec<NodeEntry>,
    /// Storages, sorted by (node, storage).
    pub storages: Vec<StorageEntry>,
    contents: Mutex<ContentCache>,
}

impl Inventory {
    /// Builds a snapshot from `/cluster/resources` rows.
    pub fn from_resources(rows: Vec<ClusterResource>) -> Inventory {
        let mut guests = BTreeMap::new();
        let mut nodes = Vec::new();
        let mut storages = Vec::new();
        for r in rows {
            match r.kind.as_str() {
                "qemu" | "lxc" => {
                    let (Some(vmid), Some(node)) = (r.vmid, r.node) else {
                        continue;
                    };
                    let kind = if r.kind == "qemu" {
                        GuestType::Qemu
                    } else {
                        GuestType::Lxc
                    };
                    guests.insert(
                        vmid,
                        GuestInfo {
                            vmid,
                            kind,
                            node,
                            name: r.name,
                            status: r.status.unwrap_or_default(),
                            template: r.template,
                            lock: r.lock.filter(|l| !l.is_empty()),
                            tags: split_tags(r.tags.as_deref().unwrap_or_default()),
                            pool: r.pool,
                            hastate: r.hastate.filter(|h| !h.is_empty()),
                        },
                    );
                }
                "node" => nodes.push(NodeEntry {
                    node: r.node.unwrap_or_default(),
                    status: r.status.unwrap_or_default(),
                    mem: r.mem,
                    maxmem: r.maxmem,
                }),
                "storage" => storages.push(StorageEntry {
                    node: r.node.unwrap_or_default(),
                    storage: r.storage.unwrap_or_default(),
                    plugintype: r.plugintype,
                    content: r
                        .content
                        .as_deref()
                        .unwrap_or_default()
                        .split(',')
                        .filter(|c| !c.is_empty())
                        .map(str::to_string)
                        .collect(),
                    shared: r.shared,
                    status: r.status,
                }),
                _ => {}
            }
        }
        nodes.sort_by(|a, b| a.node.cmp(&b.node));
        storages.sort_by(|a, b| (&a.node, &a.storage).cmp(&(&b.node, &b.storage)));
        Inventory {
            guests,
            nodes,
            storages,
            contents: Mutex::new(BTreeMap::new()),
        }
    }

    /// Replaces the status and template flag of the guests on the given (node, type) lists
    /// with what `GET /nodes/{node}/{qemu|lxc}` says now: one request per list, at most
    /// `concurrency` at a time. A guest the cache places on a listed node but its list lacks
    /// (moved or gone since), or whose list failed, gets status `unknown`. Returns the failures.
    pub async fn read_live_power(
        &mut self,
        client: &PveClient,
        lists: BTreeSet<(String, GuestType)>,
        concurrency: usize,
    ) -> Vec<(String, GuestType, PveError)> {
        let sem = Arc::new(Semaphore::new(concurrency.max(1)));
        let mut set = tokio::task::JoinSet::new();
        for (node, kind) in lists.iter().cloned() {
            let client = client.clone();
            let sem = sem.clone();
            set.spawn(async move {
                let _permit = sem.acquire_owned().await;
                let result = client.node_guests(&node, kind).await;
                (node, kind, result)
            });
        }
        let mut live: BTreeMap<u32, NodeGuest> = BTreeMap::new();
        let mut failed = Vec::new();
        while let Some(joined) = set.join_next().await {
            match joined {
                Ok((_, _, Ok(rows))) => live.extend(rows.into_iter().map(|r| (r.vmid, r))),
                Ok((node, kind, Err(e))) => failed.push((node, kind, e)),
                Err(e) => tracing::warn!(error = %e, "guest list task ended abnormally"),
            }
        }
        failed.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
        for g in self.guests.values_mut() {
            if !lists.contains(&(g.node.clone(), g.kind)) {
                continue;
            }
            match live.get(&g.vmid) {
                Some(row) => {
                    g.status = row.status.clone().unwrap_or_else(|| "unknown".into());
                    g.template = row.template;
                }
                None => g.status = "unknown".into(),
            }
        }
        failed
    }

    /// A guest by VMID.
    pub fn guest(&self, vmid: u32) -> Option<&GuestInfo> {
        self.guests.get(&vmid)
    }

    /// Guests carrying a tag.
    pub fn tagged<'a>(&'a self, tag: &'a str) -> impl Iterator<Item = &'a GuestInfo> + 'a {
        self.guests
            .values()
            .filter(move |g| g.tags.iter().any(|t| t == tag))
    }

    /// A storage as a node sees it.
    pub fn storage(&self, node: &str, storage: &str) -> Option<&StorageEntry> {
        self.storages
            .iter()
            .find(|s| s.node == node && s.storage == storage)
    }

    /// The content of a storage on a node: fetched on first use, then served from the snapshot.
    pub async fn contents(
        &self,
        client: &PveClient,
        node: &str,
        storage: &str,
    ) -> Result<Arc<Vec<StorageVolume>>, PveError> {
        let key = (node.to_string(), storage.to_string());
        // Held across the fetch so concurrent callers for any key do not duplicate requests.
        let mut cache = self.contents.lock().await;
        if let Some(v) = cache.get(&key) {
            return Ok(v.clone());
        }
        let list = Arc::new(client.storage_content(node, storage, None).await?);
        cache.insert(key, list.clone());
        Ok(list)
    }
}

impl PveClient {
    /// A snapshot from one `GET /cluster/resources` request.
    pub async fn inventory(&self) -> Result<Inventory, PveError> {
        Ok(Inventory::from_resources(
            self.cluster_resources(None).await?,
        ))
    }

    /// Configs of a set of guests, at most `concurrency` requests at a time; one result per VMID.
    pub async fn guest_configs(
        &self,
        guests: impl IntoIterator<Item = GuestRef>,
        concurrency: usize,
    ) -> BTreeMap<u32, Result<GuestConfig, PveError>> {
        self.per_guest(guests, concurrency, "config", |client, g| async move {
            client.guest_config(&g).await
        })
        .await
    }

    /// `GET .../pending` of many guests with bounded concurrency, by vmid.
    pub async fn guest_pendings(
        &self,
        guests: impl IntoIterator<Item = GuestRef>,
        concurrency: usize,
    ) -> BTreeMap<u32, Result<Vec<PendingEntry>, PveError>> {
        self.per_guest(guests, concurrency, "pending", |client, g| async move {
            client.guest_pending(&g).await
        })
        .await
    }

    /// [`PveClient::guest_interfaces`] of many guests with bounded concurrency, by vmid.
    pub async fn guests_interfaces(
        &self,
        guests: impl IntoIterator<Item = GuestRef>,
        concurrency: usize,
    ) -> BTreeMap<u32, Result<Option<Vec<crate::GuestInterface>>, PveError>> {
        self.per_guest(guests, concurrency, "interfaces", |client, g| async move {
            client.guest_interfaces(&g).await
        })
        .await
    }

    /// One read per guest, at most `concurrency` in flight; one result per VMID.
    async fn per_guest<T, F, Fut>(
        &self,
        guests: impl IntoIterator<Item = GuestRef>,
        concurrency: usize,
        what: &'static str,
        read: F,
    ) -> BTreeMap<u32, Result<T, PveError>>
    where
        T: Send + 'static,
        F: Fn(PveClient, GuestRef) -> Fut,
        Fut: std::future::Future<Output = Result<T, PveError>> + Send + 'static,
    {
        // At most `concurrency` reads exist at a time: each one's future (a client and its
        // request) is made only when a slot is free. Spawning one task per guest up front held
        // every guest's future at once, about 7 MiB per 1,000 guests in the agent's soak.
        let limit = concurrency.max(1);
        let mut set = tokio::task::JoinSet::new();
        let mut out = BTreeMap::new();
        let mut keep =
            |joined: Result<(u32, Result<T, PveError>), tokio::task::JoinError>| match joined {
                Ok((vmid, result)) => {
                    out.insert(vmid, result);
                }
                Err(e) => tracing::warn!(error = %e, "a {what} read task ended abnormally"),
            };
        for g in guests {
            if set.len() >= limit
                && let Some(joined) = set.join_next().await
            {
                keep(joined);
            }
            let vmid = g.vmid;
            let request = read(self.clone(), g);
            set.spawn(async move { (vmid, request.await) });
        }
        while let Some(joined) = set.join_next().await {
            keep(joined);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::secret::Credentials;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A read's future is made only when a slot is free: never more than `concurrency` exist.
    #[tokio::test]
    async fn per_guest_reads_never_hold_more_than_their_concurrency() {
        let client = PveClient::builder(
            "https://127.0.0.1:1",
            Credentials::parse_token("root@pam!t=00000000-0000-0000-0000-000000000000")
                .expect("a well-formed token"),
        )
        .build()
        .expect("a client");
        let alive = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let guests = (100..300).map(|vmid| GuestRef::qemu("pve1", vmid));
        let read = |_client: PveClient, g: GuestRef| {
            let (alive, most) = (alive.clone(), most.clone());
            let now = alive.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            async move {
                tokio::task::yield_now().await;
                alive.fetch_sub(1, Ordering::SeqCst);
                Ok::<u32, PveError>(g.vmid)
            }
        };
        let out = client.per_guest(guests, 8, "test", read).await;
        assert_eq!(out.len(), 200);
        assert!(out.iter().all(|(vmid, r)| r.as_ref().ok() == Some(vmid)));
        let most = most.load(Ordering::SeqCst);
        assert!(most <= 8, "{most} reads existed at once");
    }
}
