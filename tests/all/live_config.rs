//! Live configuration: a changed config file is put in force while the engine
//! runs (crate `live_config`), on real files (an editor's rewrite, a
//! ConfigMap's `..data` symlink swap) and in a real `nodestatus run` against
//! the real apiserver.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nodestatus_engine::config::{ConfigFile, PluginConfig};
use nodestatus_engine::live_config::{LiveConfig, Outcome};
use nodestatus_engine::plugin_dir::ReloadEvent;
use nodestatus_tests::{built, drop_plugin};

use crate::common::until;
use crate::kube::server_node;

fn load(path: &Path) -> anyhow::Result<nodestatus_engine::config::Config> {
    Ok(ConfigFile::read(path)?.validate()?)
}

fn live_on(path: &Path) -> LiveConfig {
    let current = Arc::new(load(path).unwrap());
    let p = path.to_owned();
    LiveConfig::new(path.to_owned(), current, move || load(&p))
}

/// Writes `text` to `path` as an editor does: a temp file renamed over it.
fn save(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

const BASE: &str = "nodeName: live-node\nplugins:\n  machine-info: {}\n";

#[test]
fn a_changed_file_is_applied_refused_or_ignored_as_its_content_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.yaml");
    save(&path, BASE);
    let mut live = live_on(&path);
    assert_eq!(live.check(), Outcome::Unchanged);
    // The same content saved again: nothing to do.
    save(&path, BASE);
    assert_eq!(live.check(), Outcome::Unchanged);
    // A grant and a period: applied, and named (the report period follows
    // the update period when it is not set).
    save(
        &path,
        "nodeName: live-node\nnodeStatusUpdateFrequency: 5s\nplugins:\n  machine-info: {paths: [/proc]}\n",
    );
    assert_eq!(
        live.check(),
        Outcome::Applied(vec![
            "nodeStatusUpdateFrequency".into(),
            "nodeStatusReportFrequency".into(),
            "plugins.machine-info".into()
        ])
    );
    assert_eq!(
        live.current().node_status_update_frequency,
        Duration::from_secs(5)
    );
    // Invalid: refused whole, the last good config stays.
    save(&path, "nodeName: live-node\nnodeStatusUpdateFrequncy: 1s\n");
    match live.check() {
        Outcome::Refused(why) => assert!(
            why.contains("invalid") && why.contains("did you mean `nodeStatusUpdateFrequency`"),
            "{why}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        live.current().node_status_update_frequency,
        Duration::from_secs(5)
    );
    assert!(live.current().plugins.contains_key("machine-info"));
    // A setting that only a restart can change: refused, and named, with
    // the live change beside it not applied either.
    save(
        &path,
        "nodeName: other-node\nnodeStatusUpdateFrequency: 7s\nplugins:\n  machine-info: {paths: [/proc]}\n",
    );
    match live.check() {
        Outcome::Refused(why) => {
            assert!(why.contains("nodeName") && why.contains("restart"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(live.current().node_name, "live-node");
    assert_eq!(
        live.current().node_status_update_frequency,
        Duration::from_secs(5)
    );
}

#[test]
fn a_configmap_symlink_swap_counts_only_when_the_content_changes() {
    // A mounted ConfigMap: config.yaml -> ..data/config.yaml, and ..data ->
    // a timestamped directory, swapped by renaming a new ..data symlink.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let generation = |name: &str, text: &str| {
        std::fs::create_dir(d.join(name)).unwrap();
        std::fs::write(d.join(name).join("config.yaml"), text).unwrap();
        let tmp = d.join("..data_tmp");
        std::os::unix::fs::symlink(name, &tmp).unwrap();
        std::fs::rename(&tmp, d.join("..data")).unwrap();
    };
    generation("..2026_11_23_a", BASE);
    std::os::unix::fs::symlink("..data/config.yaml", d.join("config.yaml")).unwrap();
    let mut live = live_on(&d.join("config.yaml"));
    // The kubelet's periodic sync: a new generation, the same bytes.
    generation("..2026_11_23_b", BASE);
    assert_eq!(live.check(), Outcome::Unchanged);
    generation(
        "..2026_11_23_c",
        "nodeName: live-node\nplugins:\n  machine-info: {paths: [/proc]}\n",
    );
    assert_eq!(
        live.check(),
        Outcome::Applied(vec!["plugins.machine-info".into()])
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_engine_takes_a_new_grant_without_a_restart() {
    let node = "live-node";
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    // machine-info reads /proc/meminfo: without the grant it fails every
    // pass, as a setter dropped in before its grant does.
    drop_plugin(
        &plugins,
        "machine-info.wasm",
        Path::new(built::MACHINE_INFO),
    );
    let config = dir.path().join("config.yaml");
    save(
        &config,
        &format!("nodeName: {node}\nplugins:\n  machine-info: {{}}\n"),
    );
    let (mut engine, log) = crate::kube::engine_command(dir.path(), node, &plugins);
    let mut child = engine.arg("--config").arg(&config).spawn().unwrap();
    let logged = |what: &str| std::fs::read_to_string(&log).unwrap().contains(what);
    let memory = || async {
        server_node(node).await.and_then(|n| {
            n["status"]["capacity"]["memory"]
                .as_str()
                .map(str::to_owned)
        })
    };
    until(
        30,
        &log,
        "machine-info never failed for want of /proc",
        async || logged("cannot read /proc/meminfo"),
    )
    .await;
    assert_eq!(memory().await, None);

    // The grant, written while it runs: capacity arrives, no restart.
    let granted = Instant::now();
    save(
        &config,
        &format!("nodeName: {node}\nplugins:\n  machine-info: {{paths: [/proc, /]}}\n"),
    );
    until(20, &log, "the grant never took effect", async || {
        memory().await.is_some()
    })
    .await;
    println!(
        "LIVE| a new grant reached the node {:.1} s after the file was saved",
        granted.elapsed().as_secs_f64()
    );
    assert!(logged(
        "config reloaded, in force from the next pass: plugins.machine-info"
    ));

    // A broken file: refused, logged, and the engine goes on with the last
    // good config (the node keeps its capacity, the process lives).
    save(&config, "nodeName: [\n");
    until(10, &log, "the invalid file was not refused", async || {
        logged("the changed config file is invalid, so the running config stays")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(child.try_wait().unwrap().is_none(), "the engine exited");
    assert!(memory().await.is_some());
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn new_settings_that_refuse_a_running_plugin_stop_it() {
    use nodestatus_runtime::PluginSettings;
    let (tmp, dir) =
        crate::common::plugin_dir(crate::common::settings(|_| PluginSettings::default()));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    dir.rescan();
    assert!(dir.current().contains("kernel-check"));
    // The same settings again: nothing is loaded again.
    dir.set_settings(crate::common::settings(|_| PluginSettings::default()));
    let events = dir.rescan();
    assert!(dir.current().contains("kernel-check"), "{events:?}");
    assert_eq!(
        events,
        [],
        "a plugin whose settings did not change was reloaded"
    );
    // Another plugin's settings: neither.
    dir.set_settings(crate::common::settings(|name| match name {
        "kernel-check" => PluginSettings::default(),
        _ => PluginSettings {
            timeout: std::time::Duration::from_millis(1),
            ..Default::default()
        },
    }));
    assert_eq!(dir.rescan(), []);
    // Its own: loaded again, and the log says why.
    dir.set_settings(crate::common::settings(|_| PluginSettings {
        timeout: std::time::Duration::from_millis(777),
        ..Default::default()
    }));
    let events = dir.rescan();
    assert!(
        matches!(
            &events[..],
            [ReloadEvent::Reloaded {
                because: "settings",
                ..
            }]
        ),
        "{events:?}"
    );
    // Disabled, or pinned to another build: it stops; the version loaded
    // under the old settings is not kept.
    for refuse in [
        PluginConfig {
            enabled: false,
            ..Default::default()
        },
        PluginConfig::from(PluginSettings {
            sha256: Some("0".repeat(64)),
            ..Default::default()
        }),
    ] {
        dir.set_settings(crate::common::settings(|_| PluginSettings::default()));
        dir.rescan();
        assert!(dir.current().contains("kernel-check"));
        let disabled = !refuse.enabled;
        dir.set_settings(crate::common::settings(move |_| refuse.clone()));
        let events = dir.rescan();
        assert!(!dir.current().contains("kernel-check"), "{events:?}");
        // Disabling is the operator's choice, not a failure: its own event
        // (logged at INFO, never counted as refused by `once --strict`).
        match &events[..] {
            [
                ReloadEvent::Disabled {
                    plugin, stopped, ..
                },
            ] => {
                assert!(disabled, "{events:?}");
                assert_eq!(plugin, "kernel-check");
                assert!(stopped.is_some(), "the running version stops");
            }
            [ReloadEvent::Failed { kept: None, .. }] => assert!(!disabled, "{events:?}"),
            _ => panic!("{events:?}"),
        }
    }
}
