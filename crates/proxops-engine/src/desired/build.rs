//! Constructors and setters of the drivers' output types: the types are `#[non_exhaustive]`,
//! so a driver of another crate (see [`Drivers::register`](super::Drivers::register)) builds
//! them through these.

use super::artifact::DesiredArtifact;
use super::guest::{CloneSource, Compare, DesiredGuest, Owned};
use proxops_model::kinds::{HaSpec, PowerState};
use proxops_pve::GuestType;
use proxops_secrets::{REDACTED, Secret};

impl Owned {
    /// `key` set to `value`, compared as `compare`, applied without a restart, not secret.
    pub fn new(key: impl Into<String>, value: impl Into<String>, compare: Compare) -> Owned {
        Owned {
            key: key.into(),
            value: value.into(),
            compare,
            restart: false,
            secret: None,
        }
    }

    /// Whether a change takes effect only after the guest restarts.
    pub fn with_restart(mut self, restart: bool) -> Owned {
        self.restart = restart;
        self
    }

    /// Makes the value secret: `secret` is what is written, plans and logs show
    /// [`REDACTED`] (the value given to [`Owned::new`] is replaced).
    pub fn with_secret(mut self, secret: Secret) -> Owned {
        self.value = REDACTED.to_owned();
        self.secret = Some(secret);
        self
    }
}

impl CloneSource {
    /// The template `vmid` on `node`.
    pub fn new(vmid: u32, node: impl Into<String>) -> CloneSource {
        CloneSource {
            vmid,
            node: node.into(),
        }
    }
}

impl DesiredGuest {
    /// A `guest` pinned to `node` as `vmid`, kept started, with no keys yet: not a template,
    /// no HA resource, created rather than cloned.
    pub fn new(guest: GuestType, node: impl Into<String>, vmid: u32) -> DesiredGuest {
        let node = node.into();
        DesiredGuest {
            guest,
            template: false,
            nodes: vec![node.clone()],
            node,
            placed: false,
            vmid,
            power: Some(PowerState::Started),
            ha: None,
            clone: None,
            owned: Vec::new(),
            create_only: Vec::new(),
            warnings: Vec::new(),
            update_policy: None,
            firewall: None,
            pool: None,
        }
    }

    /// Whether it is a template. A template is never started: `true` also clears the power
    /// state and the HA resource.
    pub fn with_template(mut self, template: bool) -> DesiredGuest {
        self.template = template;
        if template {
            self.power = None;
            self.ha = None;
        }
        self
    }

    /// Placed rather than pinned: it may run on any of `nodes` (in order; its node is the first
    /// until the planner picks one). An empty list leaves it pinned.
    pub fn with_nodes(mut self, nodes: Vec<String>) -> DesiredGuest {
        if let Some(first) = nodes.first() {
            self.node = first.clone();
            self.nodes = nodes;
            self.placed = true;
        }
        self
    }

    /// The power state to keep (`None`: left as it is).
    pub fn with_power(mut self, power: Option<PowerState>) -> DesiredGuest {
        self.power = power;
        self
    }

    /// Its HA resource. The power state is then the one the HA state decides.
    pub fn with_ha(mut self, ha: Option<HaSpec>) -> DesiredGuest {
        if let Some(ha) = &ha {
            self.power = ha.state().power();
        }
        self.ha = ha;
        self
    }

    /// The template to clone from instead of creating.
    pub fn with_clone(mut self, clone: Option<CloneSource>) -> DesiredGuest {
        self.clone = clone;
        self
    }

    /// The owned config keys (kept sorted by key, as the planner expects them).
    pub fn with_owned(mut self, mut owned: Vec<Owned>) -> DesiredGuest {
        owned.sort_by(|a, b| a.key.cmp(&b.key));
        self.owned = owned;
        self
    }

    /// Create parameters that are not config keys (`ostemplate`): sent once, never compared.
    pub fn with_create_only(mut self, create_only: Vec<(String, String)>) -> DesiredGuest {
        self.create_only = create_only;
        self
    }

    /// Things the manifest asks for that PVE cannot express: reported, not written.
    pub fn with_warnings(mut self, warnings: Vec<String>) -> DesiredGuest {
        self.warnings = warnings;
        self
    }

    /// Its update policy: updates are snapshot-guarded when it asks for snapshots
    /// (`snapshot: true`); otherwise (or `None`) they are not.
    pub fn with_update_policy(
        mut self,
        policy: Option<proxops_model::kinds::UpdatePolicy>,
    ) -> DesiredGuest {
        self.update_policy = policy.filter(|p| p.snapshot);
        self
    }
}

impl DesiredArtifact {
    /// `filename` downloaded from `url` into `storage` (content `iso`, `vztmpl` or `import`)
    /// on each of `nodes` (repeats dropped), without a checksum.
    pub fn new(
        nodes: Vec<String>,
        storage: impl Into<String>,
        content: &'static str,
        filename: impl Into<String>,
        url: impl Into<String>,
    ) -> DesiredArtifact {
        let (storage, filename) = (storage.into(), filename.into());
        let mut unique: Vec<String> = Vec::new();
        for n in nodes {
            if !unique.contains(&n) {
                unique.push(n);
            }
        }
        DesiredArtifact {
            nodes: unique,
            volid: format!("{storage}:{content}/{filename}"),
            download: vec![
                ("content".to_owned(), content.to_owned()),
                ("filename".to_owned(), filename.clone()),
                ("url".to_owned(), url.into()),
            ],
            storage,
            content,
            filename,
        }
    }

    /// The checksum PVE verifies the download against: `algorithm` as PVE names it (`md5`,
    /// `sha1`, `sha224`, `sha256`, `sha384`, `sha512`), `value` in hex.
    pub fn with_checksum(mut self, algorithm: &str, value: &str) -> DesiredArtifact {
        self.download
            .retain(|(k, _)| k != "checksum" && k != "checksum-algorithm");
        self.download
            .push(("checksum".into(), value.to_ascii_lowercase()));
        self.download
            .push(("checksum-algorithm".into(), algorithm.into()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_built_by_hand_is_pinned_started_and_sorted() {
        let g = DesiredGuest::new(GuestType::Qemu, "pve1", 120).with_owned(vec![
            Owned::new("memory", "1024", Compare::Canonical).with_restart(true),
            Owned::new("cores", "2", Compare::Canonical),
        ]);
        assert_eq!(
            (g.node.as_str(), g.nodes.len(), g.placed),
            ("pve1", 1, false)
        );
        assert_eq!(g.power, Some(PowerState::Started));
        let keys: Vec<&str> = g.owned.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["cores", "memory"]);
        assert!(g.owned("memory").is_some_and(|o| o.restart));

        let t = g
            .with_nodes(vec!["pve2".into(), "pve3".into()])
            .with_template(true);
        assert_eq!((t.node.as_str(), t.placed, t.power), ("pve2", true, None));
    }

    #[test]
    fn a_secret_owned_key_shows_redacted_and_writes_the_secret() {
        let o = Owned::new("cipassword", "plain", Compare::Canonical)
            .with_secret(Secret::new("s3cret".to_owned()));
        assert_eq!(o.value, REDACTED);
        assert_eq!(o.wire(), "s3cret");
    }

    #[test]
    fn an_artifact_built_by_hand_has_its_volid_and_download_parameters() {
        let a = DesiredArtifact::new(
            vec!["pve1".into(), "pve2".into(), "pve1".into()],
            "local",
            "iso",
            "x.iso",
            "https://example.org/x.iso",
        )
        .with_checksum("sha256", "ABCD");
        assert_eq!(a.nodes, ["pve1", "pve2"]);
        assert_eq!(a.volid, "local:iso/x.iso");
        let keys: Vec<&str> = a.download.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "content",
                "filename",
                "url",
                "checksum",
                "checksum-algorithm"
            ]
        );
        assert!(a.download.contains(&("checksum".into(), "abcd".into())));
    }
}
