//! What goes into a step and what comes out of it: the [`Input`]s (time,
//! answers, watch events, commands) and the [`Action`]s the driver
//! performs, with the API [`Call`]s and their [`Answer`]s.

use std::sync::Arc;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event;
use serde_json::Value;

use super::client;
use super::common::{Error, SyncOutcome};
use crate::config::Config;
use crate::pipeline::{PassOptions, PassReport};

/// Which loop a call or a pass belongs to; its answer goes back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loop {
    /// Registration (and the reconcile of an existing node).
    Register,
    /// The status sync.
    Sync,
}

/// An API call the state asks for. Its answer comes back as an
/// [`Answer`].
#[derive(Debug, Clone)]
pub enum Call {
    /// GET the node (`None`: not found).
    GetNode(Loop),
    /// Create the node.
    CreateNode(Value),
    /// PATCH `nodes/<name>/status` with this strategic merge patch,
    /// serialized once.
    PatchStatus(Loop, Box<serde_json::value::RawValue>),
    /// GET the lease (`None`: not found).
    GetLease,
    /// Create the lease.
    CreateLease(Lease),
    /// Update the lease (an optimistic PUT of the copy it came from).
    UpdateLease(Lease),
    /// GET `/version` (once per registration: the fields a kubelet of
    /// that version writes).
    GetVersion,
}

/// The answer to a [`Call`] or an [`Action::RunPass`].
#[derive(Debug)]
pub enum Answer {
    /// The node, or `None` when it does not exist.
    Node(Loop, client::Result<Option<Value>>),
    /// The created node.
    Created(client::Result<Value>),
    /// The node after the patch.
    Patched(Loop, client::Result<Value>),
    /// The lease, or `None` when it does not exist.
    Lease(client::Result<Option<Lease>>),
    /// The lease as written (created or updated).
    LeaseWritten(client::Result<Lease>),
    /// The server's version.
    Version(client::Result<nodestatus_model::node::kubelet::ServerVersion>),
    /// A pass of the setters over the base it was given: the new node and
    /// what the pass did, or why it did not finish.
    Pass(Loop, std::result::Result<(Value, PassReport), String>),
}

impl Answer {
    /// Whether this answer shows a server that serves (a success, or an
    /// error about the object itself: [`super::reach::serving`]); `None`
    /// for a pass of the setters.
    pub fn serving(&self) -> Option<bool> {
        fn of<T>(r: &client::Result<T>) -> bool {
            r.as_ref()
                .err()
                .is_none_or(|e| super::reach::serving(e.class()))
        }
        Some(match self {
            Self::Node(_, r) => of(r),
            Self::Created(r) | Self::Patched(_, r) => of(r),
            Self::Lease(r) => of(r),
            Self::LeaseWritten(r) => of(r),
            Self::Version(r) => of(r),
            Self::Pass(..) => return None,
        })
    }
}

/// What the watch of the node saw.
#[derive(Debug, Clone)]
pub enum WatchEvent {
    /// The watch (re)started: until it has listed the node, the live copy
    /// is not trusted.
    Restarted,
    /// A list begins.
    Listing,
    /// The node, from a list or a change.
    Applied(Value, bool),
    /// The list is complete, at this resourceVersion (when the server
    /// said).
    Listed(Option<String>),
    /// The node was deleted.
    Deleted,
    /// The watch resumed from its last resourceVersion (no list): every
    /// change since comes next.
    Resumed,
    /// The watch failed; it waits to be resumed ([`Action::RestartWatch`]).
    Failed,
}

/// An input of [`State::step`](super::State::step).
// A few of these move per pass, one at a time; none is stored in bulk, so
// the size of the answers they carry costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Input {
    /// Time passed: whatever is due now runs.
    Tick,
    /// The answer to an action.
    Answer(Answer),
    /// What the watch saw.
    Watch(WatchEvent),
    /// Register now, as the registration loop does (its backoff, until the
    /// node is registered or the credentials are refused): asked through
    /// [`AgentHandle::register`](super::AgentHandle::register).
    Register,
    /// Run a regular status sync now, unless one runs (its end is the
    /// answer): [`AgentHandle::sync_now`](super::AgentHandle::sync_now).
    SyncNow,
    /// Renew the lease now, from this copy (`None`: GET it first), unless
    /// a renewal runs:
    /// [`AgentHandle::renew_lease`](super::AgentHandle::renew_lease).
    LeaseNow(Option<Lease>),
    /// Start the loops of an agent made to act only when asked
    /// ([`Agent::on_request`](super::Agent::on_request)): the
    /// registration, or once registered, the status sync and the lease.
    RunLoops,
    /// A reacting plugin has matched lines waiting, or a path it watches
    /// changed ([`crate::streams`]): a pass now, within the trigger gate.
    Triggered,
    /// The machine itself is shutting down (logind, or SIGUSR2).
    NodeShutdown,
    /// logind cancelled the shutdown.
    NodeShutdownCancelled,
    /// A live config change, in force from the next pass.
    Config(Arc<Config>),
    /// A plugin became ready (or stopped) after the start: once the node
    /// is registered and no pass runs, a pass runs now with the new set.
    PluginsChanged,
    /// An event about the node from outside the loops (a plugin source:
    /// [`crate::oci`]), recorded as the loops record theirs.
    Event {
        /// Normal or Warning.
        event_type: nodestatus_runtime::EventType,
        /// The reason (`FailedPluginPull`).
        reason: String,
        /// The message.
        message: String,
        /// The plugin it is about.
        plugin: Option<String>,
    },
}

/// What a metric should count; the driver keeps the metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observation {
    /// A status sync ended: `patched`, `reported`, `unchanged` or `error`.
    SyncResult(&'static str),
    /// A status patch of this many bytes is sent.
    Patch(usize),
    /// A lease renewal ended.
    LeaseResult(bool),
    /// A pass of a loop failed, with this error class.
    LoopError(&'static str, &'static str),
    /// Whether the node is found deleted.
    NodeDeleted(bool),
    /// The container runtime stopped answering (`Err`, why), or answers
    /// again (`Ok`, its name and version): once at each change.
    ContainerRuntime(Result<String, String>),
}

/// An action [`State::step`](super::State::step) asks the driver for.
// A few of these move per pass, one at a time; none is stored in bulk, so
// the size of the answers they carry costs nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Action {
    /// Make an API call; its answer comes back as [`Input::Answer`].
    Call(Call),
    /// Make an API call as a probe of a server that did not answer, on a
    /// new connection that must be made within `connect_within`
    /// ([`super::reach`]); its answer comes back as [`Input::Answer`].
    Probe {
        /// The call.
        call: Call,
        /// The connect timeout (TCP and TLS).
        connect_within: std::time::Duration,
    },
    /// Run the setters over `base` on a copy; the new node comes back as
    /// [`Answer::Pass`].
    RunPass {
        /// The loop that asked.
        for_loop: Loop,
        /// The node the setters start from (the live copy itself, not a
        /// copy of it: the pass makes its own when it writes).
        base: Arc<Value>,
        /// Why the node is not ready, for the `ready` setter.
        problems: Vec<String>,
        /// The built-in steps this pass runs after the setters.
        options: PassOptions,
    },
    /// Record an event about the node (in the background, never waited
    /// for).
    RecordEvent(Box<Event>),
    /// Drop every pooled connection of the calls (`closeAllConns`), and
    /// with `watch`, start the running watch again on a new one when the
    /// connections were dropped (not for a client given as is, such as
    /// the one `simulate`'s nodes share: a reset that drops nothing moves
    /// no watch).
    ResetConnections {
        /// Whether the watch runs and goes too.
        watch: bool,
    },
    /// Resume the watch of the node on a new connection, from its last
    /// resourceVersion (from a fresh list when it has none, or the server
    /// no longer has it).
    RestartWatch,
    /// Count something.
    Observe(Observation),
    /// A registration try ended: `Ok(true)` when the node exists and is
    /// ours, `Ok(false)` while `registerNode: false` waits for it, or the
    /// error (retried after the backoff's next step).
    RegisterDone(super::common::Result<bool>),
    /// A status sync ended.
    SyncDone {
        /// What it did.
        result: super::common::Result<SyncOutcome>,
        /// Whether the node's shutdown began it.
        for_shutdown: bool,
    },
    /// A lease renewal ended.
    LeaseDone(super::common::Result<()>),
    /// An error at start that ends the agent (an identity error).
    Exit(Error),
}
