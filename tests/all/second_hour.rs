//! A new user's second hour (issue 35): `scripts/run.sh` builds only what
//! is stale and says what it builds, `scripts/install.sh` puts `nodestatus`
//! on PATH, the engine's start log says which setters are still loading,
//! and the commands of docs/publishing.md (a local registry) and of
//! docs/simulate.md (a kubeconfig from a token) run as written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use nodestatus_controlplane::EmbeddedApiserver;
use nodestatus_tests::{DEFAULT_PLUGINS, built, drop_plugin};

use crate::process::wait_until;

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Sets `path`'s modification time `secs` seconds from now (negative: ago).
fn set_mtime(path: &Path, secs: i64) {
    let now = SystemTime::now();
    let t = if secs >= 0 {
        now + Duration::from_secs(secs as u64)
    } else {
        now - Duration::from_secs((-secs) as u64)
    };
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
}

/// A release build in a target directory of its own: a stand-in binary and
/// cargo's dep-info naming one source, `src.rs`, an hour old.
struct FakeTarget {
    dir: tempfile::TempDir,
}

impl FakeTarget {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let release = dir.path().join("release");
        std::fs::create_dir(&release).unwrap();
        let src = dir.path().join("src with space.rs");
        std::fs::write(&src, "fn main() {}\n").unwrap();
        set_mtime(&src, -3600);
        let bin = release.join("nodestatus");
        std::fs::write(&bin, "#!/bin/sh\necho 'nodestatus 0.0.0-fake'\n").unwrap();
        let mut perms = std::fs::metadata(&bin).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&bin, perms).unwrap();
        std::fs::write(
            release.join("nodestatus.d"),
            format!(
                "{}: {}\n",
                bin.display(),
                src.display().to_string().replace(' ', "\\ ")
            ),
        )
        .unwrap();
        Self { dir }
    }

    fn src(&self) -> PathBuf {
        self.dir.path().join("src with space.rs")
    }
}

/// A PATH whose `cargo` fails loudly: a script that runs it did build.
fn path_without_cargo(dir: &Path) -> String {
    let bin = dir.join("no-cargo");
    std::fs::create_dir_all(&bin).unwrap();
    let cargo = bin.join("cargo");
    std::fs::write(&cargo, "#!/bin/sh\necho 'cargo was run' >&2\nexit 99\n").unwrap();
    let mut perms = std::fs::metadata(&cargo).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&cargo, perms).unwrap();
    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap())
}

/// run.sh's dry run (NODESTATUS_RUN_PRINT_ARGS): its stderr, what it would
/// build.
fn run_sh_plan(target: &Path, cache: &Path, args: &[&str]) -> String {
    let out = Command::new("bash")
        .arg(repo().join("scripts/run.sh"))
        .args(args)
        .env("NODESTATUS_RUN_PRINT_ARGS", "1")
        .env("CARGO_TARGET_DIR", target)
        .env("NODESTATUS_CACHE", cache)
        .env("XDG_CONFIG_HOME", "/nonexistent/config-home")
        .env_remove("NODESTATUS_RUN_CONFIG")
        .env_remove("NODESTATUS_BIN")
        .env_remove("NODESTATUS_K8S_VERSION")
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(out.status.success(), "{err}");
    err
}

#[test]
fn run_sh_builds_nodestatus_and_the_control_plane_only_when_they_are_missing_or_stale() {
    let target = FakeTarget::new();
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = ["--kubeconfig", "/nonexistent/kubeconfig"];

    // The binary is newer than its sources: no cargo at all.
    let plan = run_sh_plan(target.dir.path(), cache.path(), &kubeconfig);
    assert!(plan.contains("is current: no build"), "{plan}");
    assert!(plan.contains("control plane: none"), "{plan}");

    // A source changed after the build: it would build, and says why.
    set_mtime(&target.src(), 60);
    let plan = run_sh_plan(target.dir.path(), cache.path(), &kubeconfig);
    assert!(plan.contains("would build"), "{plan}");
    assert!(plan.contains("src with space.rs changed"), "{plan}");

    // The control plane's build time is announced only before its build.
    let plan = run_sh_plan(target.dir.path(), cache.path(), &[]);
    assert!(plan.contains("is not built yet"), "{plan}");
    assert!(plan.contains("minutes"), "{plan}");
    let bin = cache.path().join("k8s-1.37.2/bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join(".build-recipe"), "k8s-1.37.2\n").unwrap();
    let plan = run_sh_plan(target.dir.path(), cache.path(), &[]);
    assert!(
        plan.contains("control plane: Kubernetes 1.37.2, cached"),
        "{plan}"
    );
    assert!(!plan.contains("minutes"), "{plan}");
}

#[test]
fn install_sh_puts_nodestatus_on_a_prefix_without_building_a_current_binary() {
    let target = FakeTarget::new();
    let tmp = tempfile::tempdir().unwrap();
    let prefix = tmp.path().join("prefix");
    let install = |env: &[(&str, &Path)]| {
        let mut cmd = Command::new("bash");
        cmd.arg(repo().join("scripts/install.sh"))
            .arg(&prefix)
            .env("PATH", path_without_cargo(tmp.path()))
            .env("CARGO_TARGET_DIR", target.dir.path())
            .env_remove("NODESTATUS_BIN");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };

    // The current release binary is copied; cargo is never run.
    let out = install(&[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("cargo was run"), "{err}");
    let installed = prefix.join("bin/nodestatus");
    assert_eq!(
        String::from_utf8(out.stdout).unwrap().trim(),
        installed.display().to_string()
    );
    let run = Command::new(&installed).output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "nodestatus 0.0.0-fake\n"
    );
    // The prefix is not on PATH: it says what to add.
    assert!(err.contains("is not on your PATH"), "{err}");

    // A stale one is built first (here: the stand-in cargo fails, and the
    // install with it).
    set_mtime(&target.src(), 60);
    let out = install(&[]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("cargo was run"));

    // NODESTATUS_BIN: that binary, nothing built.
    let out = install(&[(
        "NODESTATUS_BIN",
        Path::new(env!("CARGO_BIN_EXE_nodestatus")),
    )]);
    assert!(out.status.success(), "{out:?}");
    let version = Command::new(&installed).arg("--version").output().unwrap();
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with("nodestatus "),
        "{version:?}"
    );
}

#[test]
fn the_start_log_names_the_setters_still_loading_and_then_the_run_order() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    drop_plugin(&plugins, "ready.wasm", Path::new(built::READY));
    drop_plugin(&plugins, "os-arch.wasm", Path::new(built::OS_ARCH));
    // An apiserver that is not there: the start's log comes before any
    // request, and the engine retries meanwhile.
    let kubeconfig = tmp.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:9\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\ncurrent-context: c\nusers:\n- name: u\n  user: {token: t}\n",
    )
    .unwrap();
    let log = tmp.path().join("run.log");
    // An empty precompile cache: every plugin compiles in the background.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["run", "--node-name", "second-hour", "--address", ""])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--plugin-dir")
        .arg(&plugins)
        .arg("--cache-dir")
        .arg(tmp.path().join("cache"))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let lines = || -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("setters, in run order:"))
            .map(str::to_owned)
            .collect()
    };
    wait_until(120, &log, "no run order after the loads", || {
        lines().len() >= 2
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let lines = lines();
    assert!(
        lines[0].contains("none ready yet")
            && lines[0].contains("2 loading in the background: os-arch, ready"),
        "{lines:?}"
    );
    // The kubelet's order: os-arch before ready.
    assert!(
        lines[1].contains("setters, in run order: os-arch, ready (every load"),
        "{lines:?}"
    );
}

/// The fenced block of `lang` in `text` whose first line starts with
/// `first` (a doc's block that a test runs).
pub(crate) fn block<'a>(text: &'a str, lang: &str, first: &str) -> &'a str {
    let fence = format!("```{lang}\n");
    text.split(&fence)
        .skip(1)
        .map(|b| b.split_once("```").expect("a closed block").0)
        .find(|b| b.starts_with(first))
        .unwrap_or_else(|| panic!("no ```{lang} block starting with {first:?}"))
}

/// Runs `script` with bash (errexit, pipefail) in `dir`, with `nodestatus`
/// (this build) first on PATH; returns stdout, or panics with stderr.
pub(crate) fn sh(dir: &Path, script: &str, env: &[(&str, &Path)]) -> String {
    let bin = dir.join(".bin");
    std::fs::create_dir_all(&bin).unwrap();
    let link = bin.join("nodestatus");
    if !link.exists() {
        std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_nodestatus"), &link).unwrap();
    }
    let mut cmd = Command::new("bash");
    cmd.args(["-euo", "pipefail", "-c", script])
        .current_dir(dir)
        .env(
            "PATH",
            format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
        )
        .env("NO_COLOR", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{script}\nfailed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// docs/publishing.md's local registry, as written (on a free port and a
/// storage directory of the test's): Debian's docker-registry with the
/// doc's config, then the doc's key, push, sign and pull.
#[test]
fn publishing_md_runs_a_local_registry_and_publishes_to_it() {
    let doc = std::fs::read_to_string(repo().join("docs/publishing.md")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let storage = tmp.path().join("storage");
    let local = |s: &str| {
        s.replace("127.0.0.1:5000", &format!("127.0.0.1:{port}"))
            .replace("/tmp/nodestatus-registry", &storage.display().to_string())
            // The setter at hand: a plugin is named by its file.
            .replace("gpu-reporter", "ready")
    };
    std::fs::write(
        tmp.path().join("registry.yml"),
        local(block(&doc, "yaml", "# registry.yml")),
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("local.yaml"),
        local(block(&doc, "yaml", "# local.yaml")),
    )
    .unwrap();
    let serve = block(&doc, "sh", "docker-registry serve");
    let serve = serve.lines().next().unwrap();
    let serve: Vec<&str> = serve
        .split('#')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let log = tmp.path().join("registry.log");
    let mut registry = Command::new(serve[0])
        .args(&serve[1..])
        .current_dir(tmp.path())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(tmp.path().join("registry.err")).unwrap())
        .spawn()
        .expect("docker-registry: scripts/ensure-packages.sh docker-registry");
    let err = tmp.path().join("registry.err");
    wait_until(30, &err, "the registry never listened", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    // A component to publish, where the doc's step 1 builds it (ready,
    // in place of gpu-reporter).
    std::fs::create_dir(tmp.path().join("dist")).unwrap();
    std::fs::copy(built::READY, tmp.path().join("dist/ready.wasm")).unwrap();
    sh(tmp.path(), block(&doc, "sh", "openssl genpkey"), &[]);
    let out = sh(
        tmp.path(),
        &local(block(
            &doc,
            "sh",
            "nodestatus plugin push dist/gpu-reporter.wasm 127.0.0.1:5000",
        )),
        &[],
    );
    // Step 5's dry run with the doc's cluster.yaml, in a cache of its own.
    std::fs::write(
        tmp.path().join("cluster.yaml"),
        local(block(&doc, "yaml", "# cluster.yaml")),
    )
    .unwrap();
    let cache = tmp.path().join("xdg-cache");
    let diff = sh(
        tmp.path(),
        block(&doc, "sh", "nodestatus once --config cluster.yaml"),
        &[("XDG_CACHE_HOME", &cache)],
    );
    registry.kill().unwrap();
    registry.wait().unwrap();
    assert!(diff.contains("+++ node (after the setters)"), "{diff}");
    // `plugin pull` prints the world and the version (the doc says so).
    let pulled: serde_json::Value =
        serde_json::from_str(&out[out.find("{\n").expect("plugin pull's JSON")..]).unwrap();
    assert_eq!(pulled["world"], "nodestatus:plugin/plugin@0.2.1", "{out}");
    assert_eq!(pulled["signature"]["verified"], true, "{out}");
    assert!(pulled["version"].is_string(), "{out}");
}

/// docs/simulate.md's kubeconfig for `nodestatus simulate`, from a token, as
/// written, on the embedded default (the cluster `nodestatus run` starts
/// without a kubeconfig, and the admin kubeconfig it writes): the CA comes
/// from that kubeconfig, the page's fallback (the `kube-root-ca.crt`
/// ConfigMap) gives the same CA, `auth whoami` verifies the server with it,
/// and the simulator starts with the kubeconfig made and registers its node.
#[test]
fn the_simulate_page_makes_the_simulators_kubeconfig_from_a_token_on_the_embedded_default() {
    let page = std::fs::read_to_string(repo().join("docs/simulate.md")).unwrap();
    let steps = block(
        &page,
        "sh",
        "kubectl apply -f deploy/kubernetes/simulate/rbac.yaml",
    );
    assert!(steps.contains("set-credentials"), "{steps}");
    // The page's fallback for a kubeconfig without CA data, inline.
    let fallback = page
        .split('`')
        .find(|s| s.starts_with("kubectl -n nodestatus-simulate get configmap kube-root-ca.crt"))
        .expect("docs/simulate.md's kube-root-ca.crt command")
        .replace('\n', " ");
    let tmp = tempfile::tempdir().unwrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (cluster, attached) = rt
        .block_on(EmbeddedApiserver::start_or_attach(
            &tmp.path().join("embedded"),
            "second-hour-host",
            nodestatus_controlplane::DEFAULT_NODE_MONITOR_GRACE,
        ))
        .expect("starting the embedded default");
    assert!(!attached);
    let admin = cluster.write_admin_kubeconfig().unwrap();
    let ca = std::fs::read_to_string(cluster.ca_file()).unwrap();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    let work = tmp.path().join("work");
    std::fs::create_dir(&work).unwrap();
    std::os::unix::fs::symlink(repo().join("deploy"), work.join("deploy")).unwrap();
    let whoami = sh(&work, steps, &[("KUBECONFIG", &admin)]);
    assert!(
        whoami.contains("system:serviceaccount:nodestatus-simulate:nodestatus-simulator"),
        "{whoami}"
    );
    assert_eq!(
        std::fs::read_to_string(work.join("simulator-ca.crt")).unwrap(),
        ca,
        "the CA the page's block takes from the admin kubeconfig"
    );
    let kubeconfig = work.join("simulator.kubeconfig");
    let text = std::fs::read_to_string(&kubeconfig).unwrap();
    assert!(text.contains("certificate-authority-data"), "{text}");
    assert!(!text.contains("insecure-skip-tls-verify"), "{text}");

    // The fallback: the root CA publisher puts the ConfigMap in the new
    // namespace shortly after it is made, as on a real cluster.
    let elsewhere = tmp.path().join("fallback");
    std::fs::create_dir(&elsewhere).unwrap();
    let published = || {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&admin)
            .args([
                "-n",
                "nodestatus-simulate",
                "get",
                "configmap",
                "kube-root-ca.crt",
            ])
            .output()
            .unwrap()
            .status
            .success()
    };
    wait_until(
        30,
        &cluster.dir().join("controller-manager.log"),
        "no kube-root-ca.crt ConfigMap",
        published,
    );
    sh(&elsewhere, &fallback, &[("KUBECONFIG", &admin)]);
    assert_eq!(
        std::fs::read_to_string(elsewhere.join("simulator-ca.crt")).unwrap(),
        ca,
        "the CA of the page's kube-root-ca.crt fallback"
    );

    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    for (file, src) in DEFAULT_PLUGINS {
        drop_plugin(&plugins, file, Path::new(src));
    }
    let log = tmp.path().join("simulate.log");
    let mut c = crate::fleet::simulator(&kubeconfig, &plugins, tmp.path(), 1);
    c.args(["--name-prefix", "second-hour"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    let mut simulator = c.spawn().unwrap();
    wait_until(90, &log, "the simulated node never registered", || {
        assert!(
            simulator.try_wait().unwrap().is_none(),
            "simulate exited: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        let out = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&admin)
            .args(["get", "node", "second-hour-0000", "-o", "name"])
            .output()
            .unwrap();
        out.status.success()
    });
    simulator.kill().unwrap();
    simulator.wait().unwrap();
    drop(cluster);
}
