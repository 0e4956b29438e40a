//! The kubelet's `DiskPressureCondition` setter. There is disk pressure when
//! the node filesystem (the one holding `nodefsPath`, default `/`) has less
//! available space than `nodefsAvailable` (default `10%`) or fewer free
//! inodes than `nodefsInodesFree` (default `5%`): the kubelet's hard eviction
//! thresholds `nodefs.available` and `nodefs.inodesFree`. Each is a
//! percentage of the filesystem's total, or an amount (`5Gi`, `100k`).
//!
//! Like the kubelet: a missing condition is created; the heartbeat is set on
//! every run; the transition time changes only on a flip; a new condition,
//! or a flip to True or False, records `NodeHasDiskPressure` or `NodeHasNoDiskPressure`.
//! When the filesystem's statistics cannot be read the status is Unknown,
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
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nodefs_path: "/".into(),
            nodefs_available: "10%".into(),
            nodefs_inodes_free: "5%".into(),
        }
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

/// The condition for these statistics (or the error reading them).
pub fn evaluate(stats: std::result::Result<&FsStats, String>, config: &Config) -> Result<Outcome> {
    let available = Threshold::parse("nodefsAvailable", &config.nodefs_available)?;
    let inodes = Threshold::parse("nodefsInodesFree", &config.nodefs_inodes_free)?;
    let s = match stats {
        Ok(s) => s,
        Err(e) => {
            return Ok(PRESSURE.unknown(format!(
                "cannot read the statistics of the node filesystem at {}: {e}",
                config.nodefs_path
            )));
        }
    };
    let low_space = u128::from(s.available_bytes) < available.amount(s.total_bytes.into());
    // Filesystems without a fixed inode table (btrfs) report 0 inodes.
    let low_inodes =
        s.total_inodes > 0 && u128::from(s.free_inodes) < inodes.amount(s.total_inodes.into());
    Ok(PRESSURE.outcome(low_space || low_inodes))
}

pub struct DiskPressure;

impl Setter for DiskPressure {
    fn metadata() -> Metadata {
        Metadata::new("disk-pressure", env!("CARGO_PKG_VERSION"))
            .description(
                "the kubelet's DiskPressure condition, from the node filesystem's statistics",
            )
            // statvfs needs nodefsPath granted; the operator may grant just
            // that directory.
            .path("/")
    }

    fn set(node: &mut Node) -> Result<()> {
        let config: Config = host::config()?;
        let stats = host::fs_stats(&config.nodefs_path);
        let outcome = evaluate(stats.as_ref().map_err(Clone::clone), &config)?;
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
            ..Config::default()
        }
    }

    /// The status for these statistics and thresholds.
    fn status(s: &FsStats, space: &str, inodes: &str) -> ConditionStatus {
        evaluate(Ok(s), &cfg(space, inodes)).unwrap().status
    }

    #[test]
    fn default_thresholds_on_this_machine() {
        let o = evaluate(Ok(&root()), &Config::default()).unwrap();
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
        let o = evaluate(Ok(&s), &cfg(&above, "5%")).unwrap();
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
    fn unknown_on_missing_input_and_errors_on_bad_config() {
        let o = evaluate(Err("not granted".into()), &Config::default()).unwrap();
        assert_eq!(o.status, ConditionStatus::Unknown);
        assert_eq!(o.reason, "KubeletHasNoDiskPressure");
        assert!(o.message.contains("node filesystem at /"), "{}", o.message);
        assert!(evaluate(Ok(&root()), &cfg("ten", "5%")).is_err());
        assert!(evaluate(Ok(&root()), &cfg("10%", "101%")).is_err());
    }

    #[test]
    fn transition_time_kept_until_a_flip() {
        let ok = evaluate(Ok(&root()), &Config::default()).unwrap();
        let full = evaluate(Ok(&root()), &cfg("50%", "5%")).unwrap();
        let unknown = evaluate(Err("gone".into()), &Config::default()).unwrap();
        PRESSURE.assert_kubelet_transitions(&ok, &full, &unknown);
    }
}

nodestatus_sdk::export!(DiskPressure);
