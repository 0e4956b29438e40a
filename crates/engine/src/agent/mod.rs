//! The kubelet's three node loops, as one state machine and one driver:
//!
//! - **register** ([`register`]): create the Node, with backoff from 100 ms
//!   doubling to 7 s; on AlreadyExists or Forbidden, GET it and reconcile
//!   what the kubelet reconciles. Only here may an error end the agent:
//!   credentials refused at start are an identity error;
//! - **status sync** ([`sync`]): every `nodeStatusUpdateFrequency` (4 %
//!   jitter), run the setters on a copy of the live node and patch
//!   `nodes/<name>/status` only when the status changed or the report period
//!   ran out; up to 5 tries a pass, the first from the watch's copy of the
//!   node, the others from a fresh GET; at start a fast update every 100 ms
//!   until Ready (2 minutes at most);
//! - **lease** ([`lease`]): renew the Lease in `kube-node-lease` every
//!   quarter of its duration (4 % jitter);
//! - **watch**: one watch on the node (field selector `metadata.name`) keeps
//!   the live copy current, so a change written by someone else (the node
//!   lifecycle controller's `Ready=Unknown`) is seen and corrected by the
//!   next pass.
//!
//! The agent is a value, as kube-runtime's watcher is: a [`State`] and a
//! pure [`State::step`] that takes an [`Input`] (time passing, the answer
//! of a call, what the watch saw, a command) and returns [`Action`]s (an
//! API call, a pass of the setters, an event, a metric). Every rule of the
//! kubelet lives in the step and is tested there, in virtual time
//! (`agent/tests/`). The one driver, [`Agent`], owns the state, performs
//! the actions and feeds their answers back; `/readyz` and `/status` read
//! the [`Snapshot`] it publishes after every step, through an
//! [`AgentHandle`], and never wait on a loop.
//!
//! Every error after start is retried; every call has a deadline
//! ([`client`]); SIGTERM leaves the node as it is. The small pure
//! decisions the loops share (backoff, jitter, the report schedule, the
//! fast update) are in [`decide`].

pub mod client;
pub mod decide;
mod driver;
mod handle;
mod health;
mod io;
pub mod lease;
pub mod reach;
pub mod register;
mod state;
pub mod sync;
#[cfg(test)]
mod tests;
mod watch;

use serde_json::Value;

use crate::pipeline::SetterError;
pub use decide::{
    Backoff, JITTER, LEASE_UPDATE_RETRY, NODE_STATUS_UPDATE_RETRY, PassKind, Random, ThreadRandom,
};
pub use driver::Agent;
pub use handle::AgentHandle;
pub use register::{DEFAULT_LABELS, reconcile};
pub use state::{
    Action, Answer, Call, Ctx, Failing, Input, Live, Loop, Observation, Phase, Snapshot, State,
    WatchEvent,
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
        error: SetterError,
    },
}
/// The taint of a node whose cloud-controller-manager has not initialized it
/// yet (`cloudProvider: external`).
pub const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
/// The annotation with the configured node IP (`cloudProvider: external`).
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

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
    Refused(#[from] nodestatus_model::validate::Error),
    /// The agent stopped before it answered what was asked of it.
    #[error("the agent has stopped")]
    Stopped,
}

impl Error {
    /// Whether retrying cannot help: the credentials may not register this
    /// node.
    pub fn is_permanent(&self) -> bool {
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
            Self::Stopped => "stopped",
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

/// The status of the node's Ready condition.
pub fn ready_status(node: &Value) -> Option<String> {
    nodestatus_model::node::conditions_by_type(node.pointer("/status/conditions"))
        .into_iter()
        .find(|(t, _)| *t == "Ready")
        .and_then(|(_, c)| c.get("status").and_then(Value::as_str).map(str::to_owned))
}

/// Whether the node's Ready condition is True.
pub fn is_ready(node: &Value) -> bool {
    nodestatus_model::node::conditions_by_type(node.pointer("/status/conditions"))
        .iter()
        .any(|(t, c)| *t == "Ready" && c.get("status").and_then(Value::as_str) == Some("True"))
}
