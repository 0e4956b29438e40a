//! Plugins as OCI artifacts: pull, push, sign, verify and cache them.
//!
//! This first part: references ([`Reference`]) and the `registries:`
//! settings ([`Registries`]).

#![warn(missing_docs)]

pub mod reference;
pub mod settings;

pub use reference::{Digest, Reference};
pub use settings::{Registries, RegistrySettings};
