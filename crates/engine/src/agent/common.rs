//! What every part of the agent speaks: its errors, what a status sync
//! did, why the node is not ready, and the node's Ready condition. A leaf:
//! it imports no other part of the agent but the API client's errors.

use serde_json::Value;

use super::client;
use super::decide::LEASE_UPDATE_RETRY;
use crate::pipeline::SetterError;

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

    /// Whether this is the server asking to back off: a 429 (API Priority
    /// and Fairness rejected the request). client-go sleeps its
    /// `Retry-After` before the same try; here the pass or the renewal
    /// ends, and the next one comes after the loop's own wait (the update
    /// period, the lease's backoff stretched by a random part of itself),
    /// so a throttled fleet does not answer a 429 with four more tries at
    /// once. Nothing is lost: the next pass writes whatever changed.
    pub fn throttled(&self) -> bool {
        matches!(self, Self::Api(c) if c.code() == Some(429))
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
