//! [`Request`]: one write as the client sends it (method, endpoint, concrete path, parameters),
//! built without sending it. The client's write methods send exactly these, so a caller that
//! shows what would be sent (a plan's materialized payload) and the client cannot disagree.

use reqwest::Method;
use std::collections::BTreeMap;

use crate::params::{Params, seg};
use crate::types::{CloneRequest, ConfigChange, DownloadUrl, GuestRef, GuestType};

/// One API request, not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// The HTTP method.
    pub method: Method,
    /// The endpoint's path template (`/nodes/{node}/qemu/{vmid}/config`): what counters group by.
    pub template: &'static str,
    /// The concrete path below `/api2/json`, segments percent-encoded.
    pub path: String,
    /// The form fields (the query string of a `DELETE`).
    pub params: Params,
}

/// `/nodes/{node}/{qemu|lxc}/{vmid}`.
pub(crate) fn guest_base(g: &GuestRef) -> String {
    format!("/nodes/{}/{}/{}", seg(&g.node), g.kind.as_str(), g.vmid)
}

/// The static template of a guest endpoint (`rest` after the vmid).
pub(crate) fn guest_template(kind: GuestType, rest: &str) -> &'static str {
    // Path templates are static so counters and traces group by endpoint.
    match (kind, rest) {
        (GuestType::Qemu, "") => "/nodes/{node}/qemu/{vmid}",
        (GuestType::Qemu, "/config") => "/nodes/{node}/qemu/{vmid}/config",
        (GuestType::Qemu, "/pending") => "/nodes/{node}/qemu/{vmid}/pending",
        (GuestType::Qemu, "/status/current") => "/nodes/{node}/qemu/{vmid}/status/current",
        (GuestType::Qemu, "/status/start") => "/nodes/{node}/qemu/{vmid}/status/start",
        (GuestType::Qemu, "/status/stop") => "/nodes/{node}/qemu/{vmid}/status/stop",
        (GuestType::Qemu, "/status/shutdown") => "/nodes/{node}/qemu/{vmid}/status/shutdown",
        (GuestType::Qemu, "/clone") => "/nodes/{node}/qemu/{vmid}/clone",
        (GuestType::Qemu, "/template") => "/nodes/{node}/qemu/{vmid}/template",
        (GuestType::Qemu, "/resize") => "/nodes/{node}/qemu/{vmid}/resize",
        (GuestType::Lxc, "") => "/nodes/{node}/lxc/{vmid}",
        (GuestType::Lxc, "/config") => "/nodes/{node}/lxc/{vmid}/config",
        (GuestType::Lxc, "/pending") => "/nodes/{node}/lxc/{vmid}/pending",
        (GuestType::Lxc, "/status/current") => "/nodes/{node}/lxc/{vmid}/status/current",
        (GuestType::Lxc, "/status/start") => "/nodes/{node}/lxc/{vmid}/status/start",
        (GuestType::Lxc, "/status/stop") => "/nodes/{node}/lxc/{vmid}/status/stop",
        (GuestType::Lxc, "/status/shutdown") => "/nodes/{node}/lxc/{vmid}/status/shutdown",
        (GuestType::Lxc, "/clone") => "/nodes/{node}/lxc/{vmid}/clone",
        (GuestType::Lxc, "/template") => "/nodes/{node}/lxc/{vmid}/template",
        (GuestType::Lxc, "/resize") => "/nodes/{node}/lxc/{vmid}/resize",
        _ => "/nodes/{node}/{type}/{vmid}/...",
    }
}

impl Request {
    /// Any request: `template` names the endpoint (`/storage/{storage}`), `path` is the
    /// concrete one with its segments percent-encoded.
    pub fn new(method: Method, template: &'static str, path: String, params: Params) -> Request {
        Request {
            method,
            template,
            path,
            params,
        }
    }

    fn guest(method: Method, g: &GuestRef, rest: &str, params: Params) -> Request {
        Request {
            method,
            template: guest_template(g.kind, rest),
            path: format!("{}{rest}", guest_base(g)),
            params,
        }
    }

    /// `POST /nodes/{node}/{qemu|lxc}`: `vmid` and the config keys.
    pub fn create_guest(g: &GuestRef, config: &BTreeMap<String, String>) -> Request {
        let (template, path) = match g.kind {
            GuestType::Qemu => (
                "/nodes/{node}/qemu",
                format!("/nodes/{}/qemu", seg(&g.node)),
            ),
            GuestType::Lxc => ("/nodes/{node}/lxc", format!("/nodes/{}/lxc", seg(&g.node))),
        };
        Request {
            method: Method::POST,
            template,
            path,
            params: Params::new().set("vmid", g.vmid).extend_map(config),
        }
    }

    /// A config change: `POST .../config` (qemu's asynchronous form, a task when it allocates
    /// or imports disks) when `asynchronous`, else `PUT .../config`.
    pub fn set_config(g: &GuestRef, change: &ConfigChange, asynchronous: bool) -> Request {
        let method = if asynchronous && g.kind == GuestType::Qemu {
            Method::POST
        } else {
            Method::PUT
        };
        Request::guest(method, g, "/config", change.params())
    }

    /// `POST .../clone` of the template `g`.
    pub fn clone_guest(g: &GuestRef, req: &CloneRequest) -> Request {
        Request::guest(Method::POST, g, "/clone", req.params(g.kind))
    }

    /// `POST .../template`.
    pub fn make_template(g: &GuestRef) -> Request {
        Request::guest(Method::POST, g, "/template", Params::new())
    }

    /// `PUT .../resize`: `disk` to `size` (`32G`, or `+8G`).
    pub fn resize(g: &GuestRef, disk: &str, size: &str, digest: Option<&str>) -> Request {
        let params = Params::new()
            .set("disk", disk)
            .set("size", size)
            .opt("digest", digest);
        Request::guest(Method::PUT, g, "/resize", params)
    }

    /// `POST .../status/start`.
    pub fn start(g: &GuestRef) -> Request {
        Request::guest(Method::POST, g, "/status/start", Params::new())
    }

    /// `POST /nodes/{node}/storage/{storage}/download-url`.
    pub fn download_url(node: &str, storage: &str, req: &DownloadUrl) -> Request {
        Request {
            method: Method::POST,
            template: "/nodes/{node}/storage/{storage}/download-url",
            path: format!("/nodes/{}/storage/{}/download-url", seg(node), seg(storage)),
            params: req.params(),
        }
    }

    /// `DELETE /nodes/{node}/storage/{storage}/content/{volume}`.
    pub fn delete_volume(node: &str, storage: &str, volid: &str) -> Request {
        Request {
            method: Method::DELETE,
            template: "/nodes/{node}/storage/{storage}/content/{volume}",
            path: format!(
                "/nodes/{}/storage/{}/content/{}",
                seg(node),
                seg(storage),
                seg(volid)
            ),
            params: Params::new(),
        }
    }

    /// `POST /cluster/ha/resources`: `sid` first, then `params`.
    pub fn ha_create(sid: &str, params: &Params) -> Request {
        let mut p = Params::new().set("sid", sid);
        for (k, v) in params.pairs() {
            p.push(k, v);
        }
        Request {
            method: Method::POST,
            template: "/cluster/ha/resources",
            path: "/cluster/ha/resources".to_owned(),
            params: p,
        }
    }

    /// `PUT /cluster/ha/resources/{sid}`.
    pub fn ha_update(sid: &str, params: Params) -> Request {
        Request {
            method: Method::PUT,
            template: "/cluster/ha/resources/{sid}",
            path: format!("/cluster/ha/resources/{}", seg(sid)),
            params,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_change_of_a_container_is_always_a_put() {
        let change = ConfigChange::default().set("memory", "512").delete("swap");
        let r = Request::set_config(&GuestRef::lxc("pve1", 200), &change, true);
        assert_eq!(r.method, Method::PUT);
        assert_eq!(r.path, "/nodes/pve1/lxc/200/config");
        assert_eq!(r.template, "/nodes/{node}/lxc/{vmid}/config");
        let pairs: Vec<(&str, &str)> = r
            .params
            .pairs()
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(pairs, [("memory", "512"), ("delete", "swap")]);
        let qemu = Request::set_config(&GuestRef::qemu("pve1", 100), &change, true);
        assert_eq!(qemu.method, Method::POST);
    }

    #[test]
    fn a_create_names_the_vmid_first_and_encodes_the_node() {
        let config = BTreeMap::from([("memory".to_owned(), "2048".to_owned())]);
        let r = Request::create_guest(&GuestRef::qemu("pve 1", 101), &config);
        assert_eq!(r.path, "/nodes/pve%201/qemu");
        assert_eq!(r.params.pairs()[0], ("vmid".to_owned(), "101".to_owned()));
    }
}
