//! `/cluster/sdn/vnets/{vnet}/subnets[/{subnet}]` as pve-network
//! `src/PVE/API2/Network/SDN/Subnets.pm` defines them (`index`, `read`, `create`, `update`,
//! `delete`), with `src/PVE/Network/SDN/SubnetPlugin.pm` (`on_update_hook`,
//! `validate_dhcp_ranges`) and `src/PVE/Network/SDN/Subnets.pm` (`sdn_subnets_config`: a
//! subnet's id is `<zone>-<network>-<mask>`, its `cidr`, `network`, `mask` and `zone` read
//! back from it). The IPAM's records (the gateway's address in the `pve` IPAM) are not
//! modelled.

use serde_json::{Value, json};
use std::net::IpAddr;

use super::Ctx;
use super::sdn::check_vnet_access;
use crate::error::ApiError;
use crate::sdn::{self, Kind, Section, View};

const SEE: &[&str] = &["SDN.Audit", "SDN.Allocate"];

/// `SubnetPlugin` `options`: (key, optional).
const OPTIONS: &[(&str, bool)] = &[
    ("vnet", false),
    ("gateway", true),
    ("snat", true),
    ("dnszoneprefix", true),
    ("dhcp-range", true),
    ("dhcp-dns-server", true),
];

/// A CIDR: address and mask (`pve_verify_cidrv4`: mask 8 to 32, `cidrv6`: 8 to 128).
pub(crate) fn parse_cidr(cidr: &str) -> Option<(IpAddr, u8)> {
    let (ip, mask) = cidr.split_once('/')?;
    let ip: IpAddr = ip.parse().ok()?;
    let mask: u8 = mask.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (8..=max).contains(&mask).then_some((ip, mask))
}

/// Whether `ip` lies in `net/mask` (`Net::Subnet::subnet_matcher`).
fn in_subnet(ip: IpAddr, net: IpAddr, mask: u8) -> bool {
    let (a, b, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u128::from(u32::from(a)), u128::from(u32::from(b)), 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let shift = bits - u32::from(mask);
    shift >= 128 || (a >> shift) == (b >> shift)
}

/// `get_dhcp_ranges`: each `start-address=..,end-address=..` as an object (an unparsable one is
/// skipped with a warning in PVE).
fn dhcp_ranges(s: &Section) -> Vec<Value> {
    s.get("dhcp-range")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let r = r.as_str()?;
            let mut obj = serde_json::Map::new();
            for part in r.split(',') {
                let (k, v) = part.split_once('=')?;
                obj.insert(k.trim().to_owned(), v.trim().into());
            }
            (obj.contains_key("start-address") && obj.contains_key("end-address"))
                .then_some(Value::Object(obj))
        })
        .collect()
}

/// `$api_sdn_subnets_config` over `sdn_subnets_config`: the section with `subnet`, `id`,
/// `cidr`, `zone`, `network`, `mask`, the file's `digest` and the parsed `dhcp-range`.
fn entry(id: &str, s: &Section, digest: &Value) -> Value {
    let mut v = Value::Object(s.clone());
    let mut parts = id.split('-');
    let (zone, network, mask) = (
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
        parts.next().unwrap_or_default(),
    );
    v["id"] = id.into();
    v["subnet"] = id.into();
    v["cidr"] = format!("{network}/{mask}").into();
    v["zone"] = zone.into();
    v["network"] = network.into();
    v["mask"] = mask.into();
    v["digest"] = digest.clone();
    v["dhcp-range"] = dhcp_ranges(s).into();
    v
}

/// `GET /cluster/sdn/vnets/{vnet}/subnets` (`index`): `SDN.Audit` or `SDN.Allocate` on the
/// VNet; its subnets.
pub(crate) fn list(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let vnet = ctx.req("vnet")?;
    check_vnet_access(ctx, &vnet, SEE)?;
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Subnets, which);
    Ok(Value::Array(
        cfg.iter()
            .filter(|(_, s)| s.get("vnet").and_then(Value::as_str) == Some(vnet.as_str()))
            .map(|(id, s)| entry(id, s, &digest))
            .collect(),
    ))
}

/// `GET /cluster/sdn/vnets/{vnet}/subnets/{subnet}` (`read`): a subnet of another VNet is
/// "wrong vnet".
pub(crate) fn read(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let vnet = ctx.req("vnet")?;
    let id = ctx.req("subnet")?;
    check_vnet_access(ctx, &vnet, SEE)?;
    let which = View::of(ctx.flag("pending"), ctx.flag("running"));
    let (cfg, digest) = sdn::view(&ctx.state(), Kind::Subnets, which);
    let Some(s) = cfg.get(&id) else {
        return Err(ApiError::fail(format!("sdn subnet '{id}' does not exist")));
    };
    if s.get("vnet").and_then(Value::as_str) != Some(vnet.as_str()) {
        return Err(ApiError::param("vnet", "wrong vnet"));
    }
    Ok(entry(&id, s, &digest))
}

/// `SubnetPlugin->check_config`: the options given (the path's `vnet` among them), decoded.
fn given_options(ctx: &Ctx) -> Section {
    let mut out = Section::new();
    for (key, _) in OPTIONS {
        let Some(v) = ctx.p(key) else { continue };
        let value = match *key {
            "snat" => sdn::bool_value(v),
            // An array parameter arrives as its items joined by newlines.
            "dhcp-range" => v
                .lines()
                .filter(|l| !l.is_empty())
                .collect::<Vec<_>>()
                .into(),
            _ => Value::from(v),
        };
        out.insert((*key).to_owned(), value);
    }
    out
}

/// `SubnetPlugin` `on_update_hook` (without the IPAM) and `validate_dhcp_ranges`.
fn on_update(files: &sdn::SdnConfig, id: &str) -> Result<(), ApiError> {
    let Some(s) = files.subnets.get(id) else {
        return Ok(());
    };
    let mut parts = id.splitn(2, '-');
    let cidr = parts
        .next()
        .and(parts.next())
        .unwrap_or_default()
        .replacen('-', "/", 1);
    let Some((net, mask)) = parse_cidr(&cidr) else {
        return Err(ApiError::param(
            "subnet",
            "invalid format - value does not look like a valid CIDR network",
        ));
    };
    if let Some(vnetid) = s.get("vnet").and_then(Value::as_str) {
        let Some(vnet) = files.vnets.get(vnetid) else {
            return Err(ApiError::param("vnet", format!("{vnetid} don't exist")));
        };
        if vnet.get("vlanaware").and_then(Value::as_u64) == Some(1) {
            return Err(ApiError::param(
                "vnet",
                "you can't add a subnet on a vlanaware vnet",
            ));
        }
    }
    if let Some(gw) = s.get("gateway").and_then(Value::as_str) {
        let ip: Option<IpAddr> = gw.parse().ok();
        let pointopoint = ip.is_some_and(|i| i.is_ipv4()) && mask == 32;
        if !ip.is_some_and(|i| in_subnet(i, net, mask)) && !pointopoint {
            return Err(ApiError::param(
                "gateway",
                format!("{gw} is not in subnet {cidr}"),
            ));
        }
    }
    let mut seen: Vec<(IpAddr, IpAddr)> = Vec::new();
    for r in dhcp_ranges(s) {
        let start = r["start-address"].as_str().unwrap_or_default();
        let end = r["end-address"].as_str().unwrap_or_default();
        let bad = |m: String| Err(ApiError::param("dhcp-range", m));
        let Ok(a) = start.parse::<IpAddr>() else {
            return bad(format!("start-address is not a valid IP {start}"));
        };
        let Ok(b) = end.parse::<IpAddr>() else {
            return bad(format!("end-address is not a valid IP {end}"));
        };
        if a > b {
            return bad(format!(
                "start-address {start} must be smaller than end-address {end}"
            ));
        }
        if !in_subnet(a, net, mask) {
            return bad(format!("start-address {start} is not in subnet {cidr}"));
        }
        if !in_subnet(b, net, mask) {
            return bad(format!("end-address {end} is not in subnet {cidr}"));
        }
        if seen.iter().any(|(x, y)| a <= *y && *x <= b) {
            return bad("dhcp ranges must not overlap".into());
        }
        seen.push((a, b));
    }
    Ok(())
}

/// The VNet's zone in the files.
fn zone_of_vnet(files: &sdn::SdnConfig, vnet: &str) -> String {
    files
        .vnets
        .get(vnet)
        .and_then(|v| v.get("zone"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

/// `POST /cluster/sdn/vnets/{vnet}/subnets` (`create`): `SDN.Allocate` on the VNet; the id is
/// `<zone>-<cidr with / as ->`.
pub(crate) fn create(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let vnet = ctx.req("vnet")?;
    let cidr = ctx.req("subnet")?;
    check_vnet_access(ctx, &vnet, &["SDN.Allocate"])?;
    let opts = given_options(ctx);
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let body = || -> Result<(), ApiError> {
        let id = format!(
            "{}-{}",
            zone_of_vnet(&files, &vnet),
            cidr.replacen('/', "-", 1)
        );
        if files.subnets.contains_key(&id) {
            return Err(ApiError::fail(format!(
                "sdn subnet object ID '{id}' already defined"
            )));
        }
        let mut s = Section::new();
        s.insert("type".into(), "subnet".into());
        s.extend(opts);
        files.subnets.insert(id.clone(), s);
        on_update(&files, &id)
    };
    body().map_err(|e| sdn::locked("create sdn subnet object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `PUT /cluster/sdn/vnets/{vnet}/subnets/{subnet}` (`update`): the subnet takes the path's
/// VNet (`vnet` is one of its options, as in PVE).
pub(crate) fn update(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let vnet = ctx.req("vnet")?;
    let id = ctx.req("subnet")?;
    check_vnet_access(ctx, &vnet, &["SDN.Allocate"])?;
    let opts = given_options(ctx);
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    let body = || -> Result<(), ApiError> {
        let digest = sdn::digest(&files.subnets);
        let Some(data) = files.subnets.get_mut(&id) else {
            return Err(ApiError::fail(format!("sdn subnet '{id}' does not exist")));
        };
        if ctx.p("digest").is_some_and(|d| d != digest) {
            return Err(ApiError::fail(
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
        if let Some(delete) = ctx.p("delete") {
            sdn::delete_keys(data, OPTIONS, &opts, delete)?;
        }
        data.extend(opts);
        on_update(&files, &id)
    };
    body().map_err(|e| sdn::locked("update sdn subnet object failed", e))?;
    *sdn::files_mut(&mut st) = files;
    Ok(Value::Null)
}

/// `DELETE /cluster/sdn/vnets/{vnet}/subnets/{subnet}` (`delete`): a subnet that is not there
/// is no error (`sdn_subnets_config` with `noerr`).
pub(crate) fn delete(ctx: &mut Ctx) -> Result<Value, ApiError> {
    let vnet = ctx.req("vnet")?;
    let id = ctx.req("subnet")?;
    check_vnet_access(ctx, &vnet, &["SDN.Allocate"])?;
    let mut st = ctx.state();
    let mut files = sdn::configs(&st).1;
    if files.subnets.remove(&id).is_some() {
        *sdn::files_mut(&mut st) = files;
    }
    Ok(json!(null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr_and_membership() {
        let (net, mask) = parse_cidr("10.0.0.0/24").unwrap_or((IpAddr::from([0, 0, 0, 0]), 0));
        assert_eq!(mask, 24);
        assert!(in_subnet("10.0.0.1".parse().unwrap_or(net), net, mask));
        assert!(!in_subnet("10.0.1.1".parse().unwrap_or(net), net, mask));
        assert!(parse_cidr("10.0.0.0/4").is_none());
        assert!(parse_cidr("fd00::/64").is_some());
    }
}
