//! # nodestatus: a Kubernetes node status engine with WebAssembly setters
//!
//! The kubelet keeps its Node object current with a list of *setters*, each
//! filling in one part of the node. nodestatus runs the same loops as the
//! kubelet (register, status sync, lease) and loads every setter as a
//! sandboxed WebAssembly component from a plugin directory.
//!
//! ## The pipeline
//!
//! One pass ([`pipeline::pass`]):
//!
//! 1. **Node in.** The pass starts from the last known Node (or the initial
//!    node at registration) and works on a copy.
//! 2. **Setters in order.** Each plugin of the current [`pipeline::PluginSet`]
//!    runs in order ([`pipeline::default_order`]: the kubelet's order, custom
//!    setters after, `ready` last). Each call gets a fresh wasmtime store with
//!    a CPU deadline, a memory cap and only the grants the operator gave
//!    ([`runtime`]).
//! 3. **Diff, policy and validation.** The host diffs the plugin's output
//!    against its input ([`node::Diff`], list items by merge key), bounds
//!    how many fields it may change, checks each against the plugin's
//!    [`policy::Allowance`], and checks the node against the API server's
//!    own rules ([`validate`]): nothing the API server would refuse reaches a
//!    PATCH, where one refused field fails the whole status update. A
//!    violation, a trap, a timeout or bad output discards that plugin's whole
//!    output for the pass, with a typed reason; the other setters go on.
//! 4. **Ownership.** Fields a plugin changed become its own, recorded in an
//!    annotation ([`ownership`]); fields of plugins that are gone are removed.
//! 5. **Patch out.** The sync loop compares the result with the node on the
//!    server and sends a strategic merge patch when something changed.
//!
//! Plugins are loaded and hot-reloaded from a directory by [`plugin_dir`].

#![warn(missing_docs)]

pub mod agent;
pub mod cli;
pub mod config;
pub mod cri;
pub mod embedded_apiserver;
pub mod files;
pub mod http;
pub mod live_config;
pub mod metrics;
pub mod node;
pub mod node_shutdown;
pub mod ownership;
pub mod pipeline;
pub mod plugin_dir;
pub mod policy;
pub mod runtime;
pub mod scaffold;
pub mod validate;
