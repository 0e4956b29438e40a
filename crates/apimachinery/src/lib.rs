//! The pieces of Kubernetes' apimachinery that nodestatus needs on both
//! sides of the sandbox: the host (model, config) and the Rust SDK that
//! setters are written with. One parser, one formatter and one check each,
//! so a value the SDK writes is the value the host accepts.
//!
//! - [`quantity`]: `resource.Quantity` (`2`, `1500m`, `16Gi`);
//! - [`time`]: `metav1.Time` and `MicroTime`, RFC 3339;
//! - [`names`]: qualified names, label values, DNS subdomains;
//! - [`MAX_NODE_BYTES`]: the largest Node nodestatus writes;
//! - [`Metadata`]: the WIT's `metadata` record, built by a setter and read
//!   back by the host;
//! - [`RuntimeHandler`]: a container runtime's handler, as CRI reports it
//!   (read by the runtime's facts, written by the model's kubelet fields).
//!
//! No dependencies (serde only with the `serde` feature, for the record's
//! JSON), so it builds for `wasm32-wasip2` inside every setter.

mod metadata;
pub mod names;
pub mod quantity;
pub mod time;

pub use metadata::Metadata;

/// A runtime handler, as CRI's `StatusResponse.runtime_handlers` gives it
/// (1.30+): what the container runtime says and what a current kubelet
/// writes into `status.runtimeHandlers`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct RuntimeHandler {
    /// Its name; empty for the default handler.
    pub name: String,
    /// `features.recursive_read_only_mounts`: it supports recursive
    /// read-only mounts.
    pub recursive_read_only_mounts: bool,
    /// `features.user_namespaces`: it supports user namespaces.
    pub user_namespaces: bool,
}

/// The largest node, as compact JSON, that nodestatus writes or accepts from
/// a setter. etcd refuses requests over 1.5 MiB (`--max-request-bytes`
/// 1572864); this leaves a third of that for the encoding and framing.
pub const MAX_NODE_BYTES: usize = 1 << 20;
