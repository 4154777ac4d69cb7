//! Appliance templates: `GET /nodes/{node}/aplinfo` lists them and `POST` downloads one as a
//! `download` task, as pve-manager `PVE/API2/Nodes.pm` `aplinfo` and `apl_download` do. The
//! index is a few system templates of pve-manager's `aplinfo/aplinfo.dat`, read as
//! `PVE/APLInfo.pm` `read_aplinfo_from_fh` reads the index `pveam update` fetches from
//! download.proxmox.com. A download fetches the template's location and checks its sha512sum
//! (`download_file_from_url` with `hash_required`); with offline downloads the simulator makes
//! the file up instead, as it does for `download-url`.

use serde_json::{Map, Value};
use sha2::Digest;

use super::Ctx;
use super::storage::storage_of;
use super::upload::content_dir;
use crate::auth::now;
use crate::error::ApiError;
use crate::state::{State, Volume};
use crate::tasks::{self, INJECTED};

/// The source `get_apl_sources` names for Proxmox's own templates.
const SOURCE: &str = "http://download.proxmox.com/images";

/// Records of pve-manager `aplinfo/aplinfo.dat` (the package's index).
const INDEX: &str = "\
Package: alpine-3.22-default
Version: 20250617
Type: lxc
OS: alpine
Section: system
Maintainer: Proxmox Support Team <support@proxmox.com>
Architecture: amd64
Location: system/alpine-3.22-default_20250617_amd64.tar.xz
md5sum: 7876712da358f2536dc0baa18169aed4
sha512sum: 1900ccb1b092b5563c0430ff9d9ede63c23bf2fa4a872b8816d2b03d711c76c1d2ea2241796ebaa58292caee75a01e325b7a9c86f63e36d9f9425b45e0115469
Infopage: https://linuxcontainers.org
Description: LXC default image for alpine 3.22 (20250617)

Package: debian-12-standard
Version: 12.12-1
Type: lxc
OS: debian-12
Section: system
Maintainer: Proxmox Support Team <support@proxmox.com>
Architecture: amd64
Location: system/debian-12-standard_12.12-1_amd64.tar.zst
md5sum: 4e5a0a7183b6c8ca6867489820961e88
sha512sum: 50c85eaaece677a3ebe01cc909b83872e9da2a22c29ae652838afce71e83222fdf40f6accecd7d52b180e912fc1f85ecdf7b3fc4d3027da4d865e509a9e76597
Infopage: https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions
Description: Debian 12 Bookworm (standard)
 A small Debian Bookworm system including all standard packages.

Package: debian-13-standard
Version: 13.6-1
Type: lxc
OS: debian-13
Section: system
Maintainer: Proxmox Support Team <support@proxmox.com>
Architecture: amd64
Location: system/debian-13-standard_13.6-1_amd64.tar.zst
md5sum: a6148ff6f0d60e643a6e5f33497cecea
sha512sum: 4c0c27ca6ceab5ef0b84db57825a00f26157ef1854bafe97297813e1cbe8ecb8cc9c453cab6b3b0efe1ba193a50c47ece1e41d950e411b8730b835b71e9e754b
Infopage: https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions
Description: Debian 13 Trixie (standard)
 A small Debian Trixie system including all standard packages.

Package: ubuntu-24.04-standard
Version: 24.04-2
Type: lxc
OS: ubuntu-24.04
Section: system
Maintainer: Proxmox Support Team <support@proxmox.com>
Architecture: amd64
Location: system/ubuntu-24.04-standard_24.04-2_amd64.tar.zst
md5sum: 4030982618eeae70854e8f9711adbd09
sha512sum: 45c2978e6b97fe292ada95fe06834276015e5739a594db4de2fdfd830fa0c37942e8ae118fc1e32ffd9154b3f9378b592738b668ea3957db41f2907b86f219de
Infopage: https://pve.proxmox.com/wiki/Linux_Container#pct_supported_distributions
Description: Ubuntu 24.04 Noble (standard)
 A small Ubuntu 24.04 Noble Numbat system including all standard packages.
";

/// The appliances by template file name, each as `read_aplinfo_from_fh` builds it: keys in
/// lower case, `headline` and `description` from `Description`, the location made absolute,
/// `source` and `template` added.
fn appliances() -> Vec<Map<String, Value>> {
    let mut out = Vec::new();
    for rec in INDEX.split("\n\n").filter(|r| !r.trim().is_empty()) {
        let mut m = Map::new();
        let mut lines = rec.lines().peekable();
        while let Some(line) = lines.next() {
            let Some((k, v)) = line.split_once(':') else {
                continue;
            };
            let (k, v) = (k.trim().to_lowercase(), v.trim().to_string());
            if k == "description" {
                let mut long = Vec::new();
                while let Some(more) = lines.next_if(|l| l.starts_with([' ', '\t'])) {
                    long.push(more.trim());
                }
                m.insert("headline".into(), v.into());
                m.insert("description".into(), long.join(" ").into());
            } else {
                m.insert(k, v.into());
            }
        }
        let location = m
            .get("location")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let template = location.rsplit('/').next().unwrap_or_default().to_string();
        m.insert("location".into(), format!("{SOURCE}/{location}").into());
        m.insert("source".into(), SOURCE.into());
        m.insert("template".into(), template.into());
        out.push(m);
    }
    out
}

fn field<'a>(m: &'a Map<String, Value>, k: &str) -> &'a str {
    m.get(k).and_then(Value::as_str).unwrap_or_default()
}

/// `GET /nodes/{node}/aplinfo` (any user): the appliances, ordered by template name (PVE's
/// comes from a hash, so unordered).
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    super::check_node(&ctx.state(), &ctx.node())?;
    let mut rows = appliances();
    rows.sort_by(|a, b| field(a, "template").cmp(field(b, "template")));
    Ok(Value::Array(rows.into_iter().map(Value::Object).collect()))
}

/// `POST /nodes/{node}/aplinfo`: `apl_download`.
pub(crate) fn download(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    ctx.require(&format!("/storage/{sid}"), "Datastore.AllocateTemplate")?;
    let template = ctx.req("template")?;
    let appliance = appliances()
        .into_iter()
        .find(|a| field(a, "template") == template)
        .ok_or_else(|| ApiError::param("template", "no such template"))?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let storage = storage_of(&st, &node, &sid)?.clone();
    let kind = field(&appliance, "type");
    if kind != "openvz" && kind != "lxc" {
        return Err(ApiError::fail(format!("unknown template type '{kind}'")));
    }
    if !storage.has_content("vztmpl") {
        return Err(ApiError::fail(format!(
            "storage '{sid}' does not support templates"
        )));
    }
    let format = super::storage::format_for(st.pve_version, "vztmpl", &template)?;
    let dest = format!("/var/lib/vz/{}/{template}", content_dir("vztmpl"));
    let url = field(&appliance, "location").to_string();
    let sha512 = field(&appliance, "sha512sum").to_string();
    let offline = shared.config.offline_downloads;
    let client = shared.http.clone();
    let size = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let size2 = size.clone();
    let dest2 = dest.clone();
    let work: tasks::Work = Box::pin(async move {
        let mut log = vec![format!("downloading {url} to {dest2}")];
        if offline {
            let made = 128 * 1024 * 1024 + (url.len() as u64 % 64) * 1024 * 1024;
            size2.store(made, std::sync::atomic::Ordering::SeqCst);
            log.push(format!(
                "offline simulator: {made} bytes made up instead of fetched; checksum not checked"
            ));
            log.push(format!("download of '{url}' to '{dest2}' finished"));
            return Ok(log);
        }
        let resp = client
            .get(&url)
            .send()
            .await
            .map_err(|e| format!("download failed: {e}"))?;
        if !resp.status().is_success() {
            return Err(format!("download failed: {}", resp.status()));
        }
        let body = resp
            .bytes()
            .await
            .map_err(|e| format!("download failed: {e}"))?;
        size2.store(body.len() as u64, std::sync::atomic::Ordering::SeqCst);
        log.push(format!("download finished: {} bytes", body.len()));
        log.push("calculating checksum...".into());
        let got = hex::encode(sha2::Sha512::digest(&body));
        if got != sha512 {
            return Err(format!(
                "checksum mismatch: got '{got}' != expect '{sha512}'"
            ));
        }
        log.push("checksum verified".into());
        log.push(format!("download of '{url}' to '{dest2}' finished"));
        Ok(log)
    });
    let node2 = node.clone();
    let volid = format!("{sid}:vztmpl/{template}");
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        st.remove_volume(&node2, &volid);
        st.volumes.push(Volume {
            node: node2,
            storage: sid,
            volid,
            content: "vztmpl".into(),
            format,
            size: size.load(std::sync::atomic::Ordering::SeqCst),
            ctime: now(),
            vmid: None,
        });
        Ok(Vec::new())
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "download",
        &template,
        &ctx.who().task_user(),
        Some(work),
        job,
    )
    .into())
}
