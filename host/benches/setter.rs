//! What one setter call costs, as WebAssembly and natively, side by side.
//!
//! - `wasm/kernel-check`: one `Plugin::call_set` of the `kernel-check` plugin
//!   built for `wasm32-wasip2`: a fresh store, instantiation, the `set` call
//!   with the ~15 kB busy node as JSON, and the JSON coming back.
//! - `native/kernel-check`: the same plugin source compiled natively,
//!   `nodestatus_sdk::run::<KernelCheck>` on the same JSON.
//! - `wasm/pass`: one `pipeline::run_pass` with just kernel-check, so the
//!   host's parse of the output, diff, validation, policy check and ownership
//!   record are included.
//! - `load/cached`: `Plugin::load_file` of kernel-check with the precompile
//!   cache already warm (read, sha256, deserialize, link, `metadata` call).
//!
//! Run with
//! `cargo bench -p nodestatus --bench setter -- --warm-up-time 1 --measurement-time 5`;
//! the results are in docs/benchmarks.md.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use kernel_check::KernelCheck;
use nodestatus::pipeline::{PluginSet, run_pass};
use nodestatus::runtime::{CallContext, Plugin, PluginSettings, Runtime};
use nodestatus_tests::{built, nodes};

fn load(runtime: &Runtime, path: &Path) -> Plugin {
    Plugin::load_file(runtime, path, &|_| PluginSettings::default())
        .unwrap_or_else(|e| panic!("loading {}: {e:#}", path.display()))
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
        .json;
    let native_out =
        nodestatus_sdk::run::<KernelCheck>(&node_json).expect("the native setter succeeds");
    eprintln!(
        "node JSON: {} bytes in, {} bytes out (wasm), {} bytes out (native)",
        node_json.len(),
        wasm_out.len(),
        native_out.len()
    );
    if wasm_out != native_out {
        eprintln!("note: the wasm and native outputs differ");
    }

    c.bench_function("wasm/kernel-check", |b| {
        b.iter(|| {
            let out = plugin
                .call_set(&runtime, black_box(&node_json), ctx.clone())
                .expect("the wasm setter succeeds");
            black_box(out.json)
        })
    });

    c.bench_function("native/kernel-check", |b| {
        b.iter(|| {
            let out = nodestatus_sdk::run::<KernelCheck>(black_box(&node_json))
                .expect("the native setter succeeds");
            black_box(out)
        })
    });

    let set = PluginSet::new(vec![Arc::new(load(&runtime, path))]);
    let (_, report) = run_pass(&runtime, &set, &node, &CallContext::default());
    if let Some((name, e)) = report.failures().next() {
        panic!("{name} failed in the pass: {e}");
    }
    c.bench_function("wasm/pass", |b| {
        b.iter(|| black_box(run_pass(&runtime, &set, black_box(&node), &ctx)))
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
