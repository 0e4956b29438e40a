//! The kubelet's `DiskPressureCondition` setter. There is disk pressure when
//! a hard eviction threshold of the kubelet's is met:
//!
//! - the node filesystem (the one holding `nodefsPath`, default `/`, where
//!   the kubelet's root directory is) has less available space than
//!   `nodefsAvailable` (default `10%`) or fewer free inodes than
//!   `nodefsInodesFree` (default `5%`): `nodefs.available` and
//!   `nodefs.inodesFree`;
//! - the image filesystem (the one holding `imagefsPath`, the container
//!   runtime's; by default the node filesystem, as on a node whose
//!   `/var/lib` is one partition) has less available space than
//!   `imagefsAvailable` (default `15%`) or fewer free inodes than
//!   `imagefsInodesFree` (default `0%`, none): `imagefs.available` and
//!   `imagefs.inodesFree`.
//!
//! Each is a percentage of the filesystem's total, or an amount (`5Gi`,
//! `100k`); `0%` sets none. These are the kubelet's defaults, so on one disk
//! the condition is True below 15% free, as the kubelet's is.
//!
//! Like the kubelet: a missing condition is created; the heartbeat is set on
//! every run; the transition time changes only on a flip; a new condition,
//! or a flip to True or False, records `NodeHasDiskPressure` or `NodeHasNoDiskPressure`.
//! When a filesystem's statistics cannot be read the status is Unknown,
//! with the no-pressure reason and a message naming the path.
use nodestatus_sdk::host::FsStats;
use nodestatus_sdk::pressure::PressureCondition;
pub use nodestatus_sdk::pressure::{Outcome, Threshold};
use nodestatus_sdk::{Metadata, Node, Result, Setter, host};

/// The condition type.
pub const CONDITION: &str = "DiskPressure";

/// The plugin's config.
#[derive(serde::Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase")]
pub struct Config {
    /// A path on the node filesystem (the kubelet's root directory's).
    pub nodefs_path: String,
    /// Pressure below this much available space.
    pub nodefs_available: String,
    /// Pressure below this many free inodes.
    pub nodefs_inodes_free: String,
    /// A path on the image filesystem (the container runtime's root's);
    /// empty for the node filesystem's `nodefsPath`.
    pub imagefs_path: String,
    /// Pressure below this much available space on the image filesystem.
    pub imagefs_available: String,
    /// Pressure below this many free inodes on the image filesystem.
    pub imagefs_inodes_free: String,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nodefs_path: "/".into(),
            nodefs_available: "10%".into(),
            nodefs_inodes_free: "5%".into(),
            imagefs_path: String::new(),
            imagefs_available: "15%".into(),
            imagefs_inodes_free: "0%".into(),
        }
    }
}

impl Config {
    /// The image filesystem's path: `imagefsPath`, else `nodefsPath`.
    pub fn imagefs_path(&self) -> &str {
        if self.imagefs_path.is_empty() {
            &self.nodefs_path
        } else {
            &self.imagefs_path
        }
    }
}

/// One filesystem's eviction thresholds.
struct Thresholds {
    available: Threshold,
    inodes_free: Threshold,
}

impl Thresholds {
    fn parse(prefix: &str, available: &str, inodes_free: &str) -> Result<Self> {
        Ok(Self {
            available: Threshold::parse(&format!("{prefix}Available"), available)?,
            inodes_free: Threshold::parse(&format!("{prefix}InodesFree"), inodes_free)?,
        })
    }

    /// Whether a threshold is met on a filesystem with these statistics.
    fn met(&self, s: &FsStats) -> bool {
        let low_space = u128::from(s.available_bytes) < self.available.amount(s.total_bytes.into());
        // Filesystems without a fixed inode table (btrfs) report 0 inodes.
        let low_inodes = s.total_inodes > 0
            && u128::from(s.free_inodes) < self.inodes_free.amount(s.total_inodes.into());
        low_space || low_inodes
    }
}

/// The condition's reasons, messages and events.
pub const PRESSURE: PressureCondition = PressureCondition {
    condition: CONDITION,
    pressure_reason: "KubeletHasDiskPressure",
    pressure_message: "kubelet has disk pressure",
    pressure_event: "NodeHasDiskPressure",
    ok_reason: "KubeletHasNoDiskPressure",
    ok_message: "kubelet has no disk pressure",
    ok_event: "NodeHasNoDiskPressure",
};

/// The statistics of the node filesystem and of the image filesystem, or
/// the error reading each.
pub struct Filesystems<'a> {
    /// The node filesystem's (`nodefsPath`).
    pub nodefs: std::result::Result<&'a FsStats, String>,
    /// The image filesystem's (`imagefsPath`, else the node filesystem's).
    pub imagefs: std::result::Result<&'a FsStats, String>,
}

/// The condition for these statistics (or the errors reading them).
pub fn evaluate(fs: Filesystems<'_>, config: &Config) -> Result<Outcome> {
    let nodefs = Thresholds::parse(
        "nodefs",
        &config.nodefs_available,
        &config.nodefs_inodes_free,
    )?;
    let imagefs = Thresholds::parse(
        "imagefs",
        &config.imagefs_available,
        &config.imagefs_inodes_free,
    )?;
    let mut met = false;
    for (name, path, stats, thresholds) in [
        ("node", config.nodefs_path.as_str(), fs.nodefs, nodefs),
        ("image", config.imagefs_path(), fs.imagefs, imagefs),
    ] {
        match stats {
            Ok(s) => met |= thresholds.met(s),
            Err(e) => {
                return Ok(PRESSURE.unknown(format!(
                    "cannot read the statistics of the {name} filesystem at {path}: {e}"
                )));
            }
        }
    }
    Ok(PRESSURE.outcome(met))
}

/// The setter (its [`Setter`](nodestatus_sdk::Setter) implementation is
/// what the component exports).
pub struct DiskPressure;

impl Setter for DiskPressure {
    fn metadata() -> Metadata {
        Metadata::new("disk-pressure", env!("CARGO_PKG_VERSION"))
            .description(
                "the kubelet's DiskPressure condition, from the node filesystem's statistics",
            )
            // statvfs needs nodefsPath (and imagefsPath) granted; the
            // operator may grant just those directories.
            .path("/")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let nodefs = host::fs_stats(&config.nodefs_path);
        let imagefs = if config.imagefs_path() == config.nodefs_path {
            None
        } else {
            Some(host::fs_stats(config.imagefs_path()))
        };
        let fs = Filesystems {
            nodefs: nodefs.as_ref().map_err(Clone::clone),
            imagefs: imagefs
                .as_ref()
                .unwrap_or(&nodefs)
                .as_ref()
                .map_err(Clone::clone),
        };
        let outcome = evaluate(fs, &config)?;
        PRESSURE.set(node, &outcome);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodestatus_sdk::ConditionStatus;

    /// statvfs("/") of the development machine.
    const STATVFS_ROOT: &str = include_str!("../tests/fixtures/statvfs-root.json");

    fn root() -> FsStats {
        let v: serde_json::Value = serde_json::from_str(STATVFS_ROOT).unwrap();
        let n = |k: &str| v[k].as_u64().unwrap();
        FsStats {
            total_bytes: n("totalBytes"),
            free_bytes: n("freeBytes"),
            available_bytes: n("availableBytes"),
            total_inodes: n("totalInodes"),
            free_inodes: n("freeInodes"),
            read_only: v["readOnly"].as_bool().unwrap(),
        }
    }

    fn cfg(space: &str, inodes: &str) -> Config {
        Config {
            nodefs_available: space.into(),
            nodefs_inodes_free: inodes.into(),
            imagefs_available: "0%".into(),
            ..Config::default()
        }
    }

    /// One filesystem for both, as on a node with one disk.
    fn one(s: &FsStats) -> Filesystems<'_> {
        Filesystems {
            nodefs: Ok(s),
            imagefs: Ok(s),
        }
    }

    /// The status for these statistics and nodefs thresholds.
    fn status(s: &FsStats, space: &str, inodes: &str) -> ConditionStatus {
        evaluate(one(s), &cfg(space, inodes)).unwrap().status
    }

    #[test]
    fn default_thresholds_on_this_machine() {
        let o = evaluate(one(&root()), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::False);
        assert_eq!(o.reason, "KubeletHasNoDiskPressure");
        assert_eq!(o.message, "kubelet has no disk pressure");
    }

    #[test]
    fn space_threshold_true_and_false_across_it() {
        let s = root();
        let at = s.available_bytes.to_string();
        let above = (s.available_bytes + 1).to_string();
        assert_eq!(status(&s, &at, "5%"), ConditionStatus::False);
        let o = evaluate(one(&s), &cfg(&above, "5%")).unwrap();
        assert_eq!(o.status, ConditionStatus::True);
        assert_eq!(o.reason, "KubeletHasDiskPressure");
        assert_eq!(o.message, "kubelet has disk pressure");
        // 68561858560 / 270553174016 = 25.3% available
        assert_eq!(status(&s, "25%", "5%"), ConditionStatus::False);
        assert_eq!(status(&s, "26%", "5%"), ConditionStatus::True);
    }

    #[test]
    fn inode_threshold_true_and_false_across_it() {
        let mut s = root();
        // 16301078 / 16777216 = 97.2% free
        assert_eq!(status(&s, "10%", "97%"), ConditionStatus::False);
        assert_eq!(status(&s, "10%", "98%"), ConditionStatus::True);
        assert_eq!(status(&s, "10%", "16301079"), ConditionStatus::True);
        s.free_inodes = 5;
        // The defaults, 10% and 5%.
        assert_eq!(status(&s, "10%", "5%"), ConditionStatus::True);
        // No inode table: only space counts.
        s.total_inodes = 0;
        s.free_inodes = 0;
        assert_eq!(status(&s, "10%", "5%"), ConditionStatus::False);
    }

    #[test]
    fn imagefs_thresholds_are_the_kubelets_on_the_image_filesystem() {
        // 25.3% available on the development machine's disk.
        let roomy = root();
        let mut s = root();
        // 12% available: over nodefs' 10%, under imagefs' 15%.
        s.available_bytes = s.total_bytes / 100 * 12;
        let config = Config::default();
        assert_eq!(config.imagefs_path(), "/", "the node filesystem by default");
        let pressure = |nodefs: &FsStats, imagefs: &FsStats, config: &Config| {
            evaluate(
                Filesystems {
                    nodefs: Ok(nodefs),
                    imagefs: Ok(imagefs),
                },
                config,
            )
            .unwrap()
            .status
        };
        // One disk with 12% free has pressure, as the kubelet's does.
        assert_eq!(pressure(&s, &s, &config), ConditionStatus::True);
        // A separate image filesystem: each one's thresholds on its own.
        assert_eq!(pressure(&s, &roomy, &config), ConditionStatus::False);
        assert_eq!(pressure(&roomy, &s, &config), ConditionStatus::True);
        let off = Config {
            imagefs_available: "0%".into(),
            ..Config::default()
        };
        assert_eq!(pressure(&roomy, &s, &off), ConditionStatus::False);
        // imagefsInodesFree, none by default.
        let mut few_inodes = root();
        few_inodes.free_inodes = few_inodes.total_inodes / 100;
        assert_eq!(
            pressure(&roomy, &few_inodes, &config),
            ConditionStatus::False
        );
        let inodes = Config {
            imagefs_inodes_free: "5%".into(),
            ..Config::default()
        };
        assert_eq!(
            pressure(&roomy, &few_inodes, &inodes),
            ConditionStatus::True
        );
        assert_eq!(pressure(&roomy, &roomy, &inodes), ConditionStatus::False);
        let set = Config {
            imagefs_path: "/var/lib/containerd".into(),
            ..Config::default()
        };
        assert_eq!(set.imagefs_path(), "/var/lib/containerd");
    }

    #[test]
    fn unknown_on_missing_input_and_errors_on_bad_config() {
        let gone = Filesystems {
            nodefs: Err("not granted".into()),
            imagefs: Err("not granted".into()),
        };
        let o = evaluate(gone, &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert_eq!(o.reason, "KubeletHasNoDiskPressure");
        assert!(o.message.contains("node filesystem at /"), "{}", o.message);
        let r = root();
        let image_gone = Filesystems {
            nodefs: Ok(&r),
            imagefs: Err("not granted".into()),
        };
        let config = Config {
            imagefs_path: "/var/lib/containerd".into(),
            ..Config::default()
        };
        let o = evaluate(image_gone, &config).unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert!(
            o.message
                .contains("image filesystem at /var/lib/containerd: not granted"),
            "{}",
            o.message
        );
        assert!(evaluate(one(&r), &cfg("ten", "5%")).is_err());
        assert!(evaluate(one(&r), &cfg("10%", "101%")).is_err());
        let bad = Config {
            imagefs_inodes_free: "-1".into(),
            ..Config::default()
        };
        let e = evaluate(one(&r), &bad).unwrap_err().to_string();
        assert!(e.contains("imagefsInodesFree"), "{e}");
    }

    #[test]
    fn transition_time_kept_until_a_flip() {
        let r = root();
        let ok = evaluate(one(&r), &Config::default()).unwrap();
        let full = evaluate(one(&r), &cfg("50%", "5%")).unwrap();
        let gone = Filesystems {
            nodefs: Err("gone".into()),
            imagefs: Err("gone".into()),
        };
        let unknown = evaluate(gone, &Config::default()).unwrap();
        PRESSURE.assert_kubelet_transitions(&ok, &full, &unknown);
    }
}

nodestatus_sdk::export!(DiskPressure);
