//! The registry client: resolve, pull and push over oci-client, each under
//! a deadline.
//!
//! A [`Client`] holds the `registries` settings and a deadline. Each
//! operation builds a fresh oci-client for the one registry it talks to,
//! with that registry's CA bundle, scheme and credentials read from their
//! files at that moment (so a rotated Secret is used at the next pull, and
//! one registry's CA is never trusted for another), and runs under
//! `tokio::time::timeout`: it ends with [`Error::Timeout`] however the
//! registry behaves.
//!
//! TLS is rustls with the `ring` provider (no OpenSSL, no aws-lc), the
//! system roots plus the registry's `ca`. Plain HTTP only where the
//! registry's settings say `insecure: true`.
//!
//! Every read of a manifest or an index (a tag resolved, a manifest
//! pulled, a signature's manifest, the referrers index) is bounded, as a
//! blob is: by [`MAX_MANIFEST_BYTES`] or the caller's smaller bound, a
//! declared `Content-Length` over it refused before the body is read, the
//! body cut as it passes it ([`Error::ManifestTooLarge`]). oci-client reads
//! a manifest's body whole, so these requests are made here, with its
//! credentials: the bearer token its own flow gets, else the Basic ones.
//!
//! # Credentials
//!
//! Each session gets its credentials as the docker CLI does
//! ([`crate::credentials`]): Basic credentials go to the registry, or, when
//! its `/v2/` challenges with `Bearer`, to its token server (oci-client's
//! token flow, with the scope `repository:<name>:pull`, or `pull,push` for
//! a push); an identity token is exchanged at that token server for an
//! access token of the same scope; a credential helper is asked first. A
//! token server that refuses the credentials is
//! [`Error::CredentialsRefused`], a token that does not grant the
//! repository [`Error::NoAccess`], a helper or identity token that fails
//! [`Error::Credentials`]; each names where the credentials came from.

mod auth;
mod error;
mod session;
#[cfg(test)]
mod tests;

pub use error::{Error, Result};
pub(crate) use session::Session;

use std::sync::Arc;
use std::time::Duration;

use crate::artifact::{
    ANNOTATION_VERSION, ANNOTATION_WORLD, Artifact, CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE,
    Descriptor, Manifest, OCI_MANIFEST_MEDIA_TYPE,
};
use crate::reference::{Digest, Reference};
use crate::settings::{self, Registries};

/// The deadline of one operation unless [`Client::with_timeout`] says
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest manifest or index read: 1 MiB, the largest manifest the
/// registry cache keeps ([`crate::cache`]). A Wasm plugin's manifest is
/// under 1 KiB, a cosign `.sig` manifest about 1 KiB a signature.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// Metadata that [`Client::push`] writes beside the component.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PushMeta {
    /// The component's WIT world (the [`ANNOTATION_WORLD`] annotation and
    /// the config's `component.target`).
    pub world: String,
    /// The plugin's version (the [`ANNOTATION_VERSION`] annotation).
    pub version: String,
    /// The interfaces the component exports, for the config (may be empty).
    pub exports: Vec<String>,
    /// The interfaces the component imports, for the config (may be empty).
    pub imports: Vec<String>,
}

/// Talks to registries with the `registries` settings, each operation under
/// one deadline. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    registries: Arc<Registries>,
    timeout: Duration,
}

impl Client {
    /// A client with these settings (their keys checked) and
    /// [`DEFAULT_TIMEOUT`].
    pub fn new(registries: Registries) -> settings::Result<Self> {
        registries.validate()?;
        Ok(Self {
            registries: Arc::new(registries),
            timeout: DEFAULT_TIMEOUT,
        })
    }

    /// The same client with another deadline per operation.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The deadline of one operation.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The settings.
    pub fn registries(&self) -> &Registries {
        &self.registries
    }

    /// Runs `op` under the deadline.
    pub(crate) async fn deadline<T>(
        &self,
        reference: &Reference,
        op: impl Future<Output = Result<T>>,
    ) -> Result<T> {
        tokio::time::timeout(self.timeout, op)
            .await
            .unwrap_or_else(|_| {
                Err(Error::Timeout {
                    reference: reference.clone(),
                    after: self.timeout,
                })
            })
    }

    /// The digest `reference` names now: its own digest when pinned (no
    /// request), else what the registry says its tag points to.
    pub async fn resolve(&self, reference: &Reference) -> Result<Digest> {
        if let Some(digest) = reference.digest() {
            return Ok(digest.clone());
        }
        self.deadline(reference, async {
            let s = self.session(reference)?;
            s.manifest_digest(reference).await
        })
        .await
    }

    /// Pulls the component `reference` names: the manifest (its digest
    /// checked), the one Wasm layer streamed under `max_bytes` (refused
    /// before the download when the manifest declares more, cut while
    /// streaming when more comes) and checked against its digest.
    pub async fn pull(&self, reference: &Reference, max_bytes: u64) -> Result<Artifact> {
        self.deadline(reference, async {
            let s = self.session(reference)?;
            let (manifest_bytes, digest) = s.manifest(reference).await?;
            let manifest = s.parse_manifest(&manifest_bytes)?;
            let (layout, layer) = manifest.component_layer().map_err(|source| Error::Layout {
                reference: reference.clone(),
                source,
            })?;
            let bytes = s.blob(layer, max_bytes).await?;
            Ok(Artifact {
                reference: reference.clone(),
                digest,
                layer_digest: Digest::of(&bytes),
                layout,
                annotations: manifest.annotations.clone().unwrap_or_default(),
                bytes,
                manifest: manifest_bytes,
            })
        })
        .await
    }

    /// Publishes `component` at `reference` (which needs a tag) in the CNCF
    /// TAG-Runtime layout, with `meta` in the config and the annotations.
    /// The same bytes and metadata always give the same digest (no
    /// timestamp is written). Returns the manifest's digest.
    pub async fn push(
        &self,
        reference: &Reference,
        component: &[u8],
        meta: &PushMeta,
    ) -> Result<Digest> {
        if reference.is_pinned() || reference.tag().is_none() {
            return Err(Error::PushNeedsTag {
                reference: reference.clone(),
            });
        }
        self.deadline(reference, async {
            let s = self.session(reference)?;
            let layer = Descriptor::new(CNCF_LAYER_MEDIA_TYPE, component);
            let config = cncf_config(&layer.digest, meta);
            let manifest = Manifest {
                schema_version: 2,
                media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()),
                config: Descriptor::new(CNCF_CONFIG_MEDIA_TYPE, &config),
                layers: vec![layer],
                annotations: Some(
                    [
                        (ANNOTATION_WORLD.to_owned(), meta.world.clone()),
                        (ANNOTATION_VERSION.to_owned(), meta.version.clone()),
                    ]
                    .into(),
                ),
            };
            s.push_blob(&manifest.layers[0], component).await?;
            s.push_blob(&manifest.config, &config).await?;
            s.push_manifest(reference, &manifest).await
        })
        .await
    }
}

/// The CNCF config blob: `{"architecture":"wasm","os":"wasip2",...}`. Its
/// `created` is the epoch, so that a push is reproducible.
fn cncf_config(layer_digest: &str, meta: &PushMeta) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "created": "1970-01-01T00:00:00Z",
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {
            "exports": meta.exports,
            "imports": meta.imports,
            "target": meta.world,
        },
    }))
    .expect("json always serializes")
}
