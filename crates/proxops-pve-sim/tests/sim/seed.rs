//! The simulator seeded from real guest configs (../shared/pve-configs, as their authors
//! published them): every guest is served through the API with every key of its file.

use crate::support::{Sim, config};
use proxops_pve_sim::{GuestType, State, parse_guest_config, seed_guest_configs};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The corpus directory, or `None` (test skipped) when ../shared is absent and not required.
fn corpus() -> Option<PathBuf> {
    proxops_test_support::shared("pve-configs")
}

/// Each corpus config as `/etc/pve` would hold it, at vmid 1000 + its number (qemu) or 2000 +
/// its number (lxc), on node `pve1` (qemu) or in the first node's directory (lxc).
fn etc_pve(corpus: &Path, to: &Path) -> Vec<(u32, GuestType, String)> {
    let mut out = Vec::new();
    for (sub, kind, base, dest) in [
        (
            "qemu",
            GuestType::Qemu,
            1000,
            to.join("nodes/pve1/qemu-server"),
        ),
        ("lxc", GuestType::Lxc, 2000, to.join("lxc")),
    ] {
        std::fs::create_dir_all(&dest).unwrap();
        let mut dirs: Vec<_> = std::fs::read_dir(corpus.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        dirs.sort();
        for d in dirs {
            let n: u32 = d.file_name().unwrap().to_str().unwrap().parse().unwrap();
            let text = std::fs::read_to_string(d.join("config")).unwrap();
            std::fs::write(dest.join(format!("{}.conf", base + n)), &text).unwrap();
            out.push((base + n, kind, text));
        }
    }
    out
}

#[tokio::test]
async fn every_corpus_config_is_served_with_every_key_of_its_file() {
    let Some(corpus) = corpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files = etc_pve(&corpus, dir.path());
    let mut cfg = config();
    cfg.state = State::demo();
    let seeded = seed_guest_configs(&mut cfg.state, dir.path()).unwrap();
    assert_eq!(seeded.guests.len(), files.len());
    assert_eq!(files.len(), 55, "the corpus has 33 qemu and 22 lxc configs");
    // The corpus names storages the default node lacks; each is added, and said so.
    assert!(!seeded.storages_added.is_empty());
    let sim = Sim::with(cfg).await;
    let (mut keys, mut raw, mut volumes, mut skipped) = (0, 0, 0, 0);
    for (vmid, kind, text) in &files {
        let parsed = parse_guest_config(*kind, text);
        // What PVE's parser skips with a warning (`boot:` with no value) is reported.
        for line in &parsed.skipped {
            let reported = format!("{vmid}.conf: unable to parse config: {line}");
            assert!(
                seeded.warnings.iter().any(|w| w.ends_with(&reported)),
                "{reported} not in {:?}",
                seeded.warnings
            );
            skipped += 1;
        }
        let path = match kind {
            GuestType::Qemu => format!("/nodes/pve1/qemu/{vmid}/config?current=1"),
            GuestType::Lxc => format!("/nodes/pve1/lxc/{vmid}/config?current=1"),
        };
        let served = sim.get(&path).await.ok();
        for (key, value) in &parsed.config {
            let got = &served[key];
            let got = got
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| got.to_string());
            // PVE never reads a cloud-init password back.
            let want = if key == "cipassword" {
                "**********"
            } else {
                value.as_str()
            };
            assert_eq!(got, want, "{vmid} {key}");
            keys += 1;
        }
        let lxc = served["lxc"].as_array().map_or(0, Vec::len);
        assert_eq!(lxc, parsed.raw_lxc.len(), "{vmid}: {served}");
        raw += lxc;
        // Every volume a drive names exists on its storage.
        let state = sim.h.state();
        for (key, value) in &parsed.config {
            let first = value.split(',').next().unwrap();
            let drive = key.starts_with("scsi")
                || key.starts_with("virtio")
                || key.starts_with("sata")
                || key == "rootfs"
                || key.starts_with("efidisk");
            if drive && first.contains(':') && !first.starts_with('/') {
                assert!(
                    state.volumes.iter().any(|v| v.volid == first),
                    "{vmid} {key}: no volume {first}"
                );
                volumes += 1;
            }
        }
        // (One published file names a parent whose section its author left out.)
        if let Some(parent) = parsed
            .config
            .get("parent")
            .filter(|_| !parsed.snapshots.is_empty())
        {
            assert!(parsed.snapshots.contains(parent), "{vmid}: parent {parent}");
        }
    }
    eprintln!(
        "{} guests, {keys} keys, {raw} raw lxc lines, {volumes} volumes, {skipped} lines skipped",
        files.len()
    );
    assert!(skipped < 5, "{:?}", seeded.warnings);
    assert!(
        keys > 800 && raw > 0 && volumes > 50,
        "{keys} {raw} {volumes}"
    );
    let listed: Value = sim.get("/cluster/resources?type=vm").await.ok();
    assert_eq!(listed.as_array().unwrap().len(), 55);
}
