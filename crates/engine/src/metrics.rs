//! Prometheus metrics, all named `nodestatus_*`, with bounded labels only:
//! plugin names (validated DNS labels, one per loaded plugin), error kinds,
//! results and request kinds, never raw error text. The types say so: a
//! setter's error kind is its [`SetterErrorKind`] variant, and every other
//! label value is a `&'static str` that the caller's variant names.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use prometheus_client::encoding::{EncodeLabelValue, LabelValueEncoder};

use crate::pipeline::PassReport;
use crate::pipeline::SetterErrorKind;

/// `result` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabel {
    /// `ok`, `error`, `unchanged`, `patched`, `reported`, `loaded`, ...
    pub result: &'static str,
}

/// `plugin` label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginLabel {
    /// The plugin's name.
    pub plugin: String,
}

/// `plugin` and `kind` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginErrorLabels {
    /// The plugin's name.
    pub plugin: String,
    /// The failure's kind ([`SetterErrorKind::as_str`]).
    pub kind: SetterErrorKind,
}

impl EncodeLabelValue for SetterErrorKind {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), std::fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

/// `kind` label of API requests.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The request kind (`patch-status`, `update-lease`, ...).
    pub kind: &'static str,
    /// The HTTP status class (`2xx`, `4xx`, `5xx`, `error`).
    pub code: &'static str,
}

/// `loop` and `kind` labels of loop errors.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LoopErrorLabels {
    /// `register`, `sync`, `lease` or `watch`.
    pub r#loop: &'static str,
    /// The error class (`unauthorized`, `forbidden`, `timeout`, `node-gone`, ...).
    pub kind: &'static str,
}

/// `version` label of build info.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BuildLabels {
    /// The crate version.
    pub version: String,
    /// The wasmtime version.
    pub wasmtime: String,
}

/// Every metric of the engine.
pub struct Metrics {
    /// The registry to encode.
    pub registry: Registry,
    /// Sync passes by result.
    pub sync_passes: Family<ResultLabel, Counter>,
    /// Duration of a setter pass.
    pub sync_pass_duration: Histogram,
    /// Status patches sent.
    pub patches: Counter,
    /// Bytes of status patches sent.
    pub patch_bytes: Counter,
    /// Lease renewals by result.
    pub lease_renewals: Family<ResultLabel, Counter>,
    /// Setter calls by plugin.
    pub plugin_calls: Family<PluginLabel, Counter>,
    /// Setter calls not made by plugin: the inputs of the last call had
    /// not changed, its part stood (`incrementalPasses`).
    pub plugin_calls_skipped: Family<PluginLabel, Counter>,
    /// With `incrementalPasses: check`, parts that would have stood and
    /// differ from the called ones.
    pub incremental_mismatches: Counter,
    /// Setter call duration by plugin.
    pub plugin_call_duration: Family<PluginLabel, Histogram>,
    /// Setter errors by plugin and kind.
    pub plugin_errors: Family<PluginErrorLabels, Counter>,
    /// Plugin reloads by result.
    pub plugin_reloads: Family<ResultLabel, Counter>,
    /// Plugins loaded now.
    pub plugins_loaded: Gauge,
    /// API requests by kind and status class.
    pub api_requests: Family<RequestLabels, Counter>,
    /// Failed passes of the node loops, by loop and error class.
    pub loop_errors: Family<LoopErrorLabels, Counter>,
    /// 1 while the node is found deleted from the API server.
    pub node_deleted: Gauge,
    /// Precompile cache lookups and removals, by result (`hit`, `miss`,
    /// `evicted`, `stale`).
    pub precompile_cache: Family<ResultLabel, Counter>,
    /// Bytes of precompile cache entries.
    pub precompile_cache_bytes: Gauge,
    /// Loads that missed the precompile cache, by what became of them:
    /// `compiled` (a compile started, by either compiler), `prechecked`
    /// (refused by the check before a compile), `remembered` (refused
    /// before: not compiled again), `tiered-up` (Cranelift's code replaced
    /// Winch's).
    pub plugin_compiles: Family<ResultLabel, Counter>,
    /// Config file changes, by result (`applied`, `refused`).
    pub config_reloads: Family<ResultLabel, Counter>,
    /// Registry pulls of plugins ([`crate::oci`]), by plugin and result.
    pub registry_pulls: Family<PluginResultLabels, Counter>,
    /// Matched lines of reacting plugins ([`crate::streams`]), by plugin
    /// and result (`matched`, `dropped`, `cut`, `handed`, `triggered`).
    pub stream_lines: Family<PluginResultLabels, Counter>,
    /// The streams' counts as last observed, so that each observation adds
    /// what came since.
    stream_seen: std::sync::Mutex<std::collections::HashMap<String, crate::streams::Counts>>,
}

/// `plugin` and `result` labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PluginResultLabels {
    /// The plugin's name.
    pub plugin: String,
    /// A bounded result (`pulled`, `unchanged`, `unreachable`, ...).
    pub result: &'static str,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn duration_histogram() -> Histogram {
    // 50 µs .. ~13 s
    Histogram::new(exponential_buckets(0.000_05, 2.0, 18))
}

impl Metrics {
    /// Registers every metric.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("nodestatus");
        let m = Self {
            sync_passes: Family::default(),
            sync_pass_duration: duration_histogram(),
            patches: Counter::default(),
            patch_bytes: Counter::default(),
            lease_renewals: Family::default(),
            plugin_calls: Family::default(),
            plugin_calls_skipped: Family::default(),
            incremental_mismatches: Counter::default(),
            plugin_call_duration: Family::new_with_constructor(duration_histogram),
            plugin_errors: Family::default(),
            plugin_reloads: Family::default(),
            plugins_loaded: Gauge::default(),
            api_requests: Family::default(),
            loop_errors: Family::default(),
            node_deleted: Gauge::default(),
            precompile_cache: Family::default(),
            precompile_cache_bytes: Gauge::default(),
            plugin_compiles: Family::default(),
            config_reloads: Family::default(),
            registry_pulls: Family::default(),
            stream_lines: Family::default(),
            stream_seen: Default::default(),
            registry: Registry::default(),
        };
        registry.register(
            "sync_passes",
            "Status sync passes, by result",
            m.sync_passes.clone(),
        );
        registry.register(
            "sync_pass_duration_seconds",
            "Duration of one pass of the setters",
            m.sync_pass_duration.clone(),
        );
        registry.register("status_patches", "Status patches sent", m.patches.clone());
        registry.register(
            "status_patch_bytes",
            "Bytes of status patch bodies sent",
            m.patch_bytes.clone(),
        );
        registry.register(
            "lease_renewals",
            "Lease renewals, by result",
            m.lease_renewals.clone(),
        );
        registry.register(
            "plugin_calls",
            "Setter calls, by plugin",
            m.plugin_calls.clone(),
        );
        registry.register(
            "plugin_calls_skipped",
            "Setter calls not made because no input of the last call changed (incrementalPasses), by plugin",
            m.plugin_calls_skipped.clone(),
        );
        registry.register(
            "incremental_mismatches",
            "With incrementalPasses: check, parts that would have stood and differ from the called ones",
            m.incremental_mismatches.clone(),
        );
        registry.register(
            "plugin_call_duration_seconds",
            "Duration of one setter call, by plugin",
            m.plugin_call_duration.clone(),
        );
        registry.register(
            "plugin_errors",
            "Failed setter calls, by plugin and kind",
            m.plugin_errors.clone(),
        );
        registry.register(
            "plugin_reloads",
            "Plugin loads, reloads, unloads and refusals, by result",
            m.plugin_reloads.clone(),
        );
        registry.register(
            "plugins_loaded",
            "Plugins loaded now",
            m.plugins_loaded.clone(),
        );
        registry.register(
            "api_requests",
            "API requests sent, by kind and status class",
            m.api_requests.clone(),
        );
        registry.register(
            "loop_errors",
            "Failed passes of the register, sync, lease and watch loops, by loop and error class",
            m.loop_errors.clone(),
        );
        registry.register(
            "node_deleted",
            "1 while the node is found deleted from the API server (it is not registered again in this run)",
            m.node_deleted.clone(),
        );
        registry.register(
            "precompile_cache",
            "Precompile cache lookups (hit, miss) and entries removed (evicted under cacheMaxSize, stale from another engine build)",
            m.precompile_cache.clone(),
        );
        registry.register(
            "precompile_cache_bytes",
            "Bytes of precompile cache entries",
            m.precompile_cache_bytes.clone(),
        );
        registry.register(
            "plugin_compiles",
            "Plugin loads that missed the precompile cache: compiled (a compile started, by either compiler), prechecked (refused by the check before a compile: never compiled), remembered (refused before by a compile, not compiled again), tiered-up (Cranelift's code replaced Winch's)",
            m.plugin_compiles.clone(),
        );
        registry.register(
            "config_reloads",
            "Changes of the config file's content, by result: applied, or refused (invalid, or a setting that changes only at a restart)",
            m.config_reloads.clone(),
        );
        registry.register(
            "registry_pulls",
            "Registry checks of plugins pulled by reference, by plugin and result: cached (from the cache at start), unchanged (the tag names the running digest), pulled (a new digest loaded), refused (the loader refused it), or the failure's kind (unreachable, timeout, tls, unauthorized, not-found, server, digest-mismatch, too-large, layout, unsigned, bad-signature, key, cache, not-cached)",
            m.registry_pulls.clone(),
        );
        registry.register(
            "stream_lines",
            "Lines of the reacting plugins' streams, by plugin and result: matched (queued), dropped (its queue was full), cut (over 64 KiB), handed (to on-lines), triggered (a watched path changed)",
            m.stream_lines.clone(),
        );
        let build: Family<BuildLabels, Gauge> = Family::default();
        build
            .get_or_create(&BuildLabels {
                version: env!("CARGO_PKG_VERSION").into(),
                wasmtime: "48.0.8".into(),
            })
            .set(1);
        registry.register("build_info", "Build information", build);
        Self { registry, ..m }
    }

    /// Counts a change of the config file's content.
    pub fn config_reload(&self, result: &'static str) {
        self.config_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Copies the runtime's load counters ([`nodestatus_runtime::LoadStats`]).
    pub fn observe_loads(&self, stats: &nodestatus_runtime::LoadStats) {
        use std::sync::atomic::Ordering::Relaxed;
        for (result, n) in [
            ("compiled", &stats.compiles),
            ("prechecked", &stats.prechecked),
            ("remembered", &stats.remembered),
            ("tiered-up", &stats.tiered_up),
        ] {
            self.plugin_compiles
                .get_or_create(&ResultLabel { result })
                .inner()
                .store(n.load(Relaxed), Relaxed);
        }
    }

    /// Copies the precompile cache's counters (it counts for itself, from
    /// loads on any thread).
    pub fn observe_cache(&self, cache: Option<&nodestatus_runtime::PrecompileCache>) {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(stats) = cache.map(|c| c.stats()) else {
            return;
        };
        for (result, n) in [
            ("hit", &stats.hits),
            ("miss", &stats.misses),
            ("evicted", &stats.evictions),
            ("stale", &stats.stale_removed),
        ] {
            self.precompile_cache
                .get_or_create(&ResultLabel { result })
                .inner()
                .store(n.load(Relaxed), Relaxed);
        }
        self.precompile_cache_bytes
            .set(stats.bytes.load(Relaxed) as i64);
    }

    /// Adds what the streams counted since the last observation.
    pub fn observe_streams(&self, status: &[(String, crate::streams::PluginStreams)]) {
        let mut seen = self.stream_seen.lock().expect("stream counts lock");
        for (plugin, s) in status {
            let before = seen.entry(plugin.clone()).or_default();
            let now = s.counts;
            for (result, was, is) in [
                ("matched", before.matched, now.matched),
                ("dropped", before.dropped, now.dropped),
                ("cut", before.cut, now.cut),
                ("handed", before.handed, now.handed),
                ("triggered", before.triggered, now.triggered),
            ] {
                if is > was {
                    self.stream_lines
                        .get_or_create(&PluginResultLabels {
                            plugin: plugin.clone(),
                            result,
                        })
                        .inc_by(is - was);
                }
            }
            *before = now;
        }
    }

    /// Records one pass of the setters.
    pub fn observe_pass(&self, report: &PassReport, duration: std::time::Duration) {
        self.sync_pass_duration.observe(duration.as_secs_f64());
        self.incremental_mismatches.inc_by(report.mismatches);
        for s in &report.setters {
            let plugin = PluginLabel {
                plugin: s.plugin.clone(),
            };
            if s.skipped {
                self.plugin_calls_skipped.get_or_create(&plugin).inc();
            } else {
                self.plugin_calls.get_or_create(&plugin).inc();
                self.plugin_call_duration
                    .get_or_create(&plugin)
                    .observe(s.duration.as_secs_f64());
            }
            if let Err(e) = &s.outcome {
                self.plugin_errors
                    .get_or_create(&PluginErrorLabels {
                        plugin: s.plugin.clone(),
                        kind: e.kind,
                    })
                    .inc();
            }
        }
    }

    /// Records a sync result.
    pub fn sync_result(&self, result: &'static str) {
        self.sync_passes
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Records a lease renewal result.
    pub fn lease_result(&self, ok: bool) {
        self.lease_renewals
            .get_or_create(&ResultLabel {
                result: if ok { "ok" } else { "error" },
            })
            .inc();
    }

    /// Records a failed pass of loop `l` with error class `kind`.
    pub fn loop_error(&self, l: &'static str, kind: &'static str) {
        self.loop_errors
            .get_or_create(&LoopErrorLabels { r#loop: l, kind })
            .inc();
    }

    /// Records a registry check of `plugin`.
    pub fn registry_pull(&self, plugin: &str, result: &'static str) {
        self.registry_pulls
            .get_or_create(&PluginResultLabels {
                plugin: plugin.to_owned(),
                result,
            })
            .inc();
    }

    /// Records a reload event.
    pub fn reload(&self, result: &'static str) {
        self.plugin_reloads
            .get_or_create(&ResultLabel { result })
            .inc();
    }

    /// Records an API request.
    pub fn request(&self, kind: &'static str, status: u16) {
        let code = match status {
            200..=299 => "2xx",
            400..=499 => "4xx",
            500..=599 => "5xx",
            _ => "error",
        };
        self.api_requests
            .get_or_create(&RequestLabels { kind, code })
            .inc();
    }

    /// The text exposition format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("encoding to a String");
        out
    }
}
