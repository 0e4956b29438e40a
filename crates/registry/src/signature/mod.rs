//! Cosign-compatible signatures with a key pair (ECDSA P-256, SHA-256).
//!
//! A signature of the manifest digest `sha256:<hex>` lives where cosign puts
//! it: the tag `sha256-<hex>.sig` in the same repository, an OCI manifest
//! whose layers of type [`SIMPLE_SIGNING_MEDIA_TYPE`] each hold a "simple
//! signing" payload
//!
//! ```json
//! {"critical":{"identity":{"docker-reference":"HOST/repo"},"image":{"docker-manifest-digest":"sha256:<hex>"},"type":"cosign container image signature"},"optional":null}
//! ```
//!
//! with the base64 DER signature of the payload's bytes in the layer
//! annotation [`SIGNATURE_ANNOTATION`]. A digest is verified when at least
//! one layer's signature checks with the public key *and* its payload names
//! that digest. `cosign verify --key` accepts what [`Client::sign`] writes,
//! and [`Client::verify`] what `cosign sign --key` writes.
//!
//! cosign v3's default, a Sigstore bundle (a DSSE envelope of an in-toto
//! statement) attached as an OCI 1.1 referrer, is read too, after the
//! `.sig` tag: see the [`bundle`] module. Both are checked
//! with the key alone, offline; no transparency log is consulted.
//!
//! Keys are PEM: the public key as `PUBLIC KEY` (SubjectPublicKeyInfo, what
//! `cosign generate-key-pair` and `openssl pkey -pubout` write), the private
//! key as unencrypted PKCS#8 `PRIVATE KEY` (what `openssl genpkey -algorithm
//! EC -pkeyopt ec_paramgen_curve:P-256` writes) or SEC1 `EC PRIVATE KEY`.
//!
//! Not supported, each with its own error: cosign's encrypted private key
//! format (`ENCRYPTED SIGSTORE PRIVATE KEY`) and encrypted PKCS#8; keys other
//! than P-256. Keyless signatures (a Fulcio certificate and a Rekor entry)
//! do not verify with a key ([`Error::Keyless`]): [`Client::verify_policy`]
//! checks them against a trusted root ([`crate::keyless`], [`crate::policy`]). The signature's `docker-reference` is
//! written but not checked, so a signed artifact copied to a mirror still
//! verifies, as with cosign.
//!
//! The crypto is RustCrypto's `p256`, not the sigstore crate: sigstore 0.15
//! compiles only with OpenSSL (`native-tls`) or aws-lc-rs (`rustls-tls`) as
//! its crypto backend, both C builds the workspace keeps out.

use std::fmt;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{DerSignature, Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};
use serde::{Deserialize, Serialize};

use crate::artifact::{Descriptor, Manifest, OCI_MANIFEST_MEDIA_TYPE};
use crate::bundle::{self, IN_TOTO_PAYLOAD_TYPE};
use crate::client::{self, Client};
use crate::reference::{Digest, Reference};
pub use crate::stored::{SignatureFormat, StoredSignature};

/// The media type of a cosign signature layer.
pub const SIMPLE_SIGNING_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The layer annotation that holds the base64 signature.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The layer annotation of a keyless signature's Fulcio certificate.
const CERTIFICATE_ANNOTATION: &str = "dev.sigstore.cosign/certificate";
/// The layer annotation of a keyless signature's Rekor entry: its signed
/// entry timestamp and the entry (cosign's `.sig` layout).
const REKOR_BUNDLE_ANNOTATION: &str = "dev.sigstore.cosign/bundle";
/// The config media type cosign writes for a `.sig` manifest.
const SIGNATURE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// Largest payload read (cosign's are a few hundred bytes).
const MAX_PAYLOAD_BYTES: u64 = 64 << 10;

/// Why a signature check, a signing or a key failed. Each variant names the
/// reference or the key file, and the key file where one is involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The key file could not be read.
    #[error("cannot read the key {}", path.display())]
    KeyRead {
        /// The key file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The key file is not a PEM key of a supported form.
    #[error("{} is not a {expected} ({reason})", path.display())]
    KeyFormat {
        /// The key file.
        path: PathBuf,
        /// What was expected.
        expected: &'static str,
        /// What was found instead.
        reason: String,
    },
    /// The key file holds a form that is deliberately not supported.
    #[error("{}: {what} is not supported; {instead}", path.display())]
    KeyUnsupported {
        /// The key file.
        path: PathBuf,
        /// The form.
        what: &'static str,
        /// What to use instead.
        instead: &'static str,
    },
    /// No signature at all: no `.sig` tag (or no signature layer in it) and
    /// no Sigstore bundle among its referrers.
    #[error("{reference}: {digest} is not signed (no cosign signature at {signature_tag}, no Sigstore bundle referring to it); required by the key {}", key.display())]
    Unsigned {
        /// The reference.
        reference: Reference,
        /// The digest.
        digest: Digest,
        /// Where the signature was looked for.
        signature_tag: Reference,
        /// The key required.
        key: PathBuf,
    },
    /// Signatures exist, but none checks with the key (or every bundle
    /// was skipped as unreadable).
    #[error("{reference}: none of the {count} signature(s) of {digest} ({} in the cosign .sig tag, {bundles} in Sigstore bundles) was made by the key {}{}", count - bundles, key.display(), skipped_text(skipped))]
    WrongKey {
        /// The reference.
        reference: Reference,
        /// The digest.
        digest: Digest,
        /// How many signatures were checked (classic and bundles).
        count: usize,
        /// How many of them came from Sigstore bundles.
        bundles: usize,
        /// The bundles skipped, each with why.
        skipped: Vec<String>,
        /// The key.
        key: PathBuf,
    },
    /// A signature by the key signs another digest (a signature copied
    /// from another artifact).
    #[error("{reference}: the signature by the key {} signs {signed}, not {digest}", key.display())]
    OtherDigest {
        /// The reference.
        reference: Reference,
        /// The digest being verified.
        digest: Digest,
        /// The digest the payload names.
        signed: String,
        /// The key.
        key: PathBuf,
    },
    /// Only keyless (Fulcio/Rekor) signatures, which a key does not verify.
    #[error("{reference}: {digest} has only keyless (Fulcio certificate) signatures, which the key {} cannot verify: verify them with a policy (verify.trustedRoot and allOf/anyOf) instead", key.display())]
    Keyless {
        /// The reference.
        reference: Reference,
        /// The digest.
        digest: Digest,
        /// The key.
        key: PathBuf,
    },
    /// The registry failed while reading or writing signatures.
    #[error("{reference}: cannot {action} its signature (key {})", key.display())]
    Registry {
        /// The reference.
        reference: Reference,
        /// `read` or `write`.
        action: &'static str,
        /// The key.
        key: PathBuf,
        /// The cause (it names the `.sig` tag).
        #[source]
        source: Box<client::Error>,
    },
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// A short, bounded name of the failure, for a metric label.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::KeyRead { .. } | Error::KeyFormat { .. } | Error::KeyUnsupported { .. } => "key",
            Error::Unsigned { .. } => "unsigned",
            Error::WrongKey { .. } | Error::OtherDigest { .. } | Error::Keyless { .. } => {
                "bad-signature"
            }
            Error::Registry { source, .. } => source.kind(),
        }
    }
}

fn skipped_text(skipped: &[String]) -> String {
    match skipped {
        [] => String::new(),
        _ => format!(
            "; {} Sigstore bundle(s) skipped: {}",
            skipped.len(),
            skipped.join("; ")
        ),
    }
}

/// The first PEM label of `text` (`PUBLIC KEY`, `PRIVATE KEY`, ...).
fn pem_label(text: &str) -> Option<&str> {
    let start = text.find("-----BEGIN ")? + "-----BEGIN ".len();
    let len = text[start..].find("-----")?;
    Some(&text[start..start + len])
}

fn read_pem(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).map_err(|source| Error::KeyRead {
        path: path.to_owned(),
        source,
    })
}

/// A P-256 public key, from a PEM file.
#[derive(Clone)]
pub struct PublicKey {
    path: PathBuf,
    key: VerifyingKey,
}

impl PublicKey {
    /// Reads a PEM `PUBLIC KEY` (P-256).
    pub fn read(path: &Path) -> Result<Self> {
        Self::from_pem(path, &read_pem(path)?)
    }

    /// Parses a PEM `PUBLIC KEY`; `path` names it in errors.
    pub fn from_pem(path: &Path, pem: &str) -> Result<Self> {
        let format = |reason: String| Error::KeyFormat {
            path: path.to_owned(),
            expected: "PEM P-256 public key (-----BEGIN PUBLIC KEY-----)",
            reason,
        };
        match pem_label(pem) {
            Some("PUBLIC KEY") => {}
            Some("CERTIFICATE") => {
                return Err(Error::KeyUnsupported {
                    path: path.to_owned(),
                    what: "a certificate (keyless, Fulcio) as the verification key",
                    instead: "give the signer's PEM public key",
                });
            }
            Some(label) => return Err(format(format!("it holds a {label}"))),
            None => return Err(format("it holds no PEM block".into())),
        }
        let key = VerifyingKey::from_public_key_pem(pem)
            .map_err(|e| format(format!("{e}; only ECDSA P-256 keys are supported")))?;
        Ok(Self {
            path: path.to_owned(),
            key,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn verifies(&self, payload: &[u8], signature_b64: &str) -> bool {
        let Ok(der) = base64::engine::general_purpose::STANDARD.decode(signature_b64.trim()) else {
            return false;
        };
        let Ok(signature) = Signature::from_der(&der) else {
            return false;
        };
        self.key.verify(payload, &signature).is_ok()
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({})", self.path.display())
    }
}

/// A P-256 private key, from a PEM file. Its `Debug` shows the path only.
pub struct PrivateKey {
    path: PathBuf,
    key: SigningKey,
}

impl PrivateKey {
    /// Reads an unencrypted PKCS#8 `PRIVATE KEY` or SEC1 `EC PRIVATE KEY`
    /// (P-256).
    pub fn read(path: &Path) -> Result<Self> {
        Self::from_pem(path, &read_pem(path)?)
    }

    /// Parses a PEM private key; `path` names it in errors.
    pub fn from_pem(path: &Path, pem: &str) -> Result<Self> {
        let format = |reason: String| Error::KeyFormat {
            path: path.to_owned(),
            expected: "PEM P-256 private key (-----BEGIN PRIVATE KEY-----)",
            reason,
        };
        let unsupported = |what, instead| Error::KeyUnsupported {
            path: path.to_owned(),
            what,
            instead,
        };
        const OPENSSL: &str = "make a key with `openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out key.pem`";
        let key = match pem_label(pem) {
            Some("PRIVATE KEY") => SigningKey::from_pkcs8_pem(pem).map_err(|e| {
                // The error names the ASN.1 problem, never key material.
                format(format!("{e}; only ECDSA P-256 keys are supported"))
            })?,
            Some("EC PRIVATE KEY") => p256::SecretKey::from_sec1_pem(pem)
                .map(SigningKey::from)
                .map_err(|e| format(format!("{e}; only P-256 keys are supported")))?,
            Some("ENCRYPTED SIGSTORE PRIVATE KEY" | "ENCRYPTED COSIGN PRIVATE KEY") => {
                return Err(unsupported("cosign's encrypted key format", OPENSSL));
            }
            Some("ENCRYPTED PRIVATE KEY") => {
                return Err(unsupported(
                    "an encrypted PKCS#8 key",
                    "decrypt it with `openssl pkey -in key.pem -out plain.pem` and keep that file's permissions tight",
                ));
            }
            Some(label) => return Err(format(format!("it holds a {label}"))),
            None => return Err(format("it holds no PEM block".into())),
        };
        Ok(Self {
            path: path.to_owned(),
            key,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its public key (named by the private key's path).
    pub fn public_key(&self) -> PublicKey {
        PublicKey {
            path: self.path.clone(),
            key: *self.key.verifying_key(),
        }
    }

    pub(crate) fn sign_b64(&self, payload: &[u8]) -> String {
        let signature: Signature = self.key.sign(payload);
        let der: DerSignature = signature.to_der();
        base64::engine::general_purpose::STANDARD.encode(der.as_bytes())
    }
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({})", self.path.display())
    }
}

/// A digest verified with a key, and the signature that did it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The digest.
    pub digest: Digest,
    /// The signature that checked.
    pub signature: StoredSignature,
}

#[derive(Serialize)]
struct Payload<'a> {
    critical: Critical<'a>,
    optional: Option<()>,
}

#[derive(Serialize)]
struct Critical<'a> {
    identity: Identity<'a>,
    image: Image<'a>,
    #[serde(rename = "type")]
    kind: &'a str,
}

#[derive(Serialize)]
struct Identity<'a> {
    #[serde(rename = "docker-reference")]
    docker_reference: &'a str,
}

#[derive(Serialize)]
struct Image<'a> {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: &'a str,
}

#[derive(Deserialize)]
struct PayloadIn {
    critical: CriticalIn,
}

#[derive(Deserialize)]
struct CriticalIn {
    image: ImageIn,
}

#[derive(Deserialize)]
struct ImageIn {
    #[serde(rename = "docker-manifest-digest")]
    docker_manifest_digest: String,
}

/// The simple-signing payload cosign signs for `digest` in `reference`'s
/// repository.
pub fn payload(reference: &Reference, digest: &Digest) -> Vec<u8> {
    let repository = reference.repository_path();
    serde_json::to_vec(&Payload {
        critical: Critical {
            identity: Identity {
                docker_reference: &repository,
            },
            image: Image {
                docker_manifest_digest: digest.as_str(),
            },
            kind: "cosign container image signature",
        },
        optional: None,
    })
    .expect("json always serializes")
}

/// What one signature says about a digest and a key.
enum Check {
    Valid,
    /// Signed by the key, but for this other digest.
    Other(String),
    /// Not signed by the key (or not readable).
    NotByKey,
}

fn check(signature: &StoredSignature, digest: &Digest, key: &PublicKey) -> Check {
    if signature.format == SignatureFormat::Dsse {
        let signed = bundle::pae(IN_TOTO_PAYLOAD_TYPE, &signature.payload);
        if !key.verifies(&signed, &signature.signature) {
            return Check::NotByKey;
        }
        return match bundle::check_statement(&signature.payload, digest) {
            Ok(()) => Check::Valid,
            Err(signed) => Check::Other(signed),
        };
    }
    if !key.verifies(&signature.payload, &signature.signature) {
        return Check::NotByKey;
    }
    match serde_json::from_slice::<PayloadIn>(&signature.payload) {
        Ok(p) if p.critical.image.docker_manifest_digest == digest.as_str() => Check::Valid,
        Ok(p) => Check::Other(p.critical.image.docker_manifest_digest),
        Err(_) => Check::Other("an unreadable payload".into()),
    }
}

/// What a signature's key signed: the payload, or its DSSE encoding.
pub(crate) fn signed_bytes(signature: &StoredSignature) -> Vec<u8> {
    match signature.format {
        SignatureFormat::Dsse => bundle::pae(IN_TOTO_PAYLOAD_TYPE, &signature.payload),
        SignatureFormat::SimpleSigning => signature.payload.clone(),
    }
}

/// Whether `signature` is `key`'s over `digest`.
pub(crate) fn verifies(signature: &StoredSignature, digest: &Digest, key: &PublicKey) -> bool {
    matches!(check(signature, digest, key), Check::Valid)
}

/// The annotations `signature` carries when its payload names `digest`
/// (whoever signed it): a `.sig` payload's `optional` map, or the
/// matching subject's `annotations` in a bundle's statement. `None` when
/// it names another digest or is unreadable.
pub(crate) fn annotations(
    signature: &StoredSignature,
    digest: &Digest,
) -> Option<std::collections::BTreeMap<String, String>> {
    let strings = |v: Option<&serde_json::Value>| {
        v.and_then(serde_json::Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let payload: serde_json::Value = serde_json::from_slice(&signature.payload).ok()?;
    match signature.format {
        SignatureFormat::Dsse => {
            bundle::check_statement(&signature.payload, digest).ok()?;
            let subject = payload["subject"].as_array()?.iter().find(|s| {
                s["digest"]["sha256"]
                    .as_str()
                    .is_some_and(|h| h.eq_ignore_ascii_case(digest.hex()))
            })?;
            Some(strings(subject.get("annotations")))
        }
        SignatureFormat::SimpleSigning => {
            let signed = payload["critical"]["image"]["docker-manifest-digest"].as_str()?;
            (signed == digest.as_str()).then(|| strings(payload.get("optional")))
        }
    }
}

/// Checks `signatures` (cached, or just fetched) offline: `Ok` with the one
/// that verifies `digest` with `key`.
pub fn verify_signatures(
    reference: &Reference,
    digest: &Digest,
    key: &PublicKey,
    signatures: &[StoredSignature],
    keyless: usize,
) -> Result<Verified> {
    verify_found(reference, digest, key, signatures, keyless, &[])
}

/// [`verify_signatures`], naming the bundles that were `skipped` as
/// unreadable when none verifies.
pub(crate) fn verify_found(
    reference: &Reference,
    digest: &Digest,
    key: &PublicKey,
    signatures: &[StoredSignature],
    keyless: usize,
    skipped: &[String],
) -> Result<Verified> {
    let mut other = None;
    for signature in signatures {
        match check(signature, digest, key) {
            Check::Valid => {
                return Ok(Verified {
                    digest: digest.clone(),
                    signature: signature.clone(),
                });
            }
            Check::Other(signed) => other = other.or(Some(signed)),
            Check::NotByKey => {}
        }
    }
    let key = key.path.clone();
    Err(match other {
        Some(signed) => Error::OtherDigest {
            reference: reference.clone(),
            digest: digest.clone(),
            signed,
            key,
        },
        None if signatures.is_empty() && keyless == 0 && skipped.is_empty() => Error::Unsigned {
            reference: reference.clone(),
            digest: digest.clone(),
            signature_tag: signature_tag(reference, digest),
            key,
        },
        None if keyless == signatures.len() && keyless > 0 => Error::Keyless {
            reference: reference.clone(),
            digest: digest.clone(),
            key,
        },
        None => Error::WrongKey {
            reference: reference.clone(),
            digest: digest.clone(),
            count: signatures.len(),
            bundles: signatures
                .iter()
                .filter(|s| s.format == SignatureFormat::Dsse)
                .count(),
            skipped: skipped.to_vec(),
            key,
        },
    })
}

/// The tag cosign keeps `digest`'s signatures under:
/// `HOST/repo:sha256-<hex>.sig`.
pub fn signature_tag(reference: &Reference, digest: &Digest) -> Reference {
    reference.with_tag(&format!("sha256-{}.sig", digest.hex()))
}

/// The config blob of a `.sig` manifest, as cosign writes it (its
/// `diff_ids` are the layers' digests).
fn signature_config(layers: &[Descriptor]) -> Vec<u8> {
    let diff_ids: Vec<&str> = layers.iter().map(|l| l.digest.as_str()).collect();
    serde_json::to_vec(&serde_json::json!({
        "architecture": "",
        "config": {},
        "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}],
        "os": "",
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    }))
    .expect("json always serializes")
}

impl Client {
    /// Checks that `digest` (in `reference`'s repository) has a cosign
    /// signature by `key`: fetches the `.sig` manifest and its payloads,
    /// then the Sigstore bundles that refer to the digest (all under the
    /// deadline), and checks them.
    pub async fn verify(
        &self,
        reference: &Reference,
        digest: &Digest,
        key: &PublicKey,
    ) -> Result<Verified> {
        let registry_error = |source| Error::Registry {
            reference: reference.clone(),
            action: "read",
            key: key.path.clone(),
            source: Box::new(source),
        };
        let (mut signatures, mut keyless) = self
            .classic_signatures(reference, digest)
            .await
            .map_err(registry_error)?;
        // A classic signature that verifies needs no bundle.
        if let Ok(verified) = verify_signatures(reference, digest, key, &signatures, keyless) {
            return Ok(verified);
        }
        let found = self
            .bundles_of(reference, digest)
            .await
            .map_err(registry_error)?;
        signatures.extend(found.signatures);
        keyless += found.keyless;
        verify_found(reference, digest, key, &signatures, keyless, &found.skipped)
    }

    /// The Sigstore bundles that refer to `digest`, under the deadline.
    pub(crate) async fn bundles_of(
        &self,
        reference: &Reference,
        digest: &Digest,
    ) -> client::Result<bundle::Found> {
        self.deadline(reference, async {
            let s = self.session(reference)?;
            s.bundles(reference, digest).await
        })
        .await
    }

    /// The signatures in `digest`'s `.sig` tag, and how many of them are
    /// keyless (none when there is no such tag).
    pub(crate) async fn classic_signatures(
        &self,
        reference: &Reference,
        digest: &Digest,
    ) -> client::Result<(Vec<StoredSignature>, usize)> {
        let tag = signature_tag(reference, digest);
        let fetched = self
            .deadline(&tag, async {
                let s = self.session(&tag)?;
                let (bytes, _) = match s.manifest(&tag).await {
                    Ok(found) => found,
                    Err(client::Error::NotFound { .. }) => return Ok(None),
                    Err(e) => return Err(e),
                };
                let manifest = s.parse_manifest(&bytes)?;
                let mut signatures = Vec::new();
                let mut keyless = 0;
                for layer in &manifest.layers {
                    if layer.media_type != SIMPLE_SIGNING_MEDIA_TYPE {
                        continue;
                    }
                    let annotations = layer.annotations.clone().unwrap_or_default();
                    let Some(signature) = annotations.get(SIGNATURE_ANNOTATION) else {
                        continue;
                    };
                    // A keyless one (cosign v2's default): its certificate
                    // and Rekor's signed entry timestamp, as a bundle's
                    // material, for a policy to check.
                    let material = annotations.get(CERTIFICATE_ANNOTATION).and_then(|pem| {
                        crate::keyless::classic_material(
                            pem,
                            annotations.get(REKOR_BUNDLE_ANNOTATION).map(String::as_str),
                        )
                    });
                    if annotations.contains_key(CERTIFICATE_ANNOTATION) {
                        keyless += 1;
                    }
                    let payload = s.blob(layer, MAX_PAYLOAD_BYTES).await?;
                    signatures.push(StoredSignature {
                        payload,
                        signature: signature.clone(),
                        format: SignatureFormat::SimpleSigning,
                        material,
                    });
                }
                Ok(Some((signatures, keyless)))
            })
            .await?;
        Ok(fetched.unwrap_or_default())
    }

    /// Signs what `reference` names now (its digest, or what its tag
    /// resolves to) with `key`, cosign's way: the payload as a layer of the
    /// `sha256-<hex>.sig` manifest, appended to the signatures already
    /// there (a signature already present is not added twice). Returns the
    /// signed digest.
    pub async fn sign(&self, reference: &Reference, key: &PrivateKey) -> Result<Digest> {
        let registry_error = |source| Error::Registry {
            reference: reference.clone(),
            action: "write",
            key: key.path.clone(),
            source: Box::new(source),
        };
        let digest = self.resolve(reference).await.map_err(registry_error)?;
        let payload = payload(reference, &digest);
        let mut layer = Descriptor::new(SIMPLE_SIGNING_MEDIA_TYPE, &payload);
        layer.annotations =
            Some([(SIGNATURE_ANNOTATION.to_owned(), key.sign_b64(&payload))].into());
        let tag = signature_tag(reference, &digest);
        self.deadline(&tag, async {
            let s = self.session(&tag)?;
            let mut layers = match s.manifest(&tag).await {
                Ok((bytes, _)) => s.parse_manifest(&bytes)?.layers,
                Err(client::Error::NotFound { .. }) => Vec::new(),
                Err(e) => return Err(e),
            };
            if layers.contains(&layer) {
                return Ok(());
            }
            layers.push(layer.clone());
            let config = signature_config(&layers);
            let manifest = Manifest {
                schema_version: 2,
                media_type: Some(OCI_MANIFEST_MEDIA_TYPE.into()),
                config: Descriptor::new(SIGNATURE_CONFIG_MEDIA_TYPE, &config),
                layers,
                annotations: None,
            };
            s.push_blob(&layer, &payload).await?;
            s.push_blob(&manifest.config, &config).await?;
            s.push_manifest(&tag, &manifest).await.map(drop)
        })
        .await
        .map_err(registry_error)?;
        Ok(digest)
    }
}

#[cfg(test)]
mod tests;
