//! Plugins by reference, end to end: a real registry (Debian's
//! `docker-registry`, TLS from a CA made here, htpasswd), the real
//! `nodestatus` binary (`plugin push`, `plugin sign`, `plugin pull`, `run`)
//! and the real apiserver. Each failure keeps the running version and says
//! why in `/readyz`, the metric and a Warning event; a restart with the
//! registry down starts from the cache.
//!
//! Needs `scripts/ensure-packages.sh docker-registry apache2-utils openssl`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use k8s_openapi::api::core::v1::Event;
use kube::api::Api;
use nodestatus_registry::artifact::{CNCF_CONFIG_MEDIA_TYPE, CNCF_LAYER_MEDIA_TYPE};
use nodestatus_registry::{Client, Digest, PushMeta};
use nodestatus_tests::registry::{PASSWORD, Registry, USER, key_pair, oci::Oci};
use nodestatus_tests::{built, hostile};

use crate::fleet::{Published, Signer, Vendor};
use crate::kube::{admin, http_get, metric, server_node, until, write_node_kubeconfig};

pub(crate) const LABEL: &str = "probe.nodestatus.test/version";
pub(crate) const REPO: &str = "vendor/probe";

/// Runs `nodestatus ARGS`; returns its stdout, or panics with its stderr.
pub(crate) fn cli(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nodestatus {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A free port on 127.0.0.1.
pub(crate) fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// `nodestatus run` for `node` with `config`, its HTTP endpoint at `addr`,
/// its log in `dir`. Dies with the test.
pub(crate) fn engine(dir: &Path, node: &str, config: &Path, addr: SocketAddr) -> Child {
    let kubeconfig = write_node_kubeconfig(dir, node);
    let log = std::fs::File::create(dir.join(format!("{node}.log"))).unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_nodestatus"));
    c.args(["run", "--node-name", node])
        .args(["--node-status-update-frequency", "1s"])
        .args(["--node-lease-duration-seconds", "4"])
        .arg("--address")
        .arg(addr.to_string())
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--config")
        .arg(config)
        .env("RUST_LOG", "info,nodestatus_engine::oci=debug")
        .stdout(std::process::Stdio::null())
        .stderr(log);
    nodestatus_controlplane::kill_with_parent(&mut c);
    c.spawn().unwrap()
}

/// The config of a node: the registry's CA and credentials, the key, the
/// plugin `probe` from `image`, checked every second (`pullPolicy:
/// Always`: a tag is resolved again at each check).
fn write_config(dir: &Path, registry: &Registry, auth: &Path, key: &Path, image: &str) -> PathBuf {
    let plugins = dir.join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let path = dir.join("config.yaml");
    let text = format!(
        "pluginDir: {}\ncacheDir: {}\n{}verify:\n  key: {}\nplugins:\n  probe:\n    image: {image}\n    pullInterval: 1s\n    pullPolicy: Always\n",
        plugins.display(),
        built::TEST_CACHE_DIR,
        registry.config_yaml(auth),
        key.display(),
    );
    // Write, then rename: the engine reads it live.
    let tmp = dir.join(".config.yaml.tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, &path).unwrap();
    path
}

/// The component with a custom section appended: the same plugin, another
/// digest.
pub(crate) fn variant(component: &[u8], tag: &str) -> Vec<u8> {
    let name = b"nodestatus-test";
    let mut payload = vec![name.len() as u8];
    payload.extend(name);
    payload.extend(tag.as_bytes());
    let mut out = component.to_vec();
    out.push(0);
    out.push(payload.len() as u8);
    out.extend(payload);
    out
}

pub(crate) async fn label(node: &str) -> Option<String> {
    server_node(node)
        .await
        .and_then(|n| n["metadata"]["labels"][LABEL].as_str().map(str::to_owned))
}

pub(crate) async fn get(addr: SocketAddr, path: &'static str) -> (u16, String) {
    tokio::task::spawn_blocking(move || http_get(addr, path))
        .await
        .unwrap()
}

/// How many checks of `probe` ended with `result`.
pub(crate) async fn pulls(addr: SocketAddr, result: &str) -> f64 {
    let (_, text) = get(addr, "/metrics").await;
    metric(
        &text,
        &format!("nodestatus_registry_pulls_total{{plugin=\"probe\",result=\"{result}\"}}"),
    )
}

/// The `FailedPluginPull` Warning events of `node`.
pub(crate) async fn warnings(node: &str) -> Vec<String> {
    Api::<Event>::namespaced(admin(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(node))
        .filter(|e| e.reason.as_deref() == Some("FailedPluginPull"))
        .map(|e| e.message.unwrap_or_default())
        .collect()
}

/// Waits for a check that ends with `result`, then checks that version
/// `running` of the probe still runs, that `/readyz` stays ready and says
/// `why`, and that a Warning event says it too.
async fn refused(node: &str, addr: SocketAddr, result: &str, why: &str, running: &str) {
    let before = pulls(addr, result).await;
    assert!(
        until(30, || async { pulls(addr, result).await > before }).await,
        "no {result} check within 30 s; /readyz: {:?}",
        get(addr, "/readyz").await
    );
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains(why) && body.contains("plugin probe:"),
        "/readyz does not say {why:?}: {body}"
    );
    assert!(
        body.contains("keeping sha256:"),
        "/readyz does not say what runs: {body}"
    );
    assert!(!body.contains(PASSWORD), "{body}");
    assert_eq!(label(node).await.as_deref(), Some(running));
    assert!(
        until(10, || async {
            warnings(node).await.iter().any(|m| m.contains(why))
        })
        .await,
        "no Warning event says {why:?}: {:?}",
        warnings(node).await
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_by_reference_is_pulled_verified_swapped_and_kept_through_every_failure() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut registry = Registry::start();
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    let (other_key, _) = key_pair(d, "other");
    let auth = d.join("auth.json");
    std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
    let host = registry.host();
    let at = |tag: &str| format!("{host}/{REPO}:{tag}");

    // Publish 1.0.0 with the CLI, sign it, and see what a node would load.
    let config = write_config(d, &registry, &auth, &vendor_pub, &at("stable"));
    let cfg = config.to_str().unwrap();
    let pushed = cli(&[
        "plugin",
        "push",
        built::PROBE,
        &at("1.0.0"),
        "--config",
        cfg,
    ]);
    let pinned = pushed.trim().to_owned();
    assert!(
        pinned.starts_with(&format!("{host}/{REPO}@sha256:")),
        "{pushed}"
    );
    let signed = cli(&[
        "plugin",
        "sign",
        &pinned,
        "--key",
        vendor_key.to_str().unwrap(),
        "--config",
        cfg,
    ]);
    assert_eq!(signed.trim(), pinned);
    let pulled: serde_json::Value =
        serde_json::from_str(&cli(&["plugin", "pull", &at("1.0.0"), "--config", cfg])).unwrap();
    assert_eq!(pulled["pinned"], pinned.as_str(), "{pulled}");
    assert_eq!(
        pulled["world"],
        nodestatus_runtime::Interface::V0_2.world(),
        "{pulled}"
    );
    assert_eq!(pulled["version"], "1.0.0", "{pulled}");
    assert_eq!(pulled["metadata"]["name"], "probe", "{pulled}");
    assert_eq!(pulled["signature"]["verified"], true, "{pulled}");

    // By digest: the engine pulls, verifies and loads it; its label comes.
    write_config(d, &registry, &auth, &vendor_pub, &pinned);
    let node = "registry-node";
    let addr = free_addr();
    let mut engine_a = engine(d, node, &config, addr);
    let log_a = d.join(format!("{node}.log"));
    assert!(
        until(60, || async { label(node).await.as_deref() == Some("1") }).await,
        "the plugin by digest never labelled the node: {}",
        std::fs::read_to_string(d.join(format!("{node}.log"))).unwrap_or_default()
    );

    // By tag (a live config change), then a new version under the tag:
    // pushed unsigned, signed by another key, then by the vendor's.
    let client = Client::new(registry.registries()).unwrap();
    cli(&[
        "plugin",
        "push",
        built::PROBE,
        &at("stable"),
        "--config",
        cfg,
    ]);
    let before = pulls(addr, "pulled").await;
    write_config(d, &registry, &auth, &vendor_pub, &at("stable"));
    assert!(
        until(30, || async { pulls(addr, "pulled").await > before }).await,
        "the tag was not taken: {:?}",
        get(addr, "/readyz").await
    );
    // A plugin is named by its file, as in a plugin directory.
    std::fs::create_dir_all(d.join("v2")).unwrap();
    let v2_file = d.join("v2/probe.wasm");
    std::fs::copy(built::PROBE_V2, &v2_file).unwrap();
    let v2 = cli(&[
        "plugin",
        "push",
        v2_file.to_str().unwrap(),
        &at("stable"),
        "--config",
        cfg,
    ]);
    refused(node, addr, "unsigned", "is not signed", "1").await;
    cli(&[
        "plugin",
        "sign",
        v2.trim(),
        "--key",
        other_key.to_str().unwrap(),
        "--config",
        cfg,
    ]);
    refused(node, addr, "bad-signature", "was made by the key", "1").await;
    cli(&[
        "plugin",
        "sign",
        v2.trim(),
        "--key",
        vendor_key.to_str().unwrap(),
        "--config",
        cfg,
    ]);
    assert!(
        until(30, || async { label(node).await.as_deref() == Some("2") }).await,
        "2.0.0 was not swapped in: {:?}",
        get(addr, "/readyz").await
    );
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!((code, body.as_str()), (200, "ok"));

    // The wrong password (the auth file is read at each check).
    std::fs::copy(registry.auth_file(USER, "not-the-password"), &auth).unwrap();
    refused(node, addr, "unauthorized", "401", "2").await;
    std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();

    // The registry stopped, then back.
    registry.stop();
    refused(node, addr, "unreachable", "cannot reach the registry", "2").await;
    registry.restart();

    // A new version whose blob is changed in the registry's storage, then
    // moved under the tag.
    let oci = Oci::new(&registry);
    let sign = |digest: &Digest| {
        let r = format!("{host}/{REPO}@{digest}");
        cli(&[
            "plugin",
            "sign",
            &r,
            "--key",
            vendor_key.to_str().unwrap(),
            "--config",
            cfg,
        ]);
    };
    let meta = PushMeta {
        world: nodestatus_runtime::Interface::V0_2.world().into(),
        version: "1.0.0".into(),
        ..Default::default()
    };
    let bytes = variant(&std::fs::read(built::PROBE).unwrap(), "tampered");
    let staging = registry.reference(&format!("{REPO}:staging"));
    let digest = client.push(&staging, &bytes, &meta).await.unwrap();
    sign(&digest);
    let blob = registry.blob_file(&Digest::of(&bytes));
    let mut tampered = std::fs::read(&blob).unwrap();
    *tampered.last_mut().unwrap() ^= 1;
    std::fs::write(&blob, tampered).unwrap();
    let manifest = oci.get_manifest(&staging).await;
    let stable = registry.reference(&format!("{REPO}:stable"));
    oci.manifest(&stable, &manifest).await;
    refused(
        node,
        addr,
        "digest-mismatch",
        "served content whose digest",
        "2",
    )
    .await;

    // A manifest pointing at a 200 MB layer: declared, it is refused before
    // a byte is fetched; declared at the cap, the stream is cut at the cap.
    let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
    for (declared, tag, why) in [
        (200_000_000, "huge", "over the cap of"),
        (cap, "liar", "while streaming"),
    ] {
        let small = variant(&std::fs::read(built::PROBE).unwrap(), tag);
        let at_tag = registry.reference(&format!("{REPO}:{tag}"));
        oci.push(
            &at_tag,
            CNCF_CONFIG_MEDIA_TYPE,
            &[(CNCF_LAYER_MEDIA_TYPE, &small, Some(declared))],
        )
        .await;
        // The blob in storage becomes 200 MB (sparse: no disk is used).
        std::fs::File::options()
            .write(true)
            .open(registry.blob_file(&Digest::of(&small)))
            .unwrap()
            .set_len(200_000_000)
            .unwrap();
        let manifest = oci.get_manifest(&at_tag).await;
        let digest = oci.manifest(&stable, &manifest).await;
        sign(&digest);
        refused(node, addr, "too-large", why, "2").await;
    }

    // A component the loader refuses (another world), signed.
    let wrong = client
        .push(&stable, &hostile::wrong_world(), &meta)
        .await
        .unwrap();
    sign(&wrong);
    refused(node, addr, "refused", "refused by the plugin loader", "2").await;

    // The tag deleted.
    std::fs::remove_dir_all(registry.tag_dir(REPO, "stable")).unwrap();
    refused(node, addr, "not-found", "stable", "2").await;

    // A restart, as another node, with the registry down: the cached
    // version runs.
    engine_a.kill().unwrap();
    engine_a.wait().unwrap();
    registry.stop();
    let node = "registry-restart-node";
    let addr = free_addr();
    let mut engine_b = engine(d, node, &config, addr);
    assert!(
        until(60, || async { label(node).await.as_deref() == Some("2") }).await,
        "the cached version did not start: {}",
        std::fs::read_to_string(d.join(format!("{node}.log"))).unwrap_or_default()
    );
    assert!(pulls(addr, "cached").await >= 1.0);
    // Then the registry is checked, and found down.
    assert!(
        until(30, || async {
            let (code, body) = get(addr, "/readyz").await;
            code == 200 && body.contains("plugin probe:") && body.contains("cannot reach")
        })
        .await,
        "/readyz: {:?}",
        get(addr, "/readyz").await
    );
    engine_b.kill().unwrap();
    engine_b.wait().unwrap();
    let log = std::fs::read_to_string(log_a).unwrap();
    assert!(!log.contains(PASSWORD), "the log shows the password");
}

/// A node's Ready condition: its status and message.
pub(crate) async fn ready(node: &str) -> Option<(String, String)> {
    let n = server_node(node).await?;
    let c = crate::kube::condition(&n, "Ready")?;
    Some((
        c["status"].as_str()?.to_owned(),
        c["message"].as_str().unwrap_or_default().to_owned(),
    ))
}

/// The operator's verification key replaced in place by one that did not
/// sign the running version: a registry outage first keeps it, then the
/// check with the registry back stops it, releases its label, says why
/// (in `/readyz` and a `PluginUntrusted` event), and the node goes not
/// Ready, as the plugin affects readiness; a signature by the new key
/// brings it back.
#[tokio::test(flavor = "multi_thread")]
async fn a_key_that_no_longer_trusts_the_running_plugin_stops_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mut registry = Registry::start();
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    let (rotated_key, rotated_pub) = key_pair(d, "rotated");
    let key = d.join("trusted.pub");
    std::fs::copy(&vendor_pub, &key).unwrap();
    let auth = d.join("auth.json");
    std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
    let image = format!("{}/{REPO}:stable", registry.host());
    let config = write_config(d, &registry, &auth, &key, &image);
    // A cache of its own: the active file of a plugin `probe` is
    // `<cacheDir>/registry-plugins/probe.wasm`, which the test beside it
    // writes too.
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(built::TEST_CACHE_DIR, d.join("cache").to_str().unwrap())
        + "    affectsReadiness: true\n";
    std::fs::write(&config, text).unwrap();
    std::fs::copy(built::READY, d.join("plugins/ready.wasm")).unwrap();
    let cfg = config.to_str().unwrap();
    let pinned = cli(&["plugin", "push", built::PROBE, &image, "--config", cfg]);
    let sign = |with: &Path| {
        cli(&[
            "plugin",
            "sign",
            pinned.trim(),
            "--key",
            with.to_str().unwrap(),
            "--config",
            cfg,
        ])
    };
    sign(&vendor_key);

    let node = "untrusted-node";
    let addr = free_addr();
    let mut first = engine(d, node, &config, addr);
    let log = d.join(format!("{node}.log"));
    assert!(
        until(60, || async {
            label(node).await.as_deref() == Some("1")
                && ready(node).await.is_some_and(|(s, _)| s == "True")
        })
        .await,
        "the plugin never labelled a Ready node: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );

    // The key rotated while the registry is down: nothing says the running
    // version is not trusted, so it keeps running.
    registry.stop();
    std::fs::copy(&rotated_pub, &key).unwrap();
    refused(node, addr, "unreachable", "cannot reach the registry", "1").await;
    assert_eq!(ready(node).await.unwrap().0, "True");

    // The registry back: the running version is not signed by the new key.
    registry.restart();
    assert!(
        until(30, || async { label(node).await.is_none() }).await,
        "the untrusted version still labels the node: {:?}",
        get(addr, "/readyz").await
    );
    assert!(
        until(20, || async {
            ready(node)
                .await
                .is_some_and(|(s, m)| s == "False" && m.contains("probe"))
        })
        .await,
        "Ready did not follow the plugin's affectsReadiness: {:?}",
        ready(node).await
    );
    // The engine itself is healthy: /readyz says why the plugin is stopped.
    let (_, body) = get(addr, "/readyz").await;
    assert!(
        body.contains("plugin probe:")
            && body.contains("stopped sha256:")
            && body.contains("does not trust it"),
        "{body}"
    );
    let untrusted = Api::<Event>::namespaced(admin(), "default")
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some(node))
        .filter(|e| e.reason.as_deref() == Some("PluginUntrusted"))
        .count();
    assert_eq!(untrusted, 1);

    // Signed by the new key: it runs again, and the node is Ready.
    sign(&rotated_key);
    assert!(
        until(30, || async {
            label(node).await.as_deref() == Some("1")
                && ready(node).await.is_some_and(|(s, _)| s == "True")
        })
        .await,
        "the version signed by the new key did not come back: {:?} {:?}",
        get(addr, "/readyz").await,
        ready(node).await
    );
    first.kill().unwrap();
    first.wait().unwrap();

    // A restart with the registry down and a key that signed nothing in
    // the cache: the cached version does not start, and the plugin counts
    // as failing.
    registry.stop();
    let (_, third_pub) = key_pair(d, "third");
    std::fs::copy(&third_pub, &key).unwrap();
    let node = "untrusted-restart-node";
    let addr = free_addr();
    let mut second = engine(d, node, &config, addr);
    assert!(
        until(60, || async {
            ready(node)
                .await
                .is_some_and(|(s, m)| s == "False" && m.contains("probe"))
        })
        .await,
        "Ready did not follow the plugin's affectsReadiness at a start: {:?} {}",
        ready(node).await,
        std::fs::read_to_string(d.join(format!("{node}.log"))).unwrap_or_default()
    );
    assert_eq!(label(node).await, None);
    let (_, body) = get(addr, "/readyz").await;
    assert!(body.contains("plugin probe:"), "{body}");
    second.kill().unwrap();
    second.wait().unwrap();
}

/// A registry, the vendor's key pair in `d`, and a config with the
/// registry's CA and credentials (`d/bare.yaml`).
fn signing_registry(d: &Path) -> (Registry, PathBuf, PathBuf, PathBuf) {
    let registry = Registry::start();
    let (vendor_key, vendor_pub) = key_pair(d, "vendor");
    let auth = d.join("auth.json");
    std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
    let bare = d.join("bare.yaml");
    std::fs::write(&bare, registry.config_yaml(&auth)).unwrap();
    (registry, vendor_key, vendor_pub, bare)
}

/// `plugin pull` by tag, with a config whose plugin pins a digest of that
/// repository and has its own `verify` key, checks the signature with that
/// key, and says so; without any key it says that nothing was checked.
#[test]
fn a_pull_by_tag_checks_the_signature_with_the_key_of_the_plugin_that_pins_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (registry, vendor_key, vendor_pub, bare) = signing_registry(d);
    let tag = format!("{}/{REPO}:1.0.0", registry.host());
    let pinned = cli(&[
        "plugin",
        "push",
        built::PROBE,
        &tag,
        "--config",
        bare.to_str().unwrap(),
    ]);
    cli(&[
        "plugin",
        "sign",
        pinned.trim(),
        "--key",
        vendor_key.to_str().unwrap(),
        "--config",
        bare.to_str().unwrap(),
    ]);
    let cluster = d.join("cluster.yaml");
    std::fs::write(
        &cluster,
        format!(
            "{}plugins:\n  probe:\n    image: {}\n    verify:\n      key: {}\n",
            std::fs::read_to_string(&bare).unwrap(),
            pinned.trim(),
            vendor_pub.display()
        ),
    )
    .unwrap();
    let pulled: serde_json::Value = serde_json::from_str(&cli(&[
        "plugin",
        "pull",
        &tag,
        "--config",
        cluster.to_str().unwrap(),
    ]))
    .unwrap();
    assert_eq!(pulled["plugin"], "probe", "{pulled}");
    assert_eq!(pulled["signature"]["verified"], true, "{pulled}");
    assert_eq!(
        pulled["signature"]["key"],
        vendor_pub.to_str().unwrap(),
        "{pulled}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["plugin", "pull", &tag, "--config", bare.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success());
    let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pulled["signature"]["verified"], false, "{pulled}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("the signature was not checked"),
        "{out:?}"
    );
}

/// `plugin pull` of a verified artifact whose repository is not named as
/// the plugin (issue 48, item 2): with no config section for it, the
/// plugin is named as it declares itself, the command exits 0 and
/// `--output-dir` writes `<declared>.wasm`, which a plugin directory
/// loads; `--name` takes the name a config would key it by, and a name the
/// plugin does not declare is refused naming both.
#[test]
fn a_pull_names_the_plugin_as_it_declares_itself_or_as_told() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (registry, vendor_key, vendor_pub, config) = signing_registry(d);
    let config = config.to_str().unwrap();
    // `probe` declares the name "probe"; its repository says otherwise.
    let tag = format!("{}/vendor/disk-health:1.0.0", registry.host());
    cli(&["plugin", "push", built::PROBE, &tag, "--config", config]);
    let key = vendor_key.to_str().unwrap();
    cli(&["plugin", "sign", &tag, "--key", key, "--config", config]);
    let out_dir = d.join("plugins");
    std::fs::create_dir(&out_dir).unwrap();
    let pull = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(["plugin", "pull", &tag, "--config", config, "--key"])
            .arg(&vendor_pub)
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let out = pull(&["--output-dir", out_dir.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let pulled: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(pulled["plugin"], "probe", "{pulled}");
    assert_eq!(pulled["signature"]["verified"], true, "{pulled}");
    let file = out_dir.join("probe.wasm");
    assert_eq!(pulled["file"], file.to_str().unwrap(), "{pulled}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        std::fs::read(built::PROBE).unwrap()
    );
    // The plugin directory loads what was written, by that name.
    let listed = cli(&["plugin", "list", "--plugin-dir", out_dir.to_str().unwrap()]);
    assert!(
        listed
            .lines()
            .any(|l| l.split_whitespace().nth(1) == Some("probe")),
        "{listed}"
    );

    // --name as the plugin declares: the same; another name: refused,
    // saying what the plugin declares.
    let out = pull(&["--name", "probe"]);
    assert!(out.status.success(), "{out:?}");
    let out = pull(&["--name", "disk-health"]);
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"the plugin declares the name "probe", not "disk-health" (--name)"#),
        "{stderr}"
    );
}

/// A version whose signatures do not verify is refused before its blob is
/// downloaded, by the engine's fetcher (the registry puller's path) and by
/// `plugin pull`: the puller tries a refused version named in the config
/// again and again (issue 32's fleet bench: 8 GETs of the same blob in 60
/// s, one per retry, before this). The signed version's blob is fetched
/// once.
#[test]
fn a_version_signed_by_another_key_is_refused_before_its_blob_is_downloaded() {
    use nodestatus_registry::{Cache, Fetcher, Origin, Reference, signature::PublicKey};
    let dir = tempfile::tempdir().unwrap();
    let vendor = Vendor::start(dir.path());
    let refused = vendor.publish(built::PROBE, "other", Signer::Other);
    let signed = vendor.publish(built::PROBE, "vendor", Signer::Vendor);
    let fetcher = Fetcher::new(
        Client::new(vendor.registries()).unwrap(),
        Cache::open(dir.path().join("cache")).unwrap(),
    );
    let key = PublicKey::read(vendor.public_key()).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let fetch = |version: &Published| {
        let reference = Reference::parse(&version.pinned).unwrap();
        rt.block_on(fetcher.fetch(&reference, 64 << 20, Some(&key)))
    };
    let err = fetch(&refused).unwrap_err();
    assert_eq!(err.kind(), "bad-signature", "{err}");
    assert_eq!(vendor.blob_gets(&refused.layer), 0, "{}", vendor.log());
    let fetched = fetch(&signed).unwrap();
    assert_eq!(fetched.origin, Origin::Registry);
    assert_eq!(vendor.blob_gets(&signed.layer), 1, "{}", vendor.log());
    let pull = |version: &Published| {
        let config = dir.path().join("pull.yaml");
        std::fs::write(&config, vendor.config("\nplugins:\n", &version.pinned)).unwrap();
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(["plugin", "pull", &version.pinned, "--config"])
            .arg(&config)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    let out = pull(&refused);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(stderr.contains("was made by the key"), "{stderr}");
    assert_eq!(vendor.blob_gets(&refused.layer), 0, "{}", vendor.log());
    let out = pull(&signed);
    assert!(out.status.success(), "{out:?}");
    // `plugin pull` keeps no cache: its own GET.
    assert_eq!(vendor.blob_gets(&signed.layer), 2, "{}", vendor.log());
}
