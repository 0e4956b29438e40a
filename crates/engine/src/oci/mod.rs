//! Plugins pulled from OCI registries: a plugin section's `image:`.
//!
//! A [`Puller`] runs beside the node loops, never in them: a registry that
//! is down, slow or refuses costs the loops nothing.
//!
//! - **At start** ([`Puller::start_from_cache`]), before the first pass,
//!   each image plugin is taken from the registry cache
//!   ([`nodestatus_registry::Cache`]) without the network: the version that
//!   ran last (recorded beside it), else the digest its tag last resolved
//!   to. A node that restarts while the registry is down runs what it ran.
//! - **Then** ([`Puller::tick`]) each plugin is checked when due: a
//!   digest reference once (once cached and loaded, never again); a tag
//!   with `pullPolicy: Always` (the default for `latest`) every
//!   `pullInterval`; a tag with `pullPolicy: IfNotPresent` (the default
//!   for any other tag) only while the registry cache holds no version of
//!   it that loads: once one runs, no request is made for it again, at a
//!   start either. A new digest is pulled under the plugin file cap
//!   ([`nodestatus_runtime::MAX_PLUGIN_BYTES`], refused while it streams),
//!   its digests checked, its signature verified with the `verify` key, and
//!   only then handed to the plugin directory's own load path
//!   ([`PluginDir::set_extra_files`], [`PluginDir::rescan`]): the same
//!   compilation, checks, settings and swap as a new file in the directory.
//! - **A refusal** (of the registry or of the loader) keeps the version that
//!   runs, and is retried with a backoff (1 s doubling up to the
//!   `pullInterval`, at most 5 min). A version the loader refused is not
//!   handed to it again while the tag still names it.
//! - **Except a refusal of trust in what runs.** A new `image`, `verify`
//!   key or key file content (compared by hash, so a key replaced in place
//!   counts) is checked at once. When a check says that an artifact is
//!   unsigned or signed by no key it trusts, the version that runs is
//!   checked with the policy in force (its cached signature, then the
//!   registry's); if that says the same, it is stopped:
//!   its file goes (its fields are released), the plugin is withheld from
//!   each pass ([`crate::pipeline::Withheld`]), so that the node's
//!   readiness follows its `affects-readiness` as for a setter that fails,
//!   and a `PluginUntrusted` Warning event says why. A registry that cannot
//!   be reached says nothing about trust: the running version stays.
//! - **A plugin never pulled** (none in the cache, none that loads) follows
//!   its `failurePolicy`: `open` (the default), the node goes on without
//!   it and says so (below); `closed`, it is withheld from each pass
//!   ([`crate::pipeline::Withheld`]) until a version loads, so that the
//!   node's Ready follows its `affectsReadiness` (true unless the section
//!   says false: its metadata is not known before a pull).
//! - **The cache is bounded and aged** (`registryCacheMaxSize`,
//!   `registryCacheMaxAge`): after a round that wrote a version, and at
//!   least hourly, [`nodestatus_registry::Cache::collect`] removes the
//!   versions no plugin uses ([`Puller::in_use`]: each version that runs
//!   or is written for the loader, what each plugin's reference names in
//!   the cache, and what ran last), unused past the expiry or least
//!   recently used past the size.
//! - **Reported**: each check counts in
//!   `nodestatus_registry_pulls_total{plugin,result}`; a failure is logged,
//!   shown in `/readyz` (the node stays ready: the last good version
//!   runs), and recorded as a `FailedPluginPull` Warning event on the Node
//!   when it starts or changes; a new version loaded is a `PluginPulled`
//!   Normal event. No credential is ever in any of them (the registry
//!   crate's errors never carry one).
//!
//! The plugin's name is its config key, never what the artifact claims:
//! the component is written as `<name>.wasm` in
//! `<cacheDir>/registry-plugins/`, and the plugin directory names it by
//! that file, as any other.

mod check;
mod round;
mod slots;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nodestatus_registry::{Cache, Digest, Reference};
use nodestatus_runtime::EventType;
use tokio::time::Instant;

use crate::agent::Nodes;
use crate::config::{Config, FailurePolicy, ImageSource};
use crate::plugin_dir::PluginDir;

/// The deadline of each registry operation (resolve, pull, signature).
pub const PULL_TIMEOUT: Duration = Duration::from_secs(30);
/// The first retry after a failure.
pub const MIN_BACKOFF: Duration = Duration::from_secs(1);
/// The longest wait between retries.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How often the puller looks at the config in force for changed images.
pub const CONFIG_POLL: Duration = Duration::from_secs(1);
/// How often the registry cache is collected when nothing is written to
/// it.
pub const COLLECT_EVERY: Duration = Duration::from_secs(3600);

/// Why a plugin's image could not be had or loaded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry, the signature or the cache failed (each names the
    /// reference, and the key for a signature).
    #[error(transparent)]
    Fetch(#[from] nodestatus_registry::fetch::Error),
    /// The `registries` settings cannot be used.
    #[error("{reference}: the registries settings cannot be used")]
    Settings {
        /// The reference.
        reference: Reference,
        /// Why.
        #[source]
        source: nodestatus_registry::settings::Error,
    },
    /// The registry cache could not be opened.
    #[error("cannot open the registry cache {}", path.display())]
    Cache {
        /// Its directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: nodestatus_registry::cache::Error,
    },
    /// The component could not be written for the loader.
    #[error("cannot write {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The whole check took longer than its deadline.
    #[error("{reference}: no answer within {timeout:?}")]
    Deadline {
        /// The reference.
        reference: Reference,
        /// The deadline.
        timeout: Duration,
    },
    /// The loader refused the component (compilation, world, metadata,
    /// grants): the same checks as for a file.
    #[error("{reference}@{digest} was refused by the plugin loader: {error}")]
    Refused {
        /// The reference.
        reference: Reference,
        /// The digest refused.
        digest: Digest,
        /// The loader's reason.
        error: String,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the failure says that the verification policy does not
    /// trust the artifact: it is unsigned, or no signature checks with the
    /// key. A registry that cannot be reached, a key file that cannot be
    /// read, say nothing of the artifact.
    pub fn is_untrusted(&self) -> bool {
        matches!(self, Error::Fetch(e) if matches!(e.kind(), "unsigned" | "bad-signature"))
    }

    /// A short, bounded name of the failure, for the metric's `result`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Fetch(e) => e.kind(),
            Error::Settings { .. } => "settings",
            Error::Cache { .. } | Error::Write { .. } => "cache",
            Error::Deadline { .. } => "timeout",
            Error::Refused { .. } => "refused",
        }
    }
}

/// What one check of one plugin's image did.
#[derive(Debug, Clone)]
pub struct Report {
    /// The plugin (its config key).
    pub plugin: String,
    /// Its image.
    pub reference: Reference,
    /// `cached`, `unchanged`, `pulled`, or a failure's kind
    /// ([`Error::kind`]).
    pub result: &'static str,
    /// The digest it is about, when known.
    pub digest: Option<Digest>,
    /// The digest that runs after it, if any.
    pub running: Option<Digest>,
    /// The digest stopped because the verification policy in force does
    /// not trust it, while no version has loaded since.
    pub stopped: Option<Digest>,
    /// Whether this check stopped it.
    pub stopped_now: bool,
    /// The error, with every cause.
    pub error: Option<String>,
    /// Whether this failure is new (a first one, or another than the
    /// last): worth a Warning event.
    pub new_failure: bool,
    /// What the node does while no version runs.
    pub failure_policy: FailurePolicy,
}

impl Report {
    /// What `/readyz` and the Warning event say.
    pub fn message(&self) -> String {
        let running = match (&self.stopped, &self.running) {
            (Some(d), _) => format!(
                "stopped {d}, which ran: the verification policy in force does not trust it"
            ),
            (None, Some(d)) => format!("keeping {d} running"),
            (None, None) => match self.failure_policy {
                FailurePolicy::Open => {
                    "no version of it runs (failurePolicy open: the node goes on without it)"
                        .to_owned()
                }
                FailurePolicy::Closed => {
                    "no version of it runs (failurePolicy closed: it counts as failing in each pass)"
                        .to_owned()
                }
            },
        };
        match &self.error {
            Some(e) => format!("{e}; {running}; retrying"),
            None => format!("{}: {}", self.reference, self.result),
        }
    }
}

/// One image plugin's state.
#[derive(Debug)]
struct Slot {
    source: ImageSource,
    file: PathBuf,
    /// The digest whose component is in `file`.
    handed: Option<Digest>,
    /// The digest the loader accepted last.
    running: Option<Digest>,
    /// A digest the loader refused, and why.
    refused: Option<(Digest, String)>,
    /// `file` was written and the loader's verdict is not read yet:
    /// `Some(result)` to report once it is.
    awaiting: Option<&'static str>,
    /// The next check; `None`: never (a pinned digest that runs).
    due: Option<Instant>,
    backoff: Duration,
    /// The last failure, for telling a new one from a repeat.
    failing: Option<String>,
    /// The sha256 of the key file's content when the slot was last
    /// reconciled: a key replaced in place is a new policy too.
    key_id: Option<String>,
    /// The version stopped because the policy in force does not trust it,
    /// until a version loads.
    stopped: Option<Digest>,
    /// The section's `affectsReadiness`, for a plugin withheld before its
    /// metadata is known.
    affects_readiness: Option<bool>,
}

impl Slot {
    /// Whether a plugin withheld before any version ran makes the node not
    /// Ready: its section's `affectsReadiness`, else whether it fails
    /// closed.
    fn withheld_affects_readiness(&self) -> bool {
        self.affects_readiness
            .unwrap_or(self.source.failure_policy == FailurePolicy::Closed)
    }
}

/// Pulls the image plugins of the config in force and hands them to the
/// plugin directory.
pub struct Puller {
    cache_dir: PathBuf,
    active_dir: PathBuf,
    cache: Option<Cache>,
    plugins: Arc<PluginDir>,
    slots: BTreeMap<String, Slot>,
    registries: nodestatus_registry::Registries,
    timeout: Duration,
    /// Reports made before [`Puller::run`] could send them.
    pending: Vec<Report>,
    /// The registry cache's bounds in force.
    limits: nodestatus_registry::cache::Limits,
    /// When the cache was last collected.
    collected: Option<Instant>,
}

impl Puller {
    /// A puller for `cfg`'s image plugins, loading into `plugins`. Nothing
    /// is read or written until [`Puller::start_from_cache`] or
    /// [`Puller::tick`].
    pub fn new(cfg: &Config, plugins: Arc<PluginDir>) -> Self {
        Self {
            cache_dir: cfg.cache_dir.join("registry"),
            active_dir: cfg.cache_dir.join("registry-plugins"),
            cache: None,
            plugins,
            slots: BTreeMap::new(),
            registries: cfg.registries.clone(),
            timeout: PULL_TIMEOUT,
            pending: Vec::new(),
            limits: cfg.registry_cache,
            collected: None,
        }
    }

    /// Each registry operation's deadline (default [`PULL_TIMEOUT`]).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Where the components handed to the loader are written.
    pub fn active_dir(&self) -> &Path {
        &self.active_dir
    }

    /// The same puller writing the components for the loader in `dir`
    /// instead of `<cacheDir>/registry-plugins` (that of a `run` on this
    /// machine): for a command that runs one pass beside it (`once`). The
    /// registry cache is shared: its writes are atomic and by content.
    pub fn with_active_dir(mut self, dir: PathBuf) -> Self {
        self.active_dir = dir;
        self
    }
}

/// Sends one report to the log (once), and to each node's metric and, for
/// a new failure or a new version, each node's events
/// ([`Nodes::record_event`]): for `run`, its one node; for `simulate`,
/// every node that runs (one pull, each node told as its own puller would
/// tell it).
pub fn report(nodes: &dyn Nodes, r: &Report) {
    let (plugin, reference) = (r.plugin.as_str(), r.reference.to_string());
    let digest = r.digest.as_ref().map(|d| d.to_string()).unwrap_or_default();
    let event = match (&r.error, r.result) {
        (Some(_), _) => {
            tracing::warn!(plugin, image = reference, "registry: {}", r.message());
            r.new_failure.then(|| {
                (
                    EventType::Warning,
                    match r.stopped_now {
                        true => "PluginUntrusted",
                        false => "FailedPluginPull",
                    },
                    format!("plugin {plugin}: {}", r.message()),
                )
            })
        }
        (None, "unchanged") => {
            tracing::debug!(plugin, image = reference, digest, "registry: unchanged");
            None
        }
        (None, result) => {
            tracing::info!(plugin, image = reference, digest, "registry: {result}");
            (result == "pulled").then(|| {
                (
                    EventType::Normal,
                    "PluginPulled",
                    match r.reference.is_pinned() {
                        true => format!("plugin {plugin}: {reference} loaded"),
                        false => format!("plugin {plugin}: {reference} is now {digest}"),
                    },
                )
            })
        }
    };
    nodes.each(&mut |agent| agent.metrics().registry_pull(plugin, r.result));
    if let Some((event_type, reason, message)) = event {
        nodes.record_event(event_type, reason, &message, Some(plugin));
    }
}

/// The image plugins' files, for tests and tools: `<name>.wasm` in the
/// active directory of `cfg`.
pub fn active_files(cfg: &Config) -> BTreeSet<PathBuf> {
    let dir = cfg.cache_dir.join("registry-plugins");
    cfg.plugins
        .iter()
        .filter(|(_, p)| p.image.is_some())
        .map(|(n, _)| dir.join(format!("{n}.wasm")))
        .collect()
}
