//! The handle on a running agent: what it published, and the inputs from
//! outside.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::time::Instant;

use super::SyncOutcome;
use super::state::{Input, Snapshot};
use crate::config::Config;
use crate::metrics::Metrics;
use crate::pipeline::PassReport;
use crate::plugin_dir::PluginDir;

/// What the agent's handle asks of its driver.
// One at a time, never stored in bulk: the size of an input costs nothing
// worth a box.
#[allow(clippy::large_enum_variant)]
pub(super) enum Command {
    /// An input for the state.
    Input(Input),
    /// The node itself is shutting down; the reply is the result of the
    /// pass that writes it.
    Shutdown(oneshot::Sender<std::result::Result<SyncOutcome, String>>),
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
}

impl AgentHandle {
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
