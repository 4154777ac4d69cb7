//! Storage endpoints: the storage config index, per-node storage list, content list, volume
//! info and delete, and `download-url` (a `download` task that really fetches the URL, checks
//! the filename extension per content type and verifies `checksum` with `checksum-algorithm`).

use serde_json::{Value, json};
use sha2::Digest;

use super::{Ctx, check_node};
use crate::auth::now;
use crate::error::ApiError;
use crate::state::{State, Volume};
use crate::tasks::{self, INJECTED};
use crate::version::PveVersion;

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    let content = ctx.p("content").map(str::to_string);
    let only = ctx.p("storage").map(str::to_string);
    let n = st
        .node(&node)
        .ok_or_else(|| ApiError::fail("no such node"))?;
    let rows = n
        .storages
        .iter()
        .filter(|s| only.as_ref().is_none_or(|o| *o == s.storage))
        .filter(|s| {
            content.as_ref().is_none_or(|c| {
                crate::schema::split_list(c)
                    .iter()
                    .any(|c| s.has_content(c))
            })
        })
        .filter(|s| ctx.allowed(&format!("/storage/{}", s.storage), "Datastore.Audit"))
        .map(|s| {
            let used: u64 = st.volumes_on(&node, s).map(|v| v.size).sum();
            json!({
                "storage": s.storage, "type": s.kind, "content": s.content.join(","),
                "shared": u8::from(s.shared), "active": 1, "enabled": 1, "total": s.total,
                "used": used, "avail": s.total.saturating_sub(used),
                "used_fraction": if s.total == 0 { 0.0 } else { used as f64 / s.total as f64 },
            })
        })
        .collect();
    Ok(Value::Array(rows))
}

pub(crate) fn storage_of<'a>(
    st: &'a State,
    node: &str,
    sid: &str,
) -> Result<&'a crate::state::Storage, ApiError> {
    check_node(st, node)?;
    st.storage(node, sid)
        .ok_or_else(|| ApiError::fail(format!("storage '{sid}' does not exist")))
}

fn volume_row(v: &Volume) -> Value {
    let mut row = json!({
        "volid": v.volid, "format": v.format, "size": v.size, "content": v.content, "ctime": v.ctime,
    });
    if let Some(id) = v.vmid {
        row["vmid"] = id.into();
        row["used"] = v.size.into();
    }
    row
}

pub(crate) fn content(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    let path = format!("/storage/{sid}");
    if !ctx.allowed(&path, "Datastore.Audit") {
        ctx.require(&path, "Datastore.AllocateSpace")?;
    }
    let st = ctx.state();
    let storage = storage_of(&st, &node, &sid)?;
    let content = ctx.p("content").map(str::to_string);
    let vmid = ctx.int("vmid").map(|v| v as u32);
    let rows = st
        .volumes_on(&node, storage)
        .filter(|v| content.as_ref().is_none_or(|c| *c == v.content))
        .filter(|v| vmid.is_none() || v.vmid == vmid)
        .map(volume_row)
        .collect();
    Ok(Value::Array(rows))
}

fn full_volid(sid: &str, volume: &str) -> String {
    if volume.contains(':') {
        volume.to_string()
    } else {
        format!("{sid}:{volume}")
    }
}

pub(crate) fn volume_info(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    ctx.require(&format!("/storage/{sid}"), "Datastore.Audit")?;
    let volid = full_volid(&sid, &ctx.req("volume")?);
    let st = ctx.state();
    storage_of(&st, &node, &sid)?;
    let v = st
        .volume(&node, &volid)
        .ok_or_else(|| ApiError::fail(format!("volume '{volid}' does not exist")))?;
    let name = volid.split_once(':').map_or("", |(_, n)| n);
    Ok(
        json!({ "path": format!("/var/lib/vz/{name}"), "size": v.size, "used": v.size, "format": v.format }),
    )
}

pub(crate) fn volume_delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    ctx.require(&format!("/storage/{sid}"), "Datastore.Allocate")?;
    let volid = full_volid(&sid, &ctx.req("volume")?);
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    storage_of(&st, &node, &sid)?;
    if st.volume(&node, &volid).is_none() {
        return Err(ApiError::fail(format!("volume '{volid}' does not exist")));
    }
    if let Some(vmid) = st.referenced_by(&volid) {
        return Err(ApiError::fail(format!(
            "unable to delete '{volid}' - volume is still in use by guest {vmid}"
        )));
    }
    let node2 = node.clone();
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        st.remove_volume(&node2, &volid);
        Ok(vec![format!("Removed volume '{volid}'")])
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "imgdel",
        "",
        &ctx.who().task_user(),
        None,
        job,
    )
    .into())
}

/// The volume format of a file name with the right extension for a content type, else the
/// message pve-storage `src/PVE/API2/Storage/Status.pm` `download_url` raises for `filename`.
/// The extensions are pve-storage `src/PVE/Storage.pm`'s: `$ISO_EXT_RE_0`, `$VZTMPL_EXT_RE_1`
/// (a plain `.tar` only from PVE 9.1, [`PveVersion::plain_tar_templates`]; its format is then
/// `tar`, else `t` and the compressor, as `Plugin.pm` `get_subdir_files` lists it) and
/// `$UPLOAD_IMPORT_EXT_RE_1` (import content, [`PveVersion::import_content`]).
pub(crate) fn format_for(
    version: PveVersion,
    content: &str,
    filename: &str,
) -> Result<String, ApiError> {
    let lower = filename.to_lowercase();
    let wrong = || ApiError::param("filename", "wrong file extension");
    match content {
        "iso" => [".iso", ".img"]
            .iter()
            .any(|e| lower.ends_with(e))
            .then(|| "iso".to_string())
            .ok_or_else(wrong),
        "vztmpl" => ["gz", "xz", "zst", "bz2"]
            .iter()
            .find(|e| lower.ends_with(&format!(".tar.{e}")))
            .map(|e| format!("t{e}"))
            .or_else(|| {
                (version.plain_tar_templates() && lower.ends_with(".tar")).then(|| "tar".into())
            })
            .ok_or_else(wrong),
        "import" if version.import_content() => ["ova", "qcow2", "raw", "vmdk"]
            .iter()
            .find(|e| lower.ends_with(&format!(".{e}")))
            .map(|e| e.to_string())
            .ok_or_else(|| ApiError::param("filename", "invalid filename or wrong extension")),
        _ => Err(ApiError::param(
            "content",
            format!("upload content-type '{content}' is not allowed"),
        )),
    }
}

pub(crate) fn checksum(algorithm: &str, data: &[u8]) -> Option<String> {
    Some(match algorithm {
        "sha224" => hex::encode(sha2::Sha224::digest(data)),
        "sha256" => hex::encode(sha2::Sha256::digest(data)),
        "sha384" => hex::encode(sha2::Sha384::digest(data)),
        "sha512" => hex::encode(sha2::Sha512::digest(data)),
        "md5" => crate::hashes::md5_hex(data),
        "sha1" => crate::hashes::sha1_hex(data),
        _ => return None,
    })
}

pub(crate) fn download_url(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    ctx.require(&format!("/storage/{sid}"), "Datastore.AllocateTemplate")?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Audit")?;
    ctx.require(&format!("/nodes/{node}"), "Sys.Modify")?;
    let (url, content) = (ctx.req("url")?, ctx.req("content")?);
    let filename: String = ctx
        .req("filename")?
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let storage = storage_of(&st, &node, &sid)?.clone();
    if !storage.file_based() {
        return Err(ApiError::fail(format!(
            "can't upload to storage type '{}', not a file based storage!",
            storage.kind
        )));
    }
    // pve-storage `Status.pm` `download_url`: `die "storage '$storage' is not configured for
    // content-type '$content'\n"`, a plain failure.
    if !storage.has_content(&content) {
        return Err(ApiError::fail(format!(
            "storage '{sid}' is not configured for content-type '{content}'"
        )));
    }
    let format = format_for(st.pve_version, &content, &filename)?;
    let volid = format!("{sid}:{content}/{filename}");
    let dir = if content == "vztmpl" {
        "template/cache".to_string()
    } else {
        format!("template/{content}")
    };
    let path = format!("/var/lib/vz/{dir}/{filename}");
    if st.volume(&node, &volid).is_some() {
        return Err(ApiError::fail(format!(
            "refusing to override existing file '{path}'"
        )));
    }
    let algorithm = ctx.p("checksum-algorithm").map(str::to_string);
    let expect = ctx.p("checksum").map(|c| c.trim().to_lowercase());
    let client = shared.http.clone();
    let size = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let size2 = size.clone();
    let (url2, path2) = (url.clone(), path.clone());
    let offline = shared.config.offline_downloads;
    let work: tasks::Work = Box::pin(async move {
        let mut log = vec![format!("downloading {url2} to {path2}")];
        if offline {
            // A stand-in of a plausible size, the same for the same URL.
            let made = 64 * 1024 * 1024 + (url2.len() as u64 % 64) * 1024 * 1024;
            size2.store(made, std::sync::atomic::Ordering::SeqCst);
            log.push(format!(
                "offline simulator: {made} bytes made up instead of fetched; checksum not checked"
            ));
            log.push(format!("download of '{url2}' to '{path2}' finished"));
            return Ok(log);
        }
        let resp = client
            .get(&url2)
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
        if let (Some(alg), Some(want)) = (algorithm, expect) {
            log.push("calculating checksum...".into());
            let got = checksum(&alg, &body)
                .ok_or_else(|| format!("unknown checksum algorithm '{alg}'"))?;
            if got != want {
                return Err(format!("checksum mismatch: got '{got}' != expect '{want}'"));
            }
            log.push("checksum verified".into());
        }
        log.push(format!("download of '{url2}' to '{path2}' finished"));
        Ok(log)
    });
    let node2 = node.clone();
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        st.volumes.push(Volume {
            node: node2,
            storage: sid,
            volid,
            content,
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
        &filename,
        &ctx.who().task_user(),
        Some(work),
        job,
    )
    .into())
}
