//! The driver registry: one [`Driver`] per kind, found by the resource's kind name, as the
//! model's kind registry finds each kind's definition. Embedders that register a kind of their
//! own in the model register its driver here.

use super::artifact::{DesiredArtifact, artifact};
use super::context::{Context, DesiredError};
use super::guest::DesiredGuest;
use super::{lxc, vm};
use proxops_model::{Resource, Spec};
use std::fmt;
use std::sync::Arc;

/// What a driver makes of a resource.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Desired {
    /// A guest (VM, container, template).
    Guest(Box<DesiredGuest>),
    /// A file on each of some nodes.
    Artifact(DesiredArtifact),
    /// Cluster objects: a storage, pool, backup job, mapping, user, group or role, or the
    /// entries of an ACL ([`crate::objects`]).
    Objects(Vec<crate::objects::DesiredObject>),
}

/// The code for one kind: from its manifest to what PVE should have.
pub trait Driver: Send + Sync + 'static {
    /// The canonical kind name it serves.
    fn kind(&self) -> &'static str;
    /// The desired state of a resource of its kind.
    fn desired(&self, cx: &Context<'_>, resource: &Resource) -> Result<Desired, DesiredError>;
}

struct GuestDriver(&'static str);

impl Driver for GuestDriver {
    fn kind(&self) -> &'static str {
        self.0
    }

    fn desired(&self, cx: &Context<'_>, resource: &Resource) -> Result<Desired, DesiredError> {
        guest(cx, resource).map(|g| Desired::Guest(Box::new(g)))
    }
}

struct ArtifactDriver(&'static str);

impl Driver for ArtifactDriver {
    fn kind(&self) -> &'static str {
        self.0
    }

    fn desired(&self, _cx: &Context<'_>, resource: &Resource) -> Result<Desired, DesiredError> {
        artifact(resource)
            .map(Desired::Artifact)
            .ok_or_else(|| DesiredError::NotAGuest(resource.key().to_string()))
    }
}

struct ObjectDriver(&'static str);

impl Driver for ObjectDriver {
    fn kind(&self) -> &'static str {
        self.0
    }

    fn desired(&self, cx: &Context<'_>, resource: &Resource) -> Result<Desired, DesiredError> {
        crate::objects::objects(cx.cluster, resource)
            .map(Desired::Objects)
            .ok_or_else(|| DesiredError::NotAGuest(resource.key().to_string()))
    }
}

/// A kind that already has a driver.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("kind `{0}` already has a driver")]
pub struct DriverClash(pub String);

/// The drivers the engine knows.
#[derive(Clone)]
pub struct Drivers {
    drivers: Vec<Arc<dyn Driver>>,
}

impl fmt::Debug for Drivers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.drivers.iter().map(|d| d.kind()))
            .finish()
    }
}

impl Default for Drivers {
    fn default() -> Self {
        Drivers::builtin()
    }
}

impl Drivers {
    /// No driver at all (build a set of one's own with [`Drivers::register`]).
    pub fn empty() -> Drivers {
        Drivers {
            drivers: Vec::new(),
        }
    }

    /// The drivers of the built-in kinds.
    pub fn builtin() -> Drivers {
        let mut drivers: Vec<Arc<dyn Driver>> = Vec::new();
        for kind in ["VM", "TemplateVM", "LXC", "TemplateCT"] {
            drivers.push(Arc::new(GuestDriver(kind)));
        }
        for kind in ["ISO", "CTTemplate", "DiskImage"] {
            drivers.push(Arc::new(ArtifactDriver(kind)));
        }
        for class in proxops_model::kinds::ObjectClass::ALL {
            drivers.push(Arc::new(ObjectDriver(class.kind())));
        }
        Drivers { drivers }
    }

    /// Adds a driver for a kind that has none.
    pub fn register(&mut self, driver: Arc<dyn Driver>) -> Result<(), DriverClash> {
        if self.get(driver.kind()).is_some() {
            return Err(DriverClash(driver.kind().to_owned()));
        }
        self.drivers.push(driver);
        Ok(())
    }

    /// The driver of a kind.
    pub fn get(&self, kind: &str) -> Option<&dyn Driver> {
        self.drivers
            .iter()
            .find(|d| d.kind() == kind)
            .map(|d| d.as_ref())
    }

    /// The desired state of a resource, through its kind's driver.
    pub fn desired(&self, cx: &Context<'_>, resource: &Resource) -> Result<Desired, DesiredError> {
        self.get(resource.kind)
            .ok_or_else(|| DesiredError::NoDriver(resource.kind.to_owned()))?
            .desired(cx, resource)
    }
}

/// The desired guest of a VM, TemplateVM, LXC or TemplateCT resource.
pub fn guest(cx: &Context<'_>, resource: &Resource) -> Result<DesiredGuest, DesiredError> {
    let mut desired = match &resource.spec {
        Spec::Vm(spec) => {
            let mut d = vm::desired(cx, resource, spec)?;
            d.firewall.clone_from(&spec.firewall);
            d.pool.clone_from(&spec.pool);
            d
        }
        Spec::Lxc(spec) => {
            let mut d = lxc::desired(cx, resource, spec)?;
            d.firewall.clone_from(&spec.firewall);
            d.pool.clone_from(&spec.pool);
            d
        }
        _ => return Err(DesiredError::NotAGuest(resource.key().to_string())),
    };
    desired.owned.sort_by(|a, b| a.key.cmp(&b.key));
    // PVE's create (and clone) takes the pool: the guest is a member from its first moment.
    if let Some(pool) = &desired.pool {
        desired.create_only.push(("pool".to_owned(), pool.clone()));
    }
    Ok(desired)
}
