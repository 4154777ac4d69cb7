//! Holding a cluster's lease ([`proxops_store::Lease`]) while a cycle runs: taken before the
//! desired plane is published, renewed in the background every third of its lifetime, given
//! back when the cycle ends (or when the holder is dropped). If a renewal fails (the lease was
//! broken or taken over), the holder's stop signal turns true so that no new action starts.

use proxops_store::{Holder, Lease, LeaseRecord, Store, StoreError};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// A lease held for one cycle.
#[derive(Debug)]
pub struct HeldLease {
    lease: Arc<Mutex<Option<Lease>>>,
    keeper: JoinHandle<()>,
    stop: watch::Receiver<bool>,
    taken_over: Option<LeaseRecord>,
}

/// Takes `cluster`'s lease for `holder` ([`StoreError::Leased`] when another live holder has
/// it). `outer_stop`, when given, is folded into [`HeldLease::stop`].
pub async fn hold(
    store: &Store,
    cluster: &str,
    holder: &Holder,
    ttl: Duration,
    outer_stop: Option<watch::Receiver<bool>>,
) -> Result<HeldLease, StoreError> {
    let (store, cluster, holder) = (store.clone(), cluster.to_owned(), holder.clone());
    let lease = tokio::task::spawn_blocking(move || store.acquire_lease(&cluster, &holder, ttl))
        .await
        .map_err(|e| StoreError::Invalid(format!("lease task failed: {e}")))??;
    let taken_over = lease.taken_over().cloned();
    let lease = Arc::new(Mutex::new(Some(lease)));
    let (tx, stop) = watch::channel(false);
    let keeper = tokio::spawn(keep(Arc::clone(&lease), ttl, outer_stop, tx));
    Ok(HeldLease {
        lease,
        keeper,
        stop,
        taken_over,
    })
}

impl HeldLease {
    /// Turns true when the lease was lost or the outer stop fired: start nothing new.
    pub fn stop(&self) -> watch::Receiver<bool> {
        self.stop.clone()
    }

    /// Another holder's lease that this one replaced (expired, or its process gone).
    pub fn taken_over(&self) -> Option<&LeaseRecord> {
        self.taken_over.as_ref()
    }

    /// Gives the lease back; `false` when it had been taken over in between.
    pub async fn release(self) -> bool {
        self.keeper.abort();
        let held = self.lease.lock().ok().and_then(|mut l| l.take());
        match held {
            Some(lease) => matches!(
                tokio::task::spawn_blocking(move || lease.release()).await,
                Ok(Ok(()))
            ),
            None => false,
        }
    }
}

impl Drop for HeldLease {
    fn drop(&mut self) {
        // The lease itself releases on drop.
        self.keeper.abort();
    }
}

async fn keep(
    lease: Arc<Mutex<Option<Lease>>>,
    ttl: Duration,
    mut outer: Option<watch::Receiver<bool>>,
    stop: watch::Sender<bool>,
) {
    let every = (ttl / 3).max(Duration::from_millis(100));
    loop {
        let outer_changed = async {
            match outer.as_mut() {
                Some(rx) => rx.changed().await.is_ok() && *rx.borrow(),
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            stopped = outer_changed => {
                if stopped {
                    let _ = stop.send(true);
                    outer = None;
                }
                continue;
            }
        }
        let renewed = match lease.lock() {
            Ok(mut guard) => match guard.as_mut() {
                Some(l) => l.renew(ttl).map_err(|e| e.to_string()),
                None => return,
            },
            Err(_) => Err("lease lock poisoned".to_owned()),
        };
        if let Err(e) = renewed {
            tracing::error!(error = %e, "lost the cluster lease: starting no new action");
            let _ = stop.send(true);
            return;
        }
    }
}
