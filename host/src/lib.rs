//! # nodestatus: the command
//!
//! The `nodestatus` binary: its commands ([`cli`], one file each) and the
//! templates of `nodestatus new` ([`scaffold`]). The engine is
//! [`nodestatus_engine`], the sandbox [`nodestatus_runtime`], and the Node
//! model with its rules [`nodestatus_model`].

pub mod cli;
pub mod scaffold;
