//! The Node model: the node as JSON, the field paths that policy and
//! ownership speak of, the one diff, and the status patch built from it.
//!
//! - [`FieldPath`] names one field of a Node (one label, one condition
//!   type, one capacity resource, ...).
//! - [`Diff`] is the one comparison of two nodes. The pipeline diffs each
//!   setter's output against its input (the fields it changed, for the
//!   policy, ownership and the pass report); the status loop diffs the new
//!   node against the server's, for its report-on-change rule
//!   ([`Diff::status_changed`]) and the strategic merge patch
//!   ([`Diff::patch`]).
//! - [`stamp_times`] gives the conditions a setter wrote the kubelet's
//!   heartbeat and transition times, from the host's clock.
//! - [`kubelet`] holds what the kubelet writes outside its setters: the
//!   initial node, and the rules it forces after them (the os/arch labels,
//!   an allocatable for every capacity key), which the pipeline runs as
//!   built-in steps through the same diff and policy.

mod conditions;
mod diff;
pub mod kubelet;
pub mod part;
pub mod patch;
mod path;

pub use conditions::{condition_time, conditions_by_type, stamp_times};
pub use diff::{Change, Diff};
pub use part::Part;
pub use path::FieldPath;

/// Why a text is not a node field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The text names no field of a Node.
    #[error("{text:?} is not a node field path")]
    NotAPath {
        /// The text.
        text: String,
    },
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;
