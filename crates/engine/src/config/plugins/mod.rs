//! The plugin sections: as written ([`PluginFile`]) and validated
//! ([`PluginConfig`]), and the paths that are never granted.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use nodestatus_model::policy::Allowance;
use nodestatus_runtime::{PathGrant, PluginSettings, Ungranted};

use super::{Error, GoDuration, Result};

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
    /// With `reuseInstance`: its kept instance carries nothing from call
    /// to call that changes an answer (a pass may then skip it while
    /// nothing it read changed: `incrementalPasses`).
    #[serde(default)]
    pub stateless: bool,
    /// The streams a reacting plugin may follow: `kmsg`, `journal`, or a
    /// log file's absolute path.
    #[serde(default)]
    pub streams: Vec<String>,
    /// Events it may record per minute (10 by default, at most 600).
    pub events_per_minute: Option<u32>,
    /// `load-without` (default) or `refuse`.
    pub on_ungranted: Option<Ungranted>,
    /// An OCI reference the plugin is pulled from (`HOST[:PORT]/repo:tag`
    /// or `...@sha256:<hex>`), instead of a file in the plugin directory.
    pub image: Option<String>,
    /// How often a tag is resolved again (5m) with `pullPolicy: Always`;
    /// the longest wait between retries after a failure. A digest is never
    /// pulled again once cached.
    pub pull_interval: Option<GoDuration>,
    /// `IfNotPresent` (default, but for the tag `latest`) or `Always`, as
    /// Istio's WasmPlugin writes it.
    pub pull_policy: Option<String>,
    /// `open` (default) or `closed`: what the node does while no version of
    /// the image was ever pulled.
    pub failure_policy: Option<String>,
    /// The key the image must be signed with (over the top-level `verify`).
    pub verify: Option<VerifyFile>,
}

/// `verify:` on a plugin or at the top level: the PEM public key whose
/// cosign-compatible signature an image must carry (`key`), or a signature
/// policy as Kubewarden writes it (`allOf` / `anyOf`, see
/// [`nodestatus_registry::policy`]), with the Sigstore trusted root its
/// keyless entries are checked against (`trustedRoot`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct VerifyFile {
    /// The PEM public key file (ECDSA P-256).
    pub key: Option<PathBuf>,
    /// The Sigstore `trusted_root.json` of the Fulcio and Rekor that keyless
    /// signatures come from.
    pub trusted_root: Option<PathBuf>,
    /// Signatures that must each be present.
    pub all_of: Option<Vec<nodestatus_registry::policy::SignatureFile>>,
    /// Signatures of which `minimumMatches` must be present.
    pub any_of: Option<nodestatus_registry::policy::AnyOfFile>,
}

/// A signature policy of a `verify:` section, checked when the config was
/// validated (its keys parsed, its trusted root read); the puller builds it
/// again at each pull, as it reads a key file again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPolicy {
    /// Where it was written (`verify`, `plugins.NAME.verify`), for messages.
    pub field: String,
    /// The trusted root file.
    pub trusted_root: Option<PathBuf>,
    /// `allOf` and `anyOf`.
    pub policy: nodestatus_registry::policy::PolicyFile,
}

impl VerifyPolicy {
    /// Builds the policy: its keys parsed, its trusted root read.
    pub fn build(
        &self,
    ) -> nodestatus_registry::policy::Result<nodestatus_registry::policy::Policy> {
        nodestatus_registry::policy::Policy::new(
            &self.policy,
            self.trusted_root.as_deref(),
            &format!("{}.", self.field),
        )
    }
}

/// What a `verify:` section requires: a key file, or a policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// A signature by the key in this PEM file.
    Key(PathBuf),
    /// Signatures that meet this policy.
    Policy(VerifyPolicy),
}

/// Checks a `verify:` section (`field`: where it is) as the puller will use
/// it: a readable key, or a policy that builds.
pub(super) fn check_verify(field: &str, v: &VerifyFile) -> Result<Verification> {
    let policy = v.all_of.is_some() || v.any_of.is_some();
    match (&v.key, policy) {
        (Some(_), true) => Err(Error::invalid(
            field,
            "give key, or a policy (allOf / anyOf), not both: put the key in the policy as {kind: pubKey, key: <PEM>}",
        )),
        (Some(key), false) => {
            if v.trusted_root.is_some() {
                return Err(Error::invalid(
                    format!("{field}.trustedRoot"),
                    "applies to a policy's keyless entries: add allOf or anyOf, or remove it",
                ));
            }
            check_key(&format!("{field}.key"), key)?;
            Ok(Verification::Key(key.clone()))
        }
        (None, true) => {
            let policy = VerifyPolicy {
                field: field.to_owned(),
                trusted_root: v.trusted_root.clone(),
                policy: nodestatus_registry::policy::PolicyFile {
                    all_of: v.all_of.clone(),
                    any_of: v.any_of.clone(),
                },
            };
            policy.build().map_err(|e| match e {
                nodestatus_registry::policy::Error::Invalid { field, reason } => {
                    Error::invalid(field, reason)
                }
                e => Error::invalid(
                    match &e {
                        nodestatus_registry::policy::Error::Root(_) => {
                            format!("{field}.trustedRoot")
                        }
                        _ => field.to_owned(),
                    },
                    nodestatus_runtime::error_chain(&e),
                ),
            })?;
            Ok(Verification::Policy(policy))
        }
        (None, false) => Err(Error::invalid(
            field,
            "needs key (a PEM public key file), or a signature policy (allOf / anyOf, with trustedRoot for keyless entries)",
        )),
    }
}

/// The default `pullInterval`: how often a tag is resolved again.
pub const DEFAULT_PULL_INTERVAL: Duration = Duration::from_secs(300);

/// When a tag is asked of the registry (`pullPolicy`), as Istio's
/// WasmPlugin and Kubernetes' `imagePullPolicy` say it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullPolicy {
    /// The version in the registry cache is used, with no request: a tag
    /// is resolved once, when the cache holds no version of it (or only
    /// one the loader refused), and not again. The default, but for the
    /// tag `latest`.
    IfNotPresent,
    /// The tag is resolved at the start and every `pullInterval`; the
    /// default for the tag `latest`.
    Always,
}

impl PullPolicy {
    /// The policy of `reference` when its section sets none: `Always` for
    /// the tag `latest`, else `IfNotPresent` (as Istio does). A pinned
    /// reference is `IfNotPresent`: its content never changes.
    pub fn default_for(reference: &nodestatus_registry::Reference) -> Self {
        match (reference.is_pinned(), reference.tag()) {
            (false, Some("latest") | None) => PullPolicy::Always,
            _ => PullPolicy::IfNotPresent,
        }
    }

    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Always => "Always",
        }
    }
}

/// What the node does about an image plugin no version of which was ever
/// pulled (none in the registry cache, none that loads): `failurePolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// The node goes on without it, and says so (the log, `/readyz`, the
    /// `nodestatus_registry_pulls_total` metric, a `FailedPluginPull`
    /// Warning event). The default: what the engine always did.
    #[default]
    Open,
    /// Each pass reports it failed (kind `withheld`), as a setter that
    /// fails: the node's Ready follows its `affectsReadiness` (true when
    /// the section does not say, since its metadata is not known before a
    /// pull).
    Closed,
}

impl FailurePolicy {
    /// As written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            FailurePolicy::Open => "open",
            FailurePolicy::Closed => "closed",
        }
    }
}

/// A plugin pulled from a registry ([`crate::oci`]): where from, how
/// often, and the key its signature must check with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageSource {
    /// The reference (a tag, or pinned by digest).
    pub reference: nodestatus_registry::Reference,
    /// When a tag is asked of the registry.
    pub pull_policy: PullPolicy,
    /// What the node does while no version was ever pulled.
    pub failure_policy: FailurePolicy,
    /// How often a tag is resolved again (`Always`), and the longest wait
    /// between retries.
    pub pull_interval: Duration,
    /// The public key required (the plugin's `verify`, else the top-level
    /// one), checked readable and valid when the config was validated.
    pub key: Option<PathBuf>,
    /// The signature policy required instead of a key (the plugin's
    /// `verify`, else the top-level one).
    pub policy: Option<VerifyPolicy>,
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
fn check_key(field: &str, path: &Path) -> Result<()> {
    nodestatus_registry::PublicKey::read(path)
        .map(drop)
        .map_err(|e| Error::invalid(field, nodestatus_runtime::error_chain(&e)))
}

/// A plugin section's `image`, `pullInterval`, `pullPolicy`,
/// `failurePolicy` and `verify`.
fn image_source(
    name: &str,
    p: &PluginFile,
    global: Option<&Verification>,
) -> Result<Option<ImageSource>> {
    let f = |field: &str| format!("plugins.{name}.{field}");
    let Some(image) = &p.image else {
        if p.pull_interval.is_some() {
            return Err(Error::invalid(
                f("pullInterval"),
                "applies only to a plugin pulled from a registry: add image: HOST/repo:tag, or remove it",
            ));
        }
        for (field, set) in [
            ("pullPolicy", p.pull_policy.is_some()),
            ("failurePolicy", p.failure_policy.is_some()),
        ] {
            if set {
                return Err(Error::invalid(
                    f(field),
                    "applies only to a plugin pulled from a registry: add image: HOST/repo:tag, or remove it",
                ));
            }
        }
        if p.verify.is_some() {
            return Err(Error::invalid(
                f("verify"),
                "applies only to a plugin pulled from a registry: add image: HOST/repo:tag, or remove it (a file in the plugin directory is pinned with sha256:)",
            ));
        }
        return Ok(None);
    };
    let reference = nodestatus_registry::Reference::parse(image)
        .map_err(|e| Error::invalid(f("image"), e.to_string()))?;
    let named = nodestatus_runtime::name_of_file(Path::new(&format!("{name}.wasm")));
    if name.contains('/') || named.as_deref() != Some(name) {
        return Err(Error::invalid(
            format!("plugins.{name}"),
            "a plugin pulled from a registry is named by its section: use lowercase letters, digits and '-' (no '_' or '/')",
        ));
    }
    if p.sha256.is_some() {
        return Err(Error::invalid(
            f("sha256"),
            "pins a file in the plugin directory; pin an image by its digest instead (image: HOST/repo@sha256:<hex>)",
        ));
    }
    let pull_interval = p.pull_interval.map_or(DEFAULT_PULL_INTERVAL, |d| d.0);
    if pull_interval < Duration::from_secs(1) || pull_interval > Duration::from_secs(24 * 3600) {
        return Err(Error::invalid(
            f("pullInterval"),
            format!("{pull_interval:?} must be between 1s and 24h"),
        ));
    }
    let pull_policy = match p.pull_policy.as_deref() {
        None => PullPolicy::default_for(&reference),
        Some("IfNotPresent") => PullPolicy::IfNotPresent,
        Some("Always") => PullPolicy::Always,
        Some(other) => {
            return Err(Error::invalid(
                f("pullPolicy"),
                format!(
                    "{other:?} is not a pull policy: write IfNotPresent (use the cached version; resolve a tag once) or Always (resolve the tag every pullInterval)"
                ),
            ));
        }
    };
    let failure_policy = match p.failure_policy.as_deref() {
        None => FailurePolicy::default(),
        Some("open") => FailurePolicy::Open,
        Some("closed") => FailurePolicy::Closed,
        Some(other) => {
            return Err(Error::invalid(
                f("failurePolicy"),
                format!(
                    "{other:?} is not a failure policy: write open (the node goes on without a plugin never pulled) or closed (it counts as failing, and Ready follows its affectsReadiness)"
                ),
            ));
        }
    };
    let verification = match &p.verify {
        Some(v) => Some(check_verify(&f("verify"), v)?),
        None => global.cloned(),
    };
    let (key, policy) = match verification {
        Some(Verification::Key(key)) => (Some(key), None),
        Some(Verification::Policy(policy)) => (None, Some(policy)),
        None => (None, None),
    };
    Ok(Some(ImageSource {
        reference,
        pull_policy,
        failure_policy,
        pull_interval,
        key,
        policy,
    }))
}

pub(super) fn plugin_settings(
    name: &str,
    p: PluginFile,
    global: Option<&Verification>,
) -> Result<PluginConfig> {
    let f = |field: &str| format!("plugins.{name}.{field}");
    let image = image_source(name, &p, global)?;
    let mut s = PluginSettings::default();
    if let Some(t) = p.timeout {
        if t.0 < Duration::from_millis(10) || t.0 > Duration::from_secs(60) {
            return Err(Error::invalid(
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
    s.stateless = p.stateless;
    if let Some(n) = p.events_per_minute {
        if !(1..=600).contains(&n) {
            return Err(Error::invalid(
                f("eventsPerMinute"),
                format!("{n} must be between 1 and 600"),
            ));
        }
        s.events_per_minute = n;
    }
    for (i, text) in p.streams.iter().enumerate() {
        let grant = nodestatus_runtime::reactor::StreamGrant::parse(text)
            .map_err(|e| Error::invalid(format!("plugins.{name}.streams[{i}]"), e))?;
        if let nodestatus_runtime::reactor::StreamGrant::File(path) = &grant
            && let Some(root) = protected_root(path)
        {
            return Err(Error::invalid(
                format!("plugins.{name}.streams[{i}]"),
                format!(
                    "{} is in {root}, which is never granted ({})",
                    path.display(),
                    protected_why(root)
                ),
            ));
        }
        if !s.streams.contains(&grant) {
            s.streams.push(grant);
        }
    }
    for (i, entry) in p.paths.iter().enumerate() {
        let abs = |field: &str, path: &str| {
            nodestatus_runtime::facts::normalize_abs(path).ok_or_else(|| {
                Error::invalid(
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
        // The path as written, then where its links lead (when it exists):
        // a link at a grantable place must not lead into a protected one.
        let real = std::fs::canonicalize(&grant.from).ok();
        let seen = std::iter::once(&grant.from).chain(real.as_ref());
        if let Some((at, root)) = seen.filter_map(|p| Some((p, protected_root(p)?))).next() {
            let via = if *at == grant.from {
                String::new()
            } else {
                format!(" (its links lead to {})", at.display())
            };
            return Err(Error::invalid(
                format!("plugins.{name}.paths[{i}]{from_field}"),
                format!(
                    "{}{via} is in {root}, which is never granted ({}): grant the directory that holds only what the plugin reads",
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
            return Err(Error::invalid(
                format!("plugins.{name}.env[{i}]"),
                format!(
                    "{var:?} is not an environment variable name: letters, digits and '_', not starting with a digit"
                ),
            ));
        }
    }
    s.env = p.env;
    let allow = p.fields.allow.unwrap_or_else(|| vec!["@default".into()]);
    let fields =
        Allowance::parse(&allow, &p.fields.deny).map_err(|e| Error::invalid(f("fields"), e))?;
    if let Some(c) = p.config {
        s.config = c;
    }
    if let Some(sha) = p.sha256 {
        if sha.len() != 64 || !sha.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid(
                f("sha256"),
                "must be 64 hexadecimal characters",
            ));
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

/// Directories inside [`PROTECTED_PATHS`] that may be granted all the same,
/// with what is under them: they hold no credential, and a peer writes
/// there for node agents to read. node-feature-discovery's feature files
/// (`features.d`, written by side-cars such as NVIDIA's
/// gpu-feature-discovery) sit under `/etc/kubernetes`, beside the node's
/// credentials, which stay protected.
pub const GRANTABLE_UNDER_PROTECTED: &[&str] =
    &["/etc/kubernetes/node-feature-discovery/features.d"];

/// The protected path that `host_path` is at or under, if any: `None` for a
/// path at or under one of [`GRANTABLE_UNDER_PROTECTED`].
pub fn protected_root(host_path: &Path) -> Option<&'static str> {
    if GRANTABLE_UNDER_PROTECTED
        .iter()
        .any(|g| host_path.starts_with(g))
    {
        return None;
    }
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

#[cfg(test)]
mod tests;
