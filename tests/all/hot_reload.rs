//! Hot reload, on a real directory watched by the engine.

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nodestatus::pipeline::run_pass;
use nodestatus::plugin_dir::ReloadEvent;
use nodestatus::runtime::{CallContext, PluginSettings};
use nodestatus_tests::{built, drop_bytes, drop_plugin, nodes};

use crate::common::*;

fn version(dir: &nodestatus::plugin_dir::PluginDir) -> Option<String> {
    dir.current()
        .plugins()
        .iter()
        .find(|p| p.name() == "probe")
        .map(|p| p.metadata().version.clone())
}

#[test]
fn drop_replace_break_and_delete_a_plugin() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    let events = Arc::new(Mutex::new(Vec::<ReloadEvent>::new()));
    let sink = events.clone();
    dir.on_event(move |e| sink.lock().unwrap().push(e.clone()));
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = dir.watch(stop.clone()).unwrap();
    let d = tmp.path();
    // A plugin that stays loaded throughout, to show the others are untouched.
    drop_plugin(d, "kernel-check.wasm", Path::new(built::KERNEL_CHECK));

    // 1. A dropped plugin becomes active.
    let started = Instant::now();
    drop_plugin(d, "probe.wasm", Path::new(built::PROBE));
    assert!(
        wait_for(10, || version(&dir).as_deref() == Some("1.0.0")),
        "probe 1 never loaded: {:?}",
        events.lock().unwrap()
    );
    eprintln!("dropped plugin active after {:?}", started.elapsed());
    let node = nodes::small_node("n1");
    let (out, _) = run_pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &CallContext::default(),
    );
    assert_eq!(
        out["metadata"]["labels"]["probe.nodestatus.test/version"],
        "1"
    );

    // 2. Replacing it by rename switches versions.
    drop_plugin(d, "probe.wasm", Path::new(built::PROBE_V2));
    assert!(
        wait_for(10, || version(&dir).as_deref() == Some("2.0.0")),
        "probe 2 never loaded: {:?}",
        events.lock().unwrap()
    );
    let (out, _) = run_pass(dir.runtime(), &dir.current(), &out, &CallContext::default());
    assert_eq!(
        out["metadata"]["labels"]["probe.nodestatus.test/version"],
        "2"
    );
    assert!(events.lock().unwrap().iter().any(|e| matches!(e, ReloadEvent::Reloaded { plugin, version, .. } if plugin == "probe" && version == "2.0.0")));

    // 3. A broken replacement keeps the old version, and says why.
    drop_bytes(d, "probe.wasm", b"\0asm\x0d\0\x01\0 truncated garbage");
    assert!(
        wait_for(10, || {
            events.lock().unwrap().iter().any(|e| matches!(e, ReloadEvent::Failed { kept: Some(v), error, .. } if v == "2.0.0" && error.contains("invalid component")))
        }),
        "no failure reported: {:?}",
        events.lock().unwrap()
    );
    assert_eq!(version(&dir).as_deref(), Some("2.0.0"));
    let status = dir.status();
    let probe = status
        .iter()
        .find(|s| s.file.ends_with("probe.wasm"))
        .unwrap();
    assert!(probe.error.is_some() && probe.version.as_deref() == Some("2.0.0"));

    // Temp files and dotfiles are ignored.
    std::fs::write(d.join("probe.wasm.tmp"), b"junk").unwrap();
    std::fs::write(d.join(".hidden.wasm"), b"junk").unwrap();

    // 4. Deleting it unloads it, and its fields leave the node.
    std::fs::remove_file(d.join("probe.wasm")).unwrap();
    assert!(
        wait_for(10, || version(&dir).is_none()),
        "probe never unloaded"
    );
    let (out, report) = run_pass(dir.runtime(), &dir.current(), &out, &CallContext::default());
    assert!(
        out["metadata"]["labels"]
            .get("probe.nodestatus.test/version")
            .is_none(),
        "{out:#}"
    );
    let types = condition_types(&out);
    assert_eq!(types, vec!["KernelSupported"]);
    assert!(
        report
            .released
            .iter()
            .any(|(p, f)| p == "probe" && f.to_string() == "status.conditions[ProbeRan]")
    );
    assert!(out["metadata"]["labels"]["kernel.example.com/version"].is_string());
    assert!(!format!("{:?}", events.lock().unwrap()).contains(".hidden"));

    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().unwrap();
}

#[test]
fn ownership_survives_a_restart_of_the_engine() {
    // First engine: probe sets its fields.
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let (out, _) = run_pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
    );
    assert!(
        out["metadata"]["annotations"]["nodestatus.io/owned-fields"]
            .as_str()
            .unwrap()
            .contains("ProbeRan")
    );

    // A new engine, started without the plugin, cleans up from the annotation alone.
    let (_tmp2, dir2) = plugin_dir(settings(|_| PluginSettings::default()));
    dir2.rescan();
    let (out2, report) = run_pass(
        dir2.runtime(),
        &dir2.current(),
        &out,
        &CallContext::default(),
    );
    assert_eq!(report.released.len(), 2, "{:?}", report.released);
    assert!(out2["status"]["conditions"].as_array().unwrap().is_empty());
    assert!(
        out2["metadata"]["annotations"]
            .get("nodestatus.io/owned-fields")
            .is_none()
    );
}
