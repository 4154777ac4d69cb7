//! The typed VM options beyond the basics (issue 15, "every guest option"): memory ballooning,
//! versioned machine types, NUMA nodes, hugepages, audio, the random number generator, disk
//! cache and I/O limits, cloud-init's type, upgrade and custom snippets, the guest OS type.
//! Each maps to PVE's key or sub-key named in its doc; values PVE restricts are enums whose
//! spellings a test checks against the official schemas.

use crate::quantity::Quantity;
use schemars::JsonSchema;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// PVE's `ostype` of a VM: which guest OS PVE tunes the VM for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum QemuOsType {
    /// Unspecified OS.
    Other,
    /// Windows XP.
    Wxp,
    /// Windows 2000.
    W2k,
    /// Windows 2003.
    W2k3,
    /// Windows 2008.
    W2k8,
    /// Windows Vista.
    Wvista,
    /// Windows 7.
    Win7,
    /// Windows 8, 2012, 2012r2.
    Win8,
    /// Windows 10, 2016, 2019.
    Win10,
    /// Windows 11, 2022, 2025.
    Win11,
    /// Linux 2.4.
    L24,
    /// Linux 2.6 - 6.x.
    L26,
    /// Solaris or OpenSolaris.
    Solaris,
}

/// The minimum memory of a ballooning VM (PVE `balloon`), or `off` to remove the balloon
/// device (`balloon: 0`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Balloon {
    /// No balloon device (`balloon: 0`).
    Off,
    /// The memory the balloon may shrink the VM to, a whole number of MiB up to `memory`.
    Min(Quantity),
}

impl Serialize for Balloon {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Balloon::Off => s.serialize_str("off"),
            Balloon::Min(q) => q.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Balloon {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Balloon;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("`off` or a memory size such as `2GiB`")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Balloon, E> {
                if v == "off" {
                    return Ok(Balloon::Off);
                }
                Quantity::parse(v).map(Balloon::Min).map_err(|e| {
                    E::custom(format!(
                        "expected `off` or a memory size such as `2GiB`: {e}"
                    ))
                })
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Balloon, E> {
                if v {
                    Err(E::custom(
                        "expected `off` or a memory size such as `2GiB`, found `true`",
                    ))
                } else {
                    Ok(Balloon::Off)
                }
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Balloon, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Balloon, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Balloon {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Balloon".into()
    }

    fn json_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let size = g.subschema_for::<crate::quantity::MemorySize>();
        schemars::json_schema!({
            "description": "`off` (no balloon device, PVE `balloon: 0`) or the memory the balloon may shrink the VM to (whole MiB, at most `memory`).",
            "anyOf": [{"const": "off"}, {"const": false}, size]
        })
    }
}

/// A PVE machine type (`machine` `type`): `i440fx` (PVE's `pc`), `q35`, a versioned type such
/// as `pc-q35-8.1` or `pc-i440fx-9.0` (optionally `+pveN`, `.pxe`), or `virt` (aarch64).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Machine(pub String);

/// PVE's pattern of the machine `type` (qemu-server `PVE::QemuServer::Machine`
/// `$machine_fmt`), anchored; `i440fx` is ProxOps' name of `pc`.
pub const MACHINE_PATTERN: &str = r"^(i440fx|pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|virt(-\d+(\.\d+)+)?(\+pve\d+)?)$";

impl Machine {
    /// The value PVE takes (`i440fx` is `pc`).
    pub fn to_pve(&self) -> &str {
        match self.0.as_str() {
            "i440fx" => "pc",
            other => other,
        }
    }

    /// Whether it is a Q35 type (`q35`, `pc-q35-*`).
    pub fn is_q35(&self) -> bool {
        self.0 == "q35" || self.0.starts_with("pc-q35-")
    }

    /// Whether PVE would take it.
    pub fn is_valid(&self) -> bool {
        self.0.len() <= 40
            && regex::Regex::new(MACHINE_PATTERN).is_ok_and(|re| re.is_match(&self.0))
    }
}

impl JsonSchema for Machine {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Machine".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The machine type: `i440fx` (PVE's default `pc`), `q35`, a versioned type such as `pc-q35-8.1` or `pc-i440fx-9.0`, or `virt` for aarch64.",
            "type": "string",
            "maxLength": 40,
            "pattern": MACHINE_PATTERN,
        })
    }
}

/// A virtual IOMMU (machine `viommu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Viommu {
    /// Intel's (needs a q35 machine).
    Intel,
    /// VirtIO's.
    Virtio,
}

/// Hugepages backing the VM's memory (PVE `hugepages`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum Hugepages {
    /// Any size the host has (`any`).
    #[serde(rename = "any")]
    Any,
    /// 2 MiB pages (PVE `2`).
    #[serde(rename = "2MiB")]
    Size2MiB,
    /// 1 GiB pages (PVE `1024`).
    #[serde(rename = "1GiB")]
    Size1GiB,
}

impl Hugepages {
    /// PVE's value.
    pub fn to_pve(self) -> &'static str {
        match self {
            Hugepages::Any => "any",
            Hugepages::Size2MiB => "2",
            Hugepages::Size1GiB => "1024",
        }
    }
}

/// One virtual NUMA node (`numa<N>`, N its position in the list).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct NumaNode {
    /// The node's vCPUs: ids and ranges separated by `;`, e.g. `0-3` or `0-1;4-5`.
    pub cpus: String,
    /// The node's memory, a whole number of MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<crate::quantity::MemorySize>")]
    pub memory: Option<Quantity>,
    /// The host NUMA nodes to take the memory from, e.g. `0` or `0-1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostnodes: Option<String>,
    /// The memory policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<NumaPolicy>,
}

/// NUMA memory policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NumaPolicy {
    /// Prefer the host nodes.
    Preferred,
    /// Only the host nodes.
    Bind,
    /// Spread over the host nodes.
    Interleave,
}

/// The audio device (`audio0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Audio {
    /// The emulated sound card.
    pub device: AudioDevice,
    /// The backend: `spice` (PVE's default) or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<AudioDriver>,
}

/// Emulated sound cards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum AudioDevice {
    /// Intel HD Audio on ICH9.
    #[serde(rename = "ich9-intel-hda")]
    Ich9IntelHda,
    /// Intel HD Audio.
    #[serde(rename = "intel-hda")]
    IntelHda,
    /// AC97.
    #[serde(rename = "AC97")]
    Ac97,
}

/// Audio backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AudioDriver {
    /// SPICE.
    Spice,
    /// No backend (a device only).
    None,
}

/// A VirtIO random number generator (`rng0`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct Rng {
    /// The host's entropy source.
    pub source: RngSource,
    /// At most this many bytes of entropy per `period` (PVE `max_bytes`; 0: no limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// The period of `max-bytes`, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period: Option<u64>,
}

/// Host entropy sources PVE allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum RngSource {
    /// `/dev/urandom`.
    #[serde(rename = "/dev/urandom")]
    Urandom,
    /// `/dev/random`.
    #[serde(rename = "/dev/random")]
    Random,
    /// `/dev/hwrng` (a hardware generator).
    #[serde(rename = "/dev/hwrng")]
    Hwrng,
}

/// The clipboard of the display (`vga` `clipboard`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Clipboard {
    /// Through VNC (needs the guest agent).
    Vnc,
}

/// A drive's cache mode (`cache`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// No host cache (PVE's default).
    None,
    /// Write-through.
    Writethrough,
    /// Write-back.
    Writeback,
    /// Write-back, flushes ignored.
    Unsafe,
    /// Direct, synchronous.
    Directsync,
}

/// I/O limits of a drive; an absent limit is left to PVE (none).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct DiskLimits {
    /// Read and write, MB/s (`mbps`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps: Option<f64>,
    /// Read, MB/s (`mbps_rd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_rd: Option<f64>,
    /// Write, MB/s (`mbps_wr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_wr: Option<f64>,
    /// Burst read and write, MB/s (`mbps_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_max: Option<f64>,
    /// Burst read, MB/s (`mbps_rd_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_rd_max: Option<f64>,
    /// Burst write, MB/s (`mbps_wr_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mbps_wr_max: Option<f64>,
    /// Read and write operations per second (`iops`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<u64>,
    /// Read operations per second (`iops_rd`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_rd: Option<u64>,
    /// Write operations per second (`iops_wr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_wr: Option<u64>,
    /// Burst read and write operations per second (`iops_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_max: Option<u64>,
    /// Burst read operations per second (`iops_rd_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_rd_max: Option<u64>,
    /// Burst write operations per second (`iops_wr_max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops_wr_max: Option<u64>,
}

impl DiskLimits {
    /// PVE's sub-keys and values, in PVE's names.
    pub fn to_pve(&self) -> Vec<(&'static str, String)> {
        let num = |v: f64| {
            if v.fract() == 0.0 {
                format!("{}", v as u64)
            } else {
                v.to_string()
            }
        };
        let mut out = Vec::new();
        for (k, v) in [
            ("mbps", self.mbps),
            ("mbps_rd", self.mbps_rd),
            ("mbps_wr", self.mbps_wr),
            ("mbps_max", self.mbps_max),
            ("mbps_rd_max", self.mbps_rd_max),
            ("mbps_wr_max", self.mbps_wr_max),
        ] {
            if let Some(v) = v {
                out.push((k, num(v)));
            }
        }
        for (k, v) in [
            ("iops", self.iops),
            ("iops_rd", self.iops_rd),
            ("iops_wr", self.iops_wr),
            ("iops_max", self.iops_max),
            ("iops_rd_max", self.iops_rd_max),
            ("iops_wr_max", self.iops_wr_max),
        ] {
            if let Some(v) = v {
                out.push((k, v.to_string()));
            }
        }
        out
    }
}

/// Cloud-init's data source format (`citype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum CiType {
    /// ConfigDrive v2 (PVE's default for Windows).
    Configdrive2,
    /// NoCloud (PVE's default for Linux).
    Nocloud,
    /// OpenNebula.
    Opennebula,
}

/// Custom cloud-init files (`cicustom`), each a snippet volume such as
/// `local:snippets/user.yaml` that replaces what PVE would generate for that part.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct CiCustom {
    /// The user data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The network config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The meta data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<String>,
    /// The vendor data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vendor: Option<String>,
}

impl CiCustom {
    /// (PVE sub-key, volume) pairs that are set.
    pub fn parts(&self) -> Vec<(&'static str, &str)> {
        [
            ("meta", &self.meta),
            ("network", &self.network),
            ("user", &self.user),
            ("vendor", &self.vendor),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.as_deref().map(|v| (k, v)))
        .collect()
    }
}

/// Microsoft UEFI certificates of an EFI disk with pre-enrolled keys (`ms-cert`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[non_exhaustive]
pub enum MsCert {
    /// The 2011 certificates.
    #[serde(rename = "2011")]
    Y2011,
    /// The 2023 certificates.
    #[serde(rename = "2023")]
    Y2023,
    /// The 2023 certificates, Windows UEFI CA only.
    #[serde(rename = "2023w")]
    Y2023w,
    /// The 2023 certificates, KEK only.
    #[serde(rename = "2023k")]
    Y2023k,
}

impl MsCert {
    /// PVE's value.
    pub fn to_pve(self) -> &'static str {
        match self {
            MsCert::Y2011 => "2011",
            MsCert::Y2023 => "2023",
            MsCert::Y2023w => "2023w",
            MsCert::Y2023k => "2023k",
        }
    }
}

/// The VM-specific CPU flags PVE lets a VM set (qemu-server `PVE::QemuServer::CPUFlags`
/// `$supported_vm_specific_cpu_flags_by_arch`; `nested-virt` since qemu-server 9.1).
pub const PVE_VM_CPU_FLAGS: &[&str] = &[
    "aes",
    "amd-no-ssb",
    "amd-ssbd",
    "hv-evmcs",
    "hv-tlbflush",
    "ibpb",
    "md-clear",
    "nested-virt",
    "pcid",
    "pdpe1gb",
    "spec-ctrl",
    "ssbd",
    "virt-ssbd",
];
