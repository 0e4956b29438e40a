//! The sandbox against a hostile world: each hostile kind runs against the
//! real host, beside a good plugin (kernel-check), in one pass. For each, the
//! host stays alive, kernel-check's fields still reach the node, the pass (or
//! the load) ends within the deadline plus a margin, the process's peak
//! memory stays under the plugin's cap plus a margin, and the report names
//! the plugin and the typed reason.
//!
//! `hostile_kinds_hold` prints one Markdown row per kind, with the measured
//! time and peak memory; docs/reliability.md is pasted from it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nodestatus_engine::pipeline::{SetterErrorKind, pass};
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::compile::{self, DEFAULT_COMPILE_MEMORY_LIMIT};
use nodestatus_runtime::{
    CallContext, CallErrorKind, CompileLimits, Compiler, DEFAULT_MEMORY_LIMIT, LoadError,
    MetadataError, PathGrant, Plugin, PluginSettings, Runtime, RuntimeOptions,
};
use nodestatus_tests::hostile::{self, Behaviour};
use nodestatus_tests::{built, drop_bytes, drop_plugin, nodes};
use serde_json::{Value, json};

use crate::common::*;

/// The deadline given to hostile plugins here.
const DEADLINE: Duration = Duration::from_millis(500);
/// What a pass may take beyond the deadline: the good plugin's own call,
/// instantiation, and a loaded CI machine.
const MARGIN: Duration = Duration::from_secs(3);
/// What the process's peak RSS may grow beyond the plugin's cap during one
/// pass: the node copies and the host's own allocations. (The tests that
/// measure it run alone in a process: see [`run_alone`].)
const RSS_MARGIN: u64 = 48 << 20;
/// The memory cap that lets a guest hold a 100 MB output.
const BIG_CAP: usize = 256 << 20;

fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Resets the process's peak RSS and returns the current RSS, in bytes.
fn reset_peak() -> u64 {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    status_kib("VmRSS:") * 1024
}

/// Peak RSS since the last [`reset_peak`], in bytes.
fn peak() -> u64 {
    status_kib("VmHWM:") * 1024
}

/// Runs `f` on its own thread and fails the test if it does not return
/// within `limit` (a host that hangs must fail, not stall the suite).
fn within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit)
        .unwrap_or_else(|_| panic!("{what}: the host did not come back within {limit:?}"))
}

/// One row of the table.
struct Row {
    kind: &'static str,
    outcome: String,
    kept: &'static str,
    elapsed: Duration,
    peak_growth: u64,
}

/// Prints `row` as a Markdown table row (seen with `--nocapture`).
fn print_row(r: Row) {
    let time = if r.elapsed.is_zero() {
        "-".to_owned()
    } else {
        format!("{:.0} ms", r.elapsed.as_secs_f64() * 1000.0)
    };
    let mem = if r.peak_growth == 0 {
        "-".to_owned()
    } else {
        format!("{:.1} MiB", r.peak_growth as f64 / (1 << 20) as f64)
    };
    println!(
        "| {} | {} | {} | {time} | {mem} |",
        r.kind,
        r.outcome.replace('|', "\\|").replace('\n', " "),
        r.kept
    );
}

fn settings_for_hostile(cap: usize) -> nodestatus_engine::config::SettingsFn {
    settings(move |name| PluginSettings {
        timeout: if name == "kernel-check" {
            nodestatus_runtime::DEFAULT_TIMEOUT
        } else {
            DEADLINE
        },
        memory_limit: if name == "kernel-check" {
            nodestatus_runtime::DEFAULT_MEMORY_LIMIT
        } else {
            cap
        },
        ..Default::default()
    })
}

/// A plugin directory holding kernel-check and `file` with `bytes`.
fn dir_with(file: &str, bytes: &[u8], cap: usize) -> (tempfile::TempDir, Arc<PluginDir>) {
    dir_on(runtime(), file, bytes, cap)
}

/// [`dir_with`] on `runtime`.
fn dir_on(
    runtime: Runtime,
    file: &str,
    bytes: &[u8],
    cap: usize,
) -> (tempfile::TempDir, Arc<PluginDir>) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = PluginDir::new(tmp.path(), runtime, settings_for_hostile(cap));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_bytes(tmp.path(), file, bytes);
    (tmp, dir)
}

/// Makes a FIFO (a named pipe) at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

/// One pass of every plugin in `dir` over a small node.
fn one_pass(dir: &PluginDir) -> (Value, nodestatus_engine::pipeline::PassReport) {
    pass(
        dir.runtime(),
        &dir.current(),
        &nodes::small_node("n1"),
        &CallContext::default(),
        Default::default(),
    )
}

/// Asserts that kernel-check ran and its label reached the node.
fn good_plugin_kept(out: &Value, report: &nodestatus_engine::pipeline::PassReport) {
    let kc = report
        .setters
        .iter()
        .find(|s| s.plugin == "kernel-check")
        .expect("kernel-check ran");
    assert!(kc.outcome.is_ok(), "kernel-check: {:?}", kc.outcome);
    assert!(
        out["metadata"]["labels"]["kernel.example.com/version"].is_string(),
        "kernel-check's label is missing: {out}"
    );
}

/// Loads `behaviour` as plugin `name` beside kernel-check, runs one pass and
/// checks the hostile call failed with `kind` while everything else held.
fn call_row(
    kind: &'static str,
    name: &str,
    behaviour: Behaviour,
    cap: usize,
    want: impl Into<SetterErrorKind>,
) {
    let want = want.into();
    let bytes = hostile::component(name, &behaviour);
    let (_tmp, dir) = dir_with(&format!("{name}.wasm"), &bytes, cap);
    let events = dir.rescan();
    assert!(
        events.iter().all(|e| e.result() == "loaded"),
        "{kind}: {events:#?}"
    );
    let base = reset_peak();
    let started = Instant::now();
    let d = dir.clone();
    let (out, report) = within(
        DEADLINE + MARGIN + Duration::from_secs(10),
        kind,
        move || {
            pass(
                d.runtime(),
                &d.current(),
                &nodes::small_node("n1"),
                &CallContext::default(),
                Default::default(),
            )
        },
    );
    let elapsed = started.elapsed();
    let growth = peak().saturating_sub(base);
    let e = report
        .setters
        .iter()
        .find(|s| s.plugin == name)
        .unwrap_or_else(|| panic!("{kind}: {name} did not run"))
        .outcome
        .clone()
        .expect_err(kind);
    assert_eq!(e.kind, want, "{kind}: {e}");
    good_plugin_kept(&out, &report);
    assert!(
        elapsed < DEADLINE + MARGIN,
        "{kind}: the pass took {elapsed:?}"
    );
    assert!(
        growth < cap as u64 + RSS_MARGIN,
        "{kind}: peak RSS grew by {} MiB, over the {} MiB cap",
        growth >> 20,
        cap >> 20
    );
    print_row(Row {
        kind,
        outcome: format!("`{}`: {}", e.kind.as_str(), e.message),
        kept: "kernel-check's label and condition reached the node",
        elapsed,
        peak_growth: growth,
    });
}

/// Drops `bytes` as `file` beside kernel-check, rescans, and checks that the
/// file is refused with a load error that `check` accepts, that kernel-check
/// loads and runs, and that the rescan ends within the deadline plus margin.
fn load_row(kind: &'static str, file: &str, bytes: &[u8], check: impl Fn(&LoadError) -> bool) {
    let (_tmp, dir) = dir_with(file, bytes, nodestatus_runtime::DEFAULT_MEMORY_LIMIT);
    refused_at_load(
        kind,
        dir,
        file,
        DEADLINE + MARGIN,
        check,
        "kernel-check loaded and ran",
    );
}

/// Rescans `dir`, which holds kernel-check and `file`, and checks that
/// `file` is refused with a load error that `check` accepts (loading it
/// directly, for the typed reason), that kernel-check loads and runs, and
/// that the rescan ends within `limit`. Prints the row, with the peak RSS
/// growth as a figure (not asserted).
fn refused_at_load(
    kind: &'static str,
    dir: Arc<PluginDir>,
    file: &str,
    limit: Duration,
    check: impl Fn(&LoadError) -> bool,
    kept: &'static str,
) {
    let base = reset_peak();
    let started = Instant::now();
    let d = dir.clone();
    let events = within(limit + Duration::from_secs(20), kind, move || d.rescan());
    let elapsed = started.elapsed();
    let growth = peak().saturating_sub(base);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, ReloadEvent::Failed { file: f, .. } if f.ends_with(file))),
        "{kind}: {file} was not refused: {events:#?}"
    );
    assert!(
        dir.current().contains("kernel-check"),
        "{kind}: {events:#?}"
    );
    assert_eq!(dir.current().setters().len(), 1, "{kind}");
    let (out, report) = one_pass(&dir);
    good_plugin_kept(&out, &report);
    let settings = settings_for_hostile(nodestatus_runtime::DEFAULT_MEMORY_LIMIT);
    let err = Plugin::load_file(dir.runtime(), &dir.dir().join(file), &|n| {
        settings(n).sandbox
    })
    .expect_err(kind);
    assert!(check(&err), "{kind}: unexpected load error {err:?}");
    assert!(elapsed < limit, "{kind}: the rescan took {elapsed:?}");
    print_row(Row {
        kind,
        outcome: format!("refused at load: {}", nodestatus_runtime::error_chain(&err)),
        kept,
        elapsed,
        peak_growth: growth,
    });
}

fn meta_kind(e: &LoadError, kind: CallErrorKind) -> bool {
    matches!(e, LoadError::Metadata(c) if c.kind == kind)
}

/// Prints the table rows in what a child test printed (the first follows
/// the harness's `test NAME ... `).
fn print_rows(out: &str) {
    for l in out.lines() {
        if let Some(i) = l.find("| ") {
            println!("{}", &l[i..]);
        }
    }
}

/// Runs [`hostile_kinds_child`] alone in a process of its own, so that the
/// peak RSS it measures is its own, and prints its table.
#[test]
fn hostile_kinds_hold() {
    let out = run_alone("sandbox::hostile_kinds_child");
    print_rows(&out);
}

#[test]
#[ignore = "run by hostile_kinds_hold in a process of its own"]
fn hostile_kinds_child() {
    println!("| kind | what happened | what was kept | pass (or load) time | peak RSS growth |");
    println!("|---|---|---|---|---|");
    let cap = nodestatus_runtime::DEFAULT_MEMORY_LIMIT;
    // Guest code.
    call_row(
        "infinite loop in `set`",
        "spin",
        Behaviour::Spin,
        cap,
        CallErrorKind::Timeout,
    );
    call_row(
        "sleep in a host call in `set` (clock subscribe + pollable.block, 1 h)",
        "sleep",
        Behaviour::Sleep,
        cap,
        CallErrorKind::Timeout,
    );
    call_row(
        "memory.grow bomb",
        "grow",
        Behaviour::GrowMemory,
        cap,
        CallErrorKind::Memory,
    );
    call_row(
        "32 tables grown by a million funcrefs each",
        "tables",
        Behaviour::GrowTables { instances: 4 },
        cap,
        CallErrorKind::Memory,
    );
    call_row(
        "deep recursion",
        "recurse",
        Behaviour::Recurse,
        cap,
        CallErrorKind::Trap,
    );
    call_row(
        "trap in `set`",
        "trap",
        Behaviour::Trap,
        cap,
        CallErrorKind::Trap,
    );
    call_row(
        "invalid UTF-8 output",
        "utf8",
        Behaviour::ReturnBytes(vec![b'{', 0xff, 0xfe, b'}']),
        cap,
        CallErrorKind::InvalidResult,
    );
    call_row(
        "out-of-bounds output pointer and length",
        "oob",
        Behaviour::OutOfBounds,
        cap,
        CallErrorKind::InvalidResult,
    );
    call_row(
        "100 MB output (256 MiB cap)",
        "huge",
        Behaviour::HugeOutput(100_000_000),
        BIG_CAP,
        CallErrorKind::OutputTooLarge,
    );
    call_row(
        "output that is not JSON",
        "garbage",
        Behaviour::Return("this is not JSON".into()),
        cap,
        SetterErrorKind::Output,
    );
    call_row(
        "`statvfs` of a path not granted, the host's refusal returned as its error",
        "ungranted",
        Behaviour::Statvfs("/etc".into()),
        cap,
        CallErrorKind::Ungranted,
    );
    call_row(
        "`container-runtime` without `containerRuntime`, the refusal returned as its error",
        "runtime",
        Behaviour::ContainerRuntime,
        cap,
        CallErrorKind::Ungranted,
    );

    // Loading.
    for (kind, name, behaviour, want) in [
        (
            "infinite loop in `metadata`",
            "spin-meta",
            Behaviour::Spin,
            CallErrorKind::Timeout,
        ),
        (
            "sleep in a host call in `metadata`",
            "sleep-meta",
            Behaviour::Sleep,
            CallErrorKind::Timeout,
        ),
        (
            "trap in `metadata`",
            "trap-meta",
            Behaviour::Trap,
            CallErrorKind::Trap,
        ),
    ] {
        load_row(
            kind,
            &format!("{name}.wasm"),
            &hostile::component_with_metadata(name, Some(&behaviour), &Behaviour::Echo),
            |e| meta_kind(e, want),
        );
    }
    // The extra instances exist from instantiation on, so `metadata`
    // already meets the cap.
    load_row(
        "6 extra memories of 32 MiB in extra instances, every page touched",
        "memories.wasm",
        &hostile::component(
            "memories",
            &Behaviour::ManyMemories {
                instances: 6,
                mib: 32,
            },
        ),
        |e| meta_kind(e, CallErrorKind::Memory),
    );
    load_row(
        "`metadata` with a name that is not a DNS label",
        "badname.wasm",
        &hostile::component("Bad_Name", &Behaviour::Echo),
        |e| matches!(e, LoadError::BadMetadata(MetadataError::Name(n)) if n == "Bad_Name"),
    );
    load_row(
        "`metadata` returning a record whose name lies outside its memory",
        "garbled.wasm",
        &hostile::component_with_metadata(
            "garbled",
            Some(&Behaviour::OutOfBounds),
            &Behaviour::Echo,
        ),
        |e| meta_kind(e, CallErrorKind::InvalidResult),
    );
    load_row("wrong world", "world.wasm", &hostile::wrong_world(), |e| {
        matches!(e, LoadError::WrongWorld(_))
    });
    load_row(
        "WIT version 0.3.0 (incompatible)",
        "future.wasm",
        &hostile::wrong_version("future"),
        |e| matches!(e, LoadError::WrongWorld(_)),
    );
    load_row("core module", "core.wasm", &hostile::core_module(), |e| {
        matches!(e, LoadError::CoreModule)
    });
    load_row("zero-byte file", "empty.wasm", b"", |e| {
        matches!(e, LoadError::Empty)
    });
    let whole = std::fs::read(built::PROBE).unwrap();
    load_row(
        "truncated file (first half of a component)",
        "half.wasm",
        &whole[..whole.len() / 2],
        |e| matches!(e, LoadError::Invalid(_)),
    );
    load_row(
        "a file that declares another plugin's name (kernel-check)",
        "evil.wasm",
        &hostile::component("kernel-check", &Behaviour::Echo),
        |e| matches!(e, LoadError::NameMismatch { declared, .. } if declared == "kernel-check"),
    );
}

#[test]
fn a_file_claiming_another_name_never_takes_its_grants() {
    // "aaa.wasm" sorts before "pid-pressure.wasm" and declares itself
    // pid-pressure: it used to win the name and the real one was refused.
    let (tmp, dir) = plugin_dir(settings(|name| PluginSettings {
        paths: if name == "pid-pressure" {
            vec![PathGrant::same("/proc")]
        } else {
            Vec::new()
        },
        ..Default::default()
    }));
    drop_bytes(
        tmp.path(),
        "aaa.wasm",
        &hostile::component("pid-pressure", &Behaviour::Echo),
    );
    drop_plugin(
        tmp.path(),
        "pid-pressure.wasm",
        Path::new(built::PID_PRESSURE),
    );
    let events = dir.rescan();
    let set = dir.current();
    let p = set
        .setters()
        .iter()
        .find(|s| s.name() == "pid-pressure")
        .expect("pid-pressure loaded")
        .plugin();
    assert!(p.source().ends_with("pid-pressure.wasm"), "{events:#?}");
    assert_eq!(set.setters().len(), 1);
    assert!(events.iter().any(|e| matches!(e,
        ReloadEvent::Failed { file, error, .. } if file.ends_with("aaa.wasm") && error.contains("rename the file to pid-pressure.wasm"))));
}

#[test]
fn two_files_for_one_name_are_settled_before_anything_is_logged_as_loaded() {
    // kernel_check.wasm (cargo's spelling) and kernel-check.wasm both name
    // kernel-check: the exact file name wins, whatever the order, and the
    // other gets no "loaded" event at all.
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings::default()));
    drop_plugin(
        tmp.path(),
        "kernel_check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    let events = dir.rescan();
    let loaded: Vec<&PathBuf> = events
        .iter()
        .filter_map(|e| match e {
            ReloadEvent::Loaded { file, .. } => Some(file),
            _ => None,
        })
        .collect();
    assert_eq!(loaded.len(), 1, "{events:#?}");
    assert!(loaded[0].ends_with("kernel-check.wasm"), "{events:#?}");
    assert!(events.iter().any(|e| matches!(e,
        ReloadEvent::Failed { file, error, .. } if file.ends_with("kernel_check.wasm") && error.contains("already loaded from"))));
    assert_eq!(dir.current().setters().len(), 1);
}

/// Runs [`a_fifo_or_a_huge_file_child`] alone in a process of its own, so
/// that the peak RSS it measures is its own.
#[test]
fn a_fifo_or_a_huge_file_is_never_read_whole() {
    let out = run_alone("sandbox::a_fifo_or_a_huge_file_child");
    print_rows(&out);
}

#[test]
#[ignore = "run by a_fifo_or_a_huge_file_is_never_read_whole in a process of its own"]
fn a_fifo_or_a_huge_file_child() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("fifo.wasm");
    mkfifo(&fifo);
    let rt = runtime();
    let f = fifo.clone();
    let err = within(Duration::from_secs(10), "reading a FIFO", move || {
        Plugin::load_file(&rt, &f, &|_| PluginSettings::default()).unwrap_err()
    });
    assert!(
        matches!(
            err,
            LoadError::NotRegular {
                kind: "FIFO (named pipe)",
                ..
            }
        ),
        "{err:?}"
    );

    // A sparse 1 GiB file: refused from its size, without reading it.
    let big = tmp.path().join("big.wasm");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let base = reset_peak();
    let started = Instant::now();
    let err = Plugin::load_file(&runtime(), &big, &|_| PluginSettings::default()).unwrap_err();
    assert!(
        matches!(err, LoadError::TooLarge { size } if size == 1 << 30),
        "{err:?}"
    );
    let (elapsed, growth) = (started.elapsed(), peak().saturating_sub(base));
    assert!(elapsed < Duration::from_secs(2), "{elapsed:?}");
    assert!(growth < 64 << 20, "{growth}");
    print_row(Row {
        kind: "1 GiB (sparse) file in the plugin directory",
        outcome: format!("refused at load: {}", nodestatus_runtime::error_chain(&err)),
        kept: "the rescan goes on",
        elapsed,
        peak_growth: growth.max(1),
    });
    print_row(Row {
        kind: "FIFO in place of a plugin file",
        outcome: format!(
            "refused at load: {}",
            nodestatus_runtime::error_chain(&LoadError::NotRegular {
                path: "fifo.wasm".into(),
                kind: "FIFO (named pipe)"
            })
        ),
        kept: "the rescan goes on",
        elapsed: Duration::ZERO,
        peak_growth: 0,
    });
}

/// A guest blocked in the kernel, not in its own code nor in a WASI wait: a
/// read of a FIFO with no writer, inside a granted directory. Epochs cannot
/// stop it and no tokio timer runs on its thread, so the call's deadline is
/// kept by the thread that waits for it; the call fails as a timeout, the
/// others in the pass go on, and so does the next pass.
#[test]
fn a_read_that_never_completes_ends_at_the_deadline() {
    let granted = tempfile::tempdir().unwrap();
    let fifo = granted.path().join("fifo");
    mkfifo(&fifo);
    let (g, config) = (granted.path().to_owned(), json!({"read": [fifo]}));
    let (tmp, dir) = plugin_dir(settings(move |name| match name {
        "probe" => PluginSettings {
            paths: vec![PathGrant::same(g.clone())],
            config: config.clone(),
            timeout: DEADLINE,
            ..Default::default()
        },
        _ => PluginSettings::default(),
    }));
    drop_plugin(
        tmp.path(),
        "kernel-check.wasm",
        Path::new(built::KERNEL_CHECK),
    );
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    let probe_outcome = |report: &nodestatus_engine::pipeline::PassReport| {
        report
            .setters
            .iter()
            .find(|s| s.plugin == "probe")
            .expect("probe ran")
            .outcome
            .clone()
    };
    // The first pass waits for the deadline; the second does not call the
    // plugin, whose first call is still blocked.
    for round in 0..2 {
        let started = Instant::now();
        let d = dir.clone();
        let (out, report) = within(DEADLINE + MARGIN, "a FIFO read", move || one_pass(&d));
        let elapsed = started.elapsed();
        let e = probe_outcome(&report).expect_err("a read with no writer cannot succeed");
        assert_eq!(
            e.kind,
            SetterErrorKind::Call(CallErrorKind::Timeout),
            "pass {round}: {e}"
        );
        let said = ["blocked in the kernel", "still blocked"][round];
        assert!(e.message.contains(said), "pass {round}: {e}");
        good_plugin_kept(&out, &report);
        assert!(elapsed < DEADLINE + MARGIN, "pass {round}: {elapsed:?}");
    }
    // Open the write end and close it: the abandoned read sees end of file
    // and its thread ends. With a plain file in the FIFO's place, the plugin
    // reads it at its next call.
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo);
    }
    std::fs::remove_file(&fifo).unwrap();
    std::fs::write(&fifo, "x").unwrap();
    assert!(
        wait_for(10, || probe_outcome(&one_pass(&dir).1).is_ok()),
        "the plugin was not called again once its blocked call returned"
    );
}

/// With `reuseInstance`, one instance serves call after call: its memory
/// carries over (the count goes on), and an instance whose call failed is
/// not called again (the count starts over). Without it, every call gets a
/// fresh instance.
#[test]
fn a_reused_instance_serves_call_after_call_until_a_call_fails() {
    let mut node = nodes::small_node("n1");
    node["metadata"]["labels"]["example.com/count"] = json!("0");
    let key = "\"example.com/count\":\"";
    let at = serde_json::to_string(&node).unwrap().find(key).unwrap() + key.len();
    let counts = |reuse: bool, passes: usize| {
        let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
            reuse_instance: reuse,
            ..Default::default()
        }));
        let count = Behaviour::Count {
            at: at as u32,
            trap_at: 3,
        };
        drop_bytes(
            tmp.path(),
            "count.wasm",
            &hostile::component("count", &count),
        );
        dir.rescan();
        (0..passes)
            .map(|_| {
                let (out, report) = pass(
                    dir.runtime(),
                    &dir.current(),
                    &node,
                    &CallContext::default(),
                    Default::default(),
                );
                match &report.setters[0].outcome {
                    Ok(_) => out["metadata"]["labels"]["example.com/count"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                    Err(e) => e.kind.as_str().to_owned(),
                }
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(false, 3), ["1", "1", "1"]);
    assert_eq!(counts(true, 5), ["1", "2", "trap", "1", "2"]);
}

/// A reused instance keeps its preopened directories, and reads what they
/// hold at each call.
#[test]
fn a_reused_instance_reads_the_files_of_each_pass() {
    let granted = tempfile::tempdir().unwrap();
    let file = granted.path().join("f");
    let (g, config) = (granted.path().to_owned(), json!({"read": [file]}));
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: vec![PathGrant::same(g.clone())],
        config: config.clone(),
        reuse_instance: true,
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    dir.rescan();
    for (text, remake) in [
        ("12345", false),
        ("1234567", false),
        ("1", false),
        ("12", true),
    ] {
        if remake {
            // The granted directory removed and made again: another
            // directory at the same path.
            std::fs::remove_dir_all(granted.path()).unwrap();
            std::fs::create_dir(granted.path()).unwrap();
        }
        std::fs::write(&file, text).unwrap();
        let (out, report) = one_pass(&dir);
        assert!(report.setters[0].outcome.is_ok(), "{:?}", report.setters);
        assert_eq!(
            out["metadata"]["annotations"]["probe.nodestatus.test/read-0"],
            format!("ok:{}", text.len()),
            "remade: {remake}"
        );
    }
}

#[test]
fn a_planted_cache_entry_is_not_executed() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempfile::tempdir().unwrap();
    let rt = Runtime::new(Some(cache.path().join("c"))).unwrap();
    let probe = std::fs::read(built::PROBE).unwrap();
    let sha = nodestatus_runtime::sha256_hex(&probe);
    let pin = sha.clone();
    let load = |rt: &Runtime| {
        let tmp = tempfile::tempdir().unwrap();
        let pin = pin.clone();
        let dir = PluginDir::new(
            tmp.path(),
            rt.clone(),
            settings(move |_| PluginSettings {
                sha256: Some(pin.clone()),
                ..Default::default()
            }),
        );
        drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
        dir.rescan();
        let (out, report) = one_pass(&dir);
        (out, report)
    };
    let (out, _) = load(&rt);
    assert_eq!(
        out["metadata"]["labels"]["probe.nodestatus.test/version"],
        "1"
    );
    let entry = rt.cache().expect("cache enabled").entry_path(&sha);
    assert!(entry.is_file());

    // Native code of another component, which labels the node `evil`.
    let evil = hostile::component(
        "probe",
        &Behaviour::Return(
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1","labels":{"evil":"yes"}},"spec":{},"status":{}}"#.into(),
        ),
    );
    let evil_code = rt.engine().precompile_component(&evil).unwrap();
    // 1. The raw code, as an older cache wrote it.
    // 2. An entry compiled from the evil component, renamed under probe's key.
    let evil_rt_dir = tempfile::tempdir().unwrap();
    let evil_rt = Runtime::new(Some(evil_rt_dir.path().join("c"))).unwrap();
    let evil_sha = nodestatus_runtime::sha256_hex(&evil);
    {
        let tmp = tempfile::tempdir().unwrap();
        drop_bytes(tmp.path(), "probe.wasm", &evil);
        let dir = PluginDir::new(
            tmp.path(),
            evil_rt.clone(),
            settings(|_| PluginSettings::default()),
        );
        dir.rescan();
    }
    let renamed = std::fs::read(evil_rt.cache().unwrap().entry_path(&evil_sha)).unwrap();
    for (what, planted, mode) in [
        ("raw native code", evil_code.clone(), 0o600),
        ("another component's entry", renamed, 0o600),
        (
            "a group-readable entry",
            std::fs::read(&entry).unwrap(),
            0o640,
        ),
    ] {
        std::fs::write(&entry, &planted).unwrap();
        std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(mode)).unwrap();
        let (out, report) = load(&rt);
        assert!(
            report.setters.iter().all(|s| s.outcome.is_ok()),
            "{what}: {:?}",
            report.setters
        );
        assert_eq!(
            out["metadata"]["labels"]["probe.nodestatus.test/version"], "1",
            "{what}: the planted code ran: {out}"
        );
        assert!(out["metadata"]["labels"].get("evil").is_none(), "{what}");
    }
    print_row(Row {
        kind: "planted precompile cache entry for a sha256-pinned plugin",
        outcome: "refused (no header / bound to another component / mode not 0600), removed, compiled afresh".into(),
        kept: "the real plugin ran",
        elapsed: Duration::ZERO,
        peak_growth: 0,
    });
}

#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("c");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let rt = Runtime::new(Some(dir.clone())).unwrap();
    assert!(rt.cache().is_none(), "a world-writable cache was used");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let rt = Runtime::new(Some(dir)).unwrap();
    assert!(rt.cache().is_some());
}

/// Bytes of `.cwasm` entries in `dir`.
fn cache_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "cwasm"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

#[test]
fn the_precompile_cache_stays_under_its_cap_with_50_rebuilt_versions() {
    use std::sync::atomic::Ordering::Relaxed;
    let tmp = tempfile::tempdir().unwrap();
    let cache_dir = tmp.path().join("c");
    std::fs::create_dir(&cache_dir).unwrap();
    std::fs::set_permissions(
        &cache_dir,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .unwrap();
    // Entries of another engine build, which no load here can use: one
    // unused for two days (removed), one used now (kept for that build).
    let other_build =
        |sha: &str| cache_dir.join(format!("{}-0000000000000000.cwasm", sha.repeat(32)));
    let stale = other_build("ab");
    std::fs::write(&stale, vec![0u8; 4096]).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(2 * 24 * 3600))
        .unwrap();
    let recent = other_build("cd");
    std::fs::write(&recent, vec![0u8; 4096]).unwrap();
    let cap: u64 = 256 << 10;
    let options = |dir: &Path| RuntimeOptions {
        cache_dir: Some(dir.to_owned()),
        cache_max_bytes: cap,
        ..RuntimeOptions::default()
    };
    let rt = Runtime::with_options(options(&cache_dir)).unwrap();
    assert!(!stale.exists(), "the other build's unused entry was kept");
    assert!(
        recent.exists(),
        "the other build's recent entry was removed"
    );
    let cache = rt.cache().unwrap();
    assert_eq!(cache.stats().stale_removed.load(Relaxed), 1);
    let plugins = tempfile::tempdir().unwrap();
    let dir = PluginDir::new(
        plugins.path(),
        rt.clone(),
        settings(|_| PluginSettings::default()),
    );
    // 50 rebuilds of one plugin, each a new component (as an author's
    // edit-build-drop loop makes them).
    let mut entry_sizes = Vec::new();
    for version in 0..50 {
        let bytes = hostile::component(
            "rebuilt",
            &Behaviour::Return(format!("{{\"v\":{version}}}")),
        );
        drop_bytes(plugins.path(), "rebuilt.wasm", &bytes);
        dir.rescan();
        assert!(dir.current().contains("rebuilt"));
        let newest = cache.entry_path(&nodestatus_runtime::sha256_hex(&bytes));
        entry_sizes.push(std::fs::metadata(&newest).expect("the newest entry").len());
        assert!(
            cache_bytes(&cache_dir) <= cap,
            "version {version}: {} bytes over the {cap}-byte cap",
            cache_bytes(&cache_dir)
        );
    }
    let per_entry = entry_sizes.iter().sum::<u64>() / entry_sizes.len() as u64;
    let kept = (cap / per_entry) as usize;
    assert!(
        kept < 50,
        "the cap must force evictions: {per_entry} bytes per entry"
    );
    let evicted = cache.stats().evictions.load(Relaxed);
    assert!(
        evicted >= (50 - kept - 1) as u64,
        "{evicted} evictions, {kept} entries fit"
    );
    assert_eq!(cache.stats().bytes.load(Relaxed), cache_bytes(&cache_dir));
    println!(
        "CACHE| 50 rebuilt versions of {per_entry} bytes each under a {cap}-byte cap: {} bytes kept in {} entries, {evicted} evicted",
        cache_bytes(&cache_dir),
        std::fs::read_dir(&cache_dir).unwrap().count()
    );
    // A reopened cache (a restart) finds the newest version: a hit.
    let rt2 = Runtime::with_options(options(&cache_dir)).unwrap();
    let hits = rt2.cache().unwrap().stats().hits.load(Relaxed);
    Plugin::load_file(&rt2, &plugins.path().join("rebuilt.wasm"), &|_| {
        PluginSettings::default()
    })
    .unwrap();
    assert_eq!(rt2.cache().unwrap().stats().hits.load(Relaxed), hits + 1);
}

/// The probe's annotation `k` (`read-0`, `statvfs-1`...).
fn probe_value(a: &Value, k: &str) -> String {
    a[format!("probe.nodestatus.test/{k}")]
        .as_str()
        .unwrap_or_else(|| panic!("no {k}: {a}"))
        .to_owned()
}

/// The probe with `grant` served at `/tmp/<name>` and `config`.
fn probe_annotations(grants: Vec<PathGrant>, config: Value, env: Vec<String>) -> Value {
    let (tmp, dir) = plugin_dir(settings(move |_| PluginSettings {
        paths: grants.clone(),
        env: env.clone(),
        config: config.clone(),
        ..Default::default()
    }));
    drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
    let events = dir.rescan();
    assert_eq!(dir.current().setters().len(), 1, "{events:#?}");
    pass_ok(&dir, &nodes::small_node("n1"))["metadata"]["annotations"].clone()
}

#[test]
fn a_granted_proc_is_a_filtered_view() {
    // The operator serves the host's /proc at /tmp/<x> (inside what the
    // probe asks for), as a container serves it at /host/proc.
    let seen = PathBuf::from(format!("/tmp/nodestatus-proc-{}", std::process::id()));
    let s = seen.display();
    let a = probe_annotations(
        vec![PathGrant {
            path: seen.clone(),
            from: "/proc".into(),
        }],
        json!({"read": [
            format!("{s}/meminfo"),
            format!("{s}/self/environ"),
            format!("{s}/self/status"),
            format!("{s}/thread-self/environ"),
            format!("{s}/1/environ"),
            format!("{s}/sys/kernel/pid_max"),
            format!("{s}/loadavg"),
            format!("{s}/mounts"),
        ]}),
        Vec::new(),
    );
    let r = |i: usize| probe_value(&a, &format!("read-{i}"));
    assert!(r(0).starts_with("ok:"), "meminfo: {a}");
    for i in [1, 2, 3, 4, 7] {
        assert!(r(i).starts_with("err:"), "read-{i} was allowed: {a}");
    }
    assert!(r(5).starts_with("ok:"), "sys/kernel/pid_max: {a}");
    assert!(r(6).starts_with("ok:"), "loadavg: {a}");
    print_row(Row {
        kind: "read /proc/self/environ, /proc/1/environ, /proc/thread-self with /proc granted",
        outcome: format!(
            "not found (`{}`); /proc/meminfo, /proc/loadavg, /proc/sys/kernel/pid_max read",
            r(1)
        ),
        kept: "the plugin runs with the system-wide files",
        elapsed: Duration::ZERO,
        peak_growth: 0,
    });
}

#[test]
fn a_grant_of_a_process_directory_is_refused() {
    for from in ["/proc/self", "/proc/1", "/proc/thread-self"] {
        let grant = move |_: &str| PluginSettings {
            paths: vec![PathGrant {
                path: "/tmp/x".into(),
                from: from.into(),
            }],
            ..Default::default()
        };
        let (tmp, dir) = plugin_dir(settings(grant));
        drop_plugin(tmp.path(), "probe.wasm", Path::new(built::PROBE));
        let events = dir.rescan();
        assert!(dir.current().setters().is_empty(), "{from}: {events:#?}");
        let err =
            Plugin::load_file(&runtime(), &tmp.path().join("probe.wasm"), &grant).unwrap_err();
        assert!(
            matches!(err, LoadError::GrantRefused { .. }),
            "{from}: {err:?}"
        );
    }
}

#[test]
fn a_grant_of_root_serves_statvfs_but_not_proc_self() {
    // Root is granted (for statvfs, as the default config does for
    // machine-info), served at /tmp/root: it holds /proc, so it is not
    // opened for reading.
    let a = probe_annotations(
        vec![PathGrant {
            path: "/tmp/root".into(),
            from: "/".into(),
        }],
        json!({
            "read": ["/tmp/root/proc/self/environ", "/tmp/root/etc/hostname"],
            "statvfs": ["/tmp/root"],
        }),
        Vec::new(),
    );
    let v = |k: &str| probe_value(&a, k);
    assert!(v("read-0").starts_with("err:"), "{a}");
    assert!(v("read-1").starts_with("err:"), "{a}");
    assert_eq!(v("statvfs-0"), "ok:true", "{a}");
}

#[test]
fn escapes_from_a_grant_fail_and_statvfs_is_no_oracle() {
    let granted = tempfile::tempdir_in("/tmp").unwrap();
    let g = granted.path();
    std::fs::write(g.join("visible"), "12345").unwrap();
    std::os::unix::fs::symlink("/etc/hostname", g.join("link-out")).unwrap();
    std::os::unix::fs::symlink("/etc", g.join("dir-out")).unwrap();
    std::os::unix::fs::symlink("/nonexistent-nodestatus", g.join("dir-nowhere")).unwrap();
    std::fs::create_dir(g.join("sub")).unwrap();
    std::os::unix::fs::symlink("sub", g.join("dir-in")).unwrap();
    let gs = g.display().to_string();
    let a = probe_annotations(
        vec![PathGrant::same(g)],
        json!({
            "read": [
                format!("{gs}/visible"),
                "/etc/hostname",
                format!("{gs}/../../etc/hostname"),
                format!("{gs}/link-out"),
            ],
            "env": ["PATH"],
            "statvfs": [
                gs.clone(),
                format!("{gs}/dir-in"),
                format!("{gs}/dir-out"),
                format!("{gs}/dir-nowhere"),
                format!("{gs}/../../etc"),
            ],
        }),
        Vec::new(),
    );
    let v = |k: &str| probe_value(&a, k);
    assert_eq!(v("read-0"), "ok:5");
    for i in 1..4 {
        assert!(v(&format!("read-{i}")).starts_with("err:"), "read-{i}: {a}");
    }
    assert_eq!(v("env-0"), "err:unset");
    assert_eq!(v("statvfs-0"), "ok:true");
    assert_eq!(v("statvfs-1"), "ok:true");
    // A symlink out to a path that exists and one to a path that does not
    // give the same answer: no existence oracle.
    assert!(v("statvfs-2").starts_with("err:"), "{a}");
    assert_eq!(
        v("statvfs-2").replace("dir-out", "X"),
        v("statvfs-3").replace("dir-nowhere", "X"),
        "{a}"
    );
    assert!(v("statvfs-4").contains("not inside a path granted"), "{a}");
    print_row(Row {
        kind: "ungranted path, `..` escape, symlink out, ungranted env var, statvfs through a symlink out",
        outcome: format!(
            "each refused in the guest (`{}`, `{}`)",
            v("read-3"),
            v("statvfs-2")
        ),
        kept: "the plugin's granted reads work",
        elapsed: Duration::ZERO,
        peak_growth: 0,
    });
}

/// A `MakeWriter` into a shared buffer.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_log_and_event_flood_is_quoted_and_limited_per_window() {
    use nodestatus_runtime::{EVENTS_PER_WINDOW, LOG_LINES_PER_WINDOW};
    let forged = "ok\n2026-11-23T11:00:00.000000Z  INFO nodestatus_engine::plugin_dir: plugin loaded plugin=\"pid-pressure\"\u{1b}[2J";
    let bytes = hostile::component(
        "flood",
        &Behaviour::Flood {
            lines: 300,
            events: 30,
            text: forged.into(),
        },
    );
    let (_tmp, dir) = dir_with(
        "flood.wasm",
        &bytes,
        nodestatus_runtime::DEFAULT_MEMORY_LIMIT,
    );
    dir.rescan();
    let buf = Captured::default();
    let w = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || w.clone())
        .with_ansi(false)
        .finish();
    let mut events = 0;
    let started = Instant::now();
    tracing::subscriber::with_default(subscriber, || {
        for _ in 0..3 {
            let (out, report) = one_pass(&dir);
            good_plugin_kept(&out, &report);
            events += report.events.iter().filter(|(p, _)| p == "flood").count();
            for (_, e) in &report.events {
                assert!(!e.message.chars().any(char::is_control), "{e:?}");
            }
        }
    });
    let elapsed = started.elapsed();
    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let kept = text
        .lines()
        .filter(|l| l.contains("plugin loaded plugin="))
        .count();
    assert!(
        !text.lines().any(|l| l.starts_with("2026-11-23T11:00:00")),
        "a guest forged a host log line:\n{text}"
    );
    assert!(!text.contains('\u{1b}'), "a guest wrote an escape sequence");
    assert_eq!(
        kept, LOG_LINES_PER_WINDOW as usize,
        "lines kept over 3 calls"
    );
    assert_eq!(
        events, EVENTS_PER_WINDOW as usize,
        "events kept over 3 calls"
    );
    let counts = dir.runtime().guest_output().counts("flood");
    assert_eq!(counts.lines_dropped, 900 - LOG_LINES_PER_WINDOW as u64);
    print_row(Row {
        kind: "flood: 300 forged log lines (newline, fake host prefix, ANSI) and 30 events per call, 3 calls",
        outcome: format!(
            "lines quoted on one line each; {kept} lines and {events} events kept in the window, {} lines dropped",
            counts.lines_dropped
        ),
        kept: "kernel-check's fields, every pass",
        elapsed: elapsed / 3,
        peak_growth: 0,
    });
}

#[test]
fn a_load_in_progress_does_not_block_the_directory_status() {
    // A plugin whose `metadata` blocks in a host call: while the rescan
    // waits for its deadline, `status` (what /status and `plugin list`
    // read) still answers at once.
    let (tmp, dir) = plugin_dir(settings(|_| PluginSettings {
        timeout: Duration::from_secs(2),
        ..Default::default()
    }));
    drop_bytes(
        tmp.path(),
        "slow.wasm",
        &hostile::component_with_metadata("slow", Some(&Behaviour::Sleep), &Behaviour::Echo),
    );
    let d = dir.clone();
    let rescan = std::thread::spawn(move || d.rescan());
    std::thread::sleep(Duration::from_millis(300));
    let d = dir.clone();
    let status = within(Duration::from_secs(1), "status during a load", move || {
        d.status()
    });
    // It shows the file being loaded, and nothing running from it yet.
    assert!(
        matches!(&status[..], [s] if s.file.ends_with("slow.wasm") && s.plugin.is_none() && s.loading_seconds.is_some()),
        "{status:?}"
    );
    let events = within(Duration::from_secs(10), "the rescan", move || {
        rescan.join().unwrap()
    });
    assert!(
        matches!(&events[..], [ReloadEvent::Failed { .. }]),
        "{events:#?}"
    );
}

/// A plugin directory compiled by the engine's binary in a child process
/// under `limits`, holding kernel-check and `file` with `bytes`; no cache, so
/// every load compiles.
fn child_compiled_dir_with(
    limits: CompileLimits,
    file: &str,
    bytes: &[u8],
) -> (tempfile::TempDir, Arc<PluginDir>) {
    let runtime = Runtime::with_options(RuntimeOptions {
        compiler: Compiler::Process {
            exe: PathBuf::from(env!("CARGO_BIN_EXE_nodestatus")),
            limits,
        },
        ..RuntimeOptions::default()
    })
    .unwrap();
    dir_on(runtime, file, bytes, DEFAULT_MEMORY_LIMIT)
}

/// About 1 MB of WebAssembly (100,000 additions over 10,000 live locals)
/// that Cranelift compiles for minutes and with hundreds of MiB: compiled in
/// the engine's process, it held the rescan (and the host's memory) for as
/// long as Cranelift took. It implements the world, so that it passes the
/// check before the compile.
fn the_compile_bomb() -> Vec<u8> {
    hostile::slow_to_compile("bomb", 100_000, 10_000)
}

/// Whether `e` is `first`, or the memo's answer for a file that `first`
/// refused before: the direct load after the rescan is not compiled again.
fn refused_now_or_before(e: &LoadError, first: impl Fn(&LoadError) -> bool, says: &str) -> bool {
    match e {
        LoadError::RefusedBefore { error, .. } => error.contains(says),
        e => first(e),
    }
}

#[test]
fn a_compile_bomb_is_stopped_at_the_compile_deadline() {
    let limits = CompileLimits {
        timeout: Duration::from_secs(2),
        memory: DEFAULT_COMPILE_MEMORY_LIMIT,
    };
    let (_tmp, dir) = child_compiled_dir_with(limits, "bomb.wasm", &the_compile_bomb());
    refused_at_load(
        "compile bomb (1 MB, minutes of Cranelift), 2 s compileTimeout",
        dir,
        "bomb.wasm",
        limits.timeout + MARGIN,
        |e| {
            refused_now_or_before(
                e,
                |e| matches!(e, LoadError::CompileBound(compile::Error::TimedOut { limit }) if *limit == limits.timeout),
                "took longer than the 2s limit",
            )
        },
        "kernel-check compiled (in the same kind of child), loaded and ran",
    );
}

/// The compiler children of this process (`nodestatus compile-component`).
fn compile_children() -> Vec<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // pid (comm) state ppid ...
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            ppid == Some(me) && String::from_utf8_lossy(&cmdline).contains(compile::SUBCOMMAND)
        })
        .collect()
}

#[test]
fn the_out_of_memory_killer_takes_the_compile_child_before_the_engine() {
    let limits = CompileLimits {
        timeout: Duration::from_secs(60),
        memory: DEFAULT_COMPILE_MEMORY_LIMIT,
    };
    let bomb = the_compile_bomb();
    let compiling = std::thread::spawn(move || {
        compile::compile_in_child(
            Path::new(env!("CARGO_BIN_EXE_nodestatus")),
            limits,
            nodestatus_runtime::Tier::Optimized,
            &bomb,
        )
    });
    let mut child = None;
    assert!(
        wait_for(30, || {
            child = compile_children().into_iter().next();
            child.is_some()
        }),
        "no compiler child seen"
    );
    let child = child.unwrap();
    let score = std::fs::read_to_string(format!("/proc/{child}/oom_score_adj")).unwrap();
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    // SAFETY: a child of this test, seen just now.
    unsafe { libc::kill(child as i32, libc::SIGKILL) };
    assert!(compiling.join().unwrap().is_err());
    assert_eq!(score.trim(), "1000", "the child's oom_score_adj");
    assert_ne!(own.trim(), "1000", "the engine's own is left alone");
}

#[test]
fn a_compile_bomb_is_stopped_at_the_compile_memory_limit() {
    let limits = CompileLimits {
        timeout: Duration::from_secs(300),
        memory: 128 << 20,
    };
    let (_tmp, dir) = child_compiled_dir_with(limits, "bomb.wasm", &the_compile_bomb());
    refused_at_load(
        "compile bomb, 128 MiB compileMemoryLimit",
        dir,
        "bomb.wasm",
        Duration::from_secs(60),
        |e| {
            refused_now_or_before(
                e,
                |e| matches!(e, LoadError::CompileBound(compile::Error::OutOfMemory { limit }) if *limit == limits.memory),
                "needed more than the 134217728-byte limit",
            )
        },
        "kernel-check compiled (in the same kind of child), loaded and ran",
    );
}

#[test]
fn an_invalid_component_is_refused_before_the_child_compiles_it() {
    let whole = std::fs::read(built::PROBE).unwrap();
    let (_tmp, dir) = child_compiled_dir_with(
        CompileLimits::default(),
        "half.wasm",
        &whole[..whole.len() / 2],
    );
    refused_at_load(
        "truncated file, checked before the child",
        dir.clone(),
        "half.wasm",
        Duration::from_secs(60),
        |e| matches!(e, LoadError::Invalid(_)),
        "kernel-check compiled (in the same kind of child), loaded and ran",
    );
    // Only kernel-check reached a compiler (if the cache did not hold it).
    let stats = dir.runtime().load_stats();
    use std::sync::atomic::Ordering;
    assert_eq!(
        stats.compiles.load(Ordering::Relaxed),
        1,
        "kernel-check alone"
    );
    assert_eq!(
        stats.prechecked.load(Ordering::Relaxed),
        2,
        "the rescan and the direct load"
    );
}

#[test]
fn limit_errors_name_the_limit_and_the_setting_to_change() {
    for (name, behaviour, setting, limit) in [
        ("spin", Behaviour::Spin, "plugins.spin.timeout", "500ms"),
        ("sleep", Behaviour::Sleep, "plugins.sleep.timeout", "500ms"),
        (
            "grow",
            Behaviour::GrowMemory,
            "plugins.grow.memoryLimit",
            "67108864 bytes",
        ),
    ] {
        let (_tmp, dir) = dir_with(
            &format!("{name}.wasm"),
            &hostile::component(name, &behaviour),
            DEFAULT_MEMORY_LIMIT,
        );
        dir.rescan();
        let (_, report) = one_pass(&dir);
        let err = report
            .failures()
            .find(|(p, _)| *p == name)
            .map(|(_, e)| e.message.clone())
            .unwrap_or_else(|| panic!("{name} did not fail"));
        assert!(
            err.contains(setting) && err.contains(&format!("the limit is {limit}")),
            "{name}: {err}"
        );
    }
}
