//! What the drivers map a manifest in (the cluster, its graph, its secrets), and why a
//! manifest cannot be mapped.

use super::artifact;
use crate::secrets::ClusterSecrets;
use proxops_graph::Graph;
use proxops_model::{Resource, Spec};
use proxops_secrets::Secret;

/// Why a manifest cannot be mapped to PVE (a reference that does not resolve: the graph normally
/// rules this out).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DesiredError {
    /// A referenced resource is not in the graph, or not of the expected kind.
    #[error("{resource} references {target}, which is not in the cluster")]
    Unresolved {
        /// The referencing resource.
        resource: String,
        /// `Kind/name` of the target.
        target: String,
    },
    /// The resource is not a guest kind this engine knows.
    #[error("{0} is not a guest")]
    NotAGuest(String),
    /// No driver is registered for the kind.
    #[error("no driver for kind `{0}`: register one with Drivers::register")]
    NoDriver(String),
    /// A cloud-init secret reference does not resolve from the cluster's SOPS secrets.
    #[error("{resource}: cloud-init secret `{reference}` cannot be resolved: {reason}")]
    Secret {
        /// The referencing resource.
        resource: String,
        /// The reference (`cloud-init.passwords.<name>`), never its value.
        reference: String,
        /// Why, and what to do.
        reason: String,
    },
    /// An SSH key that PVE's create and config update refuse (pve-common
    /// `validate_ssh_public_keys`: "SSH public key validation error").
    #[error("{resource}: SSH key {index} ({origin}) is one PVE refuses: {reason}")]
    SshKey {
        /// The resource.
        resource: String,
        /// Its position among the resource's keys, from 1.
        index: usize,
        /// `ssh-keys` or the secret reference it came from (never the key itself).
        origin: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl DesiredError {
    /// The stable code of the problem, as plans and diagnostics show it.
    pub fn code(&self) -> &'static str {
        match self {
            DesiredError::Unresolved { .. } => "proxops::unresolved",
            DesiredError::NotAGuest(_) => "proxops::not_a_guest",
            DesiredError::NoDriver(_) => "proxops::no_driver",
            DesiredError::Secret { .. } => "proxops::cloud_init_secret",
            DesiredError::SshKey { .. } => "proxops::ssh_key",
        }
    }
}

/// What the drivers need besides the manifest: the cluster's name and graph, to resolve names to
/// PVE volumes and vmids, and its secrets, to resolve cloud-init references.
#[derive(Clone, Copy)]
#[non_exhaustive]
pub struct Context<'a> {
    /// The cluster's name.
    pub cluster: &'a str,
    /// The cluster's graph.
    pub graph: &'a Graph,
    /// The cluster's decrypted SOPS secrets (`None`: not loaded; references then fail).
    pub secrets: Option<&'a ClusterSecrets>,
    /// Render secret references as themselves (`sops:<reference>`) instead of resolving them:
    /// what a materialized payload shows, which never holds a secret.
    pub references_only: bool,
}

impl<'a> Context<'a> {
    /// A context without secrets.
    pub fn new(cluster: &'a str, graph: &'a Graph) -> Context<'a> {
        Context {
            cluster,
            graph,
            secrets: None,
            references_only: false,
        }
    }

    /// A context that renders secret references as `sops:<reference>` and resolves none.
    pub fn references_only(cluster: &'a str, graph: &'a Graph) -> Context<'a> {
        Context {
            references_only: true,
            ..Context::new(cluster, graph)
        }
    }

    /// Resolves cloud-init secret references of `from` with `resolve`; `reference` names them
    /// in the error.
    pub(crate) fn secret(
        &self,
        from: &Resource,
        reference: &str,
        resolve: impl FnOnce(&ClusterSecrets) -> Result<Vec<Secret>, String>,
    ) -> Result<Vec<Secret>, DesiredError> {
        let fail = |reason: String| DesiredError::Secret {
            resource: from.key().to_string(),
            reference: reference.to_owned(),
            reason,
        };
        match self.secrets {
            Some(s) => resolve(s).map_err(fail),
            None => Err(fail(
                ClusterSecrets::not_loaded(self.cluster)
                    .document()
                    .err()
                    .unwrap_or_default(),
            )),
        }
    }

    /// The resource `kind`/`name` of the cluster.
    pub(crate) fn lookup(
        &self,
        from: &Resource,
        kind: &str,
        name: &str,
    ) -> Result<&Resource, DesiredError> {
        self.graph
            .find(kind, name)
            .map(|id| self.graph.resource(id).as_ref())
            .ok_or_else(|| DesiredError::Unresolved {
                resource: from.key().to_string(),
                target: format!("{kind}/{name}"),
            })
    }

    /// The volume id of artifact `kind`/`name` (`local:iso/debian.iso`).
    pub(crate) fn volume(
        &self,
        from: &Resource,
        kind: &str,
        name: &str,
    ) -> Result<String, DesiredError> {
        let target = self.lookup(from, kind, name)?;
        match &target.spec {
            Spec::Artifact(a) => Ok(artifact::volid(kind, a)),
            _ => Err(DesiredError::Unresolved {
                resource: from.key().to_string(),
                target: format!("{kind}/{name}"),
            }),
        }
    }
}
