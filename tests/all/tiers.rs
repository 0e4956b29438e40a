//! Winch and Cranelift behind one plugin (`compiler: tiered`, issue 24):
//! the same node from either compiler's code, and Cranelift's code taking
//! over from Winch's in the background, cached for the next start.

use std::path::PathBuf;
use std::sync::Arc;

use nodestatus_engine::config::ConfigFile;
use nodestatus_engine::plugin_dir::PluginDir;
use nodestatus_runtime::{
    CallContext, PathGrant, Plugin, PluginSettings, Runtime, RuntimeOptions, Tier, Tiers,
};
use nodestatus_tests::{DEFAULT_PLUGINS, built, drop_plugin, guest, nodes};
use serde_json::{Value, json};

use crate::common::*;

fn runtime_with(tiers: Tiers, cache: Option<PathBuf>) -> Runtime {
    Runtime::with_options(RuntimeOptions {
        cache_dir: cache,
        tiers,
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

/// One pass of the setters of `files` (each granted as the shipped
/// default config grants it, the guests `/proc`) on `runtime`'s code, with
/// the facts of `ctx`.
fn pass_on(
    runtime: &Runtime,
    files: &[(String, PathBuf)],
    ctx: &CallContext,
) -> (Value, Vec<Tier>) {
    let yaml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/default-config.yaml"
    ))
    .unwrap();
    let config = Arc::new(
        ConfigFile::parse(&yaml, std::path::Path::new("default-config.yaml"))
            .unwrap()
            .validate()
            .unwrap(),
    );
    let tmp = tempfile::tempdir().unwrap();
    let dir = PluginDir::new(
        tmp.path(),
        runtime.clone(),
        Arc::new(move |n| match n {
            "cpu-features" | "load-average" | "memory-features" => PluginSettings {
                paths: vec![PathGrant::same("/proc")],
                config: json!({"maxLoadPerCpu": 1000}),
                ..Default::default()
            }
            .into(),
            _ => config.plugin_settings(n),
        }),
    );
    for (name, src) in files {
        drop_plugin(tmp.path(), name, src);
    }
    dir.rescan();
    let set = dir.current();
    assert_eq!(set.setters().len(), files.len(), "{:?}", dir.status());
    let tiers = set.setters().iter().map(|s| s.plugin().tier()).collect();
    let (out, report) = nodestatus_engine::pipeline::pass(
        runtime,
        &set,
        &nodes::small_node("tiers"),
        ctx,
        Default::default(),
    );
    for s in &report.setters {
        assert!(s.outcome.is_ok(), "{}: {:?}", s.plugin, s.outcome);
    }
    (without_times(out), tiers)
}

#[test]
fn every_setter_gives_the_same_node_on_winch_and_cranelift_code() {
    let mut files: Vec<(String, PathBuf)> = DEFAULT_PLUGINS
        .iter()
        .map(|(f, p)| (f.to_string(), PathBuf::from(p)))
        .collect();
    for g in ["cpu-features", "load-average", "memory-features"] {
        files.push((format!("{g}.wasm"), guest(g)));
    }
    // One snapshot of the machine for all three passes.
    let ctx = CallContext::default();
    let cache = Some(PathBuf::from(built::TEST_CACHE_DIR));
    let (cranelift, tiers) = pass_on(&runtime_with(Tiers::Cranelift, cache.clone()), &files, &ctx);
    assert!(tiers.iter().all(|t| *t == Tier::Optimized), "{tiers:?}");
    let (winch, tiers) = pass_on(&runtime_with(Tiers::Winch, cache), &files, &ctx);
    assert!(tiers.iter().all(|t| *t == Tier::Baseline), "{tiers:?}");
    // Something the guests wrote, so that the comparison covers them.
    assert!(
        cranelift["metadata"]["labels"]
            .as_object()
            .unwrap()
            .keys()
            .any(|k| k.starts_with("feature.node.kubernetes.io/")),
        "{cranelift:#}"
    );
    assert_eq!(winch, cranelift, "Winch's node differs from Cranelift's");
}

#[test]
fn a_plugin_starts_on_winch_and_cranelift_takes_over_cached_for_the_next_start() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime_with(Tiers::Tiered, Some(cache.path().to_owned()));
    let settings = |_: &str| PluginSettings::default();
    let plugin = Plugin::load_file(&runtime, std::path::Path::new(built::OS_ARCH), &settings)
        .unwrap_or_else(|e| panic!("{e:#}"));
    assert!(plugin.compiled());
    // Loaded before any Cranelift compile could end (the load returns
    // once Winch's code is linked).
    assert_eq!(plugin.tier(), Tier::Baseline);
    let node = nodes::small_node("tiered");
    let ctx = CallContext::default();
    let on_winch = plugin
        .call_set(&runtime, &node.to_string(), ctx.clone())
        .unwrap();

    assert!(
        wait_for(120, || plugin.tier() == Tier::Optimized),
        "Cranelift's code never replaced Winch's"
    );
    let on_cranelift = plugin.call_set(&runtime, &node.to_string(), ctx).unwrap();
    assert_eq!(on_cranelift.result, on_winch.result);
    let stats = runtime.load_stats();
    assert_eq!(
        stats.tiered_up.load(std::sync::atomic::Ordering::Relaxed),
        1
    );

    // The next start takes Cranelift's code from the cache: no compile,
    // no Winch.
    let next = runtime_with(Tiers::Tiered, Some(cache.path().to_owned()));
    let again = Plugin::load_file(&next, std::path::Path::new(built::OS_ARCH), &settings).unwrap();
    assert!(!again.compiled());
    assert_eq!(again.tier(), Tier::Optimized);
}

#[test]
fn a_plugin_dropped_before_its_cranelift_compile_ends_is_not_kept_alive() {
    let cache = tempfile::tempdir().unwrap();
    let runtime = runtime_with(Tiers::Tiered, Some(cache.path().to_owned()));
    let plugin = Plugin::load_file(&runtime, std::path::Path::new(built::READY), &|_| {
        PluginSettings::default()
    })
    .unwrap();
    assert_eq!(plugin.tier(), Tier::Baseline);
    let weak = {
        let plugin = Arc::new(plugin);
        Arc::downgrade(&plugin)
    };
    assert!(
        weak.upgrade().is_none(),
        "the Cranelift compile behind it holds no plugin"
    );
}

/// A directory with os-arch, opened as `run` (`open`) or as `once` opens it
/// (`open_for_one_pass`), `compiler: tiered`, over an empty cache. Returns,
/// after waiting up to `secs` for Cranelift's code to take over: the
/// plugin's tier, the compiles its runtime started, and whether the cache
/// then holds the plugin.
fn tiered_dir(one_pass: bool, secs: u64) -> (Tier, u64, bool) {
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, cache) = (tmp.path().join("plugins"), tmp.path().join("cache"));
    std::fs::create_dir(&plugins).unwrap();
    drop_plugin(
        &plugins,
        "os-arch.wasm",
        std::path::Path::new(built::OS_ARCH),
    );
    let yaml = format!(
        "nodeName: tiered\ncompiler: tiered\npluginDir: {}\ncacheDir: {}\n",
        plugins.display(),
        cache.display()
    );
    let config = Arc::new(
        ConfigFile::parse(&yaml, std::path::Path::new("tiered.yaml"))
            .unwrap()
            .validate()
            .unwrap(),
    );
    let open = match one_pass {
        true => PluginDir::open_for_one_pass,
        false => PluginDir::open,
    };
    let dir = open(&config, None, None).unwrap();
    dir.rescan();
    let set = dir.current();
    let plugin = set.setters()[0].plugin();
    assert_eq!(plugin.tier(), Tier::Baseline, "Winch's code first");
    wait_for(secs, || plugin.tier() == Tier::Optimized);
    let compiles = dir
        .runtime()
        .load_stats()
        .compiles
        .load(std::sync::atomic::Ordering::Relaxed);
    let next = Runtime::with_options(RuntimeOptions {
        cache_dir: Some(cache),
        tiers: Tiers::Tiered,
        tier_up: false,
        ..RuntimeOptions::default()
    })
    .unwrap();
    let again = Plugin::load_file(&next, std::path::Path::new(built::OS_ARCH), &|_| {
        PluginSettings::default()
    })
    .unwrap();
    (plugin.tier(), compiles, !again.compiled())
}

#[test]
fn a_one_pass_command_keeps_winchs_code_and_starts_no_cranelift_compile() {
    // As `run` opens it: Cranelift's compile follows Winch's, and is cached.
    assert_eq!(tiered_dir(false, 120), (Tier::Optimized, 2, true));
    // As `once` and `plugin check` open it: Winch's compile alone (given
    // time in which Cranelift's would have ended, as above).
    assert_eq!(tiered_dir(true, 5), (Tier::Baseline, 1, false));
}

/// `nodestatus run` over the eleven default setters with its precompile
/// cache at `cache`, until `settled` holds for its log; then its anonymous
/// resident memory (RssAnon, bytes: the heap, the plugins' code and
/// memories; not the binary's pages, of which a start that compiles
/// touches about 1.3 MB more), three passes later.
fn engine_rss(
    dir: &std::path::Path,
    cache: &std::path::Path,
    settled: impl Fn(&str) -> bool,
) -> u64 {
    let kubeconfig = crate::kube::write_node_kubeconfig(dir, "tiered-rss");
    let log = dir.join("nodestatus.log");
    let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_nodestatus"));
    c.args(["run", "--node-name", "tiered-rss"])
        .args(["--node-status-update-frequency", "1s", "--address", ""])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--plugin-dir")
        .arg(dir.join("plugins"))
        .arg("--cache-dir")
        .arg(cache)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap());
    nodestatus_controlplane::kill_with_parent(&mut c);
    let mut child = c.spawn().unwrap();
    let ok = wait_for(180, || {
        settled(&std::fs::read_to_string(&log).unwrap_or_default())
    });
    std::thread::sleep(std::time::Duration::from_secs(3));
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(ok, "{}", std::fs::read_to_string(&log).unwrap_or_default());
    status
        .lines()
        .find_map(|l| l.strip_prefix("RssAnon:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("RssAnon")
        * 1024
}

#[test]
fn after_a_cold_start_on_winch_the_engine_holds_what_a_warm_start_holds() {
    // A start that compiles its plugins runs a load and a Cranelift compile
    // per plugin on threads of their own; each thread that allocated got a
    // malloc arena of its own, and the engine held about 12 MB more than
    // after a start from the cache, for as long as it ran (this debug
    // build, VmRSS: 61.0 against 49.1 MB). Compared here: the anonymous
    // part, which a warm start alone moves by up to 3 MB from run to run.
    let tmp = tempfile::tempdir().unwrap();
    let (plugins, cache) = (tmp.path().join("plugins"), tmp.path().join("cache"));
    std::fs::create_dir(&plugins).unwrap();
    for (file, src) in DEFAULT_PLUGINS {
        drop_plugin(&plugins, file, std::path::Path::new(src));
    }
    let count = |log: &str, what: &str| log.matches(what).count();
    let cold = engine_rss(tmp.path(), &cache, |log| {
        count(log, "runs Cranelift's code from its next call") == DEFAULT_PLUGINS.len()
    });
    let warm = engine_rss(tmp.path(), &cache, |log| {
        count(log, "plugin loaded") == DEFAULT_PLUGINS.len()
    });
    eprintln!(
        "RssAnon after a cold start {} KiB, after a warm one {} KiB",
        cold >> 10,
        warm >> 10
    );
    assert!(
        cold < warm + (5 << 20),
        "a cold start holds {} KiB more than a warm one ({} against {} KiB)",
        (cold.saturating_sub(warm)) >> 10,
        cold >> 10,
        warm >> 10
    );
}
