//! The host's functions, with Rust types. On `wasm32` they call the host;
//! compiled natively (for tests and benchmarks) they answer from the local
//! machine and a thread-local config, so the same setter source runs in both.

pub use crate::bindings::nodestatus::plugin0_1_1::host::{
    ContainerRuntimeInfo, EventType, FsStats, IpAddress, Level, NetworkInterface, RuntimeCondition,
    RuntimeError, RuntimeImage, SystemInfo,
};

#[cfg(target_arch = "wasm32")]
mod imp {
    pub use crate::bindings::nodestatus::plugin0_1_1::host::{
        config, container_runtime, log, network_interfaces, node_problems, record_event,
        statvfs as fs_stats, system as system_info,
    };
}

#[cfg(not(target_arch = "wasm32"))]
#[path = "native.rs"]
mod imp;

#[cfg(not(target_arch = "wasm32"))]
pub use imp::{
    NativeHost, set_native_config, set_native_host, set_native_problems, set_native_runtime,
    take_native_events,
};

/// Writes a line to the host's log.
pub fn log(level: Level, message: &str) {
    imp::log(level, message)
}

/// Logs at info level.
pub fn info(message: &str) {
    log(Level::Info, message)
}

/// Logs at warn level.
pub fn warn(message: &str) {
    log(Level::Warn, message)
}

/// Logs at debug level.
pub fn debug(message: &str) {
    log(Level::Debug, message)
}

/// The plugin's config as raw JSON (`{}` when none).
pub fn config_json() -> String {
    imp::config()
}

/// The plugin's config, deserialized. Missing fields take their serde
/// defaults, so `#[serde(default)]` structs work with no config at all.
pub fn config<T: serde::de::DeserializeOwned>() -> Result<T, crate::Error> {
    serde_json::from_str(&config_json())
        .map_err(|e| crate::Error::new(format!("invalid plugin config: {e}")))
}

/// Records a Kubernetes Event about the node.
pub fn record_event(event_type: EventType, reason: &str, message: &str) {
    imp::record_event(event_type, reason, message)
}

/// Kernel and identity facts.
pub fn system_info() -> SystemInfo {
    imp::system_info()
}

/// Network interfaces and their addresses.
pub fn network_interfaces() -> Vec<NetworkInterface> {
    imp::network_interfaces()
}

/// Filesystem statistics of a granted path.
pub fn fs_stats(path: &str) -> Result<FsStats, String> {
    imp::fs_stats(path)
}

/// Problems that make the node not ready.
pub fn node_problems() -> Vec<String> {
    imp::node_problems()
}

/// The container runtime's facts, read by the host over CRI before the pass
/// (WIT 0.1.1). The error says why there are none: not granted
/// (`containerRuntime: true` in the plugin's config section), no runtime
/// configured, or the runtime did not answer.
pub fn container_runtime() -> Result<ContainerRuntimeInfo, RuntimeError> {
    imp::container_runtime()
}

impl RuntimeError {
    /// The message, which says what to do.
    pub fn message(&self) -> &str {
        match self {
            RuntimeError::NotGranted(m)
            | RuntimeError::NotConfigured(m)
            | RuntimeError::Unavailable(m) => m,
        }
    }
}

/// Why a file could not be read ([`read_file`], [`file_error`]). Its message
/// says what to do about it, never a bare errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileError {
    /// The path lies outside every directory granted to the plugin. In a
    /// component only the granted directories exist, so a path none of whose
    /// ancestors can be seen is outside every grant. (Compiled natively,
    /// every path is visible, so this never happens there.)
    NotGranted {
        /// The path read.
        path: String,
        /// The plugin's name (`this plugin` outside a call).
        plugin: String,
        /// The innermost path the plugin's metadata asks for that holds
        /// `path`, which the operator should grant; `None` when it asks for
        /// none.
        asked: Option<String>,
    },
    /// The path lies inside a grant, and reading it failed.
    Io {
        /// The path read.
        path: String,
        /// What went wrong.
        kind: std::io::ErrorKind,
    },
}

impl FileError {
    /// The path read.
    pub fn path(&self) -> &str {
        match self {
            Self::NotGranted { path, .. } | Self::Io { path, .. } => path,
        }
    }

    /// Why it could not be read, and what to do, without the path (for a
    /// message that already names it).
    pub fn reason(&self) -> String {
        use std::io::ErrorKind as K;
        match self {
            Self::NotGranted {
                plugin,
                asked: Some(dir),
                ..
            } => format!(
                "{dir} is not granted to {plugin}; add it to plugins.{plugin}.paths or use the default config"
            ),
            Self::NotGranted {
                plugin,
                asked: None,
                ..
            } => format!(
                "it is outside every path {plugin} asks for: ask for a directory that holds it (Metadata::path), and grant it in plugins.{plugin}.paths"
            ),
            Self::Io { kind, .. } => match kind {
                K::NotFound => "it does not exist".into(),
                K::PermissionDenied => "permission denied".into(),
                K::IsADirectory => "it is a directory".into(),
                K::NotADirectory => "a part of the path is not a directory".into(),
                K::InvalidData => "it is not UTF-8 text".into(),
                other => other.to_string(),
            },
        }
    }
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot read {}: {}", self.path(), self.reason())
    }
}

impl std::error::Error for FileError {}

impl From<FileError> for crate::Error {
    fn from(e: FileError) -> Self {
        Self::new(e.to_string())
    }
}

/// Reads a whole text file, with an error that tells a path not granted to
/// the plugin from one that is missing or unreadable.
pub fn read_file(path: &str) -> Result<String, FileError> {
    std::fs::read_to_string(path).map_err(|e| file_error(path, &e))
}

/// The [`FileError`] for `err`, met reading or listing `path`: `NotGranted`
/// when no ancestor of `path` can be seen, else `Io`.
pub fn file_error(path: &str, err: &std::io::Error) -> FileError {
    let visible = std::path::Path::new(path)
        .ancestors()
        .any(|p| !p.as_os_str().is_empty() && std::fs::metadata(p).is_ok());
    if visible {
        return FileError::Io {
            path: path.to_owned(),
            kind: err.kind(),
        };
    }
    let metadata = crate::running_metadata();
    let asked = metadata.as_ref().and_then(|m| {
        m.paths
            .iter()
            .filter(|a| std::path::Path::new(path).starts_with(a))
            .max_by_key(|a| a.len())
            .cloned()
    });
    FileError::NotGranted {
        path: path.to_owned(),
        plugin: metadata.map_or_else(|| "this plugin".to_owned(), |m| m.name),
        asked,
    }
}

/// A field of `/proc/meminfo` (the text [`read_file`] returns): a `kB` field
/// in bytes, a field without a unit (`HugePages_Total`) as it is. `None`
/// when the field is missing, is not a whole number, has another unit, or
/// does not fit in a u64.
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

/// The kubelet's spelling of a runtime version: a semantic version as it is
/// (without a leading `v`), else the leading dotted numbers of a generic one
/// (`1.6.20~ds1` is `1.6.20`), else `None` (the kubelet then reports
/// `Unknown`). The rules of Kubernetes' `ParseSemantic`, then
/// `ParseGeneric`.
pub fn kubelet_runtime_version(version: &str) -> Option<String> {
    let v = version.trim();
    let v = v.strip_prefix('v').unwrap_or(v);
    let numeric_end = v
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.'))
        .map_or(v.len(), |(i, _)| i);
    let (numbers, extra) = v.split_at(numeric_end);
    let parts: Vec<&str> = numbers.split('.').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    let values: Vec<u64> = parts
        .iter()
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let semantic = parts.len() == 3
        && parts.iter().all(|p| p == &"0" || !p.starts_with('0'))
        && semver_extra(extra);
    let joined = values
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(".");
    Some(if semantic {
        format!("{joined}{extra}")
    } else {
        joined
    })
}

/// Whether `extra` is a semver pre-release and/or build suffix
/// (`-rc.1`, `+abc`, `-rc.1+abc`, or nothing).
fn semver_extra(extra: &str) -> bool {
    let ident_list = |s: &str| {
        !s.is_empty()
            && s.split('.')
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    };
    let (pre, build) = match extra.split_once('+') {
        Some((pre, build)) => (pre, Some(build)),
        None => (extra, None),
    };
    let pre_ok = pre.is_empty() || pre.strip_prefix('-').is_some_and(ident_list);
    pre_ok && build.is_none_or(ident_list)
}

#[cfg(test)]
mod tests {
    use super::kubelet_runtime_version as v;
    use super::{FileError, meminfo_field, read_file};

    #[test]
    fn meminfo_fields_in_bytes_or_as_counts() {
        let m = "MemTotal:       24684096 kB\nHugePages_Total:     512\nHugepagesize:       2048 kB\nOdd: 1 MB\nBig: 18014398509481984 kB\n";
        assert_eq!(meminfo_field(m, "MemTotal"), Some(24_684_096 * 1024));
        assert_eq!(meminfo_field(m, "HugePages_Total"), Some(512));
        assert_eq!(meminfo_field(m, "Hugepagesize"), Some(2 << 20));
        assert_eq!(meminfo_field(m, "Odd"), None, "another unit");
        assert_eq!(meminfo_field(m, "Big"), None, "over u64 in bytes");
        assert_eq!(meminfo_field(m, "Mem"), None, "a whole key only");
        assert_eq!(meminfo_field(m, "Nope"), None);
    }

    #[test]
    fn a_missing_file_says_so_without_an_errno() {
        // Natively every path is visible: a missing file is missing.
        let e = read_file("/nonexistent-nodestatus-dir/file").unwrap_err();
        assert!(matches!(&e, FileError::Io { kind, .. } if *kind == std::io::ErrorKind::NotFound));
        assert_eq!(
            e.to_string(),
            "cannot read /nonexistent-nodestatus-dir/file: it does not exist"
        );
    }

    #[test]
    fn a_path_not_granted_names_the_grant_and_the_setting() {
        let e = FileError::NotGranted {
            path: "/proc/meminfo".into(),
            plugin: "machine-info".into(),
            asked: Some("/proc".into()),
        };
        assert_eq!(
            e.to_string(),
            "cannot read /proc/meminfo: /proc is not granted to machine-info; add it to plugins.machine-info.paths or use the default config"
        );
    }

    #[test]
    fn runtime_versions_as_the_kubelet_spells_them() {
        // Debian's containerd: not semantic, so the generic parse drops ~ds1.
        assert_eq!(v("1.6.20~ds1").as_deref(), Some("1.6.20"));
        assert_eq!(v("v1.7.13").as_deref(), Some("1.7.13"));
        assert_eq!(v("1.7.0-rc.1+abc").as_deref(), Some("1.7.0-rc.1+abc"));
        assert_eq!(v("1.29.1").as_deref(), Some("1.29.1"));
        // Generic: two or more components, leading zeros dropped.
        assert_eq!(v("1.30").as_deref(), Some("1.30"));
        assert_eq!(v("1.02.3").as_deref(), Some("1.2.3"));
        assert_eq!(v("20.10.24+dfsg1").as_deref(), Some("20.10.24+dfsg1"));
        assert_eq!(v("1"), None);
        assert_eq!(v("unknown"), None);
        assert_eq!(v(""), None);
    }
}
