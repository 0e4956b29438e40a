//! The kubelet's `MachineInfo` setter:
//! - `nodeInfo.machineID`, `systemUUID` and `bootID`, and a Warning event
//!   `Rebooted` when the boot id changed;
//! - `capacity`: cpu, memory (`MemTotal`), `hugepages-<size>` for every size
//!   in `/sys/kernel/mm/hugepages` as cadvisor lists them (or, when that is
//!   not granted, the default size of `/proc/meminfo`), ephemeral-storage
//!   (the filesystem of `rootDir`, or `/`), and pods = min(cpus x
//!   podsPerCore, maxPods);
//! - `allocatable` = capacity minus `systemReserved`, `kubeReserved` and the
//!   hard eviction thresholds (`memory.available` from memory,
//!   `nodefs.available` from ephemeral-storage; a percentage is a float32, as
//!   the kubelet parses it), and minus the huge pages from memory, never
//!   below 0.
use std::collections::BTreeMap;

use nodestatus_sdk::pressure::Threshold;
use nodestatus_sdk::{EventType, Metadata, Node, Quantity, Result, Setter, host};

/// The plugin's config, with the KubeletConfiguration names.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// The kubelet's root directory; its filesystem is ephemeral-storage.
    pub root_dir: String,
    /// Pods per core; 0 means no per-core limit.
    pub pods_per_core: u32,
    /// The most pods.
    pub max_pods: u32,
    /// Resources reserved for the system (`cpu: 500m`, `memory: 1Gi`).
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes daemons.
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds (`memory.available: 100Mi`,
    /// `nodefs.available: 10%`); merged over the kubelet's defaults.
    pub eviction_hard: BTreeMap<String, String>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            root_dir: "/var/lib/kubelet".into(),
            pods_per_core: 0,
            max_pods: 110,
            system_reserved: BTreeMap::new(),
            kube_reserved: BTreeMap::new(),
            eviction_hard: BTreeMap::new(),
        }
    }
}

/// The kubelet's default hard eviction thresholds that reserve capacity.
const DEFAULT_EVICTION_HARD: &[(&str, &str)] =
    &[("memory.available", "100Mi"), ("nodefs.available", "10%")];

/// What the setter reads from the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// `/etc/machine-id`.
    pub machine_id: String,
    /// The DMI product UUID.
    pub system_uuid: String,
    /// The kernel's boot id.
    pub boot_id: String,
    /// Logical CPUs online.
    pub cpus: u32,
    /// The text of `/proc/meminfo`.
    pub meminfo: String,
    /// Total bytes of the ephemeral-storage filesystem, when it could be read.
    pub ephemeral_storage: Option<u64>,
    /// Every huge page size and its reserved page count, from
    /// `/sys/kernel/mm/hugepages`, when it could be read.
    pub hugepages: Option<Vec<(u64, u64)>>,
}

/// The directory that lists every huge page size.
pub const HUGEPAGES_DIR: &str = "/sys/kernel/mm/hugepages";

/// Reads `hugepages-<kB>kB/nr_hugepages` for every size in `dir`, as
/// cadvisor does; `None` when the directory cannot be read.
pub fn read_hugepages(dir: &std::path::Path) -> Option<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ok()? {
        let name = entry.ok()?.file_name();
        let Some(kb) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hugepages-"))
            .and_then(|n| n.strip_suffix("kB"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            continue;
        };
        let pages = std::fs::read_to_string(dir.join(&name).join("nr_hugepages"))
            .ok()?
            .trim()
            .parse()
            .ok()?;
        out.push((kb * 1024, pages));
    }
    out.sort_unstable();
    Some(out)
}

/// A huge page size in the kubelet's resource spelling (`2Mi`, `1Gi`).
pub fn hugepage_resource(size_bytes: u64) -> String {
    format!("hugepages-{}", Quantity::bytes(size_bytes))
}

/// The capacity of the machine, in the kubelet's order.
pub fn capacity(facts: &Facts, config: &Config) -> Result<Vec<(String, Quantity)>> {
    let mem = host::meminfo_field(&facts.meminfo, "MemTotal")
        .ok_or("/proc/meminfo has no MemTotal line")?;
    let mut out = vec![
        ("cpu".to_owned(), Quantity::units(facts.cpus.into())),
        ("memory".to_owned(), Quantity::bytes(mem)),
    ];
    let sizes = match &facts.hugepages {
        Some(sizes) => sizes.clone(),
        None => match (
            host::meminfo_field(&facts.meminfo, "HugePages_Total"),
            host::meminfo_field(&facts.meminfo, "Hugepagesize"),
        ) {
            (Some(pages), Some(size)) => vec![(size, pages)],
            _ => Vec::new(),
        },
    };
    for (size, pages) in sizes.into_iter().filter(|(size, _)| *size > 0) {
        out.push((
            hugepage_resource(size),
            Quantity::bytes(pages.saturating_mul(size)),
        ));
    }
    // In decimal, as allocatable is: kubelet 1.37 writes it so
    // (kubernetes#137652; 1.36 and earlier wrote it in binary units, the
    // same amount).
    if let Some(bytes) = facts.ephemeral_storage {
        let bytes = i64::try_from(bytes).unwrap_or(i64::MAX);
        out.push(("ephemeral-storage".to_owned(), Quantity::units(bytes)));
    }
    let mut pods = u64::from(config.max_pods);
    if config.pods_per_core > 0 {
        pods = pods.min(u64::from(facts.cpus) * u64::from(config.pods_per_core));
    }
    out.push(("pods".to_owned(), Quantity::units(pods as i64)));
    Ok(out)
}

/// A threshold: a quantity, or a percentage of `total` (bytes or units).
/// A percentage is parsed into a float32 and divided by 100 in float32, then
/// multiplied in float64, as the kubelet's eviction manager does: `10%` is
/// 0.100000001490116, which takes 403 bytes more of a 270 GB filesystem
/// than an exact tenth.
pub fn threshold(spec: &str, total: &Quantity) -> Result<Quantity, String> {
    if let Some(pct) = Threshold::percentage(spec) {
        let fraction = pct? as f32 / 100.0f32;
        let units = (total.as_units_ceil() as f64 * f64::from(fraction)) as u64;
        return Ok(Quantity::bytes(units));
    }
    let spec = spec.trim();
    let q = Quantity::parse(spec)?;
    if q.as_millis() < 0 {
        return Err(format!("{spec:?} is negative"));
    }
    Ok(q)
}

/// Allocatable for each capacity resource.
pub fn allocatable(
    capacity: &[(String, Quantity)],
    config: &Config,
) -> Result<Vec<(String, Quantity)>> {
    let mut reserved: BTreeMap<&str, Vec<Quantity>> = BTreeMap::new();
    for (field, map) in [
        ("systemReserved", &config.system_reserved),
        ("kubeReserved", &config.kube_reserved),
    ] {
        for (k, v) in map {
            let q = Quantity::parse(v).map_err(|e| format!("{field}.{k}: {e}"))?;
            if q.as_millis() < 0 {
                return Err(format!("{field}.{k}: {v:?} is negative").into());
            }
            reserved.entry(k.as_str()).or_default().push(q);
        }
    }
    let mut eviction: BTreeMap<&str, &str> = DEFAULT_EVICTION_HARD.iter().copied().collect();
    for (k, v) in &config.eviction_hard {
        eviction.insert(k.as_str(), v.as_str());
    }
    let cap = |name: &str| capacity.iter().find(|(k, _)| k == name).map(|(_, q)| *q);
    for (signal, resource) in [
        ("memory.available", "memory"),
        ("nodefs.available", "ephemeral-storage"),
    ] {
        if let (Some(spec), Some(total)) = (eviction.get(signal), cap(resource)) {
            let q = threshold(spec, &total).map_err(|e| format!("evictionHard.{signal}: {e}"))?;
            reserved.entry(resource).or_default().push(q);
        }
    }
    // Huge pages are taken out of memory.
    for (k, q) in capacity {
        if k.starts_with("hugepages-") {
            reserved.entry("memory").or_default().push(*q);
        }
    }
    Ok(capacity
        .iter()
        .map(|(k, q)| {
            let a = reserved
                .get(k.as_str())
                .into_iter()
                .flatten()
                .fold(*q, |acc, r| acc.saturating_sub(*r));
            (k.clone(), a)
        })
        .collect())
}

/// Applies the facts to the node. Returns the `Rebooted` event's message when
/// the boot id changed.
pub fn apply(node: &mut Node, facts: &Facts, config: &Config) -> Result<Option<String>> {
    let cap = capacity(facts, config)?;
    let alloc = allocatable(&cap, config)?;
    let rebooted = match node.node_info("bootID") {
        Some(old) if !old.is_empty() && !facts.boot_id.is_empty() && old != facts.boot_id => {
            Some(format!(
                "Node {} has been rebooted, boot id: {}",
                node.name(),
                facts.boot_id
            ))
        }
        _ => None,
    };
    node.set_node_info("machineID", &facts.machine_id);
    node.set_node_info("systemUUID", &facts.system_uuid);
    node.set_node_info("bootID", &facts.boot_id);
    for (k, q) in &cap {
        node.set_capacity(k, *q);
    }
    for (k, q) in &alloc {
        node.set_allocatable(k, *q);
    }
    Ok(rebooted)
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct MachineInfo;

impl Setter for MachineInfo {
    fn metadata() -> Metadata {
        Metadata::new("machine-info", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's MachineInfo setter: machine ids, capacity and allocatable")
            .path("/proc")
            // Every huge page size, as cadvisor lists them.
            .path(HUGEPAGES_DIR)
            // statvfs of rootDir (or `/` when that fails) for ephemeral-storage;
            // the operator may grant just the kubelet's root directory.
            .path("/")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let info = host::system_info();
        let meminfo = host::read_file("/proc/meminfo")?;
        let ephemeral_storage = match host::fs_stats(&config.root_dir) {
            Ok(s) => Some(s.total_bytes),
            Err(e) => match host::fs_stats("/") {
                Ok(s) => {
                    host::debug(&format!(
                        "rootDir {}: {e}; ephemeral-storage from /",
                        config.root_dir
                    ));
                    Some(s.total_bytes)
                }
                Err(e2) => {
                    host::warn(&format!(
                        "no ephemeral-storage: rootDir {}: {e}; /: {e2}",
                        config.root_dir
                    ));
                    None
                }
            },
        };
        let facts = Facts {
            machine_id: info.machine_id,
            system_uuid: info.system_uuid,
            boot_id: info.boot_id,
            cpus: info.cpus,
            meminfo,
            ephemeral_storage,
            hugepages: read_hugepages(std::path::Path::new(HUGEPAGES_DIR)),
        };
        if let Some(message) = apply(node, &facts, &config)? {
            host::record_event(EventType::Warning, "Rebooted", &message);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/meminfo` of the development machine: MemTotal 24684096 kB, no
    /// huge pages reserved, 2 MiB default huge pages.
    const MEMINFO: &str = include_str!("../tests/fixtures/meminfo");

    fn facts(meminfo: &str) -> Facts {
        Facts {
            machine_id: "3d1219c7c4c5404aaa1f6d2a48adfda4".into(),
            system_uuid: String::new(),
            boot_id: "b1".into(),
            cpus: 2,
            meminfo: meminfo.into(),
            ephemeral_storage: Some(270_553_174_016),
            hugepages: None,
        }
    }

    fn get(list: &[(String, Quantity)], k: &str) -> String {
        list.iter()
            .find(|(n, _)| n == k)
            .map(|(_, q)| q.to_string())
            .unwrap_or_else(|| panic!("no {k}"))
    }

    #[test]
    fn meminfo_fields_are_bytes() {
        assert_eq!(
            host::meminfo_field(MEMINFO, "MemTotal"),
            Some(24_684_096 * 1024)
        );
        assert_eq!(host::meminfo_field(MEMINFO, "HugePages_Total"), Some(0));
        assert_eq!(host::meminfo_field(MEMINFO, "Hugepagesize"), Some(2 << 20));
        assert_eq!(host::meminfo_field(MEMINFO, "Nope"), None);
    }

    #[test]
    fn capacity_and_default_allocatable() {
        let c = Config::default();
        let cap = capacity(&facts(MEMINFO), &c).unwrap();
        assert_eq!(get(&cap, "cpu"), "2");
        assert_eq!(get(&cap, "memory"), "24684096Ki");
        assert_eq!(get(&cap, "hugepages-2Mi"), "0");
        assert_eq!(get(&cap, "ephemeral-storage"), "270553174016");
        assert_eq!(get(&cap, "pods"), "110");
        let a = allocatable(&cap, &c).unwrap();
        assert_eq!(get(&a, "cpu"), "2");
        // 24684096Ki - 100Mi
        assert_eq!(get(&a, "memory"), "24581696Ki");
        // What the kubelet's nodefs.available<10% leaves: 10% as a float32
        // (0.100000001490116) of the filesystem, 403 bytes over an exact
        // tenth (27_055_317_401), as a real kubelet wrote on this machine.
        assert_eq!(
            Quantity::parse(&get(&a, "ephemeral-storage"))
                .unwrap()
                .as_units_ceil(),
            270_553_174_016 - 27_055_317_804
        );
        assert_eq!(get(&a, "pods"), "110");
    }

    #[test]
    fn reservations_hugepages_and_pods_per_core() {
        let mem = MEMINFO.replace("HugePages_Total:       0", "HugePages_Total:     512");
        let c = Config {
            pods_per_core: 10,
            system_reserved: [
                ("cpu".into(), "500m".into()),
                ("memory".into(), "1Gi".into()),
            ]
            .into(),
            kube_reserved: [
                ("cpu".into(), "2".into()),
                ("ephemeral-storage".into(), "1Ti".into()),
            ]
            .into(),
            eviction_hard: [("memory.available".into(), "200Mi".into())].into(),
            ..Config::default()
        };
        let cap = capacity(&facts(&mem), &c).unwrap();
        assert_eq!(get(&cap, "hugepages-2Mi"), "1Gi");
        assert_eq!(get(&cap, "pods"), "20");
        let a = allocatable(&cap, &c).unwrap();
        // never below 0
        assert_eq!(get(&a, "cpu"), "0");
        assert_eq!(get(&a, "ephemeral-storage"), "0");
        // 24684096Ki - 1Gi - 200Mi - 1Gi of huge pages
        assert_eq!(get(&a, "memory"), "22382144Ki");
        assert_eq!(get(&a, "hugepages-2Mi"), "1Gi");
    }

    #[test]
    fn every_huge_page_size_is_listed() {
        let dir = std::env::temp_dir().join(format!("hugepages-{}", std::process::id()));
        for (kb, n) in [(2048, "3\n"), (1_048_576, "0\n")] {
            let d = dir.join(format!("hugepages-{kb}kB"));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("nr_hugepages"), n).unwrap();
        }
        let sizes = read_hugepages(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(sizes, vec![(2 << 20, 3), (1 << 30, 0)]);
        let mut f = facts(MEMINFO);
        f.hugepages = Some(sizes);
        let cap = capacity(&f, &Config::default()).unwrap();
        assert_eq!(get(&cap, "hugepages-2Mi"), "6Mi");
        assert_eq!(get(&cap, "hugepages-1Gi"), "0");
        let a = allocatable(&cap, &Config::default()).unwrap();
        // 24684096Ki - 100Mi - 6Mi
        assert_eq!(get(&a, "memory"), "24575552Ki");
        assert!(read_hugepages(std::path::Path::new("/nonexistent")).is_none());
    }

    #[test]
    fn bad_config_is_an_error() {
        let cap = capacity(&facts(MEMINFO), &Config::default()).unwrap();
        let c = Config {
            system_reserved: [("memory".into(), "lots".into())].into(),
            ..Config::default()
        };
        assert!(allocatable(&cap, &c).is_err());
        for (signal, spec, message) in [
            (
                "memory.available",
                " 150% ",
                "evictionHard.memory.available: \"150%\" is not a percentage between 0% and 100%",
            ),
            (
                "nodefs.available",
                "-1Gi",
                "evictionHard.nodefs.available: \"-1Gi\" is negative",
            ),
        ] {
            let c = Config {
                eviction_hard: [(signal.into(), spec.into())].into(),
                ..Config::default()
            };
            assert_eq!(allocatable(&cap, &c).unwrap_err().to_string(), message);
        }
        assert!(capacity(&facts("MemFree: 1 kB\n"), &Config::default()).is_err());
    }

    #[test]
    fn sets_node_info_and_reports_a_reboot() {
        let mut node = Node::named("n1");
        assert_eq!(
            apply(&mut node, &facts(MEMINFO), &Config::default()).unwrap(),
            None
        );
        assert_eq!(node.node_info("bootID"), Some("b1"));
        assert_eq!(
            node.node_info("machineID"),
            Some("3d1219c7c4c5404aaa1f6d2a48adfda4")
        );
        assert_eq!(node.capacity("memory").unwrap().to_string(), "24684096Ki");
        // Its part: the three nodeInfo keys, capacity and allocatable.
        let part = node.part();
        let status = part["status"].as_object().unwrap();
        let keys: Vec<_> = status.keys().map(String::as_str).collect();
        assert_eq!(keys, ["capacity", "allocatable", "nodeInfo"]);
        let info: Vec<_> = status["nodeInfo"].as_object().unwrap().keys().collect();
        assert_eq!(info, ["machineID", "systemUUID", "bootID"]);
        assert_eq!(status["capacity"]["memory"], "24684096Ki");
        assert!(part.get("metadata").is_none());
        // Same boot: no event.
        assert_eq!(
            apply(&mut node, &facts(MEMINFO), &Config::default()).unwrap(),
            None
        );
        let mut f = facts(MEMINFO);
        f.boot_id = "b2".into();
        assert_eq!(
            apply(&mut node, &f, &Config::default()).unwrap().as_deref(),
            Some("Node n1 has been rebooted, boot id: b2")
        );
        assert_eq!(node.node_info("bootID"), Some("b2"));
    }
}

nodestatus_sdk::export!(MachineInfo);
