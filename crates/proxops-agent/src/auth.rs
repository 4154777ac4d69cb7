//! Who may use the agent's control API: a bearer token, compared in constant time, on requests
//! addressed to the agent itself (its `Host`) and not sent by another site's page (`Origin`).
//!
//! A browser lets any web page send a `POST` to `http://127.0.0.1:9494`, and DNS rebinding lets
//! a page's own host name resolve to the agent; the token stops the first (a page cannot read
//! it), the `Host` check the second, the `Origin` check both, before the token is looked at.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// The control API's bearer token. `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct ControlToken(String);

impl ControlToken {
    /// A token from its text, surrounding whitespace (a file's final newline) removed; `None`
    /// when nothing is left.
    pub fn new(text: &str) -> Option<ControlToken> {
        let t = text.trim();
        (!t.is_empty()).then(|| ControlToken(t.to_owned()))
    }

    /// The token, for the `Authorization` header of a client.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether `presented` is this token, in time that depends only on this token's length.
    pub fn matches(&self, presented: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), presented.as_bytes())
    }
}

impl fmt::Debug for ControlToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ControlToken([redacted])")
    }
}

/// Compares every byte of `expected` whatever `presented` holds, so that the time taken says
/// nothing about how much of a guess was right (only whether its length was).
pub(crate) fn constant_time_eq(expected: &[u8], presented: &[u8]) -> bool {
    let mut diff = u8::from(expected.len() != presented.len());
    for (i, e) in expected.iter().enumerate() {
        let p = presented.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(e ^ p);
    }
    std::hint::black_box(diff) == 0
}

/// Why a control request was turned away.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// 403: `Host` is not this agent.
    ForeignHost(String),
    /// 403: sent by a page of another origin.
    ForeignOrigin(String),
    /// 401: the agent has no token, so no one may control it.
    NoTokenConfigured,
    /// 401: no `Authorization: Bearer`.
    MissingToken,
    /// 401: a token, not this one.
    WrongToken,
}

impl Refusal {
    /// The HTTP status.
    pub(crate) fn status(&self) -> u16 {
        match self {
            Refusal::ForeignHost(_) | Refusal::ForeignOrigin(_) => 403,
            _ => 401,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ForeignHost(h) => write!(
                f,
                "forbidden: Host `{h}` is not this agent's address; the control API answers \
                 only requests addressed to the agent itself"
            ),
            Refusal::ForeignOrigin(o) => write!(
                f,
                "forbidden: a request from a page of origin `{o}` cannot control this agent"
            ),
            Refusal::NoTokenConfigured => f.write_str(
                "unauthorized: this agent has no control token; start it with --token-file, \
                 `agent.token-file`, `agent.token-env` or PROXOPS_AGENT_TOKEN",
            ),
            Refusal::MissingToken => f.write_str(
                "unauthorized: the control API needs the agent's token \
                 (Authorization: Bearer <token>)",
            ),
            Refusal::WrongToken => f.write_str("unauthorized: the bearer token is wrong"),
        }
    }
}

/// The checks of one agent, fixed when it binds.
#[derive(Debug, Clone)]
pub(crate) struct Guard {
    token: Option<ControlToken>,
    /// The bound address (with the real port when `:0` was asked for).
    addr: SocketAddr,
    /// Host names (lower case) that mean this agent.
    names: Vec<String>,
}

impl Guard {
    /// The guard of an agent bound at `addr`; `hostname` is the machine's name, which clients
    /// of a non-loopback agent may use.
    pub(crate) fn new(token: Option<ControlToken>, addr: SocketAddr, hostname: &str) -> Guard {
        let mut names = Vec::new();
        if addr.ip().is_loopback() || addr.ip().is_unspecified() {
            names.push("localhost".to_owned());
        }
        if !addr.ip().is_loopback() && !hostname.is_empty() {
            names.push(hostname.to_ascii_lowercase());
        }
        Guard { token, addr, names }
    }

    /// Checks a request's `Host`, `Origin` and `Authorization` headers (each `None` when
    /// absent), in that order.
    pub(crate) fn check(
        &self,
        host: Option<&str>,
        origin: Option<&str>,
        authorization: Option<&str>,
    ) -> Result<(), Refusal> {
        let host = host.unwrap_or_default();
        if !self.is_own_host(host) {
            return Err(Refusal::ForeignHost(host.to_owned()));
        }
        if let Some(o) = origin
            && !o
                .strip_prefix("http://")
                .is_some_and(|h| self.is_own_host(h))
        {
            return Err(Refusal::ForeignOrigin(o.to_owned()));
        }
        let Some(token) = &self.token else {
            return Err(Refusal::NoTokenConfigured);
        };
        let presented = authorization
            .and_then(|a| a.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .ok_or(Refusal::MissingToken)?;
        if token.matches(presented) {
            Ok(())
        } else {
            Err(Refusal::WrongToken)
        }
    }

    /// Whether `host` (`name[:port]`, `[v6][:port]`) addresses this agent: its port (80 when
    /// none is given), and its own IP address, a loopback one for a loopback agent, any IP
    /// address for an agent on all addresses, or one of its names. Other names are refused:
    /// a rebinding attacker's page is sent with the attacker's name.
    fn is_own_host(&self, host: &str) -> bool {
        let host = host.trim().to_ascii_lowercase();
        let Some((name, port)) = split_host(&host) else {
            return false;
        };
        if port.unwrap_or(80) != self.addr.port() {
            return false;
        }
        let own = self.addr.ip();
        match name.parse::<IpAddr>() {
            Ok(ip) => ip == own || own.is_unspecified() || (own.is_loopback() && ip.is_loopback()),
            Err(_) => self.names.iter().any(|n| n == name),
        }
    }
}

/// `name[:port]` or `[v6][:port]` into the name (without brackets) and the port; `None` when
/// malformed.
fn split_host(host: &str) -> Option<(&str, Option<u16>)> {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        match after {
            "" => (v6, None),
            p => (v6, Some(p.strip_prefix(':')?)),
        }
    } else {
        match host.split_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (host, None),
        }
    };
    if name.is_empty() {
        return None;
    }
    let port = match port {
        Some(p) => Some(p.parse::<u16>().ok()?),
        None => None,
    };
    Some((name, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(addr: &str) -> Guard {
        let addr: SocketAddr = addr.parse().unwrap_or(SocketAddr::from(([0, 0, 0, 0], 1)));
        Guard::new(ControlToken::new("s3cret"), addr, "Agent-Host")
    }

    #[test]
    fn constant_time_compare_is_equality() {
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
        assert!(!constant_time_eq(b"abc", b"abcd"));
        assert!(!constant_time_eq(b"", b"x"));
        assert!(constant_time_eq(b"", b""));
    }

    #[test]
    fn tokens_are_trimmed_and_never_shown() {
        assert_eq!(ControlToken::new("  \n"), None);
        let t = ControlToken::new("s3cret\n");
        assert!(t.as_ref().is_some_and(|t| t.matches("s3cret")));
        assert!(!format!("{t:?}").contains("s3cret"));
    }

    #[test]
    fn loopback_agents_answer_to_loopback_names_on_their_port() {
        let g = guard("127.0.0.1:9494");
        let ok = Some("Bearer s3cret");
        for host in [
            "127.0.0.1:9494",
            "localhost:9494",
            "LOCALHOST:9494",
            "[::1]:9494",
        ] {
            assert_eq!(g.check(Some(host), None, ok), Ok(()), "{host}");
        }
        for host in [
            "evil.example:9494",
            "127.0.0.1:80",
            "127.0.0.1",
            "localhost",
            "",
            "10.0.0.1:9494",
            "agent-host:9494",
            "127.0.0.1:x",
        ] {
            assert!(
                matches!(g.check(Some(host), None, ok), Err(Refusal::ForeignHost(_))),
                "{host}"
            );
        }
        assert!(matches!(
            g.check(None, None, ok),
            Err(Refusal::ForeignHost(_))
        ));
    }

    #[test]
    fn foreign_origins_are_refused_before_the_token_counts() {
        let g = guard("127.0.0.1:9494");
        let host = Some("127.0.0.1:9494");
        let ok = Some("Bearer s3cret");
        assert_eq!(g.check(host, Some("http://127.0.0.1:9494"), ok), Ok(()));
        assert_eq!(g.check(host, Some("http://localhost:9494"), ok), Ok(()));
        for origin in [
            "http://evil.example",
            "null",
            "https://127.0.0.1:9494",
            "http://127.0.0.1:9495",
        ] {
            let refused = g.check(host, Some(origin), ok);
            assert_eq!(
                refused,
                Err(Refusal::ForeignOrigin(origin.to_owned())),
                "{origin}"
            );
            assert_eq!(refused.map_err(|r| r.status()), Err(403));
        }
    }

    #[test]
    fn the_token_must_be_presented_and_right() {
        let g = guard("127.0.0.1:9494");
        let host = Some("127.0.0.1:9494");
        assert_eq!(g.check(host, None, None), Err(Refusal::MissingToken));
        assert_eq!(
            g.check(host, None, Some("Basic czNjcmV0")),
            Err(Refusal::MissingToken)
        );
        assert_eq!(
            g.check(host, None, Some("Bearer s3cre")),
            Err(Refusal::WrongToken)
        );
        assert_eq!(g.check(host, None, Some("bearer s3cret")), Ok(()));
        let open = Guard::new(None, SocketAddr::from(([127, 0, 0, 1], 1)), "x");
        let refused = open.check(Some("127.0.0.1:1"), None, Some("Bearer "));
        assert_eq!(refused, Err(Refusal::NoTokenConfigured));
        assert_eq!(refused.map_err(|r| r.status()), Err(401));
    }

    #[test]
    fn agents_on_other_addresses_answer_to_their_address_and_host_name() {
        let g = guard("192.0.2.7:9494");
        let ok = Some("Bearer s3cret");
        for host in ["192.0.2.7:9494", "agent-host:9494"] {
            assert_eq!(g.check(Some(host), None, ok), Ok(()), "{host}");
        }
        for host in ["192.0.2.8:9494", "localhost:9494", "evil.example:9494"] {
            assert!(g.check(Some(host), None, ok).is_err(), "{host}");
        }
        let any = guard("0.0.0.0:9494");
        for host in [
            "192.0.2.8:9494",
            "localhost:9494",
            "agent-host:9494",
            "[fd00::1]:9494",
        ] {
            assert_eq!(any.check(Some(host), None, ok), Ok(()), "{host}");
        }
        assert!(any.check(Some("evil.example:9494"), None, ok).is_err());
    }
}
