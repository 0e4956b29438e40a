//! The directory's rules, each checked on the pure step in virtual time: a
//! [`Sim`] holds a [`DirState`] over fake setters, a directory of fake
//! files and a clock a test moves; it feeds listings, reads and load
//! results and reads the actions. No component, no thread, no sleep: an
//! hour of retries takes microseconds.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::*;
use crate::config::PluginConfig;
use crate::pipeline::Withheld;
use crate::plugin_dir::ReloadEvent;

/// A fake setter: its plugin's name and version.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fake(String, String);

/// A fake Cranelift compile: the name of its plugin.
type Compile = &'static str;

type Actions = Vec<DirAction<Fake, Compile>>;

const DIR: &str = "/plugins";

fn path(name: &str) -> PathBuf {
    Path::new(DIR).join(name)
}

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

/// The default settings for every plugin.
fn defaults() -> SettingsFn {
    Arc::new(|_| PluginConfig::default())
}

/// The defaults, but `order` for `name`.
fn ordered(name: &'static str, order: i32) -> SettingsFn {
    Arc::new(move |n| PluginConfig {
        order: (n == name).then_some(order),
        ..PluginConfig::default()
    })
}

/// The defaults, but `name` disabled.
fn disabled(name: &'static str) -> SettingsFn {
    Arc::new(move |n| PluginConfig {
        enabled: n != name,
        ..PluginConfig::default()
    })
}

/// A directory state, its files and a clock.
struct Sim {
    state: DirState<Fake, Compile>,
    now: Instant,
    /// Each file: its stamp and content (its "sha256").
    disk: BTreeMap<PathBuf, (Stamp, String)>,
    next_id: RescanId,
    next_inode: u64,
}

impl Sim {
    fn new() -> Self {
        Self::with(defaults())
    }

    fn with(settings: SettingsFn) -> Self {
        Self {
            state: DirState::new(settings),
            now: Instant::now(),
            disk: BTreeMap::new(),
            next_id: 0,
            next_inode: 0,
        }
    }

    fn step(&mut self, input: DirInput<Fake, Compile>) -> Actions {
        self.state.step(input, self.now)
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
    }

    /// Writes `content` to `file` (renamed into place: a new inode).
    fn write(&mut self, file: &str, content: &str) {
        self.next_inode += 1;
        let stamp = Stamp {
            len: content.len() as u64,
            modified: None,
            inode: self.next_inode,
        };
        self.disk.insert(path(file), (stamp, content.to_owned()));
    }

    fn remove(&mut self, file: &str) {
        self.disk.remove(&path(file));
    }

    /// A rescan, through its listing and its reads.
    fn rescan(&mut self, wait: bool) -> Actions {
        self.next_id += 1;
        let id = self.next_id;
        let mut out = Vec::new();
        let mut inputs = vec![DirInput::Rescan { id, wait }];
        while let Some(input) = inputs.pop() {
            for a in self.step(input) {
                match a {
                    DirAction::List { id, extra_files } => {
                        let listing = self
                            .disk
                            .iter()
                            .filter(|(p, _)| p.starts_with(DIR) || extra_files.contains(p))
                            .map(|(p, (stamp, _))| (p.clone(), stamp.clone()))
                            .collect();
                        inputs.push(DirInput::Listed {
                            id,
                            listing: Ok(listing),
                        });
                    }
                    DirAction::Read { id, files } => {
                        let files = files
                            .into_iter()
                            .map(|(p, stamp)| {
                                let read = match self.disk.get(&p) {
                                    Some((_, c)) => ReadResult::Content {
                                        sha256: c.clone(),
                                        bytes: c.clone().into_bytes(),
                                        cached: c.contains("cached"),
                                    },
                                    None => ReadResult::Vanished,
                                };
                                (p, stamp, read)
                            })
                            .collect();
                        inputs.push(DirInput::Read { id, files });
                    }
                    other => out.push(other),
                }
            }
        }
        out
    }

    /// A load ends: the content of `token`'s file as it was read, loaded.
    fn load_ok(&mut self, load: &Load, tier_up: Option<Compile>) -> Actions {
        let (file, token, content) = load.clone();
        let name = name_of_file(&file).unwrap();
        let loaded = Loaded {
            setter: Fake(name.clone(), content.clone()),
            name,
            version: content.clone(),
            sha256: content,
            compiled: true,
        };
        self.step(DirInput::Loaded {
            file,
            token,
            took: s(1),
            result: LoadResult::Ready { loaded, tier_up },
        })
    }

    /// A load ends in a failure.
    fn load_failed(&mut self, load: &Load, transient: bool) -> Actions {
        let (file, token, _) = load.clone();
        self.step(DirInput::Loaded {
            file,
            token,
            took: s(1),
            result: LoadResult::Failed {
                error: "it failed".into(),
                transient,
            },
        })
    }

    /// Writes two files and rescans: the two loads, in file order.
    fn two_loads(&mut self, files: [(&str, &str); 2], wait: bool) -> [Load; 2] {
        for (f, c) in files {
            self.write(f, c);
        }
        let a = self.rescan(wait);
        loads(&a).try_into().unwrap_or_else(|_| panic!("{a:#?}"))
    }

    /// The active setters, as `name@version`.
    fn active(&self) -> Vec<String> {
        self.state
            .active()
            .iter()
            .map(|Fake(n, v)| format!("{n}@{v}"))
            .collect()
    }
}

/// A load asked for: file, token, content.
type Load = (PathBuf, Token, String);

/// The loads asked for.
fn loads(actions: &Actions) -> Vec<Load> {
    actions
        .iter()
        .filter_map(|a| match a {
            DirAction::Load(job) => Some((
                job.file.clone(),
                job.token,
                String::from_utf8(job.bytes.clone()).unwrap(),
            )),
            _ => None,
        })
        .collect()
}

/// The one load asked for.
fn one_load(actions: &Actions) -> Load {
    let l = loads(actions);
    assert_eq!(l.len(), 1, "{actions:#?}");
    l.into_iter().next().unwrap()
}

/// The events told.
fn events(actions: &Actions) -> Vec<ReloadEvent> {
    actions
        .iter()
        .filter_map(|a| match a {
            DirAction::Emit(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

/// The events a rescan returned.
fn done(actions: &Actions) -> Option<Vec<ReloadEvent>> {
    actions.iter().find_map(|a| match a {
        DirAction::RescanDone { events, .. } => Some(events.clone()),
        _ => None,
    })
}

/// The retries asked for: attempts and wait.
fn retries(actions: &Actions) -> Vec<(u32, Duration)> {
    actions
        .iter()
        .filter_map(|a| match a {
            DirAction::Retry { attempts, wait, .. } => Some((*attempts, *wait)),
            _ => None,
        })
        .collect()
}

/// The compiles started.
fn tier_ups(actions: &Actions) -> Vec<(PathBuf, Compile)> {
    actions
        .iter()
        .filter_map(|a| match a {
            DirAction::TierUp { file, job, .. } => Some((file.clone(), *job)),
            _ => None,
        })
        .collect()
}

/// `file` loaded with `content` by a waited rescan.
fn loaded_sim(files: &[(&str, &str)]) -> Sim {
    let mut sim = Sim::new();
    for (f, c) in files {
        sim.write(f, c);
    }
    let a = sim.rescan(true);
    for l in loads(&a) {
        sim.load_ok(&l, None);
    }
    sim
}

#[test]
fn a_transient_failure_is_loaded_again_after_a_wait_that_doubles_up_to_its_bound() {
    let mut sim = Sim::new();
    sim.step(DirInput::RetryBackoff {
        first: s(30),
        max: s(100),
    });
    sim.write("gpu.wasm", "1");
    let mut load = one_load(&sim.rescan(false));
    let mut waits = Vec::new();
    for _ in 0..4 {
        let a = sim.load_failed(&load, true);
        let [(_, wait)] = retries(&a)[..] else {
            panic!("{a:#?}")
        };
        waits.push(wait);
        // Not before its wait: the file is not even read again.
        sim.advance(wait - s(1));
        assert!(loads(&sim.rescan(false)).is_empty());
        sim.advance(s(1));
        load = one_load(&sim.rescan(false));
        assert_eq!(load.2, "1", "the same content, loaded again");
    }
    assert_eq!(waits, [s(30), s(60), s(100), s(100)]);
    let a = sim.load_ok(&load, None);
    assert!(matches!(&events(&a)[..], [ReloadEvent::Loaded { .. }]));
    assert!(retries(&a).is_empty());
    sim.advance(s(3600));
    assert!(loads(&sim.rescan(false)).is_empty());
    assert_eq!(sim.active(), ["gpu@1"]);
}

#[test]
fn a_refusal_the_file_earns_is_never_loaded_again() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "garbage");
    let load = one_load(&sim.rescan(false));
    let a = sim.load_failed(&load, false);
    assert!(retries(&a).is_empty());
    assert!(matches!(
        &events(&a)[..],
        [ReloadEvent::Failed { kept: None, .. }]
    ));
    sim.advance(s(24 * 3600));
    assert_eq!(sim.rescan(false).len(), 1, "only the rescan's answer");
    // Until it changes.
    sim.write("gpu.wasm", "2");
    assert_eq!(one_load(&sim.rescan(false)).2, "2");
}

#[test]
fn a_transient_failures_count_starts_again_with_new_content() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let load = one_load(&sim.rescan(false));
    sim.load_failed(&load, true);
    sim.advance(s(30));
    let load = one_load(&sim.rescan(false));
    assert_eq!(retries(&sim.load_failed(&load, true)), [(2, s(60))]);
    sim.write("gpu.wasm", "2");
    let load = one_load(&sim.rescan(false));
    assert_eq!(retries(&sim.load_failed(&load, true)), [(1, s(30))]);
}

#[test]
fn a_changed_file_replaces_its_plugin_only_when_the_new_version_loads() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    assert_eq!(sim.active(), ["gpu@1"]);
    sim.write("gpu.wasm", "2");
    let load = one_load(&sim.rescan(false));
    // While it loads, the old version runs.
    assert_eq!(sim.active(), ["gpu@1"]);
    let a = sim.load_failed(&load, false);
    assert!(
        matches!(&events(&a)[..], [ReloadEvent::Failed { kept: Some(v), .. }] if v == "1"),
        "{a:#?}"
    );
    assert_eq!(sim.active(), ["gpu@1"]);
    let st = &sim.state.files()[&path("gpu.wasm")];
    assert_eq!(st.error.as_deref(), Some("it failed"));

    sim.write("gpu.wasm", "3");
    let load = one_load(&sim.rescan(false));
    let a = sim.load_ok(&load, None);
    assert!(
        matches!(&events(&a)[..], [ReloadEvent::Reloaded { version, because: "file", .. }] if version == "3"),
        "{a:#?}"
    );
    assert!(a.iter().any(|a| matches!(a, DirAction::Store { .. })));
    assert_eq!(sim.active(), ["gpu@3"]);
    assert_eq!(sim.state.files()[&path("gpu.wasm")].error, None);
}

#[test]
fn a_file_whose_content_did_not_change_is_not_loaded_again() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    // Touched: a new stamp, the same content.
    sim.write("gpu.wasm", "1");
    let a = sim.rescan(true);
    assert!(loads(&a).is_empty(), "{a:#?}");
    assert_eq!(done(&a), Some(Vec::new()));
}

#[test]
fn a_file_removed_unloads_its_plugin() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1"), ("ready.wasm", "1")]);
    sim.remove("gpu.wasm");
    let a = sim.rescan(false);
    assert_eq!(
        events(&a),
        [ReloadEvent::Unloaded {
            file: path("gpu.wasm"),
            plugin: "gpu".into()
        }]
    );
    assert_eq!(sim.active(), ["ready@1"]);
    assert!(matches!(
        a.iter().find(|a| matches!(a, DirAction::Store { .. })),
        Some(DirAction::Store { setters, .. }) if setters.len() == 1
    ));
}

#[test]
fn a_stale_loads_result_is_ignored() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let first = one_load(&sim.rescan(false));
    sim.write("gpu.wasm", "2");
    let second = one_load(&sim.rescan(false));
    assert_ne!(first.1, second.1);
    // The newer ends first; the older, ending after, changes nothing.
    sim.load_ok(&second, None);
    assert!(sim.load_ok(&first, None).is_empty());
    assert_eq!(sim.active(), ["gpu@2"]);

    // And the other way round: the older ends first, and is ignored too.
    sim.write("gpu.wasm", "3");
    let third = one_load(&sim.rescan(false));
    sim.write("gpu.wasm", "4");
    let fourth = one_load(&sim.rescan(false));
    assert!(sim.load_ok(&third, None).is_empty());
    assert_eq!(sim.active(), ["gpu@2"]);
    sim.load_ok(&fourth, None);
    assert_eq!(sim.active(), ["gpu@4"]);
}

#[test]
fn a_file_already_loading_with_the_same_content_is_not_loaded_twice() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let load = one_load(&sim.rescan(false));
    // A waited rescan finds it loading: no new load, and it waits for it.
    let a = sim.rescan(true);
    assert!(loads(&a).is_empty());
    assert_eq!(done(&a), None, "it waits for the load under way");
    let a = sim.load_ok(&load, None);
    assert_eq!(done(&a), Some(Vec::new()), "{a:#?}");
    assert_eq!(sim.active(), ["gpu@1"]);
}

#[test]
fn a_load_of_a_file_gone_meanwhile_is_discarded() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let load = one_load(&sim.rescan(false));
    sim.remove("gpu.wasm");
    sim.rescan(false);
    assert!(sim.load_ok(&load, None).is_empty());
    assert!(sim.active().is_empty());
    assert!(sim.state.files().is_empty());
}

#[test]
fn a_waited_rescan_applies_its_loads_together_when_the_last_ends() {
    let mut sim = Sim::new();
    let [gpu, ready] = &sim.two_loads([("gpu.wasm", "1"), ("ready.wasm", "1")], true);
    let a = sim.load_ok(gpu, None);
    assert!(a.is_empty(), "nothing is told before the last load: {a:#?}");
    assert!(sim.active().is_empty());
    let a = sim.load_ok(ready, None);
    let told = done(&a).expect("the rescan is done");
    assert_eq!(told.len(), 2);
    assert_eq!(events(&a), told);
    assert_eq!(sim.active(), ["gpu@1", "ready@1"]);
}

#[test]
fn a_background_rescan_answers_at_once_and_each_load_joins_when_ready() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    sim.write("ready.wasm", "1");
    let a = sim.rescan(false);
    assert_eq!(done(&a), Some(Vec::new()));
    let [gpu, ready] = &loads(&a)[..] else {
        panic!("{a:#?}")
    };
    sim.load_ok(ready, None);
    assert_eq!(sim.active(), ["ready@1"]);
    sim.load_ok(gpu, None);
    assert_eq!(sim.active(), ["gpu@1", "ready@1"]);
}

#[test]
fn one_plugin_per_name_the_exact_file_name_wins() {
    let mut sim = loaded_sim(&[("a_b.wasm", "1"), ("a-b.wasm", "2")]);
    assert_eq!(sim.active(), ["a-b@2"]);
    let st = &sim.state.files()[&path("a_b.wasm")];
    assert!(st.error.as_deref().unwrap().contains("already loaded from"));
    // The winner gone, the other one runs.
    sim.remove("a-b.wasm");
    sim.rescan(true);
    assert_eq!(sim.active(), ["a-b@1"]);
}

#[test]
fn settings_changes_reload_only_the_plugins_whose_settings_changed() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1"), ("ready.wasm", "1")]);
    sim.step(DirInput::SettingsChanged(ordered("gpu", 5)));
    let a = sim.rescan(true);
    let load = one_load(&a);
    assert_eq!(load.0, path("gpu.wasm"));
    let a = sim.load_ok(&load, None);
    assert!(
        matches!(&done(&a).unwrap()[..], [ReloadEvent::Reloaded { plugin, because: "settings", .. }] if plugin == "gpu"),
        "{a:#?}"
    );
    // The same settings again: nothing.
    sim.step(DirInput::SettingsChanged(ordered("gpu", 5)));
    assert!(loads(&sim.rescan(true)).is_empty());
}

#[test]
fn new_settings_that_refuse_a_plugin_stop_its_running_version() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    sim.step(DirInput::SettingsChanged(ordered("gpu", 5)));
    let load = one_load(&sim.rescan(false));
    let a = sim.load_failed(&load, false);
    assert!(matches!(
        &events(&a)[..],
        [ReloadEvent::Failed { kept: None, .. }]
    ));
    assert!(sim.active().is_empty());
}

#[test]
fn a_load_under_the_old_settings_is_discarded() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let old = one_load(&sim.rescan(false));
    sim.step(DirInput::SettingsChanged(ordered("gpu", 5)));
    assert!(sim.load_ok(&old, None).is_empty());
    let new = one_load(&sim.rescan(false));
    assert_ne!(old.1, new.1);
    sim.load_ok(&new, None);
    assert_eq!(sim.active(), ["gpu@1"]);
}

#[test]
fn a_disabled_plugin_is_not_loaded_and_its_running_version_stops() {
    let mut sim = Sim::with(disabled("gpu"));
    sim.write("gpu.wasm", "1");
    let a = sim.rescan(true);
    assert!(loads(&a).is_empty());
    assert!(matches!(
        &done(&a).unwrap()[..],
        [ReloadEvent::Disabled { stopped: None, .. }]
    ));

    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    sim.step(DirInput::SettingsChanged(disabled("gpu")));
    let a = sim.rescan(true);
    assert!(loads(&a).is_empty());
    assert!(
        matches!(&done(&a).unwrap()[..], [ReloadEvent::Disabled { stopped: Some(v), .. }] if v == "1"),
        "{a:#?}"
    );
    assert!(sim.active().is_empty());
    // Enabled again: loaded again.
    sim.step(DirInput::SettingsChanged(defaults()));
    let load = one_load(&sim.rescan(true));
    sim.load_ok(&load, None);
    assert_eq!(sim.active(), ["gpu@1"]);
}

#[test]
fn the_registrys_files_load_as_the_directorys_and_unload_when_left_out() {
    let mut sim = Sim::new();
    let pulled = PathBuf::from("/cache/registry-plugins/gpu.wasm");
    sim.disk.insert(
        pulled.clone(),
        (
            Stamp {
                len: 1,
                modified: None,
                inode: 99,
            },
            "1".into(),
        ),
    );
    assert!(
        loads(&sim.rescan(true)).is_empty(),
        "not listed before it is given"
    );
    sim.step(DirInput::ExtraFiles(BTreeSet::from([pulled.clone()])));
    let load = one_load(&sim.rescan(true));
    assert_eq!(load.0, pulled);
    sim.load_ok(&load, None);
    assert_eq!(sim.active(), ["gpu@1"]);
    sim.step(DirInput::ExtraFiles(BTreeSet::new()));
    let a = sim.rescan(true);
    assert!(matches!(&events(&a)[..], [ReloadEvent::Unloaded { .. }]));
    assert!(sim.active().is_empty());
}

#[test]
fn a_withheld_plugin_is_stored_at_once_and_with_every_set_after() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    let w = Withheld {
        plugin: "images".into(),
        version: "3".into(),
        affects_readiness: true,
        reason: "untrusted".into(),
    };
    let a = sim.step(DirInput::Withheld {
        plugin: "images".into(),
        withheld: Some(w.clone()),
    });
    assert!(matches!(
        &a[..],
        [DirAction::Store { setters, withheld }] if setters.len() == 1 && *withheld == [w.clone()]
    ));
    sim.write("ready.wasm", "1");
    let load = one_load(&sim.rescan(false));
    let a = sim.load_ok(&load, None);
    assert!(a.iter().any(|a| matches!(
        a,
        DirAction::Store { setters, withheld } if setters.len() == 2 && *withheld == [w.clone()]
    )));
    let a = sim.step(DirInput::Withheld {
        plugin: "images".into(),
        withheld: None,
    });
    assert!(matches!(&a[..], [DirAction::Store { withheld, .. }] if withheld.is_empty()));
}

#[test]
fn source_problems_are_kept_until_cleared() {
    let mut sim = Sim::new();
    sim.step(DirInput::SourceProblem {
        plugin: "gpu".into(),
        problem: Some("registry down".into()),
    });
    assert_eq!(sim.state.source_problems()["gpu"], "registry down");
    sim.step(DirInput::SourceProblem {
        plugin: "gpu".into(),
        problem: None,
    });
    assert!(sim.state.source_problems().is_empty());
}

#[test]
fn cranelift_replaces_winch_one_compile_at_a_time_once_no_load_runs() {
    let mut sim = Sim::new();
    let [gpu, ready] = &sim.two_loads([("gpu.wasm", "1"), ("ready.wasm", "1")], false);
    let a = sim.load_ok(gpu, Some("gpu"));
    assert!(tier_ups(&a).is_empty(), "a load still runs");
    assert_eq!(
        sim.state.files()[&path("gpu.wasm")].tier_up,
        Some(TierUpPhase::Queued)
    );
    let a = sim.load_ok(ready, Some("ready"));
    assert_eq!(tier_ups(&a), [(path("gpu.wasm"), "gpu")]);
    assert_eq!(
        sim.state.files()[&path("gpu.wasm")].tier_up,
        Some(TierUpPhase::Running)
    );
    // One at a time.
    assert!(tier_ups(&sim.rescan(false)).is_empty());
    let a = sim.step(DirInput::TieredUp {
        file: path("gpu.wasm"),
        token: gpu.1,
        ok: true,
    });
    assert_eq!(tier_ups(&a), [(path("ready.wasm"), "ready")]);
    assert_eq!(sim.state.files()[&path("gpu.wasm")].tier_up, None);
}

#[test]
fn a_replaced_plugins_compile_is_dropped_and_its_late_result_ignored() {
    let mut sim = Sim::new();
    let [gpu, ready] = &sim.two_loads([("gpu.wasm", "1"), ("ready.wasm", "1")], false);
    sim.load_ok(gpu, Some("gpu 1"));
    // Replaced before its turn: its compile never starts.
    sim.write("gpu.wasm", "2");
    let gpu2 = one_load(&sim.rescan(false));
    sim.load_ok(&gpu2, None);
    assert!(tier_ups(&sim.load_ok(ready, None)).is_empty());

    // Replaced while it runs: its end does not free the slot of another.
    sim.write("gpu.wasm", "3");
    let gpu3 = one_load(&sim.rescan(false));
    let a = sim.load_ok(&gpu3, Some("gpu 3"));
    assert_eq!(tier_ups(&a), [(path("gpu.wasm"), "gpu 3")]);
    sim.write("gpu.wasm", "4");
    let gpu4 = one_load(&sim.rescan(false));
    sim.load_ok(&gpu4, Some("gpu 4"));
    let a = sim.step(DirInput::TieredUp {
        file: path("gpu.wasm"),
        token: gpu2.1,
        ok: true,
    });
    assert!(tier_ups(&a).is_empty(), "a stale end is ignored");
    let a = sim.step(DirInput::TieredUp {
        file: path("gpu.wasm"),
        token: gpu3.1,
        ok: true,
    });
    assert_eq!(tier_ups(&a), [(path("gpu.wasm"), "gpu 4")]);
}

#[test]
fn a_wait_for_the_cached_loads_ends_before_a_compile_does() {
    let mut sim = Sim::new();
    let [gpu, python] =
        &sim.two_loads([("gpu.wasm", "cached"), ("python.wasm", "compiled")], false);
    assert!(
        sim.step(DirInput::WaitIdle {
            id: 1,
            cached_only: true
        })
        .is_empty()
    );
    assert!(
        sim.step(DirInput::WaitIdle {
            id: 2,
            cached_only: false
        })
        .is_empty()
    );
    let a = sim.load_ok(gpu, None);
    assert!(a.iter().any(|a| matches!(a, DirAction::Idle(1))), "{a:#?}");
    assert!(!a.iter().any(|a| matches!(a, DirAction::Idle(2))));
    let a = sim.load_failed(python, false);
    assert!(a.iter().any(|a| matches!(a, DirAction::Idle(2))));
    // Idle already: told at once.
    let a = sim.step(DirInput::WaitIdle {
        id: 3,
        cached_only: false,
    });
    assert!(matches!(&a[..], [DirAction::Idle(3)]));
}

#[test]
fn an_unreadable_directory_keeps_the_loaded_plugins() {
    let mut sim = loaded_sim(&[("gpu.wasm", "1")]);
    let a = sim.step(DirInput::Rescan { id: 50, wait: true });
    assert!(matches!(&a[..], [DirAction::List { id: 50, .. }]));
    let a = sim.step(DirInput::Listed {
        id: 50,
        listing: Err("permission denied".into()),
    });
    assert!(
        matches!(&a[..], [DirAction::ListFailed(_), DirAction::RescanDone { id: 50, events }] if events.is_empty())
    );
    assert_eq!(sim.active(), ["gpu@1"]);
}

#[test]
fn an_unreadable_file_is_refused_and_read_again_later_when_that_may_pass() {
    let mut sim = Sim::new();
    sim.write("gpu.wasm", "1");
    let a = sim.step(DirInput::Rescan { id: 60, wait: true });
    assert!(matches!(&a[..], [DirAction::List { .. }]));
    let stamp = sim.disk[&path("gpu.wasm")].0.clone();
    sim.step(DirInput::Listed {
        id: 60,
        listing: Ok(vec![(path("gpu.wasm"), stamp.clone())]),
    });
    let a = sim.step(DirInput::Read {
        id: 60,
        files: vec![(
            path("gpu.wasm"),
            stamp,
            ReadResult::Failed {
                error: "I/O error".into(),
                transient: true,
            },
        )],
    });
    assert!(matches!(
        &done(&a).unwrap()[..],
        [ReloadEvent::Failed { .. }]
    ));
    assert_eq!(retries(&a), [(1, RETRY_FIRST)]);
    sim.advance(RETRY_FIRST);
    let load = one_load(&sim.rescan(true));
    sim.load_ok(&load, None);
    assert_eq!(sim.active(), ["gpu@1"]);
}
