//! The handle on a running agent: what it published, and the inputs from
//! outside.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use k8s_openapi::api::coordination::v1::Lease;

use super::common::{Error, SyncOutcome};
use super::health::Snapshot;
use super::io::Input;
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pipeline::PassReport;
use crate::plugin_dir::PluginDir;

/// Where the driver sends the end of what was asked.
type Reply<T> = oneshot::Sender<std::result::Result<T, Arc<Error>>>;

/// What the agent's handle asks of its driver.
// One at a time, never stored in bulk: the size of an input costs nothing
// worth a box.
#[allow(clippy::large_enum_variant)]
pub(super) enum Command {
    /// An input for the state.
    Input(Input),
    /// Register ([`Input::Register`]); the reply once the node is
    /// registered, or the identity error that ends the agent.
    Register(Reply<()>),
    /// A status sync ([`Input::SyncNow`]); the reply is its end.
    Sync(Reply<SyncOutcome>),
    /// A lease renewal from this copy ([`Input::LeaseNow`]); the reply is
    /// its end.
    Lease(Option<Lease>, Reply<()>),
    /// The node itself is shutting down; the reply is the result of the
    /// pass that writes it.
    Shutdown(oneshot::Sender<std::result::Result<SyncOutcome, String>>),
}

/// Who waits for the end of what they asked: the driver's only
/// bookkeeping, the replies it owes (what the agent is doing is all in
/// the state).
#[derive(Default)]
pub(super) struct Waiting {
    register: Vec<Reply<()>>,
    sync: Vec<Reply<SyncOutcome>>,
    lease: Vec<Reply<()>>,
    shutdown: Vec<oneshot::Sender<std::result::Result<SyncOutcome, String>>>,
}

impl Waiting {
    /// Keeps the reply of `c`; returns its input for the step.
    pub(super) fn add(&mut self, c: Command) -> Input {
        match c {
            Command::Input(i) => i,
            Command::Register(r) => {
                self.register.push(r);
                Input::Register
            }
            Command::Sync(r) => {
                self.sync.push(r);
                Input::SyncNow
            }
            Command::Lease(cached, r) => {
                self.lease.push(r);
                Input::LeaseNow(cached)
            }
            Command::Shutdown(r) => {
                self.shutdown.push(r);
                Input::NodeShutdown
            }
        }
    }

    /// A registration try ended: those who asked are answered once the
    /// node is registered (a failed try is retried after its backoff).
    pub(super) fn registered(&mut self, r: super::common::Result<bool>) {
        if matches!(r, Ok(true)) {
            reply(&mut self.register, Ok(()));
        }
    }

    /// A status sync ended: it answers those who asked for a sync, and
    /// when the node's shutdown began it, those who reported the shutdown.
    pub(super) fn synced(&mut self, r: super::common::Result<SyncOutcome>, for_shutdown: bool) {
        let r = r.map_err(Arc::new);
        if for_shutdown {
            for w in self.shutdown.drain(..) {
                let _ = w.send(r.clone().map_err(|e| e.to_string()));
            }
        }
        reply(&mut self.sync, r);
    }

    /// A lease renewal ended.
    pub(super) fn renewed(&mut self, r: super::common::Result<()>) {
        reply(&mut self.lease, r.map_err(Arc::new));
    }

    /// An identity error at start ends the agent: whoever asked for the
    /// registration gets it too.
    pub(super) fn exit(&mut self, e: Error) -> Arc<Error> {
        let e = Arc::new(e);
        reply(&mut self.register, Err(e.clone()));
        e
    }
}

fn reply<T: Clone>(to: &mut Vec<Reply<T>>, r: std::result::Result<T, Arc<Error>>) {
    for w in to.drain(..) {
        let _ = w.send(r.clone());
    }
}

/// A handle on a running agent: what it last published, and the inputs
/// from outside (the node's shutdown, a live config change). Cheap to
/// clone.
#[derive(Clone)]
pub struct AgentHandle {
    pub(super) snapshot: watch::Receiver<Arc<Snapshot>>,
    pub(super) commands: mpsc::UnboundedSender<Command>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) plugins: Arc<PluginDir>,
    pub(super) name: Arc<str>,
    pub(super) streams: Option<crate::streams::Streams>,
}

impl AgentHandle {
    /// The reacting plugins' streams, when the agent follows them.
    pub fn streams(&self) -> Option<&crate::streams::Streams> {
        self.streams.as_ref()
    }

    /// The agent's state as last published.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// `None` when ready to serve; otherwise why not
    /// ([`Snapshot::ready_reason`]).
    pub fn ready_reason(&self) -> Option<String> {
        self.snapshot().ready_reason(Instant::now())
    }

    /// The report of the last pass of the setters.
    pub fn last_pass(&self) -> Option<Arc<PassReport>> {
        self.snapshot().last_pass.clone()
    }

    /// The node as last seen (watch, GET or a write's answer).
    pub fn cached_node(&self) -> Option<Arc<Value>> {
        self.snapshot().node.clone()
    }

    /// Whether the node was found deleted (and not seen since).
    pub fn node_deleted(&self) -> bool {
        self.snapshot().node_gone
    }

    /// The config in force.
    pub fn cfg(&self) -> Arc<Config> {
        self.snapshot().cfg.clone()
    }

    /// The node's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The plugin directory.
    pub fn plugins(&self) -> &Arc<PluginDir> {
        &self.plugins
    }

    /// Puts a live config change in force from the next pass on (the
    /// plugin settings are the plugin directory's, swapped by the caller).
    pub fn set_config(&self, cfg: Arc<Config>) {
        let _ = self.commands.send(Command::Input(Input::Config(cfg)));
    }

    /// The plugin set changed (a background load ended): a pass runs now
    /// with it, when the node is registered and no pass runs (else the
    /// next pass runs it).
    pub fn plugins_changed(&self) {
        let _ = self.commands.send(Command::Input(Input::PluginsChanged));
    }

    /// Registers the node now, as the registration loop does (with its
    /// backoff), and returns once it is registered; or the identity error
    /// that ends the agent. For an agent made
    /// [`on_request`](super::Agent::on_request); on one that runs its
    /// loops, it registers the node again (a reconcile).
    pub async fn register(&self) -> std::result::Result<(), Arc<Error>> {
        self.ask(Command::Register).await
    }

    /// A regular status sync now (`updateNodeStatus`: up to 5 tries, the
    /// first from the live node, later ones from a fresh GET), or the end
    /// of the one that runs.
    pub async fn sync_now(&self) -> std::result::Result<SyncOutcome, Arc<Error>> {
        self.ask(Command::Sync).await
    }

    /// A lease renewal now from `cached` (`None`: GET it first), or the
    /// end of the one that runs.
    pub async fn renew_lease(&self, cached: Option<Lease>) -> std::result::Result<(), Arc<Error>> {
        self.ask(|r| Command::Lease(cached, r)).await
    }

    /// An agent made [`on_request`](super::Agent::on_request) runs its
    /// loops from now on, as [`Agent::run`](super::Agent::run) does from
    /// its start.
    pub fn run_loops(&self) {
        let _ = self.commands.send(Command::Input(Input::RunLoops));
    }

    async fn ask<T>(
        &self,
        command: impl FnOnce(Reply<T>) -> Command,
    ) -> std::result::Result<T, Arc<Error>> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(command(tx))
            .map_err(|_| Arc::new(Error::Stopped))?;
        rx.await.map_err(|_| Arc::new(Error::Stopped))?
    }

    /// The node itself is shutting down (logind's PrepareForShutdown, or
    /// the operator's SIGUSR2): Ready=False `node is shutting down`,
    /// written at once; returns when that pass ends. The loops go on. A
    /// plain SIGTERM does not call this: a restart of nodestatus is not a
    /// node outage.
    pub async fn node_shutdown(&self) -> std::result::Result<SyncOutcome, String> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Shutdown(tx))
            .map_err(|_| "the agent has stopped".to_owned())?;
        rx.await.map_err(|_| "the agent has stopped".to_owned())?
    }

    /// Records an event about the node (a plugin source's failure), as the
    /// loops record theirs.
    pub fn record_event(
        &self,
        event_type: nodestatus_runtime::EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        let _ = self.commands.send(Command::Input(Input::Event {
            event_type,
            reason: reason.to_owned(),
            message: message.to_owned(),
            plugin: plugin.map(str::to_owned),
        }));
    }

    /// logind cancelled the node's shutdown (`PrepareForShutdown(false)`):
    /// the next pass decides Ready again.
    pub fn node_shutdown_cancelled(&self) {
        let _ = self
            .commands
            .send(Command::Input(Input::NodeShutdownCancelled));
    }
}
