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

use std::error::Error as StdError;
use std::sync::{Arc, Once};
use std::time::Duration;

use futures_util::StreamExt as _;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use sha2::{Digest as _, Sha256};

use crate::artifact::{
    ANNOTATION_VERSION, ANNOTATION_WORLD, Artifact, CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE,
    DOCKER_MANIFEST_LIST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE, Descriptor, LayoutError, Manifest,
    OCI_INDEX_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE,
};
use crate::credentials::{self, Challenge, Found};
use crate::reference::{Digest, Reference};
use crate::settings::{self, Auth, Registries};

/// The deadline of one operation unless [`Client::with_timeout`] says
/// otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The largest manifest or index read: 1 MiB, the largest manifest the
/// registry cache keeps ([`crate::cache`]). A Wasm plugin's manifest is
/// under 1 KiB, a cosign `.sig` manifest about 1 KiB a signature.
pub const MAX_MANIFEST_BYTES: u64 = 1 << 20;

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

/// One registry's oci-client and credentials, for one operation, and the
/// HTTP client of its bounded reads (the same CA bundle and deadlines).
pub(crate) struct Session {
    pub oci: oci_client::Client,
    pub reference: Reference,
    pub timeout: Duration,
    http: reqwest::Client,
    scheme: &'static str,
    /// Where the credentials come from, read from the auth file.
    auth: Option<Auth>,
    /// The same, in words, for the errors.
    origin: String,
    /// The credentials, once a helper has answered.
    found: tokio::sync::OnceCell<Found>,
    /// The bearer token of each operation (pull, push), once asked for.
    tokens: tokio::sync::Mutex<[Option<Option<String>>; 2]>,
}

/// The manifest media types asked for: the index types too, to refuse an
/// index by name rather than by the registry's 404 for a type not
/// accepted.
const MANIFEST_TYPES: [&str; 4] = [
    OCI_MANIFEST_MEDIA_TYPE,
    DOCKER_MANIFEST_MEDIA_TYPE,
    OCI_INDEX_MEDIA_TYPE,
    DOCKER_MANIFEST_LIST_MEDIA_TYPE,
];

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

    /// An oci-client for `reference`'s registry: its scheme, CA and
    /// credentials, read now.
    pub(crate) fn session(&self, reference: &Reference) -> Result<Session> {
        static RING: Once = Once::new();
        // reqwest is built without a provider of its own (no aws-lc-sys);
        // the process-wide default is ring, as kube's. Another provider
        // installed first is kept.
        RING.call_once(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
        });
        let registry = reference.registry();
        let settings = self.registries.get(registry);
        let settings_error = |source| Error::Settings {
            reference: reference.clone(),
            source,
        };
        let mut config = ClientConfig {
            protocol: match settings.insecure {
                true => ClientProtocol::HttpsExcept(vec![registry.to_owned()]),
                false => ClientProtocol::Https,
            },
            // A component runs everywhere: an index is refused, not resolved.
            platform_resolver: None,
            connect_timeout: Some(self.timeout),
            read_timeout: Some(self.timeout),
            user_agent: concat!("nodestatus/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let bad_ca = |source| Error::BadCa {
            reference: reference.clone(),
            registry: registry.to_owned(),
            source,
        };
        let mut http = reqwest::Client::builder()
            .connect_timeout(self.timeout)
            .read_timeout(self.timeout)
            .user_agent(config.user_agent);
        for pem in settings.read_ca(registry).map_err(settings_error)? {
            let cert = reqwest::Certificate::from_pem(&pem)
                .map_err(|e| bad_ca(OciDistributionError::RequestError(e)))?;
            http = http.tls_certs_merge([cert]);
            config
                .extra_root_certificates
                .push(oci_client::client::Certificate {
                    encoding: oci_client::client::CertificateEncoding::Pem,
                    data: pem,
                });
        }
        let http = http
            .build()
            .map_err(|e| bad_ca(OciDistributionError::RequestError(e)))?;
        let auth = settings.read_auth(registry).map_err(settings_error)?;
        let origin = match (&auth, &settings.auth) {
            (None, _) | (_, None) => {
                format!("no credentials (registries.{registry}.auth is not set)")
            }
            (Some(Auth::Basic(c)), Some(path)) => format!(
                "the credentials of {} in {} (registries.{registry}.auth)",
                c.username,
                path.display()
            ),
            (Some(Auth::IdentityToken(_)), Some(path)) => format!(
                "the identity token in {} (registries.{registry}.auth)",
                path.display()
            ),
            (Some(Auth::Helper { helper, field, .. }), Some(path)) => format!(
                "the credentials of docker-credential-{helper} ({field} in {})",
                path.display()
            ),
        };
        let oci = oci_client::Client::try_from(config).map_err(bad_ca)?;
        Ok(Session {
            oci,
            reference: reference.clone(),
            timeout: self.timeout,
            http,
            scheme: match settings.insecure {
                true => "http",
                false => "https",
            },
            auth,
            origin,
            found: tokio::sync::OnceCell::new(),
            tokens: tokio::sync::Mutex::new([None, None]),
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

impl Session {
    /// The error of a failed oci-client call, classified by its type and
    /// status, never by its text.
    pub(crate) fn error(&self, e: OciDistributionError) -> Error {
        let reference = self.reference.clone();
        let registry = reference.registry().to_owned();
        let status = match &e {
            OciDistributionError::UnauthorizedError { .. }
            | OciDistributionError::AuthenticationFailure(_) => Some(401),
            OciDistributionError::ImageManifestNotFoundError(_) => Some(404),
            OciDistributionError::ServerError { code, .. } => Some(*code),
            OciDistributionError::RegistryError { envelope, .. } => {
                envelope.errors.first().map(|e| match e.code {
                    OciErrorCode::Unauthorized => 401,
                    OciErrorCode::Denied => 403,
                    OciErrorCode::BlobUnknown
                    | OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::NotFound => 404,
                    OciErrorCode::Toomanyrequests => 429,
                    _ => 400,
                })
            }
            OciDistributionError::RequestError(r) => r.status().map(|s| s.as_u16()),
            _ => None,
        };
        match (status, &e) {
            (Some(401 | 403), _) => Error::Unauthorized {
                reference,
                registry,
                status: status.unwrap_or(401),
                source: e,
            },
            (Some(404), _) => Error::NotFound {
                reference,
                source: e,
            },
            (Some(status), _) => Error::Status {
                reference,
                status,
                source: e,
            },
            (
                None,
                OciDistributionError::DigestError(
                    oci_client::errors::DigestError::VerificationError { expected, actual },
                ),
            ) => Error::DigestMismatch {
                reference,
                expected: expected.clone(),
                actual: actual.clone(),
            },
            (None, OciDistributionError::RequestError(r)) if r.is_timeout() => Error::Timeout {
                reference,
                after: self.timeout,
            },
            (None, _) if caused_by_tls(&e) => Error::Tls {
                reference,
                registry,
                source: e,
            },
            (None, OciDistributionError::RequestError(r)) if r.is_connect() => Error::Unreachable {
                reference,
                source: e,
            },
            (None, _) => Error::Protocol {
                reference,
                source: e,
            },
        }
    }

    /// The raw manifest `reference` names (at most
    /// [`MAX_MANIFEST_BYTES`]), and its digest (the sha256 of the bytes,
    /// checked against a pinned reference's digest).
    pub(crate) async fn manifest(&self, reference: &Reference) -> Result<(Vec<u8>, Digest)> {
        self.manifest_within(reference, MAX_MANIFEST_BYTES).await
    }

    /// [`Session::manifest`] with a bound of `max` bytes.
    pub(crate) async fn manifest_within(
        &self,
        reference: &Reference,
        max: u64,
    ) -> Result<(Vec<u8>, Digest)> {
        let url = self.manifest_url(reference);
        let (_, body) = self
            .read_bounded(reference, reqwest::Method::GET, &url, &[], max)
            .await?;
        let digest = Digest::of(&body);
        if let Some(expected) = reference.digest()
            && *expected != digest
        {
            return Err(Error::DigestMismatch {
                reference: reference.clone(),
                expected: expected.to_string(),
                actual: digest.to_string(),
            });
        }
        Ok((body, digest))
    }

    /// The digest the registry says `reference`'s manifest has: its
    /// `Docker-Content-Digest` to a HEAD, else the sha256 of the manifest
    /// (a bounded GET).
    async fn manifest_digest(&self, reference: &Reference) -> Result<Digest> {
        let url = self.manifest_url(reference);
        let (headers, _) = self
            .read_bounded(reference, reqwest::Method::HEAD, &url, &[], 0)
            .await?;
        match headers
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
        {
            Some(digest) => digest.parse().map_err(|_| Error::UnsupportedDigest {
                reference: reference.clone(),
                digest: digest.to_owned(),
            }),
            None => Ok(self.manifest(reference).await?.1),
        }
    }

    /// `<scheme>://<registry>/v2/<repository>/manifests/<digest or tag>`.
    fn manifest_url(&self, reference: &Reference) -> String {
        let r = reference.oci();
        format!(
            "{}://{}/v2/{}/manifests/{}",
            self.scheme,
            r.resolve_registry(),
            r.repository(),
            match reference.digest() {
                Some(d) => d.to_string(),
                None => r.tag().unwrap_or("latest").to_owned(),
            }
        )
    }

    /// `<scheme>://<registry>/v2/<repository>/referrers/<digest>`.
    pub(crate) fn referrers_url(&self, reference: &Reference, digest: &Digest) -> String {
        let r = reference.oci();
        format!(
            "{}://{}/v2/{}/referrers/{digest}",
            self.scheme,
            r.resolve_registry(),
            r.repository()
        )
    }

    /// The credentials: the auth file's, or its helper's answer (asked
    /// once).
    async fn found(&self) -> Result<&Found> {
        self.found
            .get_or_try_init(|| async {
                match &self.auth {
                    None => Ok(Found::Anonymous),
                    Some(Auth::Basic(c)) => Ok(Found::Basic(c.clone())),
                    Some(Auth::IdentityToken(t)) => Ok(Found::IdentityToken(t.clone())),
                    Some(Auth::Helper {
                        helper,
                        field,
                        path,
                    }) => credentials::helper_get(
                        helper,
                        field,
                        path,
                        self.reference.registry(),
                        credentials::HELPER_TIMEOUT.min(self.timeout / 2),
                    )
                    .await
                    .map_err(|e| self.credentials_error(e)),
                }
            })
            .await
    }

    /// Where the credentials came from, in words, for the errors.
    fn origin(&self) -> String {
        match (self.found.get(), &self.auth) {
            (Some(Found::Anonymous), Some(Auth::Helper { helper, .. })) => format!(
                "no credentials (docker-credential-{helper} has none for {})",
                self.reference.registry()
            ),
            _ => self.origin.clone(),
        }
    }

    fn credentials_error(&self, source: credentials::Error) -> Error {
        Error::Credentials {
            reference: self.reference.clone(),
            registry: self.reference.registry().to_owned(),
            source: Box::new(source),
        }
    }

    /// The bearer token for `op` (`repository:<name>:pull`, or `pull,push`)
    /// on this session's repository, asked once, and oci-client made
    /// ready for `op`'s requests: oci-client's own flow with Basic
    /// credentials or none (`None` for a registry that takes Basic
    /// credentials or none), or an identity token exchanged at the token
    /// server.
    async fn authorize(&self, op: RegistryOperation) -> Result<Option<String>> {
        let slot = usize::from(op == RegistryOperation::Push);
        let mut tokens = self.tokens.lock().await;
        if let Some(t) = &tokens[slot] {
            return Ok(t.clone());
        }
        let auth = match self.found().await? {
            Found::Anonymous => RegistryAuth::Anonymous,
            Found::Basic(c) => {
                RegistryAuth::Basic(c.username.clone(), c.password.expose().to_owned())
            }
            Found::IdentityToken(refresh) => {
                let challenge = self.challenge().await?;
                let scope = format!(
                    "repository:{}:{}",
                    self.reference.oci().repository(),
                    match op {
                        RegistryOperation::Pull => "pull",
                        RegistryOperation::Push => "pull,push",
                    }
                );
                let access = credentials::exchange(
                    &self.http,
                    self.reference.registry(),
                    &challenge,
                    refresh,
                    &scope,
                    &self.origin(),
                )
                .await
                .map_err(|e| self.credentials_error(e))?;
                RegistryAuth::Bearer(access.expose().to_owned())
            }
        };
        let got = self
            .oci
            .auth(self.reference.oci(), &auth, op)
            .await
            .map_err(|e| match e {
                OciDistributionError::AuthenticationFailure(_) => Error::CredentialsRefused {
                    reference: self.reference.clone(),
                    registry: self.reference.registry().to_owned(),
                    origin: self.origin(),
                    source: e,
                },
                e => self.error(e),
            })?;
        tokens[slot] = Some(got.clone());
        Ok(got)
    }

    /// The registry's `Bearer` challenge to an anonymous `GET /v2/`: where
    /// its token server is.
    async fn challenge(&self) -> Result<Challenge> {
        let url = format!(
            "{}://{}/v2/",
            self.scheme,
            self.reference.oci().resolve_registry()
        );
        let response = self
            .http
            .get(&url)
            .send()
            .await
            .map_err(|e| self.error(OciDistributionError::RequestError(e)))?;
        response
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .and_then(Challenge::parse)
            .ok_or_else(|| {
                self.credentials_error(credentials::Error::NoTokenServer {
                    registry: self.reference.registry().to_owned(),
                    status: response.status().as_u16(),
                    origin: self.origin(),
                })
            })
    }

    /// `e`, or [`Error::NoAccess`] when it is a 401 or 403 to a request
    /// that carried a bearer token for `op`: the token server accepted the
    /// credentials but did not grant the repository. `challenge` is the
    /// registry's `WWW-Authenticate`, when there is one.
    async fn no_access(
        &self,
        e: Error,
        op: RegistryOperation,
        challenge: Option<Challenge>,
    ) -> Error {
        let granted = matches!(
            self.tokens.lock().await[usize::from(op == RegistryOperation::Push)],
            Some(Some(_))
        );
        match e {
            Error::Unauthorized { .. } if granted => Error::NoAccess {
                reference: self.reference.clone(),
                registry: self.reference.registry().to_owned(),
                origin: self.origin(),
                action: match op {
                    RegistryOperation::Pull => "pull",
                    RegistryOperation::Push => "push",
                },
                repository: self.reference.oci().repository().to_owned(),
                scope: match challenge {
                    Some(Challenge {
                        error: Some(error),
                        scope,
                        ..
                    }) => format!(", {error} for {}", scope.unwrap_or_default()),
                    _ => String::new(),
                },
            },
            e => e,
        }
    }

    /// A request for a manifest or an index at `url` with `query`, with
    /// the manifest types accepted and the credentials; its headers and
    /// body, at most `max` bytes of it (a `Content-Length` over `max` is
    /// refused before the body is read; a body that passes it is cut). An
    /// error status is the error oci-client would have made of it.
    pub(crate) async fn read_bounded(
        &self,
        reference: &Reference,
        method: reqwest::Method,
        url: &str,
        query: &[(&str, &str)],
        max: u64,
    ) -> Result<(http::HeaderMap, Vec<u8>)> {
        let transport = |e| self.error(OciDistributionError::RequestError(e));
        let mut request = self
            .http
            .request(method.clone(), url)
            .query(query)
            .header(http::header::ACCEPT, MANIFEST_TYPES.join(", "));
        request = match (
            self.authorize(RegistryOperation::Pull).await?,
            self.found().await?,
        ) {
            (Some(token), _) => request.bearer_auth(token),
            (None, Found::Basic(c)) => request.basic_auth(&c.username, Some(c.password.expose())),
            (None, _) => request,
        };
        let mut response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            let challenge = response
                .headers()
                .get(http::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .and_then(Challenge::parse);
            // An error's body, for the registry's error codes: a few KiB.
            let mut body = Vec::new();
            while body.len() < 16 << 10 {
                match response.chunk().await {
                    Ok(Some(chunk)) => body.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            let e = self.error(status_error(status, &body, url));
            return Err(self.no_access(e, RegistryOperation::Pull, challenge).await);
        }
        let headers = response.headers().clone();
        if method == reqwest::Method::HEAD {
            return Ok((headers, Vec::new()));
        }
        let too_large = |declared, received| Error::ManifestTooLarge {
            reference: reference.clone(),
            limit: max,
            declared,
            received,
        };
        if let Some(declared) = response.content_length()
            && declared > max
        {
            return Err(too_large(Some(declared), 0));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(transport)? {
            let received = (body.len() + chunk.len()) as u64;
            if received > max {
                return Err(too_large(None, received));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((headers, body))
    }

    pub(crate) fn parse_manifest(&self, bytes: &[u8]) -> Result<Manifest> {
        let reference = &self.reference;
        Manifest::parse(bytes)
            .map_err(|source| Error::ManifestJson {
                reference: reference.clone(),
                source,
            })?
            .map_err(|source| Error::Layout {
                reference: reference.clone(),
                source,
            })
    }

    /// The blob `layer` describes, streamed under `max_bytes` and checked
    /// against its digest and size.
    pub(crate) async fn blob(&self, layer: &Descriptor, max_bytes: u64) -> Result<Vec<u8>> {
        let reference = &self.reference;
        let layout = |source| Error::Layout {
            reference: reference.clone(),
            source,
        };
        let expected = layer.digest().map_err(layout)?;
        let declared = layer.size().map_err(layout)?;
        if declared > max_bytes {
            return Err(Error::DeclaredTooLarge {
                reference: reference.clone(),
                size: declared,
                limit: max_bytes,
            });
        }
        // oci-client made ready for the blob's request (no request when
        // the session's reads have done it).
        self.authorize(RegistryOperation::Pull).await?;
        let stream = self
            .oci
            .pull_blob_stream(reference.oci(), &layer.to_oci())
            .await
            .map_err(|e| self.error(e));
        let mut stream = match stream {
            Ok(stream) => stream,
            Err(e) => return Err(self.no_access(e, RegistryOperation::Pull, None).await),
        };
        let mut bytes = Vec::with_capacity(declared as usize);
        let mut hasher = Sha256::new();
        while let Some(chunk) = stream.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => return Err(self.stream_error(e)),
            };
            let received = (bytes.len() + chunk.len()) as u64;
            if received > max_bytes {
                return Err(Error::StreamTooLarge {
                    reference: reference.clone(),
                    limit: max_bytes,
                    received,
                });
            }
            if received > declared {
                return Err(Error::SizeMismatch {
                    reference: reference.clone(),
                    digest: expected,
                    declared,
                    received,
                });
            }
            hasher.update(&chunk);
            bytes.extend_from_slice(&chunk);
        }
        let actual = Digest::from_sha256(hasher.finalize().into());
        if actual != expected {
            return Err(Error::DigestMismatch {
                reference: reference.clone(),
                expected: expected.to_string(),
                actual: actual.to_string(),
            });
        }
        if bytes.len() as u64 != declared {
            return Err(Error::SizeMismatch {
                reference: reference.clone(),
                digest: expected,
                declared,
                received: bytes.len() as u64,
            });
        }
        Ok(bytes)
    }

    /// An error in the middle of a blob's body: oci-client's own digest
    /// check at its end, or the transport.
    fn stream_error(&self, e: std::io::Error) -> Error {
        let inner = e.into_inner();
        if let Some(inner) = &inner
            && let Some(oci_client::errors::DigestError::VerificationError { expected, actual }) =
                inner.downcast_ref()
        {
            return Error::DigestMismatch {
                reference: self.reference.clone(),
                expected: expected.clone(),
                actual: actual.clone(),
            };
        }
        let io = match inner {
            Some(inner) => std::io::Error::other(inner),
            None => std::io::Error::other("the blob's body ended in an error"),
        };
        self.error(OciDistributionError::IoError(io))
    }

    /// Uploads a blob unless the registry has it.
    pub(crate) async fn push_blob(&self, desc: &Descriptor, bytes: &[u8]) -> Result<()> {
        let r = self.reference.oci();
        // The credentials and token of the upload requests that follow.
        self.authorize(RegistryOperation::Push).await?;
        let pushed = async {
            let exists = self
                .oci
                .blob_exists(r, &desc.digest)
                .await
                .map_err(|e| self.error(e))?;
            if !exists {
                self.oci
                    .push_blob(r, bytes.to_vec(), &desc.digest)
                    .await
                    .map_err(|e| self.error(e))?;
            }
            Ok(())
        };
        match pushed.await {
            Ok(()) => Ok(()),
            Err(e) => Err(self.no_access(e, RegistryOperation::Push, None).await),
        }
    }

    /// Uploads a manifest at `reference` (a tag); returns its digest.
    pub(crate) async fn push_manifest(
        &self,
        reference: &Reference,
        manifest: &Manifest,
    ) -> Result<Digest> {
        let body = manifest.to_bytes();
        let digest = Digest::of(&body);
        self.authorize(RegistryOperation::Push).await?;
        let pushed = self
            .oci
            .push_manifest_raw(reference.oci(), body, http_header(OCI_MANIFEST_MEDIA_TYPE))
            .await
            .map_err(|e| self.error(e));
        match pushed {
            Ok(_) => Ok(digest),
            Err(e) => Err(self.no_access(e, RegistryOperation::Push, None).await),
        }
    }
}

/// The error oci-client makes of an error status: 401, the registry's
/// error codes, else the status with the body's text.
fn status_error(status: reqwest::StatusCode, body: &[u8], url: &str) -> OciDistributionError {
    if status == reqwest::StatusCode::UNAUTHORIZED {
        return OciDistributionError::UnauthorizedError {
            url: url.to_owned(),
        };
    }
    match serde_json::from_slice::<oci_client::errors::OciEnvelope>(body) {
        Ok(envelope) if status.is_client_error() && !envelope.errors.is_empty() => {
            OciDistributionError::RegistryError {
                envelope,
                url: url.to_owned(),
            }
        }
        _ => OciDistributionError::ServerError {
            code: status.as_u16(),
            url: url.to_owned(),
            message: String::from_utf8_lossy(body).into_owned(),
        },
    }
}

fn http_header(value: &'static str) -> http::HeaderValue {
    http::HeaderValue::from_static(value)
}

/// Whether a rustls error is somewhere in the chain: the handshake failed
/// (std's `io::Error` hides its inner error from `source()`, so it is
/// opened explicitly).
fn caused_by_tls(e: &(dyn StdError + 'static)) -> bool {
    let mut next = Some(e);
    while let Some(e) = next {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && caused_by_tls(inner)
        {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::net::TcpListener;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;
    use crate::settings::RegistrySettings;

    /// A registry that answers `/v2/` and a HEAD of a manifest (with no
    /// digest header), and serves every manifest as an endless chunked
    /// body, with no `Content-Length`: counts what it sent.
    fn endless_registry() -> (String, Arc<AtomicU64>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let host = listener.local_addr().unwrap().to_string();
        let sent = Arc::new(AtomicU64::new(0));
        let counter = sent.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let sent = counter.clone();
                std::thread::spawn(move || {
                    let mut reader = BufReader::new(stream.try_clone().unwrap());
                    let mut request = String::new();
                    reader.read_line(&mut request).unwrap();
                    let mut line = String::new();
                    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                        line.clear();
                    }
                    if !request.contains("/manifests/") || request.starts_with("HEAD") {
                        let _ = stream.write_all(
                            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        );
                        return;
                    }
                    let _ = stream.write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                    );
                    let chunk = vec![b' '; 64 << 10];
                    let head = format!("{:x}\r\n", chunk.len());
                    loop {
                        let ok = stream
                            .write_all(head.as_bytes())
                            .and_then(|()| stream.write_all(&chunk))
                            .and_then(|()| stream.write_all(b"\r\n"));
                        if ok.is_err() {
                            return;
                        }
                        let total = sent.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                        // A client that reads it whole is stopped here.
                        if total > 1 << 30 {
                            return;
                        }
                    }
                });
            }
        });
        (host, sent)
    }

    #[tokio::test]
    async fn an_endless_manifest_is_cut_at_the_bound() {
        let (host, sent) = endless_registry();
        let settings = RegistrySettings {
            insecure: true,
            ..Default::default()
        };
        let client = Client::new(Registries([(host.clone(), settings)].into()))
            .unwrap()
            .with_timeout(Duration::from_secs(30));
        let reference = Reference::parse(&format!("{host}/vendor/gpu:1")).unwrap();
        // The tag resolved: no digest header, so the manifest is read.
        let err = client.resolve(&reference).await.unwrap_err();
        assert!(
            matches!(
                err,
                Error::ManifestTooLarge {
                    declared: None,
                    limit: MAX_MANIFEST_BYTES,
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(err.kind(), "too-large");
        let text = err.to_string();
        assert!(
            text.contains(&reference.to_string()) && text.contains("over the bound of 1048576"),
            "{text}"
        );
        let err = client.pull(&reference, 64 << 20).await.unwrap_err();
        assert!(matches!(err, Error::ManifestTooLarge { .. }), "{err}");
        // Cut near the bound, not read on: what the socket buffers hold
        // past it at most.
        let sent = sent.load(Ordering::Relaxed);
        assert!(
            sent < 2 * MAX_MANIFEST_BYTES + (32 << 20),
            "{sent} bytes sent"
        );
    }
}
