//! Tests of the parent module.

use super::*;

/// A P-256 private key as PKCS#8 PEM, made from a fixed scalar.
fn private_pem(scalar: u8) -> String {
    use p256::pkcs8::EncodePrivateKey as _;
    let key = SigningKey::from_slice(&[scalar; 32]).unwrap();
    key.to_pkcs8_pem(Default::default()).unwrap().to_string()
}

fn reference() -> Reference {
    Reference::parse("127.0.0.1:5000/vendor/gpu:1.4").unwrap()
}

#[test]
fn the_payload_is_cosigns_simple_signing_document() {
    let digest = Digest::of(b"manifest");
    assert_eq!(
        String::from_utf8(payload(&reference(), &digest)).unwrap(),
        format!(
            r#"{{"critical":{{"identity":{{"docker-reference":"127.0.0.1:5000/vendor/gpu"}},"image":{{"docker-manifest-digest":"{digest}"}},"type":"cosign container image signature"}},"optional":null}}"#
        )
    );
    assert_eq!(
        signature_tag(&reference(), &digest).to_string(),
        format!("127.0.0.1:5000/vendor/gpu:sha256-{}.sig", digest.hex())
    );
}

#[test]
fn a_signature_verifies_only_its_digest_with_its_key() {
    let path = Path::new("/keys/vendor.pem");
    let key = PrivateKey::from_pem(path, &private_pem(1)).unwrap();
    let other = PrivateKey::from_pem(Path::new("/keys/other.pem"), &private_pem(7)).unwrap();
    let digest = Digest::of(b"manifest");
    let r = reference();
    let by = |k: &PrivateKey, d: &Digest| {
        let payload = payload(&r, d);
        StoredSignature {
            signature: k.sign_b64(&payload),
            payload,
            format: SignatureFormat::SimpleSigning,
            material: None,
        }
    };
    let public = key.public_key();
    assert!(verify_signatures(&r, &digest, &public, &[by(&key, &digest)], 0).is_ok());
    // Another key's signature among others is skipped.
    assert!(
        verify_signatures(
            &r,
            &digest,
            &public,
            &[by(&other, &digest), by(&key, &digest)],
            0
        )
        .is_ok()
    );
    let err = verify_signatures(&r, &digest, &public, &[by(&other, &digest)], 0).unwrap_err();
    assert!(matches!(err, Error::WrongKey { count: 1, .. }), "{err}");
    assert!(err.to_string().contains("/keys/vendor.pem") && err.to_string().contains("vendor/gpu"));
    let elsewhere = Digest::of(b"another manifest");
    let err = verify_signatures(&r, &digest, &public, &[by(&key, &elsewhere)], 0).unwrap_err();
    assert!(
        matches!(err, Error::OtherDigest { ref signed, .. } if *signed == elsewhere.to_string()),
        "{err}"
    );
    let err = verify_signatures(&r, &digest, &public, &[], 0).unwrap_err();
    assert!(matches!(err, Error::Unsigned { .. }), "{err}");
    let err = verify_signatures(&r, &digest, &public, &[by(&other, &digest)], 1).unwrap_err();
    assert!(matches!(err, Error::Keyless { .. }), "{err}");
    // A tampered payload no longer verifies.
    let mut tampered = by(&key, &digest);
    tampered.payload.push(b' ');
    assert!(verify_signatures(&r, &digest, &public, &[tampered], 0).is_err());
}

#[test]
fn unsupported_keys_are_refused_with_what_to_do() {
    let path = Path::new("/keys/k.pem");
    for (pem, wanted) in [
        (
            "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAA==\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n",
            "cosign's encrypted key format",
        ),
        (
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAA==\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "encrypted PKCS#8",
        ),
        (
            "-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n",
            "holds a PUBLIC KEY",
        ),
        ("not a key", "no PEM block"),
    ] {
        let err = PrivateKey::from_pem(path, pem).unwrap_err();
        assert!(
            err.to_string().contains(wanted) && err.to_string().contains("/keys/k.pem"),
            "{err}"
        );
    }
    let err = PublicKey::from_pem(
        path,
        "-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("keyless"), "{err}");
    let err = PublicKey::from_pem(path, &private_pem(1)).unwrap_err();
    assert!(err.to_string().contains("PRIVATE KEY"), "{err}");
    // The private key's Debug shows its path, not the key.
    let key = PrivateKey::from_pem(path, &private_pem(1)).unwrap();
    assert_eq!(format!("{key:?}"), "PrivateKey(/keys/k.pem)");
}
