//! Task endpoints: list (filters as PVE's), status, log (`{n, t}` lines with `total`) and stop.

use serde_json::{Value, json};

use super::{Ctx, check_node};
use crate::error::ApiError;
use crate::server::lock;
use crate::state::Task;
use crate::tasks::Upid;

fn task_row(t: &Task) -> Value {
    let mut row = json!({
        "upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart, "starttime": t.starttime,
        "type": t.kind, "id": t.id, "user": t.user,
    });
    if let Some(s) = &t.exitstatus {
        row["status"] = s.clone().into();
    }
    if let Some(e) = t.endtime {
        row["endtime"] = e.into();
    }
    row
}

/// Own tasks are always visible; others need `Sys.Audit` on the node.
fn may_see(ctx: &Ctx, t: &Task) -> bool {
    t.user == ctx.who().task_user() || ctx.allowed(&format!("/nodes/{}", t.node), "Sys.Audit")
}

pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let node = ctx.node();
    let st = ctx.state();
    check_node(&st, &node)?;
    let source = ctx.p("source").unwrap_or("archive").to_string();
    let start = ctx.int("start").unwrap_or(0).max(0) as usize;
    let limit = ctx.int("limit").unwrap_or(50).max(0) as usize;
    let vmid = ctx.p("vmid").map(str::to_string);
    let typefilter = ctx.p("typefilter").map(str::to_string);
    let userfilter = ctx.p("userfilter").map(str::to_string);
    let errors = ctx.flag("errors").unwrap_or(false);
    let since = ctx.int("since").map(|v| v as u64);
    let until = ctx.int("until").map(|v| v as u64);
    let statusfilter = ctx.p("statusfilter").map(crate::schema::split_list);
    let mut rows: Vec<&Task> = st
        .tasks
        .iter()
        .filter(|t| t.node == node)
        .filter(|t| match source.as_str() {
            "active" => t.status == "running",
            "all" => true,
            _ => t.status != "running",
        })
        .filter(|t| vmid.as_ref().is_none_or(|v| *v == t.id))
        .filter(|t| typefilter.as_ref().is_none_or(|f| *f == t.kind))
        .filter(|t| {
            userfilter
                .as_ref()
                .is_none_or(|u| t.user.contains(u.as_str()))
        })
        .filter(|t| !errors || t.exitstatus.as_ref().is_some_and(|s| s != "OK"))
        .filter(|t| {
            since.is_none_or(|s| t.starttime >= s) && until.is_none_or(|u| t.starttime <= u)
        })
        .filter(|t| {
            statusfilter.as_ref().is_none_or(|f| {
                let class = match t.exitstatus.as_deref() {
                    None => "running",
                    Some("OK") => "ok",
                    Some(s) if s.starts_with("WARNINGS") => "warning",
                    Some(_) => "error",
                };
                f.iter().any(|x| x == class)
            })
        })
        .filter(|t| may_see(ctx, t))
        .collect();
    rows.sort_by(|a, b| (b.starttime, &b.upid).cmp(&(a.starttime, &a.upid)));
    let total = rows.len() as u64;
    let out = Value::Array(
        rows.into_iter()
            .skip(start)
            .take(limit)
            .map(task_row)
            .collect(),
    );
    drop(st);
    ctx.total = Some(total);
    Ok(out)
}

fn find<'a>(ctx: &Ctx, st: &'a crate::state::State) -> Result<&'a Task, ApiError> {
    let upid = ctx.req("upid")?;
    let parsed = Upid::parse(&upid)
        .ok_or_else(|| ApiError::fail(format!("unable to parse worker upid '{upid}'")))?;
    check_node(st, &ctx.node())?;
    let t = st
        .task(&upid)
        .filter(|t| t.node == parsed.node)
        .ok_or_else(|| ApiError::fail("no such task"))?;
    if !may_see(ctx, t) {
        ctx.require(&format!("/nodes/{}", t.node), "Sys.Audit")?;
    }
    Ok(t)
}

pub(crate) fn status(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    let t = find(ctx, &st)?;
    let mut row = task_row(t);
    row["status"] = t.status.clone().into();
    if let Some(s) = &t.exitstatus {
        row["exitstatus"] = s.clone().into();
    }
    if let Some(obj) = row.as_object_mut() {
        obj.remove("endtime");
    }
    Ok(row)
}

pub(crate) fn log(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let st = ctx.state();
    let t = find(ctx, &st)?;
    let start = ctx.int("start").unwrap_or(0).max(0) as usize;
    let limit = ctx.int("limit").unwrap_or(50).max(0) as usize;
    let lines: Vec<Value> = t
        .log
        .iter()
        .enumerate()
        .skip(start)
        .take(limit)
        .map(|(i, l)| json!({ "n": i + 1, "t": l }))
        .collect();
    let total = t.log.len() as u64;
    let lines = if lines.is_empty() && start == 0 {
        vec![json!({ "n": 1, "t": "no content" })]
    } else {
        lines
    };
    drop(st);
    ctx.total = Some(total);
    Ok(Value::Array(lines))
}

pub(crate) fn stop(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let shared = ctx.shared.clone();
    let mut st = ctx.state();
    let (upid, running, own) = {
        let t = find(ctx, &st)?;
        (
            t.upid.clone(),
            t.status == "running",
            t.user == ctx.who().task_user(),
        )
    };
    if !own {
        ctx.require(&format!("/nodes/{}", ctx.node()), "Sys.Modify")?;
    }
    if running {
        if let Some(h) = lock(&shared.running).remove(&upid) {
            h.abort();
        }
        crate::tasks::finish(&mut st, &upid, Err("interrupted by signal".into()));
    }
    Ok(Value::Null)
}
