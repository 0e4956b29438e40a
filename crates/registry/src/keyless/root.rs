//! The Sigstore trusted root (`trusted_root.json`) and its file format.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sha2::{Digest as _, Sha256};
use x509_cert::Certificate;
use x509_cert::der::Decode as _;

use super::text::b64;
use super::{Error, Key, Result};

/// The media type of a trusted root this module reads.
pub const TRUSTED_ROOT_MEDIA_TYPE: &str =
    "application/vnd.dev.sigstore.trustedroot+json;version=0.1";
/// Largest trusted root file read (Sigstore's public one is about 7 KiB).
const MAX_ROOT_BYTES: u64 = 1 << 20;

/// A validity period, in Unix seconds.
#[derive(Clone, Debug, Default)]
pub(super) struct Validity {
    start: Option<i64>,
    end: Option<i64>,
}

impl Validity {
    pub(super) fn contains(&self, t: i64) -> bool {
        self.start.is_none_or(|s| s <= t) && self.end.is_none_or(|e| t <= e)
    }
}

#[derive(Clone, Debug)]
pub(super) struct Log {
    pub(super) base_url: String,
    pub(super) key_id: Vec<u8>,
    pub(super) key: Key,
    /// The key hint of its checkpoints' signature lines: for an ECDSA key,
    /// the first 4 bytes of the SHA-256 of its DER public key, as Rekor v1
    /// and the tile-based Rekor (v2) write it.
    pub(super) key_hint: [u8; 4],
    pub(super) valid: Validity,
}

#[derive(Clone, Debug)]
pub(super) struct Authority {
    pub(super) uri: String,
    /// Intermediates first, the root last.
    pub(super) chain: Vec<Certificate>,
    pub(super) valid: Validity,
}

/// A Sigstore trusted root (`trusted_root.json`): the transparency logs,
/// certificate authorities and CT logs whose keys a keyless signature is
/// checked with.
#[derive(Clone, Debug)]
pub struct TrustedRoot {
    pub(super) path: PathBuf,
    pub(super) tlogs: Vec<Log>,
    pub(super) ctlogs: Vec<Log>,
    pub(super) authorities: Vec<Authority>,
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
pub(super) struct LogIdFile {
    pub(super) key_id: String,
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
pub(super) struct ChainFile {
    pub(super) certificates: Vec<RawBytes>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct RawBytes {
    pub(super) raw_bytes: String,
}

/// Unix seconds of an RFC 3339 time.
fn rfc3339(text: &str) -> std::result::Result<i64, String> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_second())
        .map_err(|e| format!("{text:?} is not an RFC 3339 time: {e}"))
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
                    let digest = Sha256::digest(&der);
                    Ok(Log {
                        base_url: l.base_url,
                        key_id,
                        key: Key::from_spki(&der, &l.public_key.key_details),
                        key_hint: [digest[0], digest[1], digest[2], digest[3]],
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
