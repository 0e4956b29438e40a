//! A vendor disk reporter. For each mount in its config it publishes the
//! filesystem's capacity and usage, reports the `ReadonlyFilesystem`
//! condition (as node-problem-detector names it) for mounts that should be
//! writable but are read-only, and can advertise an extended resource that
//! counts the healthy mounts.
//!
//! What it writes:
//! - `metadata.annotations["disk.nodestatus.io/<name>"]` for each configured
//!   mount: compact JSON
//!   `{"path","totalBytes","availableBytes","usedPercent","inodesFree","readOnly"}`,
//!   or `{"path","error"}` when the mount's statistics cannot be read (the
//!   setter does not fail). `usedPercent` is `df`'s `Use%`: used bytes over
//!   used plus available, rounded up. Annotations under
//!   `disk.nodestatus.io/` for mounts no longer configured are removed.
//!   (Exactly `nodestatus.io/` is the host's own; this subdomain is not.)
//! - the `ReadonlyFilesystem` condition: `True`, reason
//!   `FilesystemIsReadOnly`, when a mount configured `writable` (the default)
//!   is read-only, with a message naming those mounts; otherwise `False`,
//!   reason `FilesystemIsNotReadOnly`. A flip of an existing condition to
//!   `True` records a Warning event `FilesystemIsReadOnly`. A mount that
//!   cannot be read does not make the condition `True`; its annotation says
//!   why.
//! - with `extendedResource` set, `status.capacity` and `status.allocatable`
//!   of that resource: the number of its listed mounts that are present,
//!   configured writable and not read-only. A mount that disappears lowers
//!   the count, down to `0`; the resource is never removed (the kubelet's
//!   rule for device resources, so that pods bound to it are not orphaned).
//!
//! It never writes `DiskPressure`: the kubelet (or the `disk-pressure`
//! plugin) owns it.
//!
//! Grants: `fs-stats` only answers for paths inside a directory granted to
//! the plugin, and the host grants the intersection of what the metadata
//! asks for and what the operator grants. The metadata asks for `/`; when
//! the operator grants narrower directories inside it (the plugin's `paths`
//! in the host config), the host grants just those. So grant exactly each
//! mount's path, for example `paths: [/var/lib/kubelet, /mnt/local-ssd]`;
//! a mount whose path is not granted gets an error annotation.
//!
//! Config (all optional):
//!
//! ```yaml
//! mounts:
//!   - path: /var/lib/kubelet      # absolute
//!     name: kubelet               # DNS label; default derived from the path
//!     writable: true              # default true
//!   - path: /mnt/local-ssd        # name: mnt-local-ssd
//! extendedResource:
//!   name: example.com/local-disk
//!   mounts: [mnt-local-ssd]
//! ```
use std::collections::{BTreeMap, BTreeSet};

use nodestatus_sdk::host::FsStats;
use nodestatus_sdk::reactor::{Lines, Reactor, Stream, Subscriptions};
use nodestatus_sdk::{ConditionStatus, EventType, Metadata, Node, Quantity, Result, Setter, host};

pub mod io_errors;

/// The condition type, as node-problem-detector names it.
pub const CONDITION: &str = "ReadonlyFilesystem";
/// The condition's reason (and the event's) when a mount is read-only.
pub const READ_ONLY_REASON: &str = "FilesystemIsReadOnly";
/// The condition's reason otherwise.
pub const NOT_READ_ONLY_REASON: &str = "FilesystemIsNotReadOnly";
/// The condition's message otherwise (node-problem-detector's).
pub const NOT_READ_ONLY_MESSAGE: &str = "Filesystem is not read-only";
/// The annotation prefix; the mount's name follows.
pub const ANNOTATION_PREFIX: &str = "disk.nodestatus.io/";

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct Config {
    /// The mounts to report.
    pub mounts: Vec<Mount>,
    /// An extended resource counting healthy mounts.
    pub extended_resource: Option<ExtendedResource>,
    /// I/O errors from the kernel log, per device ([`io_errors`]).
    pub io_errors: io_errors::IoErrors,
}

/// One mount to report.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Mount {
    /// An absolute path on the filesystem.
    pub path: String,
    /// Short id (a DNS label); see [`Mount::name`].
    #[serde(default)]
    pub name: Option<String>,
    /// Whether it should be writable.
    #[serde(default = "yes")]
    pub writable: bool,
}

fn yes() -> bool {
    true
}

impl Mount {
    /// A writable mount at `path`, with the derived name.
    pub fn new(path: &str) -> Self {
        Self {
            path: path.to_owned(),
            name: None,
            writable: true,
        }
    }

    /// The configured name, or one derived from the path: `/` is `root`,
    /// `/var/lib/kubelet` is `var-lib-kubelet`.
    pub fn name(&self) -> String {
        self.name.clone().unwrap_or_else(|| derive_name(&self.path))
    }
}

/// An extended resource whose quantity is the number of healthy mounts.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExtendedResource {
    /// The resource name, domain-qualified (`example.com/local-disk`).
    pub name: String,
    /// The names of the mounts it counts.
    pub mounts: Vec<String>,
}

/// A name from a path: lowercase, runs of other characters as one `-`, at
/// most 63 characters; `root` for `/`.
pub fn derive_name(path: &str) -> String {
    let mut out = String::new();
    for c in path.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    out.truncate(63);
    let out = out.trim_end_matches('-');
    if out.is_empty() {
        "root".to_owned()
    } else {
        out.to_owned()
    }
}

fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

fn is_extended_resource_name(s: &str) -> bool {
    let Some((domain, name)) = s.split_once('/') else {
        return false;
    };
    let domain_ok = domain.len() <= 253 && domain.split('.').all(is_dns_label);
    let kubernetes = |d: &str| domain == d || domain.ends_with(&format!(".{d}"));
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    domain_ok && name_ok && !kubernetes("kubernetes.io") && !kubernetes("k8s.io")
}

impl Config {
    /// The mounts with their names, checked: absolute paths, valid unique
    /// names, and an extended resource that names configured mounts.
    pub fn resolved(&self) -> Result<Vec<(String, &Mount)>> {
        let mut names = BTreeSet::new();
        let mut out = Vec::new();
        for (i, m) in self.mounts.iter().enumerate() {
            if !m.path.starts_with('/') {
                return Err(format!("mounts[{i}].path {:?} is not absolute", m.path).into());
            }
            let name = m.name();
            if !is_dns_label(&name) {
                return Err(format!(
                    "mounts[{i}].name {name:?} is not a DNS label (1 to 63 of a-z, 0-9 and -)"
                )
                .into());
            }
            if !names.insert(name.clone()) {
                return Err(format!("mounts[{i}]: the name {name:?} is used twice").into());
            }
            out.push((name, m));
        }
        if let Some(r) = &self.extended_resource {
            if !is_extended_resource_name(&r.name) {
                return Err(format!(
                    "extendedResource.name {:?} is not a domain-qualified name outside kubernetes.io (for example example.com/local-disk)",
                    r.name
                )
                .into());
            }
            if let Some(n) = r.mounts.iter().find(|n| !names.contains(*n)) {
                return Err(format!(
                    "extendedResource.mounts: {n:?} is not the name of a configured mount"
                )
                .into());
            }
        }
        Ok(out)
    }
}

/// What the plugin sets on the node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// `(key, compact JSON)` for each mount, in config order.
    pub annotations: Vec<(String, String)>,
    /// The `ReadonlyFilesystem` status.
    pub status: ConditionStatus,
    /// Its reason.
    pub reason: &'static str,
    /// Its message.
    pub message: String,
    /// The extended resource and its count, when configured.
    pub resource: Option<(String, i64)>,
}

#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Usage<'a> {
    path: &'a str,
    total_bytes: u64,
    available_bytes: u64,
    used_percent: u64,
    inodes_free: u64,
    read_only: bool,
}

#[derive(serde::Serialize)]
struct Failure<'a> {
    path: &'a str,
    error: &'a str,
}

/// `df`'s `Use%`: used over used plus available, rounded up; 0 when empty.
pub fn used_percent(s: &FsStats) -> u64 {
    let used = u128::from(s.total_bytes.saturating_sub(s.free_bytes));
    let denom = used + u128::from(s.available_bytes);
    if denom == 0 {
        return 0;
    }
    (used * 100).div_ceil(denom) as u64
}

/// The report for these statistics, keyed by mount path (a path missing
/// from the map counts as unreadable).
pub fn evaluate(
    stats: &BTreeMap<String, std::result::Result<FsStats, String>>,
    config: &Config,
) -> Result<Report> {
    let mounts = config.resolved()?;
    let missing = "no statistics were gathered".to_owned();
    let mut annotations = Vec::new();
    let mut read_only = Vec::new();
    let mut healthy = BTreeSet::new();
    for (name, m) in &mounts {
        let value = match stats.get(&m.path).unwrap_or(&Err(missing.clone())) {
            Ok(s) => {
                if m.writable && s.read_only {
                    read_only.push(format!("{name} at {}", m.path));
                }
                if m.writable && !s.read_only {
                    healthy.insert(name.as_str());
                }
                serde_json::to_string(&Usage {
                    path: &m.path,
                    total_bytes: s.total_bytes,
                    available_bytes: s.available_bytes,
                    used_percent: used_percent(s),
                    inodes_free: s.free_inodes,
                    read_only: s.read_only,
                })?
            }
            Err(e) => serde_json::to_string(&Failure {
                path: &m.path,
                error: e,
            })?,
        };
        annotations.push((format!("{ANNOTATION_PREFIX}{name}"), value));
    }
    let (status, reason, message) = if read_only.is_empty() {
        (
            ConditionStatus::False,
            NOT_READ_ONLY_REASON,
            NOT_READ_ONLY_MESSAGE.to_owned(),
        )
    } else {
        (
            ConditionStatus::True,
            READ_ONLY_REASON,
            format!(
                "Filesystem is read-only but should be writable: {}",
                read_only.join(", ")
            ),
        )
    };
    let resource = config.extended_resource.as_ref().map(|r| {
        let listed: BTreeSet<&str> = r.mounts.iter().map(String::as_str).collect();
        let count = listed.iter().filter(|n| healthy.contains(*n)).count();
        (r.name.clone(), count as i64)
    });
    Ok(Report {
        annotations,
        status,
        reason,
        message,
        resource,
    })
}

/// Sets the report on the node at `now`; returns the Warning event to
/// record, `(reason, message)`, when an existing condition flips to True.
pub fn apply(node: &mut Node, r: &Report, now: &str) -> Option<(&'static str, String)> {
    let keep: BTreeSet<&str> = r.annotations.iter().map(|(k, _)| k.as_str()).collect();
    let stale: Vec<String> = node
        .metadata("annotations")
        .and_then(|a| a.as_object())
        .map(|a| {
            a.keys()
                .filter(|k| {
                    k.starts_with(ANNOTATION_PREFIX)
                        && !k.starts_with(io_errors::ANNOTATION_PREFIX)
                        && !keep.contains(k.as_str())
                })
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    for k in stale {
        node.remove_annotation(&k);
    }
    for (k, v) in &r.annotations {
        node.set_annotation(k, v);
    }
    if let Some((name, count)) = &r.resource {
        node.set_capacity(name, Quantity::units(*count));
        node.set_allocatable(name, Quantity::units(*count));
    }
    let t = node.set_condition_at(CONDITION, r.status, r.reason, &r.message, now);
    (t.flipped && t.previous.is_some() && r.status == ConditionStatus::True)
        .then(|| (READ_ONLY_REASON, r.message.clone()))
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct Disk;

impl Setter for Disk {
    fn metadata() -> Metadata {
        Metadata::new("disk", env!("CARGO_PKG_VERSION"))
            .description(
                "per-mount disk capacity annotations, the ReadonlyFilesystem condition and an optional extended resource",
            )
            // fs-stats needs each mount's path granted. The host grants the
            // narrower directories the operator lists inside an asked one,
            // so the operator grants just the mounts' paths.
            .path("/")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let stats = config
            .mounts
            .iter()
            .map(|m| (m.path.clone(), host::fs_stats(&m.path)))
            .collect();
        let counts = io_counts(node, &config.io_errors);
        let report = evaluate(&stats, &config)?;
        if let Some((reason, message)) = apply(node, &report, &nodestatus_sdk::time::now()) {
            host::record_event(EventType::Warning, reason, &message);
        }
        write_io_errors(node, &config.io_errors, &counts, now_ms());
        Ok(())
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Each configured device's count, as the node holds it.
pub fn io_counts(node: &Node, cfg: &io_errors::IoErrors) -> Vec<io_errors::Count> {
    cfg.devices
        .iter()
        .map(|d| {
            node.annotation(&format!("{}{d}", io_errors::ANNOTATION_PREFIX))
                .and_then(|a| serde_json::from_str(a).ok())
                .unwrap_or_default()
        })
        .collect()
}

/// Counts the error lines of each configured device (each recording a
/// [`io_errors::EVENT`]).
pub fn count_io_errors(cfg: &io_errors::IoErrors, counts: &mut [io_errors::Count], lines: &Lines) {
    let mut same_ms: (u64, u64) = (0, 0);
    for m in &lines.matches {
        same_ms = match same_ms {
            (t, n) if t == m.time_ms => (t, n + 1),
            _ => (m.time_ms, 0),
        };
        let Some(seen) = io_errors::device_of(m.pattern, &m.text) else {
            continue;
        };
        for (device, count) in cfg.devices.iter().zip(counts.iter_mut()) {
            if io_errors::is_device(device, &seen) && count.add(m.time_ms, same_ms.1, &m.text) {
                host::record_event(
                    EventType::Warning,
                    io_errors::EVENT,
                    &format!("I/O error on {device} ({} so far): {}", count.count, m.text),
                );
            }
        }
    }
}

/// Writes each device's condition and count at `now_ms`.
pub fn write_io_errors(
    node: &mut Node,
    cfg: &io_errors::IoErrors,
    counts: &[io_errors::Count],
    now_ms: u64,
) {
    for (device, count) in cfg.devices.iter().zip(counts) {
        let recent = count.count > 0
            && now_ms.saturating_sub(count.last) < cfg.clear_after.saturating_mul(1000);
        let (status, reason, message) = if recent {
            (
                ConditionStatus::True,
                io_errors::SEEN_REASON,
                format!(
                    "{} I/O error(s) on {device}; the last: {}",
                    count.count, count.line
                ),
            )
        } else {
            (
                ConditionStatus::False,
                io_errors::NONE_REASON,
                format!("no I/O error on {device} in the last {} s", cfg.clear_after),
            )
        };
        node.set_condition(&io_errors::condition_type(device), status, reason, &message);
        if count.count > 0 {
            node.set_annotation(
                &format!("{}{device}", io_errors::ANNOTATION_PREFIX),
                &serde_json::to_string(count).expect("a count serializes"),
            );
        }
    }
}

impl Reactor for Disk {
    fn subscribe() -> Subscriptions {
        let config: Config = host::config().unwrap_or_default();
        if config.io_errors.devices.is_empty() {
            return Subscriptions::new();
        }
        let mut stream = Stream::kmsg("kernel").lookback(config.io_errors.lookback);
        for p in io_errors::PATTERNS {
            stream = stream.pattern(p);
        }
        Subscriptions::new().stream(stream)
    }

    fn on_lines(node: &mut Node, lines: &Lines) -> Result<()> {
        let config: Config = host::config()?;
        let mut counts = io_counts(node, &config.io_errors);
        count_io_errors(&config.io_errors, &mut counts, lines);
        // The rest of the part, as `set` writes it, then the counts.
        let stats = config
            .mounts
            .iter()
            .map(|m| (m.path.clone(), host::fs_stats(&m.path)))
            .collect();
        let report = evaluate(&stats, &config)?;
        if let Some((reason, message)) = apply(node, &report, &nodestatus_sdk::time::now()) {
            host::record_event(EventType::Warning, reason, &message);
        }
        write_io_errors(node, &config.io_errors, &counts, now_ms());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    type Stats = BTreeMap<String, std::result::Result<FsStats, String>>;

    /// 100 GiB, 40 GiB free, 35 GiB available to users; 1M inodes, 900k free.
    fn fs(read_only: bool) -> FsStats {
        FsStats {
            total_bytes: 100 << 30,
            free_bytes: 40 << 30,
            available_bytes: 35 << 30,
            total_inodes: 1_000_000,
            free_inodes: 900_000,
            read_only,
        }
    }

    fn config() -> Config {
        serde_json::from_value(json!({
            "mounts": [
                {"path": "/var/lib/kubelet"},
                {"path": "/mnt/ssd0", "name": "ssd0"},
                {"path": "/mnt/ssd1", "name": "ssd1"},
                {"path": "/opt/images", "name": "images", "writable": false}
            ],
            "extendedResource": {"name": "example.com/local-disk", "mounts": ["ssd0", "ssd1"]}
        }))
        .unwrap()
    }

    fn all_fine() -> Stats {
        [
            ("/var/lib/kubelet", Ok(fs(false))),
            ("/mnt/ssd0", Ok(fs(false))),
            ("/mnt/ssd1", Ok(fs(false))),
            ("/opt/images", Ok(fs(true))),
        ]
        .into_iter()
        .map(|(p, s)| (p.to_owned(), s))
        .collect()
    }

    fn annotation(node: &Node, name: &str) -> Value {
        serde_json::from_str(
            node.annotation(&format!("{ANNOTATION_PREFIX}{name}"))
                .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn all_fine_is_false_with_no_event() {
        let r = evaluate(&all_fine(), &config()).unwrap();
        assert_eq!(r.status, ConditionStatus::False);
        assert_eq!(r.reason, "FilesystemIsNotReadOnly");
        assert_eq!(r.message, "Filesystem is not read-only");
        let mut node = Node::named("n1");
        assert_eq!(apply(&mut node, &r, "2026-01-01T00:00:00Z"), None);
        assert_eq!(apply(&mut node, &r, "2026-01-01T00:00:10Z"), None);
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "False");
        assert_eq!(c.reason.as_deref(), Some("FilesystemIsNotReadOnly"));
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2026-01-01T00:00:00Z")
        );
    }

    #[test]
    fn writable_mount_read_only_is_true_with_event_on_flip() {
        let mut node = Node::named("n1");
        let ok = evaluate(&all_fine(), &config()).unwrap();
        assert_eq!(apply(&mut node, &ok, "2026-01-01T00:00:00Z"), None);

        let mut stats = all_fine();
        stats.insert("/mnt/ssd1".into(), Ok(fs(true)));
        let ro = evaluate(&stats, &config()).unwrap();
        assert_eq!(ro.status, ConditionStatus::True);
        assert_eq!(ro.reason, "FilesystemIsReadOnly");
        // The read-only mount configured writable: false is not listed.
        assert_eq!(
            ro.message,
            "Filesystem is read-only but should be writable: ssd1 at /mnt/ssd1"
        );
        assert_eq!(
            apply(&mut node, &ro, "2026-01-01T00:00:10Z"),
            Some(("FilesystemIsReadOnly", ro.message.clone()))
        );
        let c = node.condition(CONDITION).unwrap();
        assert_eq!(c.status, "True");
        assert_eq!(c.message.as_deref(), Some(ro.message.as_str()));
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2026-01-01T00:00:10Z")
        );
        // Still True: no second event; back to False: no event.
        assert_eq!(apply(&mut node, &ro, "2026-01-01T00:00:20Z"), None);
        assert_eq!(apply(&mut node, &ok, "2026-01-01T00:00:30Z"), None);
        assert_eq!(node.condition(CONDITION).unwrap().status, "False");
        // The read-only mount counts out of the resource.
        assert_eq!(ro.resource, Some(("example.com/local-disk".into(), 1)));
    }

    #[test]
    fn new_condition_true_records_no_event() {
        let mut stats = all_fine();
        stats.insert("/var/lib/kubelet".into(), Ok(fs(true)));
        stats.insert("/mnt/ssd0".into(), Ok(fs(true)));
        let r = evaluate(&stats, &config()).unwrap();
        assert_eq!(
            r.message,
            "Filesystem is read-only but should be writable: var-lib-kubelet at /var/lib/kubelet, ssd0 at /mnt/ssd0"
        );
        let mut node = Node::named("n1");
        assert_eq!(apply(&mut node, &r, "2026-01-01T00:00:00Z"), None);
        assert_eq!(node.condition(CONDITION).unwrap().status, "True");
    }

    #[test]
    fn extended_resource_counts_healthy_listed_mounts() {
        let mut node = Node::named("n1");
        let r = evaluate(&all_fine(), &config()).unwrap();
        assert_eq!(r.resource, Some(("example.com/local-disk".into(), 2)));
        apply(&mut node, &r, "2026-01-01T00:00:00Z");
        assert_eq!(
            node.capacity("example.com/local-disk"),
            Some(Quantity::units(2))
        );
        assert_eq!(
            node.allocatable("example.com/local-disk"),
            Some(Quantity::units(2))
        );
        let v = node.part();
        assert_eq!(
            v["status"]["capacity"],
            json!({"example.com/local-disk": "2"})
        );
        assert_eq!(
            v["status"]["allocatable"],
            json!({"example.com/local-disk": "2"})
        );
        // A mount listed twice counts once; an unlisted one not at all.
        let mut c = config();
        c.extended_resource.as_mut().unwrap().mounts =
            vec!["ssd0".into(), "ssd0".into(), "var-lib-kubelet".into()];
        let r = evaluate(&all_fine(), &c).unwrap();
        assert_eq!(r.resource, Some(("example.com/local-disk".into(), 2)));
        // A mount configured writable: false never counts.
        c.extended_resource.as_mut().unwrap().mounts = vec!["images".into()];
        let r = evaluate(&all_fine(), &c).unwrap();
        assert_eq!(r.resource, Some(("example.com/local-disk".into(), 0)));
        // No extendedResource: no resource.
        c.extended_resource = None;
        assert_eq!(evaluate(&all_fine(), &c).unwrap().resource, None);
    }

    #[test]
    fn missing_mount_gives_error_annotation_and_count_drops_to_zero() {
        let mut node = Node::named("n1");
        let r = evaluate(&all_fine(), &config()).unwrap();
        apply(&mut node, &r, "2026-01-01T00:00:00Z");

        let mut stats = all_fine();
        stats.insert(
            "/mnt/ssd0".into(),
            Err("statvfs: \"/mnt/ssd0\": No such file or directory (os error 2)".into()),
        );
        let r = evaluate(&stats, &config()).unwrap();
        assert_eq!(r.resource, Some(("example.com/local-disk".into(), 1)));
        // An unreadable mount does not make the condition True.
        assert_eq!(r.status, ConditionStatus::False);
        apply(&mut node, &r, "2026-01-01T00:00:10Z");
        assert_eq!(
            annotation(&node, "ssd0"),
            json!({"path": "/mnt/ssd0", "error": "statvfs: \"/mnt/ssd0\": No such file or directory (os error 2)"})
        );
        assert_eq!(
            node.capacity("example.com/local-disk"),
            Some(Quantity::units(1))
        );

        // Both gone (one not even gathered): 0, not removed.
        stats.remove("/mnt/ssd1");
        let r = evaluate(&stats, &config()).unwrap();
        apply(&mut node, &r, "2026-01-01T00:00:20Z");
        assert_eq!(
            annotation(&node, "ssd1"),
            json!({"path": "/mnt/ssd1", "error": "no statistics were gathered"})
        );
        let v = node.part();
        assert_eq!(v["status"]["capacity"]["example.com/local-disk"], "0");
        assert_eq!(v["status"]["allocatable"]["example.com/local-disk"], "0");
    }

    #[test]
    fn annotation_json_shape() {
        let mut node = Node::named("n1");
        let r = evaluate(&all_fine(), &config()).unwrap();
        apply(&mut node, &r, "2026-01-01T00:00:00Z");
        let keys: Vec<&str> = r.annotations.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "disk.nodestatus.io/var-lib-kubelet",
                "disk.nodestatus.io/ssd0",
                "disk.nodestatus.io/ssd1",
                "disk.nodestatus.io/images"
            ]
        );
        // Compact, in this field order. Used 60 GiB of 60 + 35: 63.2% -> 64.
        assert_eq!(
            node.annotation("disk.nodestatus.io/ssd0"),
            Some(
                r#"{"path":"/mnt/ssd0","totalBytes":107374182400,"availableBytes":37580963840,"usedPercent":64,"inodesFree":900000,"readOnly":false}"#
            )
        );
        assert_eq!(annotation(&node, "images")["readOnly"], true);
        let empty = FsStats {
            total_bytes: 0,
            free_bytes: 0,
            available_bytes: 0,
            total_inodes: 0,
            free_inodes: 0,
            read_only: false,
        };
        assert_eq!(used_percent(&empty), 0);
        let full = FsStats {
            available_bytes: 0,
            ..fs(false)
        };
        assert_eq!(used_percent(&full), 100);
    }

    #[test]
    fn disk_pressure_is_untouched() {
        let input = json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1"},
            "status": {"conditions": [{
                "type": "DiskPressure", "status": "False",
                "lastHeartbeatTime": "2025-12-31T23:59:00Z",
                "lastTransitionTime": "2025-12-01T00:00:00Z",
                "reason": "KubeletHasNoDiskPressure",
                "message": "kubelet has no disk pressure"
            }]}
        });
        let before = input["status"]["conditions"][0].clone();
        let mut node = Node::parse(&input.to_string()).unwrap();
        for stats in [all_fine(), {
            let mut s = all_fine();
            s.insert("/var/lib/kubelet".into(), Ok(fs(true)));
            s.insert("/mnt/ssd0".into(), Err("gone".into()));
            s
        }] {
            let r = evaluate(&stats, &config()).unwrap();
            apply(&mut node, &r, "2026-01-01T00:00:00Z");
        }
        let out: Value = serde_json::from_str(&node.to_json()).unwrap();
        assert_eq!(out["status"]["conditions"][0], before);
        // Its part holds its own condition only.
        let part = node.part();
        let conditions = part["status"]["conditions"].as_array().unwrap();
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0]["type"], "ReadonlyFilesystem");
    }

    #[test]
    fn stale_annotations_of_removed_mounts_go_others_stay() {
        let mut node = Node::named("n1");
        node.set_annotation("disk.nodestatus.io/old", "{}");
        node.set_annotation("example.com/keep", "x");
        // The node as the host hands it over: nothing written yet.
        let mut node = Node::parse(&node.to_json()).unwrap();
        let r = evaluate(&all_fine(), &config()).unwrap();
        apply(&mut node, &r, "2026-01-01T00:00:00Z");
        assert_eq!(node.annotation("disk.nodestatus.io/old"), None);
        assert_eq!(node.annotation("example.com/keep"), Some("x"));
        assert!(node.annotation("disk.nodestatus.io/ssd0").is_some());
        let part = node.part();
        let annotations = part["metadata"]["annotations"].as_object().unwrap();
        assert_eq!(annotations["disk.nodestatus.io/old"], Value::Null);
        assert!(annotations["disk.nodestatus.io/ssd0"].is_string());
        assert!(!annotations.contains_key("example.com/keep"));
    }

    #[test]
    fn io_errors_of_a_device_make_its_condition_true_until_clear_after() {
        let cfg = io_errors::IoErrors {
            devices: vec!["sdb".into(), "nvme0n1".into()],
            ..Default::default()
        };
        let mut node = Node::named("n");
        let mut counts = io_counts(&node, &cfg);
        let _ = host::take_native_events();
        let mut lines = Lines::of(
            "kernel",
            2,
            &["EXT4-fs error (device sdb1): ext4_find_entry:1455: inode #2"],
        );
        lines.matches[0].time_ms = 1_000;
        let mut other = Lines::of("kernel", 0, &["I/O error, dev sda, sector 8 op 0x0:(READ)"]);
        other.matches[0].time_ms = 1_001;
        lines.matches.extend(other.matches);
        count_io_errors(&cfg, &mut counts, &lines);
        assert_eq!(counts[0].count, 1);
        assert_eq!(counts[1].count, 0, "sda is not configured");
        assert_eq!(host::take_native_events().len(), 1);
        write_io_errors(&mut node, &cfg, &counts, 2_000);
        let c = node.condition("DiskIOErrors-sdb").unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_deref()),
            ("True", Some(io_errors::SEEN_REASON))
        );
        assert_eq!(
            node.condition("DiskIOErrors-nvme0n1").unwrap().status,
            "False"
        );
        // The node holds the count: the next pass (a restart too) keeps it.
        let node = Node::parse(&node.to_json()).unwrap();
        let counts = io_counts(&node, &cfg);
        assert_eq!(counts[0].count, 1);
        let mut later = Node::parse(&node.to_json()).unwrap();
        write_io_errors(&mut later, &cfg, &counts, 1_000 + 3_600_000);
        assert_eq!(
            later.condition("DiskIOErrors-sdb").unwrap().status,
            "False",
            "cleared after an hour"
        );
    }

    /// The defect the events test found: `set` read the counts after the
    /// mounts' stale annotations were removed, so a pass after the errors
    /// lost the count and turned the condition False.
    #[test]
    fn a_pass_after_the_errors_keeps_the_count_and_the_condition() {
        host::set_native_config(r#"{"ioErrors": {"devices": ["sdy"]}}"#);
        let mut lines = Lines::of("kernel", 0, &["I/O error, dev sdy, sector 8 op 0x0:(READ)"]);
        lines.matches[0].time_ms = now_ms();
        let node = Node::named("n").to_json();
        let part = nodestatus_sdk::reactor::run_lines::<Disk>(&node, &lines)
            .unwrap()
            .unwrap();
        let mut after: serde_json::Value = serde_json::from_str(&node).unwrap();
        let part: serde_json::Value = serde_json::from_str(&part).unwrap();
        after["metadata"]["annotations"] = part["metadata"]["annotations"].clone();
        after["status"] = part["status"].clone();
        let next = nodestatus_sdk::run::<Disk>(&after.to_string())
            .unwrap()
            .unwrap();
        let next: serde_json::Value = serde_json::from_str(&next).unwrap();
        let sdy = next["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["type"] == "DiskIOErrors-sdy")
            .unwrap()
            .clone();
        assert_eq!(sdy["status"], "True", "{next}");
        assert!(next["metadata"]["annotations"]["disk.nodestatus.io/io-errors-sdy"].is_string());
    }

    #[test]
    fn names_are_derived_and_config_is_checked() {
        assert_eq!(derive_name("/"), "root");
        assert_eq!(derive_name("/var/lib/kubelet"), "var-lib-kubelet");
        assert_eq!(derive_name("/mnt/Data_1/"), "mnt-data-1");
        assert_eq!(derive_name(&format!("/{}", "a".repeat(80))).len(), 63);
        assert_eq!(Mount::new("/tmp").name(), "tmp");

        let empty: Config = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Config::default());
        let r = evaluate(&Stats::new(), &empty).unwrap();
        assert_eq!(r.status, ConditionStatus::False);
        assert!(r.annotations.is_empty());

        let bad = |v: Value| {
            let c: Config = serde_json::from_value(v).unwrap();
            evaluate(&Stats::new(), &c).unwrap_err().to_string()
        };
        assert!(bad(json!({"mounts": [{"path": "tmp"}]})).contains("not absolute"));
        assert!(bad(json!({"mounts": [{"path": "/tmp", "name": "Tmp"}]})).contains("DNS label"));
        assert!(
            bad(json!({"mounts": [{"path": "/tmp"}, {"path": "/var", "name": "tmp"}]}))
                .contains("used twice")
        );
        assert!(
            bad(json!({"mounts": [{"path": "/tmp"}],
                "extendedResource": {"name": "example.com/d", "mounts": ["var"]}}))
            .contains("not the name of a configured mount")
        );
        for name in [
            "local-disk",
            "kubernetes.io/disk",
            "example.com/",
            "Example.com/d",
        ] {
            assert!(
                bad(json!({"extendedResource": {"name": name, "mounts": []}}))
                    .contains("extendedResource.name"),
                "{name}"
            );
        }
        assert!(
            serde_json::from_value::<Config>(json!({"extendedResources": {}})).is_err(),
            "a typo is refused"
        );
    }

    #[test]
    fn setter_runs_natively_with_an_error_annotation() {
        // Natively fs-stats is unavailable: the setter still succeeds.
        host::set_native_config(r#"{"mounts": [{"path": "/tmp"}]}"#);
        let out = nodestatus_sdk::run::<Disk>(r#"{"metadata": {"name": "n1"}}"#).unwrap();
        let v: Value = serde_json::from_str(&out.expect("a part")).unwrap();
        let a: Value = serde_json::from_str(
            v["metadata"]["annotations"]["disk.nodestatus.io/tmp"]
                .as_str()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(a["path"], "/tmp");
        assert!(a["error"].as_str().unwrap().contains("not available"));
        assert_eq!(v["status"]["conditions"][0]["type"], "ReadonlyFilesystem");
        assert_eq!(Disk::metadata().paths, ["/"]);
    }
}

nodestatus_sdk::export_reactor!(Disk);
