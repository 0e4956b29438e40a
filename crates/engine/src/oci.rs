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

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nodestatus_registry::{Cache, Client, Digest, Fetched, Fetcher, PublicKey, Reference, Trust};
use nodestatus_runtime::EventType;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::AgentHandle;
use crate::config::{Config, FailurePolicy, ImageSource, PullPolicy};
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

/// What the puller records beside each component it wrote and the loader
/// accepted: the version to start from at the next start.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Running {
    image: String,
    digest: String,
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

    /// For a command that runs one pass and ends (`once`, `plugin list`):
    /// each image plugin of `cfg` as `run` takes it at its start and its
    /// first check. The version in the registry cache when the plugin is
    /// pinned or its `pullPolicy` is `IfNotPresent` (no request); else, or
    /// when the cache holds none, the registry's, pulled and verified (and
    /// cached); with `Always` and the registry failing, the cached version,
    /// as `run` keeps it. Each is written for the loader: the caller's
    /// rescan loads it. One report per plugin: `cached`, `unchanged` or
    /// `pulled` with the digest written in `running`, or the failure, with
    /// `running` the version written anyway, if any.
    pub async fn prepare(&mut self, cfg: &Config) -> Vec<Report> {
        self.start_from_cache(cfg);
        let now = Instant::now();
        // A plugin not in the cache is asked of the registry below, which
        // says why it cannot be had, if it cannot.
        self.pending.clear();
        let mut reports = Vec::new();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = self.slots.get_mut(&name).expect("a slot");
            // What is written counts as what runs: the loader's verdict is
            // the caller's rescan's.
            slot.running = slot.handed.clone();
            let cached = slot.handed.is_some();
            let asks = !cached
                || (!slot.source.reference.is_pinned()
                    && slot.source.pull_policy == PullPolicy::Always);
            if !asks {
                reports.push(self.succeeded(&name, "cached", now));
                continue;
            }
            let report = match self.check(&name).await {
                Ok(Some((fetched, result))) => match self.hand(&name, &fetched, result) {
                    Ok(()) => {
                        let slot = self.slots.get_mut(&name).expect("a slot");
                        let same = slot.running == slot.handed;
                        slot.running = slot.handed.clone();
                        self.succeeded(&name, if same { "unchanged" } else { result }, now)
                    }
                    Err(e) => self.failed(&name, e, now),
                },
                Ok(None) => self.succeeded(&name, "unchanged", now),
                Err(e) => self.failed(&name, e, now),
            };
            reports.push(report);
        }
        reports
    }

    fn cache(&mut self) -> Result<Cache> {
        if let Some(c) = &self.cache {
            return Ok(c.clone());
        }
        let cache = Cache::open(&self.cache_dir).map_err(|source| Error::Cache {
            path: self.cache_dir.clone(),
            source,
        })?;
        self.cache = Some(cache.clone());
        Ok(cache)
    }

    /// Brings the slots in line with `cfg`; returns whether a plugin went
    /// away (its file is removed: the next rescan unloads it).
    fn reconcile(&mut self, cfg: &Config, now: Instant) -> bool {
        let wanted: BTreeMap<&String, (&ImageSource, Option<bool>)> = cfg
            .plugins
            .iter()
            .filter(|(_, p)| p.enabled)
            .filter_map(|(name, p)| p.image.as_ref().map(|i| (name, (i, p.affects_readiness))))
            .collect();
        let registries_changed = self.registries != cfg.registries;
        self.registries = cfg.registries.clone();
        if self.limits != cfg.registry_cache {
            self.limits = cfg.registry_cache;
            self.collected = None;
        }
        let gone: Vec<String> = self
            .slots
            .keys()
            .filter(|n| !wanted.contains_key(n))
            .cloned()
            .collect();
        for name in &gone {
            let slot = self.slots.remove(name).expect("a slot");
            let _ = std::fs::remove_file(&slot.file);
            let _ = std::fs::remove_file(self.running_file(name));
            self.plugins.set_source_problem(name, None);
            self.plugins.set_withheld(name, None);
        }
        let mut changed = !gone.is_empty();
        for (name, (source, affects_readiness)) in wanted {
            let key_id = key_id(source);
            if let Some(slot) = self.slots.get_mut(name) {
                slot.affects_readiness = affects_readiness;
            }
            match self.slots.get_mut(name) {
                Some(slot) if slot.source == *source && slot.key_id == key_id => {
                    if registries_changed {
                        slot.due = Some(now);
                        slot.backoff = MIN_BACKOFF;
                    }
                }
                Some(slot) => {
                    // Another reference or key: check it now; the running
                    // version stays until the new one loads, or until the
                    // check finds that the new policy does not trust it.
                    slot.source = source.clone();
                    slot.key_id = key_id;
                    slot.refused = None;
                    // Checked again in full (a new key verifies it again).
                    slot.handed = None;
                    slot.due = Some(now);
                    slot.backoff = MIN_BACKOFF;
                }
                None => {
                    changed = true;
                    self.slots.insert(
                        name.clone(),
                        Slot {
                            source: source.clone(),
                            file: self.active_dir.join(format!("{name}.wasm")),
                            handed: None,
                            running: None,
                            refused: None,
                            awaiting: None,
                            due: Some(now),
                            backoff: MIN_BACKOFF,
                            failing: None,
                            key_id,
                            stopped: None,
                            affects_readiness,
                        },
                    );
                }
            }
        }
        if changed {
            self.plugins
                .set_extra_files(self.slots.values().map(|s| s.file.clone()).collect());
        }
        !gone.is_empty()
    }

    fn running_file(&self, name: &str) -> PathBuf {
        self.active_dir.join(format!(".{name}.running.json"))
    }

    /// The version that ran last for `name`, if it is of `image`.
    fn last_running(&self, name: &str, image: &Reference) -> Option<Digest> {
        let text = std::fs::read(self.running_file(name)).ok()?;
        let r: Running = serde_json::from_slice(&text).ok()?;
        (r.image == image.to_string())
            .then(|| r.digest.parse().ok())
            .flatten()
    }

    /// Writes `fetched`'s component as `name`'s file for the loader.
    fn hand(&mut self, name: &str, fetched: &Fetched, result: &'static str) -> Result<()> {
        let slot = self.slots.get(name).expect("a slot");
        write_atomic(&slot.file, &fetched.artifact.bytes)?;
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.handed = Some(fetched.artifact.digest.clone());
        slot.awaiting = Some(result);
        Ok(())
    }

    /// Takes each image plugin of `cfg` from the registry cache, without
    /// the network, and writes it for the loader; call before the plugin
    /// directory's first [`PluginDir::rescan`]. What is not cached is
    /// pulled by [`Puller::tick`].
    pub fn start_from_cache(&mut self, cfg: &Config) {
        let now = Instant::now();
        self.reconcile(cfg, now);
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let source = self.slots[&name].source.clone();
            let result = self.take_from_cache(&name, &source);
            if let Err(e) = result {
                // Whatever an earlier run left there is not this image.
                let _ = std::fs::remove_file(&self.slots[&name].file);
                let untrusted = e.is_untrusted();
                let report = self.failed(&name, e, now);
                if untrusted {
                    // The version cached is signed by no key the policy
                    // trusts: it does not run, and the plugin counts as
                    // failing (its metadata unknown: the config's
                    // affectsReadiness decides, else its failurePolicy)
                    // until one that is loads.
                    let affects_readiness = self.slots[&name].withheld_affects_readiness();
                    self.plugins.set_withheld(
                        &name,
                        Some(crate::pipeline::Withheld {
                            plugin: name.clone(),
                            version: String::new(),
                            affects_readiness,
                            reason: report.message(),
                        }),
                    );
                }
                self.pending.push(report);
            }
        }
    }

    fn take_from_cache(&mut self, name: &str, source: &ImageSource) -> Result<()> {
        let cache = self.cache()?;
        let key = read_key(source)?;
        let fetcher = Fetcher::new(self.client(&source.reference)?, cache);
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        let reference = &source.reference;
        let last = self
            .last_running(name, reference)
            .map(|d| reference.with_digest(&d));
        let fetched = match last.and_then(|r| {
            fetcher
                .fetch_cached_trusted(&r, cap, key.as_ref().map(Required::trust))
                .ok()
        }) {
            Some(f) => f,
            None => {
                fetcher.fetch_cached_trusted(reference, cap, key.as_ref().map(Required::trust))?
            }
        };
        self.hand(name, &fetched, "cached")
    }

    fn client(&self, reference: &Reference) -> Result<Client> {
        Client::new(self.registries.clone())
            .map(|c| c.with_timeout(self.timeout))
            .map_err(|source| Error::Settings {
                reference: reference.clone(),
                source,
            })
    }

    /// A failed check of `name`: kept, retried with backoff, reported.
    fn failed(&mut self, name: &str, e: Error, now: Instant) -> Report {
        let slot = self.slots.get_mut(name).expect("a slot");
        let error = nodestatus_runtime::error_chain(&e);
        let new_failure = slot.failing.as_deref() != Some(error.as_str());
        slot.failing = Some(error.clone());
        slot.due = Some(now + slot.backoff);
        let cap = slot.source.pull_interval.clamp(MIN_BACKOFF, MAX_BACKOFF);
        slot.backoff = (slot.backoff * 2).min(cap);
        let digest = match &e {
            Error::Refused { digest, .. } => Some(digest.clone()),
            _ => None,
        };
        let report = Report {
            plugin: name.to_owned(),
            reference: slot.source.reference.clone(),
            result: e.kind(),
            digest,
            running: slot.running.clone(),
            stopped: slot.stopped.clone(),
            stopped_now: false,
            error: Some(error),
            new_failure,
            failure_policy: slot.source.failure_policy,
        };
        self.plugins
            .set_source_problem(name, Some(report.message()));
        if slot.running.is_none()
            && slot.stopped.is_none()
            && slot.source.failure_policy == FailurePolicy::Closed
        {
            // Never pulled, or no version loads: it fails closed.
            self.plugins.set_withheld(
                name,
                Some(crate::pipeline::Withheld {
                    plugin: name.to_owned(),
                    version: String::new(),
                    affects_readiness: slot.withheld_affects_readiness(),
                    reason: report.message(),
                }),
            );
        }
        report
    }

    /// A good check of `name`.
    fn succeeded(&mut self, name: &str, result: &'static str, now: Instant) -> Report {
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.failing = None;
        slot.backoff = MIN_BACKOFF;
        // A pinned digest never changes; a tag resolved once
        // (`IfNotPresent`) is not asked again while a version of it runs.
        slot.due = match (slot.source.reference.is_pinned(), slot.source.pull_policy) {
            (true, _) | (false, PullPolicy::IfNotPresent) => None,
            (false, PullPolicy::Always) => Some(now + slot.source.pull_interval),
        };
        slot.stopped = None;
        self.plugins.set_source_problem(name, None);
        self.plugins.set_withheld(name, None);
        Report {
            plugin: name.to_owned(),
            reference: slot.source.reference.clone(),
            result,
            digest: slot.running.clone(),
            running: slot.running.clone(),
            stopped: None,
            stopped_now: false,
            error: None,
            new_failure: false,
            failure_policy: slot.source.failure_policy,
        }
    }

    /// Reads the loader's verdict on each file written since the last
    /// rescan.
    fn verdicts(&mut self, now: Instant) -> Vec<Report> {
        let status: BTreeMap<PathBuf, crate::plugin_dir::FileStatus> = self
            .plugins
            .status()
            .into_iter()
            .map(|s| (s.file.clone(), s))
            .collect();
        let mut reports = Vec::new();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = self.slots.get_mut(&name).expect("a slot");
            let Some(result) = slot.awaiting.take() else {
                continue;
            };
            let digest = slot.handed.clone().expect("a handed digest");
            let written = std::fs::read(&slot.file)
                .map(|b| nodestatus_runtime::sha256_hex(&b))
                .ok();
            let st = status.get(&slot.file);
            let accepted = st.is_some_and(|s| s.sha256.is_some() && s.sha256 == written);
            if accepted {
                slot.running = Some(digest.clone());
                slot.refused = None;
                let record = Running {
                    image: slot.source.reference.to_string(),
                    digest: digest.to_string(),
                };
                let path = self.running_file(&name);
                if let Err(e) = write_atomic(&path, &serde_json::to_vec(&record).expect("json")) {
                    tracing::warn!(plugin = name, "cannot record the running version: {e}");
                }
                reports.push(self.succeeded(&name, result, now));
            } else {
                let error = st
                    .and_then(|s| s.error.clone())
                    .unwrap_or_else(|| "not loaded".to_owned());
                slot.refused = Some((digest.clone(), error.clone()));
                let e = Error::Refused {
                    reference: slot.source.reference.clone(),
                    digest,
                    error,
                };
                reports.push(self.failed(&name, e, now));
            }
        }
        reports
    }

    /// Puts the running version back in `name`'s file after the loader
    /// refused another, so that a reload (new settings, a restart) loads
    /// the good one.
    fn restore(&mut self, name: &str) {
        let slot = &self.slots[name];
        let (Some(running), Some(handed)) = (slot.running.clone(), slot.handed.clone()) else {
            return;
        };
        if running == handed {
            return;
        }
        let reference = slot.source.reference.with_digest(&running);
        let Ok(cache) = self.cache() else { return };
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        match cache.get(&reference, &running, cap) {
            Ok(Some(artifact)) => {
                let file = self.slots[name].file.clone();
                if write_atomic(&file, &artifact.bytes).is_ok() {
                    self.slots.get_mut(name).expect("a slot").handed = Some(running);
                }
            }
            _ => tracing::warn!(
                plugin = name,
                "the running version {running} is no longer in the registry cache: a restart loads the refused one"
            ),
        }
    }

    /// One round: applies `cfg`'s images, checks each plugin that is due,
    /// hands new versions to the loader (one rescan for all) and returns
    /// what happened. Never fails: each failure is a [`Report`].
    pub async fn tick(&mut self, cfg: &Config) -> Vec<Report> {
        let now = Instant::now();
        let mut reports = std::mem::take(&mut self.pending);
        let mut rescan = self.reconcile(cfg, now);
        // Written at start (from the cache): the caller's rescan loaded them.
        reports.extend(self.verdicts(now));
        let due: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| s.due.is_some_and(|d| d <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            match self.check(&name).await {
                Ok(Some((fetched, result))) => match self.hand(&name, &fetched, result) {
                    Ok(()) => rescan = true,
                    Err(e) => reports.push(self.failed(&name, e, now)),
                },
                Ok(None) => reports.push(self.succeeded(&name, "unchanged", now)),
                Err(e) if e.is_untrusted() => match self.trusts_running(&name).await {
                    Err(distrust) if distrust.is_untrusted() => {
                        reports.push(self.stop(&name, distrust, now));
                        rescan = true;
                    }
                    _ => reports.push(self.failed(&name, e, now)),
                },
                Err(e) => reports.push(self.failed(&name, e, now)),
            }
        }
        if rescan {
            let plugins = self.plugins.clone();
            let _ = tokio::task::spawn_blocking(move || plugins.rescan()).await;
            let verdicts = self.verdicts(now);
            let refused: Vec<String> = verdicts
                .iter()
                .filter(|r| r.result == "refused")
                .map(|r| r.plugin.clone())
                .collect();
            reports.extend(verdicts);
            if !refused.is_empty() {
                for name in &refused {
                    self.restore(name);
                }
                let plugins = self.plugins.clone();
                let _ = tokio::task::spawn_blocking(move || plugins.rescan()).await;
            }
        }
        let stale = self
            .collected
            .is_none_or(|at| now.duration_since(at) >= COLLECT_EVERY);
        if rescan || stale {
            self.collect(now).await;
        }
        reports
    }

    /// The versions no collection of the cache removes: each that runs or
    /// is written for the loader, each plugin's pinned digest, the digest
    /// each plugin's tag last resolved to (what a start with the registry
    /// down takes), and what each plugin ran last (its record in the
    /// active directory).
    pub fn in_use(&mut self) -> BTreeSet<Digest> {
        let mut keep = BTreeSet::new();
        let cache = self.cache().ok();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = &self.slots[&name];
            let reference = slot.source.reference.clone();
            keep.extend(slot.running.iter().chain(&slot.handed).cloned());
            keep.extend(reference.digest().cloned());
            if let Some(d) = cache
                .as_ref()
                .and_then(|c| c.tag(&reference).ok().flatten())
            {
                keep.insert(d);
            }
            keep.extend(self.last_running(&name, &reference));
        }
        keep
    }

    /// Removes from the registry cache what no plugin uses, past the
    /// bounds in force; logged, never failing the round.
    async fn collect(&mut self, now: Instant) {
        self.collected = Some(now);
        let Ok(cache) = self.cache() else { return };
        let keep = self.in_use();
        let limits = self.limits;
        let done = tokio::task::spawn_blocking(move || {
            cache.collect(&keep, &limits, std::time::SystemTime::now())
        })
        .await;
        match done {
            Ok(Ok(c)) if !c.removed.is_empty() => tracing::info!(
                removed = c.removed.len(),
                freed = c.freed,
                kept = c.kept,
                "registry cache: removed the versions no plugin uses, past registryCacheMaxAge or registryCacheMaxSize"
            ),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(
                "registry cache: cannot collect: {}",
                nodestatus_runtime::error_chain(&e)
            ),
            Err(e) => tracing::warn!("registry cache: the collection failed: {e}"),
        }
    }

    /// Checks `name`'s image: `None` when it names the running version (or
    /// one the loader refused: that is an error again), else the new
    /// version, verified, and whether it was `pulled` or taken from the
    /// cache (`cached`: a tag resolved once, `IfNotPresent`).
    async fn check(&mut self, name: &str) -> Result<Option<(Fetched, &'static str)>> {
        let source = self.slots[name].source.clone();
        let cache = self.cache()?;
        let key = read_key(&source)?;
        let fetcher = Fetcher::new(self.client(&source.reference)?, cache);
        let reference = &source.reference;
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        if source.pull_policy == PullPolicy::IfNotPresent && !reference.is_pinned() {
            // The version of the tag the cache holds, with no request,
            // unless the loader refused it: then the registry is asked.
            let slot = &self.slots[name];
            if let Ok(cached) =
                fetcher.fetch_cached_trusted(reference, cap, key.as_ref().map(Required::trust))
                && slot
                    .refused
                    .as_ref()
                    .is_none_or(|(d, _)| *d != cached.artifact.digest)
            {
                let digest = &cached.artifact.digest;
                if slot.running.as_ref() == Some(digest) && slot.handed.as_ref() == Some(digest) {
                    return Ok(None);
                }
                return Ok(Some((cached, "cached")));
            }
        }
        // Resolve first: a tag that still names the running digest costs
        // one request and no cache read.
        let bound = self.timeout * 4;
        let digest = tokio::time::timeout(bound, fetcher.client().resolve(reference))
            .await
            .map_err(|_| Error::Deadline {
                reference: reference.clone(),
                timeout: bound,
            })?
            .map_err(nodestatus_registry::fetch::Error::from)?;
        let slot = &self.slots[name];
        if slot.running.as_ref() == Some(&digest) && slot.handed.as_ref() == Some(&digest) {
            return Ok(None);
        }
        if let Some((refused, error)) = &slot.refused
            && *refused == digest
        {
            return Err(Error::Refused {
                reference: reference.clone(),
                digest,
                error: error.clone(),
            });
        }
        let pinned = reference.with_digest(&digest);
        let fetched = tokio::time::timeout(
            bound,
            fetcher.fetch_trusted(&pinned, cap, key.as_ref().map(Required::trust)),
        )
        .await
        .map_err(|_| Error::Deadline {
            reference: reference.clone(),
            timeout: bound,
        })??;
        if !reference.is_pinned() {
            // What a start with the registry down takes.
            let _ = fetcher.cache().put_tag(reference, &digest);
        }
        Ok(Some((fetched, "pulled")))
    }

    /// Whether the verification policy in force trusts the version that
    /// runs (`Ok` when none runs or no key is required). Its signature is
    /// checked from the cache first, then from the registry.
    async fn trusts_running(&mut self, name: &str) -> Result<()> {
        let slot = &self.slots[name];
        let Some(running) = slot.running.clone() else {
            return Ok(());
        };
        let source = slot.source.clone();
        let Some(key) = read_key(&source)? else {
            return Ok(());
        };
        let fetcher = Fetcher::new(self.client(&source.reference)?, self.cache()?);
        let pinned = source.reference.with_digest(&running);
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        let bound = self.timeout * 4;
        tokio::time::timeout(
            bound,
            fetcher.fetch_trusted(&pinned, cap, Some(key.trust())),
        )
        .await
        .map_err(|_| Error::Deadline {
            reference: source.reference.clone(),
            timeout: bound,
        })??;
        Ok(())
    }

    /// Stops `name`'s running version, which the verification policy in
    /// force does not trust (`e` says why): its file is removed (the next
    /// rescan unloads it and releases its fields), and the plugin is
    /// withheld from each pass, so that the node's readiness follows its
    /// `affects-readiness`, until a version the policy trusts loads. Checked
    /// again with the backoff of a failure.
    fn stop(&mut self, name: &str, e: Error, now: Instant) -> Report {
        let set = self.plugins.current();
        let setter = set.setters().iter().find(|s| s.name() == name);
        let affects_readiness = setter.is_some_and(|s| s.affects_readiness());
        let version = setter.map_or_else(String::new, |s| s.plugin().metadata().version.clone());
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.stopped = slot.running.take();
        slot.handed = None;
        slot.awaiting = None;
        let _ = std::fs::remove_file(&slot.file);
        let _ = std::fs::remove_file(self.running_file(name));
        let mut report = self.failed(name, e, now);
        report.stopped_now = true;
        report.new_failure = true;
        let message = report.message();
        self.plugins.set_withheld(
            name,
            Some(crate::pipeline::Withheld {
                plugin: name.to_owned(),
                version,
                affects_readiness,
                reason: message,
            }),
        );
        report
    }

    /// Makes every plugin due at the next [`Puller::tick`], a pinned one
    /// that runs included (benchmarks, tools).
    pub fn due_now(&mut self) {
        let now = Instant::now();
        for slot in self.slots.values_mut() {
            slot.due = Some(now);
        }
    }

    /// When the next check is due (`None`: none is).
    pub fn next_due(&self) -> Option<Instant> {
        self.slots.values().filter_map(|s| s.due).min()
    }

    /// Checks the images of the config in force until `cancel` fires,
    /// reporting each check through `agent` (metric, log, `/readyz`,
    /// events).
    pub async fn run(mut self, agent: AgentHandle, cancel: CancellationToken) {
        loop {
            let cfg = agent.cfg();
            let reports = tokio::select! {
                r = self.tick(&cfg) => r,
                _ = cancel.cancelled() => return,
            };
            for r in &reports {
                report(&agent, r);
            }
            let now = Instant::now();
            let wake = self
                .next_due()
                .map_or(now + CONFIG_POLL, |d| d.min(now + CONFIG_POLL));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = cancel.cancelled() => return,
            }
        }
    }
}

/// Sends one report to the metric, the log and, for a new failure or a new
/// version, the Node's events.
pub fn report(agent: &AgentHandle, r: &Report) {
    agent.metrics().registry_pull(&r.plugin, r.result);
    let (plugin, reference) = (r.plugin.as_str(), r.reference.to_string());
    let digest = r.digest.as_ref().map(|d| d.to_string()).unwrap_or_default();
    match (&r.error, r.result) {
        (Some(_), _) => {
            tracing::warn!(plugin, image = reference, "registry: {}", r.message());
            if r.new_failure {
                agent.record_event(
                    EventType::Warning,
                    match r.stopped_now {
                        true => "PluginUntrusted",
                        false => "FailedPluginPull",
                    },
                    &format!("plugin {plugin}: {}", r.message()),
                    Some(plugin),
                );
            }
        }
        (None, "unchanged") => {
            tracing::debug!(plugin, image = reference, digest, "registry: unchanged")
        }
        (None, result) => {
            tracing::info!(plugin, image = reference, digest, "registry: {result}");
            if result == "pulled" {
                agent.record_event(
                    EventType::Normal,
                    "PluginPulled",
                    &match r.reference.is_pinned() {
                        true => format!("plugin {plugin}: {reference} loaded"),
                        false => format!("plugin {plugin}: {reference} is now {digest}"),
                    },
                    Some(plugin),
                );
            }
        }
    }
}

/// The sha256 of `source`'s key file, when it has one that can be read;
/// with a signature policy, of the policy and its trusted root file.
fn key_id(source: &ImageSource) -> Option<String> {
    if let Some(policy) = &source.policy {
        let mut bytes = format!("{policy:?}").into_bytes();
        if let Some(root) = &policy.trusted_root {
            bytes.extend(std::fs::read(root).ok()?);
        }
        return Some(nodestatus_runtime::sha256_hex(&bytes));
    }
    let bytes = std::fs::read(source.key.as_ref()?).ok()?;
    Some(nodestatus_runtime::sha256_hex(&bytes))
}

/// What an image's signatures must satisfy, read again at each check.
enum Required {
    Key(PublicKey),
    Policy(nodestatus_registry::policy::Policy),
}

impl Required {
    fn trust(&self) -> Trust<'_> {
        match self {
            Required::Key(key) => Trust::Key(key),
            Required::Policy(policy) => Trust::Policy(policy),
        }
    }
}

fn read_key(source: &ImageSource) -> Result<Option<Required>> {
    if let Some(policy) = &source.policy {
        return policy
            .build()
            .map(|p| Some(Required::Policy(p)))
            .map_err(|e| Error::Fetch(e.into()));
    }
    source
        .key
        .as_deref()
        .map(PublicKey::read)
        .transpose()
        .map(|key| key.map(Required::Key))
        .map_err(|e| Error::Fetch(e.into()))
}

/// Writes `bytes` to `path` (its directory made owner-only if missing),
/// atomically and durably ([`nodestatus_files::write_atomic`]), so that a
/// rescan never reads half a file and a crash leaves a whole one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let err = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().expect("a file in a directory");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(err)?;
    nodestatus_files::write_atomic(path, bytes).map_err(err)
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
