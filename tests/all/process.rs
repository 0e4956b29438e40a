//! `nodestatus run` as a process: it survives the API server going away for
//! 30 s with visible backoff and no busy loop; SIGTERM stops it within a
//! bound and leaves the node as it is, a restart does not touch Ready, and
//! SIGUSR2 (the node's own shutdown) marks it not Ready.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::api::Api;
use nodestatus_controlplane::EmbeddedApiserver;
use nodestatus_tests::{built, drop_plugin};

#[tokio::test(flavor = "multi_thread")]
async fn survives_an_outage_restarts_invisibly_and_marks_not_ready_only_on_node_shutdown() {
    let state = tempfile::tempdir().unwrap();
    let mut cluster =
        EmbeddedApiserver::start_with(&state.path().join("cluster"), &["term-node"], false, true)
            .await
            .unwrap();
    let plugins = tempfile::tempdir().unwrap();
    drop_plugin(plugins.path(), "ready.wasm", Path::new(built::READY));
    drop_plugin(
        plugins.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    let kubeconfig = cluster.write_node_kubeconfig("term-node").unwrap();
    let log_path = state.path().join("nodestatus.log");
    let start = |log: &Path| {
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args([
                "run",
                "--node-name",
                "term-node",
                "--node-status-update-frequency",
                "1s",
                "--node-lease-duration-seconds",
                "4",
                "--address",
                "",
            ])
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg("--plugin-dir")
            .arg(plugins.path())
            .args(["--cache-dir", built::TEST_CACHE_DIR])
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let mut child = start(&log_path);
    let admin = cluster.admin_client().unwrap();
    let nodes: Api<Node> = Api::all(admin.clone());
    let ready = |n: &Node| {
        n.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Ready"))
            .cloned()
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while nodes
        .get_opt("term-node")
        .await
        .unwrap()
        .as_ref()
        .and_then(ready)
        .is_none_or(|c| c.status != "True")
    {
        assert!(
            Instant::now() < deadline,
            "never Ready: {}",
            std::fs::read_to_string(&log_path).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // 30 s without an API server.
    cluster.stop_apiserver();
    let log_before = std::fs::read_to_string(&log_path).unwrap().len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(
        child.try_wait().unwrap().is_none(),
        "nodestatus exited during the outage"
    );
    let during = std::fs::read_to_string(&log_path).unwrap()[log_before..].to_owned();
    let lease_retries = during.matches("unable to renew the node lease").count();
    let sync_retries = during.matches("unable to update node status").count();
    assert!(
        during.contains("retry_in"),
        "no backoff in the log:\n{during}"
    );
    // The lease backs off from 200 ms doubling to 7 s: about 10 rounds in
    // 30 s (its probes while the server does not answer are never sooner:
    // agent/reach.rs). The status sync's first pass without an answer (5
    // tries) marks the server down, and the sync holds its passes until
    // the lease's probe is served. A busy loop would make thousands.
    assert!(
        (3..=20).contains(&lease_retries),
        "{lease_retries} lease retry rounds in 30 s:\n{during}"
    );
    assert!(
        sync_retries <= 3,
        "{sync_retries} sync passes failed in 30 s (held after the first):\n{during}"
    );

    cluster.start_apiserver().await.unwrap();
    let restarted = k8s_openapi::jiff::Timestamp::now();
    let leases: Api<Lease> = Api::namespaced(cluster.admin_client().unwrap(), "kube-node-lease");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let renewed = leases
            .get_opt("term-node")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.renew_time)
            .is_some_and(|t| t.0 > restarted);
        if renewed {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the lease was not renewed after the outage:\n{}",
            std::fs::read_to_string(&log_path).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // SIGTERM: a clean exit within a bound, and Ready left as it is.
    let nodes: Api<Node> = Api::all(cluster.admin_client().unwrap());
    let before = ready(&nodes.get("term-node").await.unwrap()).unwrap();
    assert_eq!(before.status, "True");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let stopping = Instant::now();
    let status = wait_bounded(&mut child, Duration::from_secs(15), &log_path);
    eprintln!("measured: SIGTERM to exit in {:?}", stopping.elapsed());
    assert!(
        status.success(),
        "exit status {status}:\n{}",
        std::fs::read_to_string(&log_path).unwrap()
    );
    let after = ready(&nodes.get("term-node").await.unwrap()).unwrap();
    assert_eq!(
        (after.status.as_str(), &after.last_transition_time),
        ("True", &before.last_transition_time),
        "SIGTERM touched Ready"
    );

    // A restart: the new process never writes anything but Ready=True, and
    // keeps the transition time, while a poller watches.
    let log2 = state.path().join("nodestatus-2.log");
    let mut child = start(&log2);
    let restarted = k8s_openapi::jiff::Timestamp::now();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut renewed = false;
    while Instant::now() < deadline && !renewed {
        let c = ready(&nodes.get("term-node").await.unwrap()).unwrap();
        assert_eq!(
            (c.status.as_str(), &c.last_transition_time),
            ("True", &before.last_transition_time),
            "the restart changed Ready:\n{}",
            std::fs::read_to_string(&log2).unwrap()
        );
        renewed = leases
            .get_opt("term-node")
            .await
            .ok()
            .flatten()
            .and_then(|l| l.spec?.renew_time)
            .is_some_and(|t| t.0 > restarted);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(renewed, "the restarted process never renewed the lease");
    // Keep polling through the first passes of the new process.
    for _ in 0..30 {
        let c = ready(&nodes.get("term-node").await.unwrap()).unwrap();
        assert_eq!(
            c.status,
            "True",
            "{}",
            std::fs::read_to_string(&log2).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // SIGUSR2: the node itself is shutting down (the operator's signal):
    // Ready=False, `node is shutting down`, and the process goes on.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGUSR2) };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let c = ready(&nodes.get("term-node").await.unwrap()).unwrap();
        if (c.status.as_str(), c.reason.as_deref(), c.message.as_deref())
            == (
                "False",
                Some("KubeletNotReady"),
                Some("node is shutting down"),
            )
        {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "SIGUSR2 did not mark the node shutting down: {c:?}\n{}",
            std::fs::read_to_string(&log2).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        child.try_wait().unwrap().is_none(),
        "SIGUSR2 ended the process"
    );
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(wait_bounded(&mut child, Duration::from_secs(15), &log2).success());
    let c = ready(&nodes.get("term-node").await.unwrap()).unwrap();
    assert_eq!(c.message.as_deref(), Some("node is shutting down"));
}

/// Waits for `child` at most `bound`, then fails with its log.
pub fn wait_bounded(
    child: &mut std::process::Child,
    bound: Duration,
    log: &Path,
) -> std::process::ExitStatus {
    let deadline = Instant::now() + bound;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "no exit within {bound:?} of the signal:\n{}",
                std::fs::read_to_string(log).unwrap()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Stops the embedded cluster that `nodestatus run` left running in a
/// test's directory, however the test ends.
pub(crate) struct StopCluster(pub(crate) std::path::PathBuf);

impl Drop for StopCluster {
    fn drop(&mut self) {
        let _ = EmbeddedApiserver::stop_detached(&self.0);
    }
}

/// What `kubectl get node NAME -o jsonpath=...` prints, as a person would
/// ask.
pub(crate) fn kubectl_node(kubeconfig: &Path, node: &str, jsonpath: &str) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["get", "node", node, "-o"])
        .arg(format!("jsonpath={jsonpath}"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) const READY: &str = "{.status.conditions[?(@.type==\"Ready\")].status}";

/// Waits until `f` holds, failing with `what` and the log after `secs`.
pub(crate) fn wait_until(secs: u64, log: &Path, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(
            Instant::now() < deadline,
            "{what}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

#[test]
fn with_no_kubeconfig_it_runs_a_local_cluster_that_outlives_it_like_a_real_one() {
    let state = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    drop_plugin(plugins.path(), "ready.wasm", Path::new(built::READY));
    let embedded = state.path().join("embedded");
    let _stop = StopCluster(embedded.clone());
    let start = |log: &Path| {
        Command::new(env!("CARGO_BIN_EXE_nodestatus"))
            .args(["run", "--node-name", "embedded-node", "--address", ""])
            .args(["--node-status-update-frequency", "1s"])
            .args(["--node-lease-duration-seconds", "4"])
            .args(["--embedded-node-monitor-grace-period", "8s"])
            .arg("--plugin-dir")
            .arg(plugins.path())
            .arg("--embedded-dir")
            .arg(&embedded)
            .args(["--cache-dir", built::TEST_CACHE_DIR])
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap()
    };
    let log_path = state.path().join("nodestatus.log");
    let mut child = start(&log_path);
    let admin = embedded.join("kubeconfig-admin");
    let hint = format!(
        "kubectl --kubeconfig {} get node embedded-node",
        admin.display()
    );
    wait_until(120, &log_path, "no kubectl hint", || {
        assert!(child.try_wait().unwrap().is_none(), "exited");
        std::fs::read_to_string(&log_path).unwrap().contains(&hint)
    });
    // It says which release it runs: the one of the cache it started
    // (NODESTATUS_K8S_VERSION's, in a run of the version matrix).
    let release = format!(
        "local kube-apiserver (Kubernetes v{}) at https://",
        nodestatus_controlplane::kubernetes_version()
    );
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains(&release), "{release:?} not in:\n{log}");
    // kubectl, as a person would run it, shows the node Ready, and the node
    // lifecycle controller takes the not-ready taint off.
    wait_until(30, &log_path, "never Ready", || {
        kubectl_node(&admin, "embedded-node", READY) == "True"
    });
    wait_until(30, &log_path, "the not-ready taint stays", || {
        !kubectl_node(&admin, "embedded-node", "{.spec.taints[*].key}")
            .contains("node.kubernetes.io/not-ready")
    });
    // Ctrl-C: nodestatus exits, the cluster runs on, and the controller marks
    // the silent node Unknown, as for a kubelet that stops.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    assert!(
        child.wait().unwrap().success(),
        "{}",
        std::fs::read_to_string(&log_path).unwrap()
    );
    wait_until(
        40,
        &log_path,
        "never Unknown after the engine stopped",
        || kubectl_node(&admin, "embedded-node", READY) == "Unknown",
    );
    // The next run attaches to the same cluster; the node is Ready again.
    let log_path = state.path().join("nodestatus-2.log");
    let mut child = start(&log_path);
    wait_until(60, &log_path, "never Ready again", || {
        assert!(child.try_wait().unwrap().is_none(), "exited");
        kubectl_node(&admin, "embedded-node", READY) == "True"
    });
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("still running from an earlier run"), "{log}");
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    // And it stops on request.
    let stop = Command::new(env!("CARGO_BIN_EXE_nodestatus"))
        .args(["run", "--embedded-stop", "--embedded-dir"])
        .arg(&embedded)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&stop.stderr);
    assert!(stop.status.success(), "{stderr}");
    assert!(stderr.contains("stopped the local cluster in"), "{stderr}");
    assert!(!embedded.join("cluster.json").exists());
    assert!(kubectl_node(&admin, "embedded-node", READY).is_empty());
}
