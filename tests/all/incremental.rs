//! Incremental passes (`incrementalPasses`, issue 44) with the default
//! setters, built as components, over a simulated machine's files: a
//! setter whose inputs did not change is not called, and a changed input
//! (a file, the node, a host answer) is in the node in the same pass as
//! with every setter called.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nodestatus_engine::pipeline::{self, Incremental, Memo, PassReport};
use nodestatus_runtime::CallContext;
use nodestatus_runtime::facts::Facts;
use nodestatus_tests::{DEFAULT_PLUGINS, drop_plugin};
use serde_json::{Value, json};

use crate::common;

/// The default set with the default config, over machine 0 of a fleet of
/// two (their files beneath `dir`).
struct Setup {
    _plugins: tempfile::TempDir,
    dir: Arc<nodestatus_engine::plugin_dir::PluginDir>,
    fleet: nodestatus_fleet::Fleet,
}

fn setup(dir: &Path) -> Setup {
    let plugins = tempfile::tempdir().unwrap();
    for (name, path) in DEFAULT_PLUGINS {
        drop_plugin(plugins.path(), name, Path::new(path));
    }
    let (_, plugin_dir) =
        common::configured(nodestatus_engine::config::DEFAULT_CONFIG, plugins.path());
    let fleet = nodestatus_fleet::Fleet::create(
        nodestatus_fleet::Template {
            nodes: 2,
            name_prefix: "incremental".into(),
            seed: 7,
            flapping: 0.0,
            flap_period: Duration::from_secs(20),
            flap_from: Duration::ZERO,
        },
        dir,
    )
    .unwrap();
    Setup {
        _plugins: plugins,
        dir: plugin_dir,
        fleet,
    }
}

impl Setup {
    /// One pass over machine `m`'s files as the agent runs it: this pass's
    /// facts, `node` in, the node out.
    fn pass(&self, m: usize, node: &Value, memo: &mut Memo) -> (Value, PassReport) {
        let ctx = CallContext {
            facts: Arc::new(Facts::new(self.fleet.machines[m].facts())),
            ..CallContext::default()
        };
        let (out, report) = pipeline::pass_with(
            self.dir.runtime(),
            &self.dir.current(),
            node,
            &ctx,
            Default::default(),
            None,
            Some(memo),
        );
        for s in &report.setters {
            assert!(s.outcome.is_ok(), "{}: {:?}", s.plugin, s.outcome);
        }
        assert_eq!(report.mismatches, 0, "a part that would have stood differs");
        (out, report)
    }
}

/// The setters of a pass that were called (not skipped).
fn called(report: &PassReport) -> Vec<&str> {
    report
        .setters
        .iter()
        .filter(|s| !s.skipped)
        .map(|s| s.plugin.as_str())
        .collect()
}

fn node(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
}

fn memory_pressure(node: &Value) -> String {
    common::condition_of(node, "MemoryPressure").unwrap()["status"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The setters that ask `statvfs` of the machine's root: its free space
/// is an input, and moves with any write on that file system.
const STATVFS_READERS: [&str; 2] = ["machine-info", "disk-pressure"];

/// A directory for the machines' files on a file system nothing else
/// writes to (`/dev/shm`, where there is one), so that their `statvfs`
/// holds from pass to pass; and whether it is one.
fn quiet_dir() -> (tempfile::TempDir, bool) {
    let shm = Path::new("/dev/shm");
    match tempfile::tempdir_in(shm) {
        Ok(d) => (d, true),
        Err(_) => (tempfile::tempdir().unwrap(), false),
    }
}

/// Asserts that a settled pass called no setter: on a shared file system
/// (no `/dev/shm`), the statvfs readers may be called, when its free
/// space moved between the passes.
fn assert_settled(report: &PassReport, quiet: bool) {
    let called = called(report);
    let allowed: &[&str] = if quiet { &[] } else { &STATVFS_READERS };
    assert!(
        called.iter().all(|c| allowed.contains(c)),
        "a settled pass called {called:?}: {report:#?}"
    );
}

#[test]
fn an_unchanged_setter_is_not_called_and_a_changed_file_is_in_the_same_pass() {
    let (tmp, quiet) = quiet_dir();
    let s = setup(tmp.path());
    let m = &s.fleet.machines[0];
    let mut memo = Memo::new(Incremental::On, Duration::from_secs(300));

    let (one, first) = s.pass(0, &node(&m.name), &mut memo);
    let all: Vec<&str> = first.setters.iter().map(|r| r.plugin.as_str()).collect();
    assert_eq!(called(&first), all, "a first pass calls every setter");

    // The second pass gives each setter another node than the first did
    // (the first's setters wrote theirs in turn): all are called again.
    // From the third on, nothing changed, and none is called.
    let (one, _) = s.pass(0, &one, &mut memo);
    let (two, second) = s.pass(0, &one, &mut memo);
    assert_settled(&second, quiet);
    assert_eq!(
        common::without_times(two.clone()),
        common::without_times(one)
    );

    // The machine's memory pressure: its /proc/meminfo changes. The
    // setters that read it are called, and the condition is in this pass;
    // so are the setters after memory-pressure, whose input (the node)
    // now holds MemoryPressure=True. Those before it, untouched, are not.
    m.write(true).unwrap();
    let (three, third) = s.pass(0, &two, &mut memo);
    let after: Vec<&str> = all
        .iter()
        .skip_while(|p| **p != "memory-pressure")
        .copied()
        .collect();
    let mut expected = vec!["machine-info"];
    expected.extend(&after);
    assert_eq!(called(&third), expected, "{third:#?}");
    assert_eq!(memory_pressure(&three), "True");

    // The node is every setter's input: the next pass calls those that saw
    // it before the flip (and those after, whose node now holds the pass's
    // ownership record), with the same answers; then none.
    let (four, _) = s.pass(0, &three, &mut memo);
    assert_eq!(
        common::without_times(four.clone()),
        common::without_times(three)
    );
    let (four, fifth) = s.pass(0, &four, &mut memo);
    assert_settled(&fifth, quiet);

    // And back.
    m.write(false).unwrap();
    let (six, _) = s.pass(0, &four, &mut memo);
    assert_eq!(memory_pressure(&six), "False");
    assert!(memo.stats().skipped > 0 && memo.stats().mismatches == 0);
}

#[test]
fn one_nodes_result_never_stands_for_anothers() {
    // Two machines of the fleet, one memo each (as each agent has): the
    // second machine's first pass calls every setter, and its node holds
    // its own machine's identity and memory.
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let (a, b) = (&s.fleet.machines[0], &s.fleet.machines[1]);
    let mut memo_a = Memo::new(Incremental::On, Duration::from_secs(300));
    let mut memo_b = Memo::new(Incremental::On, Duration::from_secs(300));
    let (na, _) = s.pass(0, &node(&a.name), &mut memo_a);
    let (na, _) = s.pass(0, &na, &mut memo_a);
    let (nb, rb) = s.pass(1, &node(&b.name), &mut memo_b);
    assert!(rb.setters.iter().all(|r| !r.skipped));
    let id = |n: &Value| n["status"]["nodeInfo"]["machineID"].clone();
    assert_ne!(id(&na), id(&nb));

    // One memo for both (which no agent does): the node differs, so no
    // result stands for the other machine's, and each node is its own.
    let mut shared = Memo::new(Incremental::On, Duration::from_secs(300));
    let (sa, _) = s.pass(0, &node(&a.name), &mut shared);
    let (sb, rb) = s.pass(1, &node(&b.name), &mut shared);
    assert_eq!(rb.setters.iter().filter(|r| r.skipped).count(), 0);
    assert_eq!(id(&sa), id(&na));
    assert_eq!(id(&sb), id(&nb));
    let addresses = |n: &Value| n["status"]["addresses"].clone();
    assert_ne!(addresses(&sa), addresses(&sb));
}

#[test]
fn the_check_mode_calls_every_setter_and_finds_no_difference() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let m = &s.fleet.machines[0];
    let mut memo = Memo::new(Incremental::Check, Duration::from_secs(300));
    let mut n = node(&m.name);
    for pressure in [false, false, true, true, false, false] {
        m.write(pressure).unwrap();
        let (out, report) = s.pass(0, &n, &mut memo);
        assert!(report.setters.iter().all(|r| !r.skipped));
        n = out;
    }
    assert_eq!(memo.stats().skipped, 0);
    assert_eq!(memo.stats().mismatches, 0);
}

#[test]
fn off_calls_every_setter_every_pass_as_the_kubelet_does() {
    let tmp = tempfile::tempdir().unwrap();
    let s = setup(tmp.path());
    let mut memo = Memo::new(Incremental::Off, Duration::from_secs(300));
    let (one, _) = s.pass(0, &node(&s.fleet.machines[0].name), &mut memo);
    let (_, second) = s.pass(0, &one, &mut memo);
    assert!(second.setters.iter().all(|r| !r.skipped));
    // And a report period of zero calls every setter too.
    let mut memo = Memo::new(Incremental::On, Duration::ZERO);
    let (one, _) = s.pass(0, &node(&s.fleet.machines[0].name), &mut memo);
    let (_, second) = s.pass(0, &one, &mut memo);
    assert!(second.setters.iter().all(|r| !r.skipped));
}
