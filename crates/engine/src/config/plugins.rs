//! The plugin sections: as written ([`PluginFile`]) and validated
//! ([`PluginConfig`]), and the paths that are never granted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use nodestatus_model::policy::Allowance;
use nodestatus_runtime::{PathGrant, PluginSettings, Ungranted};

use super::{GoDuration, Result, invalid};

/// Field allowance patterns for one plugin.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
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
/// asks for them ([`super::Config::settings_fn`]).
pub type SettingsFn = std::sync::Arc<dyn Fn(&str) -> PluginConfig + Send + Sync>;

/// Reads a public key file as the puller will, so that a missing or bad
/// key is refused with the config rather than at the first pull.
pub(super) fn check_key(field: &str, path: &Path) -> Result<()> {
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

pub(super) fn plugin_settings(
    name: &str,
    p: PluginFile,
    global_key: Option<PathBuf>,
) -> Result<PluginConfig> {
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
        s.memory_limit =
            super::values::byte_size(&f("memoryLimit"), m, 1 << 20, 4 << 30, "")? as usize;
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

pub(super) fn protected_why(root: &str) -> &'static str {
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
