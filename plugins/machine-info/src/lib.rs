//! The kubelet's `MachineInfo` setter:
//! - `nodeInfo.machineID`, `systemUUID` and `bootID`, and a Warning event
//!   `Rebooted` when the boot id changed;
//! - `capacity`: cpu, memory (`MemTotal`), `hugepages-<size>` (the default
//!   huge page size of `/proc/meminfo`), ephemeral-storage (the filesystem of
//!   `rootDir`, or `/`), and pods = min(cpus x podsPerCore, maxPods);
//! - `allocatable` = capacity minus `systemReserved`, `kubeReserved` and the
//!   hard eviction thresholds (`memory.available` from memory,
//!   `nodefs.available` from ephemeral-storage), and minus the huge pages from
//!   memory, never below 0.
use std::collections::BTreeMap;

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
}

/// A field of `/proc/meminfo` in bytes (`kB` fields) or as a count.
pub fn meminfo_field(meminfo: &str, key: &str) -> Option<u64> {
    meminfo.lines().find_map(|l| {
        let (k, rest) = l.split_once(':')?;
        if k.trim() != key {
            return None;
        }
        let mut parts = rest.split_whitespace();
        let n: u64 = parts.next()?.parse().ok()?;
        match parts.next() {
            Some("kB") => n.checked_mul(1024),
            None => Some(n),
            Some(_) => None,
        }
    })
}

/// A huge page size in the kubelet's resource spelling (`2Mi`, `1Gi`).
pub fn hugepage_resource(size_bytes: u64) -> String {
    format!("hugepages-{}", Quantity::bytes(size_bytes))
}

/// The capacity of the machine, in the kubelet's order.
pub fn capacity(facts: &Facts, config: &Config) -> Result<Vec<(String, Quantity)>> {
    let mem =
        meminfo_field(&facts.meminfo, "MemTotal").ok_or("/proc/meminfo has no MemTotal line")?;
    let mut out = vec![
        ("cpu".to_owned(), Quantity::units(facts.cpus.into())),
        ("memory".to_owned(), Quantity::bytes(mem)),
    ];
    if let (Some(pages), Some(size)) = (
        meminfo_field(&facts.meminfo, "HugePages_Total"),
        meminfo_field(&facts.meminfo, "Hugepagesize"),
    ) && size > 0
    {
        out.push((
            hugepage_resource(size),
            Quantity::bytes(pages.saturating_mul(size)),
        ));
    }
    if let Some(bytes) = facts.ephemeral_storage {
        out.push(("ephemeral-storage".to_owned(), Quantity::bytes(bytes)));
    }
    let mut pods = u64::from(config.max_pods);
    if config.pods_per_core > 0 {
        pods = pods.min(u64::from(facts.cpus) * u64::from(config.pods_per_core));
    }
    out.push(("pods".to_owned(), Quantity::units(pods as i64)));
    Ok(out)
}

/// A threshold: a quantity, or a percentage of `total` (bytes or units).
pub fn threshold(spec: &str, total: &Quantity) -> Result<Quantity, String> {
    let spec = spec.trim();
    if let Some(p) = spec.strip_suffix('%') {
        let pct: f64 = p
            .trim()
            .parse()
            .ok()
            .filter(|v: &f64| (0.0..=100.0).contains(v))
            .ok_or_else(|| format!("{spec:?} is not a percentage between 0% and 100%"))?;
        let units = (total.as_millis() as f64 / 1000.0 * pct / 100.0) as u64;
        return Ok(Quantity::bytes(units));
    }
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

pub struct MachineInfo;

impl Setter for MachineInfo {
    fn metadata() -> Metadata {
        Metadata::new("machine-info", env!("CARGO_PKG_VERSION"))
            .description("the kubelet's MachineInfo setter: machine ids, capacity and allocatable")
            .path("/proc")
            // statvfs of rootDir (or `/` when that fails) for ephemeral-storage;
            // the operator may grant just the kubelet's root directory.
            .path("/")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let info = host::system_info();
        let meminfo = std::fs::read_to_string("/proc/meminfo")
            .map_err(|e| format!("cannot read /proc/meminfo: {e}"))?;
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
        assert_eq!(meminfo_field(MEMINFO, "MemTotal"), Some(24_684_096 * 1024));
        assert_eq!(meminfo_field(MEMINFO, "HugePages_Total"), Some(0));
        assert_eq!(meminfo_field(MEMINFO, "Hugepagesize"), Some(2 << 20));
        assert_eq!(meminfo_field(MEMINFO, "Nope"), None);
    }

    #[test]
    fn capacity_and_default_allocatable() {
        let c = Config::default();
        let cap = capacity(&facts(MEMINFO), &c).unwrap();
        assert_eq!(get(&cap, "cpu"), "2");
        assert_eq!(get(&cap, "memory"), "24684096Ki");
        assert_eq!(get(&cap, "hugepages-2Mi"), "0");
        assert_eq!(get(&cap, "ephemeral-storage"), "264212084Ki");
        assert_eq!(get(&cap, "pods"), "110");
        let a = allocatable(&cap, &c).unwrap();
        assert_eq!(get(&a, "cpu"), "2");
        // 24684096Ki - 100Mi
        assert_eq!(get(&a, "memory"), "24581696Ki");
        // 90% of the filesystem, as the kubelet's nodefs.available<10% leaves.
        assert_eq!(
            Quantity::parse(&get(&a, "ephemeral-storage"))
                .unwrap()
                .as_units_ceil(),
            270_553_174_016 - 27_055_317_401
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
    fn bad_config_is_an_error() {
        let cap = capacity(&facts(MEMINFO), &Config::default()).unwrap();
        let c = Config {
            system_reserved: [("memory".into(), "lots".into())].into(),
            ..Config::default()
        };
        assert!(allocatable(&cap, &c).is_err());
        let c = Config {
            eviction_hard: [("memory.available".into(), "150%".into())].into(),
            ..Config::default()
        };
        assert!(allocatable(&cap, &c).is_err());
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
