//! Keyless signatures, checked offline against a trusted root the operator
//! ships.
//!
//! A keyless cosign signature (`cosign sign` with an OIDC identity, v3's
//! default layout: a Sigstore bundle attached as a referrer, see
//! [`crate::bundle`]) carries a short-lived Fulcio certificate and a Rekor
//! transparency log entry. [`verify`] checks, with nothing but a
//! [`TrustedRoot`] (Sigstore's `trusted_root.json`,
//! [`TRUSTED_ROOT_MEDIA_TYPE`]):
//!
//! 1. the log entry: its log is one of the root's `tlogs` (by key id), valid
//!    at the entry's integrated time; its *signed entry timestamp* (the
//!    `inclusionPromise`: the log key's ECDSA signature over the canonical
//!    JSON of the body, integrated time, log index and log id) verifies; and
//!    its *inclusion proof*, required in a bundle (not in cosign's `.sig`
//!    layout, which has no room for it), is for the entry's log index and
//!    hashes the entry up to the root hash, which the *checkpoint* (a signed
//!    note) names with the same tree size, the log's origin, and a
//!    signature with the log's key hint by the log key (`keyless/tlog.rs`
//!    says the rules, [`LogError`] names each refusal). The signed entry timestamp is
//!    required: it is what makes the integrated time a trusted time (an RFC
//!    3161 timestamp from the root's `timestampAuthorities` is not read, so
//!    a Rekor v2 entry, which has none, is refused);
//! 2. the entry's body is this signature: a Rekor `dsse` 0.0.1 entry whose
//!    payload hash is the statement's sha256, and whose signatures include
//!    this one, with this certificate as its verifier; or, for cosign's
//!    `.sig` layout (cosign v2's default keyless signature, read into the
//!    same material by [`classic_material`]), a `hashedrekord` 0.0.1 entry
//!    of the payload's sha256, this signature and this certificate;
//! 3. the certificate chains to one of the root's `certificateAuthorities`
//!    (each signature checked, ECDSA P-256 or P-384 with SHA-256 or
//!    SHA-384), every certificate of the chain and the authority itself
//!    valid at the integrated time, and it is for code signing;
//! 4. its embedded SCTs, when the root has `ctlogs`: at least one must be a
//!    valid signature of a listed CT log over the precertificate (as `cosign
//!    verify` requires with such a root). With no `ctlogs` in the root,
//!    SCTs are not checked;
//! 5. the DSSE signature verifies with the certificate's key.
//!
//! What passes is an [`Identity`]: the certificate's subject (its SAN: an
//! email or a URI), the OIDC issuer and the GitHub workflow repository from
//! Fulcio's extensions (`1.3.6.1.4.1.57264.1.*`), which the
//! [`crate::policy`] matches.

mod cert;
#[cfg(test)]
mod fuzz;
mod root;
#[cfg(test)]
pub(crate) mod tests;
mod text;
mod tlog;

pub use root::{TRUSTED_ROOT_MEDIA_TYPE, TrustedRoot};
pub use tlog::Error as LogError;

use std::path::PathBuf;

use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
use p256::pkcs8::DecodePublicKey as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256, Sha384};
use x509_cert::Certificate;
use x509_cert::der::Decode as _;
use x509_cert::der::asn1::{ObjectIdentifier, Utf8StringRef};
use x509_cert::ext::pkix::name::GeneralName;

use crate::stored::SignatureFormat;
use cert::{check_chain, check_scts, extension, leaf_key};
use root::{ChainFile, RawBytes};
use text::b64;
use tlog::{TlogEntry, check_body, check_entry};

/// Fulcio's OIDC issuer extension (v1: the raw string).
const OID_ISSUER_V1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.1");
/// Fulcio's GitHub workflow repository extension (`owner/repo`, raw).
const OID_GITHUB_WORKFLOW_REPOSITORY: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.5");
/// Fulcio's OIDC issuer extension (v2: a DER UTF8String).
const OID_ISSUER_V2: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.8");
/// Fulcio's source repository URI extension (DER UTF8String).
const OID_SOURCE_REPOSITORY_URI: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.3.6.1.4.1.57264.1.12");
/// The subject alternative name extension.
const OID_SAN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.17");

/// Why a trusted root or a keyless signature was refused. Every variant
/// says which check failed; a root's variants name its file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The trusted root file could not be read.
    #[error("cannot read the trusted root {}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The trusted root file is not one this module reads.
    #[error("{} is not a Sigstore trusted root ({TRUSTED_ROOT_MEDIA_TYPE}): {reason}", path.display())]
    Root {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The bundle's verification material cannot be read.
    #[error("its verification material is unusable: {0}")]
    Material(String),
    /// The bundle has no transparency log entry.
    #[error(
        "it has no transparency log entry (signed with --tlog-upload=false?): a keyless signature needs one to be checked offline"
    )]
    NoTlogEntry,
    /// The entry's log is not in the trusted root, or not valid then.
    #[error("its transparency log entry is from a log the trusted root {} does not list (log id {log_id}){why}", root.display())]
    UnknownLog {
        /// The trusted root.
        root: PathBuf,
        /// The entry's log id, hex.
        log_id: String,
        /// More, when the log is listed but cannot be used.
        why: String,
    },
    /// The entry's signed entry timestamp, inclusion proof or checkpoint
    /// is missing or does not verify.
    #[error(transparent)]
    Log(#[from] LogError),
    /// The log entry's body is not this signature.
    #[error("its transparency log entry is not this signature: {0}")]
    BodyMismatch(String),
    /// The certificate does not chain to a listed authority.
    #[error("its certificate (issuer {issuer}) does not chain to a certificate authority of the trusted root {}: {reason}", root.display())]
    Chain {
        /// The trusted root.
        root: PathBuf,
        /// The certificate's issuer name.
        issuer: String,
        /// Why no authority matched.
        reason: String,
    },
    /// A certificate was not valid at the integrated time.
    #[error(
        "its certificate {which} was not valid when the log recorded the signature ({time}): valid from {not_before} to {not_after}"
    )]
    Expired {
        /// Which certificate of the chain.
        which: String,
        /// The integrated time.
        time: String,
        /// Its notBefore.
        not_before: String,
        /// Its notAfter.
        not_after: String,
    },
    /// The certificate is not a code-signing certificate.
    #[error("its certificate is not for code signing (no extended key usage codeSigning)")]
    NotCodeSigning,
    /// No valid SCT from a CT log of the trusted root.
    #[error("its certificate has no valid SCT from a CT log of the trusted root: {0}")]
    Sct(String),
    /// The signature does not verify with the certificate's key.
    #[error("its DSSE signature does not verify with its certificate's key")]
    Signature,
}

/// The result of this module's functions.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// An ECDSA verification key of a log or an authority.
#[derive(Clone, Debug)]
enum Key {
    P256(p256::ecdsa::VerifyingKey),
    P384(p384::ecdsa::VerifyingKey),
    /// A key of another kind (Ed25519, RSA): kept so the root loads, refused
    /// when an entry needs it.
    Unsupported(String),
}

impl Key {
    fn from_spki(der: &[u8], details: &str) -> Self {
        if let Ok(k) = p256::ecdsa::VerifyingKey::from_public_key_der(der) {
            return Key::P256(k);
        }
        if let Ok(k) = p384::ecdsa::VerifyingKey::from_public_key_der(der) {
            return Key::P384(k);
        }
        Key::Unsupported(match details {
            "" => "a key that is not ECDSA P-256 or P-384".into(),
            d => format!("a {d} key (only ECDSA P-256 and P-384 are read)"),
        })
    }

    /// Checks a DER ECDSA signature over `message`, hashed with the curve's
    /// own hash (SHA-256 for P-256, SHA-384 for P-384).
    fn verifies(&self, message: &[u8], der: &[u8]) -> bool {
        match self {
            Key::P256(_) => self.verifies_prehash(&Sha256::digest(message), der),
            Key::P384(_) => self.verifies_prehash(&Sha384::digest(message), der),
            Key::Unsupported(_) => false,
        }
    }

    /// Checks a DER ECDSA signature over a digest.
    fn verifies_prehash(&self, prehash: &[u8], der: &[u8]) -> bool {
        match self {
            Key::P256(k) => p256::ecdsa::Signature::from_der(der)
                .is_ok_and(|s| k.verify_prehash(prehash, &s).is_ok()),
            Key::P384(k) => p384::ecdsa::Signature::from_der(der)
                .is_ok_and(|s| k.verify_prehash(prehash, &s).is_ok()),
            Key::Unsupported(_) => false,
        }
    }
}

/// Who signed, as the certificate says: what the [`crate::policy`] matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The subject: the SAN's email or URI (or other name).
    pub subject: String,
    /// The OIDC issuer (Fulcio's extension 1.3.6.1.4.1.57264.1.8, else .1.1).
    pub issuer: Option<String>,
    /// The GitHub workflow repository, `owner/repo` (extension .1.5, else
    /// the path of the source repository URI, .1.12, on github.com).
    pub github_repository: Option<String>,
    /// The log entry's integrated time, Unix seconds.
    pub integrated_time: i64,
    /// The log entry's index.
    pub log_index: i64,
}

impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "subject {} from issuer {}",
            self.subject,
            self.issuer.as_deref().unwrap_or("(none)")
        )?;
        if let Some(repo) = &self.github_repository {
            write!(f, ", GitHub repository {repo}")?;
        }
        write!(f, ", log index {}", self.log_index)
    }
}

/// A Fulcio v2 extension (DER UTF8String), else the raw v1 bytes.
fn string_extension(
    cert: &Certificate,
    v2: Option<&ObjectIdentifier>,
    v1: Option<&ObjectIdentifier>,
) -> Option<String> {
    if let Some(bytes) = v2.and_then(|oid| extension(cert, oid))
        && let Ok(s) = Utf8StringRef::from_der(bytes)
    {
        return Some(s.as_str().to_owned());
    }
    v1.and_then(|oid| extension(cert, oid))
        .and_then(|b| std::str::from_utf8(b).ok())
        .map(str::to_owned)
}

impl Identity {
    /// The identity a certificate names (no check of the certificate).
    pub fn of(cert: &Certificate, integrated_time: i64, log_index: i64) -> Result<Self> {
        let san = extension(cert, &OID_SAN).ok_or_else(|| {
            Error::Material("its certificate has no subject alternative name".into())
        })?;
        let names = x509_cert::ext::pkix::SubjectAltName::from_der(san).map_err(|e| {
            Error::Material(format!(
                "its certificate's subject alternative name is unreadable: {e}"
            ))
        })?;
        let subject = names
            .0
            .iter()
            .find_map(|n| match n {
                GeneralName::Rfc822Name(s) | GeneralName::UniformResourceIdentifier(s) => {
                    Some(s.as_str().to_owned())
                }
                GeneralName::OtherName(o) => o
                    .value
                    .decode_as::<Utf8StringRef<'_>>()
                    .ok()
                    .map(|s| s.as_str().to_owned()),
                _ => None,
            })
            .ok_or_else(|| {
                Error::Material(
                    "its certificate's subject alternative name has no email or URI".into(),
                )
            })?;
        let issuer = string_extension(cert, Some(&OID_ISSUER_V2), Some(&OID_ISSUER_V1));
        let github_repository = string_extension(cert, None, Some(&OID_GITHUB_WORKFLOW_REPOSITORY))
            .or_else(|| {
                string_extension(cert, Some(&OID_SOURCE_REPOSITORY_URI), None)?
                    .strip_prefix("https://github.com/")
                    .map(str::to_owned)
            });
        Ok(Self {
            subject,
            issuer,
            github_repository,
            integrated_time,
            log_index,
        })
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Material {
    #[serde(default)]
    certificate: Option<RawBytes>,
    #[serde(default)]
    x509_certificate_chain: Option<ChainFile>,
    #[serde(default)]
    tlog_entries: Vec<TlogEntry>,
}

/// Checks a keyless signature: `signature_b64` (base64 DER) over the DSSE
/// encoding `signed` of the statement `payload`, with the bundle's
/// `verificationMaterial`, against `root`; `format` is the format it came
/// in, which says what evidence of inclusion its log entry must carry (a
/// bundle's: an inclusion proof too). `Ok` with who signed.
pub fn verify(
    root: &TrustedRoot,
    payload: &[u8],
    signed: &[u8],
    signature_b64: &str,
    material: &serde_json::Value,
    format: SignatureFormat,
) -> Result<Identity> {
    let material: Material =
        serde_json::from_value(material.clone()).map_err(|e| Error::Material(e.to_string()))?;
    let leaf_der = match (&material.certificate, &material.x509_certificate_chain) {
        (Some(c), _) => b64(&c.raw_bytes),
        (None, Some(chain)) if !chain.certificates.is_empty() => {
            b64(&chain.certificates[0].raw_bytes)
        }
        _ => return Err(Error::Material("it holds no certificate".into())),
    }
    .map_err(|e| Error::Material(format!("its certificate is not base64: {e}")))?;
    let leaf = Certificate::from_der(&leaf_der)
        .map_err(|e| Error::Material(format!("its certificate is unreadable: {e}")))?;
    let signature = b64(signature_b64).map_err(|_| Error::Signature)?;
    let [entry] = material.tlog_entries.as_slice() else {
        return Err(match material.tlog_entries.len() {
            0 => Error::NoTlogEntry,
            n => Error::Material(format!("it holds {n} transparency log entries, not one")),
        });
    };
    let time = check_entry(root, entry, format)?;
    check_body(entry, payload, &signature, &leaf_der)?;
    check_chain(root, &leaf, time)?;
    check_scts(root, &leaf)?;
    let key = leaf_key(&leaf)?;
    if !key.verifies(signed, &signature) {
        return Err(Error::Signature);
    }
    Identity::of(&leaf, time, entry.log_index.0)
}

/// The `verificationMaterial` of a bundle, made from what cosign's `.sig`
/// layout carries for a keyless signature (cosign v2's default): the
/// layer's `dev.sigstore.cosign/certificate` (PEM) and
/// `dev.sigstore.cosign/bundle` annotations (Rekor's signed entry
/// timestamp and the entry it signs: `{"SignedEntryTimestamp", "Payload":
/// {"body", "integratedTime", "logIndex", "logID"}}`). There is no
/// inclusion proof in that layout: the signed entry timestamp is what
/// [`verify`] checks of the log. Without a readable bundle, the material
/// holds the certificate alone, which [`verify`] refuses
/// ([`Error::NoTlogEntry`]) while its identity can still be named.
pub fn classic_material(certificate_pem: &str, bundle: Option<&str>) -> Option<serde_json::Value> {
    use base64::Engine as _;
    let b64e = |bytes: &[u8]| base64::engine::general_purpose::STANDARD.encode(bytes);
    let der = tlog::pem_certificate(certificate_pem.as_bytes())?;
    let mut material = serde_json::json!({"certificate": {"rawBytes": b64e(&der)}});
    let entry = bundle.and_then(|text| {
        let v: serde_json::Value = serde_json::from_str(text).ok()?;
        let set = v.get("SignedEntryTimestamp")?.as_str()?;
        let p = v.get("Payload")?;
        let body = p.get("body")?.as_str()?;
        let decoded: serde_json::Value = serde_json::from_slice(&b64(body).ok()?).ok()?;
        Some(serde_json::json!({
            "logIndex": p.get("logIndex")?.as_i64()?.to_string(),
            "logId": {"keyId": b64e(&hex::decode(p.get("logID")?.as_str()?).ok()?)},
            "kindVersion": {
                "kind": decoded.get("kind")?.as_str()?,
                "version": decoded.get("apiVersion")?.as_str()?,
            },
            "integratedTime": p.get("integratedTime")?.as_i64()?.to_string(),
            "inclusionPromise": {"signedEntryTimestamp": set},
            "canonicalizedBody": body,
        }))
    });
    if let Some(entry) = entry {
        material["tlogEntries"] = serde_json::json!([entry]);
    }
    Some(material)
}

/// The identity a bundle's certificate names, without any check: for
/// messages about a signature that did not verify.
pub fn claimed_identity(material: &serde_json::Value) -> Option<String> {
    let material: Material = serde_json::from_value(material.clone()).ok()?;
    let der = match (&material.certificate, &material.x509_certificate_chain) {
        (Some(c), _) => b64(&c.raw_bytes).ok()?,
        (None, Some(chain)) => b64(&chain.certificates.first()?.raw_bytes).ok()?,
        _ => return None,
    };
    let cert = Certificate::from_der(&der).ok()?;
    let id = Identity::of(&cert, 0, 0).ok()?;
    Some(format!(
        "subject {} from issuer {}",
        id.subject,
        id.issuer.as_deref().unwrap_or("(none)")
    ))
}
