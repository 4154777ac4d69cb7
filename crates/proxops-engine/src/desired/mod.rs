//! What a manifest asks of PVE, per kind.

mod artifact;
mod build;
mod context;
mod drivers;
mod guest;
mod keys;
mod lxc;
mod vm;

pub use artifact::{DesiredArtifact, artifact, content_of};
pub use context::{Context, DesiredError};
pub use drivers::{Desired, Driver, DriverClash, Drivers, guest};
pub use guest::{
    CloneSource, Compare, DesiredGuest, IDENTITY_PREFIX, OWNER_TAG, Owned, identity_tag,
};
// The diff's tests build owned keys as the drivers do.
#[cfg(test)]
pub(crate) use guest::{owned, pve_config};
