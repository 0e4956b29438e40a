//! The host's functions, with Rust types. On `wasm32` they call the host;
//! compiled natively (for tests and benchmarks) they answer from the local
//! machine and a thread-local config, so the same setter source runs in both.

pub use crate::bindings::nodestatus::plugin::host::{
    ContainerRuntimeInfo, EventType, FsStats, IpAddress, Level, NetworkInterface, RuntimeCondition,
    RuntimeError, RuntimeImage, SystemInfo,
};

#[cfg(target_arch = "wasm32")]
mod imp {
    pub use crate::bindings::nodestatus::plugin::host::{
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
