//! The host's functions, with Rust types. On `wasm32` they call the host;
//! compiled natively (for tests and benchmarks) they answer from the local
//! machine and a thread-local config, so the same setter source runs in both.

pub use crate::bindings::nodestatus::plugin::host::{
    EventType, FsStats, IpAddress, Level, NetworkInterface, SystemInfo,
};

#[cfg(target_arch = "wasm32")]
mod imp {
    pub use crate::bindings::nodestatus::plugin::host::{
        config, log, network_interfaces, node_problems, record_event, statvfs as fs_stats,
        system as system_info,
    };
}

#[cfg(not(target_arch = "wasm32"))]
#[path = "native.rs"]
mod imp;

#[cfg(not(target_arch = "wasm32"))]
pub use imp::{NativeHost, set_native_config, set_native_host, set_native_problems};

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
