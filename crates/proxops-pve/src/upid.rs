//! [`Upid`]: PVE's task id, `UPID:<node>:<pid %08X>:<pstart %08X>:<starttime %08X>:<type>:<id>:<user>:`.

use std::fmt;
use std::str::FromStr;

use crate::error::PveError;

/// A parsed UPID. `Display` gives back the exact text it was parsed from (so the task can be
/// addressed even if a server printed hex in lower case); [`Upid::new`] renders PVE's form.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Upid {
    text: String,
    /// The node the task runs on.
    pub node: String,
    /// Worker process id.
    pub pid: u32,
    /// Worker process start time (clock ticks since boot).
    pub pstart: u64,
    /// Start time (seconds since the epoch).
    pub starttime: u64,
    /// Task type (`qmcreate`, `qmclone`, `download`, ...).
    pub kind: String,
    /// Task id (usually the VMID; the file name for downloads).
    pub id: String,
    /// `user@realm` or `user@realm!token`.
    pub user: String,
}

impl Upid {
    /// Builds a UPID from its fields, rendered as PVE does.
    pub fn new(
        node: &str,
        pid: u32,
        pstart: u64,
        starttime: u64,
        kind: &str,
        id: &str,
        user: &str,
    ) -> Result<Upid, PveError> {
        format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:").parse()
    }

    /// The UPID text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the task only queued a request to the HA manager: qemu-server
    /// `src/PVE/API2/Qemu.pm` `vm_start`/`vm_stop`/`vm_shutdown` and pve-container
    /// `src/PVE/API2/LXC/Status.pm` fork `hastart`/`hastop` for an HA-managed guest, and the
    /// guest reaches the state later.
    pub fn is_ha_request(&self) -> bool {
        matches!(self.kind.as_str(), "hastart" | "hastop")
    }
}

impl FromStr for Upid {
    type Err = PveError;

    fn from_str(s: &str) -> Result<Upid, PveError> {
        let bad = |why: &str| PveError::Config(format!("invalid UPID '{s}': {why}"));
        let rest = s
            .strip_prefix("UPID:")
            .ok_or_else(|| bad("no UPID: prefix"))?;
        let rest = rest
            .strip_suffix(':')
            .ok_or_else(|| bad("no trailing colon"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        let [node, pid, pstart, starttime, kind, id, user] = parts.as_slice() else {
            return Err(bad("expected 7 fields"));
        };
        let valid_node = !node.is_empty()
            && node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !node.starts_with('-')
            && !node.ends_with('-');
        if !valid_node {
            return Err(bad("invalid node name"));
        }
        let hex = |f: &str, min: usize, max: usize, what: &str| {
            if f.len() < min || f.len() > max {
                return Err(bad(what));
            }
            u64::from_str_radix(f, 16).map_err(|_| bad(what))
        };
        let pid = hex(pid, 8, 8, "invalid pid")?;
        let pid = u32::try_from(pid).map_err(|_| bad("invalid pid"))?;
        let pstart = hex(pstart, 8, 9, "invalid pstart")?;
        let starttime = hex(starttime, 8, 8, "invalid start time")?;
        let no_space = |f: &str| !f.chars().any(char::is_whitespace);
        if kind.is_empty() || user.is_empty() || !no_space(kind) || !no_space(id) || !no_space(user)
        {
            return Err(bad("invalid type, id or user"));
        }
        Ok(Upid {
            text: s.to_string(),
            node: node.to_string(),
            pid,
            pstart,
            starttime,
            kind: kind.to_string(),
            id: id.to_string(),
            user: user.to_string(),
        })
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl fmt::Debug for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Upid({})", self.text)
    }
}

impl serde::Serialize for Upid {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> serde::Deserialize<'de> for Upid {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Upid, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_render() {
        let text = "UPID:pve1:000A1B2C:0123ABCD:6650F00D:qmclone:100:root@pam!ci:";
        let u: Upid = text.parse().unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(u.node, "pve1");
        assert_eq!(u.pid, 0xA1B2C);
        assert_eq!(u.kind, "qmclone");
        assert_eq!(u.id, "100");
        assert_eq!(u.user, "root@pam!ci");
        assert_eq!(u.to_string(), text);
        let again = Upid::new(
            &u.node,
            u.pid,
            u.pstart,
            u.starttime,
            &u.kind,
            &u.id,
            &u.user,
        )
        .map(|x| x.to_string());
        assert_eq!(again.ok().as_deref(), Some(text));
        // Download tasks: the id is the file name; empty ids are allowed.
        assert!(
            "UPID:n:00000001:00000002:00000003:download:debian.iso:root@pam:"
                .parse::<Upid>()
                .is_ok()
        );
        assert!(
            "UPID:n:00000001:00000002:00000003:vzdump::root@pam:"
                .parse::<Upid>()
                .is_ok()
        );
        for bad in [
            "UPID:pve1:1:2:3:x:y:z:",
            "UPID:pve1:000A1B2C:0123ABCD:6650F00D:qmclone:100:root@pam",
            "pve1:000A1B2C:0123ABCD:6650F00D:qmclone:100:root@pam:",
            "UPID:-bad:000A1B2C:0123ABCD:6650F00D:qmclone:100:root@pam:",
        ] {
            assert!(bad.parse::<Upid>().is_err(), "{bad}");
        }
    }
}
