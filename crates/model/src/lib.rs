//! # nodestatus-model: the Node as data, and the rules about it
//!
//! Everything nodestatus knows about a Node that needs no I/O: this crate
//! reads no file, opens no socket and runs no plugin, so every rule here is
//! tested with plain values.
//!
//! - [`node`]: the Node as JSON; [`node::FieldPath`] names one field, the one
//!   [`node::Diff`] compares two nodes (for the policy, ownership, the
//!   report-on-change rule and the status patch), and [`node::kubelet`] holds
//!   what the kubelet writes outside its setters.
//! - [`validate`]: the API server's own rules for a Node, checked before a
//!   PATCH so that one refused field never fails a whole status update.
//! - [`policy`]: which fields a plugin may change (its allowance, the host's
//!   hard limits, NodeRestriction).
//! - [`ownership`]: which plugin owns which field, recorded on the node.

pub mod node;
pub mod ownership;
pub mod policy;
pub mod validate;

#[cfg(test)]
mod fuzz;
