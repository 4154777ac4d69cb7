//! `proxops demo`.

use crate::error::CliError;
use crate::render;
use crate::session::{BackendArgs, BackendKind, load, runtime};
use proxops_engine::cycle::reconcile;
use std::path::PathBuf;
use std::process::ExitCode;

/// Run ProxOps's main job with no Proxmox VE: start a simulator per cluster of a repository
/// (default `examples/homelab`), plan, apply, and plan again to show the clusters converged.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The repository.
    #[arg(long, value_name = "DIR", default_value = "examples/homelab")]
    pub repo: PathBuf,
}

/// Runs `proxops demo`.
pub fn run(args: &Args) -> Result<ExitCode, CliError> {
    if !args.repo.is_dir() {
        return Err(CliError::usage(
            format!("no repository at {}", args.repo.display()),
            Some("run it from a ProxOps checkout, or pass --repo DIR".into()),
        ));
    }
    let loaded = load(&args.repo, &[])?;
    if loaded.any_invalid() {
        return Ok(ExitCode::from(1));
    }
    let backend = BackendArgs {
        backend: BackendKind::Sim,
        sim_state: None,
    };
    let mut ok = true;
    runtime()?.block_on(async {
        for (cluster, graph) in loaded.clusters() {
            let conn = backend.connect(&loaded, cluster).await?;
            let nodes = cluster
                .entry
                .as_ref()
                .map(|e| e.nodes.join(", "))
                .unwrap_or_default();
            // The release the simulator answers as (the cluster's `simulation.pve-version`);
            // the client keeps it, so the plan does not ask again.
            let version = conn
                .client
                .pve_version()
                .await
                .map_err(|e| CliError::Io(e.to_string()))?;
            println!(
                "== cluster {} (simulated PVE {}, nodes: {nodes})",
                cluster.name, version.version
            );
            let options = conn.plan_options(cluster);
            let exec = conn.exec_options();
            let first = reconcile(&conn.client, &cluster.name, graph, &options, &exec, false)
                .await
                .map_err(|e| CliError::Io(e.to_string()))?;
            print!("{}", render::plan(&first.plan));
            if let Some(report) = &first.report {
                for (a, r) in first.plan.actions.iter().zip(&report.results) {
                    println!("  {}", render::result_line(&cluster.name, a, r));
                }
                println!("{}", render::summary(report));
                ok &= report.all_succeeded();
            }
            let again = reconcile(&conn.client, &cluster.name, graph, &options, &exec, true)
                .await
                .map_err(|e| CliError::Io(e.to_string()))?;
            print!("{}", render::plan(&again.plan));
            ok &= again.plan.state() == proxops_engine::PlanState::InSync;
            if let Some(sim) = conn.sim {
                let _ = sim.shutdown().await;
            }
        }
        Ok::<(), CliError>(())
    })?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
