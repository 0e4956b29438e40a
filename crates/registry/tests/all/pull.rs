//! Push, pull by tag and by digest, the cache, and the layouts.

use std::time::Duration;

use nodestatus_registry::artifact::{
    OCI_INDEX_MEDIA_TYPE, WASM_V1_CONFIG_MEDIA_TYPE, WASM_V1_LAYER_MEDIA_TYPE,
};
use nodestatus_registry::{
    ANNOTATION_VERSION, ANNOTATION_WORLD, Cache, Client, Digest, Fetcher, Layout, Origin, PushMeta,
};

use crate::support::{self, Registry, assert_names, component};

const CAP: u64 = 64 << 20;

pub fn meta(version: &str) -> PushMeta {
    PushMeta {
        world: "nodestatus:plugin/plugin@0.1.1".into(),
        version: version.into(),
        ..PushMeta::default()
    }
}

#[tokio::test]
async fn a_pushed_component_pulls_by_tag_and_by_digest() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let tag = registry.reference("vendor/gpu:1.4");
    let bytes = component(1, 300_000);
    let digest = client.push(&tag, &bytes, &meta("1.4.0")).await.unwrap();
    // The same bytes and metadata give the same digest.
    assert_eq!(
        client.push(&tag, &bytes, &meta("1.4.0")).await.unwrap(),
        digest
    );

    assert_eq!(client.resolve(&tag).await.unwrap(), digest);
    let by_tag = client.pull(&tag, CAP).await.unwrap();
    assert_eq!(by_tag.digest, digest);
    assert_eq!(by_tag.bytes, bytes);
    assert_eq!(by_tag.layer_digest, Digest::of(&bytes));
    assert_eq!(by_tag.layout, Layout::Cncf);
    assert_eq!(by_tag.world(), Some("nodestatus:plugin/plugin@0.1.1"));
    assert_eq!(by_tag.version(), Some("1.4.0"));
    assert_eq!(
        by_tag.annotations[ANNOTATION_WORLD],
        "nodestatus:plugin/plugin@0.1.1"
    );
    assert_eq!(by_tag.annotations[ANNOTATION_VERSION], "1.4.0");

    let pinned = tag.with_digest(&digest);
    let by_digest = client.pull(&pinned, CAP).await.unwrap();
    assert_eq!((by_digest.digest, by_digest.bytes), (digest.clone(), bytes));
    // A pinned reference with a tag as well: the digest decides.
    let both = registry.reference(&format!("vendor/gpu:9.9@{digest}"));
    assert_eq!(client.pull(&both, CAP).await.unwrap().digest, digest);
}

#[tokio::test]
async fn a_cached_digest_is_served_without_the_registry_and_a_tag_falls_back_to_its_last_digest() {
    let mut registry = Registry::start();
    let client = Client::new(registry.registries())
        .unwrap()
        .with_timeout(Duration::from_secs(5));
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(
        client.clone(),
        Cache::open(cache_dir.path().join("registry")).unwrap(),
    );
    let tag = registry.reference("vendor/gpu:1.4");
    let v1 = component(1, 10_000);
    let d1 = client.push(&tag, &v1, &meta("1.4.0")).await.unwrap();

    let first = fetcher.fetch(&tag, CAP, None).await.unwrap();
    assert_eq!(
        (first.origin, &first.artifact.digest),
        (Origin::Registry, &d1)
    );
    // The tag again: resolved, found in the cache, nothing downloaded.
    let again = fetcher.fetch(&tag, CAP, None).await.unwrap();
    assert_eq!((again.origin, &again.artifact.digest), (Origin::Cache, &d1));

    // A new version under the tag is pulled.
    let v2 = component(2, 10_000);
    let d2 = client.push(&tag, &v2, &meta("1.5.0")).await.unwrap();
    let new = fetcher.fetch(&tag, CAP, None).await.unwrap();
    assert_eq!(
        (new.origin, &new.artifact.digest, &new.artifact.bytes),
        (Origin::Registry, &d2, &v2)
    );

    // The registry stops: the pinned digest is served from the cache, with
    // no request (a request would fail: see the tag below).
    registry.stop();
    let pinned = tag.with_digest(&d1);
    let offline = fetcher.fetch(&pinned, CAP, None).await.unwrap();
    assert_eq!(
        (offline.origin, offline.artifact.bytes),
        (Origin::Cache, v1.clone())
    );
    let err = fetcher.fetch(&tag, CAP, None).await.unwrap_err();
    assert_eq!(err.kind(), "unreachable", "{err}");
    assert_names(&err, &tag);

    // A restart with the registry down: the tag's last digest, from a new
    // fetcher over the same directory.
    let restarted = Fetcher::new(
        client,
        Cache::open(cache_dir.path().join("registry")).unwrap(),
    );
    let cached = restarted.fetch_cached(&tag, CAP, None).unwrap();
    assert_eq!((cached.artifact.digest, cached.artifact.bytes), (d2, v2));
    let unknown = registry.reference("vendor/other:1");
    let err = restarted.fetch_cached(&unknown, CAP, None).unwrap_err();
    assert_eq!(err.kind(), "not-cached");
    assert_names(&err, &unknown);
}

#[tokio::test]
async fn a_tampered_cache_file_is_refused_and_pulled_again() {
    let mut registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(client.clone(), Cache::open(cache_dir.path()).unwrap());
    let tag = registry.reference("vendor/gpu:1");
    let bytes = component(3, 5_000);
    let digest = client.push(&tag, &bytes, &meta("1")).await.unwrap();
    fetcher.fetch(&tag, CAP, None).await.unwrap();
    let blob = cache_dir
        .path()
        .join("blobs/sha256")
        .join(Digest::of(&bytes).hex());
    let mut evil = std::fs::read(&blob).unwrap();
    evil[100] ^= 1;
    std::fs::write(&blob, &evil).unwrap();

    // Online: refused, removed, and pulled again.
    let pinned = tag.with_digest(&digest);
    let fetched = fetcher.fetch(&pinned, CAP, None).await.unwrap();
    assert_eq!(
        (fetched.origin, &fetched.artifact.bytes),
        (Origin::Registry, &bytes)
    );

    // Offline: refused with the reason.
    std::fs::write(&blob, &evil).unwrap();
    registry.stop();
    let err = fetcher.fetch_cached(&pinned, CAP, None).unwrap_err();
    assert_eq!(err.kind(), "cache");
    assert!(
        support::shown(&err).contains("tampered"),
        "{}",
        support::shown(&err)
    );
    assert_names(&err, &pinned);
}

#[tokio::test]
async fn the_kubewarden_layout_is_accepted_and_other_layouts_are_refused() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let oci = support::oci::Oci::new(&registry);
    let bytes = component(4, 1_000);
    let kubewarden = registry.reference("vendor/policy:1");
    oci.push(
        &kubewarden,
        WASM_V1_CONFIG_MEDIA_TYPE,
        &[(WASM_V1_LAYER_MEDIA_TYPE, &bytes, None)],
    )
    .await;
    let artifact = client.pull(&kubewarden, CAP).await.unwrap();
    assert_eq!(
        (artifact.layout, artifact.bytes),
        (Layout::WasmV1, bytes.clone())
    );

    let image = registry.reference("vendor/image:1");
    oci.push(
        &image,
        "application/vnd.oci.image.config.v1+json",
        &[("application/vnd.oci.image.layer.v1.tar+gzip", &bytes, None)],
    )
    .await;
    let err = client.pull(&image, CAP).await.unwrap_err();
    assert_eq!(err.kind(), "layout", "{err}");
    assert_names(&err, &image);

    // An index over a component's manifest: refused by name.
    let plain = registry.reference("vendor/multi:plain");
    client.push(&plain, &bytes, &meta("1")).await.unwrap();
    let component = client.pull(&plain, CAP).await.unwrap();
    let (component_digest, size) = (component.digest.clone(), component.manifest_bytes().len());
    let index = registry.reference("vendor/multi:1");
    oci.manifest_of_type(
        &index,
        &serde_json::json!({
            "schemaVersion": 2,
            "mediaType": OCI_INDEX_MEDIA_TYPE,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": component_digest.as_str(),
                "size": size,
                "platform": {"architecture": "wasm", "os": "wasip2"},
            }],
        }),
        OCI_INDEX_MEDIA_TYPE,
    )
    .await;
    let err = client.pull(&index, CAP).await.unwrap_err();
    assert!(err.to_string().contains("image index"), "{err}");
    assert_eq!(err.kind(), "layout");
}
