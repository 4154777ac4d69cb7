//! Addresses as pve-firewall checks them: `Net::IP->new` (the CPAN module's `ip_normalize`,
//! `ip_is_ipv4`, `ip_is_ipv6`, `ip_check_prefix` and `set`, with their error texts) for rule
//! address lists, and pve-firewall `src/PVE/Firewall.pm`'s own `pve_verify_ip_or_cidr`,
//! `clean_cidr` and `parse_ip_or_cidr` (PVE's `$IPV4RE`/`$IPV6RE`, which the standard parsers
//! match) for aliases and IP set entries.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `Net::IP::ip_is_ipv4`: whether `ip` is IPv4 as Net::IP reads it (a bare number below 256
/// is; missing quads are), or its error.
fn is_ipv4(ip: &str) -> Result<(), String> {
    if ip.is_empty() || !ip.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(format!("Invalid chars in IP {ip}"));
    }
    if ip.starts_with('.') {
        return Err(format!("Invalid IP {ip} - starts with a dot"));
    }
    if ip.ends_with('.') {
        return Err(format!("Invalid IP {ip} - ends with a dot"));
    }
    if !ip.contains('.') && ip.parse::<u64>().is_ok_and(|n| n < 256) {
        return Ok(());
    }
    if ip.matches('.').count() >= 4 {
        return Err(format!("Invalid IP address {ip}"));
    }
    if ip.contains("..") {
        return Err(format!("Empty quad in IP address {ip}"));
    }
    match ip
        .split('.')
        .find(|q| !q.parse::<u64>().is_ok_and(|n| n <= 255))
    {
        Some(q) => Err(format!("Invalid quad in IP address {ip} - {q}")),
        None => Ok(()),
    }
}

/// `Net::IP::ip_is_ipv6`; `Ok(false)` where it fails without an error of its own.
fn is_ipv6(ip: &str) -> Result<bool, String> {
    let mut n = ip.matches(':').count();
    if n == 0 || n >= 8 {
        return Ok(false);
    }
    // Perl's `split /:/` drops trailing empty fields.
    let mut fields: Vec<&str> = ip.split(':').collect();
    while fields.last().is_some_and(|f| f.is_empty()) {
        fields.pop();
    }
    for (i, f) in fields.iter().enumerate() {
        let hex = (1..=4).contains(&f.len()) && f.bytes().all(|b| b.is_ascii_hexdigit());
        if f.is_empty() || hex {
            continue;
        }
        if i + 1 == n + 1 && is_ipv4(f).is_ok() {
            n += 1;
            continue;
        }
        return Err(format!("Invalid IP address {ip}"));
    }
    let b = ip.as_bytes();
    if b.len() >= 2 && b[0] == b':' && b[1] != b':' {
        return Err(format!("Invalid address {ip} (starts with :)"));
    }
    if b.len() >= 2 && b[b.len() - 1] == b':' && b[b.len() - 2] != b':' {
        return Err(format!("Invalid address {ip} (ends with :)"));
    }
    if b.windows(2).filter(|w| w == b"::").count() > 1 {
        return Err(format!("Invalid address {ip} (More than one :: pattern)"));
    }
    if n != 7 && !ip.contains("::") {
        return Err(format!("Invalid number of octets {ip}"));
    }
    Ok(true)
}

/// `Net::IP::ip_get_version`: 4 or 6, or the error the checks left.
fn version(ip: &str) -> Result<u8, String> {
    let mut err = None;
    if !ip.contains(':') {
        match is_ipv4(ip) {
            Ok(()) => return Ok(4),
            Err(e) => err = Some(e),
        }
    }
    match is_ipv6(ip) {
        Ok(true) => Ok(6),
        Ok(false) => Err(err.unwrap_or_else(|| format!("Cannot determine IP version for {ip}"))),
        Err(e) => Err(e),
    }
}

/// The address as a bit string (`ip_expand_address` then `ip_iptobin`).
fn bits(ip: &str, version: u8) -> Result<String, String> {
    if version == 4 {
        let quads: Vec<&str> = ip.split('.').collect();
        if quads.len() > 4 {
            return Err(format!("Not a valid IPv address {ip}"));
        }
        let mut out = String::new();
        for i in 0..4 {
            let q: u8 = quads.get(i).and_then(|q| q.parse().ok()).unwrap_or(0);
            out.push_str(&format!("{q:08b}"));
        }
        return Ok(out);
    }
    let a: Ipv6Addr = ip
        .parse()
        .map_err(|_| format!("Cannot determine IP version for {ip}"))?;
    Ok(a.octets().iter().map(|o| format!("{o:08b}")).collect())
}

/// The address as Net::IP's error texts print it (expanded).
fn expanded(ip: &str, version: u8) -> String {
    match bits(ip, version) {
        Ok(b) if version == 4 => b
            .as_bytes()
            .chunks(8)
            .map(|c| u8::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 2).unwrap_or(0))
            .map(|o| o.to_string())
            .collect::<Vec<_>>()
            .join("."),
        Ok(b) => b
            .as_bytes()
            .chunks(16)
            .map(|c| u16::from_str_radix(std::str::from_utf8(c).unwrap_or("0"), 2).unwrap_or(0))
            .map(|g| format!("{g:04x}"))
            .collect::<Vec<_>>()
            .join(":"),
        Err(_) => ip.to_owned(),
    }
}

/// `Net::IP::ip_check_prefix`.
fn check_prefix(bin: &str, len: usize) -> Result<(), String> {
    if len > bin.len() {
        return Err(format!(
            "Prefix length {len} is longer than IP address ({})",
            bin.len()
        ));
    }
    if bin[len..].bytes().any(|b| b != b'0') {
        return Err(format!("Invalid prefix {bin}/{len}"));
    }
    Ok(())
}

/// `Net::IP->new($data)`: a single address, a prefix (`a/len`) or a range (`a-b`); its
/// version, or `Net::IP::Error()`.
pub(crate) fn net_ip(data: &str) -> Result<u8, String> {
    if let Some((ip, len)) = data.split_once('/').filter(|(ip, len)| {
        !ip.is_empty() && !len.is_empty() && !data.contains(char::is_whitespace)
    }) {
        let v = version(ip)?;
        let bin = bits(ip, v)?;
        // `ip_normalize` reads `/<digits>`; anything else ends its loop without a check.
        if let Ok(len) = len.parse::<usize>() {
            check_prefix(&bin, len)?;
        }
        return Ok(v);
    }
    if let Some((a, b)) = data
        .split_once('-')
        .filter(|(a, b)| !a.is_empty() && !b.is_empty())
    {
        let (a, b) = (a.trim_end(), b.trim_start());
        let v = version(a)?;
        let bin_a = bits(a, v)?;
        let w = version(b)?;
        let (ea, eb) = (expanded(a, v), expanded(b, v));
        if w != v {
            return Err(format!(
                "Begin and End addresses have different IP versions - {ea} - {eb}"
            ));
        }
        if bin_a > bits(b, v)? {
            return Err(format!(
                "Begin address is greater than End address {ea} - {eb}"
            ));
        }
        return Ok(v);
    }
    let v = version(data)?;
    bits(data, v)?;
    Ok(v)
}

/// PVE's `$IPV4RE` or `$IPV6RE` with an optional `/<digits>`: the address, its version and the
/// prefix length.
fn split_cidr(cidr: &str) -> Option<(&str, u8, Option<&str>)> {
    let (ip, len) = match cidr.split_once('/') {
        Some((ip, len)) if !len.is_empty() && len.bytes().all(|b| b.is_ascii_digit()) => {
            (ip, Some(len))
        }
        Some(_) => return None,
        None => (cidr, None),
    };
    if ip.parse::<Ipv4Addr>().is_ok() {
        Some((ip, 4, len))
    } else if ip.parse::<Ipv6Addr>().is_ok() {
        Some((ip, 6, len))
    } else {
        None
    }
}

const NOT_IP: &str = "value does not look like a valid IP address or CIDR network";

/// `clean_cidr`: the host bits of a network cleared (an address without a length is kept
/// as given).
pub(crate) fn clean_cidr(cidr: &str) -> String {
    let Some((ip, v, Some(len))) = split_cidr(cidr) else {
        return cidr.to_owned();
    };
    let n: u32 = len.parse().unwrap_or(u32::MAX);
    let clean = if v == 4 {
        let a: u32 = ip.parse::<Ipv4Addr>().map(u32::from).unwrap_or(0);
        let mask = if n >= 32 { u32::MAX } else { !(u32::MAX >> n) };
        Ipv4Addr::from(a & mask).to_string()
    } else {
        let a: u128 = ip.parse::<Ipv6Addr>().map(u128::from).unwrap_or(0);
        let mask = if n >= 128 {
            u128::MAX
        } else {
            !(u128::MAX >> n)
        };
        Ipv6Addr::from(a & mask).to_string()
    };
    format!("{clean}/{len}")
}

/// The format `IPorCIDR` (`pve_verify_ip_or_cidr`).
pub(crate) fn verify_ip_or_cidr(cidr: &str) -> Result<(), String> {
    if split_cidr(cidr).is_none() {
        return Err(NOT_IP.into());
    }
    net_ip(&clean_cidr(cidr)).map(|_| ())
}

/// `parse_ip_or_cidr`: a host's `/32` or `/128` dropped; the version.
pub(crate) fn parse_ip_or_cidr(cidr: &str) -> Result<(String, u8), String> {
    let (_, v, len) = split_cidr(cidr).ok_or_else(|| NOT_IP.to_owned())?;
    let host = match v {
        4 => "32",
        _ => "128",
    };
    let cidr = match len {
        Some(l) if l == host => cidr.rsplit_once('/').map_or(cidr, |(ip, _)| ip),
        _ => cidr,
    };
    Ok((cidr.to_owned(), v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_ip_reads_as_the_perl_module_does() {
        assert_eq!(net_ip("10.0.0.1"), Ok(4));
        assert_eq!(net_ip("10.0.0.0/8"), Ok(4));
        assert_eq!(net_ip("2001:db8::/32"), Ok(6));
        assert_eq!(net_ip("10.0.0.1-10.0.0.9"), Ok(4));
        assert_eq!(
            net_ip("192.168.1.5/24").unwrap_err(),
            "Invalid prefix 11000000101010000000000100000101/24"
        );
        assert_eq!(
            net_ip("10.0.0.300").unwrap_err(),
            "Invalid quad in IP address 10.0.0.300 - 300"
        );
        assert_eq!(
            net_ip("10.0.0.9-10.0.0.1").unwrap_err(),
            "Begin address is greater than End address 10.0.0.9 - 10.0.0.1"
        );
    }

    #[test]
    fn cidrs_are_cleaned_and_hosts_shortened() {
        assert_eq!(clean_cidr("192.168.1.155/24"), "192.168.1.0/24");
        assert_eq!(clean_cidr("10.0.0.1"), "10.0.0.1");
        assert_eq!(parse_ip_or_cidr("10.0.0.1/32").unwrap().0, "10.0.0.1");
        assert_eq!(
            parse_ip_or_cidr("fd00::1/128").unwrap(),
            ("fd00::1".into(), 6)
        );
        assert_eq!(
            verify_ip_or_cidr("10.0.0.0/33").unwrap_err(),
            "Prefix length 33 is longer than IP address (32)"
        );
        assert_eq!(verify_ip_or_cidr("nope").unwrap_err(), NOT_IP);
    }
}
