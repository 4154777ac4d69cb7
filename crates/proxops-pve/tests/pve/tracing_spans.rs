//! Each request gets a `pve_request` span with method, path template, status, duration and
//! UPID, and no span or event ever carries a secret (token secret, password, ticket).

use crate::support::{PASSWORD, Sim, fast_retry, map, wait};
use proxops_pve::{Credentials, GuestRef, PveClient, TlsVerification};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// Span name and fields, by span id.
type Spans = BTreeMap<u64, (String, BTreeMap<String, String>)>;

#[derive(Default)]
struct Capture {
    next: AtomicU64,
    spans: Mutex<Spans>,
    events: Mutex<Vec<String>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0
            .insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.next.fetch_add(1, Ordering::SeqCst) + 1;
        let mut fields = BTreeMap::new();
        attrs.record(&mut Fields(&mut fields));
        self.spans
            .lock()
            .unwrap()
            .insert(id, (attrs.metadata().name().to_string(), fields));
        Id::from_u64(id)
    }
    fn record(&self, id: &Id, values: &Record<'_>) {
        if let Some((_, fields)) = self.spans.lock().unwrap().get_mut(&id.into_u64()) {
            values.record(&mut Fields(fields));
        }
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        self.events.lock().unwrap().push(format!("{fields:?}"));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[tokio::test(flavor = "current_thread")]
async fn request_spans_carry_no_secret() {
    let capture = Arc::new(Capture::default());
    let _guard = tracing::subscriber::set_default(capture.clone());
    let sim = Sim::start().await;
    let ticket = PveClient::builder(
        sim.h.base_url(),
        Credentials::password("root@pam", PASSWORD),
    )
    .tls(TlsVerification::Fingerprint(
        sim.h.fingerprint.parse().unwrap(),
    ))
    .retry(fast_retry())
    .build()
    .unwrap();
    ticket.version().await.unwrap();
    let u = ticket
        .create_guest(
            &GuestRef::qemu("pve1", 100),
            &map(&[("cipassword", "ci-secret-pw")]),
        )
        .await
        .unwrap();
    ticket.wait_task(&u, &wait()).await.unwrap();
    sim.c.version().await.unwrap();
    let _ = sim.c.guest_config(&GuestRef::qemu("pve1", 999)).await;

    let spans = capture.spans.lock().unwrap();
    let requests: Vec<&BTreeMap<String, String>> = spans
        .values()
        .filter(|(name, _)| name == "pve_request")
        .map(|(_, f)| f)
        .collect();
    let version = requests
        .iter()
        .find(|f| f["path"] == "\"/version\"")
        .unwrap();
    assert_eq!(version["method"], "GET");
    assert_eq!(version["status"], "200");
    assert!(version.contains_key("duration_ms"));
    let create = requests
        .iter()
        .find(|f| f["path"] == "\"/nodes/{node}/qemu\"")
        .unwrap();
    assert_eq!(create["upid"], format!("{:?}", u.to_string()));
    assert!(
        requests
            .iter()
            .any(|f| f["path"] == "\"/nodes/{node}/qemu/{vmid}/config\"" && f["status"] == "500")
    );
    let everything = format!("{spans:?} {:?}", capture.events.lock().unwrap());
    for secret in [
        PASSWORD,
        "ci-secret-pw",
        sim.h.token.secret.as_str(),
        "PVE:root@pam",
    ] {
        assert!(
            !everything.contains(secret),
            "a secret reached the traces: {secret}"
        );
    }
}
