//! # nodestatus-engine: the engine around the sandbox
//!
//! The kubelet keeps its Node object current with a list of *setters*, each
//! filling in one part of the node. nodestatus runs the same loops as the
//! kubelet (register, status sync, lease) and loads every setter as a
//! sandboxed WebAssembly component ([`nodestatus_runtime`]).
//!
//! ## The pipeline
//!
//! One pass ([`pipeline::pass`]):
//!
//! 1. **Node in.** The pass starts from the last known Node (or the initial
//!    node at registration) and works on a copy.
//! 2. **Setters in order.** Each plugin of the current [`pipeline::PluginSet`]
//!    runs in order ([`pipeline::default_order`]: the kubelet's order, custom
//!    setters after, `ready` last), in the sandbox with a CPU deadline, a
//!    memory cap and only the grants the operator gave.
//! 3. **Diff, policy and validation.** The host diffs the plugin's output
//!    against its input ([`nodestatus_model::node::Diff`]), bounds how many
//!    fields it may change, checks each against the plugin's
//!    [`nodestatus_model::policy::Allowance`], and checks the node against the
//!    API server's own rules ([`nodestatus_model::validate`]). A violation, a
//!    trap, a timeout or bad output discards that plugin's whole output for
//!    the pass, with a typed reason; the other setters go on.
//! 4. **Ownership.** Fields a plugin changed become its own, recorded in an
//!    annotation ([`nodestatus_model::ownership`]); fields of plugins that are
//!    gone are removed.
//! 5. **Patch out.** The status loop ([`agent`]) compares the result with the
//!    node on the server and sends a strategic merge patch when something
//!    changed or the report period ran out.
//!
//! Plugins are loaded and hot-reloaded from a directory by [`plugin_dir`],
//! and pulled from OCI registries by [`oci`] into the same load path;
//! the [`config`] is read once and again while running ([`live_config`]).

pub mod agent;
pub mod config;
pub mod cri;
pub mod dir_watch;
pub mod http;
pub mod live_config;
pub mod metrics;
#[cfg(feature = "logind")]
pub mod node_shutdown;
/// The node's own shutdown: this build has no logind client (the `logind`
/// feature), so only SIGUSR2 marks the node shutting down.
#[cfg(not(feature = "logind"))]
pub mod node_shutdown {
    use tokio_util::sync::CancellationToken;

    use crate::agent::AgentHandle;

    /// Says once that the machine's shutdown is not watched, and returns.
    pub async fn watch(_agent: AgentHandle, _cancel: CancellationToken) {
        tracing::info!(
            "this nodestatus was built without its logind client (cargo's `logind` feature): the node's shutdown is not watched; SIGUSR2 marks it shutting down"
        );
    }
}
pub mod oci;
pub mod pipeline;
pub mod plugin_dir;
pub mod streams;
