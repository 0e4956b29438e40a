use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use nodestatus_engine::config::{PluginConfig, SettingsFn};
use nodestatus_engine::plugin_dir::PluginDir;
use nodestatus_runtime::Runtime;
use nodestatus_tests::built;

/// One runtime for the whole test binary, with the warm shared cache.
pub fn runtime() -> Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| Runtime::new(Some(PathBuf::from(built::TEST_CACHE_DIR))).expect("runtime"))
        .clone()
}

/// Settings from a closure that gives each plugin name its sandbox
/// ([`nodestatus_runtime::PluginSettings`]) or its whole [`PluginConfig`].
pub fn settings<S: Into<PluginConfig>>(
    f: impl Fn(&str) -> S + Send + Sync + 'static,
) -> SettingsFn {
    Arc::new(move |n| f(n).into())
}

/// Default settings, but a deadline of 200 ms for the plugin `spin`, so
/// that a looping guest costs a test little.
pub fn spin_briefly() -> SettingsFn {
    settings(|name| nodestatus_runtime::PluginSettings {
        timeout: if name == "spin" {
            std::time::Duration::from_millis(200)
        } else {
            nodestatus_runtime::DEFAULT_TIMEOUT
        },
        ..Default::default()
    })
}

/// A plugin directory in a fresh temp dir, with default settings.
pub fn plugin_dir(settings_fn: SettingsFn) -> (tempfile::TempDir, Arc<PluginDir>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = PluginDir::new(tmp.path(), runtime(), settings_fn);
    (tmp, dir)
}

/// Polls `f` every 20 ms until it is true or `secs` pass.
pub fn wait_for(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if f() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    f()
}

/// Runs the ignored test `name` (its path in this binary, such as
/// `sandbox::hostile_kinds_child`) alone in a fresh process of this test
/// binary, and returns what it printed. Fails if it fails or did not run.
///
/// For tests that measure the process's own memory: the tests that run
/// beside them in one process would add theirs.
pub fn run_alone(name: &str) -> String {
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            name,
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}:\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{name} did not run:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The condition types of a node, in list order.
pub fn condition_types(node: &serde_json::Value) -> Vec<&str> {
    node["status"]["conditions"]
        .as_array()
        .map(|l| l.iter().filter_map(|c| c["type"].as_str()).collect())
        .unwrap_or_default()
}

/// One pass of every plugin in `dir` over `node`, which must succeed for
/// every setter; returns the resulting node.
pub fn pass_ok(dir: &PluginDir, node: &serde_json::Value) -> serde_json::Value {
    pass_ok_with(dir, node, &nodestatus_runtime::CallContext::default())
}

/// [`pass_ok`] with the facts of `ctx` (one snapshot of the machine for
/// several passes).
pub fn pass_ok_with(
    dir: &PluginDir,
    node: &serde_json::Value,
    ctx: &nodestatus_runtime::CallContext,
) -> serde_json::Value {
    let (out, report) = nodestatus_engine::pipeline::pass(
        dir.runtime(),
        &dir.current(),
        node,
        ctx,
        Default::default(),
    );
    for s in &report.setters {
        assert!(s.outcome.is_ok(), "{}: {:?}", s.plugin, s.outcome);
    }
    out
}

/// The node without the times a pass stamps (a new condition's transition
/// and heartbeat: the pass's clock), which differ from one pass to the next.
pub fn without_times(mut node: serde_json::Value) -> serde_json::Value {
    if let Some(conditions) = node["status"]["conditions"].as_array_mut() {
        for c in conditions {
            let c = c.as_object_mut().unwrap();
            c.remove("lastHeartbeatTime");
            c.remove("lastTransitionTime");
        }
    }
    node
}

/// A copy of the node's condition of type `t`.
pub fn condition_of(node: &serde_json::Value, t: &str) -> Option<serde_json::Value> {
    node["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == t)
        .cloned()
}

/// The validated config of `yaml` and a scanned plugin directory at `dir`
/// with that config's plugin settings: how the engine opens them.
pub fn configured(
    yaml: &str,
    dir: &std::path::Path,
) -> (
    Arc<nodestatus_engine::config::Config>,
    Arc<nodestatus_engine::plugin_dir::PluginDir>,
) {
    let cfg = nodestatus_engine::config::ConfigFile::parse(yaml, std::path::Path::new("test.yaml"))
        .unwrap()
        .validate()
        .unwrap();
    let cfg = Arc::new(cfg);
    let settings = cfg.clone();
    let plugins = PluginDir::new(
        dir,
        runtime(),
        Arc::new(move |n| settings.plugin_settings(n)),
    );
    plugins.rescan();
    (cfg, plugins)
}

/// Polls `f` every 100 ms until it holds, failing with the process log at
/// `log` after `secs`.
pub async fn until(secs: u64, log: &std::path::Path, what: &str, mut f: impl AsyncFnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while !f().await {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
