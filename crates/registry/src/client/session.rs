//! One registry's session: its oci-client, HTTP client and credentials,
//! and the requests made with them (bounded manifest reads, blobs,
//! pushes).

use std::error::Error as StdError;
use std::sync::Once;
use std::time::Duration;

use futures_util::StreamExt as _;
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use sha2::{Digest as _, Sha256};

use super::error::{Error, Result};
use super::{Client, MAX_MANIFEST_BYTES};
use crate::artifact::{
    DOCKER_MANIFEST_LIST_MEDIA_TYPE, DOCKER_MANIFEST_MEDIA_TYPE, Descriptor, Manifest,
    OCI_INDEX_MEDIA_TYPE, OCI_MANIFEST_MEDIA_TYPE,
};
use crate::credentials::{Challenge, Found};
use crate::reference::{Digest, Reference};
use crate::settings::Auth;

/// One registry's oci-client and credentials, for one operation, and the
/// HTTP client of its bounded reads (the same CA bundle and deadlines).
pub(crate) struct Session {
    pub oci: oci_client::Client,
    pub reference: Reference,
    pub timeout: Duration,
    pub(super) http: reqwest::Client,
    pub(super) scheme: &'static str,
    /// Where the credentials come from, read from the auth file.
    pub(super) auth: Option<Auth>,
    /// The same, in words, for the errors.
    pub(super) origin: String,
    /// The credentials, once a helper has answered.
    pub(super) found: tokio::sync::OnceCell<Found>,
    /// The bearer token of each operation (pull, push), once asked for.
    pub(super) tokens: tokio::sync::Mutex<[Option<Option<String>>; 2]>,
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
    pub(super) async fn manifest_digest(&self, reference: &Reference) -> Result<Digest> {
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
