//! Why an operation on a registry failed.

use std::time::Duration;

use oci_client::errors::OciDistributionError;

use crate::artifact::LayoutError;
use crate::credentials;
use crate::reference::{Digest, Reference};
use crate::settings;

/// Why an operation on a registry failed. Each variant names the reference;
/// none holds a credential.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry's settings or files are refused.
    #[error("{reference}: the settings of its registry are refused")]
    Settings {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: settings::Error,
    },
    /// The CA bundle is not one rustls can use.
    #[error("{reference}: the CA bundle of registries.{registry}.ca is not usable")]
    BadCa {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// No connection (refused, unreachable, DNS).
    #[error("{reference}: cannot reach the registry")]
    Unreachable {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// The TLS handshake failed: an unknown CA, a wrong name, or a registry
    /// that speaks plain HTTP.
    #[error(
        "{reference}: TLS with {registry} failed (a private CA goes in registries.{registry}.ca; a plain-HTTP registry needs registries.{registry}.insecure: true)"
    )]
    Tls {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// The operation did not finish within its deadline.
    #[error("{reference}: the registry did not answer within {after:?}")]
    Timeout {
        /// The reference.
        reference: Reference,
        /// The deadline.
        after: Duration,
    },
    /// 401 or 403: no credentials, wrong ones, or no access to the
    /// repository.
    #[error(
        "{reference}: the registry refused access ({status}); check the credentials in registries.{registry}.auth"
    )]
    Unauthorized {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// 401 or 403.
        status: u16,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// 404: no such repository, tag, manifest or blob (a tag deleted reads
    /// the same).
    #[error("{reference}: not found in the registry (404)")]
    NotFound {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// The registry's token server refused the credentials (or their
    /// absence).
    #[error("{reference}: the token server of {registry} refused access with {origin}")]
    CredentialsRefused {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// Where the credentials came from.
        origin: String,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// The token server accepted the credentials, but its token does not
    /// grant the access needed: the account has no access to the
    /// repository.
    #[error(
        "{reference}: the token that the token server of {registry} gave for {origin} does not grant {action} on the repository {repository} (the registry answered 401{scope}): use an account with access to it, or ask for that access"
    )]
    NoAccess {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// Where the credentials came from.
        origin: String,
        /// `pull` or `push`.
        action: &'static str,
        /// The repository.
        repository: String,
        /// `, insufficient_scope for <scope>` when the registry said so.
        scope: String,
    },
    /// A credential helper or an identity token failed.
    #[error("{reference}: no credentials for {registry}")]
    Credentials {
        /// The reference.
        reference: Reference,
        /// The registry.
        registry: String,
        /// The cause (boxed: the variant stays small).
        #[source]
        source: Box<credentials::Error>,
    },
    /// Another error status (5xx, 429, ...).
    #[error("{reference}: the registry answered {status}")]
    Status {
        /// The reference.
        reference: Reference,
        /// The status code.
        status: u16,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
    /// A manifest or blob whose sha256 is not the digest that names it.
    #[error("{reference}: the registry served content whose digest is {actual}, not {expected}")]
    DigestMismatch {
        /// The reference.
        reference: Reference,
        /// The digest that names the content.
        expected: String,
        /// The sha256 of what was served.
        actual: String,
    },
    /// The registry named a digest of another algorithm than sha256.
    #[error("{reference}: the registry names it by {digest}, not by a sha256 digest")]
    UnsupportedDigest {
        /// The reference.
        reference: Reference,
        /// What the registry said.
        digest: String,
    },
    /// A blob of another size than its descriptor declares.
    #[error(
        "{reference}: the blob {digest} is declared as {declared} bytes but {received} were served"
    )]
    SizeMismatch {
        /// The reference.
        reference: Reference,
        /// The blob.
        digest: Digest,
        /// The descriptor's size.
        declared: u64,
        /// What was served (at most one chunk past `declared`).
        received: u64,
    },
    /// The manifest declares a component over the caller's cap: refused
    /// before a byte of it is fetched.
    #[error("{reference}: the component is {size} bytes, over the cap of {limit} bytes")]
    DeclaredTooLarge {
        /// The reference.
        reference: Reference,
        /// The declared size.
        size: u64,
        /// The cap.
        limit: u64,
    },
    /// The component's bytes went past the caller's cap while streaming:
    /// the download was cut there.
    #[error(
        "{reference}: the component went past the cap of {limit} bytes while streaming (cut after {received} bytes)"
    )]
    StreamTooLarge {
        /// The reference.
        reference: Reference,
        /// The cap.
        limit: u64,
        /// What was read before the cut (at most one chunk past `limit`).
        received: u64,
    },
    /// A manifest or index over its bound: refused before its body is
    /// read when its length is declared, else cut where it passes the
    /// bound.
    #[error(
        "{reference}: the registry serves a manifest or index of {}, over the bound of {limit} bytes on one: refused, not read whole (a Wasm plugin's manifest is under 1 KiB; this is not a plugin artifact, or the registry misbehaves)",
        match declared {
            Some(size) => format!("{size} bytes (declared)"),
            None => format!("more than {received} bytes (cut there)"),
        }
    )]
    ManifestTooLarge {
        /// The reference.
        reference: Reference,
        /// The bound.
        limit: u64,
        /// The `Content-Length` the registry declared, when over the bound.
        declared: Option<u64>,
        /// What was read before the cut (at most one chunk past `limit`).
        received: u64,
    },
    /// The manifest is not a plugin artifact.
    #[error("{reference}: not a Wasm component artifact: {source}")]
    Layout {
        /// The reference.
        reference: Reference,
        /// Why.
        #[source]
        source: LayoutError,
    },
    /// The manifest is not JSON of a manifest.
    #[error("{reference}: the manifest is not valid JSON")]
    ManifestJson {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: serde_json::Error,
    },
    /// A push to a reference without a tag.
    #[error("{reference}: a push needs a tag (HOST/repo:tag), not a digest")]
    PushNeedsTag {
        /// The reference.
        reference: Reference,
    },
    /// Any other failure of the registry protocol.
    #[error("{reference}: the registry request failed")]
    Protocol {
        /// The reference.
        reference: Reference,
        /// The cause.
        #[source]
        source: OciDistributionError,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded name of the failure, for a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::Settings { .. } | Error::BadCa { .. } => "settings",
            Error::Unreachable { .. } => "unreachable",
            Error::Tls { .. } => "tls",
            Error::Timeout { .. } => "timeout",
            Error::Unauthorized { .. }
            | Error::CredentialsRefused { .. }
            | Error::NoAccess { .. } => "unauthorized",
            Error::Credentials { source, .. } => source.kind(),
            Error::NotFound { .. } => "not-found",
            Error::Status { .. } | Error::Protocol { .. } => "server",
            Error::DigestMismatch { .. }
            | Error::SizeMismatch { .. }
            | Error::UnsupportedDigest { .. } => "digest-mismatch",
            Error::DeclaredTooLarge { .. }
            | Error::StreamTooLarge { .. }
            | Error::ManifestTooLarge { .. } => "too-large",
            Error::Layout { .. } | Error::ManifestJson { .. } => "layout",
            Error::PushNeedsTag { .. } => "invalid",
        }
    }
}
