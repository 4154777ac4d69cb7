//! `GET /version`, `GET /nodes`, `GET /cluster/resources`, `GET /cluster/nextid`,
//! `GET /cluster/sdn/vnets`.

use reqwest::Method;

use crate::client::PveClient;
use crate::error::PveError;
use crate::lenient;
use crate::params::Params;
use crate::types::{ClusterResource, NodeInfo, SdnVnet, Version};

impl PveClient {
    /// `GET /version`.
    pub async fn version(&self) -> Result<Version, PveError> {
        self.call(Method::GET, "/version", "/version", &Params::new())
            .await
    }

    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeInfo>, PveError> {
        self.call(Method::GET, "/nodes", "/nodes", &Params::new())
            .await
    }

    /// `GET /cluster/resources`, optionally narrowed by `type` (`vm`, `storage`, `node`, ...).
    pub async fn cluster_resources(
        &self,
        kind: Option<&str>,
    ) -> Result<Vec<ClusterResource>, PveError> {
        let params = Params::new().opt("type", kind);
        self.call(
            Method::GET,
            "/cluster/resources",
            "/cluster/resources",
            &params,
        )
        .await
    }

    /// `GET /cluster/sdn/vnets`: the SDN VNets the credentials may see (`SDN.Audit` or
    /// `SDN.Allocate` on `/sdn/zones/<zone>/<vnet>`).
    pub async fn sdn_vnets(&self) -> Result<Vec<SdnVnet>, PveError> {
        self.call(
            Method::GET,
            "/cluster/sdn/vnets",
            "/cluster/sdn/vnets",
            &Params::new(),
        )
        .await
    }

    /// `GET /cluster/nextid`: a free VMID (it reserves nothing), or with `vmid`, that VMID if it
    /// is free (a 400 otherwise).
    pub async fn next_id(&self, vmid: Option<u32>) -> Result<u32, PveError> {
        let params = Params::new().opt("vmid", vmid);
        let data = self
            .call_json(Method::GET, "/cluster/nextid", "/cluster/nextid", &params)
            .await?;
        // PVE sends the id as a string.
        lenient::vmid(data).map_err(|e| PveError::Decode {
            method: "GET".into(),
            path: "/cluster/nextid".into(),
            detail: e.to_string(),
        })
    }
}
