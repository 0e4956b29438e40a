//! The container runtime's facts over CRI, against a real containerd (the
//! Debian package, started here with its own root, state and socket, and no
//! CNI configuration, so its network is not ready), and the version-info,
//! images and ready setters reading them through `host.container-runtime`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodestatus_engine::cri;
use nodestatus_runtime::{CallContext, PluginSettings};
use nodestatus_tests::{built, drop_plugin};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::common::*;

/// A containerd of our own, killed on drop.
struct Containerd {
    child: Child,
    dir: tempfile::TempDir,
}

impl Containerd {
    fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let config = format!(
            "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n[grpc]\n  address = \"{sock}\"\n\
             [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.10.2\"\n  restrict_oom_score_adj = true\n\
             [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"{d}/cni-bin\"\n  conf_dir = \"{d}/cni-conf\"\n",
            root = d.join("root").display(),
            state = d.join("state").display(),
            sock = d.join("containerd.sock").display(),
            d = d.display(),
        );
        std::fs::write(d.join("config.toml"), config).unwrap();
        let log = std::fs::File::create(d.join("containerd.log")).unwrap();
        let child = Command::new("containerd")
            .arg("--config")
            .arg(d.join("config.toml"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run containerd ({e}): install the Debian package containerd (scripts/test.sh does)")
            });
        let me = Self { child, dir };
        assert!(
            wait_for(20, || me.socket().exists()),
            "containerd did not open its socket: {}",
            std::fs::read_to_string(me.dir.path().join("containerd.log")).unwrap_or_default()
        );
        me
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("containerd.sock")
    }

    fn endpoint(&self) -> String {
        format!("unix://{}", self.socket().display())
    }

    /// `ctr` against this containerd, in the CRI's namespace.
    fn ctr(&self, args: &[&str]) -> String {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(self.socket())
            .args(["-n", "k8s.io"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "ctr {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The version the daemon reports (`ctr version`'s server part).
    fn version(&self) -> String {
        server_version(&self.ctr(&["version"]))
    }

    /// Imports a one-layer image named `name`, built here as an OCI layout
    /// (no registry).
    fn import_tiny_image(&self, name: &str) {
        let tar = tiny_image_tar(self.dir.path(), name);
        self.ctr(&["images", "import", tar.to_str().unwrap()]);
    }
}

/// The server version in what `ctr version` printed.
fn server_version(out: &str) -> String {
    out.split("Server:")
        .nth(1)
        .and_then(|s| s.lines().find_map(|l| l.trim().strip_prefix("Version:")))
        .map(|v| v.trim().to_owned())
        .unwrap_or_else(|| panic!("no server version in {out}"))
}

/// A one-layer image named `name`, built in `dir` as an OCI layout (no
/// registry), as a tar that `ctr images import` takes.
fn tiny_image_tar(dir: &Path, name: &str) -> PathBuf {
    {
        let layout = dir.join("image");
        let blobs = layout.join("blobs/sha256");
        std::fs::create_dir_all(&blobs).unwrap();
        let put = |bytes: &[u8]| -> (String, usize) {
            let digest = hex::encode(Sha256::digest(bytes));
            std::fs::write(blobs.join(&digest), bytes).unwrap();
            (format!("sha256:{digest}"), bytes.len())
        };
        // An empty tar: two zero blocks.
        let (layer, layer_size) = put(&[0u8; 1024]);
        let config = json!({
            "architecture": nodestatus_model::node::kubelet::go_arch(), "os": "linux",
            "rootfs": {"type": "layers", "diff_ids": [layer]}, "config": {}
        });
        let (config, config_size) = put(config.to_string().as_bytes());
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config, "size": config_size},
            "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": layer, "size": layer_size}]
        });
        let (manifest, manifest_size) = put(manifest.to_string().as_bytes());
        let index = json!({
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": manifest, "size": manifest_size,
                "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name}
            }]
        });
        std::fs::write(layout.join("index.json"), index.to_string()).unwrap();
        std::fs::write(
            layout.join("oci-layout"),
            r#"{"imageLayoutVersion":"1.0.0"}"#,
        )
        .unwrap();
        let tar = dir.join("image.tar");
        let status = Command::new("tar")
            .arg("-C")
            .arg(&layout)
            .arg("-cf")
            .arg(&tar)
            .arg(".")
            .status()
            .unwrap();
        assert!(status.success());
        tar
    }
}

impl Drop for Containerd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Its snapshots may be mounted under root/.
        let _ = Command::new("umount")
            .arg("-R")
            .arg(self.dir.path().join("root"))
            .stderr(Stdio::null())
            .status();
    }
}

fn block_on<T>(f: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

const TINY: &str = "example.com/nodestatus/tiny:1";

/// The `containerRuntimeVersion` a real kubelet writes for a containerd
/// that says `version`, worked out here without the SDK's
/// `kubelet_runtime_version` (which the setters use, and which is what is
/// under test): a plain `X.Y.Z` stays as it is, and a Debian package's `~`
/// suffix is dropped, as the kubelet 1.20.2 beside Debian 12's containerd
/// `1.6.20~ds1` wrote `containerd://1.6.20` (docs/kubelet-parity.md). A
/// version of another form fails here, to be looked up in the kubelet's
/// behaviour first.
fn kubelet_says(version: &str) -> String {
    let base = version.split_once('~').map_or(version, |(b, _)| b);
    let parts: Vec<&str> = base.split('.').collect();
    assert!(
        parts.len() == 3
            && parts
                .iter()
                .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())),
        "containerd {version:?}: not X.Y.Z with an optional Debian ~ suffix; find what the kubelet writes for it and teach kubelet_says"
    );
    format!("containerd://{base}")
}

#[test]
fn kubelet_says_what_the_kubelet_wrote() {
    assert_eq!(kubelet_says("1.6.20~ds1"), "containerd://1.6.20");
    assert_eq!(kubelet_says("1.7.24"), "containerd://1.7.24");
}

#[test]
fn the_runtime_facts_come_from_a_real_containerd() {
    let ctd = Containerd::start();
    ctd.import_tiny_image(TINY);
    let client = cri::Client::new(&ctd.endpoint(), Duration::from_secs(5)).unwrap();
    let facts = block_on(client.facts()).unwrap();
    assert_eq!(facts.name, "containerd");
    assert_eq!(facts.version, ctd.version());
    assert_eq!(facts.api_version, "v1");
    let condition = |t: &str| {
        facts
            .conditions
            .iter()
            .find(|c| c.type_ == t)
            .unwrap_or_else(|| panic!("no {t} in {:?}", facts.conditions))
    };
    assert!(condition("RuntimeReady").status);
    // No CNI configuration: the network is not ready, and says why.
    let net = condition("NetworkReady");
    assert!(!net.status);
    assert_eq!(net.reason, "NetworkPluginNotReady");
    let tiny = facts
        .images
        .iter()
        .find(|i| i.repo_tags.iter().any(|t| t == TINY))
        .unwrap_or_else(|| panic!("{TINY} not in {:?}", facts.images));
    assert!(tiny.id.starts_with("sha256:"), "{tiny:?}");
    assert!(tiny.size > 0, "{tiny:?}");
}

/// A plugin directory with version-info, images and ready, `granted` the
/// container runtime or not.
fn runtime_setters(
    granted: bool,
) -> (
    tempfile::TempDir,
    Arc<nodestatus_engine::plugin_dir::PluginDir>,
) {
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        container_runtime: granted,
        ..Default::default()
    }));
    for (file, src) in [
        ("version-info.wasm", built::VERSION_INFO),
        ("images.wasm", built::IMAGES),
        ("ready.wasm", built::READY),
    ] {
        drop_plugin(tmp.path(), file, Path::new(src));
    }
    dir.rescan();
    assert_eq!(dir.current().setters().len(), 3);
    (tmp, dir)
}

fn pass_with(
    dir: &nodestatus_engine::plugin_dir::PluginDir,
    answer: Option<Result<nodestatus_runtime::facts::RuntimeFacts, cri::Error>>,
) -> Value {
    let ctx = CallContext {
        container_runtime: answer.map(|a| Arc::new(a.map_err(|e| e.to_string()))),
        ..CallContext::default()
    };
    let node = nodestatus_model::node::kubelet::initial_node("cri-node", "cri-node");
    let (out, report) = nodestatus_engine::pipeline::pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &ctx,
        Default::default(),
    );
    for s in &report.setters {
        if s.plugin != "images" {
            assert!(s.outcome.is_ok(), "{}: {:?}", s.plugin, s.outcome);
        }
    }
    out
}

#[test]
fn the_setters_read_the_runtime_through_the_host() {
    let ctd = Containerd::start();
    ctd.import_tiny_image(TINY);
    let client = cri::Client::new(&ctd.endpoint(), Duration::from_secs(5)).unwrap();
    let facts = block_on(client.facts()).unwrap();
    let (_tmp, dir) = runtime_setters(true);
    let out = pass_with(&dir, Some(Ok(facts.clone())));

    assert_eq!(
        out["status"]["nodeInfo"]["containerRuntimeVersion"],
        kubelet_says(&ctd.version())
    );
    let images = out["status"]["images"].as_array().expect("status.images");
    assert!(
        images
            .iter()
            .any(|i| i["names"].as_array().unwrap().iter().any(|n| n == TINY)),
        "{images:?}"
    );
    let ready = condition_of(&out, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"].as_str().unwrap().contains(
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
        ),
        "{ready}"
    );

    // Not granted: the same runtime is invisible, and nothing fails.
    let (_tmp2, ungranted) = runtime_setters(false);
    let out = pass_with(&ungranted, Some(Ok(facts)));
    assert_eq!(
        out["status"]["nodeInfo"]["containerRuntimeVersion"],
        "Unknown"
    );
    assert!(out["status"].get("images").is_none());
    assert_eq!(condition_of(&out, "Ready").unwrap()["status"], "True");
}

#[test]
fn a_runtime_that_is_gone_or_silent_is_reported_within_the_deadline() {
    let tmp = tempfile::tempdir().unwrap();
    // Absent socket: an error that names the cause.
    let gone = cri::Client::new(
        &format!("unix://{}", tmp.path().join("absent.sock").display()),
        Duration::from_secs(2),
    )
    .unwrap();
    let err = block_on(gone.facts()).unwrap_err();
    assert!(
        matches!(&err, cri::Error::Call { call: "Version", message } if message.contains("No such file")),
        "{err:?}"
    );
    let (_d, dir) = runtime_setters(true);
    let out = pass_with(&dir, Some(Err(err)));
    let ready = condition_of(&out, "Ready").unwrap();
    assert_eq!(ready["status"], "False");
    assert!(
        ready["message"]
            .as_str()
            .unwrap()
            .starts_with("container runtime is down: the runtime's Version failed"),
        "{ready}"
    );
    assert_eq!(
        out["status"]["nodeInfo"]["containerRuntimeVersion"],
        "Unknown"
    );

    // A socket that accepts and never answers: the deadline ends the call.
    let path = tmp.path().join("silent.sock");
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let held = std::thread::spawn(move || {
        let conns: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(5));
        drop(conns);
    });
    let timeout = Duration::from_millis(300);
    let silent = cri::Client::new(&format!("unix://{}", path.display()), timeout).unwrap();
    let started = Instant::now();
    let err = block_on(silent.facts()).unwrap_err();
    let took = started.elapsed();
    assert!(
        matches!(
            err,
            cri::Error::Deadline {
                call: "Version",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < timeout + Duration::from_secs(2), "{took:?}");
    drop(held);
}

#[test]
fn once_reads_the_configured_runtime() {
    let ctd = Containerd::start();
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    drop_plugin(
        &plugins,
        "version-info.wasm",
        Path::new(built::VERSION_INFO),
    );
    let config = tmp.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "nodeName: cri-node\ncacheDir: {}\ncontainerRuntimeEndpoint: {}\nplugins:\n  version-info: {{containerRuntime: true}}\n",
            built::TEST_CACHE_DIR,
            ctd.endpoint()
        ),
    )
    .unwrap();
    let node = crate::cli::json_of(
        crate::cli::nodestatus()
            .args(["once", "--plugin-dir"])
            .arg(&plugins)
            .arg("--config")
            .arg(&config),
    );
    assert_eq!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"],
        kubelet_says(&ctd.version())
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_engine_puts_containerds_facts_on_its_node() {
    // `nodestatus run`, standalone, with the runtime granted: the Node in
    // the real apiserver carries what containerd said.
    let node = "cri-run-node";
    let ctd = Containerd::start();
    ctd.import_tiny_image(TINY);
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (file, src) in [
        ("version-info.wasm", built::VERSION_INFO),
        ("images.wasm", built::IMAGES),
        ("ready.wasm", built::READY),
    ] {
        drop_plugin(&plugins, file, Path::new(src));
    }
    let config = dir.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "nodeName: {node}\ncontainerRuntimeEndpoint: {}\nplugins:\n  version-info: {{containerRuntime: true}}\n  images: {{containerRuntime: true}}\n  ready: {{containerRuntime: true}}\n",
            ctd.endpoint()
        ),
    )
    .unwrap();
    let (mut engine, log) = crate::kube::engine_command(dir.path(), node, &plugins);
    let mut child = engine.arg("--config").arg(&config).spawn().unwrap();
    let expected = kubelet_says(&ctd.version());
    let mut seen = None;
    crate::common::until(
        30,
        &log,
        "containerd's facts never reached the node",
        async || {
            seen = crate::kube::server_node(node).await;
            // Ready too: the node registers without it (the first pass keeps
            // the node's Ready as it is), and the next pass writes it.
            seen.as_ref().is_some_and(|n| {
                n["status"]["nodeInfo"]["containerRuntimeVersion"] == expected.as_str()
                    && crate::kube::condition(n, "Ready").is_some()
                    && n["status"]["images"].as_array().is_some_and(|l| {
                        l.iter()
                            .any(|i| i["names"].as_array().unwrap().iter().any(|x| x == TINY))
                    })
            })
        },
    )
    .await;
    // The runtime's own conditions decide Ready: no CNI, so not Ready, in
    // the kubelet's words.
    let n = seen.unwrap();
    let ready = crate::kube::condition(&n, "Ready").unwrap();
    assert_eq!(ready["status"], "False", "{ready}");
    assert!(
        ready["message"].as_str().unwrap().contains(
            "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady"
        ),
        "{ready}"
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// `nodestatus once --plugin-dir plugins` with no config, in a mount
/// namespace of its own whose `/run` is a fresh tmpfs, so that the kubelet's
/// default socket, `/run/containerd/containerd.sock`, is ours to serve or
/// to leave absent whatever runs on this machine. With `containerd`, a
/// containerd of its own listens there first, with the tiny image imported.
/// Returns the node, `once`'s stderr and, with containerd, its version.
fn once_on_the_default_socket(containerd: bool, plugins: &Path) -> (Value, String, Option<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let config = format!(
        "version = 2\nroot = \"{root}\"\nstate = \"{state}\"\n[grpc]\n  address = \"/run/containerd/containerd.sock\"\n\
         [plugins.\"io.containerd.grpc.v1.cri\"]\n  sandbox_image = \"registry.k8s.io/pause:3.10.2\"\n  restrict_oom_score_adj = true\n\
         [plugins.\"io.containerd.grpc.v1.cri\".cni]\n  bin_dir = \"{d}/cni-bin\"\n  conf_dir = \"{d}/cni-conf\"\n",
        root = d.join("root").display(),
        state = d.join("state").display(),
        d = d.display(),
    );
    std::fs::write(d.join("config.toml"), config).unwrap();
    let tar = tiny_image_tar(d, TINY);
    let script = r#"
set -u
mount -t tmpfs tmpfs /run || exit 90
mkdir -p /run/containerd
pid=
if [ "$1" = yes ]; then
  containerd --config "$2/config.toml" 2>"$2/containerd.log" &
  pid=$!
  i=0
  while [ ! -S /run/containerd/containerd.sock ]; do
    i=$((i+1)); [ $i -gt 200 ] && exit 91; sleep 0.1
  done
  ctr --address /run/containerd/containerd.sock -n k8s.io images import "$3" >/dev/null || exit 92
  ctr --address /run/containerd/containerd.sock version >"$2/version" || exit 93
fi
rc=0
"$4" --log-format text once --plugin-dir "$5" --cache-dir "$6" >"$2/out" 2>"$2/err" || rc=$?
if [ -n "$pid" ]; then kill "$pid"; wait "$pid"; fi
exit $rc
"#;
    let status = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(if containerd { "yes" } else { "no" })
        .arg(d)
        .arg(&tar)
        .arg(env!("CARGO_BIN_EXE_nodestatus"))
        .arg(plugins)
        .arg(nodestatus_tests::built::TEST_CACHE_DIR)
        .env("RUST_LOG", "info")
        .status()
        .unwrap();
    let read = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
    assert!(
        status.success(),
        "{status}: {}\n{}",
        read("err"),
        read("containerd.log")
    );
    let node: Value = serde_json::from_str(&read("out")).unwrap();
    let version = containerd.then(|| server_version(&read("version")));
    (node, read("err"), version)
}

fn default_runtime_plugins(dir: &Path) {
    for (file, src) in [
        ("version-info.wasm", built::VERSION_INFO),
        ("images.wasm", built::IMAGES),
    ] {
        drop_plugin(dir, file, Path::new(src));
    }
}

#[test]
fn once_with_no_config_finds_containerd_where_the_kubelet_does() {
    let plugins = tempfile::tempdir().unwrap();
    default_runtime_plugins(plugins.path());
    let (node, err, version) = once_on_the_default_socket(true, plugins.path());
    let expected = nodestatus_sdk::host::kubelet_runtime_version(&version.unwrap()).unwrap();
    assert_eq!(
        node["status"]["nodeInfo"]["containerRuntimeVersion"],
        format!("containerd://{expected}"),
        "{err}"
    );
    let images = node["status"]["images"]
        .as_array()
        .unwrap_or_else(|| panic!("no images: {node}\n{err}"));
    assert!(
        images
            .iter()
            .any(|i| i["names"].as_array().unwrap().iter().any(|x| x == TINY)),
        "{images:?}"
    );
}

#[test]
fn no_socket_at_the_default_endpoint_is_no_runtime_without_a_word() {
    let plugins = tempfile::tempdir().unwrap();
    default_runtime_plugins(plugins.path());
    let (node, err, _) = once_on_the_default_socket(false, plugins.path());
    // Not a line about it: no error, no warning (what a failed dial says).
    for words in [
        "the runtime's",
        "container runtime",
        "containerd.sock",
        "CRI",
    ] {
        assert!(!err.contains(words), "{words:?} in: {err}");
    }
    assert!(
        node["status"]["images"]
            .as_array()
            .is_none_or(|l| l.is_empty()),
        "{node}"
    );
}
