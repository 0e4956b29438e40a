//! The setters written in Python, JavaScript and Go: what one `set` call
//! costs, and how long a dropped one takes to become active.
//!
//! The guests are the real ones, built by `scripts/guests/python.sh`,
//! `scripts/guests/js.sh` and `scripts/guests/go.sh` into
//! `target/guest-plugins`: `cpu-features` (CPython through
//! componentize-py), `load-average` (SpiderMonkey through componentize-js)
//! and `local-disks` (Go's runtime, stock Go for wasip1, the SDK's types),
//! `k8s-types` (Go, the node decoded into k8s.io/api's v1.Node), each granted
//! `/proc` and `/sys`; and `load-average-aot`,
//! the same JavaScript built with `build.mjs --aot` (weval compiles it ahead
//! of time) by `scripts/guests/js.sh` with `NODESTATUS_JS_AOT=1` into
//! `target/guest-plugins/aot`.
//!
//! - `guest/<name>/set`: one `Plugin::call_set` on the ~15 kB busy node: a
//!   fresh store and WASI sandbox, instantiation of the interpreter, the
//!   `set` call, the JSON back.
//! - `activate/<name>/cached`: a file dropped into a plugin directory (write
//!   to a dotfile, rename) until the plugin is active: `PluginDir::rescan`
//!   reads the file, hashes it, takes the code from the precompile cache,
//!   links it, calls `metadata` and swaps the new set in. The watcher's
//!   200 ms debounce (`plugin_dir::DEBOUNCE`) comes on top, and is measured
//!   once per run as `activate/<name>/watched`.
//! - `guest/<name>/set-winch`: the same call on Winch's code (what a
//!   plugin runs until Cranelift's replaces it, `compiler: tiered`, or for
//!   good, `compiler: winch`).
//! - `activate/<name>/cold-<compiler>`, measured **once per run** and
//!   printed (a cold compile takes seconds to tens of seconds, and
//!   criterion's ten samples would take minutes): from the file dropped to
//!   the end of the first `set` that runs it, with no cache, compiled as
//!   `nodestatus run` compiles, in a child `nodestatus compile-component`
//!   process (`RuntimeOptions.compiler`, see `runtime::compile`), by
//!   Cranelift (`compiler: cranelift`) and by Winch (`compiler: tiered`,
//!   the default: Cranelift then compiles in the background, not counted).
//! - `activate/<name>/watched`, measured once per run and printed: the
//!   whole path in production, from the rename to the watcher's `Loaded`
//!   event, with the cache warm: the debounce plus the rescan.
//!
//! `NODESTATUS_BENCH_ONCE=0` skips the once-per-run measurements (to
//! profile one benchmark).
//!
//! Run with `cargo bench -p nodestatus --bench '*'`; the results are in
//! docs/benchmarks.md.
// criterion_group! and criterion_main! write public functions without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use nodestatus_engine::config::{PluginConfig, SettingsFn};
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::{
    CallContext, CompileLimits, Compiler, PathGrant, Plugin, PluginSettings, Runtime,
    RuntimeOptions, Tier, Tiers, error_chain,
};
use nodestatus_tests::{built, drop_plugin, guest, guest_aot, nodes};

/// Where the component of a plugin of that name is.
type Component = fn(&str) -> PathBuf;

/// The guests: the benchmarks' name for it, the plugin's name, where its
/// component is, and its config. `load-average-aot` is `load-average` built
/// with `build.mjs --aot` (its JavaScript compiled by weval).
const GUESTS: &[(&str, &str, Component, &str)] = &[
    ("cpu-features", "cpu-features", guest, "{}"),
    (
        "load-average",
        "load-average",
        guest,
        r#"{"maxLoadPerCpu": 1000}"#,
    ),
    (
        "load-average-aot",
        "load-average",
        guest_aot,
        r#"{"maxLoadPerCpu": 1000}"#,
    ),
    ("local-disks", "local-disks", guest, "{}"),
    ("k8s-types", "k8s-types", guest, "{}"),
];

fn settings_fn(config: &'static str) -> SettingsFn {
    let config: serde_json::Value = serde_json::from_str(config).expect("a JSON config");
    Arc::new(move |_| {
        PluginConfig::from(PluginSettings {
            paths: vec![PathGrant::same("/proc"), PathGrant::same("/sys")],
            config: config.clone(),
            ..Default::default()
        })
    })
}

/// An engine that compiles as `nodestatus run` does: in a child process of
/// the engine's binary, with the default limits, by `tiers`; `cache` as
/// given.
fn production_runtime(cache: Option<PathBuf>, tiers: Tiers) -> Runtime {
    Runtime::with_options(RuntimeOptions {
        cache_dir: cache,
        compiler: Compiler::Process {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_nodestatus")),
            limits: CompileLimits::default(),
        },
        tiers,
        ..RuntimeOptions::default()
    })
    .expect("runtime")
}

/// Drops `src` into a fresh directory as `<name>.wasm`, then times
/// `PluginDir::rescan` until the plugin is active, and with `first_call`
/// until the end of its first `set` too; the plugin.
fn activate(
    runtime: &Runtime,
    name: &str,
    src: &Path,
    settings: &SettingsFn,
    first_call: Option<&str>,
) -> (Duration, Arc<Plugin>) {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = PluginDir::new(tmp.path(), runtime.clone(), settings.clone());
    drop_plugin(tmp.path(), &format!("{name}.wasm"), src);
    let started = Instant::now();
    dir.rescan();
    let set = dir.current();
    let setter = set
        .setters()
        .iter()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("{name} is active after the rescan"));
    if let Some(node_json) = first_call {
        setter
            .plugin()
            .call_set(runtime, node_json, CallContext::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    (started.elapsed(), setter.plugin().clone())
}

/// Drops `src` into a watched directory and times the rename to the
/// watcher's `Loaded` event.
fn activate_watched(runtime: &Runtime, name: &str, src: &Path, settings: &SettingsFn) -> Duration {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    let dir = PluginDir::new(tmp.path(), runtime.clone(), settings.clone());
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    dir.on_event(move |e| {
        if let ReloadEvent::Loaded { .. } = e {
            let _ = tx.lock().expect("sender").send(Instant::now());
        }
    });
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = dir.watch(stop.clone()).expect("watching the directory");
    // Let the watch settle before the file appears.
    std::thread::sleep(Duration::from_millis(300));
    let bytes = std::fs::read(src).expect("reading the guest");
    let tmp_file = tmp.path().join(format!(".{name}.wasm.tmp"));
    std::fs::write(&tmp_file, &bytes).expect("writing the guest");
    let renamed = Instant::now();
    std::fs::rename(&tmp_file, tmp.path().join(format!("{name}.wasm"))).expect("renaming");
    let loaded = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the watcher loads the plugin");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    watcher.join().expect("the watcher thread");
    loaded - renamed
}

fn benches(c: &mut Criterion) {
    let node_json = serde_json::to_string(&nodes::busy_node()).expect("a Value serializes");
    let cached = production_runtime(Some(PathBuf::from(built::TEST_CACHE_DIR)), Tiers::Cranelift);
    let winch = production_runtime(Some(PathBuf::from(built::TEST_CACHE_DIR)), Tiers::Winch);
    let ctx = CallContext::default();

    for &(label, name, component, config) in GUESTS {
        if label.ends_with("-aot") && !nodestatus_tests::guest_aot_built(name) {
            eprintln!(
                "{label}: not built (weval is not installed here: scripts/guests/weval.sh), not measured"
            );
            continue;
        }
        let src = component(name);
        let settings = settings_fn(config);
        // The first load warms the cache (a cold compile if it was not).
        let plugin = Plugin::load_file(&cached, &src, &|n| settings(n).sandbox)
            .unwrap_or_else(|e| panic!("loading {name}: {}", error_chain(&e)));
        plugin
            .call_set(&cached, &node_json, ctx.clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let warm = Plugin::load_file(&cached, &src, &|n| PluginSettings {
            reuse_instance: true,
            ..settings(n).sandbox
        })
        .unwrap_or_else(|e| panic!("loading {name}: {}", error_chain(&e)));
        let on_winch = Plugin::load_file(&winch, &src, &|n| settings(n).sandbox)
            .unwrap_or_else(|e| panic!("loading {name} with Winch: {}", error_chain(&e)));
        assert_eq!(on_winch.tier(), Tier::Baseline);

        let mut group = c.benchmark_group(format!("guest/{label}"));
        for (id, runtime, plugin) in [
            ("set", &cached, &plugin),
            ("set-reuse", &cached, &warm),
            ("set-winch", &winch, &on_winch),
        ] {
            group.bench_function(id, |b| {
                b.iter(|| {
                    let out = plugin
                        .call_set(runtime, black_box(&node_json), ctx.clone())
                        .expect("the guest's set succeeds");
                    black_box(out.result)
                })
            });
        }
        group.finish();

        let mut group = c.benchmark_group(format!("activate/{label}"));
        group.sample_size(10);
        group.bench_function("cached", |b| {
            b.iter_custom(|iters| {
                (0..iters)
                    .map(|_| activate(&cached, name, &src, &settings, None).0)
                    .sum()
            })
        });
        group.finish();

        if std::env::var_os("NODESTATUS_BENCH_ONCE").is_some_and(|v| v == "0") {
            continue;
        }
        let watched = activate_watched(&cached, name, &src, &settings);
        println!(
            "activate/{label}/watched (once): {:.1} ms from the rename to the watcher's Loaded event, cache warm",
            watched.as_secs_f64() * 1e3
        );
        for tiers in [Tiers::Cranelift, Tiers::Tiered] {
            let cold = production_runtime(None, tiers);
            let dropped = Instant::now();
            let (took, plugin) = activate(&cold, name, &src, &settings, Some(&node_json));
            println!(
                "activate/{label}/cold-{tiers} (once): {:.2} s from the file dropped to the end of its first set (on {}'s code), compiled in a child process, no cache",
                took.as_secs_f64(),
                plugin.tier()
            );
            // Cranelift's compile behind Winch's code, before the next
            // measurement.
            while plugin.tier() != Tier::Optimized {
                assert!(
                    dropped.elapsed() < Duration::from_secs(600),
                    "{name}: Cranelift's code never replaced Winch's"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
            println!(
                "activate/{label}/cold-{tiers}: on Cranelift's code {:.2} s after the drop",
                dropped.elapsed().as_secs_f64()
            );
        }
    }
}

criterion_group!(guests, benches);
criterion_main!(guests);
