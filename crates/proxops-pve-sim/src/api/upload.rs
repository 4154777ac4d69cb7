//! `POST /nodes/{node}/storage/{storage}/upload` as pve-storage `src/PVE/API2/Storage/Status.pm`
//! `upload` does it: the file [`crate::multipart`] took from the request, its name normalized
//! and checked per content type, the storage's content checked, and an `imgcopy` task that
//! verifies `checksum` with `checksum-algorithm` and puts the file on the storage (overwriting
//! one of the same name, as PVE's `cp` does).

use serde_json::Value;

use super::Ctx;
use super::storage::{checksum, format_for, storage_of};
use crate::auth::now;
use crate::error::ApiError;
use crate::state::{State, Volume};
use crate::tasks::{self, INJECTED};

/// pve-storage `src/PVE/Storage.pm` `normalize_content_filename`: the last path component,
/// with every character outside `[a-zA-Z0-9_.-]` replaced by `_`.
pub(crate) fn normalize_content_filename(name: &str) -> String {
    let name = name.trim_end_matches('\n');
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The directory of a content type under a storage's path (`get_iso_dir`, `get_vztmpl_dir`,
/// `get_import_dir`: the dir plugin's `template/iso`, `template/cache` and `import`).
pub(crate) fn content_dir(content: &str) -> &'static str {
    match content {
        "iso" => "template/iso",
        "vztmpl" => "template/cache",
        _ => "import",
    }
}

pub(crate) fn upload(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let (node, sid) = (ctx.node(), ctx.req("storage")?);
    ctx.require(&format!("/storage/{sid}"), "Datastore.AllocateTemplate")?;
    let content = ctx.req("content")?;
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let storage = storage_of(&st, &node, &sid)?.clone();
    if !storage.file_based() {
        return Err(ApiError::fail(format!(
            "can't upload to storage type '{}'",
            storage.kind
        )));
    }
    let tmpfilename = ctx
        .p("tmpfilename")
        .ok_or_else(|| ApiError::fail("missing temporary file name"))?
        .to_string();
    let data = match &ctx.upload {
        Some(u) if u.tmpfilename == tmpfilename => u.data.clone(),
        _ => {
            return Err(ApiError::fail(format!(
                "temporary file '{tmpfilename}' does not exist"
            )));
        }
    };
    let filename = normalize_content_filename(&ctx.req("filename")?);
    let format = format_for(st.pve_version, &content, &filename)?;
    if !storage.has_content(&content) {
        return Err(ApiError::fail(format!(
            "storage '{sid}' does not support '{content}' content"
        )));
    }
    let dest = format!("/var/lib/vz/{}/{filename}", content_dir(&content));
    let volid = format!("{sid}:{content}/{filename}");
    let algorithm = ctx.p("checksum-algorithm").map(str::to_string);
    let expect = ctx.p("checksum").map(str::to_string);
    let size = data.len() as u64;
    let (tmp2, dest2) = (tmpfilename.clone(), dest.clone());
    let node_log = node.clone();
    let work: tasks::Work = Box::pin(async move {
        let mut log = vec![format!("starting file import from: {tmp2}")];
        if let (Some(alg), Some(want)) = (algorithm, expect) {
            let got = checksum(&alg, &data)
                .ok_or_else(|| format!("unknown checksum algorithm '{alg}'"))?;
            if got.to_lowercase() != want.to_lowercase() {
                log.push("calculating checksum...".into());
                return Err(format!("checksum mismatch: got '{got}' != expect '{want}'"));
            }
            log.push("calculating checksum...OK, checksum verified".into());
        }
        log.push(format!("target node: {node_log}"));
        log.push(format!("target file: {dest2}"));
        log.push(format!("file size is: {size}"));
        log.push(format!("command: cp -- {tmp2} {dest2}"));
        log.push("finished file import successfully".into());
        Ok(log)
    });
    let node2 = node.clone();
    let job: tasks::Job = Box::new(move |st: &mut State, fail| {
        if fail {
            return Err(INJECTED.into());
        }
        st.remove_volume(&node2, &volid);
        st.volumes.push(Volume {
            node: node2,
            storage: sid,
            volid,
            content,
            format,
            size,
            ctime: now(),
            vmid: None,
        });
        Ok(Vec::new())
    });
    Ok(tasks::spawn(
        &shared,
        &mut st,
        &node,
        "imgcopy",
        "",
        &ctx.who().task_user(),
        Some(work),
        job,
    )
    .into())
}
