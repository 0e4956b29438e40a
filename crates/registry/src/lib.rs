//! Plugins as OCI artifacts: pull, push, sign, verify and cache them.
//!
//! So far: references ([`Reference`]), the `registries:` settings
//! ([`Registries`]), the artifact layouts accepted ([`artifact`]), the
//! client that pulls and pushes them under a deadline ([`Client`]), and
//! cosign-compatible signatures with a key pair ([`signature`]).

#![warn(missing_docs)]

pub mod artifact;
pub mod client;
pub mod reference;
pub mod settings;
pub mod signature;

pub use artifact::{ANNOTATION_VERSION, ANNOTATION_WORLD, Artifact, Layout};
pub use client::{Client, DEFAULT_TIMEOUT, PushMeta};
pub use reference::{Digest, Reference};
pub use settings::{Registries, RegistrySettings};
pub use signature::{PrivateKey, PublicKey, Verified};
