//! Reading a property string (`key=value,...`) as pve-common's `PVE/JSONSchema.pm`
//! `parse_property_string` does, once for every crate: [`split_property_string`] turns the
//! text into (canonical key, value) pairs against a format's sub-keys ([`SubKeys`]); what a
//! caller then does with the values (the model checks them, the client normalizes them) is its
//! own.

use crate::Sub;

/// The sub-keys of a property-string format, as the reader needs them.
pub trait SubKeys {
    /// The key a part without `=` belongs to.
    fn default_key(&self) -> Option<&str>;
    /// Whether `key` is a key of the format (aliases included).
    fn knows(&self, key: &str) -> bool;
    /// For an alias: the key it stands for, and for a key alias (`virtio=MAC`) the key that
    /// receives the alias's own name (`model`).
    fn alias(&self, key: &str) -> Option<(&str, Option<&str>)>;
}

impl SubKeys for [Sub] {
    fn default_key(&self) -> Option<&str> {
        self.iter().find(|s| s.default_key).map(|s| s.name)
    }

    fn knows(&self, key: &str) -> bool {
        self.iter().any(|s| s.name == key)
    }

    fn alias(&self, key: &str) -> Option<(&str, Option<&str>)> {
        let sub = self.iter().find(|s| s.name == key)?;
        sub.alias.map(|target| (target, sub.key_alias))
    }
}

/// What to do with a key the format does not define.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnknownKeys {
    /// Refuse it, as PVE does (checking a value before it is sent).
    Refuse,
    /// Keep it (reading a value a newer PVE wrote).
    Keep,
}

/// Why a property string does not read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PropertyStringError {
    /// A part without `key=` in a format without a default key.
    #[error("`{part}` has no `key=` and the property string has no default key")]
    NoDefaultKey {
        /// The part.
        part: String,
    },
    /// A part with `=` but no key or no value (`=x`, `key=`).
    #[error("`{part}` has an empty key or value")]
    Empty {
        /// The part.
        part: String,
    },
    /// A key the format does not define.
    #[error("`{key}` is not a key of this property string")]
    UnknownKey {
        /// The key as written.
        key: String,
    },
    /// A key given twice (after aliases are resolved).
    #[error("`{key}` is given twice")]
    Duplicate {
        /// The canonical key.
        key: String,
    },
}

/// Splits `text` into (canonical key, value) pairs in the order written: parts separated by
/// commas, blank parts skipped; `key=value` (the key up to the first `=`, neither side empty);
/// a part without `=` is the default key's value; an alias is stored under the key it stands
/// for, a key alias also stores its own name (`virtio=MAC`: `model=virtio`, `macaddr=MAC`).
/// Keys are taken as written, untrimmed, as PVE does. Unlike PVE, which lets an alias silently
/// overwrite the key it stands for (`file=a,volume=b`), a key given twice by any spelling is
/// refused: the two values cannot both be meant.
pub fn split_property_string<K: SubKeys + ?Sized>(
    keys: &K,
    text: &str,
    unknown: UnknownKeys,
) -> Result<Vec<(String, String)>, PropertyStringError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |key: &str, value: &str| {
        if out.iter().any(|(have, _)| have == key) {
            return Err(PropertyStringError::Duplicate {
                key: key.to_owned(),
            });
        }
        out.push((key.to_owned(), value.to_owned()));
        Ok(())
    };
    for part in text.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        let Some((key, value)) = part.split_once('=') else {
            let default = keys
                .default_key()
                .ok_or_else(|| PropertyStringError::NoDefaultKey {
                    part: part.to_owned(),
                })?;
            push(default, part)?;
            continue;
        };
        if key.is_empty() || value.is_empty() {
            return Err(PropertyStringError::Empty {
                part: part.to_owned(),
            });
        }
        if !keys.knows(key) && unknown == UnknownKeys::Refuse {
            return Err(PropertyStringError::UnknownKey {
                key: key.to_owned(),
            });
        }
        match keys.alias(key) {
            Some((target, key_alias)) => {
                if let Some(name_key) = key_alias {
                    push(name_key, key)?;
                }
                push(target, value)?;
            }
            None => push(key, value)?,
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{GuestType, key};

    fn subs(guest: GuestType, name: &str) -> &'static [Sub] {
        key(guest, name, None)
            .and_then(|k| k.format.sub_keys())
            .unwrap_or_default()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_disk_reads_with_its_default_key_and_aliases() {
        let disk = subs(GuestType::Qemu, "scsi0");
        let got = split_property_string(
            disk,
            "local-lvm:vm-100-disk-0,size=32G,,",
            UnknownKeys::Refuse,
        );
        assert_eq!(
            got,
            Ok(pairs(&[
                ("file", "local-lvm:vm-100-disk-0"),
                ("size", "32G")
            ]))
        );
        let got = split_property_string(
            disk,
            "volume=local:iso/x.iso,media=cdrom",
            UnknownKeys::Refuse,
        );
        assert_eq!(
            got,
            Ok(pairs(&[("file", "local:iso/x.iso"), ("media", "cdrom")]))
        );
    }

    #[test]
    fn a_nic_model_with_its_mac_is_two_keys() {
        let nic = subs(GuestType::Qemu, "net0");
        let got = split_property_string(
            nic,
            "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            UnknownKeys::Refuse,
        );
        assert_eq!(
            got,
            Ok(pairs(&[
                ("model", "virtio"),
                ("macaddr", "BC:24:11:00:00:01"),
                ("bridge", "vmbr0")
            ]))
        );
    }

    #[test]
    fn what_pve_refuses_is_refused() {
        let disk = subs(GuestType::Qemu, "scsi0");
        let refuse = |text: &str| split_property_string(disk, text, UnknownKeys::Refuse);
        assert!(matches!(
            refuse("a,b"),
            Err(PropertyStringError::Duplicate { .. })
        ));
        assert!(matches!(
            refuse("file=a,volume=b"),
            Err(PropertyStringError::Duplicate { .. })
        ));
        assert!(matches!(
            refuse("a,size="),
            Err(PropertyStringError::Empty { .. })
        ));
        assert!(matches!(
            refuse("a,=1"),
            Err(PropertyStringError::Empty { .. })
        ));
        assert!(matches!(
            refuse("a, size=1G"),
            Err(PropertyStringError::UnknownKey { .. })
        ));
        assert!(matches!(
            refuse("a,bogus=1"),
            Err(PropertyStringError::UnknownKey { .. })
        ));
        let ipconfig = subs(GuestType::Qemu, "ipconfig0");
        assert!(matches!(
            split_property_string(ipconfig, "dhcp", UnknownKeys::Refuse),
            Err(PropertyStringError::NoDefaultKey { .. })
        ));
    }

    #[test]
    fn an_unknown_key_is_kept_when_asked() {
        let disk = subs(GuestType::Qemu, "scsi0");
        let got = split_property_string(disk, "a,future=1", UnknownKeys::Keep);
        assert_eq!(got, Ok(pairs(&[("file", "a"), ("future", "1")])));
    }
}
