//! The nodes a plugin source serves: one agent, or a fleet of them that
//! share one plugin directory.
//!
//! The registry puller ([`crate::oci::Puller::run`]) and the live config
//! ([`crate::live_config::watch`]) read the config in force and report to
//! the node (its metrics, its events, its config). `nodestatus run` gives
//! them its one [`AgentHandle`]; `nodestatus simulate` gives them the
//! fleet's handles (`nodestatus_fleet::Agents`), so that one puller and one
//! config watcher serve every simulated node: one pull per process, not one
//! per node, and each node told of it as its own puller would tell it.

use std::sync::Arc;

use nodestatus_runtime::EventType;

use super::handle::AgentHandle;
use crate::config::Config;

/// The nodes a plugin source serves (see the module's docs).
pub trait Nodes: Send + Sync + 'static {
    /// The config in force: what the sources read their plugin sections
    /// and registries from. For a fleet, the config every node's own is
    /// derived from.
    fn cfg(&self) -> Arc<Config>;

    /// Puts `cfg`, a new config of the file, in force on every node from
    /// its next pass on (a fleet derives each node's own from it).
    fn set_config(&self, cfg: Arc<Config>);

    /// Calls `f` with the handle of each node that runs now.
    fn each(&self, f: &mut dyn FnMut(&AgentHandle));

    /// Records a plugin source's event (a version pulled, a pull that
    /// failed) on every node that runs. One agent records it at once; a
    /// fleet may spread its nodes' events over time, as independent nodes,
    /// each checking on its own schedule, would record theirs.
    fn record_event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        self.each(&mut |agent| agent.record_event(event_type, reason, message, plugin));
    }
}

impl Nodes for AgentHandle {
    fn cfg(&self) -> Arc<Config> {
        AgentHandle::cfg(self)
    }

    fn set_config(&self, cfg: Arc<Config>) {
        AgentHandle::set_config(self, cfg);
    }

    fn each(&self, f: &mut dyn FnMut(&AgentHandle)) {
        f(self);
    }
}

impl<T: Nodes + ?Sized> Nodes for Arc<T> {
    fn cfg(&self) -> Arc<Config> {
        (**self).cfg()
    }

    fn set_config(&self, cfg: Arc<Config>) {
        (**self).set_config(cfg);
    }

    fn each(&self, f: &mut dyn FnMut(&AgentHandle)) {
        (**self).each(f);
    }

    fn record_event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        (**self).record_event(event_type, reason, message, plugin);
    }
}
