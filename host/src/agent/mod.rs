//! The kubelet's three node loops, driving the plugin pipeline:
//!
//! - **register** ([`Agent::register`]): create the Node, with backoff from
//!   100 ms doubling to 7 s; on AlreadyExists or Forbidden, GET it and
//!   reconcile what the kubelet reconciles. Only here may an error end the
//!   process: credentials refused at start are an identity error;
//! - **status sync** ([`Agent::sync_once`]): every `nodeStatusUpdateFrequency`
//!   (4 % jitter), run the setters on a copy of the live node and patch
//!   `nodes/<name>/status` only when the status changed or the report period
//!   ran out; up to 5 tries a pass, the first from the watch's copy of the
//!   node, the others from a fresh GET; at start a fast update every 100 ms
//!   until Ready (2 minutes at most);
//! - **lease** ([`Agent::renew_lease`]): renew the Lease in `kube-node-lease`
//!   every quarter of its duration (4 % jitter);
//! - **watch**: one watch on the node (field selector `metadata.name`) keeps
//!   the live copy current, so a change written by someone else (the node
//!   lifecycle controller's `Ready=Unknown`) is seen and corrected by the
//!   next pass.
//!
//! Every error after start is retried; every call has a deadline; SIGTERM
//! leaves the node as it is. The decisions (when to write, with which
//! backoff) are pure functions in [`decide`]; this module is the driver.

pub mod client;
pub mod decide;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::{Event, EventSource, Node, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference, Time};
use serde_json::{Value, json};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::node::{Diff, patch};
use crate::pipeline::{self, PassReport};
use crate::plugin_dir::PluginDir;
use crate::runtime::CallError;
use crate::runtime::facts::{FactSource, Facts};
use crate::runtime::{CallContext, EmittedEvent, EventType};
use client::{ErrorClass, NodeClient};
pub use decide::{
    Backoff, JITTER, LEASE_UPDATE_RETRY, NODE_STATUS_UPDATE_RETRY, PassKind, Random, ThreadRandom,
};

/// A plugin whose failure affects readiness makes the node not Ready after
/// failing this many passes in a row.
pub const FAILURES_BEFORE_NOT_READY: u32 = 3;
/// The message of Ready=False when the node itself shuts down, as the
/// kubelet writes it.
pub const SHUTTING_DOWN: &str = "node is shutting down";

/// Why the node is not ready, as the `ready` setter is told
/// (`host.node-problems`, one message each).
#[derive(Debug, Clone, thiserror::Error)]
pub enum NodeProblem {
    /// The machine itself is shutting down (logind's `PrepareForShutdown`,
    /// or SIGUSR2).
    #[error("{SHUTTING_DOWN}")]
    ShuttingDown,
    /// A plugin that affects readiness failed
    /// [`FAILURES_BEFORE_NOT_READY`] passes in a row.
    #[error("plugin {plugin} is failing: {error}")]
    PluginFailing {
        /// The plugin.
        plugin: String,
        /// Its last failure.
        #[source]
        error: CallError,
    },
}
/// The taint of a node whose cloud-controller-manager has not initialized it
/// yet (`cloudProvider: external`).
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The annotation with the configured node IP (`cloudProvider: external`).
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// `jitter(d, factor)` with the thread's random draw (`wait.Jitter`).
pub fn jitter(d: Duration, factor: f64) -> Duration {
    decide::jitter(d, factor, ThreadRandom.unit())
}

/// Errors of the node loops.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An API call failed.
    #[error(transparent)]
    Api(#[from] client::Error),
    /// The node does not exist (deleted from outside).
    #[error(
        "node {0:?} not found: it was deleted from the API server; nodestatus does not register it again in this run (restart nodestatus, or set reRegisterDeletedNode: true)"
    )]
    NodeGone(String),
    /// The lease cannot be created while the node does not exist (its owner
    /// reference needs the node's uid).
    #[error("node {0:?} not found: the lease is created once the node exists")]
    LeaseWaitsForNode(String),
    /// Every try of a status update failed.
    #[error("update node status exceeds retry count: {0}")]
    RetriesExceeded(#[source] Box<Error>),
    /// Every try of a lease renewal failed.
    #[error("failed {LEASE_UPDATE_RETRY} attempts to update lease: {0}")]
    LeaseRetriesExceeded(#[source] Box<Error>),
    /// At start, the credentials cannot register this node: an identity or
    /// RBAC error that the operator must fix.
    #[error(
        "permission denied, not retrying: {0} (check that the credentials are system:node:<nodeName> for this node, or have RBAC to create and get it)"
    )]
    Permanent(#[source] Box<Error>),
    /// The setter pass panicked or was cancelled.
    #[error("the setter pass did not finish: {0}")]
    Pass(String),
    /// The node the pass made would be refused by the API server, so nothing
    /// was sent (the pipeline drops such a setter's output, so this is the
    /// last line of defence: one refused field fails a whole status update).
    #[error(transparent)]
    Refused(#[from] crate::validate::Error),
}

impl Error {
    fn is_permanent(&self) -> bool {
        match self {
            Self::Permanent(_) => true,
            Self::Api(e) => e.is_permanent(),
            _ => false,
        }
    }

    /// A bounded label for metrics and `/readyz`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Api(e) => e.class().as_str(),
            Self::NodeGone(_) | Self::LeaseWaitsForNode(_) => "node-gone",
            Self::RetriesExceeded(e) | Self::LeaseRetriesExceeded(e) | Self::Permanent(e) => {
                e.class()
            }
            Self::Pass(_) => "pass",
            Self::Refused(_) => "refused",
        }
    }

    fn api_class(&self) -> Option<ErrorClass> {
        match self {
            Self::Api(e) => Some(e.class()),
            _ => None,
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
    /// Nothing written: nothing changed and the report period has not run
    /// out (or, in the fast update, Ready is still False).
    Unchanged,
}

struct SyncState {
    report: decide::ReportSchedule,
    last_pass: Option<PassReport>,
}

/// The last failure of a loop, for `/readyz`.
#[derive(Debug, Clone)]
struct Failing {
    class: &'static str,
    message: String,
    since: Instant,
}

/// The agent for one node.
pub struct Agent {
    /// The config; a live reload swaps it between passes.
    cfg: arc_swap::ArcSwap<Config>,
    client: NodeClient,
    plugins: Arc<PluginDir>,
    facts: FactSource,
    /// The container runtime's CRI client, when an endpoint is configured.
    cri: Option<crate::cri::Client>,
    /// Whether the last read of the runtime failed (to log a change once).
    cri_failing: AtomicBool,
    rng: Arc<dyn Random>,
    sync: tokio::sync::Mutex<SyncState>,
    /// The node as last seen: from the watch, a GET, or a write's answer.
    live: Mutex<Option<Value>>,
    /// Whether the live copy can be trusted for a try 0: false from a failed
    /// watch, or a connection reset, until a restarted watch has listed the
    /// node again. While false, try 0 reads the node with a GET.
    live_stale: AtomicBool,
    /// Restarts the watch (after a connection reset, or a watch that has not
    /// listed the node for too long).
    watch_restart: tokio::sync::Notify,
    /// When the watch last (re)started.
    watch_started: Mutex<Instant>,
    node_uid: Mutex<Option<String>>,
    registered: AtomicBool,
    node_gone: AtomicBool,
    /// Whether the readiness checks (one pass of the setters) have run.
    checks_ran: AtomicBool,
    unschedulable: Mutex<bool>,
    /// The node itself is shutting down.
    shutting_down: AtomicBool,
    failures: Mutex<HashMap<String, (u32, CallError)>>,
    failing: Mutex<HashMap<&'static str, Failing>>,
    metrics: Arc<crate::metrics::Metrics>,
    last_sync_ok: Mutex<Option<Instant>>,
    last_lease_ok: Mutex<Option<Instant>>,
}

impl Agent {
    /// An agent for `cfg.node_name`, talking through `client`.
    pub fn new(cfg: Arc<Config>, client: NodeClient, plugins: Arc<PluginDir>) -> Arc<Self> {
        Self::with_random(cfg, client, plugins, Arc::new(ThreadRandom))
    }

    /// Like [`Self::new`], with the random source of the jitter (tests).
    pub fn with_random(
        cfg: Arc<Config>,
        client: NodeClient,
        plugins: Arc<PluginDir>,
        rng: Arc<dyn Random>,
    ) -> Arc<Self> {
        let metrics = Arc::new(crate::metrics::Metrics::new());
        client.traffic().attach(metrics.clone());
        {
            let m = metrics.clone();
            plugins.on_event(move |e| m.reload(e.result()));
        }
        metrics
            .plugins_loaded
            .set(plugins.current().plugins().len() as i64);
        let cri = crate::cri::Client::from_config(&cfg);
        Arc::new(Self {
            metrics,
            last_sync_ok: Mutex::new(None),
            last_lease_ok: Mutex::new(None),
            sync: tokio::sync::Mutex::new(SyncState {
                report: decide::ReportSchedule::new(cfg.node_status_report_frequency),
                last_pass: None,
            }),
            cfg: arc_swap::ArcSwap::new(cfg),
            client,
            plugins,
            facts: FactSource::host(),
            cri,
            cri_failing: AtomicBool::new(false),
            rng,
            live: Mutex::new(None),
            live_stale: AtomicBool::new(false),
            watch_restart: tokio::sync::Notify::new(),
            watch_started: Mutex::new(Instant::now()),
            node_uid: Mutex::new(None),
            registered: AtomicBool::new(false),
            node_gone: AtomicBool::new(false),
            checks_ran: AtomicBool::new(false),
            unschedulable: Mutex::new(false),
            shutting_down: AtomicBool::new(false),
            failures: Mutex::new(HashMap::new()),
            failing: Mutex::new(HashMap::new()),
        })
    }

    /// The config in force.
    pub fn cfg(&self) -> Arc<Config> {
        self.cfg.load_full()
    }

    /// Puts a live config change in force from the next pass on: the
    /// update and report periods (the plugin settings are the plugin
    /// directory's, swapped by the caller). What cannot change live is
    /// refused before this (see `crate::live_config`).
    pub async fn set_config(&self, cfg: Arc<Config>) {
        self.sync
            .lock()
            .await
            .report
            .set_period(cfg.node_status_report_frequency);
        self.cfg.store(cfg);
    }

    /// The API calls.
    pub fn client(&self) -> &NodeClient {
        &self.client
    }

    /// The metrics.
    pub fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// `None` when ready to serve; otherwise why not: not registered yet,
    /// the node deleted from outside, no successful status sync in the last
    /// three update periods, or no lease renewal for a lease duration.
    pub async fn ready_reason(&self) -> Option<String> {
        if !self.registered.load(Ordering::SeqCst) {
            return Some("the node is not registered yet".into());
        }
        if self.node_gone.load(Ordering::SeqCst) {
            return Some(format!(
                "node {:?} was deleted from the API server: nodestatus does not register it again in this run (restart nodestatus to register it, or set reRegisterDeletedNode: true)",
                self.cfg().node_name
            ));
        }
        let failing = |l: &str| {
            self.failing
                .lock()
                .expect("failing lock")
                .get(l)
                .map(|f| {
                    format!(
                        "; failing since {:?} ago with {}: {}",
                        f.since.elapsed(),
                        f.class,
                        f.message
                    )
                })
                .unwrap_or_default()
        };
        let limit = self.cfg().node_status_update_frequency * 3 + Duration::from_secs(5);
        match *self.last_sync_ok.lock().expect("sync time lock") {
            Some(t) if t.elapsed() <= limit => {}
            Some(t) => {
                return Some(format!(
                    "no successful status sync for {:?}{}",
                    t.elapsed(),
                    failing("sync")
                ));
            }
            None => return Some(format!("no successful status sync yet{}", failing("sync"))),
        }
        if !self.cfg().companion {
            let lease = Duration::from_secs(self.cfg().node_lease_duration_seconds as u64);
            if let Some(t) = *self.last_lease_ok.lock().expect("lease time lock")
                && t.elapsed() > lease
            {
                return Some(format!(
                    "no lease renewal for {:?}{}",
                    t.elapsed(),
                    failing("lease")
                ));
            }
        }
        None
    }

    /// Whether the node was found deleted (and not seen since).
    pub fn node_deleted(&self) -> bool {
        self.node_gone.load(Ordering::SeqCst)
    }

    /// The plugin directory.
    pub fn plugins(&self) -> &Arc<PluginDir> {
        &self.plugins
    }

    /// The node as last seen (watch, GET or a write's answer).
    pub async fn cached_node(&self) -> Option<Value> {
        self.live.lock().expect("live lock").clone()
    }

    /// The report of the last setter pass.
    pub async fn last_pass(&self) -> Option<PassReport> {
        self.sync.lock().await.last_pass.clone()
    }

    fn hostname(&self) -> String {
        self.cfg().hostname(&Facts::new(self.facts.clone()))
    }

    /// Problems that make the node not ready: the node's own shutdown, and
    /// plugins whose failure affects readiness that failed
    /// [`FAILURES_BEFORE_NOT_READY`] passes in a row.
    fn node_problems(&self) -> Vec<NodeProblem> {
        let mut p = Vec::new();
        if self.shutting_down.load(Ordering::SeqCst) {
            p.push(NodeProblem::ShuttingDown);
        }
        let failures = self.failures.lock().expect("failures lock");
        let mut failing: Vec<_> = failures
            .iter()
            .filter(|(_, (n, _))| *n >= FAILURES_BEFORE_NOT_READY)
            .collect();
        failing.sort_by(|a, b| a.0.cmp(b.0));
        for (plugin, (_, error)) in failing {
            p.push(NodeProblem::PluginFailing {
                plugin: plugin.clone(),
                error: error.clone(),
            });
        }
        p
    }

    /// Counts one pass (not one try) of the setters.
    fn note_failures(&self, report: &PassReport) {
        let mut f = self.failures.lock().expect("failures lock");
        // A plugin that is gone no longer counts.
        f.retain(|name, _| report.setters.iter().any(|s| &s.plugin == name));
        for s in &report.setters {
            match (&s.outcome, s.affects_readiness) {
                (Err(e), true) => {
                    let count = f.get(&s.plugin).map_or(0, |(n, _)| *n);
                    f.insert(s.plugin.clone(), (count + 1, e.clone()));
                }
                _ => {
                    f.remove(&s.plugin);
                }
            }
        }
    }

    /// Runs the setters over `base` on a blocking thread, then the built-in
    /// steps; returns the new node. Events are not recorded here: the
    /// caller records those of the try whose result reached the server.
    async fn run_setters(&self, base: &Value) -> Result<(Value, PassReport)> {
        let set = self.plugins.current();
        let runtime = self.plugins.runtime().clone();
        let ctx = CallContext {
            facts: Arc::new(Facts::new(self.facts.clone())),
            node_problems: self
                .node_problems()
                .iter()
                .map(ToString::to_string)
                .collect(),
            container_runtime: self.read_container_runtime().await,
        };
        let input = base.clone();
        let loaded = set.plugins().len();
        let started = std::time::Instant::now();
        let (mut node, mut report) =
            tokio::task::spawn_blocking(move || pipeline::pass(&runtime, &set, &input, &ctx))
                .await
                .map_err(|e| Error::Pass(e.to_string()))?;
        self.metrics.observe_pass(&report, started.elapsed());
        self.metrics.observe_cache(self.plugins.runtime().cache());
        self.metrics.plugins_loaded.set(loaded as i64);
        if self.cfg().external_cloud_provider {
            self.leave_cloud_fields(base, &mut node);
        }
        if !self.checks_ran.swap(true, Ordering::SeqCst) {
            // The readiness checks had not run before this pass: keep the
            // node's Ready as it is (no NotReady at a restart, no Ready=True
            // before a check).
            keep_condition(base, &mut node, "Ready");
            report
                .events
                .retain(|(_, e)| !matches!(e.reason.as_str(), "NodeReady" | "NodeNotReady"));
        }
        Ok((node, report))
    }

    /// Asks the container runtime for its facts, when one is configured;
    /// logs when it stops answering and when it answers again.
    async fn read_container_runtime(
        &self,
    ) -> Option<Arc<std::result::Result<crate::cri::Facts, crate::cri::Error>>> {
        let answer = self.cri.as_ref()?.facts().await;
        let failing = answer.is_err();
        if self.cri_failing.swap(failing, Ordering::SeqCst) != failing {
            match &answer {
                Err(e) => tracing::warn!("container runtime: {e}"),
                Ok(f) => {
                    tracing::info!("container runtime: {} {} answers again", f.name, f.version)
                }
            }
        }
        Some(Arc::new(answer))
    }

    /// `cloudProvider: external`: the cloud-controller-manager's addresses
    /// stay as they are once it has written some.
    fn leave_cloud_fields(&self, base: &Value, node: &mut Value) {
        let had = base
            .pointer("/status/addresses")
            .and_then(Value::as_array)
            .is_some_and(|a| !a.is_empty());
        if had {
            node["status"]["addresses"] = base["status"]["addresses"].clone();
        }
    }

    fn record_pass_events(&self, report: &PassReport) {
        for (plugin, e) in &report.events {
            self.record_emitted(plugin, e);
        }
    }

    fn record_emitted(&self, plugin: &str, e: &EmittedEvent) {
        self.record_event(e.event_type, &e.reason, &e.message, Some(plugin));
    }

    /// The node as the kubelet's `initialNode` builds it, then one pass of
    /// the setters.
    pub async fn initial_node(&self) -> Result<Value> {
        let mut node = crate::node::kubelet::initial_node(&self.cfg().node_name, &self.hostname());
        if let Some(labels) = node
            .pointer_mut("/metadata/labels")
            .and_then(Value::as_object_mut)
        {
            for (k, v) in &self.cfg().node_labels {
                labels.insert(k.clone(), Value::String(v.clone()));
            }
        }
        let mut taints =
            serde_json::to_value(&self.cfg().register_with_taints).expect("taints serialize");
        if self.cfg().external_cloud_provider {
            if let Some(list) = taints.as_array_mut()
                && !list.iter().any(|t| t["key"] == UNINITIALIZED_TAINT)
            {
                list.push(
                    json!({"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}),
                );
            }
            if let Some(ip) = self.provided_node_ip() {
                node["metadata"]["annotations"][PROVIDED_NODE_IP] = json!(ip);
            }
        }
        if taints.as_array().is_some_and(|l| !l.is_empty()) {
            node["spec"]["taints"] = taints;
        }
        if let Some(p) = &self.cfg().provider_id {
            node["spec"]["providerID"] = json!(p);
        }
        let (node, report) = self.run_setters(&node).await?;
        self.note_failures(&report);
        self.sync.lock().await.last_pass = Some(report);
        Ok(node)
    }

    fn provided_node_ip(&self) -> Option<String> {
        (!self.cfg().node_ips.is_empty()).then(|| {
            self.cfg()
                .node_ips
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    /// One registration attempt. `Ok(true)` when the node exists and is
    /// reconciled.
    pub async fn register_once(&self) -> Result<bool> {
        if !self.cfg().register_node {
            // Never create it: wait for an existing node.
            return Ok(match self.client.get_node().await? {
                Some(n) => {
                    self.registered_with(n);
                    true
                }
                None => false,
            });
        }
        let node = self.initial_node().await?;
        crate::validate::node(&node).map_err(crate::validate::Error::Refused)?;
        match self.client.create_node(&node).await {
            Ok(created) => {
                tracing::info!(node = self.client.name(), "node registered");
                if let Some(r) = self.sync.lock().await.last_pass.clone() {
                    self.record_pass_events(&r);
                }
                self.registered_with(created);
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
                self.registered_with(current);
                Ok(true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// What the kubelet reconciles on an existing node: the attach-detach
    /// annotation and the default labels (hostname, zone and region,
    /// instance type, os, arch), each only where the initial node has it,
    /// `nodeLabels` overrides included. Other `nodeLabels` and taints are
    /// never applied again.
    fn reconcile(&self, existing: &Value) -> Value {
        let mut initial =
            crate::node::kubelet::initial_node(&self.cfg().node_name, &self.hostname());
        for (k, v) in &self.cfg().node_labels {
            initial["metadata"]["labels"][k] = json!(v);
        }
        reconcile(existing, &initial)
    }

    fn registered_with(&self, node: Value) {
        self.offer(node);
        self.registered.store(true, Ordering::SeqCst);
        self.node_gone.store(false, Ordering::SeqCst);
        self.metrics.node_deleted.set(0);
    }

    /// Takes `node` as the live node unless the one held is newer.
    fn offer(&self, node: Value) {
        if let Some(uid) = node.pointer("/metadata/uid").and_then(Value::as_str) {
            *self.node_uid.lock().expect("uid lock") = Some(uid.to_owned());
        }
        let mut live = self.live.lock().expect("live lock");
        let rv = |n: &Value| {
            n.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let same_node = live
            .as_ref()
            .is_none_or(|l| l.pointer("/metadata/uid") == node.pointer("/metadata/uid"));
        if !same_node || decide::newer(live.as_ref().and_then(rv).as_deref(), rv(&node).as_deref())
        {
            *live = Some(node);
            drop(live);
            self.came_back();
        }
    }

    /// The node is gone: forget it (and its uid, so that no lease is created
    /// pointing at it).
    fn forget_node(&self) {
        *self.live.lock().expect("live lock") = None;
        *self.node_uid.lock().expect("uid lock") = None;
        if self.registered.load(Ordering::SeqCst) && !self.node_gone.swap(true, Ordering::SeqCst) {
            self.metrics.node_deleted.set(1);
            tracing::error!(
                node = self.client.name(),
                "the node was deleted from the API server; nodestatus does not register it again in this run (the kubelet's rule): restart nodestatus to register it, or set reRegisterDeletedNode: true"
            );
        }
    }

    /// Registers with backoff (100 ms doubling to 7 s) until it succeeds,
    /// the credentials are refused (an identity error at start: returned),
    /// or `cancel` fires.
    pub async fn register(&self, cancel: &CancellationToken) -> Result<()> {
        let mut backoff = Backoff::registration();
        loop {
            let step = backoff.next_delay();
            tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                _ = tokio::time::sleep(step) => {}
            }
            let result = tokio::select! {
                _ = cancel.cancelled() => return Ok(()),
                r = self.register_once() => r,
            };
            match result {
                Ok(true) => return Ok(()),
                Ok(false) => {
                    tracing::info!(node = self.client.name(), retry_in = ?backoff.peek(), "registerNode is false: waiting for the node to exist")
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
                    self.metrics.loop_error("register", e.class());
                    tracing::warn!(node = self.client.name(), retry_in = ?backoff.peek(), "unable to register node, backing off: {e}")
                }
            }
        }
    }

    /// One regular status sync (`updateNodeStatus`): up to 5 tries, the
    /// first from the live node, later ones from a fresh GET.
    pub async fn sync_once(&self) -> Result<SyncOutcome> {
        self.sync_pass(PassKind::Regular).await
    }

    /// One status sync of `kind`.
    pub async fn sync_pass(&self, kind: PassKind) -> Result<SyncOutcome> {
        self.heal_watch();
        let result = self.sync_tries(kind).await;
        self.metrics.sync_result(match &result {
            Ok(SyncOutcome::Patched { .. }) => "patched",
            Ok(SyncOutcome::Reported { .. }) => "reported",
            Ok(SyncOutcome::Unchanged) => "unchanged",
            Err(_) => "error",
        });
        match &result {
            Ok(_) => {
                *self.last_sync_ok.lock().expect("sync time lock") = Some(Instant::now());
                self.recovered("sync");
            }
            Err(e) => self.failed("sync", e),
        }
        result
    }

    fn failed(&self, l: &'static str, e: &Error) {
        let class = match e {
            Error::RetriesExceeded(inner) | Error::LeaseRetriesExceeded(inner) => inner.class(),
            other => other.class(),
        };
        self.metrics.loop_error(l, class);
        let mut f = self.failing.lock().expect("failing lock");
        let first = !f.contains_key(l);
        let since = f.get(l).map_or_else(Instant::now, |x| x.since);
        f.insert(
            l,
            Failing {
                class,
                message: e.to_string(),
                since,
            },
        );
        drop(f);
        if first && matches!(class, "unauthorized" | "forbidden") {
            // Where it matters: the credentials were refused after start.
            let reason = if l == "lease" {
                "FailedLeaseRenewal"
            } else {
                "FailedNodeStatusUpdate"
            };
            self.record_event(
                EventType::Warning,
                reason,
                &format!("the {l} loop's credentials were refused ({class}); retrying: {e}"),
                None,
            );
        }
    }

    fn recovered(&self, l: &'static str) {
        if let Some(f) = self.failing.lock().expect("failing lock").remove(l) {
            tracing::info!(
                node = self.client.name(),
                after = ?f.since.elapsed(),
                "the {l} loop recovered"
            );
        }
    }

    async fn sync_tries(&self, kind: PassKind) -> Result<SyncOutcome> {
        let mut state = self.sync.lock().await;
        let mut last = None;
        let mut pass = None;
        let mut result = None;
        for attempt in 0..NODE_STATUS_UPDATE_RETRY {
            match self.try_update(&mut state, attempt, kind, &mut pass).await {
                Ok(o) => {
                    result = Some(Ok(o));
                    break;
                }
                Err(e @ Error::NodeGone(_)) => {
                    self.forget_node();
                    result = Some(Err(e));
                    break;
                }
                Err(e) => {
                    tracing::warn!(
                        node = self.client.name(),
                        attempt,
                        "error updating node status, will retry: {e}"
                    );
                    if decide::reset_after_failure(attempt) {
                        self.reset_connections();
                    }
                    last = Some(e);
                }
            }
        }
        // One pass, however many tries: the failure counter counts passes,
        // and only the events of the try that reached the server are kept.
        if let Some(report) = pass {
            self.note_failures(&report);
            if matches!(result, Some(Ok(_))) {
                self.record_pass_events(&report);
            }
            state.last_pass = Some(report);
        }
        result.unwrap_or_else(|| {
            Err(Error::RetriesExceeded(Box::new(
                last.expect("at least one try"),
            )))
        })
    }

    /// Drops every pooled connection (`closeAllConns`).
    fn reset_connections(&self) {
        match self.client.reset_connections() {
            Ok(true) => {
                tracing::info!(
                    node = self.client.name(),
                    "closed every API connection after a failed heartbeat; the next try dials anew"
                );
                self.restart_watch();
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("{e}"),
        }
    }

    /// Restarts the watch on fresh connections; until it has listed the
    /// node, try 0 reads the node with a GET.
    fn restart_watch(&self) {
        self.live_stale.store(true, Ordering::SeqCst);
        self.watch_restart.notify_one();
    }

    /// A watch that has not listed the node again for two update periods
    /// since it (re)started is stuck (a connection that stopped answering):
    /// start it again.
    fn heal_watch(&self) {
        let started = *self.watch_started.lock().expect("watch lock");
        if self.live_stale.load(Ordering::SeqCst)
            && started.elapsed() > self.cfg().node_status_update_frequency * 2
        {
            tracing::info!(
                node = self.client.name(),
                "the watch of the node has not listed it since {:?}: restarting it",
                started.elapsed()
            );
            self.restart_watch();
        }
    }

    async fn try_update(
        &self,
        state: &mut SyncState,
        attempt: usize,
        kind: PassKind,
        pass: &mut Option<PassReport>,
    ) -> Result<SyncOutcome> {
        let cached = self.live.lock().expect("live lock").clone();
        let trusted = cached.is_some() && !self.live_stale.load(Ordering::SeqCst);
        let base = match (decide::source(attempt, trusted), cached) {
            (decide::Source::Cache, Some(n)) => n,
            _ => match self.client.get_node().await? {
                Some(n) => {
                    self.offer(n.clone());
                    n
                }
                None => return Err(Error::NodeGone(self.client.name().to_owned())),
            },
        };
        let (new, report) = self.run_setters(&base).await?;
        *pass = Some(report);
        let diff = Diff::new(&base, &new);
        let changed = diff.status_changed();
        let now = Instant::now();
        let write = decide::write(
            kind,
            changed,
            state.report.due(now),
            ready_status(&new).as_deref(),
        );
        let patch = match write {
            decide::Write::Skip => None,
            _ => {
                crate::validate::update(&base, &new).map_err(crate::validate::Error::Refused)?;
                diff.patch()
            }
        };
        let Some(p) = patch else {
            self.came_back();
            self.note_schedulable(&base);
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
        self.note_ready_flip(&base, &updated);
        self.offer(updated);
        self.came_back();
        self.note_schedulable(&base);
        state.report.written(now, changed, self.rng.unit());
        Ok(if changed {
            SyncOutcome::Patched { bytes }
        } else {
            SyncOutcome::Reported { bytes }
        })
    }

    /// The node exists (again): recreated by someone else after a deletion.
    fn came_back(&self) {
        if self.node_gone.swap(false, Ordering::SeqCst) {
            self.metrics.node_deleted.set(0);
            tracing::info!(node = self.client.name(), "the node exists again");
        }
    }

    /// `NodeSchedulable` / `NodeNotSchedulable` on a flip of
    /// `spec.unschedulable` (the kubelet's last hook).
    fn note_schedulable(&self, node: &Value) {
        let now = node
            .pointer("/spec/unschedulable")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let mut last = self.unschedulable.lock().expect("unschedulable lock");
        if *last != now {
            *last = now;
            let reason = if now {
                "NodeNotSchedulable"
            } else {
                "NodeSchedulable"
            };
            self.record_event(
                EventType::Normal,
                reason,
                &format!("Node {} status is now: {reason}", self.client.name()),
                None,
            );
        }
    }

    fn note_ready_flip(&self, old: &Value, new: &Value) {
        if let (Some(a), Some(b)) = (ready_status(old), ready_status(new))
            && a != b
        {
            tracing::info!(
                node = self.client.name(),
                from = a,
                to = b,
                "node Ready condition changed"
            );
        }
    }

    /// One lease renewal: an optimistic update of the cached lease, a GET and
    /// another try on 409, a create when missing (only while the node
    /// exists: the lease's owner is the node); up to 5 tries. After a failed
    /// try past the first, every connection is dropped.
    pub async fn renew_lease(&self, cache: &mut Option<Lease>) -> Result<()> {
        let mut last = None;
        for attempt in 0..LEASE_UPDATE_RETRY {
            let result = self.try_lease(cache).await;
            match result {
                Ok(()) => return Ok(()),
                Err(e) => {
                    if decide::reset_after_failure(attempt)
                        && !matches!(e.api_class(), Some(ErrorClass::Conflict))
                    {
                        self.reset_connections();
                    }
                    let stop = matches!(e, Error::LeaseWaitsForNode(_));
                    last = Some(e);
                    if stop {
                        break;
                    }
                }
            }
        }
        Err(Error::LeaseRetriesExceeded(Box::new(
            last.expect("at least one try"),
        )))
    }

    async fn try_lease(&self, cache: &mut Option<Lease>) -> Result<()> {
        let base = match cache.take() {
            Some(l) => l,
            None => match self.client.get_lease().await? {
                Some(l) => l,
                None => {
                    if self.node_uid.lock().expect("uid lock").is_none() {
                        return Err(Error::LeaseWaitsForNode(self.client.name().to_owned()));
                    }
                    let lease = self.new_lease(None);
                    *cache = Some(self.client.create_lease(&lease).await?);
                    return Ok(());
                }
            },
        };
        let lease = self.new_lease(Some(base.clone()));
        match self.client.update_lease(&lease).await {
            Ok(l) => {
                *cache = Some(l);
                Ok(())
            }
            // Stale or gone: GET (and create if missing) on the next try.
            Err(
                e @ client::Error::Api {
                    code: 409 | 404, ..
                },
            ) => Err(e.into()),
            Err(e) => {
                *cache = Some(base);
                Err(e.into())
            }
        }
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
        spec.lease_duration_seconds = Some(self.cfg().node_lease_duration_seconds);
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

    /// The node itself is shutting down (logind's PrepareForShutdown, or the
    /// operator's SIGUSR2): Ready=False `node is shutting down`, written at
    /// once. The loops go on. A plain SIGTERM does not call this: a
    /// restart of nodestatus is not a node outage.
    pub async fn node_shutdown(&self) -> Result<SyncOutcome> {
        self.shutting_down.store(true, Ordering::SeqCst);
        tracing::warn!(
            node = self.client.name(),
            "{SHUTTING_DOWN}: marking it not Ready"
        );
        self.sync.lock().await.report.force();
        self.sync_once().await
    }

    /// logind cancelled the node's shutdown (`PrepareForShutdown(false)`):
    /// the next pass decides Ready again, as the kubelet's node shutdown
    /// manager does.
    pub fn node_shutdown_cancelled(&self) {
        self.shutting_down.store(false, Ordering::SeqCst);
    }

    /// Runs the loops until `cancel` fires, then returns at once: in-flight
    /// calls are dropped and the node is left as it is. Returns an error
    /// only for an identity error at start.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) -> Result<()> {
        self.record_event(EventType::Normal, "Starting", "Starting nodestatus.", None);
        let watch = {
            let this = self.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { this.watch_node(cancel).await })
        };
        if let Err(e) = self.register(&cancel).await {
            cancel.cancel();
            let _ = watch.await;
            return Err(e);
        }
        if cancel.is_cancelled() {
            let _ = watch.await;
            return Ok(());
        }
        // In companion mode the kubelet owns the lease and Ready.
        let lease_task = (!self.cfg().companion).then(|| {
            let this = self.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move { this.lease_loop(cancel).await })
        });
        self.clone().sync_loop(cancel.clone()).await;
        cancel.cancel();
        if let Some(t) = lease_task {
            let _ = t.await;
        }
        let _ = watch.await;
        Ok(())
    }

    /// Keeps the live node current from a watch on this one node.
    ///
    /// A watch that fails (a refused or dropped connection, an error status)
    /// is not trusted to resume where it stopped: the live copy is marked
    /// stale (try 0 then GETs, as tries 1-4 do) and the watch starts again
    /// from a fresh list, with backoff. A connection reset after a failed
    /// heartbeat restarts it too, on new connections, since the watch may sit
    /// on a connection that stopped answering and would never say so.
    async fn watch_node(self: Arc<Self>, cancel: CancellationToken) {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event as W};
        let mut backoff = Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
        loop {
            *self.watch_started.lock().expect("watch lock") = Instant::now();
            let api: kube::Api<Node> = kube::Api::all(self.client.watch_client());
            let config =
                watcher::Config::default().fields(&format!("metadata.name={}", self.client.name()));
            let stream = watcher::watcher(api, config);
            futures::pin_mut!(stream);
            let mut listed = false;
            let failed = loop {
                let event = tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = self.watch_restart.notified() => break false,
                    e = stream.next() => e,
                };
                let to_value = |n: Node| serde_json::to_value(n).expect("a Node serializes");
                match event {
                    None => break false,
                    Some(Ok(W::Init)) => listed = false,
                    Some(Ok(W::InitApply(n))) => {
                        listed = true;
                        self.offer(to_value(n));
                    }
                    Some(Ok(W::InitDone)) => {
                        if !listed {
                            self.forget_node();
                        }
                        backoff.reset();
                        self.live_stale.store(false, Ordering::SeqCst);
                    }
                    Some(Ok(W::Apply(n))) => self.offer(to_value(n)),
                    Some(Ok(W::Delete(_))) => self.forget_node(),
                    Some(Err(e)) => {
                        self.metrics.loop_error("watch", "transport");
                        tracing::debug!(
                            node = self.client.name(),
                            "watch of the node failed, restarting it from a fresh list: {e}"
                        );
                        break true;
                    }
                }
            };
            self.live_stale.store(true, Ordering::SeqCst);
            if failed {
                tokio::select! {
                    _ = cancel.cancelled() => return,
                    _ = tokio::time::sleep(backoff.next_delay()) => {}
                }
            }
        }
    }

    /// The status sync loop (after registration): regular passes every
    /// jittered update period, the fast update at start, until `cancel`.
    pub async fn sync_loop(self: Arc<Self>, cancel: CancellationToken) {
        let mut clock =
            decide::SyncClock::new(self.cfg().node_status_update_frequency, Instant::now());
        let mut fast = decide::FastUpdate::new(Instant::now());
        loop {
            // A live config change takes effect at this pass boundary.
            clock.set_period(self.cfg().node_status_update_frequency);
            let ready = self.cached_node().await.is_some_and(|n| is_ready(&n));
            let kind = clock.kind(Instant::now());
            let result = tokio::select! {
                _ = cancel.cancelled() => return,
                r = self.sync_pass(kind) => r,
            };
            if kind == PassKind::Fast && result.is_err() {
                // The kubelet's fast update ends on a failed patch; the
                // regular sync goes on.
                fast.end();
            }
            match result {
                Ok(_) => {}
                Err(Error::NodeGone(name)) if self.cfg().re_register_deleted_node => {
                    tracing::warn!(
                        node = name,
                        "node was deleted; registering it again (reRegisterDeletedNode: true)"
                    );
                    if self.register(&cancel).await.is_err() {
                        tracing::error!(
                            node = name,
                            "registering the deleted node again failed; retrying in the next period"
                        );
                    }
                }
                Err(e) => {
                    tracing::warn!(
                        retry_in = "the next update period",
                        "unable to update node status: {e}"
                    );
                }
            }
            let now = Instant::now();
            let fast_now = fast.active(now, ready);
            let delay = clock.after(kind, now, fast_now, self.rng.unit());
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(delay) => {}
            }
        }
    }

    /// The lease loop: a renewal every jittered quarter of the lease
    /// duration, backoff from 200 ms to 7 s after a failed renewal, until
    /// `cancel`.
    pub async fn lease_loop(self: Arc<Self>, cancel: CancellationToken) {
        let interval =
            Duration::from_secs_f64(self.cfg().node_lease_duration_seconds as f64 * 0.25);
        let mut backoff = Backoff::lease();
        let mut cache = None;
        loop {
            let result = tokio::select! {
                _ = cancel.cancelled() => return,
                r = self.renew_lease(&mut cache) => r,
            };
            self.metrics.lease_result(result.is_ok());
            let delay = match result {
                Ok(()) => {
                    *self.last_lease_ok.lock().expect("lease time lock") = Some(Instant::now());
                    self.recovered("lease");
                    backoff.reset();
                    decide::jitter(interval, JITTER, self.rng.unit())
                }
                Err(e) => {
                    self.failed("lease", &e);
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

/// The labels the kubelet reconciles on an existing node
/// (`updateDefaultLabels`), each only where the initial node has it.
pub const DEFAULT_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "node.kubernetes.io/windows-build",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The kubelet's reconcile of an existing node against the initial node
/// (`nodeLabels` already applied to it): the attach-detach annotation, and
/// each of [`DEFAULT_LABELS`] that the initial node has (an empty value
/// removes it).
pub fn reconcile(existing: &Value, initial: &Value) -> Value {
    let mut n = existing.clone();
    let meta = n["metadata"].as_object_mut().expect("a node has metadata");
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    ann["volumes.kubernetes.io/controller-managed-attach-detach"] = json!("true");
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    for key in DEFAULT_LABELS {
        match initial["metadata"]["labels"].get(*key) {
            Some(Value::String(v)) if v.is_empty() => {
                if let Some(l) = labels.as_object_mut() {
                    l.remove(*key);
                }
            }
            Some(v) => labels[*key] = v.clone(),
            None => {}
        }
    }
    n
}

/// The status of the node's Ready condition.
pub fn ready_status(node: &Value) -> Option<String> {
    crate::node::conditions_by_type(node.pointer("/status/conditions"))
        .into_iter()
        .find(|(t, _)| *t == "Ready")
        .and_then(|(_, c)| c.get("status").and_then(Value::as_str).map(str::to_owned))
}

/// Puts `base`'s condition of type `t` back in `node` (at the place where
/// `node` has it, or at the end), or removes it from `node` when `base` has
/// none.
fn keep_condition(base: &Value, node: &mut Value, t: &str) {
    let old = base
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .and_then(|l| l.iter().find(|c| c["type"] == t))
        .cloned();
    let Some(list) = node
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        if let Some(old) = old {
            node["status"]["conditions"] = json!([old]);
        }
        return;
    };
    match (list.iter().position(|c| c["type"] == t), old) {
        (Some(i), Some(old)) => list[i] = old,
        (Some(i), None) => {
            list.remove(i);
        }
        (None, Some(old)) => list.push(old),
        (None, None) => {}
    }
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Value) -> bool {
    crate::node::conditions_by_type(node.pointer("/status/conditions"))
        .iter()
        .any(|(t, c)| *t == "Ready" && c.get("status").and_then(Value::as_str) == Some("True"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_keeps_node_labels_overrides_and_leaves_other_labels() {
        let mut initial = crate::node::kubelet::initial_node("n", "host-a");
        // nodeLabels: a hostname override and a zone.
        initial["metadata"]["labels"]["kubernetes.io/hostname"] = json!("custom");
        initial["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("z1");
        initial["metadata"]["labels"]["example.com/pool"] = json!("blue");
        let existing = json!({"metadata": {"name": "n", "labels": {
            "kubernetes.io/hostname": "host-a",
            "topology.kubernetes.io/zone": "old",
            "topology.kubernetes.io/region": "r-from-ccm",
            "example.com/pool": "green",
        }}});
        let r = reconcile(&existing, &initial);
        let l = &r["metadata"]["labels"];
        assert_eq!(l["kubernetes.io/hostname"], "custom", "nodeLabels win");
        assert_eq!(l["topology.kubernetes.io/zone"], "z1");
        assert_eq!(
            l["topology.kubernetes.io/region"], "r-from-ccm",
            "not in the initial node: left"
        );
        assert_eq!(
            l["example.com/pool"], "green",
            "nodeLabels are never applied again unless default"
        );
        assert_eq!(l["kubernetes.io/os"], std::env::consts::OS);
        assert_eq!(
            r["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
            "true"
        );
    }

    #[test]
    fn keep_condition_restores_replaces_or_removes() {
        let base = json!({"status": {"conditions": [{"type": "Ready", "status": "Unknown"}]}});
        let mut n =
            json!({"status": {"conditions": [{"type": "A"}, {"type": "Ready", "status": "True"}]}});
        keep_condition(&base, &mut n, "Ready");
        assert_eq!(n["status"]["conditions"][1]["status"], "Unknown");
        let mut fresh = json!({"status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        keep_condition(&json!({}), &mut fresh, "Ready");
        assert_eq!(fresh["status"]["conditions"], json!([]));
    }
}
