//! The journal of the write requests the simulator answered: end-to-end tests compare what a
//! client sent, parameter by parameter, which the per-template counters cannot tell.

use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

/// How many entries the journal keeps: a long run must not grow it without end.
pub(crate) const JOURNAL_CAPACITY: usize = 10_000;

/// PVE's mask for a secret it never shows back (`cipassword` in a guest config).
pub(crate) const SECRET_MASK: &str = "**********";

/// Parameters whose value is a secret: a login's or a user's password (or a ticket renewed
/// through `password`), the caller's own for `PUT /access/password`, a cloud-init password.
/// The journal keeps the key and the mask, never the value.
const SECRET_PARAMS: &[&str] = &["password", "confirmation-password", "cipassword"];

/// One write request (a method other than GET) that reached an API handler, journaled when it
/// was answered; a refusal before the handler (the schema check's 400, an unauthenticated
/// request's 401, an injected fault) is not journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct JournalEntry {
    /// `POST`, `PUT` or `DELETE`.
    pub method: String,
    /// The path as requested below `/api2/json` (e.g. `/nodes/pve1/qemu/101/config`), still
    /// percent-encoded, without a trailing `/`.
    pub path: String,
    /// The route's template (`/nodes/{node}/qemu/{vmid}/config`), as the counters key it.
    pub template: String,
    /// The HTTP status answered (also a refusal by the handler, or pveproxy's 596).
    pub status: u16,
    /// The query's and body's parameters merged and decoded, one value per key as the handler
    /// reads them (a repeated `-list` key joined with `,`); the path's own variables are in
    /// `path`, not here. Secrets (`password`, `confirmation-password`, `cipassword`) show as
    /// `**********`.
    pub params: BTreeMap<String, String>,
}

impl JournalEntry {
    /// An entry with its secret parameters masked.
    pub(crate) fn new(
        method: &str,
        path: &str,
        template: &str,
        status: u16,
        mut params: BTreeMap<String, String>,
    ) -> JournalEntry {
        for (k, v) in params.iter_mut() {
            if SECRET_PARAMS.contains(&k.as_str()) {
                *v = SECRET_MASK.to_string();
            }
        }
        JournalEntry {
            method: method.to_string(),
            path: path.to_string(),
            template: template.to_string(),
            status,
            params,
        }
    }
}

/// The newest entries, oldest first, bounded at a capacity.
#[derive(Debug)]
pub(crate) struct Journal {
    entries: VecDeque<JournalEntry>,
    capacity: usize,
    /// How many entries were dropped to keep the bound (since the last clear).
    pub dropped: u64,
}

impl Default for Journal {
    fn default() -> Journal {
        Journal::with_capacity(JOURNAL_CAPACITY)
    }
}

impl Journal {
    pub(crate) fn with_capacity(capacity: usize) -> Journal {
        Journal {
            entries: VecDeque::new(),
            capacity,
            dropped: 0,
        }
    }

    /// Appends an entry, dropping the oldest when the journal is full.
    pub(crate) fn push(&mut self, entry: JournalEntry) {
        while self.entries.len() >= self.capacity.max(1) {
            self.entries.pop_front();
            self.dropped += 1;
        }
        self.entries.push_back(entry);
    }

    /// The entries, oldest first.
    pub(crate) fn entries(&self) -> Vec<JournalEntry> {
        self.entries.iter().cloned().collect()
    }

    pub(crate) fn clear(&mut self) {
        self.entries.clear();
        self.dropped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: usize) -> JournalEntry {
        let params = BTreeMap::from([("i".to_string(), i.to_string())]);
        JournalEntry::new("PUT", "/x", "/x", 200, params)
    }

    #[test]
    fn the_bound_drops_the_oldest_and_counts_them() {
        let mut j = Journal::with_capacity(3);
        for i in 0..5 {
            j.push(entry(i));
        }
        let kept: Vec<&str> = j.entries.iter().map(|e| e.params["i"].as_str()).collect();
        assert_eq!(kept, ["2", "3", "4"]);
        assert_eq!(j.dropped, 2);
        j.clear();
        assert!(j.entries().is_empty());
        assert_eq!(j.dropped, 0);
    }

    #[test]
    fn the_default_keeps_ten_thousand() {
        let mut j = Journal::default();
        for i in 0..JOURNAL_CAPACITY + 1 {
            j.push(entry(i));
        }
        assert_eq!(j.entries.len(), JOURNAL_CAPACITY);
        assert_eq!(j.dropped, 1);
        assert_eq!(j.entries.front().unwrap().params["i"], "1");
    }

    #[test]
    fn secrets_are_masked() {
        let params = BTreeMap::from([
            ("username".to_string(), "root@pam".to_string()),
            ("password".to_string(), "s3cret".to_string()),
            ("confirmation-password".to_string(), "old".to_string()),
            ("cipassword".to_string(), "ci".to_string()),
        ]);
        let e = JournalEntry::new("POST", "/access/ticket", "/access/ticket", 200, params);
        assert_eq!(e.params["username"], "root@pam");
        for k in ["password", "confirmation-password", "cipassword"] {
            assert_eq!(e.params[k], SECRET_MASK, "{k}");
        }
    }
}
