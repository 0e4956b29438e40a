//! I/O errors from the kernel log, per configured device.
//!
//! The plugin follows the kernel log (the `kmsg` stream, granted by the
//! operator) for the messages the block layer, the page cache, ext4, XFS
//! and the NVMe driver write when a disk fails ([`PATTERNS`], matched by
//! the host). For each device of `ioErrors.devices` it keeps:
//!
//! - the condition `DiskIOErrors-<name>` ([`condition_type`]): `True`,
//!   reason `IOErrorsSeen`, once an error of the device is seen, with the
//!   count and the last line; `False`, reason `NoIOErrors`, otherwise;
//! - a Warning event `DiskIOError` for each error line (within the host's
//!   event budget);
//! - the way back: the condition goes back to `False` once no error of the
//!   device was seen for `ioErrors.clearAfter` seconds (3600 by default).
//!   What it counts lives in the annotation
//!   `disk.nodestatus.io/io-errors-<name>` (`{"count", "last", "line"}`), so
//!   a restart keeps it.
//!
//! A device matches its partitions (`sdb` matches `sdb1`, `nvme0n1` matches
//! `nvme0n1p2`) and, for NVMe, its controller (`nvme0n1` matches the
//! controller `nvme0`'s resets).

use serde::{Deserialize, Serialize};

/// The patterns, in this order (the host matches them; each gives its
/// device through [`device_of`]).
pub const PATTERNS: [&str; 5] = [
    // blk_update_request: I/O error, dev sdb, sector 0 ... (and the
    // newer blk_print_req_error: "I/O error, dev sdb, sector ...")
    r"I/O error, dev [A-Za-z0-9_-]+,",
    // Buffer I/O error on dev sdb1, logical block 0, async page read
    r"Buffer I/O error on dev(ice)? [A-Za-z0-9_-]+",
    // EXT4-fs error (device sdb1): ...
    r"EXT4-fs error \(device [A-Za-z0-9_-]+\)",
    // XFS (sdb1): metadata I/O error in ...
    r"XFS \([A-Za-z0-9_-]+\): metadata I/O error",
    // nvme nvme0: I/O 12 QID 3 timeout, reset controller / controller is down
    r"nvme (nvme[0-9]+): .*(reset controller|controller is down|resetting controller)",
];

/// The condition's reason while errors were seen.
pub const SEEN_REASON: &str = "IOErrorsSeen";
/// The condition's reason otherwise.
pub const NONE_REASON: &str = "NoIOErrors";
/// The event of each error line.
pub const EVENT: &str = "DiskIOError";
/// The annotation prefix of a device's count.
pub const ANNOTATION_PREFIX: &str = "disk.nodestatus.io/io-errors-";

/// `ioErrors` in the config.
#[derive(Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
pub struct IoErrors {
    /// The devices to watch (`sdb`, `nvme0n1`), each its own condition.
    pub devices: Vec<String>,
    /// Seconds without a new error after which the condition is False.
    pub clear_after: u64,
    /// How far back the kernel log is read at start, in seconds.
    pub lookback: u64,
}

impl Default for IoErrors {
    fn default() -> Self {
        Self {
            devices: Vec::new(),
            clear_after: 3600,
            lookback: 3600,
        }
    }
}

/// A device's condition type.
pub fn condition_type(device: &str) -> String {
    format!("DiskIOErrors-{device}")
}

/// What is counted for a device (its annotation).
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Count {
    /// Errors seen.
    pub count: u64,
    /// When the last was written, in ms since the epoch.
    pub last: u64,
    /// How many of the counted lines were written in that millisecond (a
    /// restart that reads the log back counts no line twice).
    #[serde(default)]
    pub at_last: u64,
    /// The last line.
    pub line: String,
}

impl Count {
    /// Counts a line written at `time_ms`, unless counted before (its time
    /// is before the last counted, or within its millisecond's count);
    /// `seen_at_time` is how many lines of that millisecond came before it
    /// in the log. Returns whether it counted.
    pub fn add(&mut self, time_ms: u64, seen_at_time: u64, line: &str) -> bool {
        if time_ms < self.last || (time_ms == self.last && seen_at_time < self.at_last) {
            return false;
        }
        if time_ms == self.last {
            self.at_last += 1;
        } else {
            self.last = time_ms;
            self.at_last = 1;
        }
        self.count += 1;
        self.line = line.to_owned();
        true
    }
}

/// The device a matched line of pattern `index` names.
pub fn device_of(index: u32, line: &str) -> Option<String> {
    let after = |marker: &str| -> Option<String> {
        let rest = &line[line.find(marker)? + marker.len()..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'))
            .unwrap_or(rest.len());
        (end > 0).then(|| rest[..end].to_owned())
    };
    match index {
        0 => after("I/O error, dev "),
        1 => after("Buffer I/O error on dev ").or_else(|| after("Buffer I/O error on device ")),
        2 => after("EXT4-fs error (device "),
        3 => after("XFS ("),
        4 => after("nvme nvme").map(|n| format!("nvme{n}")),
        _ => None,
    }
}

/// Whether `seen` (from a line) is the configured `device`, one of its
/// partitions, or its NVMe controller.
pub fn is_device(device: &str, seen: &str) -> bool {
    if seen == device {
        return true;
    }
    if let Some(rest) = seen.strip_prefix(device) {
        // sdb1, nvme0n1p2, mmcblk0p1
        return rest.starts_with('p') && rest[1..].bytes().all(|b| b.is_ascii_digit())
            || (!rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_digit())
                && !device.ends_with(|c: char| c.is_ascii_digit()));
    }
    // The controller nvme0 of nvme0n1.
    device
        .strip_prefix(seen)
        .is_some_and(|rest| seen.starts_with("nvme") && rest.starts_with('n'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_message_names_its_device() {
        for (i, line, dev) in [
            (
                0,
                "blk_update_request: I/O error, dev sdb, sector 2048 op 0x0:(READ)",
                "sdb",
            ),
            (
                0,
                "I/O error, dev nvme0n1, sector 0 op 0x1:(WRITE) flags 0x800",
                "nvme0n1",
            ),
            (
                1,
                "Buffer I/O error on dev sdb1, logical block 0, async page read",
                "sdb1",
            ),
            (
                2,
                "EXT4-fs error (device sdb1): ext4_find_entry:1455: inode #2: comm ls: reading directory lblock 0",
                "sdb1",
            ),
            (
                3,
                "XFS (dm-0): metadata I/O error in \"xfs_imap_to_bp+0x5c/0xa0\" at daddr 0x80 len 32 error 5",
                "dm-0",
            ),
            (
                4,
                "nvme nvme0: I/O 12 QID 3 timeout, reset controller",
                "nvme0",
            ),
            (
                4,
                "nvme nvme1: controller is down; will reset: CSTS=0xffffffff",
                "nvme1",
            ),
        ] {
            assert_eq!(device_of(i, line).as_deref(), Some(dev), "{line}");
        }
    }

    #[test]
    fn a_line_read_back_after_a_restart_is_not_counted_twice() {
        let mut c = Count::default();
        assert!(c.add(100, 0, "a"));
        assert!(c.add(100, 1, "b"), "a second line of the same ms");
        assert!(c.add(200, 0, "c"));
        assert_eq!(c.count, 3);
        // Read back from the start: every line was counted.
        assert!(!c.add(100, 0, "a"));
        assert!(!c.add(100, 1, "b"));
        assert!(!c.add(200, 0, "c"));
        assert!(c.add(200, 1, "d"), "a new line of the last ms");
        assert_eq!(c.count, 4);
    }

    #[test]
    fn a_device_matches_its_partitions_and_its_controller_only() {
        assert!(is_device("sdb", "sdb"));
        assert!(is_device("sdb", "sdb1"));
        assert!(!is_device("sdb", "sdba"));
        assert!(!is_device("sda", "sdb1"));
        assert!(is_device("nvme0n1", "nvme0n1p2"));
        assert!(is_device("nvme0n1", "nvme0"));
        assert!(!is_device("nvme0n1", "nvme1"));
        assert!(!is_device("nvme0n1", "nvme0n12"));
    }
}
