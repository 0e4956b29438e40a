//! Hostile plugins: each fails alone, with a clear error, while the other
//! setters' results still reach the output.

use std::path::Path;
use std::time::Duration;

use nodestatus::pipeline::run_pass;
use nodestatus::plugin_dir::ReloadEvent;
use nodestatus::runtime::{CallContext, CallErrorKind, PluginSettings};
use nodestatus_tests::hostile::{self, Behaviour};
use nodestatus_tests::{built, drop_bytes, drop_plugin, nodes};

use crate::common::*;

#[test]
fn each_hostile_plugin_fails_alone_and_the_others_still_run() {
    let (tmp, dir) = plugin_dir(settings(|name| PluginSettings {
        // Short deadline so the looping guest costs the test little.
        timeout: if name == "spin" {
            Duration::from_millis(200)
        } else {
            nodestatus::runtime::DEFAULT_TIMEOUT
        },
        ..Default::default()
    }));
    let d = tmp.path();
    drop_plugin(d, "kernel-check.wasm", Path::new(built::KERNEL_CHECK));
    let cases: Vec<(&str, Behaviour)> = vec![
        ("spin", Behaviour::Spin),
        ("grow", Behaviour::GrowMemory),
        ("trap", Behaviour::Trap),
        ("garbage", Behaviour::Return("this is not JSON".into())),
        ("not-a-node", Behaviour::Return("[1, 2, 3]".into())),
        ("pod", Behaviour::Return(r#"{"kind":"Pod","metadata":{"name":"x"}}"#.into())),
        (
            "rename",
            Behaviour::Return(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"someone-else","labels":{}},"spec":{},"status":{}}"#.into()),
        ),
        (
            "taint",
            Behaviour::Return(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{}},"spec":{"taints":[{"key":"k","effect":"NoSchedule"}]},"status":{}}"#.into()),
        ),
        (
            "role",
            Behaviour::Return(r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"node-role.kubernetes.io/control-plane":""}},"spec":{},"status":{}}"#.into()),
        ),
        ("fail", Behaviour::Fail("the device is on fire".into())),
    ];
    for (name, b) in &cases {
        drop_bytes(d, &format!("{name}.wasm"), &hostile::component(name, b));
    }
    drop_bytes(d, "wrong-world.wasm", &hostile::wrong_world());
    drop_bytes(d, "core-module.wasm", &hostile::core_module());
    drop_bytes(d, "text.wasm", b"#!/bin/sh\necho hello\n");

    let events = dir.rescan();
    let failed = |file: &str| {
        events
            .iter()
            .find_map(|e| match e {
                ReloadEvent::Failed { file: f, error, .. } if f.ends_with(file) => {
                    Some(error.clone())
                }
                _ => None,
            })
            .unwrap_or_else(|| panic!("{file} was not refused: {events:#?}"))
    };
    assert!(
        failed("wrong-world.wasm")
            .contains("does not implement the world `nodestatus:plugin/plugin@0.1.x`")
    );
    assert!(failed("core-module.wasm").contains("core WebAssembly module, not a component"));
    assert!(failed("text.wasm").contains("not a WebAssembly file"));
    assert_eq!(dir.current().plugins().len(), cases.len() + 1);

    let set = dir.current();
    let (out, report) = run_pass(
        dir.runtime(),
        &set,
        &nodes::small_node("n1"),
        &CallContext::default(),
    );
    let outcome = |name: &str| {
        report
            .setters
            .iter()
            .find(|s| s.plugin == name)
            .unwrap_or_else(|| panic!("{name} did not run"))
            .outcome
            .clone()
    };
    let error = |name: &str, kind: CallErrorKind, text: &str| {
        let e = outcome(name).expect_err(name);
        assert_eq!(e.kind, kind, "{name}: {e}");
        assert!(
            e.message.contains(text),
            "{name}: {:?} lacks {text:?}",
            e.message
        );
    };
    error("spin", CallErrorKind::Timeout, "CPU deadline");
    error("grow", CallErrorKind::Memory, "memory cap");
    error("trap", CallErrorKind::Trap, "unreachable");
    error("garbage", CallErrorKind::Output, "not JSON");
    error("not-a-node", CallErrorKind::Output, "not a JSON object");
    error("pod", CallErrorKind::Output, "not \"Node\"");
    error(
        "rename",
        CallErrorKind::Policy,
        "metadata.name may not be changed",
    );
    error("taint", CallErrorKind::Policy, "spec.taints");
    error(
        "role",
        CallErrorKind::Policy,
        "metadata.labels[node-role.kubernetes.io/control-plane]",
    );
    error("fail", CallErrorKind::Plugin, "the device is on fire");

    // kernel-check ran after the hostile ones (by name) and its work is there.
    assert!(outcome("kernel-check").is_ok());
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert_eq!(out["metadata"]["name"], "n1");
    assert!(out["spec"].get("taints").is_none());
    let types = condition_types(&out);
    assert_eq!(types, vec!["KernelSupported"]);

    // The runtime is not poisoned: a second pass behaves the same.
    let (out2, report2) = run_pass(dir.runtime(), &set, &out, &CallContext::default());
    assert_eq!(report2.failures().count(), cases.len());
    assert_eq!(out2["metadata"]["labels"], out["metadata"]["labels"]);
}

#[test]
fn a_memory_cap_is_configurable_per_plugin() {
    // With a 2 MiB cap, the component's own 2-page memory plus the node fits;
    // a 1 MiB growth step does not.
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        memory_limit: 2 << 20,
        ..Default::default()
    }));
    drop_bytes(
        tmp.path(),
        "grow.wasm",
        &hostile::component("grow", &Behaviour::GrowMemory),
    );
    dir.rescan();
    let (_, report) = run_pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
    );
    let e = report.setters[0].outcome.clone().unwrap_err();
    assert_eq!(e.kind, CallErrorKind::Memory);
    assert!(e.message.contains("2097152-byte limit"), "{e}");
}
