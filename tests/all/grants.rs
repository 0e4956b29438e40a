//! The sandbox grants exactly what the operator grants, and no more.

use std::path::{Path, PathBuf};

use nodestatus_engine::pipeline::{SetterErrorKind, pass};
use nodestatus_engine::plugin_dir::PluginDir;
use nodestatus_runtime::{
    CallContext, CallErrorKind, LoadError, PathGrant, Plugin, PluginSettings, Ungranted, Withheld,
};
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
        paths: vec![PathGrant::same(g.clone())],
        env: vec!["HOME".into()],
        config: config.clone(),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let set = dir.current();
    let probe = set.setters()[0].plugin();
    // Asked for /tmp and /etc; granted only a directory inside /tmp.
    assert_eq!(probe.granted_paths(), &[PathGrant::same(granted.path())]);
    assert!(probe.withheld().contains(&Withheld::Path("/etc".into())));
    assert!(probe.withheld().contains(&Withheld::Env("PATH".into())));

    let (out, report) = pass(
        dir.runtime(),
        &set,
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
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
    let (out, _) = pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
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
    let refuse = |_: &str| PluginSettings {
        paths: vec![PathGrant::same("/tmp")],
        on_ungranted: Ungranted::Refuse,
        ..Default::default()
    };
    let (tmp, dir) = plugin_dir(settings(refuse));
    let file = drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    assert!(dir.current().setters().is_empty());
    let err = Plugin::load_file(dir.runtime(), &file, &refuse).expect_err("refused");
    let want = [
        Withheld::Path("/etc".into()),
        Withheld::Env("HOME".into()),
        Withheld::Env("PATH".into()),
    ];
    assert!(
        matches!(&err, LoadError::Ungranted { withheld, .. } if *withheld == want),
        "{err:?}"
    );
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
    assert!(dir.current().setters().is_empty());

    let sha = nodestatus_runtime::sha256_hex(&std::fs::read(built::PROBE).unwrap());
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        sha256: Some(sha.clone()),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    assert_eq!(dir.current().setters().len(), 1);
}

/// Runs one pass of the probe in `dir` and returns its annotations.
fn probe_annotations(dir: &nodestatus_engine::plugin_dir::PluginDir) -> serde_json::Value {
    pass_ok(dir, &nodes::small_node("n1"))["metadata"]["annotations"].clone()
}

#[test]
fn a_granted_path_can_be_served_from_another_host_directory() {
    // The plugin sees /tmp/<name>, which does not exist on the host; the
    // operator serves it from a directory elsewhere (as a container serves
    // the host's /proc from /host/proc).
    let source = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    std::fs::write(source.path().join("visible"), "12345").unwrap();
    let seen = PathBuf::from("/tmp").join(format!("nodestatus-mapped-{}", std::process::id()));
    assert!(!seen.exists());
    let (seen2, from) = (seen.clone(), source.path().to_owned());
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![PathGrant {
            path: seen2.clone(),
            from: from.clone(),
        }],
        config: json!({
            "read": [seen2.join("visible"), from.join("visible")],
            "statvfs": [seen2, from],
        }),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let a = probe_annotations(&dir);
    assert_eq!(a["probe.nodestatus.test/read-0"], "ok:5");
    // The host path itself is not visible: only the path the plugin was given.
    assert!(
        a["probe.nodestatus.test/read-1"]
            .as_str()
            .unwrap()
            .starts_with("err:"),
        "{a}"
    );
    assert_eq!(a["probe.nodestatus.test/statvfs-0"], "ok:true");
    assert!(
        a["probe.nodestatus.test/statvfs-1"]
            .as_str()
            .unwrap()
            .contains("not inside a path granted"),
        "{a}"
    );
}

#[test]
fn a_granted_path_that_appears_later_is_seen_without_a_reload() {
    // Like /proc/driver/nvidia before the driver loads: granted, absent at
    // load, present later.
    let parent = tempfile::tempdir_in("/tmp").unwrap();
    let later = parent.path().join("driver");
    let (later2, tmp_later) = (later.clone(), later.clone());
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![PathGrant::same(later2.clone())],
        config: json!({"read": [later2.join("version")]}),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    assert_eq!(dir.current().setters().len(), 1, "the plugin loads");
    let a = probe_annotations(&dir);
    assert!(
        a["probe.nodestatus.test/read-0"]
            .as_str()
            .unwrap()
            .starts_with("err:"),
        "{a}"
    );

    std::fs::create_dir(&tmp_later).unwrap();
    std::fs::write(tmp_later.join("version"), "535.104").unwrap();
    let a = probe_annotations(&dir);
    assert_eq!(a["probe.nodestatus.test/read-0"], "ok:7", "{a}");
}

/// machine-info and memory-pressure in a plugin directory, granted `paths`.
fn proc_readers(paths: Vec<PathGrant>) -> (tempfile::TempDir, std::sync::Arc<PluginDir>) {
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: paths.clone(),
        ..Default::default()
    }));
    for (file, built) in [
        ("machine-info.wasm", built::MACHINE_INFO),
        ("memory-pressure.wasm", built::MEMORY_PRESSURE),
    ] {
        drop_plugin(tmp.path(), file, Path::new(built));
    }
    dir.rescan();
    (tmp, dir)
}

#[test]
fn a_setter_run_without_its_grants_says_what_to_grant() {
    // The README's first run without a config: nothing granted. machine-info
    // fails as ungranted, with the grant and the setting to change, never an
    // errno; memory-pressure reports Unknown with the same advice.
    let (_tmp, dir) = proc_readers(Vec::new());
    let (out, report) = pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
    );
    let e = report
        .setters
        .iter()
        .find(|s| s.plugin == "machine-info")
        .expect("machine-info ran")
        .outcome
        .clone()
        .expect_err("machine-info without /proc");
    assert_eq!(
        e.kind,
        SetterErrorKind::Call(CallErrorKind::Ungranted),
        "{e}"
    );
    assert!(
        e.message.contains(
            "cannot read /proc/meminfo: /proc is not granted to machine-info; add it to plugins.machine-info.paths or use the default config"
        ),
        "{e}"
    );
    assert!(!e.message.contains("os error"), "{e}");
    let memory = condition_of(&out, "MemoryPressure").expect("MemoryPressure is set");
    assert_eq!(memory["status"], "Unknown", "{memory}");
    assert_eq!(
        memory["message"],
        "cannot read /proc/meminfo: /proc is not granted to memory-pressure; add it to plugins.memory-pressure.paths or use the default config",
    );

    // Granted /proc, both work.
    let (_tmp, dir) = proc_readers(vec![PathGrant::same("/proc")]);
    let out = pass_ok(&dir, &nodes::small_node("n1"));
    assert!(out["status"]["capacity"]["memory"].is_string(), "{out}");
    assert_ne!(
        condition_of(&out, "MemoryPressure").unwrap()["status"],
        "Unknown"
    );
}

#[test]
fn disk_pressure_reads_the_image_filesystem_at_its_granted_path() {
    // The kubelet's imagefs thresholds, on the path the operator grants
    // and names as imagefsPath; the node filesystem's thresholds at 0%
    // (none), so the image filesystem alone decides.
    let fs = tempfile::tempdir().unwrap();
    let (nodefs, imagefs) = (fs.path().join("kubelet"), fs.path().join("containerd"));
    std::fs::create_dir(&nodefs).unwrap();
    std::fs::create_dir(&imagefs).unwrap();
    let status = |grants: Vec<PathBuf>, available: &str| {
        let config = json!({
            "nodefsPath": nodefs, "nodefsAvailable": "0%", "nodefsInodesFree": "0%",
            "imagefsPath": imagefs, "imagefsAvailable": available,
        });
        let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
            paths: grants.iter().map(PathGrant::same).collect(),
            config: config.clone(),
            ..Default::default()
        }));
        drop_plugin(
            tmp.path(),
            "disk-pressure.wasm",
            Path::new(built::DISK_PRESSURE),
        );
        dir.rescan();
        let out = pass_ok(&dir, &nodes::small_node("n1"));
        condition_of(&out, "DiskPressure")
            .expect("DiskPressure is set")
            .clone()
    };
    let both = vec![nodefs.clone(), imagefs.clone()];
    // More than any disk holds.
    let c = status(both.clone(), "1Ei");
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some("KubeletHasDiskPressure")),
        "{c}"
    );
    let c = status(both, "0%");
    assert_eq!(c["status"], "False", "{c}");
    // The image filesystem's path not granted: Unknown, naming it.
    let c = status(vec![nodefs.clone()], "15%");
    assert_eq!(c["status"], "Unknown", "{c}");
    let message = c["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "cannot read the statistics of the image filesystem at {}",
            imagefs.display()
        )),
        "{c}"
    );
}
