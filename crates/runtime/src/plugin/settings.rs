//! The operator's sandbox for one plugin: deadline, memory, grants.

#[allow(unused_imports)]
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{DEFAULT_MEMORY_LIMIT, DEFAULT_TIMEOUT};

/// What the operator decided for one plugin's sandbox. The engine's config
/// builds it; the defaults grant nothing. (What the engine decides around
/// the sandbox, such as the plugin's order and the fields it may change,
/// is the engine's own.)
#[derive(Debug, Clone, PartialEq)]
pub struct PluginSettings {
    /// CPU deadline of one call.
    pub timeout: Duration,
    /// Memory cap of one call, in bytes.
    pub memory_limit: usize,
    /// Directories the plugin may read (read-only).
    pub paths: Vec<PathGrant>,
    /// Environment variables the plugin may read.
    pub env: Vec<String>,
    /// The plugin's own configuration.
    pub config: serde_json::Value,
    /// When set, the plugin's sha256 must equal it.
    pub sha256: Option<String>,
    /// What to do when the plugin asks for a path or variable not granted.
    pub on_ungranted: Ungranted,
    /// Whether it may read the container runtime's facts
    /// (`host.container-runtime`).
    pub container_runtime: bool,
    /// Whether one instance serves call after call (see
    /// [`Plugin::call_set`](super::Plugin::call_set)), instead of a fresh one per call.
    pub reuse_instance: bool,
    /// With `reuse_instance`: the operator says its kept instance carries
    /// nothing from one call to the next that changes an answer, so that a
    /// call's trace may stand for the next call (a fresh instance carries
    /// nothing by construction). Without it, a kept instance's calls are
    /// [`crate::Unrepeatable::KeptInstance`].
    pub stateless: bool,
    /// The streams it may follow (a reacting plugin's, WIT 0.2.1).
    pub streams: Vec<crate::reactor::StreamGrant>,
    /// Events it may record per minute, however many calls it makes
    /// ([`crate::EVENTS_PER_WINDOW`] by default).
    pub events_per_minute: u32,
}

impl Default for PluginSettings {
    fn default() -> Self {
        Self {
            timeout: DEFAULT_TIMEOUT,
            memory_limit: DEFAULT_MEMORY_LIMIT,
            paths: Vec::new(),
            env: Vec::new(),
            config: serde_json::Value::Object(Default::default()),
            sha256: None,
            on_ungranted: Ungranted::LoadWithout,
            container_runtime: false,
            reuse_instance: false,
            stateless: false,
            streams: Vec::new(),
            events_per_minute: crate::EVENTS_PER_WINDOW,
        }
    }
}

/// One granted read-only directory: the plugin sees `path`, served from
/// `from` on the host. They are the same unless the operator maps one (a
/// container that mounts the host's `/proc` at `/host/proc`, or a fixture
/// tree in a test).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PathGrant {
    /// The path inside the sandbox, which the plugin asks for.
    pub path: PathBuf,
    /// The host directory behind it.
    pub from: PathBuf,
}

impl PathGrant {
    /// A directory granted at its own path.
    pub fn same(path: impl Into<PathBuf>) -> Self {
        let path = path.into();
        Self {
            from: path.clone(),
            path,
        }
    }

    /// Where `guest`, a path inside [`PathGrant::path`], lies on the host;
    /// `None` when it is not inside.
    pub fn host_path(&self, guest: &Path) -> Option<PathBuf> {
        let rest = guest.strip_prefix(&self.path).ok()?;
        Some(if rest.as_os_str().is_empty() {
            self.from.clone()
        } else {
            self.from.join(rest)
        })
    }
}

impl std::fmt::Display for PathGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.path == self.from {
            true => write!(f, "{}", self.path.display()),
            false => write!(f, "{} (from {})", self.path.display(), self.from.display()),
        }
    }
}

/// What happens to a plugin that asks for a capability it was not granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ungranted {
    /// Load it without the capability, and log what was withheld.
    #[default]
    LoadWithout,
    /// Refuse to load it.
    Refuse,
}

/// A plugin's description of itself, validated at load: the SDK's
/// [`nodestatus_apimachinery::Metadata`], the WIT's `metadata` record.
pub use nodestatus_apimachinery::Metadata;
