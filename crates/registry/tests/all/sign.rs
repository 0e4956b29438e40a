//! Cosign-compatible signatures against the real registry.

use std::process::Command;

use base64::Engine as _;
use nodestatus_registry::signature::{
    self, SIGNATURE_ANNOTATION, SIMPLE_SIGNING_MEDIA_TYPE, StoredSignature, signature_tag,
};
use nodestatus_registry::{Cache, Client, Fetcher, Origin, PrivateKey, PublicKey};

use crate::pull::meta;
use crate::support::{Registry, assert_names, component, key_pair, oci::Oci, shown};

const CAP: u64 = 64 << 20;

#[tokio::test]
async fn a_signed_digest_verifies_and_signing_appends() {
    let mut registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (a_private, a_public) = key_pair(keys.path(), "a");
    let (b_private, b_public) = key_pair(keys.path(), "b");
    let (a, b) = (
        PrivateKey::read(&a_private).unwrap(),
        PrivateKey::read(&b_private).unwrap(),
    );
    let (a_pub, b_pub) = (
        PublicKey::read(&a_public).unwrap(),
        PublicKey::read(&b_public).unwrap(),
    );
    let tag = registry.reference("vendor/gpu:1.4");
    let digest = client
        .push(&tag, &component(1, 1000), &meta("1.4"))
        .await
        .unwrap();

    assert_eq!(client.sign(&tag, &a).await.unwrap(), digest);
    let verified = client.verify(&tag, &digest, &a_pub).await.unwrap();
    assert_eq!(verified.digest, digest);
    assert_eq!(
        verified.signature.payload,
        signature::payload(&tag, &digest)
    );

    // cosign's layout: one simple-signing layer, the signature annotated.
    let oci = Oci::new(&registry);
    let sig_tag = signature_tag(&tag, &digest);
    let manifest = oci.get_manifest(&sig_tag).await;
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1);
    assert_eq!(layers[0]["mediaType"], SIMPLE_SIGNING_MEDIA_TYPE);
    assert!(layers[0]["annotations"][SIGNATURE_ANNOTATION].is_string());

    // Signing again with the same key adds nothing; another key appends.
    client.sign(&tag, &a).await.unwrap();
    assert_eq!(
        oci.get_manifest(&sig_tag).await["layers"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    client.sign(&tag.with_digest(&digest), &b).await.unwrap();
    assert_eq!(
        oci.get_manifest(&sig_tag).await["layers"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    client.verify(&tag, &digest, &a_pub).await.unwrap();
    client.verify(&tag, &digest, &b_pub).await.unwrap();

    // Through the fetcher: verified online, then offline from the cache.
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(client, Cache::open(cache_dir.path()).unwrap());
    let fetched = fetcher.fetch(&tag, CAP, Some(&a_pub)).await.unwrap();
    assert_eq!(fetched.verified.unwrap().digest, digest);
    registry.stop();
    let offline = fetcher.fetch_cached(&tag, CAP, Some(&a_pub)).unwrap();
    assert_eq!(offline.origin, Origin::Cache);
    let pinned = tag.with_digest(&digest);
    assert_eq!(
        fetcher
            .fetch(&pinned, CAP, Some(&a_pub))
            .await
            .unwrap()
            .origin,
        Origin::Cache
    );
    // The cached signature is checked again with the key asked for: b's
    // was never fetched through this cache, a's is not b's.
    let err = fetcher.fetch_cached(&tag, CAP, Some(&b_pub)).unwrap_err();
    assert_eq!(err.kind(), "bad-signature", "{err}");
    assert!(
        err.to_string().contains(&b_public.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn an_unsigned_artifact_or_another_keys_signature_is_refused_naming_the_reference_and_key() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (_, a_public) = key_pair(keys.path(), "vendor");
    let (other_private, _) = key_pair(keys.path(), "other");
    let a_pub = PublicKey::read(&a_public).unwrap();
    let tag = registry.reference("vendor/gpu:1.4");
    let digest = client
        .push(&tag, &component(2, 1000), &meta("1.4"))
        .await
        .unwrap();

    let err = client.verify(&tag, &digest, &a_pub).await.unwrap_err();
    assert!(matches!(err, signature::Error::Unsigned { .. }), "{err}");
    assert_names(&err, &tag);
    assert!(
        err.to_string().contains(&a_public.display().to_string()),
        "{err}"
    );

    // A fetcher refuses it, and caches nothing.
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(client.clone(), Cache::open(cache_dir.path()).unwrap());
    let err = fetcher.fetch(&tag, CAP, Some(&a_pub)).await.unwrap_err();
    assert_eq!(err.kind(), "unsigned");
    assert!(fetcher.fetch_cached(&tag, CAP, None).is_err());

    client
        .sign(&tag, &PrivateKey::read(&other_private).unwrap())
        .await
        .unwrap();
    let err = client.verify(&tag, &digest, &a_pub).await.unwrap_err();
    assert!(
        matches!(err, signature::Error::WrongKey { count: 1, .. }),
        "{err}"
    );
    assert_names(&err, &tag);
    assert!(
        err.to_string().contains(&a_public.display().to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn a_signature_copied_from_another_digest_is_refused() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(keys.path(), "vendor");
    let key = PublicKey::read(&public).unwrap();
    let good = registry.reference("vendor/gpu:good");
    let evil = registry.reference("vendor/gpu:evil");
    let good_digest = client
        .push(&good, &component(3, 1000), &meta("1"))
        .await
        .unwrap();
    let evil_digest = client
        .push(&evil, &component(4, 1000), &meta("1"))
        .await
        .unwrap();
    client
        .sign(&good, &PrivateKey::read(&private).unwrap())
        .await
        .unwrap();

    // The good artifact's signature manifest, put where the evil one's
    // signature would be.
    let oci = Oci::new(&registry);
    let copied = oci.get_manifest(&signature_tag(&good, &good_digest)).await;
    oci.manifest(&signature_tag(&evil, &evil_digest), &copied)
        .await;
    let err = client.verify(&evil, &evil_digest, &key).await.unwrap_err();
    assert!(
        matches!(err, signature::Error::OtherDigest { ref signed, .. } if *signed == good_digest.to_string()),
        "{err}"
    );
    assert_names(&err, &evil);
    assert!(
        err.to_string().contains(&public.display().to_string()),
        "{err}"
    );
}

/// Signs `payload` with the openssl CLI (random nonces, unlike RustCrypto's
/// RFC 6979; about half of them have a high S, as Go's, so cosign's).
fn openssl_sign(dir: &std::path::Path, private: &std::path::Path, payload: &[u8]) -> String {
    let input = dir.join("payload.json");
    std::fs::write(&input, payload).unwrap();
    let out = Command::new("openssl")
        .args(["dgst", "-sha256", "-sign"])
        .arg(private)
        .arg(&input)
        .output()
        .unwrap();
    assert!(out.status.success());
    base64::engine::general_purpose::STANDARD.encode(out.stdout)
}

#[tokio::test]
async fn a_signature_made_by_another_signer_verifies_and_keyless_ones_are_named() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let (private, public) = key_pair(keys.path(), "vendor");
    let key = PublicKey::read(&public).unwrap();
    let tag = registry.reference("vendor/gpu:1");
    let digest = client
        .push(&tag, &component(5, 1000), &meta("1"))
        .await
        .unwrap();
    let payload = signature::payload(&tag, &digest);

    // Offline, many openssl signatures: high and low S both verify.
    for _ in 0..12 {
        let signature = StoredSignature {
            payload: payload.clone(),
            signature: openssl_sign(keys.path(), &private, &payload),
            format: Default::default(),
            material: None,
        };
        signature::verify_signatures(&tag, &digest, &key, &[signature], 0).unwrap();
    }

    // One written by hand in cosign's layout and verified from the registry.
    let oci = Oci::new(&registry);
    let sig_tag = signature_tag(&tag, &digest);
    let write_sig = |annotations: serde_json::Value| {
        let oci = &oci;
        let sig_tag = &sig_tag;
        let payload = &payload;
        async move {
            let layer = oci.blob(sig_tag, payload).await;
            let config = oci.blob(sig_tag, b"{}").await;
            oci.manifest(
                sig_tag,
                &serde_json::json!({
                    "schemaVersion": 2,
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config.as_str(), "size": 2},
                    "layers": [{"mediaType": SIMPLE_SIGNING_MEDIA_TYPE, "digest": layer.as_str(), "size": payload.len(), "annotations": annotations}],
                }),
            )
            .await;
        }
    };
    write_sig(
        serde_json::json!({SIGNATURE_ANNOTATION: openssl_sign(keys.path(), &private, &payload)}),
    )
    .await;
    client.verify(&tag, &digest, &key).await.unwrap();

    // A keyless signature (a Fulcio certificate, another key): named as
    // such, since a key cannot check it (a policy does: crate::policy).
    let (fulcio_private, _) = key_pair(keys.path(), "fulcio");
    write_sig(serde_json::json!({
        SIGNATURE_ANNOTATION: openssl_sign(keys.path(), &fulcio_private, &payload),
        "dev.sigstore.cosign/certificate": "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n",
    }))
    .await;
    let err = client.verify(&tag, &digest, &key).await.unwrap_err();
    assert!(
        matches!(err, signature::Error::Keyless { .. }),
        "{}",
        shown(&err)
    );
    assert!(
        err.to_string()
            .contains("cannot verify: verify them with a policy"),
        "{err}"
    );
}
