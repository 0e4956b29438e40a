//! Hostile plugins: each fails alone, with a clear error, while the other
//! setters' results still reach the output. Every check is on the typed
//! reason (the [`SetterErrorKind`] or the [`LoadError`] variant); the messages
//! are checked only for the setting they name.

use std::path::Path;

use nodestatus_engine::pipeline::SetterErrorKind::{self, Call};
use nodestatus_engine::pipeline::{SetterError, pass};
use nodestatus_engine::plugin_dir::ReloadEvent;
use nodestatus_runtime::{
    CallContext, CallErrorKind, LoadError, MetadataError, PathGrant, Plugin, PluginSettings,
};
use nodestatus_tests::hostile::{self, Behaviour};
use nodestatus_tests::{built, drop_bytes, drop_plugin, nodes};

use crate::common::*;

#[test]
fn each_hostile_plugin_fails_alone_and_the_others_still_run() {
    let (tmp, dir) = plugin_dir(spin_briefly());
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
        ("ungranted", Behaviour::Statvfs("/etc".into())),
        ("utf8", Behaviour::ReturnBytes(vec![b'{', 0xff, 0xfe, b'}'])),
        ("oob", Behaviour::OutOfBounds),
        ("huge", Behaviour::HugeOutput(5 << 20)),
    ];
    for (name, b) in &cases {
        drop_bytes(d, &format!("{name}.wasm"), &hostile::component(name, b));
    }
    drop_bytes(d, "wrong-world.wasm", &hostile::wrong_world());
    drop_bytes(d, "core-module.wasm", &hostile::core_module());
    drop_bytes(d, "text.wasm", b"#!/bin/sh\necho hello\n");
    // Bad metadata: a name that is not a DNS label, and a record the host
    // cannot read (its name outside the guest's memory).
    drop_bytes(
        d,
        "bad-name.wasm",
        &hostile::component("Bad_Name", &Behaviour::Echo),
    );
    drop_bytes(
        d,
        "bad-path.wasm",
        &hostile::component("bad-path", &Behaviour::Statvfs("etc".into())),
    );
    drop_bytes(
        d,
        "garbled.wasm",
        &hostile::component_with_metadata(
            "garbled",
            Some(&Behaviour::OutOfBounds),
            &Behaviour::Echo,
        ),
    );

    let events = dir.rescan();
    let refused = |file: &str| {
        assert!(
            events
                .iter()
                .any(|e| matches!(e, ReloadEvent::Failed { file: f, .. } if f.ends_with(file))),
            "{file} was not refused: {events:#?}"
        );
        Plugin::load_file(dir.runtime(), &d.join(file), &|_| PluginSettings::default())
            .expect_err(file)
    };
    assert!(matches!(
        refused("wrong-world.wasm"),
        LoadError::WrongWorld(_)
    ));
    assert!(matches!(refused("core-module.wasm"), LoadError::CoreModule));
    assert!(matches!(refused("text.wasm"), LoadError::NotWasm));
    assert!(matches!(
        refused("bad-name.wasm"),
        LoadError::BadMetadata(MetadataError::Name(n)) if n == "Bad_Name"
    ));
    assert!(matches!(
        refused("bad-path.wasm"),
        LoadError::BadMetadata(MetadataError::Path(p)) if p == "etc"
    ));
    assert!(matches!(
        refused("garbled.wasm"),
        LoadError::Metadata(e) if e.kind == CallErrorKind::InvalidResult
    ));
    assert_eq!(dir.current().setters().len(), cases.len() + 1);

    let set = dir.current();
    let (out, report) = pass(
        dir.runtime(),
        &set,
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
    );
    let outcome = |name: &str| outcome_of(&report, name);
    let error = |name: &str, kind: SetterErrorKind, text: &str| {
        let e = outcome(name).expect_err(name);
        assert_eq!(e.kind, kind, "{name}: {e}");
        assert!(
            e.message.contains(text),
            "{name}: {:?} lacks {text:?}",
            e.message
        );
    };
    error("spin", Call(CallErrorKind::Timeout), "CPU deadline");
    error("grow", Call(CallErrorKind::Memory), "memory cap");
    error("trap", Call(CallErrorKind::Trap), "unreachable");
    error("garbage", SetterErrorKind::Output, "not JSON");
    error("not-a-node", SetterErrorKind::Output, "not a JSON object");
    error("pod", SetterErrorKind::Output, "not \"Node\"");
    error(
        "rename",
        SetterErrorKind::Policy,
        "metadata.name may not be changed",
    );
    error("taint", SetterErrorKind::Policy, "spec.taints");
    error(
        "role",
        SetterErrorKind::Policy,
        "metadata.labels[node-role.kubernetes.io/control-plane]",
    );
    error("fail", Call(CallErrorKind::Plugin), "the device is on fire");
    error(
        "ungranted",
        Call(CallErrorKind::Ungranted),
        "plugins.ungranted.paths",
    );
    error("utf8", Call(CallErrorKind::InvalidResult), "");
    error("oob", Call(CallErrorKind::InvalidResult), "");
    error(
        "huge",
        Call(CallErrorKind::OutputTooLarge),
        "1048576-byte bound of a node",
    );

    // kernel-check ran after the hostile ones (by name) and its work is there.
    assert!(outcome("kernel-check").is_ok());
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert_eq!(out["metadata"]["name"], "n1");
    assert!(out["spec"].get("taints").is_none());
    let types = condition_types(&out);
    assert_eq!(types, vec!["KernelSupported"]);

    // The runtime is not poisoned: a second pass behaves the same.
    let (out2, report2) = pass(
        dir.runtime(),
        &set,
        &out,
        &CallContext::default(),
        Default::default(),
    );
    assert_eq!(report2.failures().count(), cases.len());
    assert_eq!(out2["metadata"]["labels"], out["metadata"]["labels"]);
}

/// What the setter `name` did in the pass of `report`.
fn outcome_of(
    report: &nodestatus_engine::pipeline::PassReport,
    name: &str,
) -> Result<(), SetterError> {
    report
        .setters
        .iter()
        .find(|s| s.plugin == name)
        .unwrap_or_else(|| panic!("{name} did not run"))
        .outcome
        .clone()
        .map(|_| ())
}

#[test]
fn a_memory_cap_is_configurable_per_plugin() {
    // With a 2 MiB cap, the component's own 2-page memory plus the node fits;
    // a 1 MiB growth step does not.
    let capped = PluginSettings {
        memory_limit: 2 << 20,
        ..Default::default()
    };
    let grow = hostile::component("grow", &Behaviour::GrowMemory);
    let e = run_alone("grow", &grow, capped).expect("grow fails");
    assert_eq!(e.kind, Call(CallErrorKind::Memory));
    assert!(e.message.contains("2097152-byte limit"), "{e}");
}

/// Runs `bytes` as the only plugin `name` under `plugin_settings`, and
/// returns its error, if it failed.
fn run_alone(name: &str, bytes: &[u8], plugin_settings: PluginSettings) -> Option<SetterError> {
    let (tmp, dir) = plugin_dir(settings(move |_| plugin_settings.clone()));
    drop_bytes(tmp.path(), &format!("{name}.wasm"), bytes);
    dir.rescan();
    let (_, report) = pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
    );
    report.setters[0].outcome.clone().err()
}

#[test]
fn a_setter_that_fails_for_want_of_a_grant_is_ungranted_and_runs_once_granted() {
    let statvfs = hostile::component("statvfs", &Behaviour::Statvfs("/etc".into()));
    let runtime = hostile::component("runtime", &Behaviour::ContainerRuntime);
    let fail = hostile::component("fail", &Behaviour::Fail("no".into()));
    let granted_etc = PluginSettings {
        paths: vec![PathGrant::same("/etc")],
        ..Default::default()
    };
    let granted_runtime = PluginSettings {
        container_runtime: true,
        ..Default::default()
    };
    let none = PluginSettings::default;
    for (name, bytes, plugin_settings, want) in [
        // `statvfs` of /etc, which it asks for, its error returned as its own.
        ("statvfs", &statvfs, none(), Some(CallErrorKind::Ungranted)),
        ("statvfs", &statvfs, granted_etc, None),
        // `container-runtime` without the grant; granted, the host answers
        // that no runtime is configured, which is the plugin's own failure.
        ("runtime", &runtime, none(), Some(CallErrorKind::Ungranted)),
        (
            "runtime",
            &runtime,
            granted_runtime,
            Some(CallErrorKind::Plugin),
        ),
        // Nothing withheld or refused: its own failure.
        ("fail", &fail, none(), Some(CallErrorKind::Plugin)),
    ] {
        let what = format!(
            "{name}, paths {:?}, containerRuntime {}",
            plugin_settings.paths, plugin_settings.container_runtime
        );
        let error = run_alone(name, bytes, plugin_settings);
        assert_eq!(
            error.as_ref().map(|e| e.kind),
            want.map(Call),
            "{what}: {error:?}"
        );
        if want == Some(CallErrorKind::Ungranted) {
            let setting = match name {
                "runtime" => "`containerRuntime: true` under plugins.runtime",
                _ => "plugins.statvfs.paths",
            };
            let message = &error.unwrap().message;
            assert!(message.contains(setting), "{what}: {message}");
        }
    }
}

/// A Go setter (tests/components/go/go-probe, through the Go SDK and its
/// ABI glue, with Go's runtime in the guest) that loops, panics, allocates
/// without end, returns a label key the API server would refuse, a part
/// over the bound, or an
/// error of its own: each fails with its kind while a Rust setter beside it
/// still runs; with no misbehaviour asked, it runs.
#[test]
fn hostile_go_plugins_fail_alone_with_their_kind() {
    let probe = nodestatus_tests::guest("go-probe");
    let cases = [
        ("loop", Some((Call(CallErrorKind::Timeout), "CPU deadline"))),
        ("panic", Some((Call(CallErrorKind::Trap), ""))),
        ("alloc", Some((Call(CallErrorKind::Memory), "memory cap"))),
        (
            "garbage",
            Some((SetterErrorKind::Invalid, "invalid label key")),
        ),
        (
            "huge",
            Some((
                Call(CallErrorKind::OutputTooLarge),
                "1048576-byte bound of a node",
            )),
        ),
        (
            "fail",
            Some((Call(CallErrorKind::Plugin), "the device is on fire")),
        ),
        ("nothing", None),
    ];
    for (what, want) in cases {
        // A plugin is named by its file: one directory per behaviour.
        // The loop meets a short deadline; the others get room to show
        // their own fault (a "huge" part took over 300 ms to build on a
        // loaded machine, and met the deadline first).
        let timeout = std::time::Duration::from_millis(if what == "loop" { 300 } else { 10_000 });
        let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
            config: serde_json::json!({ "do": what }),
            paths: vec![PathGrant::same("/tmp")],
            timeout,
            ..Default::default()
        }));
        drop_plugin(
            tmp.path(),
            "kernel-check.wasm",
            Path::new(built::KERNEL_CHECK),
        );
        drop_plugin(tmp.path(), "go-probe.wasm", &probe);
        dir.rescan();
        assert_eq!(dir.current().setters().len(), 2, "{what}");
        let (out, report) = pass(
            dir.runtime(),
            &dir.current(),
            &nodes::small_node("n1"),
            &CallContext::default(),
            Default::default(),
        );
        let outcome = outcome_of(&report, "go-probe");
        match want {
            Some((kind, text)) => {
                let e = outcome.expect_err(what);
                assert_eq!(e.kind, kind, "{what}: {e}");
                assert!(
                    e.message.contains(text),
                    "{what}: {:?} lacks {text:?}",
                    e.message
                );
            }
            None => assert!(outcome.is_ok(), "{what}: {outcome:?}"),
        }
        assert!(outcome_of(&report, "kernel-check").is_ok(), "{what}");
        assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    }
}
