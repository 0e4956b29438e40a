//! Parity, field by field, between the Node a kubelet writes and the one
//! nodestatus computes on the same machine: a markdown table with every
//! field, its two values, and whether they match, differ as expected (with
//! the reason), or differ unexpectedly.
//!
//! Today the nodestatus side is `nodestatus once` on the host with
//! `deploy/default-config.yaml` and the kubelet's containerd as its CRI
//! endpoint, and `nodestatus once` in a pod with the shipped ConfigMap (no
//! CRI socket there: [`WITHOUT_CRI`]); a standalone node B registered by
//! nodestatus (issue 14) is the next step.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use anyhow::{Context, ensure};
use serde_json::Value;

/// Expected differences between the kubelet's node and nodestatus's: a
/// field (or a prefix ending in `*`) and the reason.
pub const EXPECTED: &[(&str, &str)] = &[
    (
        "status.nodeInfo.kubeletVersion",
        "each writer reports its own version",
    ),
    (
        "status.nodeInfo.kubeProxyVersion",
        "each writer reports its own version (a kubelet older than 1.33 writes it; empty from 1.33)",
    ),
    (
        "status.conditions[*].lastHeartbeatTime",
        "times of each writer's own pass",
    ),
    (
        "status.conditions[*].lastTransitionTime",
        "times of each writer's own pass",
    ),
    (
        "status.conditions[KernelSupported]*",
        "the companion DaemonSet's setter on the kubelet's node",
    ),
    (
        "status.conditions[ReadonlyFilesystem]*",
        "the companion DaemonSet's setter on the kubelet's node",
    ),
    (
        "metadata.labels[kernel.example.com/version]",
        "the companion DaemonSet's setter on the kubelet's node",
    ),
    (
        "metadata.annotations[disk.nodestatus.io/*",
        "the companion DaemonSet's setter on the kubelet's node",
    ),
    (
        "metadata.annotations[realnode.nodestatus.io/*",
        "the test's least-privilege probe",
    ),
    (
        "status.capacity[example.com/local-disk]",
        "the companion DaemonSet's disk reporter",
    ),
    (
        "status.allocatable[example.com/local-disk]",
        "the companion DaemonSet's disk reporter",
    ),
    (
        "metadata.labels[feature.node.kubernetes.io/*",
        "the default set's features setter: node-feature-discovery's labels, which no kubelet writes",
    ),
    (
        "metadata.annotations[nodestatus.io/owned-fields]",
        "nodestatus's own record of the fields each plugin owns",
    ),
    (
        "metadata.annotations[node.alpha.kubernetes.io/ttl]",
        "set by kube-controller-manager's ttl controller when it runs, not by a node agent",
    ),
];

/// More expected differences when nodestatus has no CRI socket (the
/// DaemonSet mounts none): the runtime's facts.
pub const WITHOUT_CRI: &[(&str, &str)] = &[
    (
        "status.nodeInfo.containerRuntimeVersion",
        "no CRI socket: nodestatus says Unknown",
    ),
    ("status.images", "no CRI socket: nodestatus lists no images"),
];

/// More expected differences for the shipped ConfigMap (`companion: true`):
/// beside a kubelet, the kubelet writes what it reads from its runtime and
/// machine, and nodestatus leaves those fields to it.
pub const COMPANION: &[(&str, &str)] = &[
    (
        "status.declaredFeatures",
        "companion mode: the kubelet's own field",
    ),
    (
        "status.nodeInfo.runningInUserNamespace",
        "companion mode: the kubelet's own field",
    ),
    (
        "status.runtimeHandlers",
        "companion mode: the kubelet's own field",
    ),
    ("status.features", "companion mode: the kubelet's own field"),
    (
        "status.nodeInfo.swap",
        "companion mode: the kubelet's own field",
    ),
];

/// The compared fields of a Node, flattened: labels, annotations, taints,
/// capacity, allocatable, conditions (type, status, reason, message, times),
/// addresses, daemonEndpoints, nodeInfo and images, and what a current
/// kubelet adds: runtimeHandlers, features and declaredFeatures.
pub fn fields(n: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for key in ["labels", "annotations"] {
        for (k, v) in n["metadata"][key].as_object().into_iter().flatten() {
            out.insert(format!("metadata.{key}[{k}]"), text(v));
        }
    }
    out.insert("spec.taints".into(), text(&n["spec"]["taints"]));
    for key in ["capacity", "allocatable"] {
        for (k, v) in n["status"][key].as_object().into_iter().flatten() {
            out.insert(format!("status.{key}[{k}]"), text(v));
        }
    }
    for c in n["status"]["conditions"].as_array().into_iter().flatten() {
        let t = c["type"].as_str().unwrap_or("?");
        for f in [
            "status",
            "reason",
            "message",
            "lastHeartbeatTime",
            "lastTransitionTime",
        ] {
            out.insert(format!("status.conditions[{t}].{f}"), text(&c[f]));
        }
    }
    out.insert("status.addresses".into(), text(&n["status"]["addresses"]));
    for key in [
        "daemonEndpoints",
        "runtimeHandlers",
        "features",
        "declaredFeatures",
    ] {
        out.insert(format!("status.{key}"), text(&n["status"][key]));
    }
    for (k, v) in n["status"]["nodeInfo"].as_object().into_iter().flatten() {
        out.insert(format!("status.nodeInfo.{k}"), text(v));
    }
    let images: Vec<String> = n["status"]["images"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|i| text(&i["names"]))
        .collect();
    out.insert("status.images".into(), images.join(" "));
    out
}

fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => canonical(other).to_string(),
    }
}

/// `v` with every object's keys sorted, so that two writers' key orders
/// compare equal.
fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let sorted: BTreeMap<&String, Value> =
                m.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

fn expected<'a>(field: &str, list: &'a [(&str, &str)]) -> Option<&'a str> {
    list.iter()
        .find(|(pat, _)| matches(pat, field))
        .map(|(_, why)| *why)
}

/// `pat` with `*` matching any run of characters.
fn matches(pat: &str, s: &str) -> bool {
    match pat.split_once('*') {
        None => pat == s,
        Some((head, tail)) => {
            s.starts_with(head)
                && (0..=s.len() - head.len()).any(|i| {
                    s.is_char_boundary(head.len() + i) && matches(tail, &s[head.len() + i..])
                })
        }
    }
}

fn cell(s: &str) -> String {
    let s = s.replace('|', "\\|");
    if s.is_empty() {
        "(none)".into()
    } else if s.chars().count() > 70 {
        format!("{}…", s.chars().take(70).collect::<String>())
    } else {
        s
    }
}

/// The markdown table of every field of either node (the number of
/// unexpected differences on its last line), and that number.
pub fn table(kubelet: &Value, ours: &Value, expected_diffs: &[(&str, &str)]) -> (String, usize) {
    let (mut a, mut b) = (fields(kubelet), fields(ours));
    // The order of the conditions both nodes have.
    let types = |n: &Value| -> Vec<String> {
        n["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["type"].as_str().map(str::to_owned))
            .collect()
    };
    let (ta, tb) = (types(kubelet), types(ours));
    let order = |t: &[String], other: &[String]| -> String {
        t.iter()
            .filter(|x| other.contains(x))
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    };
    let key = "status.conditions (order of the common types)".to_owned();
    a.insert(key.clone(), order(&ta, &tb));
    b.insert(key, order(&tb, &ta));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut out = String::from("| field | kubelet | nodestatus | verdict |\n|---|---|---|---|\n");
    let mut unexpected = 0;
    for k in keys {
        let (x, y) = (
            a.get(k).map_or("", String::as_str),
            b.get(k).map_or("", String::as_str),
        );
        let verdict = if x == y {
            "same".to_owned()
        } else if let Some(why) = expected(k, expected_diffs) {
            format!("expected: {why}")
        } else {
            unexpected += 1;
            "**DIFFERS**".to_owned()
        };
        out.push_str(&format!(
            "| `{k}` | {} | {} | {verdict} |\n",
            cell(x),
            cell(y)
        ));
    }
    out.push_str(&format!("\nunexpected differences: {unexpected}\n"));
    (out, unexpected)
}

/// `nodestatus once` on this host with `deploy/default-config.yaml`, the
/// default plugin set and no CRI; with the kubelet's `--hostname-override`,
/// and its root dir `kubelet_root` as machine-info's `rootDir` and
/// disk-pressure's `nodefsPath` (the kubelet's filesystem, where
/// `/var/lib/kubelet` would be), containerd's root as its `imagefsPath`;
/// and the kubelet's containerd as its
/// `containerRuntimeEndpoint` (the runtime facts over CRI).
/// The default plugin set and its config for this host (see
/// [`once_on_host`]): a temporary directory, its plugin directory and config.
fn host_setup(
    kubelet_root: &Path,
    runtime_endpoint: &str,
) -> anyhow::Result<(tempfile::TempDir, std::path::PathBuf, std::path::PathBuf)> {
    let dir = tempfile::tempdir()?;
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins)?;
    let built = Path::new(nodestatus_tests::built::READY)
        .parent()
        .context("the plugins' directory")?;
    for name in [
        "node_address",
        "machine_info",
        "version_info",
        "daemon_endpoints",
        "images",
        "os_arch",
        "memory_pressure",
        "disk_pressure",
        "pid_pressure",
        "volumes",
        "ready",
    ] {
        std::fs::copy(
            built.join(format!("{name}.wasm")),
            plugins.join(format!("{}.wasm", name.replace('_', "-"))),
        )?;
    }
    let config = dir.path().join("config.yaml");
    let default = std::fs::read_to_string(super::repo().join("deploy/default-config.yaml"))?;
    let mut c: serde_yaml::Value = serde_yaml::from_str(&default)?;
    let root = serde_yaml::Value::from(kubelet_root.display().to_string());
    c["hostnameOverride"] = super::NODE.into();
    c["containerRuntimeEndpoint"] = runtime_endpoint.into();
    c["plugins"]["machine-info"]["config"]["rootDir"] = root.clone();
    c["plugins"]["disk-pressure"]["config"]["nodefsPath"] = root;
    // containerd's root, on the node's disk with the kubelet's root dir
    // (scripts/real-node.sh): the kubelet's imagefs.
    c["plugins"]["disk-pressure"]["config"]["imagefsPath"] = kubelet_root
        .parent()
        .context("the node's directory")?
        .join("disk/containerd")
        .display()
        .to_string()
        .into();
    std::fs::write(&config, serde_yaml::to_string(&c)?)?;
    Ok((dir, plugins, config))
}

pub fn once_on_host(
    bin: &Path,
    kubelet_root: &Path,
    runtime_endpoint: &str,
) -> anyhow::Result<Value> {
    let (_dir, plugins, config) = host_setup(kubelet_root, runtime_endpoint)?;
    let out = Command::new(bin)
        .args(["once", "--node-name", super::NODE])
        .arg(format!("--kubernetes-version={}", super::release()))
        .arg("--plugin-dir")
        .arg(&plugins)
        .arg("--config")
        .arg(&config)
        .arg("--cache-dir")
        .arg(nodestatus_tests::built::TEST_CACHE_DIR)
        .output()?;
    ensure!(
        out.status.success(),
        "nodestatus once failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(serde_json::from_slice(&out.stdout)?)
}

/// `nodestatus run` on this host, standalone, as node `name` with `name`'s
/// own credential (`kubeconfig`): the same plugins and config as
/// [`once_on_host`] (the kubelet's hostname, root dir and containerd), so it
/// registers a second node from the same machine. Kill the child to stop it.
pub fn run_on_host(
    bin: &Path,
    kubelet_root: &Path,
    runtime_endpoint: &str,
    kubeconfig: &Path,
    name: &str,
) -> anyhow::Result<(std::process::Child, tempfile::TempDir)> {
    let (dir, plugins, config) = host_setup(kubelet_root, runtime_endpoint)?;
    let log = std::fs::File::create(dir.path().join("nodestatus.log"))?;
    let child = Command::new(bin)
        .args(["run", "--node-name", name, "--address", "", "--plugin-dir"])
        .arg(&plugins)
        .arg("--config")
        .arg(&config)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(nodestatus_tests::built::TEST_CACHE_DIR)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()?;
    Ok((child, dir))
}
