//! `proxops get`.

use crate::error::CommandError;
use crate::session::{PlanesReadArgs, RepoArgs};
use proxops_engine::planes::{
    MaterializedList, ResourceItem, ResourceList, Selector, materialized_items, resource_items,
};
use proxops_model::RepoSource;
use proxops_store::{PlaneRefs, Store};
use std::io::Write;
use std::process::ExitCode;

/// Show desired resources joined with their receipts, read from the git planes.
///
/// Each resource's state is derived when read: CLEAN (a current receipt), READY (no receipt, or
/// a stale one: the desired document changed since), DELETING (a deletion intent awaits its
/// teardown) or WAIT (teardown observed, the intent not yet cleaned up). Exit status: 0, 1 when
/// a named resource does not exist, 2 for usage or I/O problems.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// `KIND` or `KIND/NAME` (the kind in any case); `all` or nothing: every resource.
    #[arg(value_name = "KIND[/NAME]")]
    pub selector: Option<String>,
    #[command(flatten)]
    pub planes: PlanesReadArgs,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// Show the materialized payloads instead: the PVE requests each desired document makes
    /// ProxOps send (`materialized/<kind>/<name>.yaml` in the desired plane), one row per
    /// request, or the `MaterializedList` document with `-o yaml|json`.
    #[arg(long)]
    pub materialized: bool,
}

/// Output formats of `get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One row per resource.
    Table,
    /// The table with UID, PVE identity, the receipt's pinned desired revision, outcome and
    /// time.
    Wide,
    /// The `ResourceList` document as YAML.
    Yaml,
    /// The `ResourceList` document as JSON.
    Json,
}

/// Runs `proxops get`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let store = args.planes.open(repo)?;
    let selector = Selector::parse(args.selector.as_deref());
    if args.materialized {
        return materialized(args, &store, &selector);
    }
    let mut items = Vec::new();
    for refs in cluster_refs(&store, &args.planes.clusters.names)? {
        let view = store.view(&refs).map_err(CommandError::from)?;
        items.extend(resource_items(&view, &selector));
    }
    if let (Some(kind), Some(name), true) = (&selector.kind, &selector.name, items.is_empty()) {
        eprintln!("error: no {kind} named `{name}` in the desired planes");
        return Ok(ExitCode::from(1));
    }
    let text = match args.output {
        Output::Table | Output::Wide if items.is_empty() => "No resources found.\n".to_owned(),
        Output::Table => render_table(&items, false),
        Output::Wide => render_table(&items, true),
        Output::Json | Output::Yaml => document(&ResourceList::new(items), args.output)?,
    };
    print(&text)
}

/// A list document as `-o json` (pretty) or `-o yaml` (canonical) prints it.
fn document(doc: &impl serde::Serialize, output: Output) -> Result<String, CommandError> {
    if output == Output::Json {
        return Ok(serde_json::to_string_pretty(doc).map_err(CommandError::from)? + "\n");
    }
    let value = serde_json::to_value(doc).map_err(CommandError::from)?;
    Ok(proxops_store::canonical::to_yaml(&value))
}

fn print(text: &str) -> Result<ExitCode, CommandError> {
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .map_err(CommandError::output)?;
    Ok(ExitCode::SUCCESS)
}

/// `get --materialized`.
fn materialized(args: &Args, store: &Store, selector: &Selector) -> Result<ExitCode, CommandError> {
    let mut items = Vec::new();
    for refs in cluster_refs(store, &args.planes.clusters.names)? {
        items.extend(materialized_items(store, &refs, selector).map_err(CommandError::from)?);
    }
    if let (Some(kind), Some(name), true) = (&selector.kind, &selector.name, items.is_empty()) {
        eprintln!("error: no materialized payload of {kind} `{name}` in the desired planes");
        return Ok(ExitCode::from(1));
    }
    let text = match args.output {
        Output::Table | Output::Wide if items.is_empty() => {
            "No materialized payloads found.\n".to_owned()
        }
        Output::Table | Output::Wide => {
            let mut rows = vec![
                ["CLUSTER", "KIND", "NAME", "METHOD", "PATH", "PARAMS"]
                    .map(str::to_owned)
                    .to_vec(),
            ];
            for i in &items {
                if let Some(error) = &i.spec.error {
                    rows.push(vec![
                        i.cluster.clone(),
                        i.kind.clone(),
                        i.name.clone(),
                        "-".into(),
                        "-".into(),
                        format!("error: {error}"),
                    ]);
                }
                for r in &i.spec.requests {
                    let params: Vec<String> =
                        r.params.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    rows.push(vec![
                        i.cluster.clone(),
                        i.kind.clone(),
                        i.name.clone(),
                        r.method.clone(),
                        r.path.clone(),
                        params.join(" "),
                    ]);
                }
            }
            table(&rows)
        }
        Output::Json | Output::Yaml => document(&MaterializedList::new(items), args.output)?,
    };
    print(&text)
}

/// The table; `wide` adds UID, PVE identity (node, vmid or storage), the receipt's pinned
/// desired revision, its outcome and when it finished, before the reason.
pub fn render_table(items: &[ResourceItem], wide: bool) -> String {
    let mut header: Vec<String> = ["CLUSTER", "KIND", "NAME"].map(str::to_owned).to_vec();
    if wide {
        header.extend(["UID", "PVE"].map(str::to_owned));
    }
    header.extend(["DESIRED", "OBSERVATION", "STATE"].map(str::to_owned));
    if wide {
        header.extend(["RECEIPT-REVISION", "OUTCOME", "OBSERVED-AT"].map(str::to_owned));
    }
    header.push("REASON".to_owned());
    let mut rows = vec![header];
    for i in items {
        let state = serde_json::to_value(i.state)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let observation = match &i.receipt {
            Some(r) => r.observation.clone(),
            None if i.state == proxops_store::ResourceState::Ready => "MISSING".to_owned(),
            None => "N/A".to_owned(),
        };
        let mut row = vec![i.cluster.clone(), i.kind.clone(), i.name.clone()];
        let spec = i.receipt.as_ref().map(|r| &r.spec);
        let text = |path: &[&str]| -> String {
            let mut v = spec;
            for p in path {
                v = v.and_then(|x| x.get(*p));
            }
            match v {
                Some(serde_json::Value::String(s)) => s.clone(),
                Some(serde_json::Value::Null) | None => "-".to_owned(),
                Some(other) => other.to_string(),
            }
        };
        if wide {
            row.push(i.uid.clone());
            row.push(pve_identity(spec));
        }
        row.extend([
            i.desired.blob.chars().take(12).collect(),
            observation,
            state,
        ]);
        if wide {
            row.push(text(&["desired", "revision"]).chars().take(12).collect());
            row.push(text(&["result", "outcome"]));
            row.push(text(&["result", "finishedAt"]));
        }
        row.push(i.reason.clone());
        rows.push(row);
    }
    table(&rows)
}

/// `node/vmid` of a guest, `storage@node,...` of an artifact, `-` without a receipt.
fn pve_identity(spec: Option<&serde_json::Value>) -> String {
    let Some(id) = spec.and_then(|s| s.pointer("/result/pveIdentity")) else {
        return "-".to_owned();
    };
    let text = |k: &str| -> Option<String> {
        id.get(k).map(|v| match v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map_or_else(|| x.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        })
    };
    match (text("node"), text("vmid"), text("storage"), text("nodes")) {
        (Some(node), Some(vmid), _, _) => format!("{node}/{vmid}"),
        (_, _, Some(storage), Some(nodes)) => format!("{storage}@{nodes}"),
        (Some(node), None, Some(storage), _) => format!("{storage}@{node}"),
        (_, Some(vmid), _, _) => vmid,
        _ => "-".to_owned(),
    }
}

/// Columns left-justified, two spaces apart, trailing spaces stripped.
pub fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            line.push_str(&format!("{cell:<width$}  ", width = widths[c]));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// The plane refs of the named clusters, or of every cluster directory (`clusters/<name>/`) of
/// the repository at HEAD.
pub fn cluster_refs(store: &Store, clusters: &[String]) -> Result<Vec<PlaneRefs>, CommandError> {
    let names: Vec<String> = if clusters.is_empty() {
        let source = store.source(None).map_err(|e| {
            CommandError::usage(
                format!("cannot read the repository at HEAD: {e}"),
                Some("name the clusters with --cluster C".into()),
            )
        })?;
        source
            .list("clusters")
            .map_err(|e| CommandError::io("cannot list clusters/", e))?
            .into_iter()
            .filter(|e| e.is_dir)
            .map(|e| e.name)
            .collect()
    } else {
        clusters.to_vec()
    };
    // The branches and gate each cluster's config at HEAD names (defaults if it cannot be read).
    let loaded = store.source(None).ok().and_then(|source| {
        let options = proxops_model::LoadOptions::default().with_clusters(names.iter().cloned());
        proxops_model::load_repository(&source, &proxops_model::Registry::builtin(), &options).ok()
    });
    names
        .iter()
        .map(|c| {
            let entry = loaded
                .as_ref()
                .and_then(|r| r.cluster(c))
                .and_then(|c| c.entry.as_ref());
            PlaneRefs::from_config(c, entry).map_err(CommandError::from)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn tables_align_and_strip_trailing_spaces() {
        let rows = vec![
            vec!["A".to_owned(), "BB".to_owned(), "C".to_owned()],
            vec!["long".to_owned(), "x".to_owned(), String::new()],
        ];
        assert_eq!(table(&rows), "A     BB  C\nlong  x\n");
    }
}
