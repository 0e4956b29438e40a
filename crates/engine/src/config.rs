//! The operator's configuration: one YAML file with the KubeletConfiguration
//! field names where one exists, overridden by flags, validated once.
//!
//! Every error names the field and what it accepts; an unknown field is
//! refused with the closest valid name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use nodestatus_model::policy::Allowance;
use nodestatus_runtime::{
    CompileLimits, Compiler, PathGrant, PluginSettings, RuntimeOptions, Ungranted,
};

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

fn invalid(field: impl Into<String>, message: impl Into<String>) -> Error {
    Error::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// A Go-style duration: `10s`, `5m`, `1m30s`, `250ms`, `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub Duration);

/// The longest duration [`GoDuration::parse`] accepts: Go's own limit
/// (`time.Duration` is an int64 of nanoseconds, about 292 years). Every field
/// has a much smaller range of its own.
pub const MAX_DURATION: Duration = Duration::from_nanos(i64::MAX as u64);

impl GoDuration {
    /// Parses `1h2m3s4ms` style text, as Go's `time.ParseDuration` does,
    /// with checked arithmetic: a negative duration, or one longer than
    /// [`MAX_DURATION`], is an error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("{s:?} is not a duration (for example 10s, 5m, 1m30s, 250ms)");
        let t = s.trim();
        if t == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if t.starts_with('-') {
            return Err(format!(
                "{s:?} is negative: give a positive duration such as 10s"
            ));
        }
        let mut rest = t.strip_prefix('+').unwrap_or(t);
        if rest.is_empty() {
            return Err(err());
        }
        let too_long = || {
            format!(
                "{s:?} is too long: the longest duration is 2562047h (about 292 years), and each field has a smaller range"
            )
        };
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let int_end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (int, tail) = rest.split_at(int_end);
            let (frac, tail) = match tail.strip_prefix('.') {
                Some(t) => t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len())),
                None => ("", tail),
            };
            if int.is_empty() && frac.is_empty() {
                return Err(err());
            }
            let unit_end = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_end);
            let nanos: u128 = match unit {
                "ns" => 1,
                "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                "" => {
                    return Err(format!(
                        "{s:?} has a number without a unit: add one of ns, us, ms, s, m, h (for example 10s)"
                    ));
                }
                _ => return Err(err()),
            };
            // Leading zeros cannot overflow; any other digit past the 25th does.
            let int = int.trim_start_matches('0');
            let whole: u128 = if int.is_empty() {
                0
            } else if int.len() > 25 {
                return Err(too_long());
            } else {
                int.parse().map_err(|_| err())?
            };
            // Digits past the 18th are below a nanosecond for every unit.
            let frac = &frac[..frac.len().min(18)];
            let part: u128 = if frac.is_empty() {
                0
            } else {
                frac.parse::<u128>().map_err(|_| err())? * nanos / 10u128.pow(frac.len() as u32)
            };
            total = whole
                .checked_mul(nanos)
                .and_then(|w| w.checked_add(part))
                .and_then(|v| v.checked_add(total))
                .filter(|v| *v <= MAX_DURATION.as_nanos())
                .ok_or_else(too_long)?;
            rest = next;
        }
        Ok(Self(Duration::from_nanos(total as u64)))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = GoDuration;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration such as 10s, 5m or 250ms")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<GoDuration, E> {
                GoDuration::parse(s).map_err(E::custom)
            }
            // A bare number (`10`) reads as YAML's integer: say that it
            // needs a unit, not that a string was expected.
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_u128<E: serde::de::Error>(self, n: u128) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i128<E: serde::de::Error>(self, n: i128) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl std::str::FromStr for GoDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

/// `nodeLabels`: in the file a map, as a flag `key=value,key=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Labels(pub BTreeMap<String, String>);

/// The comma-separated items of a list flag, each cut in two by `cut`; an
/// item it cannot cut is an error that shows the expected `form`.
fn flag_items<'a>(
    s: &'a str,
    form: &'a str,
    cut: fn(&'a str) -> Option<(&'a str, &'a str)>,
) -> impl Iterator<Item = Result<(String, String), String>> + 'a {
    s.split(',').filter(|i| !i.is_empty()).map(move |i| {
        cut(i)
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .ok_or_else(|| format!("{i:?} is not {form}"))
    })
}

impl std::str::FromStr for Labels {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        flag_items(s, "key=value", |i| i.split_once('='))
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// `registerWithTaints`: in the file a list of taints, as a flag
/// `key=value:Effect,key:Effect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Taints(pub Vec<Taint>);

impl std::str::FromStr for Taints {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        flag_items(s, "key=value:Effect", |i| i.rsplit_once(':'))
            .map(|item| {
                let (kv, effect) = item?;
                let (key, value) = kv.split_once('=').unwrap_or((&kv, ""));
                Ok(Taint {
                    key: key.into(),
                    value: value.into(),
                    effect,
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// A taint, as `registerWithTaints` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

/// Field allowance patterns for one plugin.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FieldsFile {
    /// Allow patterns; `@default` stands for the built-in allowance.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Deny patterns.
    #[serde(default)]
    pub deny: Vec<String>,
}

/// One entry of a plugin's `paths`: a directory granted at its own path
/// (`/proc`), or one the plugin sees at `path` and that comes from `from` on
/// the host (`{path: /proc, from: /host/proc}`).
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "an absolute path (/proc), or {path: /proc, from: /host/proc}"
)]
pub enum PathFile {
    /// Granted at its own path.
    Same(String),
    /// Granted at `path`, served from `from`.
    Mapped {
        /// The path the plugin sees.
        path: String,
        /// The host directory behind it.
        from: String,
    },
}

/// One plugin's section of the config file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PluginFile {
    /// Whether it runs.
    pub enabled: Option<bool>,
    /// Its position; lower runs first.
    pub order: Option<i32>,
    /// CPU deadline of one call.
    pub timeout: Option<GoDuration>,
    /// Memory cap of one call, as a quantity (`64Mi`).
    pub memory_limit: Option<String>,
    /// Overrides the plugin's `affects-readiness`.
    pub affects_readiness: Option<bool>,
    /// Read-only directories granted.
    #[serde(default)]
    pub paths: Vec<PathFile>,
    /// Environment variables granted.
    #[serde(default)]
    pub env: Vec<String>,
    /// Field allowance.
    #[serde(default)]
    pub fields: FieldsFile,
    /// The plugin's own config, passed as JSON.
    pub config: Option<serde_json::Value>,
    /// Required sha256 of the plugin file.
    pub sha256: Option<String>,
    /// Grants the container runtime's facts (`host.container-runtime`).
    #[serde(default)]
    pub container_runtime: bool,
    /// Keeps one instance from call to call instead of a fresh one per call.
    #[serde(default)]
    pub reuse_instance: bool,
    /// `load-without` (default) or `refuse`.
    pub on_ungranted: Option<Ungranted>,
    /// An OCI reference the plugin is pulled from (`HOST[:PORT]/repo:tag`
    /// or `...@sha256:<hex>`), instead of a file in the plugin directory.
    pub image: Option<String>,
    /// How often a tag is resolved again (5m); a digest is never pulled
    /// again once cached.
    pub pull_interval: Option<GoDuration>,
    /// The key the image must be signed with (over the top-level `verify`).
    pub verify: Option<VerifyFile>,
}

/// `verify:` on a plugin or at the top level: the PEM public key whose
/// cosign-compatible signature an image must carry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyFile {
    /// The PEM public key file (ECDSA P-256).
    pub key: PathBuf,
}

/// The default `pullInterval`: how often a tag is resolved again.
pub const DEFAULT_PULL_INTERVAL: Duration = Duration::from_secs(300);

/// A plugin pulled from a registry ([`crate::oci`]): where from, how
/// often, and the key its signature must check with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSource {
    /// The reference (a tag, or pinned by digest).
    pub reference: nodestatus_registry::Reference,
    /// How often a tag is resolved again.
    pub pull_interval: Duration,
    /// The public key required (the plugin's `verify`, else the top-level
    /// one), checked readable and valid when the config was validated.
    pub key: Option<PathBuf>,
}

/// What the operator decided for one plugin: its sandbox
/// ([`PluginSettings`]: deadline, memory cap, grants, its own config), and
/// what the engine decides around it.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// Whether it is loaded at all (`enabled: false`: the file is not even
    /// compiled).
    pub enabled: bool,
    /// Its position in the pass; lower runs first. `None`: the default
    /// order ([`crate::pipeline::default_order`]).
    pub order: Option<i32>,
    /// Overrides the plugin's own `affects-readiness`.
    pub affects_readiness: Option<bool>,
    /// Which fields it may change.
    pub fields: Allowance,
    /// Its sandbox.
    pub sandbox: PluginSettings,
    /// Pulled from a registry (`image:`), not read from the plugin
    /// directory.
    pub image: Option<ImageSource>,
}

impl Default for PluginConfig {
    fn default() -> Self {
        Self::from(PluginSettings::default())
    }
}

impl From<PluginSettings> for PluginConfig {
    /// A plugin with this sandbox and the engine's defaults around it:
    /// enabled, in the default order, with the default allowance.
    fn from(sandbox: PluginSettings) -> Self {
        Self {
            enabled: true,
            order: None,
            affects_readiness: None,
            fields: Allowance::default(),
            sandbox,
            image: None,
        }
    }
}

/// The operator's settings for each plugin name, as the plugin directory
/// asks for them ([`Config::settings_fn`]).
pub type SettingsFn = std::sync::Arc<dyn Fn(&str) -> PluginConfig + Send + Sync>;

/// The settings as one layer gives them: the config file, or the flags.
///
/// One shape serves both: each field is a config file key (its
/// KubeletConfiguration name where one exists) and a flag of the same name
/// (`nodeStatusUpdateFrequency`, `--node-status-update-frequency`).
/// [`Layers::load`] puts the flags over the file (or over the embedded
/// [`DEFAULT_CONFIG`] when no file is given), and [`ConfigFile::validate`]
/// turns the result into a [`Config`].
#[derive(Debug, Clone, Default, Deserialize, clap::Args)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ConfigFile {
    /// nodeName: the Node's name (default: the hostname, or
    /// hostnameOverride).
    #[arg(long)]
    pub node_name: Option<String>,
    /// hostnameOverride: replaces the hostname in the node's name and
    /// Hostname address.
    #[arg(long)]
    pub hostname_override: Option<String>,
    /// nodeIP: the node's IP, or two comma-separated for dual stack.
    #[serde(rename = "nodeIP")]
    #[arg(long = "node-ip")]
    pub node_ip: Option<String>,
    /// nodeLabels: labels added at registration (flag: key=value,...).
    #[arg(long, value_name = "KEY=VALUE,...")]
    pub node_labels: Option<Labels>,
    /// registerNode: create the Node (true) or wait for it (false).
    #[arg(long)]
    pub register_node: Option<bool>,
    /// registerWithTaints: taints added at registration (flag:
    /// key=value:Effect,...).
    #[arg(long, value_name = "KEY=VALUE:EFFECT,...")]
    pub register_with_taints: Option<Taints>,
    /// providerID: `spec.providerID`.
    #[serde(rename = "providerID")]
    #[arg(long = "provider-id")]
    pub provider_id: Option<String>,
    /// nodeStatusUpdateFrequency: how often the setters run (10s).
    #[arg(long)]
    pub node_status_update_frequency: Option<GoDuration>,
    /// nodeStatusReportFrequency: how often an unchanged status is
    /// reported anyway (5m).
    #[arg(long)]
    pub node_status_report_frequency: Option<GoDuration>,
    /// nodeLeaseDurationSeconds: the Lease's duration (40).
    #[arg(long)]
    pub node_lease_duration_seconds: Option<i64>,
    /// nodeStatusMaxImages: the most images reported; -1 for no limit (50).
    #[arg(long, allow_hyphen_values = true)]
    pub node_status_max_images: Option<i64>,
    /// pluginDir: the directory of *.wasm setters, watched for changes.
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// cacheDir: the precompile cache directory.
    #[arg(long)]
    pub cache_dir: Option<PathBuf>,
    /// cacheMaxSize: the precompile cache's size cap (512Mi).
    #[arg(long)]
    pub cache_max_size: Option<String>,
    /// compileTimeout: the deadline of one plugin's compilation (2m).
    #[arg(long)]
    pub compile_timeout: Option<GoDuration>,
    /// compileMemoryLimit: the memory one plugin's compilation may
    /// allocate (2Gi).
    #[arg(long)]
    pub compile_memory_limit: Option<String>,
    /// containerRuntimeEndpoint: the container runtime's CRI socket,
    /// `unix:///...`; unset: none.
    #[arg(long)]
    pub container_runtime_endpoint: Option<String>,
    /// runtimeRequestTimeout: the deadline of one CRI call (2s).
    #[arg(long)]
    pub runtime_request_timeout: Option<GoDuration>,
    /// companion: beside a real kubelet, never create the node, no lease,
    /// no Ready at shutdown; only the plugins' own fields are patched.
    #[arg(long)]
    pub companion: Option<bool>,
    // --- node loops (agent) ---
    /// reRegisterDeletedNode: register the node again when it is deleted
    /// while running (off by default: the kubelet never registers twice in
    /// one run).
    #[arg(long)]
    pub re_register_deleted_node: Option<bool>,
    /// cloudProvider: `external` means a cloud-controller-manager owns the
    /// addresses, providerID and the cloud labels; the node registers with
    /// the `uninitialized` taint.
    #[arg(long)]
    pub cloud_provider: Option<String>,
    // --- end node loops ---
    /// Per-plugin settings, by plugin name (file only).
    #[serde(default)]
    #[arg(skip)]
    pub plugins: BTreeMap<String, PluginFile>,
    /// registries: per `HOST[:PORT]`, a CA bundle (`ca`), plain HTTP
    /// (`insecure`) and pull credentials (`auth`, a dockerconfigjson file)
    /// (file only).
    #[serde(default)]
    #[arg(skip)]
    pub registries: Option<nodestatus_registry::Registries>,
    /// verify: the key every plugin `image` must be signed with, unless its
    /// own `verify` names another (file only).
    #[serde(default)]
    #[arg(skip)]
    pub verify: Option<VerifyFile>,
}

/// The default configuration, embedded in the binary: the grants and
/// settings the bundled setters need (`deploy/default-config.yaml`). Used
/// when no `--config` is given; `nodestatus config default` prints it.
pub const DEFAULT_CONFIG: &str = include_str!("../../../deploy/default-config.yaml");

/// Where the settings come from: `--config FILE` (else the embedded
/// [`DEFAULT_CONFIG`]), and the flags over it. The one place where the
/// precedence is written: flags over file over defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Layers {
    /// Config file (YAML, KubeletConfiguration field names). Default: the
    /// embedded default config (`nodestatus config default` prints it).
    #[arg(long = "config", id = "config", value_name = "FILE")]
    pub file: Option<PathBuf>,
    /// The flags, each over the file's field of the same name.
    #[command(flatten)]
    pub flags: ConfigFile,
}

impl Layers {
    /// The file as written: `--config`, else the embedded default.
    pub fn written(&self) -> Result<ConfigFile> {
        match &self.file {
            Some(p) => ConfigFile::read(p),
            None => ConfigFile::parse(DEFAULT_CONFIG, Path::new("(embedded default config)")),
        }
    }

    /// The flags over the file, validated.
    pub fn load(&self) -> Result<Config> {
        self.written()?.over(self.flags.clone()).validate()
    }
}

impl ConfigFile {
    /// `top` over `self`: each field that `top` sets replaces this one's.
    /// The plugin sections are the file's alone.
    pub fn over(self, top: ConfigFile) -> ConfigFile {
        ConfigFile {
            node_name: top.node_name.or(self.node_name),
            hostname_override: top.hostname_override.or(self.hostname_override),
            node_ip: top.node_ip.or(self.node_ip),
            node_labels: top.node_labels.or(self.node_labels),
            register_node: top.register_node.or(self.register_node),
            register_with_taints: top.register_with_taints.or(self.register_with_taints),
            provider_id: top.provider_id.or(self.provider_id),
            node_status_update_frequency: top
                .node_status_update_frequency
                .or(self.node_status_update_frequency),
            node_status_report_frequency: top
                .node_status_report_frequency
                .or(self.node_status_report_frequency),
            node_lease_duration_seconds: top
                .node_lease_duration_seconds
                .or(self.node_lease_duration_seconds),
            node_status_max_images: top.node_status_max_images.or(self.node_status_max_images),
            plugin_dir: top.plugin_dir.or(self.plugin_dir),
            cache_dir: top.cache_dir.or(self.cache_dir),
            cache_max_size: top.cache_max_size.or(self.cache_max_size),
            compile_timeout: top.compile_timeout.or(self.compile_timeout),
            compile_memory_limit: top.compile_memory_limit.or(self.compile_memory_limit),
            container_runtime_endpoint: top
                .container_runtime_endpoint
                .or(self.container_runtime_endpoint),
            runtime_request_timeout: top.runtime_request_timeout.or(self.runtime_request_timeout),
            companion: top.companion.or(self.companion),
            re_register_deleted_node: top
                .re_register_deleted_node
                .or(self.re_register_deleted_node),
            cloud_provider: top.cloud_provider.or(self.cloud_provider),
            plugins: self.plugins,
            registries: top.registries.or(self.registries),
            verify: top.verify.or(self.verify),
        }
    }
}

const TOP_FIELDS: &[&str] = &[
    "nodeName",
    "hostnameOverride",
    "nodeIP",
    "nodeLabels",
    "registerNode",
    "registerWithTaints",
    "providerID",
    "nodeStatusUpdateFrequency",
    "nodeStatusReportFrequency",
    "nodeLeaseDurationSeconds",
    "nodeStatusMaxImages",
    "pluginDir",
    "cacheDir",
    "cacheMaxSize",
    "compileTimeout",
    "compileMemoryLimit",
    "containerRuntimeEndpoint",
    "runtimeRequestTimeout",
    "companion",
    "reRegisterDeletedNode",
    "cloudProvider",
    "plugins",
    "registries",
    "verify",
];

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (
        a.to_lowercase().chars().collect(),
        b.to_lowercase().chars().collect(),
    );
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            cur.push(
                (prev[j] + usize::from(ca != cb))
                    .min(prev[j + 1] + 1)
                    .min(cur[j] + 1),
            );
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The closest of `candidates` to `word`, if it is close enough to be a typo.
pub fn closest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (distance(word, c), *c))
        .min()
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .map(|(_, c)| c)
}

/// Says what to do after serde's and the YAML parser's messages: the
/// closest valid name for an unknown field, the expected shape in words.
fn explain(message: String) -> String {
    let message = suggest(message);
    const ADVICE: &[(&str, &str)] = &[
        (
            "as u128, expected i64",
            "is too large: expected an integer (for example 40)",
        ),
        (
            "found character that cannot start any token",
            "found a character that cannot start any YAML token (a tab? YAML indents with spaces)",
        ),
        ("expected i64", "expected an integer (for example 40)"),
        ("expected i32", "expected an integer (for example 10)"),
        ("expected a boolean", "expected true or false"),
        (
            "expected struct ConfigFile",
            "expected a mapping of config fields (nodeName: ..., plugins: ...)",
        ),
        (
            "expected struct PluginFile",
            "expected a mapping of plugin settings (paths, env, config, timeout, ...), or {} for the defaults",
        ),
        (
            "expected struct FieldsFile",
            "expected {allow: [...], deny: [...]}",
        ),
        (
            "expected struct Taint",
            "expected {key: ..., value: ..., effect: NoSchedule}",
        ),
        ("expected a map", "expected a mapping (key: value)"),
        ("expected a sequence", "expected a list ([a, b])"),
        (
            "recursion limit exceeded",
            "nested more than 128 levels deep: a config is a few levels deep, flatten it",
        ),
        (
            "repetition limit exceeded",
            "YAML aliases repeat too much (a \"billion laughs\" file?): write the values out without aliases",
        ),
        (
            "more than one document is not supported",
            "more than one document is not supported: put every field in one document (remove the `---` separators)",
        ),
    ];
    match ADVICE.iter().find(|(from, _)| message.contains(from)) {
        Some((from, to)) => message.replacen(from, to, 1),
        None => message,
    }
}

/// Adds "did you mean" to serde's unknown-field messages.
fn suggest(message: String) -> String {
    let Some(rest) = message
        .strip_prefix("unknown field `")
        .or_else(|| message.split("unknown field `").nth(1))
    else {
        return message;
    };
    let Some((field, tail)) = rest.split_once('`') else {
        return message;
    };
    let expected: Vec<&str> = tail.split('`').skip(1).step_by(2).collect();
    let list = if expected.is_empty() {
        TOP_FIELDS.to_vec()
    } else {
        expected
    };
    // The suggestion goes right after the field, before the long list.
    match closest(field, &list) {
        Some(c) => message.replacen(
            &format!("unknown field `{field}`"),
            &format!("unknown field `{field}` (did you mean `{c}`?)"),
            1,
        ),
        None => message,
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
    /// The container runtime's CRI socket (`containerRuntimeEndpoint`).
    pub container_runtime_endpoint: Option<String>,
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

    /// Each top-level setting in force, its value, and where it came from:
    /// `flag` (set in `flags`), `file` (set in `written`), or `default`.
    pub fn provenance(
        &self,
        written: &ConfigFile,
        flags: &ConfigFile,
    ) -> Vec<(&'static str, String, &'static str)> {
        let mut out = Vec::new();
        let mut row = |key: &'static str, value: String, set: fn(&ConfigFile) -> bool| {
            let source = if set(flags) {
                "flag"
            } else if set(written) {
                "file"
            } else {
                "default"
            };
            out.push((key, value, source));
        };
        row("nodeName", self.node_name.clone(), |c| {
            c.node_name.is_some()
        });
        row("pluginDir", self.plugin_dir.display().to_string(), |c| {
            c.plugin_dir.is_some()
        });
        row("cacheDir", self.cache_dir.display().to_string(), |c| {
            c.cache_dir.is_some()
        });
        row(
            "cacheMaxSize",
            format!("{} bytes", self.cache_max_bytes),
            |c| c.cache_max_size.is_some(),
        );
        row(
            "nodeStatusUpdateFrequency",
            format!("{:?}", self.node_status_update_frequency),
            |c| c.node_status_update_frequency.is_some(),
        );
        row(
            "nodeStatusReportFrequency",
            format!("{:?}", self.node_status_report_frequency),
            |c| c.node_status_report_frequency.is_some(),
        );
        row(
            "nodeLeaseDurationSeconds",
            self.node_lease_duration_seconds.to_string(),
            |c| c.node_lease_duration_seconds.is_some(),
        );
        row(
            "nodeStatusMaxImages",
            self.node_status_max_images.to_string(),
            |c| c.node_status_max_images.is_some(),
        );
        row("registerNode", self.register_node.to_string(), |c| {
            c.register_node.is_some()
        });
        row("companion", self.companion.to_string(), |c| {
            c.companion.is_some()
        });
        row(
            "compileTimeout",
            format!("{:?}", self.compile_limits.timeout),
            |c| c.compile_timeout.is_some(),
        );
        row(
            "compileMemoryLimit",
            format!("{} bytes", self.compile_limits.memory),
            |c| c.compile_memory_limit.is_some(),
        );
        row(
            "containerRuntimeEndpoint",
            self.container_runtime_endpoint
                .clone()
                .unwrap_or_else(|| "(none)".into()),
            |c| c.container_runtime_endpoint.is_some(),
        );
        row(
            "runtimeRequestTimeout",
            format!("{:?}", self.runtime_request_timeout),
            |c| c.runtime_request_timeout.is_some(),
        );
        out
    }

    /// The plugin runtime's options: the cache directory and cap, and the
    /// compilation in a child of `compiler_exe` (the running `nodestatus`)
    /// under `compileTimeout` and `compileMemoryLimit`; in-process without
    /// one.
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
        }
    }
}

/// The default plugin directory.
pub const DEFAULT_PLUGIN_DIR: &str = "/etc/nodestatus/plugins";

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

/// The most values (scalars, lists and mappings, with aliases expanded) that
/// a config file may hold. It bounds what YAML aliases can expand to (a
/// "billion laughs" file); a real config holds a few hundred.
pub const MAX_YAML_VALUES: usize = 100_000;

/// Reads the config file: a regular file of at most `MAX_CONFIG_BYTES`,
/// never hanging on a FIFO ([`nodestatus_runtime::files::read_regular`]).
fn read_capped(path: &Path) -> Result<Vec<u8>> {
    use nodestatus_runtime::files::Error as F;
    nodestatus_runtime::files::read_regular(path, MAX_CONFIG_BYTES).map_err(|e| match e {
        F::Io(source) => Error::Read {
            path: path.to_owned(),
            source,
        },
        F::NotRegular { kind } => Error::NotRegular {
            path: path.to_owned(),
            kind,
        },
        F::TooLarge { size, limit } => Error::TooLarge {
            path: path.to_owned(),
            size,
            limit,
        },
    })
}

/// The line and column (from 1, column in bytes) of byte `offset`.
fn position(bytes: &[u8], offset: usize) -> (usize, usize) {
    let before = &bytes[..offset];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let column = offset
        - before
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1)
        + 1;
    (line, column)
}

/// A walk over any YAML value that counts the values (aliases expanded),
/// and refuses duplicate keys in a mapping.
#[derive(Clone, Copy)]
struct Walk<'a> {
    budget: &'a std::cell::Cell<usize>,
}

impl Walk<'_> {
    fn spend<E: serde::de::Error>(self) -> Result<(), E> {
        match self.budget.get().checked_sub(1) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => Err(E::custom(format_args!(
                "the file expands to more than {MAX_YAML_VALUES} values (YAML aliases, a \"billion laughs\" file?): write the values out, without aliases that repeat large parts"
            ))),
        }
    }
}

/// A mapping key as text, when it is a scalar (other keys are walked, with
/// the same budget, and not compared).
struct Key<'a>(Walk<'a>);

impl<'de> serde::de::DeserializeSeed<'de> for Key<'_> {
    type Value = Option<String>;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Key<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a mapping key")
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Some(v.to_string()))
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some("null".into()))
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(Some("null".into()))
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_seq(self.0, seq).map(|()| None)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_map(self.0, map).map(|()| None)
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        serde::de::Visitor::visit_enum(self.0, data).map(|()| None)
    }
}

impl<'de> serde::de::DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<(), E> {
        self.spend()
    }
    fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<(), E> {
        self.spend()
    }
    fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<(), E> {
        self.spend()
    }
    fn visit_i128<E: serde::de::Error>(self, _: i128) -> Result<(), E> {
        self.spend()
    }
    fn visit_u128<E: serde::de::Error>(self, _: u128) -> Result<(), E> {
        self.spend()
    }
    fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<(), E> {
        self.spend()
    }
    fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<(), E> {
        self.spend()
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<(), E> {
        self.spend()
    }
    fn visit_none<E: serde::de::Error>(self) -> Result<(), E> {
        self.spend()
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.spend()?;
        while seq.next_element_seed(self)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.spend()?;
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key_seed(Key(self))? {
            self.spend()?;
            if let Some(k) = key
                && !seen.insert(k.clone())
            {
                return Err(serde::de::Error::custom(format_args!(
                    "the key {k:?} appears twice in one mapping: keep one (YAML would silently use the last)"
                )));
            }
            map.next_value_seed(self)?;
        }
        Ok(())
    }
    fn visit_enum<A: serde::de::EnumAccess<'de>>(self, data: A) -> Result<(), A::Error> {
        // A tagged value (`!tag value`).
        use serde::de::VariantAccess;
        let ((), variant) = data.variant_seed(self)?;
        variant.newtype_variant_seed(self)
    }
}

impl ConfigFile {
    /// Reads and parses a YAML file: a regular file (a FIFO or a device is
    /// refused before it is read, so it cannot block the start), at most
    /// [`MAX_CONFIG_BYTES`], in UTF-8.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = read_capped(path)?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            let (line, column) = position(&bytes, e.valid_up_to());
            Error::NotUtf8 {
                path: path.to_owned(),
                line,
                column,
            }
        })?;
        Self::parse(text, path)
    }

    /// Parses YAML text; `path` is for messages.
    ///
    /// The text is walked once as plain YAML first, which refuses duplicate
    /// keys (serde would keep the last one silently) and aliases that expand
    /// to more than [`MAX_YAML_VALUES`] values, before it is read as this
    /// schema.
    pub fn parse(text: &str, path: &Path) -> Result<Self> {
        if text.trim().is_empty() {
            return Ok(Self::default());
        }
        let parse_error = |e: serde_yaml::Error| Error::Parse {
            path: path.to_owned(),
            message: explain(e.to_string()),
        };
        let budget = std::cell::Cell::new(MAX_YAML_VALUES);
        serde::de::DeserializeSeed::deserialize(
            Walk { budget: &budget },
            serde_yaml::Deserializer::from_str(text),
        )
        .map_err(parse_error)?;
        serde_yaml::from_str(text).map_err(parse_error)
    }

    /// Checks every value and applies the defaults.
    pub fn validate(self) -> Result<Config> {
        let node_name = self.node_name.clone().unwrap_or_else(|| {
            hostname(
                self.hostname_override.as_deref(),
                &nodestatus_runtime::facts::Facts::default(),
            )
        });
        validate_dns_subdomain(&node_name).map_err(|m| invalid("nodeName", m))?;
        if let Some(h) = &self.hostname_override {
            validate_dns_subdomain(h).map_err(|m| invalid("hostnameOverride", m))?;
        }
        let node_ips = match &self.node_ip {
            None => Vec::new(),
            Some(s) => parse_node_ips(s).map_err(|m| invalid("nodeIP", m))?,
        };
        let node_labels = self.node_labels.unwrap_or_default().0;
        let register_with_taints = self.register_with_taints.unwrap_or_default().0;
        for (k, v) in &node_labels {
            let field = format!("nodeLabels[{k}]");
            nodestatus_model::policy::validate_qualified_name(k).map_err(|m| invalid(&field, m))?;
            nodestatus_model::policy::validate_label_value(v).map_err(|m| invalid(&field, m))?;
            if !nodestatus_model::policy::node_restriction_allows_label(k) {
                return Err(invalid(
                    field,
                    "NodeRestriction refuses this label from a node: labels under kubernetes.io and k8s.io must be the kubelet's well-known ones or under kubelet.kubernetes.io or node.kubernetes.io, and node-restriction.kubernetes.io is never allowed",
                ));
            }
        }
        for (i, t) in register_with_taints.iter().enumerate() {
            let field = format!("registerWithTaints[{i}]");
            nodestatus_model::policy::validate_qualified_name(&t.key)
                .map_err(|m| invalid(&field, m))?;
            nodestatus_model::policy::validate_label_value(&t.value)
                .map_err(|m| invalid(&field, m))?;
            if !matches!(
                t.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute"
            ) {
                return Err(invalid(
                    field,
                    format!(
                        "effect {:?} must be NoSchedule, PreferNoSchedule or NoExecute",
                        t.effect
                    ),
                ));
            }
            if register_with_taints[..i]
                .iter()
                .any(|o| o.key == t.key && o.effect == t.effect)
            {
                return Err(invalid(
                    field,
                    format!(
                        "a second taint with key {:?} and effect {}: the apiserver refuses duplicates, keep one",
                        t.key, t.effect
                    ),
                ));
            }
        }
        let update = self
            .node_status_update_frequency
            .map_or(Duration::from_secs(10), |d| d.0);
        if update < Duration::from_millis(100) || update > Duration::from_secs(300) {
            return Err(invalid(
                "nodeStatusUpdateFrequency",
                format!(
                    "{update:?} is out of range: it must be between 100ms and 5m, and several times shorter than the controller's node-monitor-grace-period (40s to 50s)"
                ),
            ));
        }
        // The report frequency follows the update frequency when only that one is set.
        let report = match (
            self.node_status_report_frequency,
            self.node_status_update_frequency,
        ) {
            (Some(r), _) => r.0,
            (None, Some(u)) => u.0,
            (None, None) => Duration::from_secs(300),
        };
        if report < update {
            return Err(invalid(
                "nodeStatusReportFrequency",
                format!(
                    "{report:?} must not be shorter than nodeStatusUpdateFrequency ({update:?})"
                ),
            ));
        }
        if report > Duration::from_secs(3600) {
            return Err(invalid(
                "nodeStatusReportFrequency",
                format!("{report:?} must be at most 1h"),
            ));
        }
        let lease = self.node_lease_duration_seconds.unwrap_or(40);
        if !(1..=3600).contains(&lease) {
            return Err(invalid(
                "nodeLeaseDurationSeconds",
                format!("{lease} must be between 1 and 3600 (it must be > 0)"),
            ));
        }
        let max_images = self.node_status_max_images.unwrap_or(50);
        if max_images < -1 {
            return Err(invalid(
                "nodeStatusMaxImages",
                format!("{max_images} must be >= -1 (-1 means no limit)"),
            ));
        }
        if let Some(p) = &self.provider_id
            && (p.is_empty() || p.len() > 512)
        {
            return Err(invalid("providerID", "must be 1 to 512 characters"));
        }
        let companion = self.companion.unwrap_or(false);
        if companion && self.register_node == Some(true) {
            return Err(invalid(
                "registerNode",
                "must be false (or unset) in companion mode: the kubelet registers the node",
            ));
        }
        // --- node loops (agent) ---
        let external_cloud_provider = match self.cloud_provider.as_deref() {
            None | Some("") => false,
            Some("external") => true,
            Some(other) => {
                return Err(invalid(
                    "cloudProvider",
                    format!("{other:?}: only \"external\" (or empty) is accepted"),
                ));
            }
        };
        let re_register_deleted_node = self.re_register_deleted_node.unwrap_or(false);
        // --- end node loops ---
        let compile_limits =
            compile_limits(self.compile_timeout, self.compile_memory_limit.as_deref())?;
        let cache_max_bytes = match &self.cache_max_size {
            None => nodestatus_runtime::DEFAULT_CACHE_MAX_BYTES,
            Some(m) => {
                let q =
                    nodestatus_sdk::Quantity::parse(m).map_err(|e| invalid("cacheMaxSize", e))?;
                let bytes = q.as_units_ceil();
                if !(16 << 20..=1 << 40).contains(&bytes) {
                    return Err(invalid(
                        "cacheMaxSize",
                        format!(
                            "{m} must be between 16Mi and 1Ti (CPython alone takes about 36Mi)"
                        ),
                    ));
                }
                bytes as u64
            }
        };
        if let Some(e) = &self.container_runtime_endpoint
            && !e.is_empty()
        {
            crate::cri::socket_path(e)
                .map_err(|err| invalid("containerRuntimeEndpoint", err.to_string()))?;
        }
        let runtime_request_timeout = self
            .runtime_request_timeout
            .map_or(crate::cri::DEFAULT_REQUEST_TIMEOUT, |d| d.0);
        if runtime_request_timeout < Duration::from_millis(100)
            || runtime_request_timeout > Duration::from_secs(120)
        {
            return Err(invalid(
                "runtimeRequestTimeout",
                format!("{runtime_request_timeout:?} must be between 100ms and 2m"),
            ));
        }
        let registries = self.registries.unwrap_or_default();
        registries
            .validate()
            .map_err(|e| invalid("registries", e.to_string()))?;
        if let Some(v) = &self.verify {
            check_key("verify.key", &v.key)?;
        }
        let mut plugins = BTreeMap::new();
        for (name, p) in self.plugins {
            let global_key = self.verify.as_ref().map(|v| v.key.clone());
            let settings = plugin_settings(&name, p, global_key)?;
            plugins.insert(name, settings);
        }
        Ok(Config {
            node_name,
            hostname_override: self.hostname_override,
            node_ips,
            node_labels,
            register_node: !companion && self.register_node.unwrap_or(true),
            companion,
            register_with_taints,
            provider_id: self.provider_id,
            node_status_update_frequency: update,
            node_status_report_frequency: report,
            node_lease_duration_seconds: lease as i32,
            node_status_max_images: max_images,
            plugin_dir: self
                .plugin_dir
                .unwrap_or_else(|| PathBuf::from(DEFAULT_PLUGIN_DIR)),
            cache_dir: self.cache_dir.unwrap_or_else(default_cache_dir),
            cache_max_bytes,
            compile_limits,
            container_runtime_endpoint: self.container_runtime_endpoint.filter(|e| !e.is_empty()),
            runtime_request_timeout,
            re_register_deleted_node,
            external_cloud_provider,
            plugins,
            registries,
            verify_key: self.verify.map(|v| v.key),
        })
    }
}

fn compile_limits(timeout: Option<GoDuration>, memory: Option<&str>) -> Result<CompileLimits> {
    let mut limits = CompileLimits::default();
    if let Some(t) = timeout {
        if t.0 < Duration::from_secs(1) || t.0 > Duration::from_secs(3600) {
            return Err(invalid(
                "compileTimeout",
                format!("{:?} must be between 1s and 1h", t.0),
            ));
        }
        limits.timeout = t.0;
    }
    if let Some(m) = memory {
        let q = nodestatus_sdk::Quantity::parse(m).map_err(|e| invalid("compileMemoryLimit", e))?;
        let bytes = q.as_units_ceil();
        if !(64 << 20..=64 << 30).contains(&bytes) {
            return Err(invalid(
                "compileMemoryLimit",
                format!("{m} must be between 64Mi and 64Gi"),
            ));
        }
        limits.memory = bytes as u64;
    }
    Ok(limits)
}

/// Reads a public key file as the puller will, so that a missing or bad
/// key is refused with the config rather than at the first pull.
fn check_key(field: &str, path: &Path) -> Result<()> {
    nodestatus_registry::PublicKey::read(path)
        .map(drop)
        .map_err(|e| invalid(field, nodestatus_runtime::error_chain(&e)))
}

/// A plugin section's `image`, `pullInterval` and `verify`.
fn image_source(
    name: &str,
    p: &PluginFile,
    global_key: Option<PathBuf>,
) -> Result<Option<ImageSource>> {
    let f = |field: &str| format!("plugins.{name}.{field}");
    let Some(image) = &p.image else {
        if p.pull_interval.is_some() {
            return Err(invalid(
                f("pullInterval"),
                "applies only to a plugin pulled from a registry: add image: HOST/repo:tag, or remove it",
            ));
        }
        if p.verify.is_some() {
            return Err(invalid(
                f("verify"),
                "applies only to a plugin pulled from a registry: add image: HOST/repo:tag, or remove it (a file in the plugin directory is pinned with sha256:)",
            ));
        }
        return Ok(None);
    };
    let reference = nodestatus_registry::Reference::parse(image)
        .map_err(|e| invalid(f("image"), e.to_string()))?;
    let named = nodestatus_runtime::name_of_file(Path::new(&format!("{name}.wasm")));
    if name.contains('/') || named.as_deref() != Some(name) {
        return Err(invalid(
            format!("plugins.{name}"),
            "a plugin pulled from a registry is named by its section: use lowercase letters, digits and '-' (no '_' or '/')",
        ));
    }
    if p.sha256.is_some() {
        return Err(invalid(
            f("sha256"),
            "pins a file in the plugin directory; pin an image by its digest instead (image: HOST/repo@sha256:<hex>)",
        ));
    }
    let pull_interval = p.pull_interval.map_or(DEFAULT_PULL_INTERVAL, |d| d.0);
    if pull_interval < Duration::from_secs(1) || pull_interval > Duration::from_secs(24 * 3600) {
        return Err(invalid(
            f("pullInterval"),
            format!("{pull_interval:?} must be between 1s and 24h"),
        ));
    }
    let key = match &p.verify {
        Some(v) => {
            check_key(&f("verify.key"), &v.key)?;
            Some(v.key.clone())
        }
        None => global_key,
    };
    Ok(Some(ImageSource {
        reference,
        pull_interval,
        key,
    }))
}

fn plugin_settings(name: &str, p: PluginFile, global_key: Option<PathBuf>) -> Result<PluginConfig> {
    let f = |field: &str| format!("plugins.{name}.{field}");
    let image = image_source(name, &p, global_key)?;
    let mut s = PluginSettings::default();
    if let Some(t) = p.timeout {
        if t.0 < Duration::from_millis(10) || t.0 > Duration::from_secs(60) {
            return Err(invalid(
                f("timeout"),
                format!("{:?} must be between 10ms and 60s", t.0),
            ));
        }
        s.timeout = t.0;
    }
    if let Some(m) = &p.memory_limit {
        let q = nodestatus_sdk::Quantity::parse(m).map_err(|e| invalid(f("memoryLimit"), e))?;
        let bytes = q.as_units_ceil();
        if !(1 << 20..=4 << 30).contains(&bytes) {
            return Err(invalid(
                f("memoryLimit"),
                format!("{m} must be between 1Mi and 4Gi"),
            ));
        }
        s.memory_limit = bytes as usize;
    }
    s.container_runtime = p.container_runtime;
    s.reuse_instance = p.reuse_instance;
    for (i, entry) in p.paths.iter().enumerate() {
        let abs = |field: &str, path: &str| {
            nodestatus_runtime::facts::normalize_abs(path).ok_or_else(|| {
                invalid(
                    format!("plugins.{name}.paths[{i}]{field}"),
                    if path.starts_with('/') {
                        format!("{path:?} climbs above / with '..': write the directory's absolute path without '..'")
                    } else {
                        format!("{path:?} must be an absolute path (starting with /): grants are host directories, not relative to any working directory")
                    },
                )
            })
        };
        let (grant, from_field) = match entry {
            PathFile::Same(path) => (PathGrant::same(abs("", path)?), ""),
            PathFile::Mapped { path, from } => (
                PathGrant {
                    path: abs(".path", path)?,
                    from: abs(".from", from)?,
                },
                ".from",
            ),
        };
        if let Some(root) = protected_root(&grant.from) {
            return Err(invalid(
                format!("plugins.{name}.paths[{i}]{from_field}"),
                format!(
                    "{} is in {root}, which is never granted ({}): grant the directory that holds only what the plugin reads",
                    grant.from.display(),
                    protected_why(root)
                ),
            ));
        }
        s.paths.push(grant);
    }
    for (i, var) in p.env.iter().enumerate() {
        let ok = var
            .bytes()
            .next()
            .is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !ok {
            return Err(invalid(
                format!("plugins.{name}.env[{i}]"),
                format!(
                    "{var:?} is not an environment variable name: letters, digits and '_', not starting with a digit"
                ),
            ));
        }
    }
    s.env = p.env;
    let allow = p.fields.allow.unwrap_or_else(|| vec!["@default".into()]);
    let fields = Allowance::parse(&allow, &p.fields.deny).map_err(|e| invalid(f("fields"), e))?;
    if let Some(c) = p.config {
        s.config = c;
    }
    if let Some(sha) = p.sha256 {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(invalid(f("sha256"), "must be 64 hexadecimal characters"));
        }
        s.sha256 = Some(sha.to_lowercase());
    }
    s.on_ungranted = p.on_ungranted.unwrap_or_default();
    Ok(PluginConfig {
        enabled: p.enabled.unwrap_or(true),
        order: p.order,
        affects_readiness: p.affects_readiness,
        fields,
        sandbox: s,
        image,
    })
}

/// Host paths that are never granted to a plugin, nor anything under them:
/// the node's credentials, every pod's secrets and tokens, the engine's own
/// ServiceAccount token, and the engine's own process in `/proc`.
pub const PROTECTED_PATHS: &[&str] = &[
    "/etc/kubernetes",
    "/var/lib/kubelet/pki",
    "/var/lib/kubelet/kubeconfig",
    "/var/lib/kubelet/pods",
    "/var/run/secrets",
    "/run/secrets",
    "/proc/self",
    "/proc/thread-self",
    "/proc/<pid>",
];

fn protected_why(root: &str) -> &'static str {
    match root {
        "/etc/kubernetes" | "/var/lib/kubelet/pki" | "/var/lib/kubelet/kubeconfig" => {
            "the node's credentials"
        }
        "/var/lib/kubelet/pods" => "every pod's volumes, with their secrets and tokens",
        "/var/run/secrets" | "/run/secrets" => "the engine's ServiceAccount token",
        _ => "the engine's own process: its environment and memory",
    }
}

/// The protected path that `host_path` is at or under, if any.
pub fn protected_root(host_path: &Path) -> Option<&'static str> {
    let mut c = host_path.components().skip(1);
    if host_path.starts_with("/proc") {
        c.next();
        if let Some(std::path::Component::Normal(pid)) = c.next() {
            let pid = pid.to_string_lossy();
            if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) {
                return Some("/proc/<pid>");
            }
        }
    }
    PROTECTED_PATHS
        .iter()
        .find(|p| !p.contains('<') && host_path.starts_with(p))
        .copied()
}

/// Something in a valid config that is probably not what the operator
/// meant. `config check` prints these and `run` logs them at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// The field, as it is written in the file.
    pub field: String,
    /// What is odd, and what to do.
    pub message: String,
}

impl std::fmt::Display for Warning {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

fn parse_node_ips(s: &str) -> Result<Vec<std::net::IpAddr>, String> {
    let ips: Vec<std::net::IpAddr> = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse()
                .map_err(|_| format!("{p:?} is not an IP address"))
        })
        .collect::<Result<_, _>>()?;
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv4() == ips[1].is_ipv4()) {
        return Err("give one IP, or two of different families for dual stack".into());
    }
    for ip in &ips {
        let bad = ip.is_loopback()
            || ip.is_multicast()
            || ip.is_unspecified()
            || match ip {
                std::net::IpAddr::V4(v4) => v4.is_link_local(),
                std::net::IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
            };
        if bad {
            return Err(format!(
                "{ip} is loopback, link-local, multicast or unspecified"
            ));
        }
    }
    Ok(ips)
}

/// Parses YAML into JSON (for tools and tests that read manifests).
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, String> {
    serde_yaml::from_str(text).map_err(|e| e.to_string())
}

/// A DNS subdomain (RFC 1123), as node names must be.
pub fn validate_dns_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} must be a lowercase RFC 1123 DNS subdomain: letters, digits, '-' and '.', at most 253 characters"
        ))
    }
}

impl Config {
    /// What is valid but probably not meant:
    /// - a `plugins` section whose `<name>.wasm` is not in the plugin
    ///   directory (a warning, not an error: a file dropped later is loaded
    ///   then, and one config serves nodes with different plugin sets);
    /// - a granted directory that holds one of [`PROTECTED_PATHS`] that
    ///   exists on this machine (the plugin can read it through the grant).
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out = Vec::new();
        match std::fs::read_dir(&self.plugin_dir) {
            Err(e) => out.push(Warning {
                field: "pluginDir".into(),
                message: format!(
                    "{}: {e}; plugins dropped there later are loaded then",
                    self.plugin_dir.display()
                ),
            }),
            Ok(_) => {
                for (name, p) in &self.plugins {
                    if p.image.is_none() && !self.plugin_dir.join(format!("{name}.wasm")).is_file()
                    {
                        out.push(Warning {
                            field: format!("plugins.{name}"),
                            message: format!(
                                "no {name}.wasm in {}: this section applies once that plugin is dropped there; check the spelling",
                                self.plugin_dir.display()
                            ),
                        });
                    }
                }
            }
        }
        for (name, s) in &self.plugins {
            for (i, g) in s.sandbox.paths.iter().enumerate() {
                for p in PROTECTED_PATHS.iter().filter(|p| !p.starts_with("/proc")) {
                    let p = Path::new(p);
                    if p.starts_with(&g.from) && p.exists() {
                        out.push(Warning {
                            field: format!("plugins.{name}.paths[{i}]"),
                            message: format!(
                                "{} holds {} ({}), which the plugin can read through this grant: grant a narrower directory, or map an empty directory on the same filesystem for statvfs ({{path: {}, from: <empty dir>}})",
                                g.from.display(),
                                p.display(),
                                protected_why(&p.to_string_lossy()),
                                g.path.display()
                            ),
                        });
                    }
                }
            }
        }
        out
    }

    /// The CRI client for `containerRuntimeEndpoint`, when one is set (the
    /// endpoint was checked when the config was validated).
    pub fn cri_client(&self) -> Option<crate::cri::Client> {
        let endpoint = self.container_runtime_endpoint.as_deref()?;
        crate::cri::Client::new(endpoint, self.runtime_request_timeout).ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> Result<Config> {
        ConfigFile::parse(yaml, Path::new("c.yaml"))?.validate()
    }

    #[test]
    fn list_flags_parse_like_the_kubelets_and_name_a_bad_item() {
        let labels: Labels = "a=b,example.com/c=".parse().unwrap();
        assert_eq!(labels.0["a"], "b");
        assert_eq!(labels.0["example.com/c"], "");
        assert_eq!(
            "a=b,c".parse::<Labels>().unwrap_err(),
            "\"c\" is not key=value"
        );
        let taints: Taints = "k=v:NoSchedule,k2:NoExecute".parse().unwrap();
        assert_eq!(
            taints.0,
            [
                Taint {
                    key: "k".into(),
                    value: "v".into(),
                    effect: "NoSchedule".into()
                },
                Taint {
                    key: "k2".into(),
                    value: "".into(),
                    effect: "NoExecute".into()
                }
            ]
        );
        assert!(
            "k=v"
                .parse::<Taints>()
                .unwrap_err()
                .contains("key=value:Effect")
        );
    }

    #[test]
    fn flags_replace_the_files_values_and_keep_its_plugins() {
        let file = ConfigFile::parse(
            "nodeName: from-file\nnodeLabels: {a: b}\nnodeLeaseDurationSeconds: 30\nplugins: {gpu: {}}\n",
            Path::new("c.yaml"),
        )
        .unwrap();
        let flags = ConfigFile {
            node_name: Some("from-flag".into()),
            node_labels: Some("c=d".parse().unwrap()),
            ..ConfigFile::default()
        };
        let c = file.over(flags).validate().unwrap();
        assert_eq!(c.node_name, "from-flag");
        assert_eq!(c.node_labels, BTreeMap::from([("c".into(), "d".into())]));
        assert_eq!(c.node_lease_duration_seconds, 30);
        assert!(c.plugins.contains_key("gpu"));
    }

    #[test]
    fn the_embedded_default_is_valid_and_grants_the_default_setters() {
        let c = Layers::default().load().unwrap();
        assert_eq!(c.plugins.len(), 11);
        assert!(
            c.plugin_settings("machine-info")
                .sandbox
                .paths
                .iter()
                .any(|g| g.path == Path::new("/proc"))
        );
    }

    #[test]
    fn a_path_grant_can_name_its_host_directory() {
        let c = check(
            "nodeName: n\nplugins: {gpu: {paths: [/sys, {path: /proc/driver/nvidia, from: /host/proc/driver/nvidia/}]}}",
        )
        .unwrap();
        assert_eq!(
            c.plugin_settings("gpu").sandbox.paths,
            vec![
                PathGrant::same("/sys"),
                PathGrant {
                    path: "/proc/driver/nvidia".into(),
                    from: "/host/proc/driver/nvidia".into(),
                },
            ]
        );
    }

    #[test]
    fn durations_parse() {
        assert_eq!(
            GoDuration::parse("1m30s").unwrap().0,
            Duration::from_secs(90)
        );
        assert_eq!(
            GoDuration::parse("250ms").unwrap().0,
            Duration::from_millis(250)
        );
        assert!(GoDuration::parse("10").is_err());
        assert!(GoDuration::parse("5x").is_err());
    }

    #[test]
    fn durations_are_checked_not_panicking() {
        // Panicked in Duration::from_secs_f64 before.
        let e = GoDuration::parse("99999999999999999999h").unwrap_err();
        assert!(e.contains("too long"), "{e}");
        assert!(GoDuration::parse("2562047h47m16.854775807s").is_ok());
        assert!(GoDuration::parse("2562047h47m16.854775808s").is_err());
        assert_eq!(
            GoDuration::parse("1.5h").unwrap().0,
            Duration::from_secs(5400)
        );
        assert_eq!(
            GoDuration::parse(".5s").unwrap().0,
            Duration::from_millis(500)
        );
        assert_eq!(
            GoDuration::parse("0.000000001s").unwrap().0,
            Duration::from_nanos(1)
        );
        assert_eq!(
            GoDuration::parse("1us2\u{b5}s").unwrap().0,
            Duration::from_micros(3)
        );
        assert!(GoDuration::parse("-1s").unwrap_err().contains("negative"));
        assert!(
            GoDuration::parse("1")
                .unwrap_err()
                .contains("without a unit")
        );
        for bad in ["", ".", "s", "1.2.3s", "1e3s", "NaNs", "infh", "1 s"] {
            assert!(GoDuration::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn defaults_follow_the_kubelet() {
        let c = check("nodeName: n1\n").unwrap();
        assert_eq!(c.node_status_update_frequency, Duration::from_secs(10));
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(300));
        assert_eq!(c.node_lease_duration_seconds, 40);
        assert_eq!(c.node_status_max_images, 50);
        assert!(c.register_node);
        let c = check("nodeName: n1\nnodeStatusUpdateFrequency: 20s\n").unwrap();
        assert_eq!(c.node_status_report_frequency, Duration::from_secs(20));
    }

    #[test]
    fn kubelet_fields_reach_the_setters_that_use_them() {
        let c = check("nodeName: n\nhostnameOverride: host-a\nnodeIP: 10.0.0.7\nnodeStatusMaxImages: 7\nplugins: {node-address: {config: {nodeIP: ''}}}\n").unwrap();
        let na = c.plugin_settings("node-address").sandbox.config;
        assert_eq!(na["hostnameOverride"], "host-a");
        assert_eq!(na["nodeIP"], "10.0.0.7");
        assert_eq!(c.plugin_settings("images").sandbox.config["maxImages"], 7);
        let own = check(
            "nodeName: n\nnodeStatusMaxImages: 7\nplugins: {images: {config: {maxImages: 3}}}\n",
        )
        .unwrap();
        assert_eq!(own.plugin_settings("images").sandbox.config["maxImages"], 3);
        assert!(
            c.plugin_settings("gpu")
                .sandbox
                .config
                .as_object()
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn each_mistake_names_its_field() {
        let cases = [
            (
                "nodeStatusUpdateFrequncy: 10s",
                "did you mean `nodeStatusUpdateFrequency`",
            ),
            ("nodeName: Bad_Name", "nodeName"),
            ("nodeName: n\nnodeIP: 127.0.0.1", "nodeIP"),
            (
                "nodeName: n\nnodeLabels: {node-role.kubernetes.io/master: ''}",
                "nodeLabels[node-role.kubernetes.io/master]",
            ),
            (
                "nodeName: n\nnodeLeaseDurationSeconds: 0",
                "nodeLeaseDurationSeconds",
            ),
            (
                "nodeName: n\nnodeStatusMaxImages: -2",
                "nodeStatusMaxImages",
            ),
            (
                "nodeName: n\nnodeStatusUpdateFrequency: 1m\nnodeStatusReportFrequency: 10s",
                "nodeStatusReportFrequency",
            ),
            (
                "nodeName: n\nnodeStatusUpdateFrequency: 1ms",
                "nodeStatusUpdateFrequency",
            ),
            (
                "nodeName: n\nregisterWithTaints: [{key: a, effect: Nope}]",
                "registerWithTaints[0]",
            ),
            (
                "nodeName: n\nplugins: {gpu: {timeout: 5m}}",
                "plugins.gpu.timeout",
            ),
            (
                "nodeName: n\nplugins: {gpu: {memoryLimit: 1Ti}}",
                "plugins.gpu.memoryLimit",
            ),
            (
                "nodeName: n\nplugins: {gpu: {sha256: abc}}",
                "plugins.gpu.sha256",
            ),
            (
                "nodeName: n\nplugins: {gpu: {fields: {allow: ['@x']}}}",
                "plugins.gpu.fields",
            ),
            (
                "nodeName: n\nplugins: {gpu: {paths: [relative]}}",
                "plugins.gpu.paths[0]",
            ),
            (
                "nodeName: n\nplugins: {gpu: {paths: [{path: /proc, from: host/proc}]}}",
                "plugins.gpu.paths[0].from",
            ),
            (
                "nodeName: n\nplugins: {gpu: {paths: [{path: /proc}]}}",
                "plugins.gpu",
            ),
            (
                "nodeName: n\nplugins: {gpu: {timout: 1s}}",
                "did you mean `timeout`",
            ),
        ];
        for (yaml, want) in cases {
            let err = check(yaml).unwrap_err().to_string();
            assert!(err.contains(want), "{yaml:?} gave {err:?}, wanted {want:?}");
        }
    }
}
