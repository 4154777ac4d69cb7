//! `proxops lease`.

use crate::error::CommandError;
use crate::session::{ClusterPlanesArgs, RepoArgs};
use std::process::ExitCode;
use std::time::SystemTime;

/// Show a cluster's lease (who is reconciling it), or break it when its holder is gone.
///
/// Agents and `apply --planes` hold a cluster's lease while they reconcile it, renew it while
/// they work and give it back when done. A holder that crashed leaves it behind until it
/// expires (a restarted agent on the same host takes it over at once). `--break` removes it
/// now: only do that when you know its holder no longer runs.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub planes: ClusterPlanesArgs,
    /// The cluster.
    #[arg(long, value_name = "C")]
    pub cluster: String,
    /// Remove the lease.
    #[arg(long = "break")]
    pub break_it: bool,
    /// With --break: only if the lease still has this token (as shown without --break).
    #[arg(long, value_name = "TOKEN", requires = "break_it")]
    pub token: Option<String>,
}

/// Runs `proxops lease`.
pub fn run(args: &Args, repo: &RepoArgs) -> Result<ExitCode, CommandError> {
    let store = args.planes.open(repo)?;
    if args.break_it {
        return match store
            .break_lease(&args.cluster, args.token.as_deref())
            .map_err(CommandError::from)?
        {
            Some(r) => {
                println!(
                    "cluster {}: broke the lease of {} (pid {} on {}, token {})",
                    args.cluster, r.holder, r.pid, r.host, r.token
                );
                Ok(ExitCode::SUCCESS)
            }
            None => {
                println!("cluster {}: no lease", args.cluster);
                Ok(ExitCode::SUCCESS)
            }
        };
    }
    match store
        .read_lease(&args.cluster)
        .map_err(CommandError::from)?
    {
        None => println!("cluster {}: no lease", args.cluster),
        Some(r) => {
            let state = if r.expired_at(SystemTime::now()) {
                "expired"
            } else if r.holder_is_dead() {
                "holder gone"
            } else {
                "held"
            };
            println!(
                "cluster {}: {state} by {} (pid {} on {}) since {}, renewed {}, expires {}\ntoken {}",
                args.cluster, r.holder, r.pid, r.host, r.acquired, r.renewed, r.expires, r.token
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}
