//! The operator's configuration: one YAML file with the KubeletConfiguration
//! field names where one exists, overridden by flags, validated once.
//!
//! Every error names the field and what it accepts; an unknown field is
//! refused with the closest valid name.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nodestatus_runtime::{CompileLimits, Compiler, RuntimeOptions, Tiers};

mod parse;
mod plugins;
mod settings;
#[cfg(test)]
mod tests;
mod validate;
mod values;
mod warnings;

pub use parse::{MAX_YAML_VALUES, closest};
pub use plugins::{
    DEFAULT_PULL_INTERVAL, FailurePolicy, FieldsFile, GRANTABLE_UNDER_PROTECTED, ImageSource,
    PROTECTED_PATHS, PathFile, PluginConfig, PluginFile, PullPolicy, SettingsFn, VerifyFile,
    protected_root,
};
pub use settings::{
    Class, ConfigFile, DEFAULT_CONFIG, Layers, SETTINGS, Setting, reference, top_keys,
};
pub use values::{GoDuration, Labels, MAX_DURATION, Taint, Taints, yaml_to_json};
pub use warnings::{Severity, Warning, bundled_plugin_names, plugin_names_in};

/// A configuration error: which field, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The file could not be read.
    #[error("cannot read config file {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is larger than [`MAX_CONFIG_BYTES`]; it is not read.
    #[error("{}: the file is {size} bytes or more, over the limit of {limit} bytes for a config file: is this the right file? Put large plugin data in files the plugin is granted, not in the config", .path.display())]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, or how much was read before the limit was passed.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The path is not a regular file (a FIFO, a device, a directory).
    #[error("{}: this is a {kind}, not a regular file: give the path of a YAML file", .path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
        /// What it is instead.
        kind: &'static str,
    },
    /// The file is not UTF-8 text.
    #[error("{}: invalid UTF-8 at line {line}, column {column}: save the file as UTF-8 text", .path.display())]
    NotUtf8 {
        /// The file.
        path: PathBuf,
        /// The line of the first bad byte (from 1).
        line: usize,
        /// Its column, in bytes (from 1).
        column: usize,
    },
    /// The file is not valid YAML for this schema.
    #[error("{}: {message}", .path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the closest valid field name for a typo.
        message: String,
    },
    /// A value is out of range.
    #[error("{field}: {message}")]
    Invalid {
        /// The field, as it is written in the file.
        field: String,
        /// What is wrong and what is accepted.
        message: String,
    },
}

/// Convenience alias for this module's results.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// [`Error::Invalid`] for `field`, with `message`.
    fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// The Node's name.
    pub node_name: String,
    /// `hostnameOverride`, if set.
    pub hostname_override: Option<String>,
    /// `nodeIP`, parsed.
    pub node_ips: Vec<std::net::IpAddr>,
    /// Labels added at registration.
    pub node_labels: BTreeMap<String, String>,
    /// Whether to create the Node.
    pub register_node: bool,
    /// Taints added at registration.
    pub register_with_taints: Vec<Taint>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// How often the setters run.
    pub node_status_update_frequency: Duration,
    /// How often an unchanged status is reported anyway.
    pub node_status_report_frequency: Duration,
    /// The Lease's duration in seconds.
    pub node_lease_duration_seconds: i32,
    /// The most images reported; -1 for no limit.
    pub node_status_max_images: i64,
    /// The plugin directory.
    pub plugin_dir: PathBuf,
    /// The precompile cache directory.
    pub cache_dir: PathBuf,
    /// The precompile cache's size cap in bytes (`cacheMaxSize`).
    pub cache_max_bytes: u64,
    /// The bounds of one plugin's compilation (`compileTimeout`,
    /// `compileMemoryLimit`).
    pub compile_limits: CompileLimits,
    /// Which compilers load plugins (`compiler`).
    pub compiler: Tiers,
    /// Whether passes skip setters whose inputs did not change
    /// (`incrementalPasses`).
    pub incremental: Incremental,
    /// The container runtime's CRI socket (`containerRuntimeEndpoint`;
    /// unset: [`DEFAULT_CONTAINER_RUNTIME_ENDPOINT`]; empty: `None`).
    pub container_runtime_endpoint: Option<String>,
    /// Whether the endpoint is the default one, not set by the operator: a
    /// socket that is not there then means no runtime, with no error.
    pub container_runtime_defaulted: bool,
    /// The deadline of one CRI call (`runtimeRequestTimeout`).
    pub runtime_request_timeout: Duration,
    /// Companion mode (beside a kubelet).
    pub companion: bool,
    // --- node loops (agent) ---
    /// Register the node again when it is deleted while running.
    pub re_register_deleted_node: bool,
    /// `cloudProvider: external`.
    pub external_cloud_provider: bool,
    // --- end node loops ---
    /// Per-plugin settings as written, validated.
    pub plugins: BTreeMap<String, PluginConfig>,
    /// `registries:`: how to reach each registry plugins are pulled from.
    pub registries: nodestatus_registry::Registries,
    /// The top-level `verify.key`: the key of every image without its own.
    pub verify_key: Option<PathBuf>,
    /// The top-level signature policy (`verify.allOf` / `anyOf`), instead
    /// of `verify.key`.
    pub verify_policy: Option<plugins::VerifyPolicy>,
    /// The registry cache's bounds (`registryCacheMaxSize`,
    /// `registryCacheMaxAge`).
    pub registry_cache: nodestatus_registry::cache::Limits,
}

/// The node's hostname: `hostnameOverride`, else the kernel's hostname
/// (from `facts`), lowercased, as the kubelet takes it. The default of
/// `nodeName`, and the node's Hostname address and hostname label.
pub fn hostname(
    hostname_override: Option<&str>,
    facts: &nodestatus_runtime::facts::Facts,
) -> String {
    match hostname_override {
        Some(h) => h.to_lowercase(),
        None => facts.system().hostname.to_lowercase(),
    }
}

impl Config {
    /// The node's hostname ([`hostname`]).
    pub fn hostname(&self, facts: &nodestatus_runtime::facts::Facts) -> String {
        hostname(self.hostname_override.as_deref(), facts)
    }

    /// The plugin runtime's options: the cache directory and cap, the
    /// compilation in a child of `compiler_exe` (the running `nodestatus`)
    /// under `compileTimeout` and `compileMemoryLimit` (in-process without
    /// one), and the `compiler`s (with `tiered`, Cranelift's code replaces
    /// Winch's in the background).
    pub fn runtime_options(&self, compiler_exe: Option<PathBuf>) -> RuntimeOptions {
        RuntimeOptions {
            cache_dir: Some(self.cache_dir.clone()),
            cache_max_bytes: self.cache_max_bytes,
            compiler: match compiler_exe {
                Some(exe) => Compiler::Process {
                    exe,
                    limits: self.compile_limits,
                },
                None => Compiler::InProcess,
            },
            tiers: self.compiler,
            tier_up: true,
        }
    }
}

/// The default plugin directory.
pub const DEFAULT_PLUGIN_DIR: &str = "/etc/nodestatus/plugins";

/// The default `containerRuntimeEndpoint`: the kubelet's (containerd's
/// socket). A socket that is not there means no runtime, with no error.
pub const DEFAULT_CONTAINER_RUNTIME_ENDPOINT: &str = "unix:///run/containerd/containerd.sock";

/// The default precompile cache directory: `$XDG_CACHE_HOME/nodestatus/precompiled`
/// or `~/.cache/nodestatus/precompiled`.
pub fn default_cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("/var/cache"))
        .join("nodestatus/precompiled")
}

/// The largest config file read: a ConfigMap holds at most 1 MiB.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

impl Config {
    /// The CRI client for `containerRuntimeEndpoint`, unless it is empty
    /// (the endpoint was checked when the config was validated). For the
    /// default endpoint, a socket that is not there is no runtime
    /// ([`crate::cri::Client::present`]).
    /// A build without the `cri` feature has none.
    #[cfg(feature = "cri")]
    pub fn cri_client(&self) -> Option<crate::cri::Client> {
        let endpoint = self.container_runtime_endpoint.as_deref()?;
        crate::cri::Client::new(endpoint, self.runtime_request_timeout)
            .ok()
            .map(|c| c.optional(self.container_runtime_defaulted))
    }

    /// The CRI client: none in a build without the `cri` feature (a
    /// `containerRuntimeEndpoint` the operator set was refused when the
    /// config was checked).
    #[cfg(not(feature = "cri"))]
    pub fn cri_client(&self) -> Option<crate::cri::Client> {
        None
    }

    /// [`Config::plugin_settings`] as the plugin directory takes it.
    pub fn settings_fn(self: &std::sync::Arc<Self>) -> SettingsFn {
        let cfg = self.clone();
        std::sync::Arc::new(move |name| cfg.plugin_settings(name))
    }

    /// The settings for a plugin name: its config section, or the defaults.
    ///
    /// The KubeletConfiguration fields that a kubelet setter needs are passed
    /// into that setter's own config unless it sets them itself:
    /// `hostnameOverride` and `nodeIP` to `node-address`, and
    /// `nodeStatusMaxImages` (as `maxImages`) to `images`.
    pub fn plugin_settings(&self, name: &str) -> PluginConfig {
        let mut s = self.plugins.get(name).cloned().unwrap_or_default();
        let inherited: Vec<(&str, serde_json::Value)> = match name {
            "node-address" => [
                self.hostname_override
                    .as_ref()
                    .map(|h| ("hostnameOverride", serde_json::json!(h))),
                (!self.node_ips.is_empty()).then(|| {
                    let ips: Vec<String> = self.node_ips.iter().map(ToString::to_string).collect();
                    ("nodeIP", serde_json::json!(ips.join(",")))
                }),
            ]
            .into_iter()
            .flatten()
            .collect(),
            "images" => vec![("maxImages", serde_json::json!(self.node_status_max_images))],
            _ => Vec::new(),
        };
        if let Some(obj) = s.sandbox.config.as_object_mut() {
            for (k, v) in inherited {
                let unset = obj.get(k).is_none_or(|x| x.is_null() || x == "");
                if unset {
                    obj.insert(k.to_owned(), v);
                }
            }
        }
        s
    }
}

/// Whether passes skip setters whose inputs did not change
/// (`incrementalPasses`; the passes' side is `pipeline::memo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Incremental {
    /// Every setter is called every pass, as the kubelet calls its own.
    Off,
    /// A setter whose inputs did not change is not called (the default).
    #[default]
    On,
    /// Every setter is called, and a result that would have stood is
    /// compared with the called one: for tests.
    Check,
}

impl Incremental {
    /// The config's names, in order.
    pub const NAMES: [&'static str; 3] = ["on", "off", "check"];

    /// The mode named `name`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "on" => Some(Self::On),
            "off" => Some(Self::Off),
            "check" => Some(Self::Check),
            _ => None,
        }
    }

    /// Its config name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On => "on",
            Self::Off => "off",
            Self::Check => "check",
        }
    }
}

impl std::fmt::Display for Incremental {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
