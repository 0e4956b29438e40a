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
mod common;
pub mod decide;
mod driver;
pub mod events;
mod handle;
mod health;
mod io;
pub mod lease;
mod nodes;
pub mod reach;
pub mod register;
mod shared;
mod state;
pub mod sync;
#[cfg(test)]
mod tests;
mod watch;

pub use common::{
    Error, FAILURES_BEFORE_NOT_READY, NodeProblem, PROVIDED_NODE_IP, Result, SHUTTING_DOWN,
    SyncOutcome, UNINITIALIZED_TAINT, is_ready, ready_status,
};
pub use decide::{
    Backoff, JITTER, LEASE_UPDATE_RETRY, NODE_STATUS_UPDATE_RETRY, PassKind, Random, ThreadRandom,
};
pub use driver::Agent;
pub use handle::AgentHandle;
pub use health::{Failing, Snapshot};
pub use io::{Action, Answer, Call, Input, Loop, Observation, WatchEvent};
pub use nodes::Nodes;
pub use register::{DEFAULT_LABELS, reconcile};
pub use shared::{Ctx, Live};
pub use state::{Phase, State};
