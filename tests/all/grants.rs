//! The sandbox grants exactly what the operator grants, and no more.

use std::path::{Path, PathBuf};

use nodestatus::pipeline::run_pass;
use nodestatus::runtime::{CallContext, PluginSettings, Ungranted};
use nodestatus_tests::{built, drop_plugin, nodes};
use serde_json::json;

use crate::common::*;

#[test]
fn a_plugin_reads_only_what_was_granted() {
    let granted = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::write(granted.path().join("visible"), "12345").unwrap();
    let other = tempfile::tempdir_in("/tmp").unwrap();
    std::fs::write(other.path().join("hidden"), "x").unwrap();
    let g = granted.path().to_owned();
    let config = json!({
        "read": [g.join("visible"), other.path().join("hidden"), "/etc/hostname", "/proc/self/status"],
        "env": ["HOME", "PATH"],
        "statvfs": [g, "/etc", "/"],
    });
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![g.clone()],
        env: vec!["HOME".into()],
        config: config.clone(),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let set = dir.current();
    let probe = &set.plugins()[0];
    // Asked for /tmp and /etc; granted only a directory inside /tmp.
    assert_eq!(probe.granted_paths(), &[granted.path().to_owned()]);
    assert!(probe.withheld().iter().any(|w| w == "path /etc"));
    assert!(probe.withheld().iter().any(|w| w == "env PATH"));

    let (out, report) = run_pass(
        dir.runtime(),
        &set,
        &nodes::small_node("n1"),
        &CallContext::default(),
    );
    assert!(
        report.setters[0].outcome.is_ok(),
        "{:?}",
        report.setters[0].outcome
    );
    let ann = |k: &str| {
        out["metadata"]["annotations"][format!("probe.nodestatus.test/{k}")]
            .as_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(ann("read-0"), "ok:5");
    assert!(ann("read-1").starts_with("err:"), "{}", ann("read-1"));
    assert!(ann("read-2").starts_with("err:"), "{}", ann("read-2"));
    assert!(ann("read-3").starts_with("err:"), "{}", ann("read-3"));
    assert_eq!(
        ann("env-0"),
        format!("ok:{}", std::env::var("HOME").unwrap())
    );
    assert_eq!(ann("env-1"), "err:unset");
    assert_eq!(ann("statvfs-0"), "ok:true");
    assert!(
        ann("statvfs-1").contains("not inside a path granted"),
        "{}",
        ann("statvfs-1")
    );
    assert!(
        ann("statvfs-2").contains("not inside a path granted"),
        "{}",
        ann("statvfs-2")
    );
}

#[test]
fn nothing_is_granted_by_default() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        config: json!({"read": ["/tmp", "/etc/hostname"], "env": ["HOME"]}),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let (out, _) = run_pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
    );
    let a = &out["metadata"]["annotations"];
    assert!(
        a["probe.nodestatus.test/read-0"]
            .as_str()
            .unwrap()
            .starts_with("err:")
    );
    assert!(
        a["probe.nodestatus.test/read-1"]
            .as_str()
            .unwrap()
            .starts_with("err:")
    );
    assert_eq!(a["probe.nodestatus.test/env-0"], "err:unset");
}

#[test]
fn an_ungranted_request_can_refuse_the_plugin() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        paths: vec![PathBuf::from("/tmp")],
        on_ungranted: Ungranted::Refuse,
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    let events = dir.rescan();
    let text = format!("{events:?}");
    assert!(
        text.contains("asks for path /etc, env HOME, env PATH that the config does not grant"),
        "{text}"
    );
    assert!(dir.current().plugins().is_empty());
}

#[test]
fn a_sha256_pin_is_enforced() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        sha256: Some("0".repeat(64)),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    let text = format!("{:?}", dir.rescan());
    assert!(
        text.contains("sha256 mismatch for plugin \\\"probe\\\": the config pins 0000"),
        "{text}"
    );
    assert!(dir.current().plugins().is_empty());

    let sha = nodestatus::runtime::sha256_hex(&std::fs::read(built::PROBE).unwrap());
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        sha256: Some(sha.clone()),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    assert_eq!(dir.current().plugins().len(), 1);
}
