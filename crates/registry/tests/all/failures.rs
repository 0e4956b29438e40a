//! Each failure, against the real registry: its typed error, the reference
//! in its message, and no credential anywhere in it.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use nodestatus_registry::artifact::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE};
use nodestatus_registry::client::Error;
use nodestatus_registry::{Cache, Client, Fetcher, Reference, RegistrySettings};

use crate::pull::meta;
use crate::support::{Options, PASSWORD, Registry, USER, assert_names, component, oci::Oci, shown};

const CAP: u64 = 64 << 20;

#[tokio::test]
async fn a_wrong_password_or_none_is_401() {
    let registry = Registry::start();
    let tag = registry.reference("vendor/gpu:1");
    Client::new(registry.registries())
        .unwrap()
        .push(&tag, &component(1, 100), &meta("1"))
        .await
        .unwrap();
    let wrong = RegistrySettings {
        auth: Some(registry.auth_file(USER, "not-the-password")),
        ..registry.settings()
    };
    let none = RegistrySettings {
        auth: None,
        ..registry.settings()
    };
    for settings in [wrong, none] {
        let client = Client::new(registry.registries_with(settings)).unwrap();
        let err = client.pull(&tag, CAP).await.unwrap_err();
        assert!(
            matches!(err, Error::Unauthorized { status: 401, .. }),
            "{}",
            shown(&err)
        );
        assert_names(&err, &tag);
        let err = client
            .push(&tag, &component(2, 100), &meta("2"))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Unauthorized { .. }), "{}", shown(&err));
        assert_names(&err, &tag);
    }
}

#[tokio::test]
async fn the_settings_and_credentials_never_show_the_password() {
    let registry = Registry::start();
    let settings = registry.settings();
    let credentials = settings
        .read_credentials(&registry.host())
        .unwrap()
        .unwrap();
    assert_eq!(credentials.password.expose(), PASSWORD);
    let client = Client::new(registry.registries()).unwrap();
    for shown in [
        format!("{settings:?}"),
        format!("{credentials:?}"),
        format!("{client:?}"),
        format!("{:?}", registry.registries()),
    ] {
        assert!(!shown.contains(PASSWORD), "{shown}");
    }
    // A broken auth file whose text holds the password.
    let broken = registry.dir.path().join("broken.json");
    std::fs::write(
        &broken,
        format!(
            r#"{{"auths":{{"{}":{{"auth":"{PASSWORD}"}}}}}}"#,
            registry.host()
        ),
    )
    .unwrap();
    let client = Client::new(registry.registries_with(RegistrySettings {
        auth: Some(broken.clone()),
        ..registry.settings()
    }))
    .unwrap();
    let tag = registry.reference("vendor/gpu:1");
    let err = client.pull(&tag, CAP).await.unwrap_err();
    assert_eq!(err.kind(), "settings");
    assert_names(&err, &tag);
    assert!(
        shown(&err).contains(&broken.display().to_string()),
        "{}",
        shown(&err)
    );
}

#[tokio::test]
async fn an_unknown_or_deleted_tag_is_404_and_the_cache_keeps_the_last_digest() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let unknown = registry.reference("vendor/gpu:nope");
    let err = client.pull(&unknown, CAP).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{}", shown(&err));
    assert_names(&err, &unknown);
    let no_repo = registry.reference("vendor/nothing-here:1");
    let err = client.resolve(&no_repo).await.unwrap_err();
    assert!(matches!(err, Error::NotFound { .. }), "{}", shown(&err));

    let tag = registry.reference("vendor/gpu:1.4");
    let bytes = component(3, 100);
    let digest = client.push(&tag, &bytes, &meta("1.4")).await.unwrap();
    let cache_dir = tempfile::tempdir().unwrap();
    let fetcher = Fetcher::new(client.clone(), Cache::open(cache_dir.path()).unwrap());
    fetcher.fetch(&tag, CAP, None).await.unwrap();
    std::fs::remove_dir_all(registry.tag_dir("vendor/gpu", "1.4")).unwrap();
    let err = fetcher.fetch(&tag, CAP, None).await.unwrap_err();
    assert_eq!(err.kind(), "not-found", "{}", shown(&err));
    assert_names(&err, &tag);
    let last = fetcher.fetch_cached(&tag, CAP, None).unwrap();
    assert_eq!((last.artifact.digest, last.artifact.bytes), (digest, bytes));
}

#[tokio::test]
async fn a_blob_tampered_with_in_the_registrys_storage_is_refused_for_its_digest() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let tag = registry.reference("vendor/gpu:1");
    let bytes = component(4, 50_000);
    client.push(&tag, &bytes, &meta("1")).await.unwrap();
    let artifact = client.pull(&tag, CAP).await.unwrap();
    let data = registry.blob_file(&artifact.layer_digest);
    let mut evil = std::fs::read(&data).unwrap();
    assert_eq!(evil, bytes);
    evil[40_000] ^= 0xff;
    std::fs::write(&data, &evil).unwrap();
    let err = client.pull(&tag, CAP).await.unwrap_err();
    match &err {
        Error::DigestMismatch { expected, .. } => {
            assert_eq!(*expected, artifact.layer_digest.to_string())
        }
        _ => panic!("{}", shown(&err)),
    }
    assert_names(&err, &tag);
}

#[tokio::test]
async fn a_component_over_the_cap_is_refused_before_or_while_streaming() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let oci = Oci::new(&registry);

    // A manifest that declares a 200 MB layer (over a small blob): refused
    // before a byte of it is asked for.
    let huge = registry.reference("vendor/huge:1");
    oci.push(
        &huge,
        CNCF_CONFIG_MEDIA_TYPE,
        &[(CNCF_LAYER_MEDIA_TYPE, &component(5, 100), Some(200_000_000))],
    )
    .await;
    let err = client.pull(&huge, CAP).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::DeclaredTooLarge {
                size: 200_000_000,
                limit: CAP,
                ..
            }
        ),
        "{}",
        shown(&err)
    );
    assert_names(&err, &huge);

    // A 3 MiB blob declared as 1 MiB, pulled with a cap of 1 MiB: the
    // stream is cut just past the cap, long before its end.
    let cap = 1 << 20;
    let blob = component(6, 3 << 20);
    let liar = registry.reference("vendor/liar:1");
    oci.push(
        &liar,
        CNCF_CONFIG_MEDIA_TYPE,
        &[(CNCF_LAYER_MEDIA_TYPE, &blob, Some(cap))],
    )
    .await;
    let err = client.pull(&liar, cap).await.unwrap_err();
    match &err {
        Error::StreamTooLarge {
            limit, received, ..
        } => {
            assert_eq!(*limit, cap);
            assert!(
                *received > cap && *received < 2 * cap,
                "received {received}"
            );
        }
        _ => panic!("{}", shown(&err)),
    }
    assert_names(&err, &liar);

    // Declared smaller than it is, under the cap: the size does not match.
    let small = registry.reference("vendor/small:1");
    oci.push(
        &small,
        CNCF_CONFIG_MEDIA_TYPE,
        &[(CNCF_LAYER_MEDIA_TYPE, &blob, Some(1000))],
    )
    .await;
    let err = client.pull(&small, CAP).await.unwrap_err();
    assert!(
        matches!(err, Error::SizeMismatch { declared: 1000, .. }),
        "{}",
        shown(&err)
    );
}

#[tokio::test]
async fn plain_http_is_refused_unless_that_registry_is_insecure() {
    let registry = Registry::start_with(Options {
        tls: false,
        auth: false,
        ..Default::default()
    });
    let tag = registry.reference("vendor/gpu:1");
    let https = Client::new(registry.registries_with(RegistrySettings::default())).unwrap();
    let err = https
        .push(&tag, &component(7, 100), &meta("1"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{}", shown(&err));
    assert!(err.to_string().contains("insecure: true"), "{err}");
    assert_names(&err, &tag);

    let insecure = Client::new(registry.registries()).unwrap();
    let digest = insecure
        .push(&tag, &component(7, 100), &meta("1"))
        .await
        .unwrap();
    assert_eq!(insecure.pull(&tag, CAP).await.unwrap().digest, digest);

    // `insecure` is for the registry named, not another name of the same
    // server.
    let other_name =
        Reference::parse(&format!("localhost:{}/vendor/gpu:1", registry.addr.port())).unwrap();
    let err = insecure.pull(&other_name, CAP).await.unwrap_err();
    assert!(matches!(err, Error::Tls { .. }), "{}", shown(&err));
}

#[tokio::test]
async fn tls_needs_the_registrys_ca() {
    let registry = Registry::start();
    let other = Registry::start_with(Options {
        tls: true,
        auth: false,
        ..Default::default()
    });
    let tag = registry.reference("vendor/gpu:1");
    let with_ca = Client::new(registry.registries()).unwrap();
    with_ca
        .push(&tag, &component(8, 100), &meta("1"))
        .await
        .unwrap();
    for ca in [None, Some(other.ca())] {
        let client = Client::new(registry.registries_with(RegistrySettings {
            ca,
            ..registry.settings()
        }))
        .unwrap();
        let err = client.pull(&tag, CAP).await.unwrap_err();
        assert!(matches!(err, Error::Tls { .. }), "{}", shown(&err));
        assert!(
            err.to_string()
                .contains(&format!("registries.{}.ca", registry.host())),
            "{err}"
        );
        assert_names(&err, &tag);
    }
}

#[tokio::test]
async fn a_registry_that_never_answers_ends_at_the_deadline() {
    // Listening, never accepting: the kernel completes the handshake, and
    // nothing is ever said.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let host = silent.local_addr().unwrap().to_string();
    let tag = Reference::parse(&format!("{host}/vendor/gpu:1")).unwrap();
    for insecure in [false, true] {
        let settings = RegistrySettings {
            insecure,
            ..RegistrySettings::default()
        };
        let client = Client::new(nodestatus_registry::Registries(
            [(host.clone(), settings)].into(),
        ))
        .unwrap()
        .with_timeout(Duration::from_millis(800));
        let start = Instant::now();
        let err = client.pull(&tag, CAP).await.unwrap_err();
        let took = start.elapsed();
        assert!(matches!(err, Error::Timeout { .. }), "{}", shown(&err));
        assert!(
            took >= Duration::from_millis(700) && took < Duration::from_secs(5),
            "{took:?}"
        );
        assert_names(&err, &tag);
        let start = Instant::now();
        let err = client.resolve(&tag).await.unwrap_err();
        assert!(matches!(err, Error::Timeout { .. }), "{}", shown(&err));
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}

#[tokio::test]
async fn a_registry_that_is_down_is_unreachable() {
    let mut registry = Registry::start();
    registry.stop();
    let client = Client::new(registry.registries()).unwrap();
    let tag = registry.reference("vendor/gpu:1");
    let err = client.pull(&tag, CAP).await.unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{}", shown(&err));
    assert_eq!(err.kind(), "unreachable");
    assert_names(&err, &tag);
}

#[tokio::test]
async fn a_registry_whose_storage_fails_answers_5xx() {
    let registry = Registry::start();
    let client = Client::new(registry.registries()).unwrap();
    let tag = registry.reference("vendor/gpu:1");
    let bytes = component(9, 1000);
    client.push(&tag, &bytes, &meta("1")).await.unwrap();
    // The tag's link in the registry's storage holds no digest.
    std::fs::write(
        registry.tag_dir("vendor/gpu", "1").join("current/link"),
        "not a digest",
    )
    .unwrap();
    let err = client.pull(&tag, CAP).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Status {
                status: 500..=599,
                ..
            }
        ),
        "{}",
        shown(&err)
    );
    assert_eq!(err.kind(), "server");
    assert_names(&err, &tag);
}
