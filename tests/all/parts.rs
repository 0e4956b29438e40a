//! WIT 0.2: a setter returns its part. Hand-written 0.2 components (their
//! part is exactly what the test says) through the real runtime and pass;
//! the 0.1.0 and 0.1.1 components of the repository's history in the same
//! pass as the shipped 0.2 setters.

use std::path::Path;

use serde_json::{Value, json};

use nodestatus_engine::pipeline::SetterErrorKind::{self, Call};
use nodestatus_engine::pipeline::pass;
use nodestatus_model::ownership::{OWNED_FIELDS_ANNOTATION, Ownership};
use nodestatus_runtime::{CallContext, CallErrorKind, Interface, PluginSettings};
use nodestatus_tests::hostile::{self, Behaviour};
use nodestatus_tests::{built, drop_bytes, drop_plugin, nodes};

use crate::common::*;

/// The WIT 0.1 components built from history by
/// `scripts/build-compat-fixtures.sh`.
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/fixtures/wit-0.1");

fn ownership(node: &Value) -> Ownership {
    Ownership::from_node(node)
}

fn owned(node: &Value, plugin: &str) -> Vec<String> {
    ownership(node)
        .owned_by(plugin)
        .map(|p| p.to_string())
        .collect()
}

#[test]
fn a_part_is_merged_and_what_it_leaves_out_next_time_is_removed() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    let d = tmp.path();
    let first = r#"{"metadata":{"labels":{"example.com/gpu":"true","example.com/model":"a100"}},
        "status":{"conditions":[{"type":"GPUHealthy","status":"True","reason":"AllHealthy"}],
        "capacity":{"example.com/gpu":"2"},"allocatable":{"example.com/gpu":"2"}}}"#;
    drop_bytes(
        d,
        "gpu.wasm",
        &hostile::part_component("gpu", &Behaviour::Return(first.into())),
    );
    drop_plugin(d, "kernel-check.wasm", Path::new(built::KERNEL_CHECK));
    dir.rescan();
    let set = dir.current();
    let gpu = set.setters().iter().find(|s| s.name() == "gpu").unwrap();
    assert_eq!(gpu.plugin().interface(), Interface::V0_2);
    let mut node = nodes::small_node("n1");
    node["metadata"]["labels"]["someone.else/label"] = json!("kept");

    let once = pass_ok(&dir, &node);
    let labels = &once["metadata"]["labels"];
    assert_eq!(labels["example.com/gpu"], "true");
    assert_eq!(labels["example.com/model"], "a100");
    assert_eq!(labels["someone.else/label"], "kept");
    assert_eq!(once["status"]["capacity"]["example.com/gpu"], "2");
    let c = condition_of(&once, "GPUHealthy").unwrap();
    assert_eq!(c["status"], "True");
    assert!(
        c["lastHeartbeatTime"].is_string() && c["lastTransitionTime"].is_string(),
        "the host stamps the times: {c}"
    );
    assert!(
        condition_of(&once, "KernelSupported").is_some(),
        "the other setter ran"
    );
    let mut mine = owned(&once, "gpu");
    mine.sort();
    assert_eq!(
        mine,
        [
            "metadata.labels[example.com/gpu]",
            "metadata.labels[example.com/model]",
            "status.allocatable[example.com/gpu]",
            "status.capacity[example.com/gpu]",
            "status.conditions[GPUHealthy]",
        ]
    );

    // The same part again: the node is as it was (but for heartbeats).
    let again = pass_ok(&dir, &once);
    assert_eq!(without_times(again.clone()), without_times(once.clone()));

    // A new version sets less: the model label and the resource are gone,
    // the rest stays, and it owns only what it set.
    let second = r#"{"metadata":{"labels":{"example.com/gpu":"true"}},
        "status":{"conditions":[{"type":"GPUHealthy","status":"True","reason":"AllHealthy"}]}}"#;
    drop_bytes(
        d,
        "gpu.wasm",
        &hostile::part_component("gpu", &Behaviour::Return(second.into())),
    );
    dir.rescan();
    let after = pass_ok(&dir, &again);
    let labels = &after["metadata"]["labels"];
    assert_eq!(labels["example.com/gpu"], "true");
    assert!(labels.get("example.com/model").is_none(), "{labels}");
    assert!(after["status"]["capacity"].get("example.com/gpu").is_none());
    assert_eq!(
        condition_of(&after, "GPUHealthy").unwrap()["lastTransitionTime"],
        condition_of(&once, "GPUHealthy").unwrap()["lastTransitionTime"],
        "the status never flipped"
    );
    assert_eq!(owned(&after, "gpu").len(), 2);

    // `none`: the node holds its part; nothing changes, ownership stays.
    drop_bytes(
        d,
        "gpu.wasm",
        &hostile::part_component("gpu", &Behaviour::Held),
    );
    dir.rescan();
    let held = pass_ok(&dir, &after);
    assert_eq!(without_times(held.clone()), without_times(after.clone()));
    assert_eq!(owned(&held, "gpu").len(), 2);

    // An empty part: it sets nothing now, so its fields go.
    drop_bytes(
        d,
        "gpu.wasm",
        &hostile::part_component("gpu", &Behaviour::Return("{}".into())),
    );
    dir.rescan();
    let empty = pass_ok(&dir, &held);
    assert!(empty["metadata"]["labels"].get("example.com/gpu").is_none());
    assert!(condition_of(&empty, "GPUHealthy").is_none());
    assert!(owned(&empty, "gpu").is_empty());
    assert!(
        empty["metadata"]["annotations"][OWNED_FIELDS_ANNOTATION]
            .as_str()
            .is_some_and(|a| a.contains("kernel-check")),
        "the other plugin's record stays"
    );
}

#[test]
fn each_hostile_part_fails_alone_and_the_others_still_run() {
    let (tmp, dir) = plugin_dir(spin_briefly());
    let d = tmp.path();
    drop_plugin(d, "kernel-check.wasm", Path::new(built::KERNEL_CHECK));
    let cases: Vec<(&str, Behaviour, SetterErrorKind)> = vec![
        ("spin", Behaviour::Spin, Call(CallErrorKind::Timeout)),
        ("trap", Behaviour::Trap, Call(CallErrorKind::Trap)),
        ("grow", Behaviour::GrowMemory, Call(CallErrorKind::Memory)),
        (
            "garbage",
            Behaviour::Return("this is not JSON".into()),
            SetterErrorKind::Output,
        ),
        (
            "list",
            Behaviour::Return("[1, 2, 3]".into()),
            SetterErrorKind::Output,
        ),
        (
            "pod",
            Behaviour::Return(r#"{"kind":"Pod"}"#.into()),
            SetterErrorKind::Output,
        ),
        (
            "rename",
            Behaviour::Return(r#"{"metadata":{"name":"someone-else"}}"#.into()),
            SetterErrorKind::Output,
        ),
        (
            "twice",
            Behaviour::Return(
                r#"{"status":{"conditions":[{"type":"A","status":"True"},{"type":"A","status":"False"}]}}"#
                    .into(),
            ),
            SetterErrorKind::Output,
        ),
        (
            "role",
            Behaviour::Return(
                r#"{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}"#.into(),
            ),
            SetterErrorKind::Policy,
        ),
        (
            "taint",
            Behaviour::Return(r#"{"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]}}"#.into()),
            SetterErrorKind::Policy,
        ),
        (
            "forge",
            Behaviour::Return(
                r#"{"metadata":{"annotations":{"nodestatus.io/owned-fields":"{}"}}}"#.into(),
            ),
            SetterErrorKind::Policy,
        ),
        (
            "bad-quantity",
            Behaviour::Return(r#"{"status":{"capacity":{"example.com/gpu":"two"}}}"#.into()),
            SetterErrorKind::Invalid,
        ),
        ("fail", Behaviour::Fail("no device".into()), Call(CallErrorKind::Plugin)),
        (
            "utf8",
            Behaviour::ReturnBytes(vec![b'{', 0xff, 0xfe, b'}']),
            Call(CallErrorKind::InvalidResult),
        ),
        ("oob", Behaviour::OutOfBounds, Call(CallErrorKind::InvalidResult)),
        (
            "huge",
            Behaviour::HugeOutput(5 << 20),
            Call(CallErrorKind::OutputTooLarge),
        ),
        // The whole node given back as a part: it names the ownership
        // record, the host's own.
        ("echo", Behaviour::Echo, SetterErrorKind::Policy),
    ];
    for (name, b, _) in &cases {
        drop_bytes(
            d,
            &format!("{name}.wasm"),
            &hostile::part_component(name, b),
        );
    }
    dir.rescan();
    assert_eq!(dir.current().setters().len(), cases.len() + 1);
    let mut node = nodes::small_node("n1");
    node["metadata"]["labels"]["kubernetes.io/hostname"] = json!("n1");
    node["metadata"]["annotations"] = json!({OWNED_FIELDS_ANNOTATION: "{}"});
    node["status"]["conditions"] =
        json!([{"type": "Ready", "status": "True", "reason": "KubeletReady"}]);
    let (out, report) = pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &CallContext::default(),
        Default::default(),
    );
    for (name, _, kind) in &cases {
        let s = report
            .setters
            .iter()
            .find(|s| s.plugin == *name)
            .unwrap_or_else(|| panic!("{name} did not run"));
        let e = s.outcome.as_ref().expect_err(name);
        assert_eq!(e.kind, *kind, "{name}: {e}");
    }
    assert!(report.refused.is_none());
    assert!(
        condition_of(&out, "KernelSupported").is_some(),
        "the good setter's result reached the node"
    );
    assert_eq!(condition_of(&out, "Ready").unwrap()["status"], "True");
    assert!(
        out["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_none()
    );
    assert!(out["status"].get("capacity").is_none());
    assert!(out["spec"].get("taints").is_none());
}

/// Issue 34, item 2: a 0.1.0 and a 0.1.1 component from the repository's
/// history run in the same pass as the shipped 0.2 setters, the host
/// computing their parts by the diff as before.
#[test]
fn components_of_wit_0_1_0_and_0_1_1_run_beside_0_2_ones_in_one_pass() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    let fixtures = Path::new(FIXTURES);
    // kernel-check of WIT 0.1.0 (4d38082), os-arch of 0.1.1 (f32729a).
    drop_plugin(d, "kernel-check.wasm", &fixtures.join("kernel-check.wasm"));
    drop_plugin(d, "os-arch.wasm", &fixtures.join("os-arch.wasm"));
    for (file, path) in [
        ("memory-pressure.wasm", built::MEMORY_PRESSURE),
        ("machine-info.wasm", built::MACHINE_INFO),
        ("ready.wasm", built::READY),
    ] {
        drop_plugin(d, file, Path::new(path));
    }
    // The default config's grants (machine-info reads /proc).
    let (_, dir) = configured(nodestatus_engine::config::DEFAULT_CONFIG, d);
    let set = dir.current();
    let interface = |name: &str| {
        set.setters()
            .iter()
            .find(|s| s.name() == name)
            .unwrap_or_else(|| panic!("{name} is not loaded"))
            .plugin()
            .interface()
    };
    assert_eq!(interface("kernel-check"), Interface::V0_1);
    assert_eq!(interface("os-arch"), Interface::V0_1);
    for name in ["memory-pressure", "machine-info", "ready"] {
        assert_eq!(interface(name), Interface::V0_2, "{name}");
    }
    let node = nodes::small_node("n1");
    let out = pass_ok(&dir, &node);
    // The 0.1 setters' fields, found by the diff and owned.
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert_eq!(
        condition_of(&out, "KernelSupported").unwrap()["status"],
        "True"
    );
    assert_eq!(out["status"]["nodeInfo"]["operatingSystem"], "linux");
    assert!(owned(&out, "kernel-check").contains(&"status.conditions[KernelSupported]".into()));
    assert!(owned(&out, "os-arch").contains(&"status.nodeInfo.operatingSystem".into()));
    // The 0.2 setters' parts, merged and owned.
    assert!(condition_of(&out, "MemoryPressure").is_some());
    assert!(out["status"]["capacity"]["cpu"].is_string());
    assert_eq!(condition_of(&out, "Ready").unwrap()["status"], "True");
    assert!(owned(&out, "memory-pressure").contains(&"status.conditions[MemoryPressure]".into()));
    assert_eq!(
        condition_types(&out).last(),
        Some(&"Ready"),
        "Ready stays the last condition"
    );
    // A second pass over its own output changes nothing but heartbeats.
    let again = pass_ok(&dir, &out);
    assert_eq!(without_times(again), without_times(out));
}

#[test]
fn a_condition_added_once_ready_exists_goes_before_ready() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    let part = r#"{"status":{"conditions":[{"type":"GPUHealthy","status":"True","reason":"AllHealthy"}]}}"#;
    drop_bytes(
        tmp.path(),
        "gpu.wasm",
        &hostile::part_component("gpu", &Behaviour::Return(part.into())),
    );
    dir.rescan();
    let mut node = nodes::small_node("n1");
    node["status"]["conditions"] = json!([
        {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
        {"type": "Ready", "status": "True", "reason": "KubeletReady"}
    ]);
    let out = pass_ok(&dir, &node);
    assert_eq!(
        condition_types(&out),
        ["MemoryPressure", "GPUHealthy", "Ready"]
    );
}
