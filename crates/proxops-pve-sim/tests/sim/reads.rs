//! What monitoring and inventory tools read (pve-manager `Cluster/BackupInfo.pm`,
//! `Replication.pm`, `Subscription.pm`, `Nodes.pm` dns; pve-storage `Storage/Config.pm`).

use crate::support::Sim;
use serde_json::json;

#[tokio::test]
async fn backup_info_replication_subscription_storage_and_dns() {
    let sim = Sim::start().await;
    sim.create_vm("100", &[("name", "web")]).await;
    let none = sim.get("/cluster/backup-info/not-backed-up").await.ok();
    assert_eq!(
        none,
        json!([{ "vmid": 100, "type": "qemu", "name": "web" }])
    );
    assert_eq!(sim.get("/nodes/pve1/replication").await.ok(), json!([]));
    let sub = sim.get("/nodes/pve1/subscription").await.ok();
    assert_eq!(sub["status"], "notfound");
    assert_eq!(sub["message"], "There is no subscription key");
    assert!(sub["serverid"].is_string());
    let local = sim.get("/storage/local-lvm").await.ok();
    assert_eq!(local["type"], "lvmthin");
    assert_eq!(local["content"], "images,rootdir");
    let missing = sim.get("/storage/nas").await.fail(500);
    assert_eq!(missing, "storage 'nas' does not exist");
    let dns = sim.get("/nodes/pve1/dns").await.ok();
    assert!(dns["dns1"].is_string());
}

#[tokio::test]
async fn users_with_their_tokens_and_the_two_realms() {
    // pve-access-control `API2/User.pm` `index` (`full=1` lists tokens), `API2/Domains.pm`.
    let sim = Sim::start().await;
    let users = sim.req("GET", "/access/users", &[("full", "1")]).await.ok();
    let root = users
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["userid"] == "root@pam")
        .unwrap();
    assert_eq!(root["enable"], 1);
    assert_eq!(root["tokens"].as_array().unwrap().len(), 1, "{users}");
    let realms = sim.get("/access/domains").await.ok();
    assert_eq!(realms[0]["realm"], "pam");
    assert_eq!(realms[1]["realm"], "pve");
    assert_eq!(sim.get("/access/groups").await.ok(), json!([]));
}

#[tokio::test]
async fn backup_jobs_cover_guests_and_vzdump_writes_an_archive() {
    // pve-manager `API2/Backup.pm` (jobs), `API2/VZDump.pm` (a run), `Cluster/BackupInfo.pm`.
    let sim = Sim::start().await;
    sim.create_vm("100", &[("name", "web")]).await;
    sim.create_vm("101", &[("name", "db")]).await;
    let e = sim
        .post("/cluster/backup", &[("id", "nightly"), ("vmid", "100")])
        .await
        .errors();
    assert_eq!(e["schedule"], "neither 'starttime' nor 'schedule' were set");
    sim.post(
        "/cluster/backup",
        &[
            ("id", "nightly"),
            ("vmid", "100"),
            ("schedule", "02:00"),
            ("storage", "local"),
        ],
    )
    .await
    .ok();
    let dup = sim
        .post(
            "/cluster/backup",
            &[("id", "nightly"), ("vmid", "101"), ("schedule", "03:00")],
        )
        .await
        .fail(500);
    assert_eq!(dup, "Job 'nightly' already exists");
    let job = sim.get("/cluster/backup/nightly").await.ok();
    assert_eq!(
        (job["vmid"].as_str(), job["enabled"].as_i64()),
        (Some("100"), Some(1))
    );
    // jobs.cfg's reader (pve-guest-common `JobBase::decode_value`) decodes the property-string
    // options into objects, whose values stay text but for booleans; SectionConfig makes the
    // other numbers numbers.
    sim.put(
        "/cluster/backup/nightly",
        &[
            ("prune-backups", "keep-last=2,keep-daily=7"),
            ("bwlimit", "1000"),
        ],
    )
    .await
    .ok();
    let job = sim.get("/cluster/backup/nightly").await.ok();
    assert_eq!(
        job["prune-backups"],
        json!({ "keep-daily": "7", "keep-last": "2" })
    );
    assert_eq!(job["bwlimit"], 1000);
    // The index computes each job's next run from now (`Proxmox::RS::CalendarEvent`); a
    // schedule that is not a calendar event is refused by its format.
    let jobs = sim.get("/cluster/backup").await.ok();
    let next = jobs[0]["next-run"].as_i64().expect("next-run");
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!(next > now && next <= now + 86_400, "{next} vs {now}");
    assert_eq!(next % 86_400, 2 * 3600, "02:00 UTC");
    let bad = sim
        .post(
            "/cluster/backup",
            &[
                ("id", "weekly"),
                ("vmid", "101"),
                ("schedule", "someday 25:00"),
            ],
        )
        .await
        .errors();
    assert!(
        bad["schedule"]
            .as_str()
            .unwrap()
            .starts_with("invalid format - invalid calendar event 'someday 25:00'"),
        "{bad}"
    );
    let left = sim.get("/cluster/backup-info/not-backed-up").await.ok();
    assert_eq!(left, json!([{ "vmid": 101, "type": "qemu", "name": "db" }]));
    sim.put("/cluster/backup/nightly", &[("enabled", "0")])
        .await
        .ok();
    assert_eq!(
        sim.get("/cluster/backup-info/not-backed-up")
            .await
            .ok()
            .as_array()
            .unwrap()
            .len(),
        2
    );
    sim.delete("/cluster/backup/nightly", &[]).await.ok();
    let gone = sim.get("/cluster/backup/nightly").await.errors();
    assert_eq!(gone["id"], "No such job 'nightly'");
    // A run: local-lvm holds no backups; local does.
    // `PVE::VZDump->new` in the worker: `storage_info` refuses it.
    let upid = sim
        .post(
            "/nodes/pve1/vzdump",
            &[("vmid", "100"), ("storage", "local-lvm")],
        )
        .await
        .ok();
    assert_eq!(
        sim.wait(&upid).await["exitstatus"],
        "could not get storage information for 'local-lvm': can't use storage 'local-lvm' for backups - wrong content type"
    );
    let upid = sim
        .post(
            "/nodes/pve1/vzdump",
            &[("vmid", "100"), ("storage", "local")],
        )
        .await
        .ok();
    assert!(upid.as_str().unwrap().contains(":vzdump:100:"), "{upid}");
    sim.wait_ok(&upid).await;
    let content = sim
        .req(
            "GET",
            "/nodes/pve1/storage/local/content",
            &[("content", "backup")],
        )
        .await
        .ok();
    let volid = content[0]["volid"].as_str().unwrap();
    assert!(
        volid.starts_with("local:backup/vzdump-qemu-100-") && volid.ends_with(".vma.zst"),
        "{volid}"
    );
}
