//! The kubelet's three node loops, driving the plugin pipeline:
//!
//! - **register** ([`Agent::register`]): create the Node, with backoff from
//!   100 ms doubling to 7 s; on AlreadyExists or Forbidden, GET it and
//!   reconcile what the kubelet reconciles;
//! - **status sync** ([`Agent::sync_once`]): every `nodeStatusUpdateFrequency`
//!   (4 % jitter), run the setters on a copy of the node and patch
//!   `nodes/<name>/status` only when the status changed or the report period
//!   ran out; up to 5 tries a pass;
//! - **lease** ([`Agent::renew_lease`]): renew the Lease in `kube-node-lease`
//!   every quarter of its duration (4 % jitter).
//!
//! Each loop is a step (`register_once`, `sync_once`, `renew_lease`) that a
//! test can call directly, and a thin driver ([`Agent::run`]) that owns
//! timing, jitter, backoff and cancellation.

pub mod client;
pub mod patch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::pipeline::{self, PassReport};
use crate::plugin_dir::PluginDir;
use crate::runtime::facts::{FactSource, Facts};
use crate::runtime::{CallContext, EventType};
use client::NodeClient;

/// Tries of one status update (`nodeStatusUpdateRetry`).
pub const NODE_STATUS_UPDATE_RETRY: usize = 5;
/// Tries of one lease renewal.
pub const LEASE_UPDATE_RETRY: usize = 5;
/// Jitter factor of the sync and lease periods.
pub const JITTER: f64 = 0.04;
/// A plugin whose failure affects readiness makes the node not Ready after
/// failing this many passes in a row.
pub const FAILURES_BEFORE_NOT_READY: u32 = 3;
/// The message of Ready=False at shutdown, as the kubelet writes it.
pub const SHUTTING_DOWN: &str = "node is shutting down";

/// Errors of the node loops.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] client::Error),
    /// The node does not exist (deleted from outside).
    #[error("node {0:?} not found")]
    NodeGone(String),
    /// Every try of a status update failed.
    #[error("update node status exceeds retry count: {0}")]
    RetriesExceeded(#[source] Box<Error>),
    /// Every try of a lease renewal failed.
    #[error("failed {LEASE_UPDATE_RETRY} attempts to update lease: {0}")]
    LeaseRetriesExceeded(#[source] Box<Error>),
    /// The credentials cannot do what the engine must: retrying cannot help.
    #[error("permission denied, not retrying: {0}")]
    Permanent(#[source] Box<Error>),
    /// The setter pass panicked or was cancelled.
    #[error("the setter pass did not finish: {0}")]
    Pass(String),
}

impl Error {
    fn is_permanent(&self) -> bool {
        match self {
            Self::Permanent(_) => true,
            Self::Api(e) => e.is_permanent(),
            _ => false,
        }
    }
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What one status sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncOutcome {
    /// The status changed and was patched.
    Patched {
        /// Bytes of the patch body.
        bytes: usize,
    },
    /// Nothing changed but the report period ran out: a periodic report.
    Reported {
        /// Bytes of the patch body.
        bytes: usize,
    },
    /// Nothing changed and the report period has not run out.
    Unchanged,
}

struct SyncState {
    cached: Option<Value>,
    last_report: Option<Instant>,
    report_delay: f64,
    last_pass: Option<PassReport>,
}

/// Exponential backoff: `initial`, doubling, capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff from `initial` to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// Back to the initial delay.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// `d` plus up to `factor` of itself, at random (`wait.Jitter`).
pub fn jitter(d: Duration, factor: f64) -> Duration {
    d.mul_f64(1.0 + rand::random::<f64>() * factor)
}

/// The agent for one node.
pub struct Agent {
    cfg: Arc<Config>,
    client: NodeClient,
    plugins: Arc<PluginDir>,
    facts: FactSource,
    sync: tokio::sync::Mutex<SyncState>,
    node_uid: Mutex<Option<String>>,
    problems: Mutex<Vec<String>>,
    failures: Mutex<HashMap<String, (u32, String)>>,
    metrics: Arc<crate::metrics::Metrics>,
    last_sync_ok: Mutex<Option<Instant>>,
}

impl Agent {
    /// An agent for `cfg.node_name`, talking through `client`.
    pub fn new(cfg: Arc<Config>, client: NodeClient, plugins: Arc<PluginDir>) -> Arc<Self> {
        let metrics = Arc::new(crate::metrics::Metrics::new());
        client.traffic().attach(metrics.clone());
        {
            let m = metrics.clone();
            plugins.on_event(move |e| m.reload(e.result()));
        }
        metrics
            .plugins_loaded
            .set(plugins.current().plugins().len() as i64);
        Arc::new(Self {
            metrics,
            last_sync_ok: Mutex::new(None),
            cfg,
            client,
            plugins,
            facts: FactSource::host(),
            sync: tokio::sync::Mutex::new(SyncState {
                cached: None,
                last_report: None,
                report_delay: 0.0,
                last_pass: None,
            }),
            node_uid: Mutex::new(None),
            problems: Mutex::new(Vec::new()),
            failures: Mutex::new(HashMap::new()),
        })
    }

    /// The API calls.
    pub fn client(&self) -> &NodeClient {
        &self.client
    }

    /// The metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// `None` when ready to serve; otherwise why not: not registered yet, or
    /// no successful status sync in the last three update periods.
    pub async fn ready_reason(&self) -> Option<String> {
        if self.sync.lock().await.cached.is_none() {
            return Some("the node is not registered yet".into());
        }
        let limit = self.cfg.node_status_update_frequency * 3 + Duration::from_secs(5);
        match *self.last_sync_ok.lock().expect("sync time lock") {
            Some(t) if t.elapsed() <= limit => None,
            Some(t) => Some(format!("no successful status sync for {:?}", t.elapsed())),
            None => Some("no successful status sync yet".into()),
        }
    }

    /// The plugin directory.
    pub fn plugins(&self) -> &Arc<PluginDir> {
        &self.plugins
    }

    /// The last node the server returned.
    pub async fn cached_node(&self) -> Option<Value> {
        self.sync.lock().await.cached.clone()
    }

    /// The report of the last setter pass.
    pub async fn last_pass(&self) -> Option<PassReport> {
        self.sync.lock().await.last_pass.clone()
    }

    fn hostname(&self) -> String {
        self.cfg.hostname_override.clone().unwrap_or_else(|| {
            Facts::new(self.facts.clone())
                .system()
                .hostname
                .to_lowercase()
        })
    }

    /// Problems that make the node not ready: shutdown, and plugins whose
    /// failure affects readiness that failed [`FAILURES_BEFORE_NOT_READY`]
    /// passes in a row.
    fn node_problems(&self) -> Vec<String> {
        let mut p = self.problems.lock().expect("problems lock").clone();
        let failures = self.failures.lock().expect("failures lock");
        let mut failing: Vec<_> = failures
            .iter()
            .filter(|(_, (n, _))| *n >= FAILURES_BEFORE_NOT_READY)
            .collect();
        failing.sort();
        for (plugin, (_, err)) in failing {
            p.push(format!("plugin {plugin} is failing: {err}"));
        }
        p
    }

    fn note_failures(&self, report: &PassReport) {
        let mut f = self.failures.lock().expect("failures lock");
        // A plugin that is gone no longer counts.
        f.retain(|name, _| report.setters.iter().any(|s| &s.plugin == name));
        for s in &report.setters {
            match (&s.outcome, s.affects_readiness) {
                (Err(e), true) => {
                    let entry = f.entry(s.plugin.clone()).or_insert((0, String::new()));
                    entry.0 += 1;
                    entry.1 = e.message.clone();
                }
                _ => {
                    f.remove(&s.plugin);
                }
            }
        }
    }

    /// Runs the setters over `base` on a blocking thread; returns the new node.
    async fn run_setters(&self, base: &Value) -> Result<(Value, PassReport)> {
        let set = self.plugins.current();
        let runtime = self.plugins.runtime().clone();
        let ctx = CallContext {
            facts: Arc::new(Facts::new(self.facts.clone())),
            node_problems: Arc::from(self.node_problems()),
        };
        let base = base.clone();
        let loaded = set.plugins().len();
        let started = Instant::now();
        let (mut node, report) =
            tokio::task::spawn_blocking(move || pipeline::run_pass(&runtime, &set, &base, &ctx))
                .await
                .map_err(|e| Error::Pass(e.to_string()))?;
        self.metrics.observe_pass(&report, started.elapsed());
        self.metrics.plugins_loaded.set(loaded as i64);
        self.note_failures(&report);
        force_os_arch_labels(&mut node);
        for (plugin, e) in &report.events {
            self.record_event(e.event_type, &e.reason, &e.message, Some(plugin));
        }
        Ok((node, report))
    }

    /// The node as the kubelet's `initialNode` builds it, then one pass of
    /// the setters.
    pub async fn initial_node(&self) -> Result<Value> {
        let mut node = crate::once::initial_node(&self.cfg.node_name, &self.hostname());
        if let Some(labels) = node
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            for (k, v) in &self.cfg.node_labels {
                labels.insert(k.clone(), Value::String(v.clone()));
            }
        }
        if !self.cfg.register_with_taints.is_empty() {
            node["spec"]["taints"] =
                serde_json::to_value(&self.cfg.register_with_taints).expect("taints serialize");
        }
        if let Some(p) = &self.cfg.provider_id {
            node["spec"]["providerID"] = json!(p);
        }
        let (node, report) = self.run_setters(&node).await?;
        self.sync.lock().await.last_pass = Some(report);
        Ok(node)
    }

    /// One registration attempt. `Ok(true)` when the node exists and is
    /// reconciled.
    pub async fn register_once(&self) -> Result<bool> {
        if !self.cfg.register_node {
            // Never create it: wait for an existing node.
            return Ok(match self.client.get_node().await? {
                Some(n) => {
                    self.remember(n).await;
                    true
                }
                None => false,
            });
        }
        let node = self.initial_node().await?;
        match self.client.create_node(&node).await {
            Ok(created) => {
                tracing::info!(node = self.client.name(), "node registered");
                self.remember(created).await;
                Ok(true)
            }
            Err(
                e @ client::Error::Api {
                    code: 409 | 403, ..
                },
            ) => {
                // AlreadyExists, or Forbidden (since 1.32): GET and reconcile.
                let existing = match self.client.get_node().await {
                    Ok(Some(n)) => n,
                    Ok(None) => return Err(e.into()),
                    // The GET is refused too: the create's error says why
                    // (register() reports a 403 as permanent).
                    Err(get_err) if get_err.is_permanent() => return Err(e.into()),
                    // A transient failure of the GET: retry with backoff.
                    Err(get_err) => return Err(get_err.into()),
                };
                let reconciled = self.reconcile(&existing);
                let current = match patch::two_way(&existing, &reconciled) {
                    Some(p) => self.client.patch_status(&p).await?,
                    None => existing,
                };
                tracing::info!(node = self.client.name(), "node already exists; reconciled");
                self.remember(current).await;
                Ok(true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What the kubelet reconciles on an existing node: the attach-detach
    /// annotation and the default labels. `nodeLabels` and taints are never
    /// applied again.
    fn reconcile(&self, existing: &Value) -> Value {
        let mut n = existing.clone();
        let initial = crate::once::initial_node(&self.cfg.node_name, &self.hostname());
        let meta = n["metadata"].as_object_mut().expect("a node has metadata");
        let ann = meta.entry("annotations").or_insert_with(|| json!({}));
        ann["volumes.kubernetes.io/controller-managed-attach-detach"] = json!("true");
        let labels = meta.entry("labels").or_insert_with(|| json!({}));
        for (k, v) in initial["metadata"]["labels"]
            .as_object()
            .expect("initial labels")
        {
            labels[k] = v.clone();
        }
        n
    }

    async fn remember(&self, node: Value) {
        if let Some(uid) = node.pointer("/metadata/uid").and_then(Value::as_str) {
            *self.node_uid.lock().expect("uid lock") = Some(uid.to_owned());
        }
        self.sync.lock().await.cached = Some(node);
    }

    /// Registers with backoff (100 ms doubling to 7 s) until it succeeds, the
    /// error is permanent, or `cancel` fires.
    pub async fn register(&self, cancel: &CancellationToken) -> Result<()> {
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(7));
        loop {
            let step = backoff.next_delay();
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(step) => {}
            }
            match self.register_once().await {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    tracing::info!(node = self.client.name(), retry_in = ?backoff.next, "registerNode is false: waiting for the node to exist")
                }
                Err(e) if e.is_permanent() => {
                    let e = match e {
                        Error::Permanent(_) => e,
                        other => Error::Permanent(Box::new(other)),
                    };
                    tracing::error!(node = self.client.name(), "unable to register node: {e}");
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!(node = self.client.name(), retry_in = ?backoff.next, "unable to register node, backing off: {e}")
                }
            }
        }
    }

    /// One status sync (`updateNodeStatus`): up to 5 tries, the first from
    /// the cached node, later ones from a fresh GET.
    pub async fn sync_once(&self) -> Result<SyncOutcome> {
        let result = self.sync_tries().await;
        self.metrics.sync_result(match &result {
            Ok(SyncOutcome::Patched { .. }) => "patched",
            Ok(SyncOutcome::Reported { .. }) => "reported",
            Ok(SyncOutcome::Unchanged) => "unchanged",
            Err(_) => "error",
        });
        if result.is_ok() {
            *self.last_sync_ok.lock().expect("sync time lock") = Some(Instant::now());
        }
        result
    }

    async fn sync_tries(&self) -> Result<SyncOutcome> {
        let mut state = self.sync.lock().await;
        let mut last = None;
        for attempt in 0..NODE_STATUS_UPDATE_RETRY {
            match self.try_update(&mut state, attempt).await {
                Ok(o) => return Ok(o),
                Err(e @ (Error::NodeGone(_) | Error::Permanent(_))) => return Err(e),
                Err(e) if e.is_permanent() => return Err(Error::Permanent(Box::new(e))),
                Err(e) => {
                    tracing::warn!(
                        node = self.client.name(),
                        attempt,
                        "error updating node status, will retry: {e}"
                    );
                    if let Error::Api(client::Error::Api { code: 404, .. }) = e {
                        return Err(Error::NodeGone(self.client.name().to_owned()));
                    }
                    state.cached = None;
                    last = Some(e);
                }
            }
        }
        Err(Error::RetriesExceeded(Box::new(
            last.expect("at least one try"),
        )))
    }

    async fn try_update(&self, state: &mut SyncState, attempt: usize) -> Result<SyncOutcome> {
        let base = match (&state.cached, attempt) {
            (Some(n), 0) => n.clone(),
            _ => match self.client.get_node().await? {
                Some(n) => n,
                None => return Err(Error::NodeGone(self.client.name().to_owned())),
            },
        };
        let (new, report) = self.run_setters(&base).await?;
        state.last_pass = Some(report);
        let changed = patch::changed(&base, &new);
        let report_freq = self.cfg.node_status_report_frequency.as_secs_f64();
        let due = state.last_report.is_none_or(|t| {
            t.elapsed().as_secs_f64() >= (report_freq + state.report_delay).max(0.0)
        });
        if !changed && !due {
            state.cached = Some(base);
            return Ok(SyncOutcome::Unchanged);
        }
        let Some(p) = patch::two_way(&base, &new) else {
            state.cached = Some(base);
            return Ok(SyncOutcome::Unchanged);
        };
        let bytes = p.to_string().len();
        self.metrics.patches.inc();
        self.metrics.patch_bytes.inc_by(bytes as u64);
        let updated = self
            .client
            .patch_status(&p)
            .await
            .map_err(|e| match e.code() {
                Some(404) => Error::NodeGone(self.client.name().to_owned()),
                _ => e.into(),
            })?;
        if let Some(uid) = updated.pointer("/metadata/uid").and_then(Value::as_str) {
            *self.node_uid.lock().expect("uid lock") = Some(uid.to_owned());
        }
        self.note_ready_flip(&base, &updated);
        state.cached = Some(updated);
        state.last_report = Some(Instant::now());
        // After a change, the next periodic report comes at a random point of
        // the period; after a purely periodic report, exactly a period later.
        state.report_delay = if changed {
            (rand::random::<f64>() - 0.5) * report_freq
        } else {
            0.0
        };
        Ok(if changed {
            SyncOutcome::Patched { bytes }
        } else {
            SyncOutcome::Reported { bytes }
        })
    }

    fn note_ready_flip(&self, old: &Value, new: &Value) {
        let ready = |n: &Value| {
            crate::policy::conditions_by_type(n.pointer("/status/conditions"))
                .into_iter()
                .find(|(t, _)| *t == "Ready")
                .and_then(|(_, c)| c.get("status").and_then(Value::as_str).map(str::to_owned))
        };
        if let (Some(a), Some(b)) = (ready(old), ready(new)) {
            if a != b {
                tracing::info!(
                    node = self.client.name(),
                    from = a,
                    to = b,
                    "node Ready condition changed"
                );
            }
        }
    }

    /// One lease renewal: an optimistic update of the cached lease, a GET and
    /// another try on 409, a create when missing; up to 5 tries.
    pub async fn renew_lease(&self, cache: &mut Option<Lease>) -> Result<()> {
        let mut last = None;
        for _ in 0..LEASE_UPDATE_RETRY {
            let base = match cache.take() {
                Some(l) => l,
                None => match self.client.get_lease().await {
                    Ok(Some(l)) => l,
                    Ok(None) => {
                        let lease = self.new_lease(None);
                        match self.client.create_lease(&lease).await {
                            Ok(l) => {
                                *cache = Some(l);
                                return Ok(());
                            }
                            Err(e) if e.is_permanent() => {
                                return Err(Error::Permanent(Box::new(e.into())));
                            }
                            Err(e) => {
                                last = Some(e.into());
                                continue;
                            }
                        }
                    }
                    Err(e) if e.is_permanent() => return Err(Error::Permanent(Box::new(e.into()))),
                    Err(e) => {
                        last = Some(e.into());
                        continue;
                    }
                },
            };
            let lease = self.new_lease(Some(base.clone()));
            match self.client.update_lease(&lease).await {
                Ok(l) => {
                    *cache = Some(l);
                    return Ok(());
                }
                Err(e) if e.is_permanent() => return Err(Error::Permanent(Box::new(e.into()))),
                Err(
                    e @ client::Error::Api {
                        code: 409 | 404, ..
                    },
                ) => {
                    // Stale or gone: GET (and create if missing) on the next try.
                    last = Some(e.into());
                }
                Err(e) => {
                    *cache = Some(base);
                    last = Some(e.into());
                }
            }
        }
        Err(Error::LeaseRetriesExceeded(Box::new(
            last.expect("at least one try"),
        )))
    }

    fn new_lease(&self, base: Option<Lease>) -> Lease {
        let name = self.client.name().to_owned();
        let mut lease = base.unwrap_or_else(|| Lease {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some("kube-node-lease".into()),
                ..Default::default()
            },
            spec: None,
        });
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        spec.holder_identity = Some(name.clone());
        spec.lease_duration_seconds = Some(self.cfg.node_lease_duration_seconds);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        if let Some(uid) = self.node_uid.lock().expect("uid lock").clone() {
            let owned = lease.metadata.owner_references.get_or_insert_with(Vec::new);
            if !owned.iter().any(|o| o.uid == uid) {
                owned.retain(|o| o.kind != "Node");
                owned.push(OwnerReference {
                    api_version: "v1".into(),
                    kind: "Node".into(),
                    name: name.clone(),
                    uid,
                    ..Default::default()
                });
            }
        }
        lease
    }

    /// Records an event about the node, in the background; failures are
    /// logged, never retried or waited for.
    pub fn record_event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        let name = self.client.name().to_owned();
        let now = k8s_openapi::jiff::Timestamp::now();
        let event = Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}", now.as_nanosecond())),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Node".into()),
                name: Some(name.clone()),
                // The kubelet's node reference uses the node name as its UID.
                uid: Some(name.clone()),
                ..Default::default()
            },
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(event_type.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(
                    plugin.map_or("nodestatus".to_owned(), |p| format!("nodestatus/{p}")),
                ),
                host: Some(name.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some("nodestatus".into()),
            reporting_instance: Some(name),
            ..Default::default()
        };
        let client = self.client.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(e) = client.create_event(&event).await {
                    tracing::debug!("could not record event: {e}");
                }
            });
        }
    }

    /// Marks the node not Ready with `node is shutting down` and patches it
    /// at once.
    pub async fn shutdown(&self) -> Result<()> {
        self.problems
            .lock()
            .expect("problems lock")
            .push(SHUTTING_DOWN.to_owned());
        let mut state = self.sync.lock().await;
        // Force a write: the shutdown must reach the server now.
        state.last_report = None;
        self.try_update(&mut state, 0).await.map(|_| ())
    }

    /// Runs the loops until `cancel` fires, then marks the node not Ready.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) -> Result<()> {
        self.record_event(EventType::Normal, "Starting", "Starting nodestatus.", None);
        self.register(&cancel).await?;
        if cancel.is_cancelled() {
            return Ok(());
        }
        // In companion mode the kubelet owns the lease and Ready.
        let lease_task = (!self.cfg.companion).then(|| {
            let this = self.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { this.lease_loop(cancel).await })
        });
        let sync_result = self.clone().sync_loop(cancel.clone()).await;
        cancel.cancel();
        if let Some(t) = lease_task {
            let _ = t.await;
        }
        if let Err(e) = &sync_result {
            tracing::error!("status sync stopped: {e}");
        }
        if !self.cfg.companion {
            match self.shutdown().await {
                Ok(()) => tracing::info!(
                    node = self.client.name(),
                    "node marked not Ready: {SHUTTING_DOWN}"
                ),
                Err(e) => tracing::warn!("could not mark the node not Ready at shutdown: {e}"),
            }
        }
        sync_result
    }

    async fn sync_loop(self: Arc<Self>, cancel: CancellationToken) -> Result<()> {
        let period = self.cfg.node_status_update_frequency;
        let fast_until = Instant::now() + Duration::from_secs(120);
        let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(7));
        loop {
            let ready = self.cached_node().await.is_some_and(|n| is_ready(&n));
            let fast = !ready && Instant::now() < fast_until;
            let delay = match self.sync_once().await {
                Ok(_) => {
                    backoff.reset();
                    if fast {
                        Duration::from_millis(100)
                    } else {
                        jitter(period, JITTER)
                    }
                }
                Err(Error::NodeGone(name)) => {
                    tracing::warn!(node = name, "node was deleted; registering it again");
                    self.sync.lock().await.cached = None;
                    self.register(&cancel).await?;
                    Duration::ZERO
                }
                Err(e) if e.is_permanent() => return Err(e),
                Err(e) => {
                    let d = backoff.next_delay().max(if fast {
                        Duration::from_millis(100)
                    } else {
                        Duration::ZERO
                    });
                    tracing::warn!(retry_in = ?d, "unable to update node status: {e}");
                    d
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    async fn lease_loop(self: Arc<Self>, cancel: CancellationToken) {
        let interval = Duration::from_secs_f64(self.cfg.node_lease_duration_seconds as f64 * 0.25);
        let mut backoff = Backoff::new(Duration::from_millis(200), Duration::from_secs(7));
        let mut cache = None;
        loop {
            let result = self.renew_lease(&mut cache).await;
            self.metrics.lease_result(result.is_ok());
            let delay = match result {
                Ok(()) => {
                    backoff.reset();
                    jitter(interval, JITTER)
                }
                Err(e) => {
                    let d = backoff.next_delay();
                    tracing::warn!(retry_in = ?d, "unable to renew the node lease: {e}");
                    d
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Value) -> bool {
    crate::policy::conditions_by_type(node.pointer("/status/conditions"))
        .iter()
        .any(|(t, c)| *t == "Ready" && c.get("status").and_then(Value::as_str) == Some("True"))
}

/// The kubelet forces `kubernetes.io/os` and `kubernetes.io/arch` when they
/// are missing or wrong.
fn force_os_arch_labels(node: &mut Value) {
    let Some(meta) = node.get_mut("metadata").and_then(Value::as_object_mut) else {
        return;
    };
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    if let Some(l) = labels.as_object_mut() {
        for (k, v) in [
            ("kubernetes.io/os", std::env::consts::OS),
            ("kubernetes.io/arch", crate::once::go_arch()),
        ] {
            if l.get(k).and_then(Value::as_str) != Some(v) {
                l.insert(k.to_owned(), json!(v));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(7));
        let seq: Vec<u128> = (0..9).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(seq, vec![100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
    }

    #[test]
    fn jitter_stays_within_four_percent() {
        for _ in 0..100 {
            let d = jitter(Duration::from_secs(10), JITTER);
            assert!(d >= Duration::from_secs(10) && d <= Duration::from_millis(10_400));
        }
    }
}
