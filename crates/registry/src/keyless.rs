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
//!    its *inclusion proof*, when the bundle has one, hashes the entry up to
//!    the root hash, which the *checkpoint* (a signed note) names with the
//!    same tree size and a signature by the log key. The signed entry
//!    timestamp is required: it is what makes the integrated time a trusted
//!    time (an RFC 3161 timestamp from the root's `timestampAuthorities` is
//!    not read, so a Rekor v2 entry, which has none, is refused);
//! 2. the entry's body is this signature: a Rekor `dsse` 0.0.1 entry whose
//!    payload hash is the statement's sha256, and whose signatures include
//!    this one, with this certificate as its verifier;
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

use std::path::{Path, PathBuf};

use base64::Engine as _;
use p256::ecdsa::signature::hazmat::PrehashVerifier as _;
use p256::pkcs8::DecodePublicKey as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256, Sha384};
use x509_cert::Certificate;
use x509_cert::der::asn1::{ObjectIdentifier, Utf8StringRef};
use x509_cert::der::{Decode as _, Encode as _};
use x509_cert::ext::pkix::name::GeneralName;

/// The media type of a trusted root this module reads.
pub const TRUSTED_ROOT_MEDIA_TYPE: &str =
    "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
/// Largest trusted root file read (Sigstore's public one is about 7 KiB).
const MAX_ROOT_BYTES: u64 = 1 << 20;

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
/// The extended key usage extension.
const OID_EKU: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.29.37");
/// Extended key usage: code signing.
const OID_CODE_SIGNING: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.5.5.7.3.3");
/// RFC 6962's embedded SCT list extension.
const OID_SCT_LIST: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.6.1.4.1.11129.2.4.2");
/// The signature algorithms of certificates read.
const OID_ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const OID_ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");

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
    /// The entry has no signed entry timestamp.
    #[error(
        "its transparency log entry has no signed entry timestamp (inclusionPromise); without it the integrated time is not a trusted time (timestamp authorities are not read)"
    )]
    NoSignedEntryTimestamp,
    /// The signed entry timestamp does not verify with the log's key.
    #[error("its signed entry timestamp does not verify with the key of the log {log}")]
    SignedEntryTimestamp {
        /// The log's base URL.
        log: String,
    },
    /// The inclusion proof does not hash to the checkpoint's root.
    #[error("its inclusion proof does not verify: {0}")]
    InclusionProof(String),
    /// The checkpoint is malformed or not signed by the log.
    #[error("its checkpoint does not verify: {0}")]
    Checkpoint(String),
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

/// A validity period, in Unix seconds.
#[derive(Clone, Debug, Default)]
struct Validity {
    start: Option<i64>,
    end: Option<i64>,
}

impl Validity {
    fn contains(&self, t: i64) -> bool {
        self.start.is_none_or(|s| s <= t) && self.end.is_none_or(|e| t <= e)
    }
}

#[derive(Clone, Debug)]
struct Log {
    base_url: String,
    key_id: Vec<u8>,
    key: Key,
    valid: Validity,
}

#[derive(Clone, Debug)]
struct Authority {
    uri: String,
    /// Intermediates first, the root last.
    chain: Vec<Certificate>,
    valid: Validity,
}

/// A Sigstore trusted root (`trusted_root.json`): the transparency logs,
/// certificate authorities and CT logs whose keys a keyless signature is
/// checked with.
#[derive(Clone, Debug)]
pub struct TrustedRoot {
    path: PathBuf,
    tlogs: Vec<Log>,
    ctlogs: Vec<Log>,
    authorities: Vec<Authority>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RootFile {
    media_type: String,
    #[serde(default)]
    tlogs: Vec<LogFile>,
    #[serde(default)]
    certificate_authorities: Vec<AuthorityFile>,
    #[serde(default)]
    ctlogs: Vec<LogFile>,
    #[serde(default)]
    #[allow(dead_code)]
    timestamp_authorities: Vec<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogFile {
    #[serde(default)]
    base_url: String,
    public_key: PublicKeyFile,
    log_id: LogIdFile,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PublicKeyFile {
    raw_bytes: String,
    #[serde(default)]
    key_details: String,
    #[serde(default)]
    valid_for: Option<ValidityFile>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LogIdFile {
    key_id: String,
}

#[derive(Deserialize)]
struct ValidityFile {
    #[serde(default)]
    start: Option<String>,
    #[serde(default)]
    end: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuthorityFile {
    #[serde(default)]
    uri: String,
    cert_chain: ChainFile,
    #[serde(default)]
    valid_for: Option<ValidityFile>,
}

#[derive(Deserialize)]
struct ChainFile {
    certificates: Vec<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawBytes {
    raw_bytes: String,
}

fn b64(text: &str) -> std::result::Result<Vec<u8>, base64::DecodeError> {
    base64::engine::general_purpose::STANDARD.decode(text.trim())
}

/// Unix seconds of an RFC 3339 time.
fn rfc3339(text: &str) -> std::result::Result<i64, String> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))
}

/// An RFC 3339 rendering of Unix seconds, for messages.
fn show_time(t: i64) -> String {
    jiff::Timestamp::from_second(t).map_or_else(|_| t.to_string(), |t| t.to_string())
}

fn validity(v: &Option<ValidityFile>) -> std::result::Result<Validity, String> {
    let Some(v) = v else {
        return Ok(Validity::default());
    };
    Ok(Validity {
        start: v.start.as_deref().map(rfc3339).transpose()?,
        end: v.end.as_deref().map(rfc3339).transpose()?,
    })
}

impl TrustedRoot {
    /// Reads and checks a `trusted_root.json`.
    pub fn read(path: &Path) -> Result<Self> {
        let read = |source| Error::Read {
            path: path.to_owned(),
            source,
        };
        let file = std::fs::File::open(path).map_err(read)?;
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(
            &mut std::io::Read::take(file, MAX_ROOT_BYTES + 1),
            &mut bytes,
        )
        .map_err(read)?;
        if bytes.len() as u64 > MAX_ROOT_BYTES {
            return Err(Error::Root {
                path: path.to_owned(),
                reason: format!("it is larger than {MAX_ROOT_BYTES} bytes"),
            });
        }
        Self::from_json(path, &bytes)
    }

    /// Parses a `trusted_root.json`'s bytes; `path` names it in errors.
    pub fn from_json(path: &Path, bytes: &[u8]) -> Result<Self> {
        let root = |reason: String| Error::Root {
            path: path.to_owned(),
            reason,
        };
        let file: RootFile = serde_json::from_slice(bytes).map_err(|e| root(e.to_string()))?;
        if file.media_type != TRUSTED_ROOT_MEDIA_TYPE {
            return Err(root(format!("its mediaType is {:?}", file.media_type)));
        }
        let logs = |logs: Vec<LogFile>, what: &str| {
            logs.into_iter()
                .enumerate()
                .map(|(i, l)| {
                    let at = |e: String| root(format!("{what}[{i}]: {e}"));
                    let der = b64(&l.public_key.raw_bytes)
                        .map_err(|e| at(format!("publicKey.rawBytes is not base64: {e}")))?;
                    let key_id = b64(&l.log_id.key_id)
                        .map_err(|e| at(format!("logId.keyId is not base64: {e}")))?;
                    Ok(Log {
                        base_url: l.base_url,
                        key_id,
                        key: Key::from_spki(&der, &l.public_key.key_details),
                        valid: validity(&l.public_key.valid_for).map_err(at)?,
                    })
                })
                .collect::<Result<Vec<_>>>()
        };
        let tlogs = logs(file.tlogs, "tlogs")?;
        let ctlogs = logs(file.ctlogs, "ctlogs")?;
        let authorities = file
            .certificate_authorities
            .into_iter()
            .enumerate()
            .map(|(i, a)| {
                let at = |e: String| root(format!("certificateAuthorities[{i}]: {e}"));
                let chain = a
                    .cert_chain
                    .certificates
                    .iter()
                    .map(|c| {
                        let der = b64(&c.raw_bytes).map_err(|e| e.to_string())?;
                        Certificate::from_der(&der).map_err(|e| e.to_string())
                    })
                    .collect::<std::result::Result<Vec<_>, _>>()
                    .map_err(|e| at(format!("a certificate of certChain is unreadable: {e}")))?;
                if chain.is_empty() {
                    return Err(at("its certChain is empty".into()));
                }
                Ok(Authority {
                    uri: a.uri,
                    chain,
                    valid: validity(&a.valid_for).map_err(at)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        if tlogs.is_empty() {
            return Err(root("it lists no transparency log (tlogs)".into()));
        }
        if authorities.is_empty() {
            return Err(root(
                "it lists no certificate authority (certificateAuthorities)".into(),
            ));
        }
        Ok(Self {
            path: path.to_owned(),
            tlogs,
            ctlogs,
            authorities,
        })
    }

    /// The file it was read from.
    pub fn path(&self) -> &Path {
        &self.path
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

fn extension<'a>(cert: &'a Certificate, oid: &ObjectIdentifier) -> Option<&'a [u8]> {
    cert.tbs_certificate
        .extensions
        .as_ref()?
        .iter()
        .find(|e| e.extn_id == *oid)
        .map(|e| e.extn_value.as_bytes())
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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TlogEntry {
    // Protobuf's JSON leaves out zero values: the first entry has no index.
    #[serde(default)]
    log_index: Int,
    log_id: LogIdFile,
    kind_version: KindVersion,
    integrated_time: Int,
    #[serde(default)]
    inclusion_promise: Option<Promise>,
    #[serde(default)]
    inclusion_proof: Option<Proof>,
    canonicalized_body: String,
}

/// A protobuf int64 in JSON: a string, or a number.
#[derive(Deserialize, Clone, Copy, Default)]
#[serde(try_from = "serde_json::Value")]
struct Int(i64);

impl TryFrom<serde_json::Value> for Int {
    type Error = String;
    fn try_from(v: serde_json::Value) -> std::result::Result<Self, String> {
        match &v {
            serde_json::Value::String(s) => s
                .parse()
                .map(Int)
                .map_err(|_| format!("{s:?} is not an integer")),
            serde_json::Value::Number(n) => n
                .as_i64()
                .map(Int)
                .ok_or_else(|| format!("{n} is not an integer")),
            _ => Err(format!("{v} is not an integer")),
        }
    }
}

#[derive(Deserialize)]
struct KindVersion {
    kind: String,
    version: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Promise {
    signed_entry_timestamp: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Proof {
    #[serde(default)]
    log_index: Int,
    root_hash: String,
    tree_size: Int,
    #[serde(default)]
    hashes: Vec<String>,
    checkpoint: Checkpoint,
}

#[derive(Deserialize)]
struct Checkpoint {
    envelope: String,
}

/// Checks a keyless signature: `signature_b64` (base64 DER) over the DSSE
/// encoding `signed` of the statement `payload`, with the bundle's
/// `verificationMaterial`, against `root`. `Ok` with who signed.
pub fn verify(
    root: &TrustedRoot,
    payload: &[u8],
    signed: &[u8],
    signature_b64: &str,
    material: &serde_json::Value,
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
    let time = check_entry(root, entry)?;
    check_body(entry, payload, &signature, &leaf_der)?;
    check_chain(root, &leaf, time)?;
    check_scts(root, &leaf)?;
    let key = leaf_key(&leaf)?;
    if !key.verifies(signed, &signature) {
        return Err(Error::Signature);
    }
    Identity::of(&leaf, time, entry.log_index.0)
}

fn leaf_key(cert: &Certificate) -> Result<Key> {
    let spki = cert
        .tbs_certificate
        .subject_public_key_info
        .to_der()
        .map_err(|e| Error::Material(e.to_string()))?;
    match Key::from_spki(&spki, "") {
        Key::Unsupported(what) => Err(Error::Material(format!("its certificate holds {what}"))),
        key => Ok(key),
    }
}

/// The canonical JSON the signed entry timestamp signs (keys sorted, no
/// spaces).
fn set_payload(body_b64: &str, integrated_time: i64, log_id_hex: &str, log_index: i64) -> Vec<u8> {
    format!(
        r#"{{"body":{},"integratedTime":{integrated_time},"logID":"{log_id_hex}","logIndex":{log_index}}}"#,
        serde_json::Value::from(body_b64)
    )
    .into_bytes()
}

/// Checks the entry's log, signed entry timestamp and inclusion proof;
/// the integrated time, now trusted.
fn check_entry(root: &TrustedRoot, entry: &TlogEntry) -> Result<i64> {
    let log_id = b64(&entry.log_id.key_id)
        .map_err(|e| Error::Material(format!("its log id is not base64: {e}")))?;
    let time = entry.integrated_time.0;
    let unknown = |why: String| Error::UnknownLog {
        root: root.path.clone(),
        log_id: hex::encode(&log_id),
        why,
    };
    let log = root
        .tlogs
        .iter()
        .find(|l| l.key_id == log_id)
        .ok_or_else(|| unknown(String::new()))?;
    if let Key::Unsupported(what) = &log.key {
        return Err(unknown(format!("; the root gives it {what}")));
    }
    if !log.valid.contains(time) {
        return Err(unknown(format!(
            "; the root lists it, but not as valid at the entry's integrated time {}",
            show_time(time)
        )));
    }
    let body = b64(&entry.canonicalized_body)
        .map_err(|e| Error::Material(format!("its canonicalizedBody is not base64: {e}")))?;
    let promise = entry
        .inclusion_promise
        .as_ref()
        .ok_or(Error::NoSignedEntryTimestamp)?;
    let set = b64(&promise.signed_entry_timestamp).map_err(|_| Error::SignedEntryTimestamp {
        log: log.base_url.clone(),
    })?;
    let body_b64 = base64::engine::general_purpose::STANDARD.encode(&body);
    let signed = set_payload(&body_b64, time, &hex::encode(&log_id), entry.log_index.0);
    if !log.key.verifies(&signed, &set) {
        return Err(Error::SignedEntryTimestamp {
            log: log.base_url.clone(),
        });
    }
    if let Some(proof) = &entry.inclusion_proof {
        check_inclusion(log, proof, &body)?;
    }
    Ok(time)
}

fn hash_children(left: &[u8], right: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update([1]);
    h.update(left);
    h.update(right);
    h.finalize().into()
}

/// RFC 6962's root of a tree of `size` leaves from the leaf at `index`
/// and its audit path (RFC 9162, 2.1.3.2).
pub(crate) fn root_from_proof(
    index: u64,
    size: u64,
    leaf: [u8; 32],
    proof: &[[u8; 32]],
) -> std::result::Result<[u8; 32], String> {
    if index >= size {
        return Err(format!(
            "the leaf index {index} is not below the tree size {size}"
        ));
    }
    let inner = (u64::BITS - (index ^ (size - 1)).leading_zeros()) as usize;
    let border = (index >> inner).count_ones() as usize;
    if proof.len() != inner + border {
        return Err(format!(
            "{} hashes where a tree of {size} needs {} for the leaf {index}",
            proof.len(),
            inner + border
        ));
    }
    let mut node = leaf;
    for (i, h) in proof[..inner].iter().enumerate() {
        node = match (index >> i) & 1 {
            0 => hash_children(&node, h),
            _ => hash_children(h, &node),
        };
    }
    for h in &proof[inner..] {
        node = hash_children(h, &node);
    }
    Ok(node)
}

fn check_inclusion(log: &Log, proof: &Proof, body: &[u8]) -> Result<()> {
    let bad = |why: String| Error::InclusionProof(why);
    let hash32 = |s: &str| -> std::result::Result<[u8; 32], String> {
        b64(s)
            .ok()
            .and_then(|b| <[u8; 32]>::try_from(b).ok())
            .ok_or_else(|| format!("{s:?} is not a base64 SHA-256 hash"))
    };
    let root_hash = hash32(&proof.root_hash).map_err(bad)?;
    let hashes = proof
        .hashes
        .iter()
        .map(|h| hash32(h))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(bad)?;
    let (Ok(index), Ok(size)) = (
        u64::try_from(proof.log_index.0),
        u64::try_from(proof.tree_size.0),
    ) else {
        return Err(bad("a negative index or tree size".into()));
    };
    let mut leaf = Sha256::new();
    leaf.update([0]);
    leaf.update(body);
    let computed = root_from_proof(index, size, leaf.finalize().into(), &hashes).map_err(bad)?;
    if computed != root_hash {
        return Err(bad(format!(
            "the entry and its {} hashes lead to the root {}, not {}",
            hashes.len(),
            hex::encode(computed),
            hex::encode(root_hash)
        )));
    }
    check_checkpoint(log, &proof.checkpoint.envelope, size, &root_hash)
}

/// A checkpoint is a signed note: `origin\nsize\nbase64(root)\n[...]\n\n`
/// then lines `— name base64(key hint ‖ signature)`; the signature is over
/// the text up to and including the blank line's first newline.
fn check_checkpoint(log: &Log, envelope: &str, size: u64, root_hash: &[u8; 32]) -> Result<()> {
    let bad = |why: String| Error::Checkpoint(why);
    let split = envelope
        .find("\n\n")
        .ok_or_else(|| bad("no blank line between its text and its signatures".into()))?;
    let text = &envelope[..split + 1];
    let mut lines = text.lines();
    let (_origin, note_size, note_root) = (lines.next(), lines.next(), lines.next());
    if note_size.and_then(|s| s.parse::<u64>().ok()) != Some(size) {
        return Err(bad(format!(
            "it is for a tree of size {}, the proof for {size}",
            note_size.unwrap_or("")
        )));
    }
    if note_root.and_then(|r| b64(r).ok()).as_deref() != Some(root_hash.as_slice()) {
        return Err(bad("its root hash is not the proof's".into()));
    }
    let signed = envelope[split + 2..]
        .lines()
        .filter_map(|l| l.strip_prefix("\u{2014} "))
        .filter_map(|l| l.rsplit_once(' '))
        .filter_map(|(_, sig)| b64(sig).ok())
        .any(|sig| sig.len() > 4 && log.key.verifies(text.as_bytes(), &sig[4..]));
    if !signed {
        return Err(bad(format!(
            "no signature on it verifies with the key of the log {}",
            log.base_url
        )));
    }
    Ok(())
}

#[derive(Deserialize)]
struct Body {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    spec: DsseSpec,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DsseSpec {
    payload_hash: Hash,
    signatures: Vec<DsseSignature>,
}

#[derive(Deserialize)]
struct Hash {
    algorithm: String,
    value: String,
}

#[derive(Deserialize)]
struct DsseSignature {
    signature: String,
    verifier: String,
}

/// The log entry is a `dsse` 0.0.1 record of this statement, signature and
/// certificate.
fn check_body(entry: &TlogEntry, payload: &[u8], signature: &[u8], leaf_der: &[u8]) -> Result<()> {
    let bad = |why: String| Error::BodyMismatch(why);
    let (kind, version) = (&entry.kind_version.kind, &entry.kind_version.version);
    if (kind.as_str(), version.as_str()) != ("dsse", "0.0.1") {
        return Err(bad(format!(
            "it is a {kind} {version} entry; a dsse 0.0.1 entry (what cosign writes for a bundle on Rekor v1) is read"
        )));
    }
    let body = b64(&entry.canonicalized_body).map_err(|e| bad(e.to_string()))?;
    let body: Body =
        serde_json::from_slice(&body).map_err(|e| bad(format!("its body is unreadable: {e}")))?;
    if (body.kind.as_str(), body.api_version.as_str()) != ("dsse", "0.0.1") {
        return Err(bad(format!(
            "its body is a {} {} entry",
            body.kind, body.api_version
        )));
    }
    let hash = &body.spec.payload_hash;
    if hash.algorithm != "sha256"
        || !hash
            .value
            .eq_ignore_ascii_case(&hex::encode(Sha256::digest(payload)))
    {
        return Err(bad(format!(
            "it records a payload of {}:{}, not this statement",
            hash.algorithm, hash.value
        )));
    }
    let ours = body.spec.signatures.iter().any(|s| {
        b64(&s.signature).is_ok_and(|sig| sig == signature)
            && b64(&s.verifier)
                .ok()
                .and_then(|pem| pem_certificate(&pem))
                .is_some_and(|der| der == leaf_der)
    });
    if !ours {
        return Err(bad(
            "none of its signatures is this one with this certificate".into(),
        ));
    }
    Ok(())
}

/// The DER of the first `CERTIFICATE` in PEM text.
fn pem_certificate(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = start + text[start..].find("-----END CERTIFICATE-----")?;
    let body: String = text[start..end].split_whitespace().collect();
    b64(&body).ok()
}

fn unix(t: x509_cert::time::Time) -> i64 {
    t.to_unix_duration().as_secs() as i64
}

fn check_valid(cert: &Certificate, which: &str, time: i64) -> Result<()> {
    let v = &cert.tbs_certificate.validity;
    let (from, to) = (unix(v.not_before), unix(v.not_after));
    if from <= time && time <= to {
        return Ok(());
    }
    Err(Error::Expired {
        which: which.to_owned(),
        time: show_time(time),
        not_before: show_time(from),
        not_after: show_time(to),
    })
}

/// Whether `issuer`'s key signed `cert`.
fn signed_by(cert: &Certificate, issuer: &Certificate) -> std::result::Result<(), String> {
    if cert.tbs_certificate.issuer != issuer.tbs_certificate.subject {
        return Err(format!(
            "issued by {}, not by {}",
            cert.tbs_certificate.issuer, issuer.tbs_certificate.subject
        ));
    }
    let key = leaf_key(issuer).map_err(|e| e.to_string())?;
    let tbs = cert.tbs_certificate.to_der().map_err(|e| e.to_string())?;
    let oid = cert.signature_algorithm.oid;
    let prehash = if oid == OID_ECDSA_SHA256 {
        Sha256::digest(&tbs).to_vec()
    } else if oid == OID_ECDSA_SHA384 {
        Sha384::digest(&tbs).to_vec()
    } else {
        return Err(format!(
            "its signature algorithm {oid} is not ECDSA with SHA-256 or SHA-384"
        ));
    };
    let signature = cert
        .signature
        .as_bytes()
        .ok_or_else(|| "its signature is not whole bytes".to_owned())?;
    match key.verifies_prehash(&prehash, signature) {
        true => Ok(()),
        false => Err(format!(
            "its signature does not verify with the key of {}",
            issuer.tbs_certificate.subject
        )),
    }
}

/// The leaf chains to an authority of `root` valid at `time`, every
/// certificate valid then; the leaf is for code signing.
pub(crate) fn check_chain(root: &TrustedRoot, leaf: &Certificate, time: i64) -> Result<()> {
    let eku = extension(leaf, &OID_EKU)
        .and_then(|b| x509_cert::ext::pkix::ExtendedKeyUsage::from_der(b).ok())
        .ok_or(Error::NotCodeSigning)?;
    if !eku.0.contains(&OID_CODE_SIGNING) {
        return Err(Error::NotCodeSigning);
    }
    let mut reasons = Vec::new();
    for authority in &root.authorities {
        let attempt = (|| {
            signed_by(leaf, &authority.chain[0])?;
            for pair in authority.chain.windows(2) {
                signed_by(&pair[0], &pair[1])?;
            }
            Ok::<(), String>(())
        })();
        match attempt {
            Ok(()) => {
                if !authority.valid.contains(time) {
                    return Err(Error::Chain {
                        root: root.path.clone(),
                        issuer: leaf.tbs_certificate.issuer.to_string(),
                        reason: format!(
                            "the authority {} is not valid at the entry's integrated time {}",
                            authority.uri,
                            show_time(time)
                        ),
                    });
                }
                check_valid(leaf, "(the signer's)", time)?;
                for c in &authority.chain {
                    check_valid(
                        c,
                        &format!("of the authority, {}", c.tbs_certificate.subject),
                        time,
                    )?;
                }
                return Ok(());
            }
            Err(why) => reasons.push(format!("{}: {why}", authority.uri)),
        }
    }
    Err(Error::Chain {
        root: root.path.clone(),
        issuer: leaf.tbs_certificate.issuer.to_string(),
        reason: reasons.join("; "),
    })
}

/// With `ctlogs` in the root: at least one embedded SCT verifies.
fn check_scts(root: &TrustedRoot, leaf: &Certificate) -> Result<()> {
    if root.ctlogs.is_empty() {
        return Ok(());
    }
    let bad = |why: String| Error::Sct(why);
    let list = extension(leaf, &OID_SCT_LIST)
        .ok_or_else(|| bad("it has none, and the trusted root lists CT logs".into()))?;
    let list = x509_cert::ext::pkix::sct::SignedCertificateTimestampList::from_der(list)
        .map_err(|e| bad(format!("its SCT list is unreadable: {e}")))?;
    let scts = list
        .parse_timestamps()
        .map_err(|e| bad(format!("its SCT list is unreadable: {e:?}")))?;
    // The precertificate's TBS: the leaf's, without the SCT list.
    let mut tbs = leaf.tbs_certificate.clone();
    if let Some(exts) = tbs.extensions.as_mut() {
        exts.retain(|e| e.extn_id != OID_SCT_LIST);
    }
    let tbs = tbs.to_der().map_err(|e| bad(e.to_string()))?;
    let mut reasons = Vec::new();
    for sct in scts {
        let sct = match sct.parse_timestamp() {
            Ok(s) => s,
            Err(e) => {
                reasons.push(format!("an unreadable SCT ({e:?})"));
                continue;
            }
        };
        let Some(log) = root.ctlogs.iter().find(|l| l.key_id == sct.log_id.key_id) else {
            reasons.push(format!(
                "an SCT of the unknown CT log {}",
                hex::encode(sct.log_id.key_id)
            ));
            continue;
        };
        // The issuer's key hash: the authority that issued the leaf.
        let issuer_key_hash = root.authorities.iter().find_map(|a| {
            let issuer = &a.chain[0];
            (signed_by(leaf, issuer).is_ok())
                .then(|| issuer.tbs_certificate.subject_public_key_info.to_der().ok())
                .flatten()
                .map(Sha256::digest)
        });
        let Some(issuer_key_hash) = issuer_key_hash else {
            reasons.push("its issuer is not in the trusted root".into());
            continue;
        };
        let mut signed = vec![0u8, 0u8]; // v1, certificate_timestamp
        signed.extend_from_slice(&sct.timestamp.to_be_bytes());
        signed.extend_from_slice(&[0, 1]); // precert_entry
        signed.extend_from_slice(&issuer_key_hash);
        let len = tbs.len() as u32;
        signed.extend_from_slice(&len.to_be_bytes()[1..]);
        signed.extend_from_slice(&tbs);
        let ext = sct.extensions.as_slice();
        signed.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        signed.extend_from_slice(ext);
        if log.valid.contains((sct.timestamp / 1000) as i64)
            && log
                .key
                .verifies(&signed, sct.signature.signature.as_slice())
        {
            return Ok(());
        }
        reasons.push(format!("the SCT of {} does not verify", log.base_url));
    }
    Err(bad(reasons.join("; ")))
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::bundle;
    use crate::signature::signed_bytes;

    /// Made by the real services (fixtures/keyless/make.sh): a private
    /// Fulcio and Rekor v1, and cosign v3 signing keyless.
    const ROOT: &[u8] = include_bytes!("../tests/fixtures/keyless/trusted_root.json");
    const OTHER_ROOT: &[u8] = include_bytes!("../tests/fixtures/keyless/other_trusted_root.json");
    pub(crate) const EMAIL: &[u8] = include_bytes!("../tests/fixtures/keyless/email.bundle.json");
    pub(crate) const GITHUB: &[u8] = include_bytes!("../tests/fixtures/keyless/github.bundle.json");
    pub(crate) const DIGEST: &str = include_str!("../tests/fixtures/keyless/digest");
    pub(crate) const ISSUERS: &str = include_str!("../tests/fixtures/keyless/issuers");

    pub(crate) fn root() -> TrustedRoot {
        TrustedRoot::from_json(Path::new("/etc/trusted_root.json"), ROOT).unwrap()
    }

    pub(crate) fn issuer(kind: &str) -> String {
        ISSUERS
            .lines()
            .find(|l| l.ends_with(kind))
            .unwrap()
            .to_owned()
    }

    /// Verifies `bundle` (as JSON) with `root`.
    fn check(root: &TrustedRoot, bundle: &serde_json::Value) -> Result<Identity> {
        let parsed = bundle::parse(&serde_json::to_vec(bundle).unwrap()).unwrap();
        let s = &parsed.signatures[0];
        verify(
            root,
            &s.payload,
            &signed_bytes(s),
            &s.signature,
            s.material.as_ref().unwrap(),
        )
    }

    fn json(bytes: &[u8]) -> serde_json::Value {
        serde_json::from_slice(bytes).unwrap()
    }

    fn entry(b: &mut serde_json::Value) -> &mut serde_json::Value {
        &mut b["verificationMaterial"]["tlogEntries"][0]
    }

    #[test]
    fn bundles_made_by_a_real_fulcio_and_rekor_verify_and_name_who_signed() {
        let root = root();
        let email = check(&root, &json(EMAIL)).unwrap();
        assert_eq!(email.subject, "alice@example.com");
        assert_eq!(email.issuer.as_deref(), Some(issuer("/email").as_str()));
        assert_eq!(email.github_repository, None);
        assert_eq!(email.log_index, 0);
        let github = check(&root, &json(GITHUB)).unwrap();
        assert_eq!(
            github.subject,
            "https://github.com/vendor/gpu-setter/.github/workflows/release.yml@refs/tags/v1.0.0"
        );
        assert_eq!(github.issuer.as_deref(), Some(issuer("/github").as_str()));
        assert_eq!(
            github.github_repository.as_deref(),
            Some("vendor/gpu-setter")
        );
        // The second entry of the log: its proof has a hash.
        assert_eq!(github.log_index, 1);
        assert!(
            github
                .to_string()
                .contains("GitHub repository vendor/gpu-setter"),
            "{github}"
        );
        // The statement names the fixture's digest.
        let parsed = bundle::parse(EMAIL).unwrap();
        bundle::check_statement(
            &parsed.signatures[0].payload,
            &DIGEST.trim().parse().unwrap(),
        )
        .unwrap();
    }

    #[test]
    fn another_trusted_root_refuses_the_log_and_the_chain() {
        let other = TrustedRoot::from_json(Path::new("/etc/other.json"), OTHER_ROOT).unwrap();
        let err = check(&other, &json(EMAIL)).unwrap_err();
        assert!(matches!(err, Error::UnknownLog { .. }), "{err}");
        assert!(err.to_string().contains("/etc/other.json"), "{err}");
        // The right log with another CA: the chain is refused.
        let mut mixed: serde_json::Value = json(OTHER_ROOT);
        mixed["tlogs"] = json(ROOT)["tlogs"].clone();
        let mixed = TrustedRoot::from_json(
            Path::new("/etc/mixed.json"),
            &serde_json::to_vec(&mixed).unwrap(),
        )
        .unwrap();
        let err = check(&mixed, &json(EMAIL)).unwrap_err();
        assert!(matches!(err, Error::Chain { .. }), "{err}");
        assert!(
            err.to_string().contains("does not verify with the key"),
            "{err}"
        );
    }

    #[test]
    fn a_tampered_inclusion_proof_checkpoint_or_entry_timestamp_is_refused() {
        let root = root();
        let b64 = base64::engine::general_purpose::STANDARD;
        // A hash of the audit path changed.
        let mut b = json(GITHUB);
        entry(&mut b)["inclusionProof"]["hashes"][0] = b64.encode([7u8; 32]).into();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::InclusionProof(_)), "{err}");
        // A hash too many.
        let mut b = json(GITHUB);
        entry(&mut b)["inclusionProof"]["hashes"]
            .as_array_mut()
            .unwrap()
            .push(b64.encode([7u8; 32]).into());
        assert!(matches!(check(&root, &b), Err(Error::InclusionProof(_))));
        // A root hash and checkpoint of another tree: the checkpoint's
        // signature no longer covers it.
        let mut b = json(GITHUB);
        let e = entry(&mut b);
        let envelope = e["inclusionProof"]["checkpoint"]["envelope"]
            .as_str()
            .unwrap()
            .to_owned();
        let old_root = e["inclusionProof"]["rootHash"].as_str().unwrap().to_owned();
        let forged = b64.encode([9u8; 32]);
        e["inclusionProof"]["checkpoint"]["envelope"] = envelope.replace(&old_root, &forged).into();
        e["inclusionProof"]["rootHash"] = forged.into();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::InclusionProof(_)), "{err}");
        // The checkpoint alone changed: its signature fails.
        let mut b = json(GITHUB);
        let e = entry(&mut b);
        e["inclusionProof"]["checkpoint"]["envelope"] = envelope.replace(" - ", " + ").into();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::Checkpoint(_)), "{err}");
        // The integrated time moved: the signed entry timestamp fails.
        let mut b = json(EMAIL);
        let t: i64 = entry(&mut b)["integratedTime"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        entry(&mut b)["integratedTime"] = (t - 3600).to_string().into();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::SignedEntryTimestamp { .. }), "{err}");
        // No signed entry timestamp: the time is not trusted.
        let mut b = json(EMAIL);
        entry(&mut b)
            .as_object_mut()
            .unwrap()
            .remove("inclusionPromise");
        assert!(matches!(
            check(&root, &b),
            Err(Error::NoSignedEntryTimestamp)
        ));
        // No entry at all.
        let mut b = json(EMAIL);
        b["verificationMaterial"]["tlogEntries"] = serde_json::json!([]);
        assert!(matches!(check(&root, &b), Err(Error::NoTlogEntry)));
    }

    #[test]
    fn the_log_entry_must_be_this_signature_and_this_certificate() {
        let root = root();
        // The other bundle's entry under this signature: its body records
        // another payload (and its SET is valid: it is a real entry).
        let mut b = json(EMAIL);
        let other = json(GITHUB)["verificationMaterial"]["tlogEntries"][0].clone();
        *entry(&mut b) = other;
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::BodyMismatch(_)), "{err}");
        // The other bundle's certificate with this entry.
        let mut b = json(EMAIL);
        b["verificationMaterial"]["certificate"] =
            json(GITHUB)["verificationMaterial"]["certificate"].clone();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::BodyMismatch(_)), "{err}");
        // Another statement under the same signature and entry.
        let mut b = json(EMAIL);
        let b64 = base64::engine::general_purpose::STANDARD;
        let mut statement = b64
            .decode(b["dsseEnvelope"]["payload"].as_str().unwrap())
            .unwrap();
        statement.push(b' ');
        b["dsseEnvelope"]["payload"] = b64.encode(&statement).into();
        let err = check(&root, &b).unwrap_err();
        assert!(matches!(err, Error::BodyMismatch(_)), "{err}");
    }

    #[test]
    fn a_certificate_expired_at_the_integrated_time_is_refused() {
        let root = root();
        let material = &json(EMAIL)["verificationMaterial"];
        let der = b64(material["certificate"]["rawBytes"].as_str().unwrap()).unwrap();
        let leaf = Certificate::from_der(&der).unwrap();
        let time = material["tlogEntries"][0]["integratedTime"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        check_chain(&root, &leaf, time).unwrap();
        // Fulcio's certificates live ten minutes: an entry recorded later
        // (or earlier) is refused.
        let not_after = unix(leaf.tbs_certificate.validity.not_after);
        for t in [
            not_after + 1,
            unix(leaf.tbs_certificate.validity.not_before) - 1,
        ] {
            let err = check_chain(&root, &leaf, t).unwrap_err();
            assert!(matches!(err, Error::Expired { .. }), "{err}");
            assert!(err.to_string().contains("(the signer's)"), "{err}");
        }
        // An authority no longer valid then.
        let mut ended = json(ROOT);
        ended["certificateAuthorities"][0]["validFor"]["end"] = "2021-01-01T00:00:00Z".into();
        let ended =
            TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ended).unwrap())
                .unwrap();
        let err = check_chain(&ended, &leaf, time).unwrap_err();
        assert!(
            err.to_string()
                .contains("not valid at the entry's integrated time"),
            "{err}"
        );
        // A log no longer valid then.
        let mut ended = json(ROOT);
        ended["tlogs"][0]["publicKey"]["validFor"]["end"] = "2021-01-01T00:00:00Z".into();
        let ended =
            TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ended).unwrap())
                .unwrap();
        let err = check(&ended, &json(EMAIL)).unwrap_err();
        assert!(
            err.to_string()
                .contains("not as valid at the entry's integrated time"),
            "{err}"
        );
    }

    #[test]
    fn the_signature_must_verify_with_the_certificate() {
        let root = root();
        let parsed = bundle::parse(EMAIL).unwrap();
        let s = &parsed.signatures[0];
        let material = s.material.as_ref().unwrap();
        // The right entry, but a PAE of something else: the key refuses.
        let err = verify(&root, &s.payload, b"other", &s.signature, material).unwrap_err();
        assert!(matches!(err, Error::Signature), "{err}");
    }

    #[test]
    fn with_ct_logs_in_the_root_a_certificate_needs_a_valid_sct() {
        // The test Fulcio runs without a CT log: its certificates carry no
        // SCT, so a root that lists CT logs refuses them, as cosign does.
        let mut with_ct = json(ROOT);
        with_ct["ctlogs"] = with_ct["tlogs"].clone();
        let with_ct =
            TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&with_ct).unwrap())
                .unwrap();
        let err = check(&with_ct, &json(EMAIL)).unwrap_err();
        assert!(matches!(err, Error::Sct(_)), "{err}");
        assert!(err.to_string().contains("it has none"), "{err}");
    }

    #[test]
    fn p384_keys_verify_with_sha384() {
        use p384::ecdsa::signature::Signer as _;
        use p384::pkcs8::EncodePublicKey as _;
        let signing = p384::ecdsa::SigningKey::from_slice(&[5u8; 48]).unwrap();
        let spki = signing.verifying_key().to_public_key_der().unwrap();
        let key = Key::from_spki(spki.as_bytes(), "");
        assert!(matches!(key, Key::P384(_)), "{key:?}");
        let signature: p384::ecdsa::Signature = signing.sign(b"a checkpoint");
        let der = signature.to_der();
        assert!(key.verifies(b"a checkpoint", der.as_bytes()));
        assert!(!key.verifies(b"another checkpoint", der.as_bytes()));
        // As a certificate signed ecdsa-with-SHA384 is checked.
        assert!(key.verifies_prehash(&Sha384::digest(b"a checkpoint"), der.as_bytes()));
        assert!(!key.verifies_prehash(&Sha256::digest(b"a checkpoint"), der.as_bytes()));
    }

    #[test]
    fn a_certificate_not_for_code_signing_is_refused() {
        let material = &json(EMAIL)["verificationMaterial"];
        let der = b64(material["certificate"]["rawBytes"].as_str().unwrap()).unwrap();
        let mut leaf = Certificate::from_der(&der).unwrap();
        let time = material["tlogEntries"][0]["integratedTime"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        // Its extended key usage made serverAuth (1.3.6.1.5.5.7.3.1).
        let server_auth =
            x509_cert::ext::pkix::ExtendedKeyUsage(vec![ObjectIdentifier::new_unwrap(
                "1.3.6.1.5.5.7.3.1",
            )]);
        for e in leaf.tbs_certificate.extensions.as_mut().unwrap() {
            if e.extn_id == OID_EKU {
                e.extn_value =
                    x509_cert::der::asn1::OctetString::new(server_auth.to_der().unwrap()).unwrap();
            }
        }
        let err = check_chain(&root(), &leaf, time).unwrap_err();
        assert!(matches!(err, Error::NotCodeSigning), "{err}");
    }

    #[test]
    fn the_merkle_audit_path_follows_rfc_6962() {
        // A tree of 5 leaves, built by hand.
        let leaf = |i: u8| -> [u8; 32] {
            let mut h = Sha256::new();
            h.update([0, i]);
            h.finalize().into()
        };
        let l: Vec<[u8; 32]> = (0..5).map(leaf).collect();
        let h01 = hash_children(&l[0], &l[1]);
        let h23 = hash_children(&l[2], &l[3]);
        let h0123 = hash_children(&h01, &h23);
        let root = hash_children(&h0123, &l[4]);
        assert_eq!(root_from_proof(4, 5, l[4], &[h0123]).unwrap(), root);
        assert_eq!(
            root_from_proof(2, 5, l[2], &[l[3], h01, l[4]]).unwrap(),
            root
        );
        assert_eq!(
            root_from_proof(1, 5, l[1], &[l[0], h23, l[4]]).unwrap(),
            root
        );
        assert_ne!(
            root_from_proof(1, 5, l[1], &[h23, l[0], l[4]]).unwrap(),
            root
        );
        assert!(root_from_proof(5, 5, l[4], &[]).is_err());
        assert!(root_from_proof(0, 5, l[0], &[l[1]]).is_err());
        assert_eq!(root_from_proof(0, 1, l[0], &[]).unwrap(), l[0]);
    }

    #[test]
    fn a_bad_trusted_root_is_refused_with_what_is_wrong() {
        let good = json(ROOT);
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut r = good.clone();
            f(&mut r);
            serde_json::to_vec(&r).unwrap()
        };
        for (bytes, wanted) in [
            (b"{".to_vec(), "EOF"),
            (
                with(&|r| r["mediaType"] = "application/json".into()),
                "mediaType is \"application/json\"",
            ),
            (
                with(&|r| r["tlogs"] = serde_json::json!([])),
                "no transparency log",
            ),
            (
                with(&|r| r["certificateAuthorities"] = serde_json::json!([])),
                "no certificate authority",
            ),
            (
                with(&|r| r["tlogs"][0]["publicKey"]["rawBytes"] = "%%".into()),
                "tlogs[0]: publicKey.rawBytes is not base64",
            ),
            (
                with(&|r| r["tlogs"][0]["publicKey"]["validFor"]["start"] = "yesterday".into()),
                "\"yesterday\" is not an RFC 3339 time",
            ),
            (
                with(&|r| {
                    r["certificateAuthorities"][0]["certChain"]["certificates"][0]["rawBytes"] =
                        "AAAA".into()
                }),
                "certificateAuthorities[0]: a certificate of certChain is unreadable",
            ),
        ] {
            let err = TrustedRoot::from_json(Path::new("/etc/r.json"), &bytes).unwrap_err();
            assert!(
                err.to_string().contains(wanted) && err.to_string().contains("/etc/r.json"),
                "{err} (wanted {wanted})"
            );
        }
        let err = TrustedRoot::read(Path::new("/nonexistent/trusted_root.json")).unwrap_err();
        assert!(matches!(err, Error::Read { .. }), "{err}");
        // A log whose key is Ed25519 loads (Sigstore's public root has
        // them), and an entry of it is refused by name.
        let mut ed = good.clone();
        ed["tlogs"][0]["publicKey"]["rawBytes"] =
            "MCowBQYDK2VwAyEAt8rlp1knGwjfbcXAYPYAkn0XiLz1x8O4t0YkEhie244=".into();
        ed["tlogs"][0]["publicKey"]["keyDetails"] = "PKIX_ED25519".into();
        let ed = TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ed).unwrap())
            .unwrap();
        let err = check(&ed, &json(EMAIL)).unwrap_err();
        assert!(err.to_string().contains("PKIX_ED25519"), "{err}");
    }
}
