//! What one setter call costs, as WebAssembly and natively, side by side.
//!
//! - `wasm/kernel-check`: one `Plugin::call_set` of the `kernel-check` plugin
//!   built for `wasm32-wasip2`: a fresh store, instantiation, the `set` call
//!   with the ~15 kB busy node as JSON, and the JSON coming back.
//! - `native/kernel-check`: the same plugin source compiled natively,
//!   `nodestatus_sdk::run::<KernelCheck>` on the same JSON.
//! - `wasm/pass`: one `pipeline::pass` with just kernel-check, so the
//!   host's parse of the output, diff, validation, policy check and ownership
//!   record are included.
//! - `exec/kernel-check`: the same check as an exec plugin, in
//!   node-problem-detector's model: fork and exec of the native build
//!   (`exec_plugin.rs`, the same source), the node's JSON written to its
//!   stdin, its JSON read from its stdout, and its exit status.
//! - `load/cached`: `Plugin::load_file` of kernel-check with the precompile
//!   cache already warm (read, sha256, deserialize, link, `metadata` call).
//! - `load/cold`: the same in an engine with no cache (compiled with
//!   Cranelift in the calling thread).
//!
//! Run with `cargo bench -p nodestatus --bench '*'` (every benchmark:
//! `exec/kernel-check` needs the `exec_plugin` bench target that command
//! builds); the results are in docs/benchmarks.md.
// criterion_group! and criterion_main! write public functions without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kernel_check::KernelCheck;
use nodestatus_engine::pipeline::{PassOptions, PluginSet, Setter, pass};
use nodestatus_runtime::{CallContext, Plugin, PluginSettings, Runtime};
use nodestatus_tests::{built, nodes};

fn load(runtime: &Runtime, path: &Path) -> Plugin {
    Plugin::load_file(runtime, path, &|_| PluginSettings::default())
        .unwrap_or_else(|e| panic!("loading {}: {e:#}", path.display()))
}

/// The `exec_plugin` bench target beside this one in `target/*/deps` (the
/// newest build of it).
fn exec_plugin_path() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench's own path");
    let deps = exe.parent().expect("the bench lies in a directory");
    std::fs::read_dir(deps)
        .expect("reading the bench's directory")
        .filter_map(Result::ok)
        .filter(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.starts_with("exec_plugin-") && !name.contains('.')
        })
        .max_by_key(|e| e.metadata().and_then(|m| m.modified()).ok())
        .map(|e| e.path())
        .unwrap_or_else(|| {
            panic!(
                "no exec_plugin-* in {}: build it with `cargo bench -p nodestatus --no-run`",
                deps.display()
            )
        })
}

/// One check as an exec plugin: fork and exec `exe`, the node on its stdin,
/// its output from its stdout.
fn exec_plugin(exe: &Path, node_json: &str) -> String {
    let mut child = Command::new(exe)
        .arg("--exec-plugin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting the exec plugin");
    // 14 kB is over a pipe's atomic size but within its 64 kB buffer: the
    // write completes before the child reads.
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(node_json.as_bytes())
        .expect("writing the node to the exec plugin");
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("piped stdout")
        .read_to_string(&mut out)
        .expect("reading the exec plugin's output");
    let status = child.wait().expect("waiting for the exec plugin");
    assert!(status.success(), "the exec plugin failed: {status}");
    out
}

fn benches(c: &mut Criterion) {
    let runtime = Runtime::new(Some(PathBuf::from(built::TEST_CACHE_DIR))).expect("runtime");
    let path = Path::new(built::KERNEL_CHECK);
    // The first load compiles the component or takes it from the cache; either
    // way the cache is warm afterwards.
    let plugin = load(&runtime, path);

    let node = nodes::busy_node();
    let node_json = serde_json::to_string(&node).expect("a Value serializes");
    // The engine reads the machine facts once per pass and shares them
    // between its setters; the native SDK reads them once per thread.
    let ctx = CallContext::default();

    // Check once, outside the timed loops, that both builds succeed and agree.
    let wasm_out = plugin
        .call_set(&runtime, &node_json, CallContext::default())
        .expect("the wasm setter succeeds")
        .result;
    let nodestatus_runtime::SetResult::Part(Some(wasm_out)) = wasm_out else {
        panic!("kernel-check returns a part: {wasm_out:?}");
    };
    let native_out = nodestatus_sdk::run::<KernelCheck>(&node_json)
        .expect("the native setter succeeds")
        .expect("the SDK always returns a part");
    eprintln!(
        "node JSON: {} bytes in, {} bytes out (wasm), {} bytes out (native)",
        node_json.len(),
        wasm_out.len(),
        native_out.len()
    );
    if wasm_out != native_out {
        eprintln!("note: the wasm and native outputs differ");
    }
    let exec = exec_plugin_path();
    // The same label and condition as the native call (its heartbeat may be
    // a second later).
    let label_and_status = |json: &str| {
        let v: serde_json::Value = serde_json::from_str(json).expect("a node's JSON");
        let condition = v["status"]["conditions"]
            .as_array()
            .and_then(|cs| cs.iter().find(|c| c["type"] == "KernelSupported"))
            .map(|c| (c["status"].clone(), c["reason"].clone()));
        (
            v["metadata"]["labels"]["kernel.example.com/version"].clone(),
            condition,
        )
    };
    assert_eq!(
        label_and_status(&exec_plugin(&exec, &node_json)),
        label_and_status(&native_out),
        "the exec plugin answers as the native setter does"
    );

    c.bench_function("wasm/kernel-check", |b| {
        b.iter(|| {
            let out = plugin
                .call_set(&runtime, black_box(&node_json), ctx.clone())
                .expect("the wasm setter succeeds");
            black_box(out.result)
        })
    });

    c.bench_function("native/kernel-check", |b| {
        b.iter(|| {
            let out = nodestatus_sdk::run::<KernelCheck>(black_box(&node_json))
                .expect("the native setter succeeds");
            black_box(out)
        })
    });

    c.bench_function("exec/kernel-check", |b| {
        b.iter(|| black_box(exec_plugin(&exec, black_box(&node_json))))
    });

    let set = PluginSet::new(vec![Setter::from(Arc::new(load(&runtime, path)))]);
    let (_, report) = pass(
        &runtime,
        &set,
        &node,
        &CallContext::default(),
        PassOptions::default(),
    );
    if let Some((name, e)) = report.failures().next() {
        panic!("{name} failed in the pass: {e}");
    }
    c.bench_function("wasm/pass", |b| {
        b.iter(|| {
            black_box(pass(
                &runtime,
                &set,
                black_box(&node),
                &ctx,
                PassOptions::default(),
            ))
        })
    });

    c.bench_function("load/cached", |b| {
        b.iter(|| black_box(load(&runtime, black_box(path))))
    });

    // A plugin dropped into the directory of an engine that has never seen it:
    // compiled with Cranelift, no cache.
    let cold = Runtime::new(None).expect("runtime");
    let mut group = c.benchmark_group("load");
    group.sample_size(10);
    group.bench_function("cold", |b| {
        b.iter(|| black_box(load(&cold, black_box(path))))
    });
    group.finish();
}

criterion_group!(setter, benches);
criterion_main!(setter);
