//! Storages, SDN, pools, resource mappings, the firewall and backup jobs.

use super::harness::{Case, POST, PUT, Proof, at, hand, lifecycle, manifest};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage() {
    let nas = |content: &str| {
        manifest(
            "Storage",
            "nas",
            &format!("  type: dir\n  content: [{content}]\n  options:\n    path: /mnt/nas\n"),
        )
    };
    lifecycle(Case {
        kind: "Storage",
        name: "nas",
        proof: Proof::Receipt,
        v1: nas("iso, backup"),
        v2: nas("iso"),
        list: "/storage".into(),
        at: at(&[("storage", "nas")]),
        declared: vec![("type", "dir"), ("path", "/mnt/nas")],
        key: "content",
        was: "iso,backup",
        now: "iso",
        drift: hand(PUT, "/storage/nas", &[("content", "iso,vztmpl")]),
        hand: vec![hand(
            POST,
            "/storage",
            &[("storage", "hand"), ("type", "dir"), ("path", "/mnt/hand")],
        )],
        hand_at: at(&[("storage", "hand")]),
        ..Case::default()
    })
    .await;
}

fn zone() -> String {
    manifest("SdnZone", "lab", "  type: simple\n")
}

fn vnet(alias: &str) -> String {
    manifest(
        "SdnVnet",
        "labnet",
        &format!("  zone: lab\n  alias: {alias}\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdn_zone() {
    lifecycle(Case {
        kind: "SdnZone",
        name: "lab",
        proof: Proof::Receipt,
        v1: zone(),
        v2: manifest(
            "SdnZone",
            "lab",
            "  type: simple\n  options:\n    mtu: 1400\n",
        ),
        list: "/cluster/sdn/zones".into(),
        at: at(&[("zone", "lab")]),
        declared: vec![("type", "simple")],
        key: "mtu",
        was: "",
        now: "1400",
        drift: hand(PUT, "/cluster/sdn/zones/lab", &[("mtu", "1300")]),
        hand: vec![hand(
            POST,
            "/cluster/sdn/zones",
            &[("zone", "hand"), ("type", "simple")],
        )],
        hand_at: at(&[("zone", "hand")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdn_vnet() {
    lifecycle(Case {
        kind: "SdnVnet",
        name: "labnet",
        proof: Proof::Receipt,
        needs: vec![zone()],
        v1: vnet("the lab"),
        v2: vnet("lab network"),
        list: "/cluster/sdn/vnets".into(),
        at: at(&[("vnet", "labnet")]),
        declared: vec![("zone", "lab")],
        key: "alias",
        was: "the lab",
        now: "lab network",
        drift: hand(PUT, "/cluster/sdn/vnets/labnet", &[("alias", "by hand")]),
        hand: vec![hand(
            POST,
            "/cluster/sdn/vnets",
            &[("vnet", "handnet"), ("zone", "lab")],
        )],
        hand_at: at(&[("vnet", "handnet")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sdn_subnet() {
    let subnet = |snat: bool| {
        manifest(
            "SdnSubnet",
            "labnet-v4",
            &format!(
                "  vnet: labnet\n  subnet: 10.20.0.0/24\n  gateway: 10.20.0.1\n  snat: {snat}\n"
            ),
        )
    };
    lifecycle(Case {
        kind: "SdnSubnet",
        name: "labnet-v4",
        proof: Proof::Receipt,
        needs: vec![zone(), vnet("the lab")],
        v1: subnet(false),
        v2: subnet(true),
        list: "/cluster/sdn/vnets/labnet/subnets".into(),
        at: at(&[("cidr", "10.20.0.0/24")]),
        declared: vec![("gateway", "10.20.0.1"), ("vnet", "labnet")],
        key: "snat",
        was: "0",
        now: "1",
        drift: hand(
            PUT,
            "/cluster/sdn/vnets/labnet/subnets/lab-10.20.0.0-24",
            &[("snat", "0")],
        ),
        hand: vec![hand(
            POST,
            "/cluster/sdn/vnets/labnet/subnets",
            &[("subnet", "10.30.0.0/24"), ("type", "subnet")],
        )],
        hand_at: at(&[("cidr", "10.30.0.0/24")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool() {
    let prod = |comment: &str| manifest("Pool", "prod", &format!("  comment: {comment}\n"));
    lifecycle(Case {
        kind: "Pool",
        name: "prod",
        proof: Proof::Mark("comment"),
        v1: prod("production"),
        v2: prod("production guests"),
        list: "/pools".into(),
        at: at(&[("poolid", "prod")]),
        key: "comment",
        was: "production [proxops.t.pool.prod]",
        now: "production guests [proxops.t.pool.prod]",
        drift: hand(
            PUT,
            "/pools/prod",
            &[("comment", "by hand [proxops.t.pool.prod]")],
        ),
        hand: vec![hand(
            POST,
            "/pools",
            &[("poolid", "hand"), ("comment", "mine")],
        )],
        hand_at: at(&[("poolid", "hand")]),
        ..Case::default()
    })
    .await;
}

fn mapping(kind: &str, name: &str, entry: &str) -> String {
    manifest(
        "ResourceMapping",
        name,
        &format!("  type: {kind}\n  description: passed through\n  map:\n    - {{{entry}}}\n"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_mapping_pci() {
    let gpu = |path: &str| {
        mapping(
            "pci",
            "gpu",
            &format!("node: pve1, path: \"{path}\", id: \"10de:1b80\""),
        )
    };
    lifecycle(Case {
        kind: "ResourceMapping",
        name: "gpu",
        proof: Proof::Mark("description"),
        v1: gpu("0000:01:00.0"),
        v2: gpu("0000:02:00.0"),
        list: "/cluster/mapping/pci".into(),
        at: at(&[("id", "gpu")]),
        key: "map",
        was: "id=10de:1b80,node=pve1,path=0000:01:00.0",
        now: "id=10de:1b80,node=pve1,path=0000:02:00.0",
        drift: hand(
            PUT,
            "/cluster/mapping/pci/gpu",
            &[("map", "id=10de:1b80,node=pve1,path=0000:03:00.0")],
        ),
        hand: vec![hand(
            POST,
            "/cluster/mapping/pci",
            &[
                ("id", "hand"),
                ("map", "node=pve2,path=0000:04:00.0,id=10de:1b80"),
            ],
        )],
        hand_at: at(&[("id", "hand")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_mapping_usb() {
    let stick = |id: &str| mapping("usb", "stick", &format!("node: pve1, id: \"{id}\""));
    lifecycle(Case {
        kind: "ResourceMapping",
        name: "stick",
        proof: Proof::Mark("description"),
        v1: stick("0781:5583"),
        v2: stick("0781:5584"),
        list: "/cluster/mapping/usb".into(),
        at: at(&[("id", "stick")]),
        key: "map",
        was: "id=0781:5583,node=pve1",
        now: "id=0781:5584,node=pve1",
        drift: hand(
            PUT,
            "/cluster/mapping/usb/stick",
            &[("map", "id=0781:5585,node=pve1")],
        ),
        hand: vec![hand(
            POST,
            "/cluster/mapping/usb",
            &[("id", "hand"), ("map", "node=pve2,id=1234:5678")],
        )],
        hand_at: at(&[("id", "hand")]),
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firewall() {
    let home = |cidr: &str| {
        manifest(
            "Firewall",
            "home",
            &format!(
                "  options:\n    enable: true\n  aliases:\n    - name: lan\n      cidr: {cidr}\n"
            ),
        )
    };
    lifecycle(Case {
        kind: "Firewall",
        name: "home",
        proof: Proof::Mark("comment"),
        v1: home("192.168.10.0/24"),
        v2: home("192.168.20.0/24"),
        list: "/cluster/firewall/aliases".into(),
        at: at(&[("name", "lan")]),
        declared: vec![("comment", "[proxops.t.firewall.home]")],
        key: "cidr",
        was: "192.168.10.0/24",
        now: "192.168.20.0/24",
        drift: hand(
            PUT,
            "/cluster/firewall/aliases/lan",
            // PVE's alias update replaces the comment too: given back as its form does.
            &[
                ("cidr", "10.0.0.0/8"),
                ("comment", "[proxops.t.firewall.home]"),
            ],
        ),
        // An alias, an IP set with an entry, and a security group with a rule, by hand: adopt
        // declares all but the rule, which stays the operator's.
        hand: vec![
            hand(
                POST,
                "/cluster/firewall/aliases",
                &[("name", "hand"), ("cidr", "10.9.9.9"), ("comment", "mine")],
            ),
            hand(
                POST,
                "/cluster/firewall/ipset",
                &[("name", "office"), ("comment", "desks")],
            ),
            hand(
                POST,
                "/cluster/firewall/ipset/office",
                &[("cidr", "10.8.0.0/16"), ("comment", "floor 1")],
            ),
            hand(
                POST,
                "/cluster/firewall/groups",
                &[("group", "mail"), ("comment", "the mail server")],
            ),
            hand(
                POST,
                "/cluster/firewall/groups/mail",
                &[
                    ("type", "in"),
                    ("action", "ACCEPT"),
                    ("macro", "SMTP"),
                    ("enable", "1"),
                ],
            ),
        ],
        hand_at: at(&[("name", "hand")]),
        watched: vec![
            "/cluster/firewall/options",
            "/cluster/firewall/ipset",
            "/cluster/firewall/ipset/office",
            "/cluster/firewall/groups",
            "/cluster/firewall/groups/mail",
        ],
        ..Case::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backup_job() {
    let job = |schedule: &str| {
        manifest(
            "BackupJob",
            "nightly",
            &format!(
                "  schedule: \"{schedule}\"\n  storage: local\n  all: true\n  mode: snapshot\n  comment: every night\n"
            ),
        )
    };
    lifecycle(Case {
        kind: "BackupJob",
        name: "nightly",
        proof: Proof::Mark("comment"),
        v1: job("02:30"),
        v2: job("03:30"),
        list: "/cluster/backup".into(),
        at: at(&[("id", "nightly")]),
        declared: vec![("storage", "local"), ("all", "1"), ("mode", "snapshot")],
        key: "schedule",
        was: "02:30",
        now: "03:30",
        drift: hand(PUT, "/cluster/backup/nightly", &[("schedule", "04:00")]),
        hand: vec![hand(
            POST,
            "/cluster/backup",
            &[
                ("id", "hand"),
                ("schedule", "sun 03:00"),
                ("storage", "local"),
                ("all", "1"),
            ],
        )],
        hand_at: at(&[("id", "hand")]),
        ..Case::default()
    })
    .await;
}
