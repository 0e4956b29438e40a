//! cosign v3's default signature: a Sigstore bundle attached to the signed
//! manifest as an OCI 1.1 referrer.
//!
//! What `cosign sign --key` writes (v3 by default, v2 with
//! `--new-bundle-format`), offline (`--use-signing-config=false
//! --tlog-upload=false`):
//!
//! - a manifest of `artifactType` [`BUNDLE_MEDIA_TYPE`], config
//!   `application/vnd.oci.empty.v1+json`, `subject` the signed manifest, and
//!   one layer of type [`BUNDLE_MEDIA_TYPE`]: the bundle JSON;
//! - listed by the registry's referrers API (`GET
//!   /v2/<name>/referrers/<digest>`), or, where the registry has none
//!   (docker-registry 2.8 answers 404), in an image index under the
//!   referrers tag `sha256-<hex>` (cosign v2 labels that index entry with
//!   the config's type, `application/vnd.oci.empty.v1+json`, not the
//!   bundle's; both are read);
//! - the bundle holds a DSSE envelope (`payloadType`
//!   [`IN_TOTO_PAYLOAD_TYPE`]) of an in-toto Statement v1 whose subject's
//!   `sha256` is the signed digest and whose predicate type is
//!   [`COSIGN_SIGN_PREDICATE`]; the signature (ASN.1 DER ECDSA, base64) is
//!   over the DSSE pre-authentication encoding ([`pae`]). With a key, its
//!   `verificationMaterial` is only a `publicKey` hint; `tlogEntries` is
//!   empty or absent.
//!
//! A bundle that is malformed, or of a form not read (a `messageSignature`,
//! which is what `cosign sign-blob` writes, not `cosign sign`), is skipped
//! with a reason. Nothing here talks to Rekor or Fulcio: with a key the
//! check is offline, as for the classic `.sig` layout. A keyless bundle's
//! `verificationMaterial` (its certificate and transparency log entry) is
//! kept with each of its signatures ([`StoredSignature::material`]), for
//! [`crate::keyless`] to check offline against a trusted root.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::Deserialize;

use crate::artifact::Descriptor;
use crate::client::{self, Session};
use crate::reference::{Digest, Reference};
use crate::stored::{SignatureFormat, StoredSignature};

/// The media type of a Sigstore bundle v0.3 (the referrer's
/// `artifactType` and its layer's media type).
pub const BUNDLE_MEDIA_TYPE: &str = "application/vnd.dev.sigstore.bundle.v0.3+json";
/// The same media type in the bundle's own `mediaType`, older spelling.
const BUNDLE_MEDIA_TYPE_PARAM: &str = "application/vnd.dev.sigstore.bundle+json;version=0.3";
/// The OCI empty descriptor's media type (cosign v2 puts it as the index
/// entry's `artifactType`).
const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";
/// The DSSE payload type of an in-toto statement.
pub const IN_TOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";
/// An in-toto Statement v1's `_type`.
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
/// The predicate type of a cosign image signature (not an attestation).
pub const COSIGN_SIGN_PREDICATE: &str = "https://sigstore.dev/cosign/sign/v1";
/// Largest bundle read (cosign's are under 1 KiB with a key, a few KiB
/// with a certificate chain).
pub(crate) const MAX_BUNDLE_BYTES: u64 = 64 << 10;
/// Largest referrers index or referrer manifest kept.
pub(crate) const MAX_MANIFEST_BYTES: usize = 256 << 10;
/// Most bundle referrers read for one digest.
pub(crate) const MAX_REFERRERS: usize = 32;

/// DSSE's pre-authentication encoding, what the signature signs:
/// `"DSSEv1" SP len(type) SP type SP len(body) SP body`.
pub fn pae(payload_type: &str, body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Bundle {
    media_type: String,
    #[serde(default)]
    verification_material: Option<serde_json::Value>,
    #[serde(default)]
    dsse_envelope: Option<Envelope>,
    #[serde(default)]
    message_signature: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Envelope {
    payload: String,
    payload_type: String,
    signatures: Vec<EnvelopeSignature>,
}

#[derive(Deserialize)]
struct EnvelopeSignature {
    sig: String,
}

/// What one bundle holds: its signatures, and whether it is keyless (a
/// certificate as its verification material).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// One per DSSE signature, [`SignatureFormat::Dsse`].
    pub signatures: Vec<StoredSignature>,
    /// Whether the bundle carries a certificate (keyless).
    pub keyless: bool,
}

/// Why a bundle's bytes are skipped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not JSON of a bundle.
    #[error("not a Sigstore bundle: {0}")]
    NotABundle(#[source] serde_json::Error),
    /// A bundle of another media type (version).
    #[error("its media type {0} is not {BUNDLE_MEDIA_TYPE}")]
    MediaType(String),
    /// A `messageSignature` bundle.
    #[error(
        "it holds a messageSignature (what `cosign sign-blob` writes), not the DSSE envelope of an image signature"
    )]
    MessageSignature,
    /// No DSSE envelope.
    #[error("it holds no DSSE envelope")]
    NoEnvelope,
    /// A DSSE envelope of another payload type.
    #[error("its DSSE payloadType {0} is not {IN_TOTO_PAYLOAD_TYPE}")]
    PayloadType(String),
    /// The DSSE payload is not base64.
    #[error("its DSSE payload is not base64: {0}")]
    PayloadBase64(#[source] base64::DecodeError),
    /// The DSSE envelope has no signature.
    #[error("its DSSE envelope has no signature")]
    NoSignature,
}

/// Reads a bundle's bytes: its DSSE signatures, or why it is skipped.
pub fn parse(bytes: &[u8]) -> Result<Parsed, Error> {
    let bundle: Bundle = serde_json::from_slice(bytes).map_err(Error::NotABundle)?;
    if bundle.media_type != BUNDLE_MEDIA_TYPE && bundle.media_type != BUNDLE_MEDIA_TYPE_PARAM {
        return Err(Error::MediaType(bundle.media_type));
    }
    let Some(envelope) = bundle.dsse_envelope else {
        return Err(match bundle.message_signature {
            Some(_) => Error::MessageSignature,
            None => Error::NoEnvelope,
        });
    };
    if envelope.payload_type != IN_TOTO_PAYLOAD_TYPE {
        return Err(Error::PayloadType(envelope.payload_type));
    }
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope.payload.trim())
        .map_err(Error::PayloadBase64)?;
    if envelope.signatures.is_empty() {
        return Err(Error::NoSignature);
    }
    let keyless = bundle
        .verification_material
        .as_ref()
        .is_some_and(|m| m.get("certificate").is_some() || m.get("x509CertificateChain").is_some());
    let material = bundle.verification_material.filter(|_| keyless);
    Ok(Parsed {
        signatures: envelope
            .signatures
            .into_iter()
            .map(|s| StoredSignature {
                payload: payload.clone(),
                signature: s.sig,
                format: SignatureFormat::Dsse,
                material: material.clone(),
            })
            .collect(),
        keyless,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Statement {
    #[serde(rename = "_type")]
    kind: String,
    subject: Vec<Subject>,
    predicate_type: String,
}

#[derive(Deserialize)]
struct Subject {
    #[serde(default)]
    digest: BTreeMap<String, String>,
}

/// What a statement signed by the key says about `digest`: `Ok` when it is
/// a cosign signature of it, else what it signs instead.
pub(crate) fn check_statement(payload: &[u8], digest: &Digest) -> Result<(), String> {
    let statement: Statement = serde_json::from_slice(payload)
        .map_err(|_| "an unreadable in-toto statement".to_owned())?;
    if statement.kind != STATEMENT_TYPE {
        return Err(format!("a statement of type {}", statement.kind));
    }
    if statement.predicate_type != COSIGN_SIGN_PREDICATE {
        return Err(format!(
            "an attestation of predicate type {}",
            statement.predicate_type
        ));
    }
    let hexes: Vec<&str> = statement
        .subject
        .iter()
        .filter_map(|s| s.digest.get("sha256").map(String::as_str))
        .collect();
    if hexes.iter().any(|h| h.eq_ignore_ascii_case(digest.hex())) {
        return Ok(());
    }
    Err(match hexes.first() {
        Some(hex) => format!("sha256:{hex}"),
        None => "a statement with no sha256 subject".into(),
    })
}

/// The bundles found for a digest.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub signatures: Vec<StoredSignature>,
    pub keyless: usize,
    pub skipped: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Index {
    #[serde(default)]
    media_type: Option<String>,
    manifests: Vec<IndexEntry>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct IndexEntry {
    digest: String,
    #[serde(default)]
    size: i64,
    #[serde(default)]
    artifact_type: Option<String>,
}

impl Index {
    /// Reads a referrers index's bytes.
    pub(crate) fn parse(bytes: &[u8]) -> serde_json::Result<Self> {
        serde_json::from_slice(bytes)
    }

    /// Whether it is an OCI image index (its `mediaType` that one, or
    /// none), as the referrers tag scheme's must be.
    pub(crate) fn is_oci_index(&self) -> bool {
        self.media_type
            .as_deref()
            .is_none_or(|m| m == crate::artifact::OCI_INDEX_MEDIA_TYPE)
    }

    /// The digests and sizes of its entries that may be bundles: those of
    /// the bundle's artifact type, or of the empty config's (cosign v2).
    pub(crate) fn bundle_entries(self) -> Vec<(String, i64)> {
        self.manifests
            .into_iter()
            .filter(|e| {
                matches!(
                    e.artifact_type.as_deref(),
                    Some(BUNDLE_MEDIA_TYPE | EMPTY_MEDIA_TYPE)
                )
            })
            .map(|e| (e.digest, e.size))
            .collect()
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Referrer {
    #[serde(default)]
    artifact_type: Option<String>,
    layers: Vec<Descriptor>,
    #[serde(default)]
    subject: Option<Descriptor>,
}

impl Session {
    /// The Sigstore bundles that refer to `digest` in `reference`'s
    /// repository: from the referrers API, else the referrers tag
    /// `sha256-<hex>`. Every read bounded; every manifest and blob checked
    /// against its digest.
    pub(crate) async fn bundles(
        &self,
        reference: &Reference,
        digest: &Digest,
    ) -> client::Result<Found> {
        let mut found = Found::default();
        let mut entries: Vec<(String, i64)> = Vec::new();
        // The referrers API, asked `?artifactType=`, its index read under
        // the bound of a referrer manifest.
        let url = self.referrers_url(reference, digest);
        match self
            .read_bounded(
                reference,
                reqwest::Method::GET,
                &url,
                &[("artifactType", BUNDLE_MEDIA_TYPE)],
                MAX_MANIFEST_BYTES as u64,
            )
            .await
        {
            Ok((_, body)) => {
                // A 200 that is not an index: no referrers API.
                if let Ok(index) = Index::parse(&body) {
                    entries.extend(index.bundle_entries())
                }
            }
            // No referrers API: the tag scheme below.
            Err(client::Error::NotFound { .. }) => {}
            Err(e @ client::Error::ManifestTooLarge { .. }) => found.skipped.push(e.to_string()),
            Err(e) => return Err(e),
        }
        if entries.is_empty() {
            // Read the tag scheme here too, bounded: cosign v2 labels its
            // entry with the empty config's type, which the above drops.
            let tag = reference.with_tag(&format!("sha256-{}", digest.hex()));
            match self.manifest_within(&tag, MAX_MANIFEST_BYTES as u64).await {
                Err(e @ client::Error::ManifestTooLarge { .. }) => {
                    found.skipped.push(e.to_string())
                }
                Ok((bytes, _)) => match Index::parse(&bytes) {
                    Ok(index) if index.is_oci_index() => entries.extend(index.bundle_entries()),
                    _ => found
                        .skipped
                        .push(format!("{tag} is not a referrers index")),
                },
                Err(client::Error::NotFound { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if entries.len() > MAX_REFERRERS {
            found.skipped.push(format!(
                "{} referrers past the first {MAX_REFERRERS} not read",
                entries.len() - MAX_REFERRERS
            ));
            entries.truncate(MAX_REFERRERS);
        }
        for (entry, size) in entries {
            if let Err(why) = self
                .bundle(reference, digest, &entry, size, &mut found)
                .await?
            {
                tracing::warn!(%reference, %digest, referrer = %entry, "skipped a Sigstore bundle: {why}");
                found.skipped.push(format!("{entry}: {why}"));
            }
        }
        Ok(found)
    }

    /// Reads one referrer into `found`; `Ok(Err(why))` when it is skipped.
    async fn bundle(
        &self,
        reference: &Reference,
        digest: &Digest,
        entry: &str,
        size: i64,
        found: &mut Found,
    ) -> client::Result<Result<(), String>> {
        let Ok(entry_digest) = entry.parse::<Digest>() else {
            return Ok(Err("not a sha256 digest".into()));
        };
        if size < 0 || size as usize > MAX_MANIFEST_BYTES {
            return Ok(Err(format!(
                "its manifest is declared as {size} bytes, not 0 to {MAX_MANIFEST_BYTES}"
            )));
        }
        let (bytes, _) = match self
            .manifest_within(
                &reference.with_digest(&entry_digest),
                MAX_MANIFEST_BYTES as u64,
            )
            .await
        {
            Ok(read) => read,
            Err(e @ client::Error::ManifestTooLarge { .. }) => return Ok(Err(e.to_string())),
            Err(e) => return Err(e),
        };
        let referrer: Referrer = match serde_json::from_slice(&bytes) {
            Ok(r) => r,
            Err(e) => return Ok(Err(format!("its manifest is not an OCI manifest: {e}"))),
        };
        if referrer.artifact_type.as_deref() != Some(BUNDLE_MEDIA_TYPE) {
            // Another kind of referrer (cosign v2 labels every entry
            // alike): not a signature, not counted.
            return Ok(Ok(()));
        }
        if referrer.subject.as_ref().map(|s| s.digest.as_str()) != Some(digest.as_str()) {
            return Ok(Err(format!("its subject is not {digest}")));
        }
        let layers: Vec<&Descriptor> = referrer
            .layers
            .iter()
            .filter(|l| l.media_type == BUNDLE_MEDIA_TYPE)
            .collect();
        let [layer] = layers.as_slice() else {
            return Ok(Err(format!(
                "it has {} bundle layers, not one",
                layers.len()
            )));
        };
        let bytes = match self.blob(layer, MAX_BUNDLE_BYTES).await {
            Ok(bytes) => bytes,
            Err(e @ (client::Error::DeclaredTooLarge { .. } | client::Error::Layout { .. })) => {
                return Ok(Err(e.to_string()));
            }
            Err(e) => return Err(e),
        };
        match parse(&bytes) {
            Ok(parsed) => {
                found.keyless += usize::from(parsed.keyless) * parsed.signatures.len();
                found.signatures.extend(parsed.signatures);
                Ok(Ok(()))
            }
            Err(why) => Ok(Err(why.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::signature::{self, Error, PrivateKey, PublicKey};

    /// What the real cosign wrote (`cosign sign --key`, offline), v3 by
    /// default and v2 with `--new-bundle-format`, against docker-registry
    /// 2.8: the bundle, its referrer manifest, the referrers index, the
    /// public key and the signed digest.
    struct Vector {
        bundle: &'static [u8],
        referrer: &'static [u8],
        index: &'static [u8],
        public: &'static str,
        digest: &'static str,
    }

    const V3: Vector = Vector {
        bundle: include_bytes!("../tests/fixtures/cosign-v3/bundle.json"),
        referrer: include_bytes!("../tests/fixtures/cosign-v3/referrer.json"),
        index: include_bytes!("../tests/fixtures/cosign-v3/index.json"),
        public: include_str!("../tests/fixtures/cosign-v3/cosign.pub"),
        digest: include_str!("../tests/fixtures/cosign-v3/digest"),
    };
    const V2: Vector = Vector {
        bundle: include_bytes!("../tests/fixtures/cosign-v2/bundle.json"),
        referrer: include_bytes!("../tests/fixtures/cosign-v2/referrer.json"),
        index: include_bytes!("../tests/fixtures/cosign-v2/index.json"),
        public: include_str!("../tests/fixtures/cosign-v2/cosign.pub"),
        digest: include_str!("../tests/fixtures/cosign-v2/digest"),
    };

    fn reference() -> Reference {
        Reference::parse("127.0.0.1:5000/vendor/probe:1.0.0").unwrap()
    }

    fn digest(v: &Vector) -> Digest {
        v.digest.trim().parse().unwrap()
    }

    fn public(v: &Vector) -> PublicKey {
        PublicKey::from_pem(Path::new("/keys/cosign.pub"), v.public).unwrap()
    }

    fn verify(
        v: &Vector,
        digest: &Digest,
        key: &PublicKey,
        bundle: &[u8],
    ) -> signature::Result<signature::Verified> {
        let parsed = parse(bundle).unwrap();
        signature::verify_signatures(&reference(), digest, key, &parsed.signatures, 0)
            .inspect(|_| assert_eq!(v.digest.trim(), digest.as_str()))
    }

    fn other_key() -> PrivateKey {
        use p256::pkcs8::EncodePrivateKey as _;
        let key = p256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
        let pem = key.to_pkcs8_pem(Default::default()).unwrap();
        PrivateKey::from_pem(Path::new("/keys/other.pem"), &pem).unwrap()
    }

    #[test]
    fn pae_is_dsse_v1() {
        assert_eq!(
            pae("application/vnd.in-toto+json", b"{}"),
            b"DSSEv1 28 application/vnd.in-toto+json 2 {}".to_vec()
        );
        assert_eq!(pae("", b""), b"DSSEv1 0  0 ".to_vec());
    }

    #[test]
    fn what_cosign_v3_and_v2_write_is_laid_out_as_read() {
        for v in [&V3, &V2] {
            let referrer: Referrer = serde_json::from_slice(v.referrer).unwrap();
            assert_eq!(referrer.artifact_type.as_deref(), Some(BUNDLE_MEDIA_TYPE));
            assert_eq!(referrer.subject.unwrap().digest, v.digest.trim());
            assert_eq!(referrer.layers.len(), 1);
            assert_eq!(referrer.layers[0].media_type, BUNDLE_MEDIA_TYPE);
            assert_eq!(referrer.layers[0].digest, Digest::of(v.bundle).to_string());
            let index: Index = serde_json::from_slice(v.index).unwrap();
            assert_eq!(index.manifests.len(), 1);
            assert_eq!(
                index.manifests[0].digest,
                Digest::of(v.referrer).to_string()
            );
        }
        // cosign v2 labels its index entry with the config's type.
        let index: Index = serde_json::from_slice(V2.index).unwrap();
        assert_eq!(
            index.manifests[0].artifact_type.as_deref(),
            Some(EMPTY_MEDIA_TYPE)
        );
    }

    #[test]
    fn a_bundle_made_by_cosign_verifies_with_its_key_and_only_for_its_digest() {
        for v in [&V3, &V2] {
            let key = public(v);
            let parsed = parse(v.bundle).unwrap();
            assert!(!parsed.keyless);
            assert_eq!(parsed.signatures.len(), 1);
            // cosign writes ASN.1 DER ECDSA signatures.
            let der = base64::engine::general_purpose::STANDARD
                .decode(&parsed.signatures[0].signature)
                .unwrap();
            assert!(p256::ecdsa::Signature::from_der(&der).is_ok());
            let verified = verify(v, &digest(v), &key, v.bundle).unwrap();
            assert_eq!(verified.signature.format, SignatureFormat::Dsse);

            // Another key: a bundle counted as checked.
            let err = verify(v, &digest(v), &other_key().public_key(), v.bundle).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::WrongKey {
                        count: 1,
                        bundles: 1,
                        ..
                    }
                ),
                "{err}"
            );
            assert!(
                err.to_string().contains("none of the 1 signature(s)"),
                "{err}"
            );
            assert!(err.to_string().contains("/keys/other.pem"), "{err}");
            assert_eq!(err.kind(), "bad-signature");

            // Another digest: the bundle signs this one, not that one.
            let elsewhere = Digest::of(b"another manifest");
            let err = verify(v, &elsewhere, &key, v.bundle).unwrap_err();
            assert!(
                matches!(err, Error::OtherDigest { ref signed, .. } if *signed == v.digest.trim()),
                "{err}"
            );
            assert_eq!(err.kind(), "bad-signature");

            // A statement changed after signing no longer verifies.
            let mut bundle: serde_json::Value = serde_json::from_slice(v.bundle).unwrap();
            let b64 = base64::engine::general_purpose::STANDARD;
            let mut statement = b64
                .decode(bundle["dsseEnvelope"]["payload"].as_str().unwrap())
                .unwrap();
            statement.push(b' ');
            bundle["dsseEnvelope"]["payload"] = b64.encode(&statement).into();
            let tampered = serde_json::to_vec(&bundle).unwrap();
            assert!(matches!(
                verify(v, &digest(v), &key, &tampered),
                Err(Error::WrongKey { .. })
            ));
        }
    }

    /// A bundle signed by `key` over `statement`, its signature made by
    /// `sign` from the PAE.
    fn hand_made(statement: &serde_json::Value, sign: impl Fn(&[u8]) -> String) -> Vec<u8> {
        let body = serde_json::to_vec(statement).unwrap();
        let b64 = base64::engine::general_purpose::STANDARD;
        serde_json::to_vec(&serde_json::json!({
            "mediaType": BUNDLE_MEDIA_TYPE,
            "verificationMaterial": {"publicKey": {"hint": "x"}},
            "dsseEnvelope": {
                "payload": b64.encode(&body),
                "payloadType": IN_TOTO_PAYLOAD_TYPE,
                "signatures": [{"sig": sign(&pae(IN_TOTO_PAYLOAD_TYPE, &body))}],
            },
        }))
        .unwrap()
    }

    fn statement(digest: &Digest, predicate: &str) -> serde_json::Value {
        serde_json::json!({
            "_type": STATEMENT_TYPE,
            "subject": [{"digest": {"sha256": digest.hex()}}],
            "predicateType": predicate,
            "predicate": {},
        })
    }

    #[test]
    fn hand_made_bundles_check_the_statement_and_the_signature_encoding() {
        let key = other_key();
        let public = key.public_key();
        let digest = Digest::of(b"manifest");
        let check = |bundle: &[u8]| {
            let parsed = parse(bundle).unwrap();
            signature::verify_signatures(&reference(), &digest, &public, &parsed.signatures, 0)
        };
        let sign = |m: &[u8]| key.sign_b64(m);
        check(&hand_made(&statement(&digest, COSIGN_SIGN_PREDICATE), sign)).unwrap();
        // Among several subjects.
        let mut two = statement(&Digest::of(b"first"), COSIGN_SIGN_PREDICATE);
        two["subject"]
            .as_array_mut()
            .unwrap()
            .push(serde_json::json!({"digest": {"sha256": digest.hex()}}));
        check(&hand_made(&two, sign)).unwrap();
        // An attestation by the key is not a signature.
        let err = check(&hand_made(
            &statement(&digest, "https://slsa.dev/provenance/v1"),
            sign,
        ))
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("an attestation of predicate type https://slsa.dev/provenance/v1"),
            "{err}"
        );
        // Another statement type.
        let mut other = statement(&digest, COSIGN_SIGN_PREDICATE);
        other["_type"] = "https://in-toto.io/Statement/v0.1".into();
        let err = check(&hand_made(&other, sign)).unwrap_err();
        assert!(matches!(err, Error::OtherDigest { .. }), "{err}");
        // A raw r||s signature (not DER) is not cosign's: refused.
        let raw = |m: &[u8]| {
            use p256::ecdsa::signature::Signer as _;
            let signing = p256::ecdsa::SigningKey::from_slice(&[7; 32]).unwrap();
            let sig: p256::ecdsa::Signature = signing.sign(m);
            base64::engine::general_purpose::STANDARD.encode(sig.to_bytes())
        };
        let err = check(&hand_made(&statement(&digest, COSIGN_SIGN_PREDICATE), raw)).unwrap_err();
        assert!(matches!(err, Error::WrongKey { .. }), "{err}");
        // A signature over the statement itself, not its PAE.
        let body = serde_json::to_vec(&statement(&digest, COSIGN_SIGN_PREDICATE)).unwrap();
        let mut bundle: serde_json::Value =
            serde_json::from_slice(&hand_made(&statement(&digest, COSIGN_SIGN_PREDICATE), sign))
                .unwrap();
        bundle["dsseEnvelope"]["signatures"][0]["sig"] = key.sign_b64(&body).into();
        let err = check(&serde_json::to_vec(&bundle).unwrap()).unwrap_err();
        assert!(matches!(err, Error::WrongKey { .. }), "{err}");
    }

    #[test]
    fn malformed_bundles_are_skipped_with_a_reason() {
        let good: serde_json::Value = serde_json::from_slice(V3.bundle).unwrap();
        let with = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut b = good.clone();
            f(&mut b);
            serde_json::to_vec(&b).unwrap()
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"not json".to_vec(), "not a Sigstore bundle"),
            (
                with(&|b| b["mediaType"] = "application/json".into()),
                "media type application/json",
            ),
            (
                with(&|b| {
                    let envelope = b.as_object_mut().unwrap().remove("dsseEnvelope");
                    assert!(envelope.is_some());
                    b["messageSignature"] = serde_json::json!({
                        "messageDigest": {"algorithm": "SHA2_256", "digest": "AA=="},
                        "signature": "AA==",
                    });
                }),
                "messageSignature",
            ),
            (
                with(&|b| {
                    b.as_object_mut().unwrap().remove("dsseEnvelope");
                }),
                "no DSSE envelope",
            ),
            (
                with(&|b| b["dsseEnvelope"]["payloadType"] = "text/plain".into()),
                "payloadType text/plain",
            ),
            (
                with(&|b| b["dsseEnvelope"]["payload"] = "%%%".into()),
                "not base64",
            ),
            (
                with(&|b| b["dsseEnvelope"]["signatures"] = serde_json::json!([])),
                "no signature",
            ),
        ];
        for (bytes, why) in cases {
            let err = parse(&bytes).unwrap_err().to_string();
            assert!(err.contains(why), "{err} (wanted {why})");
        }
        // A certificate as verification material: keyless.
        let keyless = with(&|b| {
            b["verificationMaterial"] = serde_json::json!({"certificate": {"rawBytes": "AA=="}})
        });
        assert!(parse(&keyless).unwrap().keyless);
        // Skipped bundles alone: refused as bad-signature, naming them.
        let err = signature::verify_found(
            &reference(),
            &digest(&V3),
            &public(&V3),
            &[],
            0,
            &["sha256:ab: it holds no DSSE envelope".into()],
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("none of the 0 signature(s)")
                && err
                    .to_string()
                    .contains("1 Sigstore bundle(s) skipped: sha256:ab: it holds no DSSE envelope"),
            "{err}"
        );
        assert_eq!(err.kind(), "bad-signature");
    }

    #[test]
    fn a_bundle_signature_survives_the_cache_and_old_cache_files_read_as_classic() {
        let parsed = parse(V3.bundle).unwrap();
        let json = serde_json::to_string(&parsed.signatures).unwrap();
        assert!(json.contains(r#""format":"dsse""#), "{json}");
        let back: Vec<StoredSignature> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, parsed.signatures);
        signature::verify_signatures(&reference(), &digest(&V3), &public(&V3), &back, 0).unwrap();
        let old: Vec<StoredSignature> =
            serde_json::from_str(r#"[{"payload":"e30=","signature":"AA=="}]"#).unwrap();
        assert_eq!(old[0].format, SignatureFormat::SimpleSigning);
        let classic = serde_json::to_string(&old).unwrap();
        assert!(!classic.contains("format"), "{classic}");
    }
}
