//! The setters written in Python (componentize-py), JavaScript
//! (componentize-js) and C (wasi-libc, wit-bindgen, wasm-tools), built from
//! source by scripts/guests/*.sh, in the real host.

use nodestatus_engine::pipeline::{SetterError, SetterErrorKind};
use nodestatus_runtime::{CallErrorKind, PathGrant, PluginSettings};
use std::path::Path;

use nodestatus_tests::{drop_plugin, guest, guest_aot, nodes};
use serde_json::json;

use crate::common::*;

/// The value of `key: value` in /proc/cpuinfo's first processor.
fn cpuinfo(key: &str) -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_owned())
}

#[test]
fn python_cpu_features_labels_this_cpu() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        paths: vec![PathGrant::same("/proc")],
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "cpu-features.wasm", &guest("cpu-features"));
    dir.rescan();
    let set = dir.current();
    assert_eq!(set.setters().len(), 1, "cpu-features loads");
    assert_eq!(set.setters()[0].name(), "cpu-features");

    let node = pass_ok(&dir, &nodes::small_node("n1"));
    let labels = &node["metadata"]["labels"];
    let label = |k: &str| labels[format!("feature.node.kubernetes.io/{k}")].as_str();
    match cpuinfo("vendor_id").as_deref() {
        Some("AuthenticAMD") => assert_eq!(label("cpu-model.vendor_id"), Some("AMD")),
        Some("GenuineIntel") => assert_eq!(label("cpu-model.vendor_id"), Some("Intel")),
        _ => assert!(label("cpu-model.vendor_id").is_some(), "{labels}"),
    }
    if let Some(flags) = cpuinfo("flags") {
        let has = flags.split_whitespace().any(|f| f == "avx2");
        assert_eq!(label("cpu-cpuid.AVX2"), has.then_some("true"), "{labels}");
        assert_eq!(label("cpu-model.family"), cpuinfo("cpu family").as_deref());
    }

    // A second pass over its own output changes nothing.
    let again = pass_ok(&dir, &node);
    assert_eq!(again["metadata"]["labels"], node["metadata"]["labels"]);
}

#[test]
fn javascript_load_average_sets_high_load_from_proc_loadavg() {
    for max in [0.0, 1000.0] {
        let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
            paths: vec![PathGrant::same("/proc")],
            config: json!({"maxLoadPerCpu": max}),
            ..Default::default()
        }));
        drop_plugin(tmp.path(), "load-average.wasm", &guest("load-average"));
        dir.rescan();
        let load5: f64 = std::fs::read_to_string("/proc/loadavg")
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .parse()
            .unwrap();
        let node = pass_ok(&dir, &nodes::small_node("n1"));
        let c = condition_of(&node, "HighLoad").expect("HighLoad is set");
        // The 5-minute average barely moves within one test; 0 per CPU is
        // exceeded by any load at all, 1000 by none.
        let high = max == 0.0 && load5 > 0.0;
        assert_eq!(c["status"], if high { "True" } else { "False" }, "{c}");
        assert_eq!(
            c["reason"],
            if high { "LoadHigh" } else { "LoadNormal" },
            "{c}"
        );
    }
}

/// With `reuseInstance`, one Python or JavaScript instance (the interpreter
/// already running) serves pass after pass, with the same answers as fresh
/// instances.
#[test]
fn python_and_javascript_guests_serve_pass_after_pass_in_one_instance() {
    for (name, config) in [
        ("cpu-features", json!({})),
        ("load-average", json!({"maxLoadPerCpu": 1000})),
    ] {
        let answers: Vec<_> = [false, true]
            .into_iter()
            .map(|reuse| {
                let config = config.clone();
                let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
                    paths: vec![PathGrant::same("/proc")],
                    config: config.clone(),
                    reuse_instance: reuse,
                    ..Default::default()
                }));
                drop_plugin(tmp.path(), &format!("{name}.wasm"), &guest(name));
                dir.rescan();
                let passes: Vec<_> = (0..3)
                    .map(|_| {
                        let node = pass_ok(&dir, &nodes::small_node("n1"));
                        let high = condition_of(&node, "HighLoad").map(|c| c["status"].clone());
                        (node["metadata"]["labels"].clone(), high)
                    })
                    .collect();
                assert!(
                    passes.windows(2).all(|w| w[0] == w[1]),
                    "{name}: {passes:?}"
                );
                passes[0].clone()
            })
            .collect();
        assert_eq!(answers[0], answers[1], "{name}: fresh against reused");
    }
}

/// One pass of the guest plugin `name` (its component `file`) alone,
/// granted nothing: the node it left and the error it must have failed with.
fn fails_without_grants(name: &str, file: &Path) -> (serde_json::Value, SetterError) {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_plugin(tmp.path(), &format!("{name}.wasm"), file);
    dir.rescan();
    let (out, report) = nodestatus_engine::pipeline::pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &nodestatus_runtime::CallContext::default(),
        Default::default(),
    );
    let e = report.setters[0]
        .outcome
        .clone()
        .expect_err(&format!("{name} without grants"));
    (out, e)
}

#[test]
fn javascript_load_average_without_proc_fails_cleanly() {
    load_average_fails_cleanly_without_proc(&guest("load-average"));
}

// The tests of the JavaScript setter built ahead of time (`guests::aot_*`)
// need `target/guest-plugins/aot`, which `scripts/test.sh` builds when weval
// is in its cache or with NODESTATUS_AOT=1, and then runs them:
// `cargo test -p nodestatus --test all -- --ignored guests::aot_`.

/// Built ahead of time, its errors still name the author's line.
#[test]
#[ignore = "needs the AOT build (scripts/test.sh with weval: docs/testing.md)"]
fn aot_javascript_without_proc_fails_cleanly() {
    load_average_fails_cleanly_without_proc(&guest_aot("load-average"));
}

fn load_average_fails_cleanly_without_proc(file: &Path) {
    let (out, e) = fails_without_grants("load-average", file);
    // It asks for /proc, which is not granted.
    assert_eq!(
        e.kind,
        SetterErrorKind::Call(CallErrorKind::Ungranted),
        "{e}"
    );
    assert!(e.to_string().contains("/proc/loadavg"), "{e}");
    // Where, in the author's file (through the source map that build.mjs
    // embeds), not in the bundle.
    let source = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../plugins/js/load-average/setter.js"
    ))
    .unwrap();
    let line = source
        .lines()
        .position(|l| l.contains("readFile('/proc/loadavg')"))
        .unwrap()
        + 1;
    assert!(
        e.to_string().contains(&format!("(at setter.js:{line}:")),
        "{e}"
    );
    assert!(!e.to_string().contains("bundle"), "{e}");
    assert!(
        condition_of(&out, "HighLoad").is_none(),
        "{}",
        file.display()
    );
}

/// A JavaScript setter built ahead of time (`build.mjs --aot`: weval
/// compiles its JavaScript to WebAssembly) gives the node that its
/// interpreted build gives, on one snapshot of the machine: in a fresh
/// instance and in a kept one, on either side of its threshold, over the
/// busy node (a 14 kB `string` each way).
#[test]
#[ignore = "needs the AOT build (scripts/test.sh with weval: docs/testing.md)"]
fn aot_javascript_gives_the_interpreted_builds_node() {
    let aot = guest_aot("load-average");
    let interpreted = guest("load-average");
    assert_ne!(
        std::fs::read(&aot).unwrap(),
        std::fs::read(&interpreted).unwrap(),
        "two different builds"
    );
    let ctx = nodestatus_runtime::CallContext::default();
    for max in [0.0, 1000.0] {
        for reuse in [false, true] {
            let nodes: Vec<_> = [&interpreted, &aot]
                .into_iter()
                .map(|file| {
                    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
                        paths: vec![PathGrant::same("/proc")],
                        config: json!({"maxLoadPerCpu": max}),
                        reuse_instance: reuse,
                        ..Default::default()
                    }));
                    drop_plugin(tmp.path(), "load-average.wasm", file);
                    dir.rescan();
                    // Twice: a kept instance serves the second pass.
                    let first = pass_ok_with(&dir, &nodes::busy_node(), &ctx);
                    let second = pass_ok_with(&dir, &first, &ctx);
                    assert!(condition_of(&second, "HighLoad").is_some(), "{second:#}");
                    (without_times(first), without_times(second))
                })
                .collect();
            assert_eq!(
                nodes[0], nodes[1],
                "maxLoadPerCpu {max}, reuseInstance {reuse}: the AOT build's node differs"
            );
        }
    }
}

#[test]
fn c_memory_features_follows_proc_swaps_and_numa_nodes() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        paths: vec![
            PathGrant::same("/proc"),
            PathGrant::same("/sys/devices/system/node"),
        ],
        ..Default::default()
    }));
    drop_plugin(
        tmp.path(),
        "memory-features.wasm",
        &guest("memory-features"),
    );
    dir.rescan();
    assert_eq!(dir.current().setters()[0].name(), "memory-features");

    // A node that claims both, so that what is false here must be removed.
    let mut node = nodes::small_node("n1");
    node["metadata"]["labels"]["feature.node.kubernetes.io/memory-swap"] = json!("true");
    node["metadata"]["labels"]["feature.node.kubernetes.io/memory-numa"] = json!("true");
    let out = pass_ok(&dir, &node);
    let labels = &out["metadata"]["labels"];

    let swaps = std::fs::read_to_string("/proc/swaps").unwrap();
    let swap = swaps.lines().skip(1).any(|l| !l.trim().is_empty());
    assert_eq!(
        labels["feature.node.kubernetes.io/memory-swap"].as_str(),
        swap.then_some("true"),
        "{labels}"
    );
    let online = std::fs::read_to_string("/sys/devices/system/node/online").unwrap_or_default();
    let numa = online.trim().contains([',', '-']);
    assert_eq!(
        labels["feature.node.kubernetes.io/memory-numa"].as_str(),
        numa.then_some("true"),
        "{labels}"
    );
}

#[test]
fn python_cpu_features_without_proc_says_it_is_not_granted() {
    let (_, e) = fails_without_grants("cpu-features", &guest("cpu-features"));
    assert_eq!(
        e.kind,
        SetterErrorKind::Call(CallErrorKind::Ungranted),
        "{e}"
    );
    // The SDK's FileError, inside the sandbox: not "no such file".
    assert!(
        e.to_string()
            .contains("cannot read /proc/cpuinfo: not inside a directory granted to this plugin"),
        "{e}"
    );
}

/// The disks that plugins/go/local-disks reports, read here from
/// /sys/block: (name, bytes, rotational) of each device-backed one.
fn local_disks() -> Vec<(String, u64, bool)> {
    let mut disks: Vec<_> = std::fs::read_dir("/sys/block")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("device").exists())
        .map(|p| {
            let read = |f: &str| -> u64 {
                std::fs::read_to_string(p.join(f))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            };
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, read("size") * 512, read("queue/rotational") == 1)
        })
        .collect();
    disks.sort();
    disks
}

#[test]
fn go_local_disks_reports_this_machines_disks() {
    let disks = local_disks();
    for min in [1, 1000] {
        let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
            paths: vec![PathGrant::same("/sys")],
            config: json!({ "minDisks": min }),
            ..Default::default()
        }));
        drop_plugin(tmp.path(), "local-disks.wasm", &guest("local-disks"));
        dir.rescan();
        assert_eq!(dir.current().setters()[0].name(), "local-disks");
        // A node that claims an SSD and an HDD, so that what is false here
        // must be removed.
        let mut node = nodes::small_node("n1");
        node["metadata"]["labels"]["disk.example.com/ssd"] = json!("true");
        node["metadata"]["labels"]["disk.example.com/hdd"] = json!("true");
        let out = pass_ok(&dir, &node);
        let labels = &out["metadata"]["labels"];
        let has = |rot: bool| disks.iter().any(|d| d.2 == rot).then_some("true");
        assert_eq!(
            labels["disk.example.com/ssd"].as_str(),
            has(false),
            "{labels}"
        );
        assert_eq!(
            labels["disk.example.com/hdd"].as_str(),
            has(true),
            "{labels}"
        );
        let count = disks.len().to_string();
        assert_eq!(
            out["status"]["capacity"]["example.com/local-disk"],
            json!(count)
        );
        assert_eq!(
            out["status"]["allocatable"]["example.com/local-disk"],
            json!(count)
        );
        let names: Vec<_> = out["metadata"]["annotations"]["disk.example.com/devices"]
            .as_str()
            .unwrap()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.split(':').next().unwrap().to_owned())
            .collect();
        let want: Vec<_> = disks.iter().map(|d| d.0.clone()).collect();
        assert_eq!(names, want);
        let c = condition_of(&out, "LocalDisksReady").expect("LocalDisksReady is set");
        let enough = disks.len() >= min;
        assert_eq!(c["status"], if enough { "True" } else { "False" }, "{c}");
        assert_eq!(
            c["reason"],
            if enough { "DisksFound" } else { "TooFewDisks" },
            "{c}"
        );
    }
}

#[test]
fn go_local_disks_without_sys_says_it_is_not_granted() {
    let (out, e) = fails_without_grants("local-disks", &guest("local-disks"));
    assert_eq!(
        e.kind,
        SetterErrorKind::Call(CallErrorKind::Ungranted),
        "{e}"
    );
    assert!(e.to_string().contains("/sys/block"), "{e}");
    assert!(condition_of(&out, "LocalDisksReady").is_none());
}

/// A Go setter that reads its node with Kubernetes' own types
/// (k8s.io/api/core/v1.Node, through the SDK's `Node.Decode`) and writes
/// what it read: the quantities, labels, conditions and addresses arrive
/// whole. A node that is no v1.Node (a capacity that is not a quantity)
/// fails the setter alone, with the decoder's reason.
#[test]
fn go_k8s_types_reads_the_node_as_a_v1_node() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_plugin(tmp.path(), "k8s-types.wasm", &guest("k8s-types"));
    dir.rescan();
    assert_eq!(
        dir.current().setters()[0].name(),
        "k8s-types",
        "{:?}",
        dir.status()
    );
    let mut node = nodes::small_node("n1");
    node["metadata"]["labels"]["kubernetes.io/os"] = json!("linux");
    node["status"]["capacity"] = json!({"cpu": "3500m", "memory": "8Gi"});
    node["status"]["addresses"] = json!([
        {"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "Hostname", "address": "n1"},
    ]);
    node["status"]["conditions"] = json!([
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ok"},
    ]);
    let out = pass_ok(&dir, &node);
    // 3500m: four whole CPUs, rounded up as resource.Quantity.Value() does.
    assert_eq!(
        out["status"]["capacity"]["example.com/k8s-types"],
        json!("4")
    );
    assert_eq!(
        out["status"]["allocatable"]["example.com/k8s-types"],
        json!("4")
    );
    assert_eq!(
        out["metadata"]["labels"]["example.com/k8s-types-os"],
        json!("linux")
    );
    let c = condition_of(&out, "K8sTypesDecoded").expect("its condition");
    assert_eq!(c["status"], "True");
    assert_eq!(
        c["message"], "1 condition(s), 2 address(es), cpu 3500m",
        "{c}"
    );

    node["status"]["capacity"]["cpu"] = json!("three");
    let (out, report) = nodestatus_engine::pipeline::pass(
        dir.runtime(),
        &dir.current(),
        &node,
        &nodestatus_runtime::CallContext::default(),
        Default::default(),
    );
    let e = report.setters[0]
        .outcome
        .clone()
        .expect_err("not a v1.Node");
    assert!(e.to_string().contains("the node is not a v1.Node"), "{e}");
    assert!(condition_of(&out, "K8sTypesDecoded").is_none());
}

/// The host's functions reach a Go setter through the SDK's ABI glue with
/// their values whole: every record, list and result of
/// `nodestatus:plugin/host@0.1.1` that go-probe writes back as annotations,
/// against what this process reads of the machine.
#[test]
fn go_probe_gets_every_host_function_through_the_glue() {
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        paths: vec![PathGrant::same("/tmp")],
        config: json!({ "statvfs": "/tmp" }),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "go-probe.wasm", &guest("go-probe"));
    dir.rescan();
    let ctx = nodestatus_runtime::CallContext {
        node_problems: std::sync::Arc::from(vec!["first problem".to_owned(), "second".to_owned()]),
        ..Default::default()
    };
    let (out, report) = nodestatus_engine::pipeline::pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &ctx,
        Default::default(),
    );
    assert!(report.setters[0].outcome.is_ok(), "{:?}", report.setters[0]);
    let a = |k: &str| {
        out["metadata"]["annotations"][format!("go-probe.example.com/{k}")]
            .as_str()
            .unwrap_or_else(|| panic!("no {k}: {out:#}"))
            .to_owned()
    };
    let proc = |f: &str| std::fs::read_to_string(f).unwrap().trim().to_owned();
    assert_eq!(a("hostname"), proc("/proc/sys/kernel/hostname"));
    assert_eq!(a("kernel"), proc("/proc/sys/kernel/osrelease"));
    assert_eq!(a("boot-id"), proc("/proc/sys/kernel/random/boot_id"));
    assert_eq!(a("machine"), std::env::consts::ARCH);
    assert_eq!(a("cpus"), nodestatus_tests::online_cpus().to_string());
    assert!(
        a("interfaces")
            .split(',')
            .any(|i| i.starts_with("lo:true:true=127.0.0.1/8")),
        "{}",
        a("interfaces")
    );
    // SAFETY: a zeroed statvfs is a valid out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: the path is NUL-terminated and st is writable.
    assert_eq!(unsafe { libc::statvfs(c"/tmp".as_ptr(), &mut st) }, 0);
    let total = st.f_blocks * st.f_frsize;
    let fields: Vec<_> = a("statvfs").split(' ').map(str::to_owned).collect();
    assert_eq!(fields[0], total.to_string(), "{fields:?}");
    assert_eq!(fields[3], st.f_files.to_string(), "{fields:?}");
    assert_eq!(a("problems"), "first problem|second");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&a("config")).unwrap(),
        json!({ "statvfs": "/tmp" })
    );
    // No containerRuntime grant: the error's case (0, not-granted) and message.
    assert!(a("runtime").starts_with("error 0: "), "{}", a("runtime"));
    assert_eq!(report.events.len(), 1, "{:?}", report.events);
    assert_eq!(report.events[0].1.reason, "GoProbeRan");
}

/// With `reuseInstance`, one Go instance (its runtime started once) serves
/// pass after pass, with the answers of fresh instances; over the busy node
/// (about 15 kB each way), for longer than the SDK's 4 MiB arena would last
/// if a call's memory were not released.
#[test]
fn go_guest_serves_pass_after_pass_in_one_instance() {
    let answers: Vec<_> = [false, true]
        .into_iter()
        .map(|reuse| {
            let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
                paths: vec![PathGrant::same("/sys")],
                reuse_instance: reuse,
                ..Default::default()
            }));
            drop_plugin(tmp.path(), "local-disks.wasm", &guest("local-disks"));
            dir.rescan();
            let passes = if reuse { 400 } else { 3 };
            let nodes: Vec<_> = (0..passes)
                .map(|_| without_times(pass_ok(&dir, &nodes::busy_node())))
                .collect();
            assert!(nodes.windows(2).all(|w| w[0] == w[1]), "reuse {reuse}");
            nodes[0].clone()
        })
        .collect();
    assert_eq!(answers[0], answers[1], "fresh against reused");
}

/// A reacting guest (WIT 0.2.1, world `reactor-plugin`) of another
/// language in the real runtime. Each language's test component
/// (tests/components/LANG/) follows the kernel log as stream `kernel` with
/// one pattern, `pattern` unless its config gives `{"pattern": ...}`, and
/// on a match sets `condition` True with the line in its message and
/// records a Warning event of that reason:
///
/// - at load, its `subscribe` is read and checked (`Plugin::subscriptions`);
///   without the `kmsg` grant the stream is withheld alone and the plugin
///   is a plain setter;
/// - `set` gives the condition False; `on-lines` with a batch of `line`
///   gives the part with the condition True, and the event;
/// - a pattern that is not a regular expression refuses it at load, with
///   the stream, the pattern's index and the pattern in the error.
fn reacts_in_the_runtime(name: &str, pattern: &str, line: &str, condition: &str) {
    use nodestatus_runtime::reactor::{Batch, LineMatch, Source, StreamGrant};
    use nodestatus_runtime::{CallContext, EventType, Interface, LoadError, Plugin, SetResult};
    let file = guest(name);
    let load = |streams: Vec<StreamGrant>, config: serde_json::Value| {
        Plugin::load_file(&runtime(), &file, &|_| PluginSettings {
            streams: streams.clone(),
            config: config.clone(),
            ..Default::default()
        })
    };
    let plugin = load(vec![StreamGrant::Kmsg], json!({})).expect("it loads");
    assert_eq!(plugin.interface(), Interface::V0_2);
    let subs = plugin.subscriptions().expect("it follows the kernel log");
    assert_eq!(subs.streams.len(), 1, "{:?}", subs.streams);
    let s = &subs.streams[0];
    assert_eq!(&*s.name, "kernel");
    assert_eq!(s.source, Source::Kmsg);
    let patterns: Vec<_> = s.patterns.iter().map(|p| p.as_str()).collect();
    assert_eq!(patterns, [pattern]);
    assert!(s.patterns[0].is_match(line), "{pattern} against {line}");
    assert_eq!(
        (s.span, s.lookback.as_secs(), s.extract.is_none()),
        (1, 0, true)
    );
    assert!(subs.watch.is_empty());

    // Not granted: the stream is withheld alone, and the plugin loads.
    let plain = load(vec![], json!({})).expect("it loads without the grant");
    assert!(plain.subscriptions().is_none());
    assert!(
        plain
            .withheld()
            .iter()
            .any(|w| w.to_string().contains("stream \"kernel\" (kmsg)")),
        "{:?}",
        plain.withheld()
    );

    let node = nodes::small_node("n1").to_string();
    let part = |out: nodestatus_runtime::SetOutput| match out.result {
        SetResult::Part(Some(p)) => (
            serde_json::from_str::<serde_json::Value>(&p).unwrap(),
            out.events,
        ),
        other => panic!("{name}: not a part: {other:?}"),
    };
    let (set, events) = part(
        plugin
            .call_set(&runtime(), &node, CallContext::default())
            .expect("set"),
    );
    assert_eq!(
        condition_of(&set, condition).unwrap()["status"],
        "False",
        "{set}"
    );
    assert!(events.is_empty(), "{events:?}");

    let batch = Batch {
        matches: vec![LineMatch {
            stream: "kernel".into(),
            pattern: 0,
            text: line.to_owned(),
            time_ms: 1_764_400_000_000,
        }],
        dropped: 0,
    };
    let (lines, events) = part(
        plugin
            .call_lines(&runtime(), &node, &batch, CallContext::default())
            .expect("on-lines"),
    );
    let c = condition_of(&lines, condition).unwrap_or_else(|| panic!("no {condition}: {lines}"));
    assert_eq!(
        (c["status"].as_str(), c["reason"].as_str()),
        (Some("True"), Some(condition)),
        "{c}"
    );
    assert!(c["message"].as_str().unwrap().contains(line), "{c}");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        (events[0].event_type, events[0].reason.as_str()),
        (EventType::Warning, condition)
    );
    assert!(events[0].message.contains(line), "{events:?}");

    let Err(e) = load(vec![StreamGrant::Kmsg], json!({"pattern": "(unclosed"})) else {
        panic!("{name}: a pattern that is no regular expression loaded");
    };
    assert!(matches!(e, LoadError::Subscriptions(_)), "{e:?}");
    let text = nodestatus_runtime::error_chain(&e);
    assert!(
        text.contains(
            "stream \"kernel\", pattern 0 (\"(unclosed\") is not a valid regular expression"
        ),
        "{text}"
    );
}

/// The hung-task line of the reacting guests' tests.
const HUNG_TASK: &str = "INFO: task jbd2/sda1-8:311 blocked for more than 120 seconds.";

#[test]
fn go_hung_task_reacts_in_the_runtime() {
    reacts_in_the_runtime(
        "hung-task",
        r"task (\S+):(\d+) blocked for more than (\d+) seconds",
        HUNG_TASK,
        "TaskHung",
    );
}

#[test]
fn c_oom_kill_reacts_in_the_runtime() {
    reacts_in_the_runtime(
        "oom-kill",
        r"Killed process (\d+) \((.+?)\)",
        "Out of memory: Killed process 4242 (stress) total-vm:1000kB, anon-rss:500kB",
        "OOMKill",
    );
}

#[test]
fn python_readonly_fs_reacts_in_the_runtime() {
    reacts_in_the_runtime(
        "readonly-fs",
        "Remounting filesystem read-only",
        "EXT4-fs (sda1): Remounting filesystem read-only",
        "ReadonlyFilesystem",
    );
}

#[test]
fn javascript_nvme_reset_reacts_in_the_runtime() {
    reacts_in_the_runtime(
        "nvme-reset",
        r"nvme (nvme\d+): .*reset",
        "nvme nvme0: I/O 123 QID 4 timeout, reset controller",
        "NVMeControllerReset",
    );
}
