//! What the operator decides about a plugin by reference, against a real
//! registry (Debian's `docker-registry`, as in `registry.rs`) and the real
//! `nodestatus` binary: `pullPolicy` (a tag resolved once, or every
//! `pullInterval`), `failurePolicy` (a plugin never pulled fails open or
//! closed), the `registry://` and `oci://` prefixes, `once` taking the image
//! plugins as `run` does, and the bound on a manifest's size.
//!
//! Each test has a `cacheDir` of its own: the active file of a plugin
//! `probe` is `<cacheDir>/registry-plugins/probe.wasm`, which the tests
//! beside it write too.
//!
//! Needs `scripts/ensure-packages.sh docker-registry apache2-utils openssl`.

use std::path::{Path, PathBuf};
use std::process::Command;

use nodestatus_tests::built;
use nodestatus_tests::registry::{PASSWORD, Registry, USER, key_pair};

use crate::kube::until;
use crate::registry::{LABEL, REPO, cli, engine, free_addr, get, label, pulls, ready};

/// A registry with the vendor's key pair, the credentials, and a config
/// that only reaches it (for `plugin push` and `plugin sign`).
struct Setup {
    dir: tempfile::TempDir,
    registry: Registry,
    auth: PathBuf,
    vendor_key: PathBuf,
    vendor_pub: PathBuf,
    bare: PathBuf,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let registry = Registry::start();
        let (vendor_key, vendor_pub) = key_pair(dir.path(), "vendor");
        let auth = dir.path().join("auth.json");
        std::fs::copy(registry.auth_file(USER, PASSWORD), &auth).unwrap();
        let bare = dir.path().join("bare.yaml");
        std::fs::write(&bare, registry.config_yaml(&auth)).unwrap();
        Self {
            dir,
            registry,
            auth,
            vendor_key,
            vendor_pub,
            bare,
        }
    }

    fn d(&self) -> &Path {
        self.dir.path()
    }

    /// `HOST:PORT/vendor/probe:TAG`.
    fn at(&self, tag: &str) -> String {
        format!("{}/{REPO}:{tag}", self.registry.host())
    }

    /// Pushes `file` at `tag` and signs it with the vendor's key; returns
    /// the pinned reference.
    fn publish(&self, file: &str, tag: &str) -> String {
        let bare = self.bare.to_str().unwrap();
        let pinned = cli(&["plugin", "push", file, &self.at(tag), "--config", bare]);
        cli(&[
            "plugin",
            "sign",
            pinned.trim(),
            "--key",
            self.vendor_key.to_str().unwrap(),
            "--config",
            bare,
        ]);
        pinned.trim().to_owned()
    }

    /// The config of one node, `name`: a plugin directory (with `ready`
    /// when `with_ready`) and a cache of its own, the vendor's key, and the
    /// plugin `probe` from `image` with the `extra` lines of its section.
    /// Written, then renamed: a running engine reads it live.
    fn config(&self, name: &str, image: &str, extra: &[&str], with_ready: bool) -> PathBuf {
        let base = self.d().join(name);
        let plugins = base.join("plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        if with_ready {
            std::fs::copy(built::READY, plugins.join("ready.wasm")).unwrap();
        }
        let mut text = format!(
            "pluginDir: {}\ncacheDir: {}\n{}verify:\n  key: {}\nplugins:\n  probe:\n    image: {image}\n",
            plugins.display(),
            base.join("cache").display(),
            self.registry.config_yaml(&self.auth),
            self.vendor_pub.display(),
        );
        for line in extra {
            text += &format!("    {line}\n");
        }
        let path = base.join("config.yaml");
        let tmp = base.join(".config.yaml.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        path
    }
}

fn log(dir: &Path, node: &str) -> String {
    std::fs::read_to_string(dir.join(format!("{node}.log"))).unwrap_or_default()
}

/// `pullPolicy: IfNotPresent` (the default for a tag other than `latest`,
/// written here with Istio's `oci://`): the tag is resolved once; a new
/// version under it is not taken, however short the `pullInterval`; a
/// restart takes the cached version without asking the registry (stopped
/// here: a request would fail). `Always`, put in force live, resolves it
/// again and takes the new version.
#[tokio::test(flavor = "multi_thread")]
async fn a_tag_is_resolved_once_if_not_present_and_every_interval_with_always() {
    let mut s = Setup::new();
    let d = &s.d().to_owned();
    let v1 = s.publish(built::PROBE, "stable");
    let image = format!("oci://{}", s.at("stable"));
    let config = s.config("policy", &image, &["pullInterval: 1s"], false);

    let node = "pull-policy-node";
    let addr = free_addr();
    let mut first = engine(d, node, &config, addr);
    assert!(
        until(60, || async { label(node).await.as_deref() == Some("1") }).await,
        "the plugin never labelled the node: {}",
        log(d, node)
    );
    assert_eq!(pulls(addr, "pulled").await, 1.0);

    // A new version under the tag: not taken, and the tag not asked again.
    std::fs::create_dir_all(d.join("v2")).unwrap();
    let v2_file = d.join("v2/probe.wasm");
    std::fs::copy(built::PROBE_V2, &v2_file).unwrap();
    s.publish(v2_file.to_str().unwrap(), "stable");
    tokio::time::sleep(std::time::Duration::from_secs(6)).await;
    assert_eq!(label(node).await.as_deref(), Some("1"));
    assert_eq!(pulls(addr, "pulled").await, 1.0);
    assert_eq!(
        pulls(addr, "unchanged").await,
        0.0,
        "the tag was resolved again"
    );
    first.kill().unwrap();
    first.wait().unwrap();

    // A restart with the registry down: the cached version, no request.
    s.registry.stop();
    let node = "pull-policy-restart-node";
    let addr = free_addr();
    let mut second = engine(d, node, &config, addr);
    assert!(
        until(60, || async { label(node).await.as_deref() == Some("1") }).await,
        "the cached version did not start: {}",
        log(d, node)
    );
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    assert_eq!(pulls(addr, "cached").await, 1.0);
    assert_eq!(
        pulls(addr, "unreachable").await,
        0.0,
        "the registry was asked"
    );
    let (code, body) = get(addr, "/readyz").await;
    assert_eq!((code, body.as_str()), (200, "ok"));

    // Always, live: the tag is resolved again and the new version runs.
    s.registry.restart();
    s.config(
        "policy",
        &image,
        &["pullInterval: 1s", "pullPolicy: Always"],
        false,
    );
    assert!(
        until(30, || async { label(node).await.as_deref() == Some("2") }).await,
        "Always did not take the new version: {:?} {}",
        get(addr, "/readyz").await,
        log(d, node)
    );

    // The registry cache aged (registryCacheMaxAge, a week by default):
    // 1.0.0, which no plugin uses now, last used eight days ago, goes at
    // the next collection (after a round that writes a version); 2.0.0,
    // used a moment ago, stays.
    let manifests = d.join("policy/cache/registry/manifests/sha256");
    let file = |pinned: &str| manifests.join(pinned.rsplit_once("@sha256:").unwrap().1);
    let v2 = std::fs::read_dir(&manifests)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| *p != file(&v1))
        .unwrap();
    std::fs::File::open(file(&v1))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(8 * 24 * 3600))
        .unwrap();
    let before = pulls(addr, "pulled").await;
    // 2.0.0 with a custom section: another digest. A plugin is named by
    // its file.
    std::fs::create_dir_all(d.join("v3")).unwrap();
    let v3 = crate::registry::variant(&std::fs::read(built::PROBE_V2).unwrap(), "v3");
    std::fs::write(d.join("v3/probe.wasm"), v3).unwrap();
    s.publish(d.join("v3/probe.wasm").to_str().unwrap(), "stable");
    assert!(
        until(30, || async { pulls(addr, "pulled").await > before }).await,
        "the third version was not pulled: {}",
        log(d, node)
    );
    assert!(
        until(10, || async { !file(&v1).exists() }).await,
        "the version unused for 8 days is still cached: {}",
        log(d, node)
    );
    assert!(v2.exists(), "the version used a moment ago was removed");
    second.kill().unwrap();
    second.wait().unwrap();
}

/// A plugin whose image was never pulled (its tag does not exist yet):
/// with `failurePolicy: open` (the default) the node stays Ready without
/// it and says so; with `closed` it counts as failing in each pass and the
/// node goes not Ready (its `affectsReadiness` unset: true for a plugin
/// that fails closed). Once the image is published, both run it.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_never_pulled_fails_open_or_closed_as_its_section_says() {
    let s = Setup::new();
    let d = s.d();
    let image = format!("registry://{}", s.at("later"));
    let open = s.config("open", &image, &["pullInterval: 2s"], true);
    let closed = s.config(
        "closed",
        &image,
        &["pullInterval: 2s", "failurePolicy: closed"],
        true,
    );
    let (open_node, closed_node) = ("failure-open-node", "failure-closed-node");
    let (open_addr, closed_addr) = (free_addr(), free_addr());
    // Each in a directory of its own: its kubeconfig is its identity.
    let (open_dir, closed_dir) = (&d.join("open"), &d.join("closed"));
    let mut open_engine = engine(open_dir, open_node, &open, open_addr);
    let mut closed_engine = engine(closed_dir, closed_node, &closed, closed_addr);

    assert!(
        until(60, || async {
            ready(closed_node)
                .await
                .is_some_and(|(s, m)| s == "False" && m.contains("probe"))
        })
        .await,
        "a plugin that fails closed did not make the node not Ready: {:?} {}",
        ready(closed_node).await,
        log(closed_dir, closed_node)
    );
    let (code, body) = get(closed_addr, "/readyz").await;
    assert!(
        code == 200 && body.contains("plugin probe:") && body.contains("failurePolicy closed"),
        "{code} {body}"
    );

    assert!(
        until(30, || async {
            ready(open_node).await.is_some_and(|(s, _)| s == "True")
        })
        .await,
        "a plugin that fails open made the node not Ready: {:?} {}",
        ready(open_node).await,
        log(open_dir, open_node)
    );
    assert_eq!(label(open_node).await, None);
    let (code, body) = get(open_addr, "/readyz").await;
    assert!(
        code == 200 && body.contains("failurePolicy open: the node goes on without it"),
        "{code} {body}"
    );
    assert!(
        until(10, || async {
            crate::registry::warnings(open_node)
                .await
                .iter()
                .any(|m| m.contains("failurePolicy open"))
        })
        .await,
        "no Warning event says that the node goes on without it: {:?}",
        crate::registry::warnings(open_node).await
    );

    // Published: both pull it (retried with the backoff), and the node
    // that failed closed is Ready again.
    s.publish(built::PROBE, "later");
    assert!(
        until(60, || async {
            label(closed_node).await.as_deref() == Some("1")
                && label(open_node).await.as_deref() == Some("1")
                && ready(closed_node).await.is_some_and(|(s, _)| s == "True")
        })
        .await,
        "the published plugin did not run on both nodes: {:?} {}",
        ready(closed_node).await,
        log(closed_dir, closed_node)
    );
    open_engine.kill().unwrap();
    open_engine.wait().unwrap();
    closed_engine.kill().unwrap();
    closed_engine.wait().unwrap();
}

/// Runs `nodestatus ARGS`: its status, stdout and stderr.
fn run_cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// `once --config` with a plugin section that names an image runs that
/// plugin, pulled and verified as `run` pulls it (then from the cache, with
/// the registry down); one that cannot be had (no such tag, or signed by
/// no trusted key) fails the command and says why. `plugin list` lists it.
#[test]
fn once_takes_the_image_plugins_as_run_does() {
    let mut s = Setup::new();
    s.publish(built::PROBE, "1.0.0");
    let config = s.config("once", &s.at("1.0.0"), &[], false);
    let cfg = config.to_str().unwrap();

    let err = once_labels_the_node(cfg);
    assert!(
        err.contains(&format!("plugin probe from {}: sha256:", s.at("1.0.0")))
            && err.contains("(pulled)"),
        "{err}"
    );
    let (ok, out, err) = run_cli(&["plugin", "list", "--config", cfg]);
    assert!(ok && out.contains("probe"), "{out} {err}");

    // The registry down: the cache holds it.
    s.registry.stop();
    let err = once_labels_the_node(cfg);
    assert!(err.contains("(cached)"), "{err}");
    s.registry.restart();

    // No such tag: no pass runs.
    let missing = s.config("once-missing", &s.at("missing"), &[], false);
    let (ok, out, err) = run_cli(&["once", "--config", missing.to_str().unwrap()]);
    assert!(!ok, "{out}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains(&format!("plugin probe (image: {})", s.at("missing")))
            && err.contains("cannot be had")
            && err.contains("not found")
            && err.contains("push it, or name one that exists in plugins.probe.image")
            && err.contains("enabled: false"),
        "{err}"
    );

    // Signed by a key the config does not trust.
    let (_, other_pub) = key_pair(s.d(), "other");
    let untrusted = s.config("once-untrusted", &s.at("1.0.0"), &[], false);
    let text = std::fs::read_to_string(&untrusted)
        .unwrap()
        .replace(s.vendor_pub.to_str().unwrap(), other_pub.to_str().unwrap());
    std::fs::write(&untrusted, text).unwrap();
    let (ok, _, err) = run_cli(&["once", "--config", untrusted.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains("cannot be had") && err.contains("was made by the key"),
        "{err}"
    );
    // The advice is the signature's, not the registry's (issue 48, item 4).
    assert!(
        err.contains("sign its digest with the key that plugins.probe.verify")
            && !err.contains("make the registry reachable"),
        "{err}"
    );
}

/// `once --config CFG`, which must pass and leave the probe's label at 1;
/// its stderr.
fn once_labels_the_node(cfg: &str) -> String {
    let (ok, out, err) = run_cli(&["once", "--config", cfg]);
    assert!(ok, "{err}");
    let node: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(node["metadata"]["labels"][LABEL], "1", "{err}");
    err
}

/// `once --config` with a config whose plugin directory is not on this
/// machine (the default `/etc/nodestatus/plugins` on a vendor's laptop, as
/// docs/publishing.md step 5 runs it): the config's image plugins run
/// alone, saying so; a `--plugin-dir` that is not there is still refused
/// (issue 48, item 3).
#[test]
fn once_runs_the_image_plugins_alone_where_the_plugin_directory_is_not() {
    let s = Setup::new();
    s.publish(built::PROBE, "1.0.0");
    let config = s.config("no-dir", &s.at("1.0.0"), &[], false);
    let absent = s.d().join("no-dir/absent");
    let text = std::fs::read_to_string(&config).unwrap().replace(
        &format!("pluginDir: {}", s.d().join("no-dir/plugins").display()),
        &format!("pluginDir: {}", absent.display()),
    );
    assert!(text.contains("absent"), "{text}");
    std::fs::write(&config, text).unwrap();
    let cfg = config.to_str().unwrap();
    let err = once_labels_the_node(cfg);
    assert!(
        err.contains(&format!(
            "the plugin directory {} (pluginDir) is not here: only the config's 1 image plugin(s) run",
            absent.display()
        )),
        "{err}"
    );
    let (ok, _, err) = run_cli(&[
        "once",
        "--config",
        cfg,
        "--plugin-dir",
        absent.to_str().unwrap(),
    ]);
    assert!(!ok);
    assert!(
        err.contains("is not a directory: give --plugin-dir DIR"),
        "{err}"
    );
}

/// A registry that serves a manifest over the bound (2 MiB of annotations,
/// written into its storage as it stores a pushed one, and signed by the
/// vendor): `plugin pull` and `once` refuse it before its body is read,
/// naming the bound, by tag and by digest.
#[test]
fn a_manifest_over_the_bound_is_refused_unread() {
    let s = Setup::new();
    let pinned = s.publish(built::PROBE, "small");
    let digest: nodestatus_registry::Digest = pinned.rsplit('@').next().unwrap().parse().unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(s.registry.blob_file(&digest)).unwrap()).unwrap();
    manifest["annotations"]["pad"] = "x".repeat(2 << 20).into();
    let body = serde_json::to_vec(&manifest).unwrap();
    let huge = nodestatus_registry::Digest::of(&body);
    let write = |path: PathBuf, bytes: &[u8]| {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    };
    write(s.registry.blob_file(&huge), &body);
    let tag = s.registry.tag_dir(REPO, "huge");
    let manifests = tag.parent().unwrap().parent().unwrap();
    for link in [
        manifests.join(format!("revisions/sha256/{}/link", huge.hex())),
        tag.join("current/link"),
        tag.join(format!("index/sha256/{}/link", huge.hex())),
    ] {
        write(link, huge.as_str().as_bytes());
    }
    let by_digest = format!("{}/{REPO}@{huge}", s.registry.host());
    // Signed (a signature is of the digest: no read of the manifest), so
    // that `once`, which checks the signatures before it pulls, reaches
    // the manifest.
    cli(&[
        "plugin",
        "sign",
        &by_digest,
        "--key",
        s.vendor_key.to_str().unwrap(),
        "--config",
        s.bare.to_str().unwrap(),
    ]);
    let bound = format!("over the bound of {} bytes", 1 << 20);
    for reference in [s.at("huge"), by_digest] {
        let (ok, out, err) = run_cli(&[
            "plugin",
            "pull",
            &reference,
            "--config",
            s.bare.to_str().unwrap(),
        ]);
        assert!(!ok, "{out}");
        assert!(
            err.contains(&bound) && err.contains("(declared)"),
            "{reference}: {err}"
        );
        let config = s.config("huge", &reference, &[], false);
        let (ok, _, err) = run_cli(&["once", "--config", config.to_str().unwrap()]);
        assert!(!ok);
        assert!(
            err.contains("cannot be had") && err.contains(&bound),
            "{reference}: {err}"
        );
    }
}
