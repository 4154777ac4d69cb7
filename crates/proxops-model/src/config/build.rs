//! Setters of the configuration structs: they are `#[non_exhaustive]` (a new setting is not a
//! breaking change), so other crates build them from `Default` (or a constructor naming the
//! required fields) and these `with_*` setters, one per field.

use super::{
    AgentConfig, AuthMethod, ChangeGate, ClusterEntry, ConfigDuration, ConfigFile, ContentType,
    DriftMode, EventKind, Forge, GitConfig, GitSecretKeys, LogConfig, LogLevel, NotifySeverity,
    PlanesConfig, PromotionConfig, PromotionEvidence, PveConfig, PveSecretKeys, ReceiverConfig,
    ReconcileConfig, Reminder, SecretSource, SecretsMapping, SimPveVersion, SimStorage,
    SimulationConfig, SinkConfig, SinkKind, StorageType, Typed, WebhooksConfig,
};
use std::collections::BTreeMap;

impl ConfigFile {
    /// Sets [`ConfigFile::log`]: logging.
    pub fn with_log(mut self, log: Option<LogConfig>) -> ConfigFile {
        self.log = log;
        self
    }

    /// Sets [`ConfigFile::pve`]: PVE access and cluster endpoints.
    pub fn with_pve(mut self, pve: Option<PveConfig>) -> ConfigFile {
        self.pve = pve;
        self
    }

    /// Sets [`ConfigFile::git`]: where the repository comes from.
    pub fn with_git(mut self, git: Option<GitConfig>) -> ConfigFile {
        self.git = git;
        self
    }

    /// Sets [`ConfigFile::reconcile`]: reconcile loop settings.
    pub fn with_reconcile(mut self, reconcile: Option<ReconcileConfig>) -> ConfigFile {
        self.reconcile = reconcile;
        self
    }

    /// Sets [`ConfigFile::listen`]: address of the agent's HTTP endpoint (default
    /// `127.0.0.1:9494`).
    pub fn with_listen(mut self, listen: Option<String>) -> ConfigFile {
        self.listen = listen;
        self
    }

    /// Sets [`ConfigFile::data_dir`]: directory for caches and the cloned repository.
    pub fn with_data_dir(mut self, data_dir: Option<String>) -> ConfigFile {
        self.data_dir = data_dir;
        self
    }

    /// Sets [`ConfigFile::agent`]: the agent's control API (`proxops reconcile`, `suspend`,
    /// `resume`) and webhook receivers.
    pub fn with_agent(mut self, agent: Option<AgentConfig>) -> ConfigFile {
        self.agent = agent;
        self
    }

    /// Sets [`ConfigFile::notifications`]: where the agent sends events and commit statuses (a
    /// cluster's entry may override it).
    pub fn with_notifications(mut self, notifications: Option<Vec<SinkConfig>>) -> ConfigFile {
        self.notifications = notifications;
        self
    }
}

impl AgentConfig {
    /// Sets [`AgentConfig::token_file`]: a file holding the token (relative to the
    /// configuration file); surrounding whitespace is ignored.
    pub fn with_token_file(mut self, token_file: Option<String>) -> AgentConfig {
        self.token_file = token_file;
        self
    }

    /// Sets [`AgentConfig::token_env`]: an environment variable holding the token.
    pub fn with_token_env(mut self, token_env: Option<String>) -> AgentConfig {
        self.token_env = token_env;
        self
    }

    /// Sets [`AgentConfig::webhooks`]: signed webhook receivers: a push notice from a forge
    /// runs a pass at once.
    pub fn with_webhooks(mut self, webhooks: Option<WebhooksConfig>) -> AgentConfig {
        self.webhooks = webhooks;
        self
    }
}

impl LogConfig {
    /// Sets [`LogConfig::level`]: `debug`, `info` (default), `warn` or `error`.
    pub fn with_level(mut self, level: Option<LogLevel>) -> LogConfig {
        self.level = level;
        self
    }
}

impl PveConfig {
    /// Sets [`PveConfig::auth`]: authentication method (`token` by default).
    pub fn with_auth(mut self, auth: Option<AuthMethod>) -> PveConfig {
        self.auth = auth;
        self
    }

    /// Sets [`PveConfig::user`]: bootstrap PVE user, e.g. `root@pam` (better: environment or
    /// SOPS).
    pub fn with_user(mut self, user: Option<String>) -> PveConfig {
        self.user = user;
        self
    }

    /// Sets [`PveConfig::token_id`]: bootstrap token id (the part after `!`).
    pub fn with_token_id(mut self, token_id: Option<String>) -> PveConfig {
        self.token_id = token_id;
        self
    }

    /// Sets [`PveConfig::token`]: bootstrap token secret (better: environment or SOPS).
    pub fn with_token(mut self, token: Option<String>) -> PveConfig {
        self.token = token;
        self
    }

    /// Sets [`PveConfig::token_value`]: a whole token `user@realm!id=secret` (better:
    /// environment or SOPS).
    pub fn with_token_value(mut self, token_value: Option<String>) -> PveConfig {
        self.token_value = token_value;
        self
    }

    /// Sets [`PveConfig::password`]: bootstrap password for ticket auth (better: environment or
    /// SOPS).
    pub fn with_password(mut self, password: Option<String>) -> PveConfig {
        self.password = password;
        self
    }

    /// Sets [`PveConfig::ca_file`]: a PEM CA bundle trusted for every cluster endpoint.
    pub fn with_ca_file(mut self, ca_file: Option<String>) -> PveConfig {
        self.ca_file = ca_file;
        self
    }

    /// Sets [`PveConfig::clusters`]: cluster endpoints by name.
    pub fn with_clusters(mut self, clusters: BTreeMap<String, ClusterEntry>) -> PveConfig {
        self.clusters = clusters;
        self
    }
}

impl ClusterEntry {
    /// The cluster behind `base_url` (`https://host[:port]`), every other setting unset.
    pub fn new(base_url: impl Into<String>) -> ClusterEntry {
        ClusterEntry {
            base_url: base_url.into(),
            nodes: Vec::new(),
            secrets_file: None,
            secrets: None,
            fingerprint: None,
            ca_file: None,
            insecure: None,
            planes: None,
            promotion: None,
            drift: None,
            simulation: None,
            notifications: None,
        }
    }

    /// Sets [`ClusterEntry::nodes`]: the node allowlist: every node a manifest names must be
    /// here (empty: no check).
    pub fn with_nodes(mut self, nodes: Vec<String>) -> ClusterEntry {
        self.nodes = nodes;
        self
    }

    /// Sets [`ClusterEntry::secrets_file`]: the SOPS file with this cluster's credentials,
    /// relative to the config file.
    pub fn with_secrets_file(mut self, secrets_file: Option<String>) -> ClusterEntry {
        self.secrets_file = secrets_file;
        self
    }

    /// Sets [`ClusterEntry::secrets`]: which keys of the decrypted SOPS `secrets:` map carry
    /// which credential.
    pub fn with_secrets(mut self, secrets: Option<SecretsMapping>) -> ClusterEntry {
        self.secrets = secrets;
        self
    }

    /// Sets [`ClusterEntry::fingerprint`]: SHA-256 fingerprint of the endpoint's certificate,
    /// `AA:BB:...`.
    pub fn with_fingerprint(mut self, fingerprint: Option<String>) -> ClusterEntry {
        self.fingerprint = fingerprint;
        self
    }

    /// Sets [`ClusterEntry::ca_file`]: a PEM CA bundle for this endpoint.
    pub fn with_ca_file(mut self, ca_file: Option<String>) -> ClusterEntry {
        self.ca_file = ca_file;
        self
    }

    /// Sets [`ClusterEntry::insecure`]: skip certificate verification (warns on every cycle).
    pub fn with_insecure(mut self, insecure: Option<bool>) -> ClusterEntry {
        self.insecure = insecure;
        self
    }

    /// Sets [`ClusterEntry::planes`]: this cluster's git planes: branch names and the change
    /// gate.
    pub fn with_planes(mut self, planes: Option<PlanesConfig>) -> ClusterEntry {
        self.planes = planes;
        self
    }

    /// Sets [`ClusterEntry::promotion`]: which clusters may be promoted into this one.
    pub fn with_promotion(mut self, promotion: Option<PromotionConfig>) -> ClusterEntry {
        self.promotion = promotion;
        self
    }

    /// Sets [`ClusterEntry::drift`]: what the agent does about drift: `correct` it (default) or
    /// only `report` it.
    pub fn with_drift(mut self, drift: Option<DriftMode>) -> ClusterEntry {
        self.drift = drift;
        self
    }

    /// Sets [`ClusterEntry::simulation`]: how the built-in simulator stands in for this
    /// cluster: the PVE release and the storages besides PVE's defaults (`--backend sim`,
    /// `proxops demo`, `proxops sim --seed-repo`).
    pub fn with_simulation(mut self, simulation: Option<SimulationConfig>) -> ClusterEntry {
        self.simulation = simulation;
        self
    }

    /// Sets [`ClusterEntry::notifications`]: this cluster's notification sinks, instead of the
    /// process-wide `notifications` (`[]`: none).
    pub fn with_notifications(mut self, notifications: Option<Vec<SinkConfig>>) -> ClusterEntry {
        self.notifications = notifications;
        self
    }
}

impl PlanesConfig {
    /// Sets [`PlanesConfig::desired`]: the desired-plane branch (default
    /// `proxops/desired/<cluster>`).
    pub fn with_desired(mut self, desired: Option<String>) -> PlanesConfig {
        self.desired = desired;
        self
    }

    /// Sets [`PlanesConfig::observed`]: the observed-plane branch (default
    /// `proxops/observed/<cluster>`); must differ from `desired`.
    pub fn with_observed(mut self, observed: Option<String>) -> PlanesConfig {
        self.observed = observed;
        self
    }

    /// Sets [`PlanesConfig::change_gate`]: how desired changes are published: `none` (default)
    /// moves the desired branch; `pullRequest` publishes a candidate branch
    /// `proxops/candidates/<cluster>/<id>` to merge.
    pub fn with_change_gate(mut self, change_gate: Option<ChangeGate>) -> PlanesConfig {
        self.change_gate = change_gate;
        self
    }
}

impl PromotionConfig {
    /// Sets [`PromotionConfig::allowed_sources`]: clusters whose reconciled state may be
    /// promoted into this one.
    pub fn with_allowed_sources(mut self, allowed_sources: Vec<String>) -> PromotionConfig {
        self.allowed_sources = allowed_sources;
        self
    }

    /// Sets [`PromotionConfig::minimum_evidence`].
    pub fn with_minimum_evidence(mut self, evidence: Option<PromotionEvidence>) -> PromotionConfig {
        self.minimum_evidence = evidence;
        self
    }
}

impl SecretsMapping {
    /// Sets [`SecretsMapping::pve`]: PVE credentials.
    pub fn with_pve(mut self, pve: Option<PveSecretKeys>) -> SecretsMapping {
        self.pve = pve;
        self
    }

    /// Sets [`SecretsMapping::git`]: git credentials.
    pub fn with_git(mut self, git: Option<GitSecretKeys>) -> SecretsMapping {
        self.git = git;
        self
    }
}

impl PveSecretKeys {
    /// Sets [`PveSecretKeys::user`]: key of the PVE user.
    pub fn with_user(mut self, user: Option<String>) -> PveSecretKeys {
        self.user = user;
        self
    }

    /// Sets [`PveSecretKeys::token_id`]: key of the token id.
    pub fn with_token_id(mut self, token_id: Option<String>) -> PveSecretKeys {
        self.token_id = token_id;
        self
    }

    /// Sets [`PveSecretKeys::token`]: key of the token secret.
    pub fn with_token(mut self, token: Option<String>) -> PveSecretKeys {
        self.token = token;
        self
    }

    /// Sets [`PveSecretKeys::password`]: key of the password (ticket auth).
    pub fn with_password(mut self, password: Option<String>) -> PveSecretKeys {
        self.password = password;
        self
    }
}

impl GitSecretKeys {
    /// Sets [`GitSecretKeys::token`]: key of the HTTPS token.
    pub fn with_token(mut self, token: Option<String>) -> GitSecretKeys {
        self.token = token;
        self
    }
}

impl GitConfig {
    /// Sets [`GitConfig::url`]: a remote repository to clone and follow.
    pub fn with_url(mut self, url: Option<String>) -> GitConfig {
        self.url = url;
        self
    }

    /// Sets [`GitConfig::branch`]: the branch (default `main`).
    pub fn with_branch(mut self, branch: Option<String>) -> GitConfig {
        self.branch = branch;
        self
    }

    /// Sets [`GitConfig::token`]: HTTPS token (better: environment or SOPS).
    pub fn with_token(mut self, token: Option<String>) -> GitConfig {
        self.token = token;
        self
    }

    /// Sets [`GitConfig::path`]: a local work tree.
    pub fn with_path(mut self, path: Option<String>) -> GitConfig {
        self.path = path;
        self
    }
}

impl ReconcileConfig {
    /// Sets [`ReconcileConfig::poll_interval`]: time between cycles, e.g. `30s` (default).
    pub fn with_poll_interval(mut self, poll_interval: Option<ConfigDuration>) -> ReconcileConfig {
        self.poll_interval = poll_interval;
        self
    }

    /// Sets [`ReconcileConfig::task_timeout`]: longest wait for one PVE task, e.g. `30m`
    /// (default).
    pub fn with_task_timeout(mut self, task_timeout: Option<ConfigDuration>) -> ReconcileConfig {
        self.task_timeout = task_timeout;
        self
    }

    /// Sets [`ReconcileConfig::prune_budget`]: most guests deleted per cycle and cluster
    /// (default 3; 0 = no limit).
    pub fn with_prune_budget(mut self, prune_budget: Option<u32>) -> ReconcileConfig {
        self.prune_budget = prune_budget;
        self
    }

    /// Sets [`ReconcileConfig::verify_interval`]: time between the agent's verifications, e.g.
    /// `15m` (none: the agent does not verify).
    pub fn with_verify_interval(
        mut self,
        verify_interval: Option<ConfigDuration>,
    ) -> ReconcileConfig {
        self.verify_interval = verify_interval;
        self
    }
}

impl WebhooksConfig {
    /// Sets [`WebhooksConfig::github`]: gitHub (`X-Hub-Signature-256`, HMAC-SHA256 of the
    /// body).
    pub fn with_github(mut self, github: Option<ReceiverConfig>) -> WebhooksConfig {
        self.github = github;
        self
    }

    /// Sets [`WebhooksConfig::gitlab`]: gitLab (`X-Gitlab-Token`, the secret token itself).
    pub fn with_gitlab(mut self, gitlab: Option<ReceiverConfig>) -> WebhooksConfig {
        self.gitlab = gitlab;
        self
    }

    /// Sets [`WebhooksConfig::gitea`]: gitea and Forgejo (`X-Gitea-Signature`, hex HMAC-SHA256
    /// of the body).
    pub fn with_gitea(mut self, gitea: Option<ReceiverConfig>) -> WebhooksConfig {
        self.gitea = gitea;
        self
    }

    /// Sets [`WebhooksConfig::generic`]: anything else (`X-ProxOps-Signature: sha256=<hex
    /// HMAC-SHA256 of the body>`).
    pub fn with_generic(mut self, generic: Option<ReceiverConfig>) -> WebhooksConfig {
        self.generic = generic;
        self
    }

    /// Sets [`WebhooksConfig::max_body_bytes`]: the largest body accepted, in bytes (default
    /// 1048576); larger ones get 413.
    pub fn with_max_body_bytes(mut self, max_body_bytes: Option<u64>) -> WebhooksConfig {
        self.max_body_bytes = max_body_bytes;
        self
    }
}

impl ReceiverConfig {
    /// Sets [`ReceiverConfig::secret_file`]: a file holding the secret (relative to the
    /// configuration file); surrounding whitespace is ignored.
    pub fn with_secret_file(mut self, secret_file: Option<String>) -> ReceiverConfig {
        self.secret_file = secret_file;
        self
    }

    /// Sets [`ReceiverConfig::secret_env`]: an environment variable holding the secret.
    pub fn with_secret_env(mut self, secret_env: Option<String>) -> ReceiverConfig {
        self.secret_env = secret_env;
        self
    }
}

impl SecretSource {
    /// Sets [`SecretSource::env`]: an environment variable.
    pub fn with_env(mut self, env: Option<String>) -> SecretSource {
        self.env = env;
        self
    }

    /// Sets [`SecretSource::file`]: a file (relative to the configuration file); surrounding
    /// whitespace is ignored.
    pub fn with_file(mut self, file: Option<String>) -> SecretSource {
        self.file = file;
        self
    }

    /// Sets [`SecretSource::sops`]: a key of the `secrets:` map of the sink's SOPS
    /// `secrets-file`.
    pub fn with_sops(mut self, sops: Option<String>) -> SecretSource {
        self.sops = sops;
        self
    }
}

impl SinkConfig {
    /// A sink of type `kind`, every other setting unset (its defaults apply).
    pub fn new(kind: SinkKind) -> SinkConfig {
        SinkConfig {
            name: None,
            kind,
            events: Vec::new(),
            min_severity: None,
            reminder: None,
            wait_cycles: None,
            url: None,
            token: None,
            signing_secret: None,
            secrets_file: None,
            forge: None,
            api_url: None,
            repository: None,
            context: None,
        }
    }

    /// Sets [`SinkConfig::name`]: its name in `/metrics` and logs (default: its type); unique
    /// in its list.
    pub fn with_name(mut self, name: Option<String>) -> SinkConfig {
        self.name = name;
        self
    }

    /// Sets [`SinkConfig::events`]: the events it wants (default: all). Not for
    /// `commit-status`.
    pub fn with_events(mut self, events: Vec<EventKind>) -> SinkConfig {
        self.events = events;
        self
    }

    /// Sets [`SinkConfig::min_severity`]: the least severity it takes: `info` (default),
    /// `warning` or `error`. Not for `commit-status`.
    pub fn with_min_severity(mut self, min_severity: Option<NotifySeverity>) -> SinkConfig {
        self.min_severity = min_severity;
        self
    }

    /// Sets [`SinkConfig::reminder`]: how long until an event still true is sent again, e.g.
    /// `4h` (default), or `never`. Not for `commit-status`.
    pub fn with_reminder(mut self, reminder: Option<Typed<Reminder>>) -> SinkConfig {
        self.reminder = reminder;
        self
    }

    /// Sets [`SinkConfig::wait_cycles`]: a resource WAITing for more than this many cycles in a
    /// row is an event (default 3). Not for `commit-status`.
    pub fn with_wait_cycles(mut self, wait_cycles: Option<u32>) -> SinkConfig {
        self.wait_cycles = wait_cycles;
        self
    }

    /// Sets [`SinkConfig::url`]: where to send (`webhook`, `slack`: the URL; `ntfy`: the
    /// topic's URL, e.g. `https://ntfy.sh/<topic>`): a secret, from the environment, a file or
    /// SOPS.
    pub fn with_url(mut self, url: Option<SecretSource>) -> SinkConfig {
        self.url = url;
        self
    }

    /// Sets [`SinkConfig::token`]: a token: `ntfy` (optional, sent as a bearer token),
    /// `commit-status` (required).
    pub fn with_token(mut self, token: Option<SecretSource>) -> SinkConfig {
        self.token = token;
        self
    }

    /// Sets [`SinkConfig::signing_secret`]: `webhook` only: an HMAC-SHA256 key; each request
    /// then carries `X-ProxOps-Signature: sha256=<hex>` of its body.
    pub fn with_signing_secret(mut self, signing_secret: Option<SecretSource>) -> SinkConfig {
        self.signing_secret = signing_secret;
        self
    }

    /// Sets [`SinkConfig::secrets_file`]: the SOPS file holding the `sops:` keys (relative to
    /// the configuration file; a cluster's sinks default to the cluster's own `secrets-file`).
    pub fn with_secrets_file(mut self, secrets_file: Option<String>) -> SinkConfig {
        self.secrets_file = secrets_file;
        self
    }

    /// Sets [`SinkConfig::forge`]: `commit-status`: `github`, `gitlab` or `gitea` (Forgejo
    /// too).
    pub fn with_forge(mut self, forge: Option<Forge>) -> SinkConfig {
        self.forge = forge;
        self
    }

    /// Sets [`SinkConfig::api_url`]: `commit-status`: the forge's API root (default for GitHub
    /// `https://api.github.com`; GitLab e.g. `https://gitlab.example/api/v4`, Gitea
    /// `https://gitea.example/api/v1`). It carries no credentials.
    pub fn with_api_url(mut self, api_url: Option<String>) -> SinkConfig {
        self.api_url = api_url;
        self
    }

    /// Sets [`SinkConfig::repository`]: `commit-status`: `owner/name` (GitLab: the project's
    /// path or numeric id).
    pub fn with_repository(mut self, repository: Option<String>) -> SinkConfig {
        self.repository = repository;
        self
    }

    /// Sets [`SinkConfig::context`]: `commit-status`: the status's context (GitLab: name),
    /// default `proxops/<cluster>`; `{cluster}` in it is replaced by the cluster's name.
    pub fn with_context(mut self, context: Option<String>) -> SinkConfig {
        self.context = context;
        self
    }
}

impl SimulationConfig {
    /// Sets [`SimulationConfig::pve_version`]: the PVE release to simulate, `"8.4"` or `"9.1"`
    /// (the default); quote it.
    pub fn with_pve_version(mut self, pve_version: Option<SimPveVersion>) -> SimulationConfig {
        self.pve_version = pve_version;
        self
    }

    /// Sets [`SimulationConfig::storages`]: storages besides the defaults of a fresh PVE
    /// install (`local`: dir with iso, vztmpl, backup and, from 9.0, import; `local-lvm`:
    /// lvmthin with images and rootdir). One named like a default replaces it.
    pub fn with_storages(mut self, storages: Vec<SimStorage>) -> SimulationConfig {
        self.storages = storages;
        self
    }

    /// Sets [`SimulationConfig::guest_configs`]: a directory laid out as `/etc/pve` is
    /// (`nodes/<node>/qemu-server/<vmid>.conf`, `nodes/<node>/lxc/<vmid>.conf`; a file directly
    /// in `qemu-server/` or `lxc/` goes to the first node) whose guests a fresh simulator
    /// starts with, so that `proxops adopt` can be tried on a copy of an existing cluster. A
    /// kept state file (`--sim-state`) wins once it exists. Relative to the directory of the
    /// config file that says it.
    pub fn with_guest_configs(mut self, guest_configs: Option<String>) -> SimulationConfig {
        self.guest_configs = guest_configs;
        self
    }
}

impl SimStorage {
    /// The storage `name` of type `kind` holding `content`, on every node, not shared.
    pub fn new(
        name: impl Into<String>,
        kind: StorageType,
        content: Vec<ContentType>,
    ) -> SimStorage {
        SimStorage {
            name: name.into(),
            kind,
            content,
            shared: None,
            nodes: Vec::new(),
        }
    }

    /// Sets [`SimStorage::shared`]: whether every node sees the same content (NFS, Ceph, ...).
    /// Default: false.
    pub fn with_shared(mut self, shared: Option<bool>) -> SimStorage {
        self.shared = shared;
        self
    }

    /// Sets [`SimStorage::nodes`]: the nodes that have it (default: every node of the cluster).
    pub fn with_nodes(mut self, nodes: Vec<String>) -> SimStorage {
        self.nodes = nodes;
        self
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// What the setters build is what the same settings read from a file give.
    #[test]
    fn a_cluster_entry_built_with_setters_equals_the_one_read() {
        let read: ClusterEntry = serde_json::from_value(serde_json::json!({
            "base-url": "https://pve.example:8006",
            "nodes": ["pve1", "pve2"],
            "drift": "report",
            "simulation": {"pve-version": "8.4", "storages": [
                {"name": "nas", "type": "nfs", "content": ["iso"], "shared": true}
            ]},
        }))
        .unwrap();
        let storage = SimStorage::new("nas", StorageType::Nfs, vec![ContentType::Iso])
            .with_shared(Some(true));
        let built = ClusterEntry::new("https://pve.example:8006")
            .with_nodes(vec!["pve1".into(), "pve2".into()])
            .with_drift(Some(DriftMode::Report))
            .with_simulation(Some(
                SimulationConfig::default()
                    .with_pve_version(Some(SimPveVersion::V8_4))
                    .with_storages(vec![storage]),
            ));
        assert_eq!(built, read);
        assert_ne!(built.clone().with_insecure(Some(true)), read);
    }
}
