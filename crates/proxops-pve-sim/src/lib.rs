//! A Proxmox VE API simulator over HTTPS: the embedded default backend of ProxOps and the test
//! double of its end-to-end tests. It is an independent implementation of PVE's side (it uses
//! none of the ProxOps crates), checked against PVE's official API schema.
//!
//! - [`start`] takes a [`SimConfig`] (listen address, the [`PveVersion`] it answers as, 8.4 or
//!   9.1, initial [`State`], state file, accepted [`ApiToken`]s, [`User`]s and [`AclEntry`]s,
//!   [`TaskDurations`], [`FaultConfig`]) and returns a [`SimHandle`]: address,
//!   [`SimHandle::base_url`] (`https://127.0.0.1:PORT/api2/json`), the certificate's SHA-256
//!   `fingerprint` in PVE's `AA:BB:..` form, the token, request counters, the journal of write
//!   requests ([`SimHandle::journal`], [`JournalEntry`]), the state, and graceful
//!   [`SimHandle::shutdown`].
//! - The API answers under `/api2/json` with PVE's paths, parameters ([`schema::ENDPOINTS`],
//!   validated against the release's definitions before any handler runs), wording and shapes:
//!   400 `{"data":null,"errors":{..}}`, other failures with the message in the reason phrase and
//!   in `message`, 501 for unknown paths.
//! - Storages are PVE's ([`State::seeded`]: a fresh install's of the release plus the
//!   [`DeclaredStorage`]s), never made up to fit a request.
//! - Tasks carry PVE's exact UPID ([`tasks::Upid`]), run for a configured time, then stop with
//!   `OK` or the error text.
//! - Synchronous calls that allocate or import storage take time too, and pveproxy cuts them
//!   with `596 Connection timed out` while the work goes on ([`TaskDurations`]).
//! - Faults ([`FaultConfig`]) are drawn from a seeded, reproducible draw (`rng::seeded_f64`), so a run is
//!   reproducible from its seed.
//!
//! A `proxops sim` command is: build a [`SimConfig`] (`listen`, [`SimConfig::with_state_file`],
//! `token` parsed with `ApiToken::from_str` or [`ApiToken::random`]), `start`, print
//! `base_url()`, `fingerprint` and `token`, wait for Ctrl-C, `shutdown`.

mod api;
mod auth;
mod calendar;
mod config;
mod dispatch;
mod error;
mod faults;
mod firewall;
mod hashes;
mod journal;
mod multipart;
mod reset;
mod rng;
mod roles;
pub mod schema;
pub mod sdn;
mod seed;
mod server;
pub mod sshkeys;
mod state;
mod sync_work;
pub mod tasks;
mod tls;
mod version;

pub use api::implemented;
pub use config::{
    AclEntry, ApiToken, DEFAULT_STATS_INTERVAL, EndpointClass, FaultConfig, PVE_AGENT_START,
    PVE_LOCK_TIMEOUT, PVE_PROXY_TIMEOUT, PVE_TASK_TIME, SimConfig, TaskDurations, User,
    acl_with_token_users,
};
pub use error::{ApiError, SimError};
pub use faults::draw as fault_draw;
pub use firewall::{Alias, Firewall, FwConf, Group, Ipset, IpsetEntry, Rule};
pub use journal::JournalEntry;
pub use seed::{ConfigSeed, ParsedConfig, parse_guest_config, seed_guest_configs};
pub use server::{SimHandle, start};
pub use state::{
    AccessGroup, DeclaredStorage, Guest, GuestStats, GuestType, HaResource, Mapping, Mappings,
    Node, Pool, Snapshot, State, Stats, Storage, Task, UserAccount, Vnet, Volume,
};
pub use tls::fingerprint;
pub use version::PveVersion;
