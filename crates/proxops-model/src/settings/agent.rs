//! The agent's own settings (`proxops run`), each taken from the first layer that sets it: the
//! command's flags, then the agent configuration file (`--config`), then the repository's
//! `proxops.yaml`. A cluster's settings are layered in [`super::ClusterSettings`]; these are the
//! service's.

use crate::config::ConfigFile;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a pass runs when no layer says.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(30);

/// Where the agent listens when no layer says.
pub const DEFAULT_LISTEN: ([u8; 4], u16) = ([127, 0, 0, 1], 9494);

/// The flags layer: what the command line set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentFlags {
    /// `--interval`.
    pub interval: Option<Duration>,
    /// `--verify-interval`.
    pub verify_interval: Option<Duration>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// `--data-dir`.
    pub data_dir: Option<PathBuf>,
}

impl AgentFlags {
    /// Flags that set `interval`, `verify_interval`, `listen` and `data_dir`.
    pub fn new(
        interval: Option<Duration>,
        verify_interval: Option<Duration>,
        listen: Option<SocketAddr>,
        data_dir: Option<PathBuf>,
    ) -> AgentFlags {
        AgentFlags {
            interval,
            verify_interval,
            listen,
            data_dir,
        }
    }
}

/// The configuration files and where relative paths in them start.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct AgentFiles<'a> {
    /// The agent configuration file, and its directory.
    pub file: Option<(&'a ConfigFile, &'a Path)>,
    /// The repository's `proxops.yaml`, and the repository (`None` for a remote repository the
    /// agent has not cloned yet).
    pub repository: Option<(&'a ConfigFile, &'a Path)>,
}

impl<'a> AgentFiles<'a> {
    /// The two files, either absent.
    pub fn new(
        file: Option<(&'a ConfigFile, &'a Path)>,
        repository: Option<(&'a ConfigFile, &'a Path)>,
    ) -> Self {
        AgentFiles { file, repository }
    }

    /// The first file that sets `pick`, flags aside.
    fn first<T>(&self, pick: impl Fn(&ConfigFile) -> Option<T>) -> Option<T> {
        self.file
            .and_then(|(c, _)| pick(c))
            .or_else(|| self.repository.and_then(|(c, _)| pick(c)))
    }

    /// The file whose `agent` section counts, with the directory its relative paths start
    /// from: the agent file when it has one, else the repository's `proxops.yaml`.
    pub fn agent_file(&self) -> Option<(&'a ConfigFile, &'a Path)> {
        match (self.file, self.repository) {
            (Some((c, dir)), _) if c.agent.is_some() => Some((c, dir)),
            (_, Some(repo)) => Some(repo),
            _ => None,
        }
    }
}

/// The agent's settings after layering.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AgentSettings {
    /// Time between passes.
    pub interval: Duration,
    /// Time between verifications (`None`: the agent does not verify).
    pub verify_interval: Option<Duration>,
    /// The HTTP address.
    pub listen: SocketAddr,
    /// Where the agent keeps its state.
    pub data_dir: PathBuf,
}

/// A setting no layer can be used for.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentSettingsError {
    /// `listen:` is not a socket address.
    #[error("`listen: {0}` is not an address such as 127.0.0.1:9494")]
    Listen(String),
}

/// Layers `flags` over `files`; `default_data_dir` when no layer names one. The agent file's
/// `data-dir` is relative to that file; the repository's is taken as written.
pub fn agent_settings(
    flags: &AgentFlags,
    files: &AgentFiles<'_>,
    default_data_dir: PathBuf,
) -> Result<AgentSettings, AgentSettingsError> {
    let interval = flags
        .interval
        .or_else(|| files.first(|c| c.reconcile.as_ref()?.poll_interval.as_ref()?.value()))
        .unwrap_or(DEFAULT_INTERVAL);
    let verify_interval = flags
        .verify_interval
        .or_else(|| files.first(|c| c.reconcile.as_ref()?.verify_interval.as_ref()?.value()));
    let listen = match flags.listen {
        Some(l) => l,
        None => match files.first(|c| c.listen.clone()) {
            Some(text) => text.parse().map_err(|_| AgentSettingsError::Listen(text))?,
            None => SocketAddr::from(DEFAULT_LISTEN),
        },
    };
    let data_dir = flags
        .data_dir
        .clone()
        .or_else(|| {
            let (c, dir) = files.file?;
            c.data_dir.as_ref().map(|d| dir.join(d))
        })
        .or_else(|| files.repository?.0.data_dir.clone().map(PathBuf::from))
        .unwrap_or(default_data_dir);
    Ok(AgentSettings {
        interval,
        verify_interval,
        listen,
        data_dir,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::source::FsSource;

    fn config(text: &str) -> ConfigFile {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("c.yaml"), text).unwrap();
        let source = FsSource::new(dir.path()).unwrap();
        let (config, diagnostics) = crate::read_config_file(&source, "c.yaml");
        assert!(diagnostics.is_empty(), "{diagnostics:?}");
        config.unwrap()
    }

    #[test]
    fn flags_win_then_the_agent_file_then_the_repository() {
        let file =
            config("listen: 0.0.0.0:1000\nreconcile:\n  poll-interval: 1m\ndata-dir: state\n");
        let repo = config(
            "listen: 0.0.0.0:2000\nreconcile:\n  poll-interval: 2m\n  verify-interval: 5m\ndata-dir: /var/lib/x\n",
        );
        let (fdir, rdir) = (Path::new("/etc/proxops"), Path::new("/srv/repo"));
        let files = AgentFiles::new(Some((&file, fdir)), Some((&repo, rdir)));
        let s = agent_settings(&AgentFlags::default(), &files, "default".into()).unwrap();
        assert_eq!(s.listen, "0.0.0.0:1000".parse().unwrap());
        assert_eq!(s.interval, Duration::from_secs(60));
        assert_eq!(s.verify_interval, Some(Duration::from_secs(300)));
        assert_eq!(s.data_dir, PathBuf::from("/etc/proxops/state"));

        let flags = AgentFlags::new(
            Some(Duration::from_secs(5)),
            None,
            Some("127.0.0.1:3000".parse().unwrap()),
            Some("/tmp/d".into()),
        );
        let s = agent_settings(&flags, &files, "default".into()).unwrap();
        assert_eq!(s.interval, Duration::from_secs(5));
        assert_eq!(s.listen, "127.0.0.1:3000".parse().unwrap());
        assert_eq!(s.data_dir, PathBuf::from("/tmp/d"));

        let only_repo = AgentFiles::new(None, Some((&repo, rdir)));
        let s = agent_settings(&AgentFlags::default(), &only_repo, "default".into()).unwrap();
        assert_eq!(s.data_dir, PathBuf::from("/var/lib/x"));
        assert_eq!(s.interval, Duration::from_secs(120));
        let none = agent_settings(
            &AgentFlags::default(),
            &AgentFiles::new(None, None),
            "d".into(),
        )
        .unwrap();
        assert_eq!(none.interval, DEFAULT_INTERVAL);
        assert_eq!(none.listen, SocketAddr::from(DEFAULT_LISTEN));
        assert_eq!(none.verify_interval, None);
        assert_eq!(none.data_dir, PathBuf::from("d"));
    }

    #[test]
    fn a_listen_address_that_is_not_one_is_refused() {
        // The file reader refuses it at its node; a configuration built in code is checked here.
        let file = ConfigFile::default().with_listen(Some("somewhere".into()));
        let files = AgentFiles::new(Some((&file, Path::new("."))), None);
        let err = agent_settings(&AgentFlags::default(), &files, "d".into()).unwrap_err();
        assert_eq!(err, AgentSettingsError::Listen("somewhere".into()));
    }
}
