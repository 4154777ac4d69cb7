//! Log output: a `tracing` subscriber writing to stderr, as text or JSON lines.
//!
//! The level applies to ProxOps's own crates; dependencies (HTTP, TLS) log at `warn` only, so a
//! debug run shows requests, tasks and plan decisions without transport internals. `PROXOPS_LOG`
//! (an `EnvFilter` directive such as `proxops_pve=trace,info`) replaces that filter entirely.
//! ProxOps's own events never carry credentials, cookies, CSRF tokens or cloud-init secrets.

use proxops_model::config::LogLevel;
use tracing_subscriber::EnvFilter;

/// The environment variable that overrides the filter.
pub const FILTER_VARIABLE: &str = "PROXOPS_LOG";

/// Log line formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// The crates whose events the level governs.
const OWN_CRATES: [&str; 9] = [
    "proxops",
    "proxops_cli",
    "proxops_engine",
    "proxops_pve",
    "proxops_pve_sim",
    "proxops_store",
    "proxops_model",
    "proxops_graph",
    "proxops_secrets",
];

fn level_name(level: LogLevel) -> &'static str {
    match level {
        LogLevel::Debug => "debug",
        LogLevel::Info => "info",
        LogLevel::Warn => "warn",
        LogLevel::Error => "error",
    }
}

/// The filter for `level`: ours at `level`, everything else at `warn` (or `level` if quieter).
pub fn filter(level: LogLevel) -> String {
    let name = level_name(level);
    let others = if level == LogLevel::Error {
        "error"
    } else {
        "warn"
    };
    let mut directives = vec![others.to_owned()];
    directives.extend(OWN_CRATES.iter().map(|c| format!("{c}={name}")));
    directives.join(",")
}

/// Whether logs are JSON lines (then stderr must carry nothing else).
static JSON: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A note for the person at the terminal (which commit is read, ...): a plain stderr line, or
/// with `--log-format json` an info event, so that stderr stays one JSON object per line.
pub fn note(message: &str) {
    if JSON.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::info!("{message}");
    } else {
        eprintln!("{message}");
    }
}

/// Installs the process's subscriber: `level` (unless `PROXOPS_LOG` is set) in `format`, on
/// stderr. Returns the filter in effect. Calling it again does nothing (the first one stays).
pub fn init(level: LogLevel, format: LogFormat) -> String {
    let (directives, filter) = match std::env::var(FILTER_VARIABLE)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .and_then(|v| EnvFilter::try_new(&v).ok().map(|f| (v, f)))
    {
        Some(custom) => custom,
        None => {
            let d = filter(level);
            let f = EnvFilter::try_new(&d).unwrap_or_else(|_| EnvFilter::new("warn"));
            (d, f)
        }
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_target(true);
    JSON.store(
        format == LogFormat::Json,
        std::sync::atomic::Ordering::Relaxed,
    );
    // An error means a subscriber is already installed (a second call): keep it.
    let _ = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    directives
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn our_crates_at_the_level_others_at_warn() {
        let f = filter(LogLevel::Debug);
        assert!(f.starts_with("warn,"), "{f}");
        assert!(f.contains("proxops_pve=debug") && f.contains("proxops_engine=debug"));
        assert!(EnvFilter::try_new(&f).is_ok());
        assert!(filter(LogLevel::Error).starts_with("error,"));
    }
}
