//! The Proxmox VE API client of ProxOps: async (tokio), reqwest over rustls.
//!
//! - [`PveClient`] is built with a [`ClientBuilder`] from a base URL and [`Credentials`] (an API
//!   token, or a user and password for ticket auth with renewal and CSRF tokens; secrets are
//!   [`Secret`]s that never print), and a [`TlsVerification`]: system roots, a CA file, a
//!   SHA-256 [`Fingerprint`] pin in PVE's `AA:BB:..` form, or — warned about — none. It pools
//!   connections, times requests out, counts them ([`RequestCounters`]) and traces each one
//!   (method, path template, status, duration, UPID; never a secret or a parameter).
//! - Every failure is a [`PveError`], classified ([`ErrorClass`], [`ErrorKind`]) into retryable
//!   (locks, 5xx, 595/596, resets, timeouts) and permanent (400 with per-parameter messages, 401,
//!   403 with the missing privilege, 404, 501, PVE's deterministic 500 refusals). Retryable ones
//!   are retried per the [`RetryPolicy`] (jittered exponential backoff, bounded).
//! - Typed endpoints ([`api`]): version, nodes, cluster resources, nextid; guest create, config
//!   read and change ([`ConfigChange`] with `delete` and `digest`), status and power, clone,
//!   template, resize, destroy; storage content and download-url; task status and log.
//!   Responses decode leniently ([`lenient`]): 0/1 booleans, numbers as strings.
//! - Asynchronous endpoints return a [`Upid`]; [`PveClient::wait_task`] polls with growing
//!   intervals under a per-type timeout ([`WaitOptions`]) and turns a failed exit status into
//!   [`PveError::TaskFailed`] with the log's tail.
//! - [`PveClient::mutation_permit`] bounds in-flight mutations per node and allows one per guest
//!   ([`MutationLimits`]).
//! - [`PveClient::inventory`] takes one `/cluster/resources` request and gives an [`Inventory`]
//!   of guests, nodes and storages; storage contents come on demand; [`PveClient::guest_configs`]
//!   reads configs with bounded concurrency.
//! - [`props`] parses and renders PVE property strings (`scsi0`, `net0`, `ipconfig0`, ...) with
//!   one codec driven by a table of the official schema's formats.
//!
//! The crate depends on no other ProxOps crate and reads no files at run time except a CA file
//! it is given.

pub mod api;
mod auth;
mod client;
mod counters;
mod error;
mod inventory;
pub mod lenient;
mod limits;
mod params;
pub mod props;
mod request;
mod retry;
mod secret;
mod tasks;
mod tls;
mod types;
mod upid;

pub use api::interfaces::{GuestAddress, GuestInterface, IpFamily};
pub use api::snapshots::{SnapshotEntry, SnapshotRequest};
pub use client::{ClientBuilder, PveClient, WarningSink};
pub use counters::{Latency, RequestCounters};
pub use error::{ApiFailure, ErrorClass, ErrorKind, PveError, classify, is_lock_message};
pub use inventory::{GuestInfo, Inventory, NodeEntry, StorageEntry};
pub use limits::{MutationLimits, MutationPermit};
pub use params::Params;
pub use request::Request;
pub use retry::{Jitter, RetryPolicy};
pub use secret::{Credentials, Secret};
pub use tasks::{TaskFilter, TaskOutcome, WaitOptions};
pub use tls::{Fingerprint, TlsVerification};
pub use types::{
    CloneRequest, ClusterResource, ConfigChange, DestroyOptions, DownloadUrl, GuestConfig,
    GuestRef, GuestStatus, GuestType, NodeGuest, NodeInfo, PendingEntry, SdnVnet, StorageVolume,
    TaskEntry, TaskLogLine, TaskStatus, Version, exit_ok, split_tags,
};
pub use upid::Upid;

/// The HTTP method type [`PveClient::call`] takes.
pub use reqwest::Method;
