//! The `features` plugin (node-feature-discovery's labels and feature
//! files) as a real component against the real API server: NFD's labels of
//! this machine's own sysfs and procfs, and feature files dropped into a
//! watched directory reaching the node through the file trigger: the
//! status sync's period is 60 s, and the changes are made once the node is
//! Ready (which ends the fast update at start), so that only the trigger
//! can write them in time.

use std::path::Path;
use std::time::{Duration, Instant};

use nodestatus_engine::streams::Streams;
use nodestatus_tests::{built, drop_plugin};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::events::events;
use crate::kube::{TestAgent, build_agent, server_node, until};

const FEATURES_D: &str = "/etc/kubernetes/node-feature-discovery/features.d";

async fn labels(node: &str) -> Value {
    server_node(node)
        .await
        .map(|n| n["metadata"]["labels"].clone())
        .unwrap_or(Value::Null)
}

/// An agent of node `name` running `features` with the config section
/// `section` (YAML, indented under its name) and `ready`, its file
/// triggers followed, its regular pass every 60 s.
fn agent(name: &str, section: &str) -> TestAgent {
    let dir = tempfile::tempdir().unwrap();
    drop_plugin(dir.path(), "features.wasm", Path::new(built::FEATURES));
    drop_plugin(dir.path(), "ready.wasm", Path::new(built::READY));
    let yaml = format!(
        "nodeName: {name}\nnodeStatusUpdateFrequency: 60s\nnodeStatusReportFrequency: 5m\nnodeLeaseDurationSeconds: 40\npluginDir: {}\nplugins:\n  features:\n{section}  ready: {{}}\n",
        dir.path().display()
    );
    build_agent(name, name, &yaml, dir, None, |a| {
        a.with_streams(Streams::new())
    })
}

/// Waits until the node is Ready, which ends the fast status update at
/// start (a pass every 100 ms): from then on only the regular pass (60 s)
/// and the file trigger run passes, so a change seen within a second was
/// the trigger's.
async fn ready(node: &str) {
    assert!(
        until(30, || async {
            server_node(node)
                .await
                .is_some_and(|n| nodestatus_engine::agent::is_ready(&n))
        })
        .await,
        "{node} did not turn Ready"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// Writes `name` in `dir` as writers are told to: a dot file, renamed.
fn drop_file(dir: &Path, name: &str, text: &str) {
    let tmp = dir.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, dir.join(name)).unwrap();
}

/// How long until `check` holds of the node's labels, polled every 20 ms,
/// up to 5 s.
async fn time_until(node: &str, check: impl Fn(&Value) -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        if check(&labels(node).await) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// What NFD writes of a kernel release (`[^-A-Za-z0-9_.]` made `_`, `-_.`
/// cut at the ends).
fn nfd_full(release: &str) -> String {
    let s: String = release
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    s.trim_matches(['-', '_', '.']).to_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn feature_files_dropped_changed_and_removed_reach_the_node_within_a_second() {
    let node = "features-local";
    let fd = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    drop_file(fd.path(), "pre", "vendor.example.com/pre=1\n");
    // The default config's grants, the feature files' directory mapped
    // from a temporary one at NFD's path.
    let section = format!(
        "    reuseInstance: true\n    paths: [/sys, /proc, /boot, {{path: {FEATURES_D}, from: {}}}]\n    config: {{}}\n",
        fd.path().display()
    );
    let mut t = agent(node, &section);
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    ready(node).await;
    assert!(
        until(30, || async {
            labels(node).await["vendor.example.com/pre"] == "1"
        })
        .await,
        "the first pass did not write the feature file's label: {:#}\nlast pass: {:?}\nready: {:?}\nplugins: {:?}",
        labels(node).await,
        t.handle.last_pass(),
        t.handle.ready_reason(),
        t.handle.plugins().status()
    );
    // The sources, read from this machine's own files.
    let l = labels(node).await;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(
        l["feature.node.kubernetes.io/kernel-version.full"],
        nfd_full(release.trim()),
        "{l:#}"
    );
    if let Ok(out) = std::process::Command::new("zcat")
        .arg("/proc/config.gz")
        .output()
        && out.status.success()
    {
        // /proc/config.gz read through the filtered /proc view.
        let config = String::from_utf8_lossy(&out.stdout);
        let no_hz = config.lines().any(|line| line == "CONFIG_NO_HZ=y");
        assert_eq!(
            l.get("feature.node.kubernetes.io/kernel-config.NO_HZ")
                .is_some(),
            no_hz,
            "{l:#}"
        );
    }
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    if cpuinfo.contains("vendor_id") {
        assert!(
            l["feature.node.kubernetes.io/cpu-model.family"].is_string(),
            "{l:#}"
        );
    }
    let swap = std::fs::read_to_string("/proc/swaps").unwrap();
    assert_eq!(
        l.get("feature.node.kubernetes.io/memory-swap").is_some(),
        swap.lines().filter(|s| !s.trim().is_empty()).count() > 1,
        "{l:#}"
    );

    // A file dropped: its labels, all but the bad line's, within a second.
    drop_file(
        fd.path(),
        "gpu",
        "nvidia.com/gpu.present=true\nBad Name=1\n# +expiry-time=2012-07-28T11:22:33Z\nexpired=1\n# +expiry-time=2080-07-28T11:22:33Z\ngpu-count=2\n",
    );
    let took = time_until(node, |l| {
        l["nvidia.com/gpu.present"] == "true" && l["feature.node.kubernetes.io/gpu-count"] == "2"
    })
    .await
    .expect("the dropped file's labels never came");
    let what = "a file dropped";
    eprintln!("{what}: {took:?}");
    assert!(took < Duration::from_secs(1), "{what}: took {took:?}");
    let l = labels(node).await;
    assert!(
        l.get("feature.node.kubernetes.io/expired").is_none(),
        "{l:#}"
    );
    assert_eq!(
        l["vendor.example.com/pre"], "1",
        "the other file still applies"
    );
    assert!(
        until(5, || async {
            events(node, "FeatureFileRefused")
                .await
                .iter()
                .any(|(kind, m)| kind == "Warning" && m.contains("gpu:2: invalid label name"))
        })
        .await,
        "{:?}",
        events(node, "FeatureFileRefused").await
    );

    // Passes woken by the trigger are gated at about one a second after
    // two back to back (docs/events.md), and a write-then-rename is a few
    // file events: each change here comes alone, 2 s after the last.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    // Changed: the new value.
    drop_file(fd.path(), "gpu", "nvidia.com/gpu.present=false\n");
    let took = time_until(node, |l| {
        l["nvidia.com/gpu.present"] == "false"
            && l.get("feature.node.kubernetes.io/gpu-count").is_none()
    })
    .await
    .expect("the changed file's labels never came");
    let what = "a file changed";
    eprintln!("{what}: {took:?}");
    assert!(took < Duration::from_secs(1), "{what}: took {took:?}");

    tokio::time::sleep(Duration::from_millis(2100)).await;
    // Removed: its labels are released, the other file's stay.
    std::fs::remove_file(fd.path().join("gpu")).unwrap();
    let took = time_until(node, |l| l.get("nvidia.com/gpu.present").is_none())
        .await
        .expect("the removed file's label was never released");
    let what = "a file removed";
    eprintln!("{what}: {took:?}");
    assert!(took < Duration::from_secs(1), "{what}: took {took:?}");
    assert_eq!(labels(node).await["vendor.example.com/pre"], "1");
    cancel.cancel();
    run.await.unwrap().unwrap();
}

/// A side-car that creates `features.d` after the engine started (its
/// parent too), as a hostPath `DirectoryOrCreate` of its own pod does:
/// the files it drops there reach the node within a second all the same.
#[tokio::test(flavor = "multi_thread")]
async fn a_features_d_created_after_the_start_is_watched_once_it_appears() {
    let node = "features-later";
    let host = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let fd = host.path().join("node-feature-discovery/features.d");
    let section = format!(
        "    paths: [{{path: {FEATURES_D}, from: {}}}]\n    config: {{core: {{labelSources: [local]}}}}\n",
        fd.display()
    );
    let mut t = agent(node, &section);
    let cancel = CancellationToken::new();
    let run = t.spawn(&cancel);
    ready(node).await;
    std::fs::create_dir_all(&fd).unwrap();
    // The directory's creation wakes a pass, which finds it empty.
    tokio::time::sleep(Duration::from_millis(500)).await;
    drop_file(&fd, "gpu", "nvidia.com/gpu.present=true\n");
    let took = time_until(node, |l| l["nvidia.com/gpu.present"] == "true")
        .await
        .expect("a file in a features.d created after the start never reached the node");
    eprintln!("a file in a features.d created later: {took:?}");
    assert!(took < Duration::from_secs(1), "took {took:?}");
    cancel.cancel();
    run.await.unwrap().unwrap();
}
