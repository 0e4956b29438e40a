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
//!   back by the host.
//!
//! No dependencies (serde only with the `serde` feature, for the record's
//! JSON), so it builds for `wasm32-wasip2` inside every setter.

mod metadata;
pub mod names;
pub mod quantity;
pub mod time;

pub use metadata::Metadata;

/// The largest node, as compact JSON, that nodestatus writes or accepts from
/// a setter. etcd refuses requests over 1.5 MiB (`--max-request-bytes`
/// 1572864); this leaves a third of that for the encoding and framing.
pub const MAX_NODE_BYTES: usize = 1 << 20;
