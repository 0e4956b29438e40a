//! GPU reporter: what GPUs the node has, from files the kernel and the
//! drivers publish, without NVML or any vendor library.
//!
//! It reads, on every call (so a driver loaded after the plugin started is
//! seen on the next pass, with no restart):
//! - NVIDIA: `/proc/driver/nvidia/gpus/*/information` (model, UUID, bus
//!   location, device minor; present only while the driver is loaded) and
//!   `/sys/bus/pci/devices/*/{vendor,device,class,numa_node}` (vendor
//!   `0x10de`, class `0x03xxxx`: display controllers, so the audio function
//!   of a card is not a GPU);
//! - AMD: `/sys/class/drm/card*/device/{vendor,device,mem_info_vram_total}`
//!   (vendor `0x1002`).
//!
//! A missing file or directory means "not there", never an error; other read
//! errors are logged at debug level and the entry is skipped.
//!
//! It writes:
//! - labels compatible with NVIDIA's gpu-feature-discovery:
//!   `nvidia.com/gpu.count`, `nvidia.com/gpu.product` (the model of the first
//!   GPU by bus address, spaces and any character invalid in a label value
//!   turned into `-`, at most 63 characters; only while the driver gives a
//!   model). `nvidia.com/gpu.memory` cannot be read without NVML, so it is
//!   never set while NVIDIA GPUs are present. For AMD: `amd.com/gpu.count`,
//!   `amd.com/gpu.product-id` (the PCI device id, hex without `0x`, as AMD's
//!   labeller writes it) and `amd.com/gpu.vram` (MiB, when
//!   `mem_info_vram_total` is readable). When a vendor has no GPU, its labels
//!   are removed, so a removed card leaves no stale labels;
//! - with `advertise: true`, capacity and allocatable `nvidia.com/gpu`
//!   (allocatable counts only GPUs with a driver entry) and `amd.com/gpu`. A
//!   resource that was advertised and has no device any more is set to `0`,
//!   not removed (the kubelet's rule). With `advertise: false` (the default)
//!   capacity is left to the vendor's device plugin and never touched;
//! - the condition `GPUHealthy`: `True` (`GPUsHealthy`, "N GPU(s) healthy")
//!   when every NVIDIA PCI display device has its `/proc/driver/nvidia` entry;
//!   `False` with `GPUDriverNotLoaded` when NVIDIA PCI devices exist and
//!   there are no entries at all, or `GPUDriverEntryMissing` when only some
//!   have one. With no GPU at all the condition is removed.
//!
//! Config (camelCase, every field optional):
//! - `advertise` (bool, default `false`): set the extended resources;
//! - `root` (string, default `/`): a prefix for every path it reads, for the
//!   native tests. Under the host, map directories in the grants instead
//!   (`paths: [{path: /sys, from: /host/sys}]`).
//!
//! Grants: it declares `/proc/driver/nvidia` and `/sys`. All of `/sys`,
//! read-only, because the entries of `/sys/bus/pci/devices` and
//! `/sys/class/drm` are symlinks into `/sys/devices`, and the WASI sandbox
//! does not follow a symlink out of a granted directory: with only the two
//! sysfs directories granted, every device is invisible. A granted
//! directory that does not exist yet is fine: the host preopens, at each
//! call, the granted directories that exist then, so `/proc/driver/nvidia`
//! can be granted before the driver is installed and is seen on the first
//! pass after it loads, with no restart and no reload.
use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use nodestatus_sdk::reactor::{Lines, Reactor, Stream, Subscriptions};
use nodestatus_sdk::{ConditionStatus, EventType, Metadata, Node, Quantity, Result, Setter, host};

pub mod xid;

/// The health condition's type.
pub const CONDITION: &str = "GPUHealthy";
/// The NVIDIA extended resource.
pub const NVIDIA_RESOURCE: &str = "nvidia.com/gpu";
/// The AMD extended resource.
pub const AMD_RESOURCE: &str = "amd.com/gpu";
/// Number of NVIDIA GPUs.
pub const NVIDIA_COUNT: &str = "nvidia.com/gpu.count";
/// NVIDIA model, as gpu-feature-discovery spells it.
pub const NVIDIA_PRODUCT: &str = "nvidia.com/gpu.product";
/// NVIDIA memory in MiB: the nominal memory of the first GPU's model, by
/// its PCI device id ([`xid::model`]; NVML's measured total is not
/// readable here).
pub const NVIDIA_MEMORY: &str = "nvidia.com/gpu.memory";
/// The architecture's family, as gpu-feature-discovery names it.
pub const NVIDIA_FAMILY: &str = "nvidia.com/gpu.family";
/// Compute capability, major.
pub const NVIDIA_COMPUTE_MAJOR: &str = "nvidia.com/gpu.compute.major";
/// Compute capability, minor.
pub const NVIDIA_COMPUTE_MINOR: &str = "nvidia.com/gpu.compute.minor";
/// The driver's version labels.
pub const NVIDIA_DRIVER_LABELS: [&str; 4] = [
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
];
/// Number of AMD GPUs.
pub const AMD_COUNT: &str = "amd.com/gpu.count";
/// AMD PCI device id.
pub const AMD_PRODUCT_ID: &str = "amd.com/gpu.product-id";
/// AMD VRAM in MiB.
pub const AMD_VRAM: &str = "amd.com/gpu.vram";

const NVIDIA_PROC: &str = "/proc/driver/nvidia";
const PCI_DEVICES: &str = "/sys/bus/pci/devices";
const DRM: &str = "/sys/class/drm";
const NVIDIA_VENDOR: &str = "0x10de";
const AMD_VENDOR: &str = "0x1002";

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// Set capacity and allocatable `nvidia.com/gpu` and `amd.com/gpu`.
    pub advertise: bool,
    /// Prefix of every path read.
    pub root: String,
    /// The XIDs that make `GPUHealthy` False ([`xid::DEFAULT_CRITICAL`]).
    pub xid_critical: Vec<u32>,
    /// Seconds after an XID when the condition comes back from the
    /// inventory; 0: only when the driver is loaded again.
    pub xid_clear_after: u64,
    /// How far back the kernel log is read at start, in seconds (so that a
    /// restart finds the XIDs, and the driver loads, since).
    pub xid_lookback: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            advertise: false,
            root: "/".into(),
            xid_critical: xid::DEFAULT_CRITICAL.to_vec(),
            xid_clear_after: 0,
            xid_lookback: 3600,
        }
    }
}

/// What `/proc/driver/nvidia/gpus/<bus>/information` says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvidiaInfo {
    /// `Model:`, e.g. `NVIDIA H100 80GB HBM3`.
    pub model: Option<String>,
    /// `GPU UUID:`.
    pub uuid: Option<String>,
    /// `Bus Location:`, e.g. `0000:17:00.0`.
    pub bus: Option<String>,
    /// `Device Minor:` (the N of `/dev/nvidiaN`).
    pub minor: Option<u32>,
}

/// One NVIDIA GPU, seen on the PCI bus, in `/proc/driver/nvidia`, or both.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvidiaGpu {
    /// PCI address, lowercase (`0000:17:00.0`).
    pub bus: String,
    /// Seen under `/sys/bus/pci/devices` as an NVIDIA display controller.
    pub on_pci: bool,
    /// PCI device id (`0x2330`).
    pub device_id: Option<String>,
    /// NUMA node, when the kernel knows it.
    pub numa_node: Option<u32>,
    /// The driver's entry; `None` when the driver has not bound the device.
    pub info: Option<NvidiaInfo>,
}

/// One AMD GPU from `/sys/class/drm/cardN/device`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AmdGpu {
    /// `card0`, ...
    pub card: String,
    /// PCI device id (`0x744c`).
    pub device_id: Option<String>,
    /// `mem_info_vram_total`, bytes.
    pub vram_bytes: Option<u64>,
    /// NUMA node, when the kernel knows it.
    pub numa_node: Option<u32>,
}

/// The GPUs of a machine.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// NVIDIA GPUs, by bus address.
    pub nvidia: Vec<NvidiaGpu>,
    /// AMD GPUs, by card number.
    pub amd: Vec<AmdGpu>,
    /// The NVIDIA driver's version (`/proc/driver/nvidia/version`).
    pub nvidia_driver: Option<String>,
    /// Read errors other than "not found", for the debug log.
    pub problems: Vec<String>,
}

impl Inventory {
    /// All GPUs.
    pub fn total(&self) -> usize {
        self.nvidia.len() + self.amd.len()
    }
}

/// `path` under `root` (`root` `/` leaves it as it is).
fn under(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// The trimmed text of a file; `None` when missing (silently) or unreadable
/// (noted).
fn read(path: &Path, problems: &mut Vec<String>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(s) => Some(s.trim().to_owned()),
        Err(e) if e.kind() == ErrorKind::NotFound => None,
        Err(e) => {
            problems.push(host::file_error(&path.display().to_string(), &e).to_string());
            None
        }
    }
}

/// The entries of a directory, sorted; empty when it is missing.
fn list(dir: &Path, problems: &mut Vec<String>) -> Vec<String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            if e.kind() != ErrorKind::NotFound {
                problems.push(host::file_error(&dir.display().to_string(), &e).to_string());
            }
            return Vec::new();
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// A sysfs hex id, lowercase with its `0x`.
fn hex_id(s: Option<String>) -> Option<String> {
    s.map(|s| s.to_ascii_lowercase())
        .filter(|s| s.starts_with("0x"))
}

/// A sysfs `numa_node` (`-1` means none).
fn numa(s: Option<String>) -> Option<u32> {
    s?.parse().ok()
}

/// Parses `/proc/driver/nvidia/gpus/*/information`.
pub fn parse_information(text: &str) -> NvidiaInfo {
    let mut info = NvidiaInfo::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        if value.is_empty() {
            continue;
        }
        match key.trim() {
            "Model" => info.model = Some(value.to_owned()),
            "GPU UUID" => info.uuid = Some(value.to_owned()),
            "Bus Location" => info.bus = Some(value.to_ascii_lowercase()),
            "Device Minor" => info.minor = value.parse().ok(),
            _ => {}
        }
    }
    info
}

/// Reads the GPUs under `root`. Never fails: what is missing is absent.
pub fn scan(root: &Path) -> Inventory {
    let mut problems = Vec::new();
    let mut nvidia: BTreeMap<String, NvidiaGpu> = BTreeMap::new();

    let pci = under(root, PCI_DEVICES);
    for name in list(&pci, &mut problems) {
        let dir = pci.join(&name);
        if hex_id(read(&dir.join("vendor"), &mut problems)).as_deref() != Some(NVIDIA_VENDOR) {
            continue;
        }
        let class = read(&dir.join("class"), &mut problems).unwrap_or_default();
        if !class.to_ascii_lowercase().starts_with("0x03") {
            continue;
        }
        let bus = name.to_ascii_lowercase();
        let gpu = nvidia.entry(bus.clone()).or_default();
        gpu.bus = bus;
        gpu.on_pci = true;
        gpu.device_id = hex_id(read(&dir.join("device"), &mut problems));
        gpu.numa_node = numa(read(&dir.join("numa_node"), &mut problems));
    }

    let gpus = under(root, NVIDIA_PROC).join("gpus");
    for name in list(&gpus, &mut problems) {
        let Some(text) = read(&gpus.join(&name).join("information"), &mut problems) else {
            continue;
        };
        let info = parse_information(&text);
        let bus = info
            .bus
            .clone()
            .unwrap_or_else(|| name.to_ascii_lowercase());
        let gpu = nvidia.entry(bus.clone()).or_default();
        gpu.bus = bus;
        gpu.info = Some(info);
    }

    let drm = under(root, DRM);
    let mut amd = Vec::new();
    for name in list(&drm, &mut problems) {
        let Some(n) = name.strip_prefix("card") else {
            continue;
        };
        if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
            continue; // card0-DP-1 and other connectors
        }
        let dev = drm.join(&name).join("device");
        if hex_id(read(&dev.join("vendor"), &mut problems)).as_deref() != Some(AMD_VENDOR) {
            continue;
        }
        if let Some(class) = read(&dev.join("class"), &mut problems)
            && !class.to_ascii_lowercase().starts_with("0x03")
        {
            continue;
        }
        amd.push(AmdGpu {
            device_id: hex_id(read(&dev.join("device"), &mut problems)),
            vram_bytes: read(&dev.join("mem_info_vram_total"), &mut problems)
                .and_then(|s| s.parse().ok()),
            numa_node: numa(read(&dev.join("numa_node"), &mut problems)),
            card: name,
        });
    }
    amd.sort_by_key(|g| g.card[4..].parse::<u64>().unwrap_or(u64::MAX));

    Inventory {
        nvidia: nvidia.into_values().collect(),
        amd,
        nvidia_driver: xid::read_driver_version(root),
        problems,
    }
}

/// `s` as a label value: spaces and characters a label value cannot hold
/// become `-`, at most 63 characters, starting and ending alphanumeric.
/// Empty when nothing is left.
pub fn label_value(s: &str) -> String {
    let mapped: String = s
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '-'
            }
        })
        .take(63)
        .collect();
    mapped
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// Sets a label, or removes it when there is no value.
fn set_or_remove(node: &mut Node, key: &str, value: Option<String>) {
    match value.filter(|v| !v.is_empty()) {
        Some(v) => node.set_label(key, &v),
        None => {
            node.remove_label(key);
        }
    }
}

/// Sets capacity and allocatable of `name`; with no device, to `0` if it was
/// advertised, and not at all if it never was.
fn advertise(node: &mut Node, name: &str, capacity: usize, allocatable: usize) {
    if capacity == 0 && node.capacity(name).is_none() && node.allocatable(name).is_none() {
        return;
    }
    node.set_capacity(name, Quantity::units(capacity as i64));
    node.set_allocatable(name, Quantity::units(allocatable as i64));
}

/// Writes the inventory's labels, resources and condition at `now`.
pub fn apply(node: &mut Node, inv: &Inventory, config: &Config, now: &str) {
    apply_with_xid(node, inv, config, now, None)
}

/// The labels of the first NVIDIA GPU's model and of the driver.
fn model_labels(node: &mut Node, inv: &Inventory) {
    let model = inv
        .nvidia
        .iter()
        .find_map(|g| xid::model(g.device_id.as_deref()?));
    set_or_remove(node, NVIDIA_FAMILY, model.map(|m| m.family.to_owned()));
    set_or_remove(
        node,
        NVIDIA_COMPUTE_MAJOR,
        model.map(|m| m.major.to_string()),
    );
    set_or_remove(
        node,
        NVIDIA_COMPUTE_MINOR,
        model.map(|m| m.minor.to_string()),
    );
    set_or_remove(node, NVIDIA_MEMORY, model.map(|m| m.memory_mib.to_string()));
    let driver = inv
        .nvidia_driver
        .as_deref()
        .map(xid::driver_labels)
        .unwrap_or_default();
    for key in NVIDIA_DRIVER_LABELS {
        let value = driver
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v.clone());
        set_or_remove(node, key, value);
    }
}

/// Writes the inventory as [`apply`] does; with `xid`, `GPUHealthy` is
/// False with [`xid::XID_REASON`] and that message, whatever the inventory
/// says (while any GPU is there).
pub fn apply_with_xid(
    node: &mut Node,
    inv: &Inventory,
    config: &Config,
    now: &str,
    xid: Option<String>,
) {
    let nv = &inv.nvidia;
    if nv.is_empty() {
        for key in [
            NVIDIA_COUNT,
            NVIDIA_PRODUCT,
            NVIDIA_MEMORY,
            NVIDIA_FAMILY,
            NVIDIA_COMPUTE_MAJOR,
            NVIDIA_COMPUTE_MINOR,
        ]
        .into_iter()
        .chain(NVIDIA_DRIVER_LABELS)
        {
            node.remove_label(key);
        }
    } else {
        model_labels(node, inv);
        node.set_label(NVIDIA_COUNT, &nv.len().to_string());
        let model = nv
            .iter()
            .find_map(|g| g.info.as_ref()?.model.as_deref())
            .map(label_value);
        set_or_remove(node, NVIDIA_PRODUCT, model);
    }

    let amd = &inv.amd;
    if amd.is_empty() {
        for key in [AMD_COUNT, AMD_PRODUCT_ID, AMD_VRAM] {
            node.remove_label(key);
        }
    } else {
        node.set_label(AMD_COUNT, &amd.len().to_string());
        let id = amd
            .iter()
            .find_map(|g| g.device_id.as_deref())
            .map(|id| label_value(id.trim_start_matches("0x")));
        set_or_remove(node, AMD_PRODUCT_ID, id);
        let vram = amd
            .iter()
            .find_map(|g| g.vram_bytes)
            .map(|b| (b >> 20).to_string());
        set_or_remove(node, AMD_VRAM, vram);
    }

    let with_driver = nv.iter().filter(|g| g.info.is_some()).count();
    if config.advertise {
        advertise(node, NVIDIA_RESOURCE, nv.len(), with_driver);
        advertise(node, AMD_RESOURCE, amd.len(), amd.len());
    }

    let total = inv.total();
    if total == 0 {
        node.remove_condition(CONDITION);
        return;
    }
    let missing: Vec<&str> = nv
        .iter()
        .filter(|g| g.info.is_none())
        .map(|g| g.bus.as_str())
        .collect();
    if let Some(message) = xid {
        node.set_condition_at(
            CONDITION,
            ConditionStatus::False,
            xid::XID_REASON,
            &message,
            now,
        );
        return;
    }
    let (status, reason, message) = if missing.is_empty() {
        (
            ConditionStatus::True,
            "GPUsHealthy",
            format!("{total} GPU(s) healthy"),
        )
    } else if with_driver == 0 {
        (
            ConditionStatus::False,
            "GPUDriverNotLoaded",
            format!(
                "{} NVIDIA GPU(s) on the PCI bus but no {NVIDIA_PROC} entries: the NVIDIA driver is not loaded",
                nv.len()
            ),
        )
    } else {
        (
            ConditionStatus::False,
            "GPUDriverEntryMissing",
            format!(
                "{} of {} NVIDIA GPU(s) have no {NVIDIA_PROC} entry: {}",
                missing.len(),
                nv.len(),
                missing.join(", ")
            ),
        )
    };
    node.set_condition_at(CONDITION, status, reason, &message, now);
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct Gpu;

impl Setter for Gpu {
    fn metadata() -> Metadata {
        Metadata::new("gpu", env!("CARGO_PKG_VERSION"))
            .description("GPU labels (gpu-feature-discovery names), optional nvidia.com/gpu and amd.com/gpu resources, and a GPUHealthy condition")
            .path(NVIDIA_PROC)
            .path("/sys")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let inv = scan(Path::new(&config.root));
        for p in &inv.problems {
            host::debug(p);
        }
        host::debug(&format!(
            "{} NVIDIA GPU(s) ({} with a driver entry), {} AMD GPU(s)",
            inv.nvidia.len(),
            inv.nvidia.iter().filter(|g| g.info.is_some()).count(),
            inv.amd.len()
        ));
        let now = nodestatus_sdk::time::now();
        let held = held_xid(node, &config, now_s());
        apply_with_xid(node, &inv, &config, &now, held);
        Ok(())
    }
}

fn now_s() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The message of the XID that holds `GPUHealthy` False, unless
/// `xidClearAfter` has passed since (`now_s`, seconds since the epoch).
pub fn held_xid(node: &Node, config: &Config, now_s: u64) -> Option<String> {
    let c = node.condition(CONDITION)?;
    if c.status != "False" || c.reason.as_deref() != Some(xid::XID_REASON) {
        return None;
    }
    if config.xid_clear_after > 0 {
        let since = c.last_transition_time.as_deref().and_then(epoch_seconds)?;
        if now_s.saturating_sub(since) >= config.xid_clear_after {
            return None;
        }
    }
    Some(c.message.unwrap_or_default())
}

/// Seconds since the epoch of a `metav1.Time` in UTC.
fn epoch_seconds(t: &str) -> Option<u64> {
    nodestatus_sdk::time::unix_seconds(t).and_then(|s| u64::try_from(s).ok())
}

/// Applies XID and driver-load lines in order over the XID `held` before
/// them: each XID records [`xid::XID_EVENT`]; a critical one holds the
/// condition; the driver's load lets it go ([`xid::RELOAD_EVENT`]).
pub fn react(lines: &Lines, config: &Config, mut held: Option<String>) -> Option<String> {
    for m in &lines.matches {
        match m.pattern {
            0 => {
                let Some(x) = xid::parse_xid(&m.text) else {
                    continue;
                };
                let critical = config.xid_critical.contains(&x.code);
                host::record_event(
                    EventType::Warning,
                    xid::XID_EVENT,
                    &format!(
                        "{}{}",
                        xid::message(&x),
                        if critical {
                            " (needs action: GPUHealthy is False)"
                        } else {
                            ""
                        }
                    ),
                );
                if critical {
                    held = Some(xid::message(&x));
                }
            }
            _ => {
                if let Some(was) = held.take() {
                    host::record_event(
                        EventType::Normal,
                        xid::RELOAD_EVENT,
                        &format!(
                            "the NVIDIA driver was loaded again; GPUHealthy follows the GPUs again (was: {was})"
                        ),
                    );
                }
            }
        }
    }
    held
}

impl Reactor for Gpu {
    fn subscribe() -> Subscriptions {
        let config: Config = host::config().unwrap_or_default();
        Subscriptions::new().stream(
            Stream::kmsg("kernel")
                .pattern(xid::XID_PATTERN)
                .pattern(xid::LOAD_PATTERN)
                .lookback(config.xid_lookback),
        )
    }

    fn on_lines(node: &mut Node, lines: &Lines) -> Result<()> {
        let config: Config = host::config()?;
        let inv = scan(Path::new(&config.root));
        let held = react(lines, &config, held_xid(node, &config, now_s()));
        apply_with_xid(node, &inv, &config, &nodestatus_sdk::time::now(), held);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const T0: &str = "2026-01-01T00:00:00Z";
    const T1: &str = "2026-01-01T00:00:10Z";

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name)
    }

    /// A directory under the system temp dir, removed on drop.
    struct TempTree(PathBuf);

    impl TempTree {
        fn new(tag: &str) -> Self {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "gpu-plugin-test-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Self(p)
        }
    }

    impl Drop for TempTree {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let dest = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(&e.path(), &dest);
            } else {
                std::fs::copy(e.path(), dest).unwrap();
            }
        }
    }

    fn advertise() -> Config {
        Config {
            advertise: true,
            ..Config::default()
        }
    }

    #[test]
    fn parses_proc_information() {
        let text = std::fs::read_to_string(
            fixture("nvidia-2gpu").join("proc/driver/nvidia/gpus/0000:17:00.0/information"),
        )
        .unwrap();
        assert_eq!(
            parse_information(&text),
            NvidiaInfo {
                model: Some("NVIDIA H100 80GB HBM3".into()),
                uuid: Some("GPU-9f3c2a1e-5b7d-4c8e-a1f2-3b4c5d6e7f80".into()),
                bus: Some("0000:17:00.0".into()),
                minor: Some(0),
            }
        );
        assert_eq!(
            parse_information("garbage\n\nModel:\n"),
            NvidiaInfo::default()
        );
    }

    #[test]
    fn label_values_are_valid() {
        assert_eq!(
            label_value("NVIDIA H100 80GB HBM3"),
            "NVIDIA-H100-80GB-HBM3"
        );
        assert_eq!(
            label_value("NVIDIA A100-SXM4-40GB"),
            "NVIDIA-A100-SXM4-40GB"
        );
        assert_eq!(
            label_value(" Tesla V100 (PCIe/32GB) "),
            "Tesla-V100--PCIe-32GB"
        );
        assert_eq!(label_value("GeForce RTX™ 4090"), "GeForce-RTX--4090");
        let long = "X".repeat(70);
        assert_eq!(label_value(&long).len(), 63);
        // truncation must not leave a trailing '-'
        let v = label_value(&format!("{} tail", "Y".repeat(62)));
        assert_eq!(v, "Y".repeat(62));
        assert_eq!(label_value("(!)"), "");
    }

    #[test]
    fn scans_an_nvidia_node() {
        let inv = scan(&fixture("nvidia-2gpu"));
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        assert!(inv.amd.is_empty());
        // the host bridge and the card's audio function (class 0x0403) are not GPUs
        let buses: Vec<_> = inv.nvidia.iter().map(|g| g.bus.as_str()).collect();
        assert_eq!(buses, ["0000:17:00.0", "0000:65:00.0"]);
        let g = &inv.nvidia[1];
        assert!(g.on_pci);
        assert_eq!(g.device_id.as_deref(), Some("0x2330"));
        assert_eq!(g.numa_node, Some(1));
        let info = g.info.as_ref().unwrap();
        assert_eq!(info.minor, Some(1));
        assert_eq!(
            info.uuid.as_deref(),
            Some("GPU-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d")
        );
    }

    #[test]
    fn nvidia_node_with_two_gpus() {
        let inv = scan(&fixture("nvidia-2gpu"));
        let mut node = Node::named("n1");
        apply(&mut node, &inv, &Config::default(), T0);
        assert_eq!(node.label(NVIDIA_COUNT), Some("2"));
        assert_eq!(node.label(NVIDIA_PRODUCT), Some("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(
            node.label(NVIDIA_MEMORY),
            Some("81920"),
            "H100 80GB, nominal"
        );
        assert_eq!(node.label(NVIDIA_FAMILY), Some("hopper"));
        assert_eq!(node.label(NVIDIA_COMPUTE_MAJOR), Some("9"));
        assert_eq!(
            node.label("nvidia.com/cuda.driver-version.full"),
            Some("535.129.03")
        );
        assert_eq!(node.label(AMD_COUNT), None);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("GPUsHealthy"));
        assert_eq!(c.message.as_deref(), Some("2 GPU(s) healthy"));
        // not advertised by default
        assert!(node.capacity(NVIDIA_RESOURCE).is_none());
        assert!(node.allocatable(NVIDIA_RESOURCE).is_none());
    }

    #[test]
    fn driver_not_loaded_then_loaded_without_restart() {
        let tmp = TempTree::new("driver");
        copy_tree(&fixture("nvidia-nodriver"), &tmp.0);
        let mut node = Node::named("n1");

        let inv = scan(&tmp.0);
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        apply(&mut node, &inv, &advertise(), T0);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("GPUDriverNotLoaded"));
        assert!(c.message.unwrap().contains("2 NVIDIA GPU(s)"));
        assert_eq!(node.label(NVIDIA_COUNT), Some("2"));
        assert_eq!(node.label(NVIDIA_PRODUCT), None);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "2");
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "0");

        // The driver loads: its /proc tree appears. Same node, next pass.
        copy_tree(&fixture("nvidia-2gpu").join("proc"), &tmp.0.join("proc"));
        let inv = scan(&tmp.0);
        apply(&mut node, &inv, &advertise(), T1);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "True");
        assert_eq!(c.reason.as_deref(), Some("GPUsHealthy"));
        assert_eq!(c.message.as_deref(), Some("2 GPU(s) healthy"));
        assert_eq!(c.last_transition_time.as_deref(), Some(T1));
        assert_eq!(node.label(NVIDIA_PRODUCT), Some("NVIDIA-H100-80GB-HBM3"));
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "2");
    }

    #[test]
    fn one_gpu_without_its_driver_entry() {
        let tmp = TempTree::new("partial");
        copy_tree(&fixture("nvidia-2gpu"), &tmp.0);
        std::fs::remove_dir_all(tmp.0.join("proc/driver/nvidia/gpus/0000:65:00.0")).unwrap();
        let mut node = Node::named("n1");
        apply(&mut node, &scan(&tmp.0), &advertise(), T0);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("GPUDriverEntryMissing"));
        assert!(c.message.unwrap().contains("1 of 2 NVIDIA GPU(s)"));
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "2");
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "1");
    }

    #[test]
    fn amd_card() {
        let inv = scan(&fixture("amd"));
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        assert!(inv.nvidia.is_empty());
        assert_eq!(
            inv.amd,
            [AmdGpu {
                card: "card0".into(),
                device_id: Some("0x744c".into()),
                vram_bytes: Some(17_163_091_968),
                numa_node: None,
            }]
        );
        let mut node = Node::named("n1");
        apply(&mut node, &inv, &advertise(), T0);
        assert_eq!(node.label(AMD_COUNT), Some("1"));
        assert_eq!(node.label(AMD_PRODUCT_ID), Some("744c"));
        // 17163091968 / 2^20 = 16368 MiB
        assert_eq!(node.label(AMD_VRAM), Some("16368"));
        assert_eq!(node.label(NVIDIA_COUNT), None);
        assert_eq!(node.capacity(AMD_RESOURCE).unwrap().to_string(), "1");
        assert_eq!(node.allocatable(AMD_RESOURCE).unwrap().to_string(), "1");
        assert!(node.capacity(NVIDIA_RESOURCE).is_none());
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "True");
        assert_eq!(c.message.as_deref(), Some("1 GPU(s) healthy"));
    }

    #[test]
    fn no_gpu_removes_labels_and_condition() {
        let mut node = Node::named("n1");
        let mut all = scan(&fixture("nvidia-2gpu"));
        all.amd = scan(&fixture("amd")).amd;
        apply(&mut node, &all, &Config::default(), T0);
        node.set_label(NVIDIA_MEMORY, "81559");
        node.set_label("other.example.com/keep", "yes");
        // The node as the host hands it over next pass: nothing written yet.
        let mut node = Node::parse(&node.to_json()).unwrap();
        for key in [
            NVIDIA_COUNT,
            NVIDIA_PRODUCT,
            AMD_COUNT,
            AMD_PRODUCT_ID,
            AMD_VRAM,
        ] {
            assert!(node.label(key).is_some(), "{key}");
        }
        assert_eq!(
            node.condition(CONDITION).unwrap().message.as_deref(),
            Some("3 GPU(s) healthy")
        );

        let inv = scan(&fixture("none"));
        assert_eq!(inv.total(), 0);
        assert!(inv.problems.is_empty(), "{:?}", inv.problems);
        apply(&mut node, &inv, &Config::default(), T1);
        for key in [
            NVIDIA_COUNT,
            NVIDIA_PRODUCT,
            NVIDIA_MEMORY,
            NVIDIA_FAMILY,
            AMD_COUNT,
            AMD_PRODUCT_ID,
            AMD_VRAM,
        ]
        .into_iter()
        .chain(NVIDIA_DRIVER_LABELS)
        {
            assert_eq!(node.label(key), None, "{key}");
        }
        assert_eq!(node.label("other.example.com/keep"), Some("yes"));
        assert!(node.condition(CONDITION).is_none());
        let part = node.part();
        let labels = part["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels.len(), 13);
        assert!(labels.values().all(serde_json::Value::is_null));
        assert_eq!(
            part["status"],
            serde_json::json!({"conditions": [{"type": CONDITION, "$patch": "delete"}]})
        );
    }

    #[test]
    fn missing_directories_are_not_errors() {
        let inv = scan(Path::new("/nonexistent/gpu-plugin-root"));
        assert_eq!(inv, Inventory::default());
        let tmp = TempTree::new("empty");
        assert_eq!(scan(&tmp.0), Inventory::default());
        // A fresh node with no GPU is left as it was; the part only removes
        // (the labels, the condition), and adds no resource.
        let mut node = Node::named("n1");
        let before = node.to_json();
        apply(&mut node, &inv, &advertise(), T0);
        assert_eq!(node.to_json(), before);
        let part = node.part();
        assert!(part["status"].get("capacity").is_none());
        assert!(
            part["metadata"]["labels"]
                .as_object()
                .unwrap()
                .values()
                .all(serde_json::Value::is_null)
        );
    }

    #[test]
    fn advertise_false_leaves_resources_alone() {
        let mut node = Node::named("n1");
        // a device plugin's own advertisement
        node.set_capacity(NVIDIA_RESOURCE, Quantity::units(8));
        node.set_allocatable(NVIDIA_RESOURCE, Quantity::units(8));
        let mut node = Node::parse(&node.to_json()).unwrap();
        apply(
            &mut node,
            &scan(&fixture("nvidia-2gpu")),
            &Config::default(),
            T0,
        );
        apply(&mut node, &scan(&fixture("amd")), &Config::default(), T0);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "8");
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "8");
        assert!(node.capacity(AMD_RESOURCE).is_none());
        apply(&mut node, &scan(&fixture("none")), &Config::default(), T0);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "8");
        let part = node.part();
        assert!(part["status"].get("capacity").is_none(), "{part}");
        assert!(part["status"].get("allocatable").is_none(), "{part}");
    }

    #[test]
    fn advertise_true_sets_capacity_and_allocatable() {
        let mut node = Node::named("n1");
        apply(&mut node, &scan(&fixture("nvidia-2gpu")), &advertise(), T0);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "2");
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "2");
        // no AMD device and never advertised: not added
        assert!(node.capacity(AMD_RESOURCE).is_none());
        assert!(node.allocatable(AMD_RESOURCE).is_none());
    }

    #[test]
    fn a_vanished_resource_is_zero_not_removed() {
        let mut node = Node::named("n1");
        apply(&mut node, &scan(&fixture("nvidia-2gpu")), &advertise(), T0);
        apply(&mut node, &scan(&fixture("none")), &advertise(), T1);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "0");
        assert_eq!(node.allocatable(NVIDIA_RESOURCE).unwrap().to_string(), "0");
        let part = node.part();
        assert_eq!(part["status"]["capacity"][NVIDIA_RESOURCE], "0");
        assert!(part["status"]["capacity"].get(AMD_RESOURCE).is_none());
        // and it comes back when the card does
        apply(&mut node, &scan(&fixture("nvidia-2gpu")), &advertise(), T1);
        assert_eq!(node.capacity(NVIDIA_RESOURCE).unwrap().to_string(), "2");
    }

    #[test]
    fn config_defaults_and_camel_case() {
        let c: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(c, Config::default());
        assert!(!c.advertise);
        assert_eq!(c.root, "/");
        let c: Config = serde_json::from_str(
            r#"{"advertise": true, "root": "/host", "xidCritical": [79], "xidClearAfter": 600, "xidLookback": 0}"#,
        )
        .unwrap();
        assert_eq!(
            c,
            Config {
                advertise: true,
                root: "/host".into(),
                xid_critical: vec![79],
                xid_clear_after: 600,
                xid_lookback: 0,
            }
        );
        assert_eq!(under(Path::new("/"), PCI_DEVICES), Path::new(PCI_DEVICES));
        assert_eq!(
            under(Path::new("/host"), PCI_DEVICES),
            Path::new("/host/sys/bus/pci/devices")
        );
    }

    #[test]
    fn setter_end_to_end_with_config() {
        let root = fixture("nvidia-2gpu");
        host::set_native_config(&serde_json::json!({"advertise": true, "root": root}).to_string());
        let input = Node::named("n1").to_json();
        let out = nodestatus_sdk::run::<Gpu>(&input).unwrap().expect("a part");
        let part: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(part["metadata"]["labels"][NVIDIA_COUNT], "2");
        assert_eq!(
            part["status"]["capacity"],
            serde_json::json!({NVIDIA_RESOURCE: "2"})
        );
        let conditions = part["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["type"], CONDITION);
        assert_eq!(conditions[0]["status"], "True");
        host::set_native_config(r#"{"advertise": "yes"}"#);
        assert!(nodestatus_sdk::run::<Gpu>(&input).is_err());
    }

    #[test]
    fn a_critical_xid_holds_the_condition_until_the_driver_is_loaded_again() {
        let inv = scan(&fixture("nvidia-2gpu"));
        let config = Config::default();
        let _ = host::take_native_events();
        let xid79 = "NVRM: Xid (PCI:0000:17:00): 79, pid=1, GPU has fallen off the bus.";
        let held = react(&Lines::of("kernel", 0, &[xid79]), &config, None);
        let mut node = Node::named("n1");
        apply_with_xid(&mut node, &inv, &config, T0, held);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("False", Some(xid::XID_REASON))
        );
        assert_eq!(
            c.message.as_deref(),
            Some("XID 79 on GPU 0000:17:00.0: pid=1, GPU has fallen off the bus.")
        );
        let events = host::take_native_events();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].1, xid::XID_EVENT);
        // The next pass keeps it: the node holds the XID.
        let node = Node::parse(&node.to_json()).unwrap();
        assert!(held_xid(&node, &config, 0).is_some());
        // An application XID (13) records an event and changes nothing.
        let held = react(
            &Lines::of(
                "kernel",
                0,
                &["NVRM: Xid (PCI:0000:17:00): 13, Graphics Exception"],
            ),
            &config,
            held_xid(&node, &config, 0),
        );
        assert!(held.is_some());
        assert_eq!(host::take_native_events().len(), 1);
        // The driver's load lets it go.
        let held = react(
            &Lines::of(
                "kernel",
                1,
                &["NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03"],
            ),
            &config,
            held,
        );
        assert_eq!(held, None);
        let mut node = node;
        apply_with_xid(&mut node, &inv, &config, T1, held);
        assert_eq!(node.condition(CONDITION).unwrap().status, "True");
        assert_eq!(host::take_native_events()[0].1, xid::RELOAD_EVENT);
    }

    #[test]
    fn xid_clear_after_lets_an_old_xid_go() {
        let config = Config {
            xid_clear_after: 3600,
            ..Config::default()
        };
        let mut node = Node::named("n1");
        node.set_condition_at(
            CONDITION,
            ConditionStatus::False,
            xid::XID_REASON,
            "XID 48",
            T0,
        );
        let node = Node::parse(&node.to_json()).unwrap();
        let t0 = epoch_seconds(T0).unwrap();
        assert!(held_xid(&node, &config, t0 + 10).is_some());
        assert!(held_xid(&node, &config, t0 + 3600).is_none());
        assert!(
            held_xid(&node, &Config::default(), t0 + 10 * 3600).is_some(),
            "0: never by age"
        );
    }

    #[test]
    fn metadata_declares_the_paths() {
        let m = Gpu::metadata();
        assert_eq!(m.name, "gpu");
        assert_eq!(m.paths, ["/proc/driver/nvidia", "/sys"]);
    }
}

nodestatus_sdk::export_reactor!(Gpu);
