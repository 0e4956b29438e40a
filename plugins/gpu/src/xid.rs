//! NVIDIA XID errors from the kernel log, and the labels of
//! gpu-feature-discovery that can be read without NVML.
//!
//! The driver logs each XID as `NVRM: Xid (PCI:<domain:bus:dev[.fn]>):
//! <code>, <text>`. The plugin follows the kernel log (the `kmsg` stream,
//! granted by the operator) for those and for the driver's load (`NVRM:
//! loading NVIDIA UNIX ...`). An XID of NVIDIA's catalog that needs action
//! ([`DEFAULT_CRITICAL`], or `xidCritical` in the config) makes
//! `GPUHealthy` False with reason [`XID_REASON`], naming the XID and the
//! GPU's bus id; every XID records a Warning event [`XID_EVENT`]. The
//! condition comes back from the inventory (True when every GPU has its
//! driver entry) when the driver is loaded again (seen in the log), or
//! once `xidClearAfter` (seconds) has passed since the XID, when set: one
//! transient XID does not mark a GPU unhealthy for ever (k8s-device-plugin
//! #111, #234).

use std::path::Path;

/// The condition's reason while an XID holds it False.
pub const XID_REASON: &str = "GPUXidError";
/// The event of every XID.
pub const XID_EVENT: &str = "GPUXid";
/// The event when the driver's reload clears an XID.
pub const RELOAD_EVENT: &str = "GPUDriverReloaded";
/// The pattern of an XID (the host matches it; index 0 of the stream).
pub const XID_PATTERN: &str = r"NVRM: Xid \(PCI:[0-9a-fA-F:.]+\): \d+";
/// The driver's load (index 1).
pub const LOAD_PATTERN: &str = r"NVRM: loading NVIDIA UNIX";
/// The XIDs NVIDIA's catalog says need action (a reset, a reboot or a
/// replacement): double-bit ECC (48), row remapping (63, 64), NVLink (74),
/// fallen off the bus (79), high single-bit ECC rate (92), contained and
/// uncontained ECC (94, 95).
pub const DEFAULT_CRITICAL: &[u32] = &[48, 63, 64, 74, 79, 92, 94, 95];

/// One XID as the driver logs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Xid {
    /// The GPU's PCI address, lowercase, with its function (`0000:3b:00.0`).
    pub bus: String,
    /// The XID.
    pub code: u32,
    /// The driver's text after the code.
    pub text: String,
}

/// Reads an XID line (`... NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU
/// has fallen off the bus.`).
pub fn parse_xid(line: &str) -> Option<Xid> {
    let rest = &line[line.find("NVRM: Xid (PCI:")? + "NVRM: Xid (PCI:".len()..];
    let (bus, rest) = rest.split_once("):")?;
    let rest = rest.trim_start();
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let code = rest[..digits].parse().ok()?;
    let text = rest[digits..].trim_start_matches(',').trim().to_owned();
    let mut bus = bus.to_ascii_lowercase();
    if !bus.contains('.') {
        bus.push_str(".0");
    }
    Some(Xid { bus, code, text })
}

/// The message of the condition an XID sets.
pub fn message(x: &Xid) -> String {
    format!("XID {} on GPU {}: {}", x.code, x.bus, x.text)
}

/// The driver's version (`535.129.03`) from `/proc/driver/nvidia/version`.
pub fn driver_version(text: &str) -> Option<String> {
    let line = text.lines().find(|l| l.starts_with("NVRM version:"))?;
    line.split_whitespace()
        .find(|w| {
            w.split('.').count() >= 2
                && w.split('.')
                    .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        })
        .map(str::to_owned)
}

/// gpu-feature-discovery's driver labels from the version:
/// `nvidia.com/cuda.driver-version.{major,minor,revision,full}`.
pub fn driver_labels(version: &str) -> Vec<(&'static str, String)> {
    let mut parts = version.split('.');
    let mut out = vec![("nvidia.com/cuda.driver-version.full", version.to_owned())];
    for key in [
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
    ] {
        if let Some(p) = parts.next() {
            out.push((key, p.to_owned()));
        }
    }
    out
}

/// What a PCI device id says: the architecture's family as
/// gpu-feature-discovery names it, the compute capability, and the
/// nominal memory in MiB (the product's, not NVML's measured total).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Model {
    /// `hopper`, `ampere`, `ada-lovelace`, `turing`, `volta`.
    pub family: &'static str,
    /// Compute capability major.
    pub major: u32,
    /// Compute capability minor.
    pub minor: u32,
    /// Nominal memory, MiB.
    pub memory_mib: u64,
}

/// Data-center NVIDIA GPUs by PCI device id (lowercase, with `0x`).
const MODELS: &[(&str, Model)] = &[
    (
        "0x2330",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 81920,
        },
    ), // H100 SXM5 80GB
    (
        "0x2331",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 81920,
        },
    ), // H100 PCIe
    (
        "0x2321",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 96256,
        },
    ), // H100 NVL
    (
        "0x2324",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 81920,
        },
    ), // H800
    (
        "0x2335",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 144384,
        },
    ), // H200 SXM 141GB
    (
        "0x233b",
        Model {
            family: "hopper",
            major: 9,
            minor: 0,
            memory_mib: 144384,
        },
    ), // H200 NVL
    (
        "0x20b0",
        Model {
            family: "ampere",
            major: 8,
            minor: 0,
            memory_mib: 40960,
        },
    ), // A100 SXM4 40GB
    (
        "0x20b2",
        Model {
            family: "ampere",
            major: 8,
            minor: 0,
            memory_mib: 81920,
        },
    ), // A100 SXM4 80GB
    (
        "0x20b5",
        Model {
            family: "ampere",
            major: 8,
            minor: 0,
            memory_mib: 81920,
        },
    ), // A100 PCIe 80GB
    (
        "0x20f1",
        Model {
            family: "ampere",
            major: 8,
            minor: 0,
            memory_mib: 40960,
        },
    ), // A100 PCIe 40GB
    (
        "0x20b7",
        Model {
            family: "ampere",
            major: 8,
            minor: 0,
            memory_mib: 24576,
        },
    ), // A30
    (
        "0x2236",
        Model {
            family: "ampere",
            major: 8,
            minor: 6,
            memory_mib: 24576,
        },
    ), // A10
    (
        "0x2235",
        Model {
            family: "ampere",
            major: 8,
            minor: 6,
            memory_mib: 49152,
        },
    ), // A40
    (
        "0x25b6",
        Model {
            family: "ampere",
            major: 8,
            minor: 6,
            memory_mib: 16384,
        },
    ), // A16
    (
        "0x27b8",
        Model {
            family: "ada-lovelace",
            major: 8,
            minor: 9,
            memory_mib: 24576,
        },
    ), // L4
    (
        "0x26b5",
        Model {
            family: "ada-lovelace",
            major: 8,
            minor: 9,
            memory_mib: 49152,
        },
    ), // L40
    (
        "0x26b9",
        Model {
            family: "ada-lovelace",
            major: 8,
            minor: 9,
            memory_mib: 49152,
        },
    ), // L40S
    (
        "0x1eb8",
        Model {
            family: "turing",
            major: 7,
            minor: 5,
            memory_mib: 16384,
        },
    ), // T4
    (
        "0x1db1",
        Model {
            family: "volta",
            major: 7,
            minor: 0,
            memory_mib: 16384,
        },
    ), // V100 SXM2 16GB
    (
        "0x1db4",
        Model {
            family: "volta",
            major: 7,
            minor: 0,
            memory_mib: 16384,
        },
    ), // V100 PCIe 16GB
    (
        "0x1db5",
        Model {
            family: "volta",
            major: 7,
            minor: 0,
            memory_mib: 32768,
        },
    ), // V100 SXM2 32GB
];

/// The model of a PCI device id, when the table has it.
pub fn model(device_id: &str) -> Option<Model> {
    let id = device_id.to_ascii_lowercase();
    MODELS.iter().find(|(d, _)| *d == id).map(|(_, m)| *m)
}

/// Reads the driver's version file under `root`; `None` when absent.
pub fn read_driver_version(root: &Path) -> Option<String> {
    let text = std::fs::read_to_string(root.join("proc/driver/nvidia/version")).ok()?;
    driver_version(&text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_lines_as_the_driver_writes_them() {
        let x = parse_xid(
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
        )
        .unwrap();
        assert_eq!(x.bus, "0000:3b:00.0");
        assert_eq!(x.code, 79);
        assert_eq!(x.text, "pid=1234, name=python, GPU has fallen off the bus.");
        let x = parse_xid(
            "[ 12.3] NVRM: Xid (PCI:0000:17:00.0): 48, An uncorrectable double bit error",
        )
        .unwrap();
        assert_eq!((x.bus.as_str(), x.code), ("0000:17:00.0", 48));
        assert!(parse_xid("NVRM: loading NVIDIA UNIX x86_64 Kernel Module").is_none());
    }

    #[test]
    fn the_driver_version_and_its_labels() {
        let v = driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023\nGCC version: gcc 12\n").unwrap();
        assert_eq!(v, "535.129.03");
        assert_eq!(
            driver_labels(&v),
            vec![
                (
                    "nvidia.com/cuda.driver-version.full",
                    "535.129.03".to_owned()
                ),
                ("nvidia.com/cuda.driver-version.major", "535".to_owned()),
                ("nvidia.com/cuda.driver-version.minor", "129".to_owned()),
                ("nvidia.com/cuda.driver-version.revision", "03".to_owned()),
            ]
        );
    }

    #[test]
    fn models_by_device_id() {
        assert_eq!(model("0x2330").unwrap().family, "hopper");
        assert_eq!(model("0x2335").unwrap().memory_mib, 144384);
        assert_eq!(model("0x20B2").unwrap().major, 8);
        assert!(model("0x0000").is_none());
    }
}
