//! The default setters, each as WebAssembly and natively, side by side, and
//! the whole default pass.
//!
//! - `setter/<name>/wasm`: one `Plugin::call_set` of the plugin built for
//!   `wasm32-wasip2`, with its settings from `deploy/default-config.yaml`
//!   (grants and config), on the ~15 kB busy node;
//! - `setter/<name>/native`: the same source compiled natively,
//!   `nodestatus_sdk::run::<S>` on the same JSON, with the same config and the
//!   host's own fact reader behind the SDK's fact functions;
//! - `pass/default/wasm`: one `pipeline::pass` of all eleven, in the
//!   kubelet's order, with the host's checks (each part's parse, field
//!   policy, merge, ownership) and a fresh fact snapshot per pass, as the
//!   sync loop runs it;
//! - `pass/default/wasm-steady`: the same over the node that a previous pass
//!   made, with every heartbeat old: the sync loop's usual pass, in which
//!   every part is what the node holds and only the conditions' heartbeats
//!   move;
//! - `pass/default/wasm-incremental`: the steady pass with the node's memo,
//!   as the sync loop runs it (`incrementalPasses: on`, the default): a
//!   setter none of whose inputs changed since the last pass is not called,
//!   its last part stands; what is called on this machine when idle (the
//!   setters that read a file or a fact that moves: `/proc/meminfo`,
//!   `statvfs`) is printed as `incremental: called [...]`;
//! - `pass/default/native`: the eleven native setters, each on the node's
//!   JSON (each returns its part, which is no node to chain: the host's
//!   merge is not done natively).
//! - `setter/<name>/wasm-fresh` and `pass/default/wasm-fresh`: the same
//!   plugins with `reuseInstance: false`, a fresh instance per call (the
//!   shipped config reuses one per plugin).
//! - `pass/default/host` and `pass/default/host-steady`: the host's own work
//!   around the calls in a pass, measured as the pass minus its eleven calls
//!   into the sandbox, each timed by the pass itself
//!   (`SetterReport::called`). What is left is the host's work: reading the
//!   facts (and copying into the pass's `/proc` snapshot directory the files
//!   its setters open), the serialization of the input, the parse of each
//!   part, the field policy, the merge (a node built and validated only when
//!   a part changes it), ownership and the final annotation.
//! - `compat/os-arch/wit-0.1/*` and `compat/os-arch/wit-0.2/*`: os-arch of
//!   WIT 0.1.1 (the component in `tests/fixtures/wit-0.1`) beside the
//!   shipped 0.2 build, each alone: its call, and a pass of it alone over
//!   the steady node (the host's diff of a whole node against its merge of
//!   a part).
//! - `facts/proc-all` and `facts/proc-default`: one pass's filtered `/proc`
//!   (`Facts::proc_file` from a long-lived `FactSource`, as the sync loop
//!   keeps one), with all twelve files of the view copied (what every pass
//!   did before the view copied a file at its first open) and with the two
//!   that the default setters open (`meminfo`, `loadavg`);
//! - `facts/system-cached` and `facts/system-read`: one pass's
//!   `Facts::system()` from a long-lived source, its identity files served
//!   from the source's memory (within `IDENTITY_PERIOD`), and read from disk
//!   (a clock that moves a period per call: what every pass did before).
//!
//! Run with `cargo bench -p nodestatus --bench '*'`; the results are in
//! docs/benchmarks.md.
// criterion_group! and criterion_main! write public functions without docs.
#![allow(missing_docs)]

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use nodestatus_engine::config::{Config, ConfigFile};
use nodestatus_engine::pipeline::{
    Incremental, Memo, PassOptions, PluginSet, Setter, pass, pass_with,
};
use nodestatus_runtime::facts::{self, FactSource, Facts};
use nodestatus_runtime::{CallContext, Plugin, PluginSettings, Runtime};
use nodestatus_sdk::host::{self, FsStats, IpAddress, NativeHost, NetworkInterface, SystemInfo};
use nodestatus_tests::{built, nodes};

/// The SDK's native fact functions, answered by the host's fact reader.
struct HostFacts(Facts);

impl NativeHost for HostFacts {
    fn system_info(&self) -> SystemInfo {
        let s = self.0.system();
        SystemInfo {
            hostname: s.hostname.clone(),
            kernel_release: s.kernel_release.clone(),
            kernel_version: s.kernel_version.clone(),
            machine: s.machine.clone(),
            os_release: s.os_release.clone(),
            machine_id: s.machine_id.clone(),
            system_uuid: s.system_uuid.clone(),
            boot_id: s.boot_id.clone(),
            cpus: s.cpus,
        }
    }

    fn network_interfaces(&self) -> Vec<NetworkInterface> {
        self.0
            .interfaces()
            .iter()
            .map(|i| NetworkInterface {
                name: i.name.clone(),
                up: i.up,
                loopback: i.loopback,
                addresses: i
                    .addresses
                    .iter()
                    .map(|a| IpAddress {
                        address: a.address.to_string(),
                        prefix_len: a.prefix_len,
                    })
                    .collect(),
            })
            .collect()
    }

    fn fs_stats(&self, path: &str) -> Result<FsStats, String> {
        let st = facts::statvfs(Path::new(path)).map_err(|e| format!("statvfs {path}: {e}"))?;
        Ok(FsStats {
            total_bytes: st.total_bytes,
            free_bytes: st.free_bytes,
            available_bytes: st.available_bytes,
            total_inodes: st.total_inodes,
            free_inodes: st.free_inodes,
            read_only: st.read_only,
        })
    }
}

type NativeRun = fn(&str) -> Result<Option<String>, String>;

/// The default set in the kubelet's order: name, wasm file, native setter.
const DEFAULT_SET: &[(&str, &str, NativeRun)] = &[
    (
        "node-address",
        built::NODE_ADDRESS,
        nodestatus_sdk::run::<node_address::NodeAddress>,
    ),
    (
        "machine-info",
        built::MACHINE_INFO,
        nodestatus_sdk::run::<machine_info::MachineInfo>,
    ),
    (
        "version-info",
        built::VERSION_INFO,
        nodestatus_sdk::run::<version_info::VersionInfo>,
    ),
    (
        "daemon-endpoints",
        built::DAEMON_ENDPOINTS,
        nodestatus_sdk::run::<daemon_endpoints::DaemonEndpoints>,
    ),
    (
        "images",
        built::IMAGES,
        nodestatus_sdk::run::<images::Images>,
    ),
    (
        "os-arch",
        built::OS_ARCH,
        nodestatus_sdk::run::<os_arch::OsArch>,
    ),
    (
        "memory-pressure",
        built::MEMORY_PRESSURE,
        nodestatus_sdk::run::<memory_pressure::MemoryPressure>,
    ),
    (
        "disk-pressure",
        built::DISK_PRESSURE,
        nodestatus_sdk::run::<disk_pressure::DiskPressure>,
    ),
    (
        "pid-pressure",
        built::PID_PRESSURE,
        nodestatus_sdk::run::<pid_pressure::PidPressure>,
    ),
    (
        "volumes",
        built::VOLUMES,
        nodestatus_sdk::run::<volumes::Volumes>,
    ),
    ("ready", built::READY, nodestatus_sdk::run::<ready::Ready>),
];

fn default_config() -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/default-config.yaml");
    let text = std::fs::read_to_string(&path).expect("deploy/default-config.yaml");
    ConfigFile::parse(&text, &path)
        .and_then(ConfigFile::validate)
        .expect("the default config is valid")
}

/// `iters` times: one timed pass of `set` over `node`, less the time of
/// its calls into the sandbox (each setter's report says it); the sum of
/// those differences (the host's work), at least 1 ns (criterion refuses a
/// zero).
fn host_work(
    iters: u64,
    runtime: &Runtime,
    set: &PluginSet,
    node: &serde_json::Value,
    pass_ctx: impl Fn() -> CallContext,
) -> Duration {
    let mut host = Duration::ZERO;
    for _ in 0..iters {
        let ctx = pass_ctx();
        let started = Instant::now();
        let (out, report) = pass(runtime, set, black_box(node), &ctx, PassOptions::default());
        let pass_time = started.elapsed();
        black_box(out);
        let calls: Duration = report.setters.iter().map(|s| s.called).sum();
        host += pass_time.saturating_sub(calls);
    }
    host.max(Duration::from_nanos(1))
}

fn benches(c: &mut Criterion) {
    let runtime = Runtime::new(Some(PathBuf::from(built::TEST_CACHE_DIR))).expect("runtime");
    let config = default_config();
    let node = nodes::busy_node();
    let node_json = serde_json::to_string(&node).expect("a Value serializes");
    eprintln!("node JSON: {} bytes", node_json.len());
    host::set_native_host(Some(Rc::new(HostFacts(Facts::new(FactSource::host())))));
    // One fact snapshot for the per-setter calls, as natively (one pass's).
    let ctx = CallContext::default();

    let (mut plugins, mut fresh_set) = (Vec::new(), Vec::new());
    for &(name, file, native) in DEFAULT_SET {
        let settings = config.plugin_settings(name).sandbox;
        let plugin = Plugin::load_file(&runtime, Path::new(file), &|_| settings.clone())
            .unwrap_or_else(|e| panic!("loading {name}: {e:#}"));
        // The same plugin with a fresh instance per call (the shipped config
        // reuses one).
        let fresh = PluginSettings {
            reuse_instance: false,
            ..settings.clone()
        };
        let fresh = Plugin::load_file(&runtime, Path::new(file), &|_| fresh.clone())
            .unwrap_or_else(|e| panic!("loading {name}: {e:#}"));
        let native_config = settings.config.to_string();

        // Check once, outside the timed loops, that both builds succeed.
        plugin
            .call_set(&runtime, &node_json, ctx.clone())
            .unwrap_or_else(|e| panic!("{name} (wasm): {e}"));
        host::set_native_config(&native_config);
        native(&node_json).unwrap_or_else(|e| panic!("{name} (native): {e}"));

        let mut group = c.benchmark_group(format!("setter/{name}"));
        for (id, p) in [("wasm", &plugin), ("wasm-fresh", &fresh)] {
            group.bench_function(id, |b| {
                b.iter(|| {
                    let out = p
                        .call_set(&runtime, black_box(&node_json), ctx.clone())
                        .expect("the wasm setter succeeds");
                    black_box(out.result)
                })
            });
        }
        group.bench_function("native", |b| {
            host::set_native_config(&native_config);
            b.iter(|| black_box(native(black_box(&node_json)).expect("the native setter succeeds")))
        });
        group.finish();
        plugins.push(Setter::from(Arc::new(plugin)));
        fresh_set.push(Setter::from(Arc::new(fresh)));
    }

    let set = PluginSet::new(plugins);
    let fresh_set = PluginSet::new(fresh_set);
    // A fresh fact snapshot per pass from one source, as the sync loop takes
    // one (the source keeps the filtered /proc's directory between passes).
    let source = FactSource::host();
    let pass_ctx = || CallContext {
        facts: Arc::new(Facts::new(source.clone())),
        ..CallContext::default()
    };
    let (_, report) = pass(&runtime, &set, &node, &pass_ctx(), PassOptions::default());
    if let Some((name, e)) = report.failures().next() {
        panic!("{name} failed in the pass: {e}");
    }
    let configs: Vec<String> = DEFAULT_SET
        .iter()
        .map(|(name, ..)| config.plugin_settings(name).sandbox.config.to_string())
        .collect();
    // The sync loop's usual pass: over the node the previous pass made, ten
    // seconds later, so each condition's heartbeat moves and nothing else
    // changes.
    let (mut steady, _) = pass(&runtime, &set, &node, &pass_ctx(), PassOptions::default());
    for c in steady["status"]["conditions"]
        .as_array_mut()
        .expect("conditions")
    {
        c["lastHeartbeatTime"] = "2020-01-01T00:00:00Z".into();
    }
    let mut group = c.benchmark_group("pass/default");
    group.bench_function("wasm", |b| {
        b.iter(|| {
            black_box(pass(
                &runtime,
                &set,
                black_box(&node),
                &pass_ctx(),
                PassOptions::default(),
            ))
        })
    });
    group.bench_function("wasm-steady", |b| {
        b.iter(|| {
            black_box(pass(
                &runtime,
                &set,
                black_box(&steady),
                &pass_ctx(),
                PassOptions::default(),
            ))
        })
    });
    // The steady pass with the node's memo, settled by a few passes first.
    let mut memo = Memo::new(Incremental::On, Duration::from_secs(300));
    let incremental = |memo: &mut Memo| {
        pass_with(
            &runtime,
            &set,
            black_box(&steady),
            &pass_ctx(),
            PassOptions::default(),
            None,
            Some(memo),
        )
    };
    for _ in 0..3 {
        incremental(&mut memo);
    }
    let (_, settled) = incremental(&mut memo);
    let called: Vec<&str> = settled
        .setters
        .iter()
        .filter(|s| !s.skipped)
        .map(|s| s.plugin.as_str())
        .collect();
    eprintln!("incremental: called {called:?}");
    group.bench_function("wasm-incremental", |b| {
        b.iter(|| black_box(incremental(&mut memo)))
    });
    group.bench_function("wasm-fresh", |b| {
        b.iter(|| {
            black_box(pass(
                &runtime,
                &fresh_set,
                black_box(&node),
                &pass_ctx(),
                PassOptions::default(),
            ))
        })
    });
    group.bench_function("native", |b| {
        b.iter(|| {
            // A fresh fact snapshot per pass here too, from the same
            // long-lived source.
            host::set_native_host(Some(Rc::new(HostFacts(Facts::new(source.clone())))));
            for ((_, _, native), cfg) in DEFAULT_SET.iter().zip(&configs) {
                host::set_native_config(cfg);
                black_box(native(black_box(&node_json)).expect("the native setter succeeds"));
            }
        })
    });
    // The host's work: the pass minus its calls, in the same iteration.
    for (id, over) in [("host", &node), ("host-steady", &steady)] {
        group.bench_function(id, |b| {
            b.iter_custom(|iters| host_work(iters, &runtime, &set, over, pass_ctx))
        });
    }
    group.finish();
    compat(c, &runtime, &config, &steady, pass_ctx);
}

/// A WIT 0.1 setter beside its 0.2 build: os-arch of 0.1.1 (the component
/// of `tests/fixtures/wit-0.1`, built from this repository at f32729a)
/// and the shipped os-arch of 0.2, each alone in a pass over the node it
/// leaves itself (from the node a default pass made): the call, and the
/// pass with the host's work on what it returned (a whole node to compare,
/// or a part to parse and check).
fn compat(
    c: &mut Criterion,
    runtime: &Runtime,
    config: &Config,
    steady: &serde_json::Value,
    pass_ctx: impl Fn() -> CallContext,
) {
    let old = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/fixtures/wit-0.1/os-arch.wasm"
    );
    let settings = config.plugin_settings("os-arch").sandbox;
    let mut group = c.benchmark_group("compat/os-arch");
    for (id, file) in [("wit-0.1", old), ("wit-0.2", built::OS_ARCH)] {
        let plugin = Arc::new(
            Plugin::load_file(runtime, Path::new(file), &|_| settings.clone())
                .unwrap_or_else(|e| panic!("loading {file}: {e:#}")),
        );
        let set = PluginSet::new(vec![Setter::from(plugin.clone())]);
        // Its own steady node: what a pass of it alone leaves (the other
        // plugins' fields released, its own recorded), heartbeats old.
        let (mut own, report) = pass(runtime, &set, steady, &pass_ctx(), PassOptions::default());
        if let Some((name, e)) = report.failures().next() {
            panic!("{name} ({id}) failed in the pass: {e}");
        }
        (own, _) = pass(runtime, &set, &own, &pass_ctx(), PassOptions::default());
        let steady = &own;
        let json = serde_json::to_string(steady).expect("a Value serializes");
        group.bench_function(format!("{id}/call"), |b| {
            let ctx = pass_ctx();
            b.iter(|| {
                black_box(
                    plugin
                        .call_set(runtime, black_box(&json), ctx.clone())
                        .expect("the setter succeeds")
                        .result,
                )
            })
        });
        group.bench_function(format!("{id}/pass"), |b| {
            b.iter(|| {
                black_box(pass(
                    runtime,
                    &set,
                    black_box(steady),
                    &pass_ctx(),
                    PassOptions::default(),
                ))
            })
        });
    }
    group.finish();
}

/// The facts a pass reads, each the way a pass read it before and after
/// the view and the identity cache (see the module docs).
fn facts(c: &mut Criterion) {
    use nodestatus_runtime::facts::IDENTITY_PERIOD;
    use nodestatus_runtime::proc_view::PROC_FILES;
    use std::sync::atomic::{AtomicU32, Ordering};
    let proc = Path::new("/proc");
    let source = FactSource::host();
    let mut group = c.benchmark_group("facts");
    for (id, files) in [
        ("proc-all", PROC_FILES),
        ("proc-default", &["meminfo", "loadavg"][..]),
    ] {
        group.bench_function(id, |b| {
            b.iter(|| {
                let pass = Facts::new(source.clone());
                for f in files {
                    black_box(pass.proc_file(proc, f).expect("copied"));
                }
            })
        });
    }
    group.bench_function("system-cached", |b| {
        b.iter(|| black_box(Facts::new(source.clone()).system().clone()))
    });
    // A clock a whole period ahead at each look: the identity files are
    // read at every pass.
    let start = Instant::now();
    let periods = AtomicU32::new(0);
    let reads = FactSource::host().with_clock(move || {
        start + IDENTITY_PERIOD.saturating_mul(periods.fetch_add(1, Ordering::Relaxed))
    });
    group.bench_function("system-read", |b| {
        b.iter(|| black_box(Facts::new(reads.clone()).system().clone()))
    });
    group.finish();
}

criterion_group!(default_set, benches, facts);
criterion_main!(default_set);
