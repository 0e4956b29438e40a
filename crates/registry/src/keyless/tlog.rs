//! The Rekor transparency log entry: its log, signed entry timestamp,
//! inclusion proof and checkpoint, and its body.

use base64::Engine as _;
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

use super::root::{Log, LogIdFile, TrustedRoot};
use super::text::{b64, show_time};
use super::{Error, Key, Result};

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

/// Checks the entry's log, signed entry timestamp and inclusion proof;
/// the integrated time, now trusted.
pub(super) fn check_entry(root: &TrustedRoot, entry: &TlogEntry) -> Result<i64> {
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
pub(super) fn check_body(
    entry: &TlogEntry,
    payload: &[u8],
    signature: &[u8],
    leaf_der: &[u8],
) -> Result<()> {
    let bad = |why: String| Error::BodyMismatch(why);
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
        return Err(Error::BodyMismatch(
            "its signature is not this one with this certificate".into(),
        ));
    }
    Ok(())
}

/// The entry's canonicalized body, decoded as `T`.
fn decode_body<T: serde::de::DeserializeOwned>(entry: &TlogEntry) -> Result<T> {
    let bad = |why: String| Error::BodyMismatch(why);
    let body = b64(&entry.canonicalized_body).map_err(|e| bad(e.to_string()))?;
    serde_json::from_slice(&body).map_err(|e| bad(format!("its body is unreadable: {e}")))
}

/// The body is a `kind` 0.0.1 entry.
fn check_kind(kind: &str, api_version: &str, want: &str) -> Result<()> {
    if (kind, api_version) != (want, "0.0.1") {
        return Err(Error::BodyMismatch(format!(
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
        return Err(Error::BodyMismatch(format!(
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
