//! Loading never holds the node back (issue 24): plugins compile in the
//! background and join when ready, a component that could never run is
//! refused before any compile, and a refused file is not compiled again
//! until it changes. No test here asserts a time: each asserts an order, or
//! a count of compiles.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::Duration;

use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::{
    CompileLimits, Compiler, Runtime, RuntimeOptions, Tier, Tiers, sha256_hex,
};
use nodestatus_tests::{built, drop_bytes, drop_plugin, hostile};

use crate::common::*;

/// A component that passes the check before the compile, then keeps
/// Cranelift busy for minutes.
fn slow_component(name: &str) -> Vec<u8> {
    hostile::slow_to_compile(name, 100_000, 10_000)
}

/// A runtime that compiles in a child of the `nodestatus` binary under
/// `timeout`, with its precompile cache (and memo of refusals) in `cache`,
/// by Cranelift alone.
fn child_runtime(cache: &Path, timeout: Duration) -> Runtime {
    child_runtime_with(cache, timeout, Tiers::Cranelift)
}

/// [`child_runtime`] by `tiers`.
fn child_runtime_with(cache: &Path, timeout: Duration, tiers: Tiers) -> Runtime {
    Runtime::with_options(RuntimeOptions {
        tiers,
        cache_dir: Some(cache.to_owned()),
        compiler: Compiler::Process {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_nodestatus")),
            limits: CompileLimits {
                timeout,
                ..CompileLimits::default()
            },
        },
        ..RuntimeOptions::default()
    })
    .unwrap()
}

fn default_settings() -> nodestatus_engine::config::SettingsFn {
    settings(|_| nodestatus_runtime::PluginSettings::default())
}

fn failure<'a>(events: &'a [ReloadEvent], file: &str) -> &'a str {
    events
        .iter()
        .find_map(|e| match e {
            ReloadEvent::Failed { file: f, error, .. } if f.ends_with(file) => Some(error.as_str()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{file} was not refused: {events:#?}"))
}

/// A temp dir with `plugins/`, which holds kernel-check.
fn with_kernel_check() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    drop_plugin(
        &plugins,
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    (tmp, plugins)
}

#[test]
fn a_plugin_joins_when_ready_while_a_slow_one_compiles() {
    let (tmp, plugins) = with_kernel_check();
    drop_bytes(&plugins, "slow.wasm", &slow_component("slow"));
    // The slow compile is stopped at 30 s (it goes on after the test).
    let runtime = child_runtime(&tmp.path().join("cache"), Duration::from_secs(30));
    let dir = PluginDir::new(&plugins, runtime, default_settings());
    // Returns before any compile ends: nothing is active yet.
    dir.rescan_in_background();
    assert!(
        wait_for(120, || dir.current().contains("kernel-check")),
        "kernel-check never joined: {:#?}",
        dir.status()
    );
    // The order: kernel-check was active while slow.wasm still compiled.
    let loading = dir.loading();
    assert!(
        loading
            .iter()
            .any(|(f, _, compiling)| f.ends_with("slow.wasm") && *compiling),
        "slow.wasm is no longer compiling: {loading:?}"
    );
    assert!(!dir.current().contains("slow"));
    let status = dir.status();
    let slow = status
        .iter()
        .find(|s| s.file.ends_with("slow.wasm"))
        .unwrap();
    assert!(slow.loading_seconds.is_some(), "{slow:?}");
    // A rescan meanwhile does not start a second load of it.
    dir.rescan_in_background();
    assert_eq!(
        dir.runtime().load_stats().compiles.load(Ordering::Relaxed),
        2
    );
}

/// A blocking rescan (`once`, the registry puller) that finds a file a
/// background rescan is still loading waits for that load, so that what it
/// returns says how the file ended.
#[test]
fn a_rescan_waits_for_a_load_a_background_rescan_started() {
    let (tmp, plugins) = with_kernel_check();
    // A cache of its own: kernel-check is compiled, in a child, for seconds.
    let runtime = child_runtime(&tmp.path().join("cache"), Duration::from_secs(120));
    let dir = PluginDir::new(&plugins, runtime, default_settings());
    dir.rescan_in_background();
    assert!(
        !dir.loading().is_empty(),
        "the load ended before the rescan: nothing left to wait for"
    );
    dir.rescan();
    let status = dir.status();
    let kc = status
        .iter()
        .find(|s| s.file.ends_with("kernel-check.wasm"))
        .unwrap();
    assert!(
        kc.sha256.is_some() && kc.loading_seconds.is_none(),
        "{kc:?}"
    );
    assert!(dir.current().contains("kernel-check"));
}

#[test]
fn a_component_that_does_not_implement_the_world_is_refused_without_a_compile() {
    // What the issue saw: a large component that takes Cranelift long to
    // compile and does not even implement the `setter` world.
    let bomb = hostile::compile_bomb(100_000, 10_000);
    let (tmp, plugins) = with_kernel_check();
    drop_bytes(&plugins, "huge.wasm", &bomb);
    drop_bytes(&plugins, "wrong-world.wasm", &hostile::wrong_world());
    drop_bytes(&plugins, "future.wasm", &hostile::wrong_version("future"));
    let runtime = child_runtime(&tmp.path().join("cache"), Duration::from_secs(300));
    let dir = PluginDir::new(&plugins, runtime, default_settings());
    let events = dir.rescan();
    for file in ["huge.wasm", "wrong-world.wasm", "future.wasm"] {
        let error = failure(&events, file);
        assert!(
            error.contains("does not implement the world"),
            "{file}: {error}"
        );
    }
    assert!(
        failure(&events, "future.wasm").contains("nodestatus:plugin/setter@0.3.0"),
        "{events:#?}"
    );
    assert!(dir.current().contains("kernel-check"));
    let stats = dir.runtime().load_stats();
    assert_eq!(
        stats.compiles.load(Ordering::Relaxed),
        1,
        "kernel-check alone reached a compiler"
    );
    assert_eq!(stats.prechecked.load(Ordering::Relaxed), 3);
    let cache = dir.runtime().cache().unwrap();
    assert!(!cache.entry_path(&sha256_hex(&bomb)).exists());
}

#[test]
fn a_component_that_imports_what_the_host_does_not_offer_is_refused_without_a_compile() {
    // The echo component, with its host import renamed to an interface no
    // host offers (same length, so the binary stays valid).
    let bytes = {
        let mut b = hostile::component(
            "http",
            &hostile::Behaviour::Flood {
                lines: 0,
                events: 0,
                text: String::new(),
            },
        );
        let from = b"nodestatus:plugin/host@0.1.0";
        let to = b"nodestatus:plugin/http@0.1.0";
        let at = b
            .windows(from.len())
            .position(|w| w == from)
            .expect("the host import in the binary");
        b[at..at + to.len()].copy_from_slice(to);
        b
    };
    // A runtime of its own: the shared one counts the other tests' compiles.
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    drop_bytes(&plugins, "http.wasm", &bytes);
    let runtime = child_runtime(&tmp.path().join("cache"), Duration::from_secs(60));
    let dir = PluginDir::new(&plugins, runtime, default_settings());
    let events = dir.rescan();
    let error = failure(&events, "http.wasm");
    assert!(
        error.contains("imports nodestatus:plugin/http@0.1.0 that this host does not offer"),
        "{error}"
    );
    let stats = dir.runtime().load_stats();
    assert_eq!(stats.compiles.load(Ordering::Relaxed), 0);
}

#[test]
fn a_refused_file_is_not_compiled_again_until_it_changes() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    let cache = tmp.path().join("cache");
    std::fs::create_dir(&plugins).unwrap();
    drop_bytes(&plugins, "slow.wasm", &slow_component("slow"));
    let limit = Duration::from_secs(1);

    let dir = PluginDir::new(&plugins, child_runtime(&cache, limit), default_settings());
    let first = dir.rescan();
    assert!(
        failure(&first, "slow.wasm").contains("took longer than the 1s limit"),
        "{first:#?}"
    );
    let compiles = |d: &PluginDir| d.runtime().load_stats().compiles.load(Ordering::Relaxed);
    assert_eq!(compiles(&dir), 1);

    // New settings load every file again: not this one's compile.
    dir.set_settings(default_settings());
    let again = dir.rescan();
    assert!(
        failure(&again, "slow.wasm").contains("refused before"),
        "{again:#?}"
    );
    assert_eq!(compiles(&dir), 1);

    // A restart (a new runtime on the same cache) remembers it too.
    let restarted = PluginDir::new(&plugins, child_runtime(&cache, limit), default_settings());
    let after_restart = restarted.rescan();
    let error = failure(&after_restart, "slow.wasm");
    assert!(
        error.contains("refused before") && error.contains("took longer than the 1s limit"),
        "{error}"
    );
    assert_eq!(compiles(&restarted), 0);
    assert_eq!(
        restarted
            .runtime()
            .load_stats()
            .remembered
            .load(Ordering::Relaxed),
        1
    );

    // A changed file is compiled again.
    drop_bytes(
        &plugins,
        "slow.wasm",
        &hostile::slow_to_compile("slow", 100_001, 10_000),
    );
    let changed = restarted.rescan();
    assert!(
        !failure(&changed, "slow.wasm").contains("refused before"),
        "{changed:#?}"
    );
    assert_eq!(compiles(&restarted), 1);
}

#[test]
fn tiered_a_slow_compile_runs_on_winch_and_cranelift_is_not_tried_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    let cache = tmp.path().join("cache");
    std::fs::create_dir(&plugins).unwrap();
    drop_bytes(&plugins, "slow.wasm", &slow_component("slow"));
    let limit = Duration::from_secs(2);
    let runtime = child_runtime_with(&cache, limit, Tiers::Tiered);
    let dir = PluginDir::new(&plugins, runtime.clone(), default_settings());
    let first = dir.rescan();
    assert!(
        first
            .iter()
            .any(|e| matches!(e, ReloadEvent::Loaded { .. })),
        "Winch compiled it: {first:#?}"
    );
    let set = dir.current();
    let slow = set.setters()[0].plugin().clone();
    assert_eq!(slow.tier(), Tier::Baseline);
    pass_ok(&dir, &nodestatus_tests::nodes::small_node("n"));

    // Cranelift runs past the limit behind it (its refusal is in the memo
    // beside the cache): it stays on Winch.
    let refused_tier_up = || {
        std::fs::read_dir(&cache).unwrap().any(|e| {
            let path = e.unwrap().path();
            path.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("refused-")
                && std::fs::read_to_string(&path).unwrap().contains("+tier-up")
        })
    };
    assert!(
        wait_for(120, refused_tier_up),
        "Cranelift's refusal never reached the memo"
    );
    let stats = runtime.load_stats();
    assert_eq!(stats.compiles.load(Ordering::Relaxed), 2);
    assert_eq!(slow.tier(), Tier::Baseline);
    assert_eq!(stats.tiered_up.load(Ordering::Relaxed), 0);
    pass_ok(&dir, &nodestatus_tests::nodes::small_node("n"));

    // The next start runs it on Winch without trying Cranelift again.
    let restarted = child_runtime_with(&cache, limit, Tiers::Tiered);
    let again = PluginDir::new(&plugins, restarted.clone(), default_settings());
    again.rescan();
    assert_eq!(again.current().setters()[0].plugin().tier(), Tier::Baseline);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(restarted.load_stats().compiles.load(Ordering::Relaxed), 1);
}

#[test]
fn once_says_which_plugins_it_waited_for() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let run = |compiler: &str| {
        let out = crate::cli::nodestatus()
            .args([
                "once",
                "--plugin",
                built::KERNEL_CHECK,
                "--compiler",
                compiler,
            ])
            .arg("--cache-dir")
            .arg(&cache)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // Tiered (the default): the wait is Winch's.
    let cold = run("tiered");
    assert!(
        cold.contains("it waited for the compile of kernel-check (winch, "),
        "{cold}"
    );
    let cold = run("cranelift");
    assert!(
        cold.contains("it waited for the compile of kernel-check (cranelift, "),
        "{cold}"
    );
    // Cranelift's code is in the cache now: no compile at all.
    let warm = run("tiered");
    assert!(warm.contains("no compile waited for"), "{warm}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slow_compile_does_not_hold_back_the_node_or_the_other_plugins() {
    // `nodestatus run` against the real apiserver, with a component that
    // compiles for minutes beside kernel-check.
    let node = "slow-compile-node";
    let (tmp, plugins) = with_kernel_check();
    drop_bytes(&plugins, "slow.wasm", &slow_component("slow"));
    let (mut engine, log) = crate::kube::engine_command(tmp.path(), node, &plugins);
    // Cranelift's own compile (with `tiered`, Winch compiles this one in
    // moments: tiered_a_slow_compile_runs_on_winch_and_...).
    engine.args(["--compiler", "cranelift"]);
    let mut child = engine.spawn().unwrap();
    until(
        120,
        &log,
        "kernel-check's label never reached the node",
        async || {
            crate::kube::server_node(node)
                .await
                .is_some_and(|n| n["metadata"]["labels"]["kernel.example.com/version"].is_string())
        },
    )
    .await;
    // The order: the node had kernel-check's label while slow.wasm was
    // still compiling (its load never logged).
    let text = std::fs::read_to_string(&log).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        text.lines()
            .any(|l| l.contains("compiling in the background") && l.contains("slow.wasm")),
        "{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| l.contains("slow.wasm")
                && (l.contains("plugin loaded") || l.contains("refused"))),
        "{text}"
    );
}

/// A load that failed for a reason that may pass (here the compiler
/// process killed, as the kernel's OOM killer kills one on a node short of
/// memory) is tried again after a wait, with no change to the file; a
/// refusal that the file itself earns is not.
#[test]
fn a_load_killed_in_its_compiler_is_tried_again_and_a_refusal_is_not() {
    let tmp = tempfile::tempdir().unwrap();
    let plugins = tmp.path().join("plugins");
    std::fs::create_dir(&plugins).unwrap();
    // The compiler: the engine's own, except that its first run is killed.
    let starts = tmp.path().join("compiler-starts");
    let compiler = tmp.path().join("compiler.sh");
    std::fs::write(
        &compiler,
        format!(
            "#!/bin/sh\necho started >>'{starts}'\nif [ \"$(wc -l <'{starts}')\" -eq 1 ]; then kill -9 $$; fi\nexec '{exe}' \"$@\"\n",
            starts = starts.display(),
            exe = env!("CARGO_BIN_EXE_nodestatus"),
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&compiler, std::fs::Permissions::from_mode(0o755)).unwrap();
    let runtime = Runtime::with_options(RuntimeOptions {
        tiers: Tiers::Cranelift,
        cache_dir: Some(tmp.path().join("cache")),
        compiler: Compiler::Process {
            exe: compiler,
            limits: CompileLimits::default(),
        },
        ..RuntimeOptions::default()
    })
    .unwrap();
    let compiles = || std::fs::read_to_string(&starts).map_or(0, |s| s.lines().count());
    let dir = PluginDir::new(&plugins, runtime, default_settings());
    dir.set_retry_backoff(Duration::from_secs(1), Duration::from_secs(1));
    drop_plugin(
        &plugins,
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_bytes(&plugins, "garbage.wasm", b"\0asm\x0d\0\x01\0garbage");

    let events = dir.rescan();
    let killed = failure(&events, "kernel-check.wasm");
    assert!(killed.contains("compiler process failed"), "{killed}");
    failure(&events, "garbage.wasm");
    assert_eq!(compiles(), 1);
    // Not before its wait.
    assert!(dir.rescan().is_empty());
    assert_eq!(compiles(), 1);
    // Then loaded again, unchanged, by a rescan like the periodic one.
    let mut events = Vec::new();
    assert!(
        wait_for(60, || {
            events.extend(dir.rescan());
            events.iter().any(
                |e| matches!(e, ReloadEvent::Loaded { plugin, .. } if plugin == "kernel-check"),
            )
        }),
        "{events:#?}"
    );
    assert_eq!(compiles(), 2);
    assert_eq!(dir.current().setters().len(), 1);
    // The component that is not valid was never tried again, however many
    // rescans passed its wait.
    assert!(
        !events.iter().any(
            |e| matches!(e, ReloadEvent::Failed { file, .. } if file.ends_with("garbage.wasm"))
        ),
        "{events:#?}"
    );
    assert!(dir.rescan().is_empty());
}

/// Whether this process maps `path` (a line of /proc/self/maps).
fn mapped(path: &Path) -> bool {
    let path = path.to_str().unwrap();
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .any(|l| l.ends_with(path))
}

/// A plugin's code runs from a mapping of its precompile cache entry,
/// whether the load compiled it (in the child) or found it there: never
/// from a copy in the engine's own memory, which for a Python or
/// JavaScript setter was 35 to 37 MB of anonymous memory each
/// (docs/deployment.md, "Memory").
#[test]
fn a_plugins_code_is_mapped_from_its_cache_entry_not_copied() {
    let (tmp, plugins) = with_kernel_check();
    let cache = tmp.path().join("cache");
    let file = plugins.join("kernel-check.wasm");
    let sha = sha256_hex(&std::fs::read(&file).unwrap());
    for (what, expect_compile) in [("compiled in the child", 1), ("from the cache", 0)] {
        let runtime = child_runtime(&cache, Duration::from_secs(120));
        let entry = runtime.cache().unwrap().entry_path(&sha);
        let plugin =
            nodestatus_runtime::Plugin::load_file(&runtime, &file, &|_| Default::default())
                .unwrap();
        assert_eq!(
            runtime.load_stats().compiles.load(Ordering::Relaxed),
            expect_compile,
            "{what}"
        );
        assert!(
            mapped(&entry),
            "{what}: the code is a copy, not a mapping of {}",
            entry.display()
        );
        drop(plugin);
        drop(runtime);
    }
}
