//! `GET /nodes/{node}/storage/{storage}/content`, `DELETE .../content/{volume}` and
//! `POST .../download-url`.

use reqwest::Method;

use crate::client::PveClient;
use crate::error::PveError;
use crate::params::{Params, seg};
use crate::request::Request;
use crate::types::{DownloadUrl, StorageVolume};
use crate::upid::Upid;

impl PveClient {
    /// The volumes of a storage as a node sees it, optionally of one content type.
    pub async fn storage_content(
        &self,
        node: &str,
        storage: &str,
        content: Option<&str>,
    ) -> Result<Vec<StorageVolume>, PveError> {
        let path = format!("/nodes/{}/storage/{}/content", seg(node), seg(storage));
        let params = Params::new().opt("content", content);
        self.call(
            Method::GET,
            "/nodes/{node}/storage/{storage}/content",
            &path,
            &params,
        )
        .await
    }

    /// Deletes a volume of a storage (task type `imgdel`; `None` when PVE finished it within its
    /// `delay`). PVE checks no guest config before deleting: a caller that must not pull a file
    /// from under a guest checks first (pve-storage `src/PVE/API2/Storage/Content.pm`, `delete`).
    pub async fn delete_volume(
        &self,
        node: &str,
        storage: &str,
        volume: &str,
    ) -> Result<Option<Upid>, PveError> {
        self.send_opt_upid(Request::delete_volume(node, storage, volume))
            .await
    }

    /// Downloads a URL into a storage (task type `download`, task id = the file name).
    pub async fn download_url(
        &self,
        node: &str,
        storage: &str,
        req: &DownloadUrl,
    ) -> Result<Upid, PveError> {
        self.send_upid(Request::download_url(node, storage, req))
            .await
    }
}
