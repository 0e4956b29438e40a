//! The Rekor transparency log entry: its log, signed entry timestamp,
//! inclusion proof and checkpoint, and its body.
//!
//! # What an entry must carry
//!
//! The log gives two kinds of evidence that it holds an entry: the *signed
//! entry timestamp* (`inclusionPromise`, Rekor v1's signature over the
//! entry, its integrated time, index and log id) and the *inclusion proof*
//! (an audit path to a tree root, and the *checkpoint*: that root signed by
//! the log). Which the log gives, and so which an entry must carry, follows
//! from the format the signature came in, as sigstore-go reads it:
//!
//! - a Sigstore bundle ([`SignatureFormat::Dsse`]; [`crate::bundle`] reads
//!   `v0.3` only): the bundle format requires the inclusion proof from
//!   `v0.2` on, and Rekor returns one with every entry, so an entry without
//!   it is refused ([`Error::NoInclusionProof`]);
//! - cosign's `.sig` layout ([`SignatureFormat::SimpleSigning`]): its
//!   `dev.sigstore.cosign/bundle` annotation holds the signed entry
//!   timestamp and no proof, so the promise alone is read;
//! - an entry with neither is refused in any format ([`Error::NoEvidence`]).
//!
//! The signed entry timestamp is required in both formats besides: it is
//! what makes the integrated time a trusted time (RFC 3161 timestamps are
//! not read).
//!
//! # The checkpoint
//!
//! A checkpoint is a signed note (C2SP `signed-note` and `tlog-checkpoint`):
//! the text `origin\nsize\nbase64(root)\n[extension lines]\n`, a blank
//! line, then lines `— name base64(key hint ‖ signature)`. It must be for the
//! proof's tree size and root hash, and signed by the log:
//!
//! - its **origin**: Rekor v1 writes `<hostname> - <tree id>` and signs
//!   under the name `<hostname>` (its `rekor_server.hostname`, which the
//!   trusted root does not hold: `rekor.sigstore.dev` for the public log,
//!   the machine's host name for a private one), so the origin's name must
//!   be the name the log's signature line carries; any other origin is a
//!   C2SP one (the tile-based Rekor, v2) and must be the host of the log's
//!   `baseUrl` (`https://log2025-1.rekor.sigstore.dev` →
//!   `log2025-1.rekor.sigstore.dev`), the name its signature carries;
//! - its **key hint**: the first 4 bytes of a signature line must be the
//!   log's, which for an ECDSA key both Rekors write as the first 4 bytes
//!   of the SHA-256 of the DER public key (C2SP's `SHA-256(name ‖ 0x0A ‖
//!   type ‖ key)` is for Ed25519 keys, which are not read: an entry of such
//!   a log is refused before);
//! - its **signature**: a line with that name and key hint verifies with
//!   the log's key over the text. Lines of other signers (witnesses) are
//!   skipped, as the note format allows.

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::root::{Log, LogIdFile, TrustedRoot};
use super::text::{b64, show_time};
use super::{Error as KeylessError, Key, Result};
use crate::stored::SignatureFormat;

/// Why a log entry's evidence of inclusion (its signed entry timestamp,
/// inclusion proof or checkpoint) was refused.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The entry has neither an inclusion proof nor a signed entry
    /// timestamp.
    #[error(
        "its transparency log entry has neither an inclusion proof nor a signed entry timestamp (inclusionPromise): nothing shows that the log holds it"
    )]
    NoEvidence,
    /// A bundle's entry has no inclusion proof.
    #[error(
        "its transparency log entry has no inclusion proof, which a Sigstore bundle (v0.2 and later) must carry"
    )]
    NoInclusionProof,
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
    /// The inclusion proof is for another entry of the log.
    #[error("its inclusion proof is for the log index {proof}, the entry's index is {entry}")]
    ProofIndex {
        /// The proof's log index.
        proof: i64,
        /// The entry's log index.
        entry: i64,
    },
    /// The inclusion proof does not hash to its root.
    #[error("its inclusion proof does not verify: {0}")]
    InclusionProof(String),
    /// The checkpoint is not a signed note.
    #[error("its checkpoint is not a signed note: {0}")]
    CheckpointMalformed(String),
    /// The checkpoint is for another tree than the proof.
    #[error("its checkpoint does not verify: {0}")]
    CheckpointTree(String),
    /// The checkpoint's origin is not the log's.
    #[error("its checkpoint's origin {origin:?} is not the log {log}'s: {want}")]
    CheckpointOrigin {
        /// The checkpoint's first line.
        origin: String,
        /// The log's base URL.
        log: String,
        /// What the origin should be.
        want: String,
    },
    /// No signature line of the checkpoint carries the log's key hint.
    #[error(
        "its checkpoint has no signature with the key hint {hint} of the log {log}; its signatures: {found}"
    )]
    CheckpointKeyHint {
        /// The log's base URL.
        log: String,
        /// The log's key hint, hex.
        hint: String,
        /// The signature lines' names and key hints.
        found: String,
    },
    /// The log's signature on the checkpoint does not verify.
    #[error("its checkpoint's signature by the log {log} does not verify with the log's key")]
    CheckpointSignature {
        /// The log's base URL.
        log: String,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct TlogEntry {
    // Protobuf's JSON leaves out zero values: the first entry has no index.
    #[serde(default)]
    pub(super) log_index: Int,
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
pub(super) struct Int(pub(super) i64);

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

/// The canonical JSON the signed entry timestamp signs (keys sorted, no
/// spaces).
fn set_payload(body_b64: &str, integrated_time: i64, log_id_hex: &str, log_index: i64) -> Vec<u8> {
    format!(
        r#"{{"body":{},"integratedTime":{integrated_time},"logID":"{log_id_hex}","logIndex":{log_index}}}"#,
        serde_json::Value::from(body_b64)
    )
    .into_bytes()
}

/// Checks the entry's log, and the evidence of inclusion that `format`
/// requires (the module's docs say which); the integrated time, now
/// trusted.
pub(super) fn check_entry(
    root: &TrustedRoot,
    entry: &TlogEntry,
    format: SignatureFormat,
) -> Result<i64> {
    let log_id = b64(&entry.log_id.key_id)
        .map_err(|e| KeylessError::Material(format!("its log id is not base64: {e}")))?;
    let time = entry.integrated_time.0;
    let unknown = |why: String| KeylessError::UnknownLog {
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
        .map_err(|e| KeylessError::Material(format!("its canonicalizedBody is not base64: {e}")))?;
    let (promise, proof) = match (&entry.inclusion_promise, &entry.inclusion_proof) {
        (None, None) => return Err(Error::NoEvidence.into()),
        (_, None) if format == SignatureFormat::Dsse => {
            return Err(Error::NoInclusionProof.into());
        }
        (None, Some(_)) => return Err(Error::NoSignedEntryTimestamp.into()),
        (Some(promise), proof) => (promise, proof),
    };
    let set = b64(&promise.signed_entry_timestamp).map_err(|_| Error::SignedEntryTimestamp {
        log: log.base_url.clone(),
    })?;
    let body_b64 = base64::engine::general_purpose::STANDARD.encode(&body);
    let signed = set_payload(&body_b64, time, &hex::encode(&log_id), entry.log_index.0);
    if !log.key.verifies(&signed, &set) {
        return Err(Error::SignedEntryTimestamp {
            log: log.base_url.clone(),
        }
        .into());
    }
    if let Some(proof) = proof {
        if proof.log_index.0 != entry.log_index.0 {
            return Err(Error::ProofIndex {
                proof: proof.log_index.0,
                entry: entry.log_index.0,
            }
            .into());
        }
        check_inclusion(log, proof, &body)?;
    }
    Ok(time)
}

pub(super) fn hash_children(left: &[u8], right: &[u8]) -> [u8; 32] {
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

fn check_inclusion(log: &Log, proof: &Proof, body: &[u8]) -> Result<(), Error> {
    let bad = Error::InclusionProof;
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

/// One signature line of a signed note: `— name base64(hint ‖ signature)`.
struct NoteSignature<'a> {
    name: &'a str,
    hint: [u8; 4],
    signature: Vec<u8>,
}

/// A signed note's text (up to and including the newline before the
/// blank line: what its signatures sign) and its signature lines, split
/// as Go's `golang.org/x/mod/sumdb/note` splits them.
fn split_note(envelope: &str) -> Result<(&str, Vec<NoteSignature<'_>>), Error> {
    let bad = |why: String| Error::CheckpointMalformed(why);
    let split = envelope
        .rfind("\n\n")
        .ok_or_else(|| bad("no blank line between its text and its signatures".into()))?;
    let (text, block) = (&envelope[..split + 1], &envelope[split + 2..]);
    let signatures = block
        .lines()
        .map(|line| {
            let (name, sig) = line
                .strip_prefix("\u{2014} ")
                .and_then(|l| l.split_once(' '))
                .ok_or_else(|| bad(format!("{line:?} is not a line \"— name signature\"")))?;
            let bytes = b64(sig).ok().filter(|b| b.len() > 4).ok_or_else(|| {
                bad(format!(
                    "the signature of {name:?} is not base64 of a key hint and a signature"
                ))
            })?;
            Ok(NoteSignature {
                name,
                hint: [bytes[0], bytes[1], bytes[2], bytes[3]],
                signature: bytes[4..].to_vec(),
            })
        })
        .collect::<Result<Vec<_>, Error>>()?;
    if signatures.is_empty() {
        return Err(bad("it has no signature line".into()));
    }
    Ok((text, signatures))
}

/// The host of a base URL, as Go's `url.URL.Hostname` gives it (no
/// scheme, user, port or IPv6 brackets).
fn url_host(base_url: &str) -> &str {
    let rest = base_url.split_once("://").map_or(base_url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host_port.strip_prefix('[') {
        return v6.split(']').next().unwrap_or("");
    }
    match host_port.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => host_port,
    }
}

/// Checks a checkpoint (the module's docs say the rules): for the tree
/// of `size` leaves and root `root_hash`, with the log's origin, and
/// signed by the log (its name, key hint and signature).
pub(super) fn check_checkpoint(
    log: &Log,
    envelope: &str,
    size: u64,
    root_hash: &[u8; 32],
) -> Result<(), Error> {
    let (text, signatures) = split_note(envelope)?;
    let mut lines = text.lines();
    let (origin, note_size, note_root) = (
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
        lines.next().unwrap_or(""),
    );
    if note_size.parse::<u64>().ok() != Some(size) {
        return Err(Error::CheckpointTree(format!(
            "it is for a tree of size {note_size}, the proof for {size}"
        )));
    }
    if b64(note_root).ok().as_deref() != Some(root_hash.as_slice()) {
        return Err(Error::CheckpointTree(
            "its root hash is not the proof's".into(),
        ));
    }
    let wrong_origin = |want: String| Error::CheckpointOrigin {
        origin: origin.to_owned(),
        log: log.base_url.clone(),
        want,
    };
    // Rekor v1: `<hostname> - <tree id>`, signed as `<hostname>`.
    let v1_name = origin
        .rsplit_once(" - ")
        .filter(|(name, tree)| {
            !name.is_empty() && !tree.is_empty() && tree.bytes().all(|b| b.is_ascii_digit())
        })
        .map(|(name, _)| name);
    let name = match v1_name {
        Some(name) => name,
        None => {
            let host = url_host(&log.base_url);
            if origin != host {
                return Err(wrong_origin(format!(
                    "a C2SP checkpoint's origin is the host of the log's baseUrl, {host:?}"
                )));
            }
            origin
        }
    };
    let by_log: Vec<&NoteSignature<'_>> = signatures
        .iter()
        .filter(|s| s.hint == log.key_hint)
        .collect();
    if by_log.is_empty() {
        return Err(Error::CheckpointKeyHint {
            log: log.base_url.clone(),
            hint: hex::encode(log.key_hint),
            found: signatures
                .iter()
                .map(|s| format!("{} {}", s.name, hex::encode(s.hint)))
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    if let Some(other) = by_log.iter().find(|s| s.name != name) {
        return Err(wrong_origin(format!(
            "the log signs it as {:?}, and {}",
            other.name,
            match v1_name {
                Some(_) => "a Rekor v1 origin is \"<that name> - <tree id>\"",
                None => "a C2SP signature's name is the origin",
            }
        )));
    }
    if !by_log
        .iter()
        .any(|s| log.key.verifies(text.as_bytes(), &s.signature))
    {
        return Err(Error::CheckpointSignature {
            log: log.base_url.clone(),
        });
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
pub(super) fn check_body(
    entry: &TlogEntry,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<()> {
    let bad = |why: String| KeylessError::BodyMismatch(why);
    let (kind, version) = (&entry.kind_version.kind, &entry.kind_version.version);
    match (kind.as_str(), version.as_str()) {
        ("dsse", "0.0.1") => {}
        ("hashedrekord", "0.0.1") => {
            return check_hashedrekord(entry, payload, signature, leaf_der);
        }
        _ => {
            return Err(bad(format!(
                "it is a {kind} {version} entry; a dsse 0.0.1 entry (what cosign writes for a bundle on Rekor v1) or a hashedrekord 0.0.1 entry (cosign's .sig layout) is read"
            )));
        }
    }
    let body: Body = decode_body(entry)?;
    check_kind(&body.kind, &body.api_version, "dsse")?;
    check_hash(
        &body.spec.payload_hash,
        payload,
        "a payload",
        "this statement",
    )?;
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

#[derive(Deserialize)]
struct RekordBody {
    kind: String,
    #[serde(rename = "apiVersion")]
    api_version: String,
    spec: RekordSpec,
}

#[derive(Deserialize)]
struct RekordSpec {
    data: RekordData,
    signature: RekordSignature,
}

#[derive(Deserialize)]
struct RekordData {
    hash: Hash,
}

#[derive(Deserialize)]
struct RekordSignature {
    content: String,
    #[serde(rename = "publicKey")]
    public_key: RekordKey,
}

#[derive(Deserialize)]
struct RekordKey {
    content: String,
}

/// The log entry is a `hashedrekord` 0.0.1 record (what cosign writes for
/// a signature in its `.sig` layout) of this payload's sha256, this
/// signature and this certificate.
fn check_hashedrekord(
    entry: &TlogEntry,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<()> {
    let body: RekordBody = decode_body(entry)?;
    check_kind(&body.kind, &body.api_version, "hashedrekord")?;
    check_hash(&body.spec.data.hash, payload, "an artifact", "this payload")?;
    let same_signature = b64(&body.spec.signature.content).is_ok_and(|sig| sig == signature);
    let same_certificate = b64(&body.spec.signature.public_key.content)
        .ok()
        .and_then(|pem| pem_certificate(&pem))
        .is_some_and(|der| der == leaf_der);
    if !same_signature || !same_certificate {
        return Err(KeylessError::BodyMismatch(
            "its signature is not this one with this certificate".into(),
        ));
    }
    Ok(())
}

/// The entry's canonicalized body, decoded as `T`.
fn decode_body<T: serde::de::DeserializeOwned>(entry: &TlogEntry) -> Result<T> {
    let bad = |why: String| KeylessError::BodyMismatch(why);
    let body = b64(&entry.canonicalized_body).map_err(|e| bad(e.to_string()))?;
    serde_json::from_slice(&body).map_err(|e| bad(format!("its body is unreadable: {e}")))
}

/// The body is a `kind` 0.0.1 entry.
fn check_kind(kind: &str, api_version: &str, want: &str) -> Result<()> {
    if (kind, api_version) != (want, "0.0.1") {
        return Err(KeylessError::BodyMismatch(format!(
            "its body is a {kind} {api_version} entry"
        )));
    }
    Ok(())
}

/// The body records `content`'s sha256 (`what` it calls it, `ours` what
/// it should be).
fn check_hash(hash: &Hash, content: &[u8], what: &str, ours: &str) -> Result<()> {
    if hash.algorithm != "sha256"
        || !hash
            .value
            .eq_ignore_ascii_case(&hex::encode(Sha256::digest(content)))
    {
        return Err(KeylessError::BodyMismatch(format!(
            "it records {what} of {}:{}, not {ours}",
            hash.algorithm, hash.value
        )));
    }
    Ok(())
}

/// The DER of the first `CERTIFICATE` in PEM text.
pub(super) fn pem_certificate(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let start = text.find("-----BEGIN CERTIFICATE-----")? + "-----BEGIN CERTIFICATE-----".len();
    let end = start + text[start..].find("-----END CERTIFICATE-----")?;
    let body: String = text[start..end].split_whitespace().collect();
    b64(&body).ok()
}
