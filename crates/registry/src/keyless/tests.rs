//! The keyless module's unit tests.

use std::path::Path;

use base64::Engine as _;
use x509_cert::der::Encode as _;

use super::cert::{OID_EKU, check_chain, unix};
use super::tlog::{check_checkpoint, hash_children, root_from_proof};
use super::*;
use crate::bundle;
use crate::signature::signed_bytes;
use crate::stored::SignatureFormat;

/// Made by the real services (fixtures/keyless/make.sh): a private
/// Fulcio and Rekor v1, and cosign v3 signing keyless.
const ROOT: &[u8] = include_bytes!("../../tests/fixtures/keyless/trusted_root.json");
const OTHER_ROOT: &[u8] = include_bytes!("../../tests/fixtures/keyless/other_trusted_root.json");
pub(crate) const EMAIL: &[u8] = include_bytes!("../../tests/fixtures/keyless/email.bundle.json");
pub(crate) const GITHUB: &[u8] = include_bytes!("../../tests/fixtures/keyless/github.bundle.json");
pub(crate) const DIGEST: &str = include_str!("../../tests/fixtures/keyless/digest");
pub(crate) const ISSUERS: &str = include_str!("../../tests/fixtures/keyless/issuers");

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
    check_as(root, bundle, SignatureFormat::Dsse)
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
    assert!(
        matches!(err, Error::Log(LogError::InclusionProof(_))),
        "{err}"
    );
    // A hash too many.
    let mut b = json(GITHUB);
    entry(&mut b)["inclusionProof"]["hashes"]
        .as_array_mut()
        .unwrap()
        .push(b64.encode([7u8; 32]).into());
    assert!(matches!(
        check(&root, &b),
        Err(Error::Log(LogError::InclusionProof(_)))
    ));
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
    assert!(
        matches!(err, Error::Log(LogError::InclusionProof(_))),
        "{err}"
    );
    // The checkpoint alone changed (its origin's tree id): its signature
    // fails.
    let mut b = json(GITHUB);
    let e = entry(&mut b);
    e["inclusionProof"]["checkpoint"]["envelope"] = envelope
        .replace(" - 55349276313166362\n", " - 55349276313166363\n")
        .into();
    let err = check(&root, &b).unwrap_err();
    assert!(
        matches!(err, Error::Log(LogError::CheckpointSignature { .. })),
        "{err}"
    );
    // The integrated time moved: the signed entry timestamp fails.
    let mut b = json(EMAIL);
    let t: i64 = entry(&mut b)["integratedTime"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    entry(&mut b)["integratedTime"] = (t - 3600).to_string().into();
    let err = check(&root, &b).unwrap_err();
    assert!(
        matches!(err, Error::Log(LogError::SignedEntryTimestamp { .. })),
        "{err}"
    );
    // No signed entry timestamp: the time is not trusted.
    let mut b = json(EMAIL);
    entry(&mut b)
        .as_object_mut()
        .unwrap()
        .remove("inclusionPromise");
    assert!(matches!(
        check(&root, &b),
        Err(Error::Log(LogError::NoSignedEntryTimestamp))
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
        TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ended).unwrap()).unwrap();
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
        TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ended).unwrap()).unwrap();
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
    let err = verify(
        &root,
        &s.payload,
        b"other",
        &s.signature,
        material,
        s.format,
    )
    .unwrap_err();
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
    let server_auth = x509_cert::ext::pkix::ExtendedKeyUsage(vec![ObjectIdentifier::new_unwrap(
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
    let ed =
        TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&ed).unwrap()).unwrap();
    let err = check(&ed, &json(EMAIL)).unwrap_err();
    assert!(err.to_string().contains("PKIX_ED25519"), "{err}");
}

/// The entry's inclusion proof.
fn proof(b: &mut serde_json::Value) -> &mut serde_json::Value {
    &mut entry(b)["inclusionProof"]
}

/// Verifies `bundle` (as JSON) with `root`, as if it came in `format`.
fn check_as(
    root: &TrustedRoot,
    bundle: &serde_json::Value,
    format: SignatureFormat,
) -> Result<Identity> {
    let parsed = bundle::parse(&serde_json::to_vec(bundle).unwrap()).unwrap();
    let s = &parsed.signatures[0];
    verify(
        root,
        &s.payload,
        &signed_bytes(s),
        &s.signature,
        s.material.as_ref().unwrap(),
        format,
    )
}

#[test]
fn a_bundle_entry_needs_its_inclusion_proof_and_any_entry_a_proof_or_a_promise() {
    let root = root();
    // A bundle's entry without the proof the log gave with it.
    let mut b = json(EMAIL);
    entry(&mut b)
        .as_object_mut()
        .unwrap()
        .remove("inclusionProof");
    let err = check(&root, &b).unwrap_err();
    assert!(
        matches!(err, Error::Log(LogError::NoInclusionProof)),
        "{err}"
    );
    assert!(err.to_string().contains("v0.2 and later"), "{err}");
    // The same entry from cosign's .sig layout, which has no room for a
    // proof: its signed entry timestamp is the log's word.
    let id = check_as(&root, &b, SignatureFormat::SimpleSigning).unwrap();
    assert_eq!(id.subject, "alice@example.com");
    // Neither a proof nor a promise: refused whatever the format.
    entry(&mut b)
        .as_object_mut()
        .unwrap()
        .remove("inclusionPromise");
    for format in [SignatureFormat::Dsse, SignatureFormat::SimpleSigning] {
        let err = check_as(&root, &b, format).unwrap_err();
        assert!(matches!(err, Error::Log(LogError::NoEvidence)), "{err}");
    }
}

#[test]
fn the_inclusion_proof_must_be_for_the_entrys_log_index() {
    let root = root();
    // The second entry's proof said to be the first's; and the first
    // entry's (its index left out: protobuf's zero) said to be another's.
    for (bundle, index, entry_index) in [(GITHUB, 0, 1), (EMAIL, 1, 0)] {
        let mut b = json(bundle);
        proof(&mut b)["logIndex"] = index.to_string().into();
        let err = check(&root, &b).unwrap_err();
        assert!(
            matches!(err, Error::Log(LogError::ProofIndex { proof, entry }) if (proof, entry) == (index, entry_index)),
            "{err}"
        );
    }
}

/// The checkpoint of `b`'s entry, changed by `f`.
fn with_checkpoint(b: &mut serde_json::Value, f: impl Fn(&str) -> String) {
    let envelope = &mut proof(b)["checkpoint"]["envelope"];
    *envelope = f(envelope.as_str().unwrap()).into();
}

/// A checkpoint's signature lines, each changed by `f(name, hint ‖
/// signature)`.
fn with_signatures(envelope: &str, f: impl Fn(&str, &mut Vec<u8>) -> String) -> String {
    let (text, block) = envelope.rsplit_once("\n\n").unwrap();
    let b64 = base64::engine::general_purpose::STANDARD;
    let lines: String = block
        .lines()
        .map(|l| {
            let (name, sig) = l
                .strip_prefix("\u{2014} ")
                .unwrap()
                .split_once(' ')
                .unwrap();
            let mut bytes = b64.decode(sig).unwrap();
            let name = f(name, &mut bytes);
            format!("\u{2014} {name} {}\n", b64.encode(&bytes))
        })
        .collect();
    format!("{text}\n\n{lines}")
}

#[test]
fn the_checkpoint_must_name_the_log_and_carry_its_key_hint() {
    let root = root();
    // Rekor v1's checkpoint: "vm - <tree id>", signed as "vm" (the test
    // Rekor's host name) with the key hint c63715bc, the first 4 bytes of
    // the SHA-256 of its key (its log id's too).
    let mut b = json(GITHUB);
    with_checkpoint(&mut b, |e| {
        assert!(e.starts_with("vm - 55349276313166362\n"), "{e}");
        assert!(e.contains("\n\n\u{2014} vm xjcVv"), "{e}");
        e.to_owned()
    });
    check(&root, &b).unwrap();
    // The log's signature under another key hint.
    let mut b = json(GITHUB);
    with_checkpoint(&mut b, |e| {
        with_signatures(e, |name, bytes| {
            bytes[0] ^= 1;
            name.to_owned()
        })
    });
    let err = check(&root, &b).unwrap_err();
    assert!(
        matches!(err, Error::Log(LogError::CheckpointKeyHint { .. })),
        "{err}"
    );
    assert!(
        err.to_string().contains(
            "key hint c63715bc of the log http://127.0.0.1:42537; its signatures: vm c73715bc"
        ),
        "{err}"
    );
    // The log's signature under another name than its origin's.
    let mut b = json(GITHUB);
    with_checkpoint(&mut b, |e| {
        with_signatures(e, |_, _| "rekor.example.dev".into())
    });
    let err = check(&root, &b).unwrap_err();
    assert!(
        matches!(err, Error::Log(LogError::CheckpointOrigin { .. })),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("signs it as \"rekor.example.dev\""),
        "{err}"
    );
    // Another origin: a Rekor v1 one of another name, and a C2SP one that is
    // not the host of the log's baseUrl.
    for (origin, wanted) in [
        (
            "rekor.example.dev - 55349276313166362",
            "signs it as \"vm\"",
        ),
        ("vm", "the host of the log's baseUrl, \"127.0.0.1\""),
    ] {
        let mut b = json(GITHUB);
        with_checkpoint(&mut b, |e| e.replacen("vm - 55349276313166362", origin, 1));
        let err = check(&root, &b).unwrap_err();
        assert!(
            matches!(err, Error::Log(LogError::CheckpointOrigin { .. })),
            "{err}"
        );
        assert!(err.to_string().contains(wanted), "{err} (wanted {wanted})");
    }
    // A second signer's line (a witness) beside the log's is skipped.
    let mut b = json(GITHUB);
    let witness = format!(
        "\u{2014} witness.example.dev {}\n",
        base64::engine::general_purpose::STANDARD
            .encode([[1u8, 2, 3, 4].as_slice(), &[0; 64]].concat())
    );
    with_checkpoint(&mut b, |e| format!("{e}{witness}"));
    check(&root, &b).unwrap();
    // Not a signed note.
    for (envelope, wanted) in [
        ("vm - 1\n2\nR0Pa\n", "no blank line"),
        ("vm - 1\n2\nR0Pa\n\n", "no signature line"),
        ("vm - 1\n2\nR0Pa\n\n\u{2014} vm\n", "is not a line"),
        (
            "vm - 1\n2\nR0Pa\n\n\u{2014} vm AAAA\n",
            "not base64 of a key hint",
        ),
    ] {
        let mut b = json(GITHUB);
        with_checkpoint(&mut b, |_| envelope.to_owned());
        let err = check(&root, &b).unwrap_err();
        assert!(
            matches!(err, Error::Log(LogError::CheckpointMalformed(_))),
            "{err}"
        );
        assert!(err.to_string().contains(wanted), "{err} (wanted {wanted})");
    }
}

#[test]
fn a_c2sp_checkpoint_names_the_host_of_the_logs_base_url() {
    // The tile-based Rekor (v2) writes C2SP checkpoints: the origin is the
    // host of its baseUrl, and the signature line carries it as its name,
    // with the ECDSA key hint (SHA-256 of the DER key).
    use p256::ecdsa::signature::Signer as _;
    use p256::pkcs8::EncodePublicKey as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    let signing = p256::ecdsa::SigningKey::from_slice(&[7u8; 32]).unwrap();
    let spki = signing.verifying_key().to_public_key_der().unwrap();
    let mut r = json(ROOT);
    r["tlogs"][0]["baseUrl"] = "https://log2025-1.rekor.example.dev:443/api".into();
    r["tlogs"][0]["publicKey"]["rawBytes"] = b64.encode(spki.as_bytes()).into();
    let root =
        TrustedRoot::from_json(Path::new("/r.json"), &serde_json::to_vec(&r).unwrap()).unwrap();
    let log = &root.tlogs[0];
    let root_hash = [3u8; 32];
    let hint = Sha256::digest(spki.as_bytes())[..4].to_vec();
    let note = |origin: &str, name: &str, hint: &[u8]| {
        let text = format!("{origin}\n5\n{}\n", b64.encode(root_hash));
        let sig: p256::ecdsa::Signature = signing.sign(text.as_bytes());
        format!(
            "{text}\n\u{2014} {name} {}\n",
            b64.encode([hint, sig.to_der().as_bytes()].concat())
        )
    };
    let host = "log2025-1.rekor.example.dev";
    check_checkpoint(log, &note(host, host, &hint), 5, &root_hash).unwrap();
    // Signed by the log's key, but for another log's origin.
    let err = check_checkpoint(
        log,
        &note("log2024-1.rekor.example.dev", host, &hint),
        5,
        &root_hash,
    )
    .unwrap_err();
    assert!(matches!(err, LogError::CheckpointOrigin { .. }), "{err}");
    // Its origin under another name.
    let err = check_checkpoint(log, &note(host, "witness", &hint), 5, &root_hash).unwrap_err();
    assert!(matches!(err, LogError::CheckpointOrigin { .. }), "{err}");
    // C2SP's hint for an Ed25519 key, SHA-256(name ‖ 0x0A ‖ 0x01 ‖ key),
    // is not an ECDSA log's.
    let mut ed = Sha256::new();
    ed.update(format!("{host}\n\x01"));
    ed.update(spki.as_bytes());
    let err =
        check_checkpoint(log, &note(host, host, &ed.finalize()[..4]), 5, &root_hash).unwrap_err();
    assert!(matches!(err, LogError::CheckpointKeyHint { .. }), "{err}");
    // Another tree.
    let err = check_checkpoint(log, &note(host, host, &hint), 6, &root_hash).unwrap_err();
    assert!(matches!(err, LogError::CheckpointTree(_)), "{err}");
}
