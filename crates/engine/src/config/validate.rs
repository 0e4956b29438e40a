//! [`ConfigFile::validate`]: every value checked, the defaults applied.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use nodestatus_runtime::{CompileLimits, Tiers};

use super::plugins::{Verification, check_verify, plugin_settings};
use super::values::{byte_size, parse_node_ips};
use super::{
    Config, ConfigFile, DEFAULT_CONTAINER_RUNTIME_ENDPOINT, DEFAULT_PLUGIN_DIR, Error, GoDuration,
    Result, default_cache_dir, hostname,
};

impl ConfigFile {
    /// Checks every value and applies the defaults.
    pub fn validate(self) -> Result<Config> {
        let node_name = self.node_name.clone().unwrap_or_else(|| {
            hostname(
                self.hostname_override.as_deref(),
                &nodestatus_runtime::facts::Facts::default(),
            )
        });
        nodestatus_apimachinery::names::dns1123_subdomain(&node_name)
            .map_err(|m| Error::invalid("nodeName", m))?;
        if let Some(h) = &self.hostname_override {
            nodestatus_apimachinery::names::dns1123_subdomain(h)
                .map_err(|m| Error::invalid("hostnameOverride", m))?;
        }
        let node_ips = match &self.node_ip {
            None => Vec::new(),
            Some(s) => parse_node_ips(s).map_err(|m| Error::invalid("nodeIP", m))?,
        };
        let node_labels = self.node_labels.unwrap_or_default().0;
        let register_with_taints = self.register_with_taints.unwrap_or_default().0;
        for (k, v) in &node_labels {
            let field = format!("nodeLabels[{k}]");
            nodestatus_model::policy::validate_qualified_name(k)
                .map_err(|m| Error::invalid(&field, m))?;
            nodestatus_model::policy::validate_label_value(v)
                .map_err(|m| Error::invalid(&field, m))?;
            if !nodestatus_model::policy::node_restriction_allows_label(k) {
                return Err(Error::invalid(
                    field,
                    "NodeRestriction refuses this label from a node: labels under kubernetes.io and k8s.io must be the kubelet's well-known ones or under kubelet.kubernetes.io or node.kubernetes.io, and node-restriction.kubernetes.io is never allowed",
                ));
            }
        }
        for (i, t) in register_with_taints.iter().enumerate() {
            let field = format!("registerWithTaints[{i}]");
            nodestatus_model::policy::validate_qualified_name(&t.key)
                .map_err(|m| Error::invalid(&field, m))?;
            nodestatus_model::policy::validate_label_value(&t.value)
                .map_err(|m| Error::invalid(&field, m))?;
            if !matches!(
                t.effect.as_str(),
                "NoSchedule" | "PreferNoSchedule" | "NoExecute"
            ) {
                return Err(Error::invalid(
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
                return Err(Error::invalid(
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
            return Err(Error::invalid(
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
            return Err(Error::invalid(
                "nodeStatusReportFrequency",
                format!(
                    "{report:?} must not be shorter than nodeStatusUpdateFrequency ({update:?})"
                ),
            ));
        }
        if report > Duration::from_secs(3600) {
            return Err(Error::invalid(
                "nodeStatusReportFrequency",
                format!("{report:?} must be at most 1h"),
            ));
        }
        let lease = self.node_lease_duration_seconds.unwrap_or(40);
        if !(1..=3600).contains(&lease) {
            return Err(Error::invalid(
                "nodeLeaseDurationSeconds",
                format!("{lease} must be between 1 and 3600 (it must be > 0)"),
            ));
        }
        let max_images = self.node_status_max_images.unwrap_or(50);
        if max_images < -1 {
            return Err(Error::invalid(
                "nodeStatusMaxImages",
                format!("{max_images} must be >= -1 (-1 means no limit)"),
            ));
        }
        if let Some(p) = &self.provider_id
            && (p.is_empty() || p.len() > 512)
        {
            return Err(Error::invalid("providerID", "must be 1 to 512 characters"));
        }
        let companion = self.companion.unwrap_or(false);
        if companion && self.register_node == Some(true) {
            return Err(Error::invalid(
                "registerNode",
                "must be false (or unset) in companion mode: the kubelet registers the node",
            ));
        }
        // --- node loops (agent) ---
        let external_cloud_provider = match self.cloud_provider.as_deref() {
            None | Some("") => false,
            Some("external") => true,
            Some(other) => {
                return Err(Error::invalid(
                    "cloudProvider",
                    format!("{other:?}: only \"external\" (or empty) is accepted"),
                ));
            }
        };
        let re_register_deleted_node = self.re_register_deleted_node.unwrap_or(false);
        // --- end node loops ---
        let compile_limits =
            compile_limits(self.compile_timeout, self.compile_memory_limit.as_deref())?;
        let compiler = match self.compiler.as_deref() {
            None => Tiers::Tiered,
            Some(name) => Tiers::parse(name).ok_or_else(|| {
                Error::invalid(
                    "compiler",
                    format!(
                        "{name:?}: one of {}",
                        Tiers::NAMES.map(|n| format!("{n:?}")).join(", ")
                    ),
                )
            })?,
        };
        let incremental = incremental(self.incremental_passes.as_deref())?;
        let cache_max_bytes = match &self.cache_max_size {
            None => nodestatus_runtime::DEFAULT_CACHE_MAX_BYTES,
            Some(m) => byte_size(
                "cacheMaxSize",
                m,
                16 << 20,
                1 << 40,
                " (CPython alone takes about 36Mi)",
            )?,
        };
        if let Some(e) = &self.container_runtime_endpoint
            && !e.is_empty()
        {
            runtime_endpoint(e, cfg!(feature = "cri"))?;
        }
        let runtime_request_timeout = self
            .runtime_request_timeout
            .map_or(crate::cri::DEFAULT_REQUEST_TIMEOUT, |d| d.0);
        if runtime_request_timeout < Duration::from_millis(100)
            || runtime_request_timeout > Duration::from_secs(120)
        {
            return Err(Error::invalid(
                "runtimeRequestTimeout",
                format!("{runtime_request_timeout:?} must be between 100ms and 2m"),
            ));
        }
        let registry_cache = registry_cache(
            self.registry_cache_max_size.as_deref(),
            self.registry_cache_max_age,
        )?;
        let registries = self.registries.unwrap_or_default();
        registries
            .validate()
            .map_err(|e| Error::invalid("registries", e.to_string()))?;
        let verify = self
            .verify
            .as_ref()
            .map(|v| check_verify("verify", v))
            .transpose()?;
        let mut plugins = BTreeMap::new();
        for (name, p) in self.plugins {
            let settings = plugin_settings(&name, p, verify.as_ref())?;
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
            compiler,
            incremental,
            container_runtime_defaulted: self.container_runtime_endpoint.is_none(),
            container_runtime_endpoint: match self.container_runtime_endpoint {
                None => Some(DEFAULT_CONTAINER_RUNTIME_ENDPOINT.to_owned()),
                Some(e) => Some(e).filter(|e| !e.is_empty()),
            },
            runtime_request_timeout,
            re_register_deleted_node,
            external_cloud_provider,
            plugins,
            registries,
            verify_key: match &verify {
                Some(Verification::Key(key)) => Some(key.clone()),
                _ => None,
            },
            verify_policy: match verify {
                Some(Verification::Policy(policy)) => Some(policy),
                _ => None,
            },
            registry_cache,
        })
    }
}

/// `registryCacheMaxSize` (1Mi to 1Ti) and `registryCacheMaxAge` (1m to
/// 8760h), over their defaults.
fn registry_cache(
    size: Option<&str>,
    age: Option<GoDuration>,
) -> Result<nodestatus_registry::cache::Limits> {
    let mut limits = nodestatus_registry::cache::Limits::default();
    if let Some(m) = size {
        limits.max_bytes = byte_size(
            "registryCacheMaxSize",
            m,
            1 << 20,
            1 << 40,
            " (what a plugin uses stays, even past it)",
        )?;
    }
    if let Some(a) = age {
        if a.0 < Duration::from_secs(60) || a.0 > Duration::from_secs(8760 * 3600) {
            return Err(Error::invalid(
                "registryCacheMaxAge",
                format!(
                    "{:?} must be between 1m and 8760h (a version a plugin uses is never removed)",
                    a.0
                ),
            ));
        }
        limits.max_unused = a.0;
    }
    Ok(limits)
}

fn compile_limits(timeout: Option<GoDuration>, memory: Option<&str>) -> Result<CompileLimits> {
    let mut limits = CompileLimits::default();
    if let Some(t) = timeout {
        if t.0 < Duration::from_secs(1) || t.0 > Duration::from_secs(3600) {
            return Err(Error::invalid(
                "compileTimeout",
                format!("{:?} must be between 1s and 1h", t.0),
            ));
        }
        limits.timeout = t.0;
    }
    if let Some(m) = memory {
        limits.memory = byte_size("compileMemoryLimit", m, 64 << 20, 64 << 30, "")?;
    }
    Ok(limits)
}

/// A set `containerRuntimeEndpoint`: a socket path, in a build with the
/// container runtime's client (`with_cri`: cargo's `cri` feature).
pub(super) fn runtime_endpoint(e: &str, with_cri: bool) -> Result<(), Error> {
    crate::cri::socket_path(e)
        .map_err(|err| Error::invalid("containerRuntimeEndpoint", err.to_string()))?;
    if !with_cri {
        return Err(Error::invalid(
            "containerRuntimeEndpoint",
            format!(
                "{e:?} is set, but this nodestatus was built without its container runtime client (cargo's `cri` feature, on by default): build it with default features, or remove the setting"
            ),
        ));
    }
    Ok(())
}

/// `incrementalPasses`, or its default: the environment's
/// `NODESTATUS_INCREMENTAL_PASSES` when set (the test command's `check`),
/// else `on`.
fn incremental(value: Option<&str>) -> Result<super::Incremental> {
    use super::Incremental;
    let env = std::env::var(INCREMENTAL_ENV).ok();
    let (name, key) = match (value, env.as_deref()) {
        (Some(v), _) => (v, "incrementalPasses"),
        (None, Some(e)) => (e, INCREMENTAL_ENV),
        (None, None) => return Ok(Incremental::default()),
    };
    Incremental::parse(name).ok_or_else(|| {
        Error::invalid(
            key,
            format!(
                "{name:?}: one of {}",
                Incremental::NAMES.map(|n| format!("{n:?}")).join(", ")
            ),
        )
    })
}

/// The environment variable whose value is `incrementalPasses`'s default.
pub const INCREMENTAL_ENV: &str = "NODESTATUS_INCREMENTAL_PASSES";
