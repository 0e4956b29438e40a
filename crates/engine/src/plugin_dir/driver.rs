//! The one driver of a plugin directory: it owns the [`DirState`],
//! performs the [`DirAction`]s its steps ask for (the listing and the
//! reads on its own thread, each load and each Cranelift compile on a
//! thread of its own), feeds the results back as [`DirInput`]s, and after
//! every step publishes what readers need: the active [`PluginSet`] and a
//! copy of each file's state.
//!
//! Nothing here decides anything: every rule is in the step. No lock
//! guards the state: it has one owner, the driver's thread; the
//! [`PluginDir`](super::PluginDir) handle sends it commands over a
//! channel, and readers load the published views.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, Sender};

use arc_swap::ArcSwap;
use tokio::time::Instant;

use super::load::{is_plugin_file_name, load_setter};
use super::state::{
    DirAction, DirInput, DirState, FileState, Job, LoadResult, Loaded, ReadResult, RescanId, Stamp,
    WaitId,
};
use super::{Listener, Refusal, ReloadEvent};
use crate::config::SettingsFn;
use crate::pipeline::{PluginSet, Setter};
use nodestatus_runtime::{LoadError, Runtime, TierUp, error_chain, read_plugin_file, sha256_hex};

/// What the driver takes.
pub(super) enum Msg {
    /// An input with no answer: a load's or a compile's end.
    Input(DirInput),
    /// An input, answered once its actions are done and the views
    /// published.
    Apply(DirInput, Sender<()>),
    /// A rescan, answered with its events.
    Rescan {
        /// Whether the answer waits for its loads.
        wait: bool,
        /// Where its events go.
        reply: Sender<Vec<ReloadEvent>>,
    },
    /// Answered when no load (of a cached file) runs.
    WaitIdle {
        /// Whether only loads from the precompile cache count.
        cached_only: bool,
        /// Told then.
        reply: Sender<()>,
    },
    /// A listener of every event from now on.
    Listen(Listener),
    /// The directory is dropped.
    Stop,
}

/// What the driver publishes after every step.
pub(super) struct View {
    /// The active set.
    pub(super) current: ArcSwap<PluginSet>,
    /// The files, the loads and the source problems.
    pub(super) status: ArcSwap<Published>,
}

/// A copy of what `status`, `loading` and `source_problems` read.
#[derive(Default)]
pub(super) struct Published {
    /// Each file's state.
    pub(super) files: Vec<(PathBuf, FileState<Setter>)>,
    /// Each load under way: its file, since when, whether it is cached.
    pub(super) loading: Vec<(PathBuf, Instant, bool)>,
    /// Why each plugin's source cannot give the version it should.
    pub(super) source_problems: BTreeMap<String, String>,
}

/// The driver of one directory.
struct Driver {
    dir: PathBuf,
    runtime: Runtime,
    state: DirState,
    /// Given to the load and compile threads, for their results.
    inputs: Sender<Msg>,
    view: Arc<View>,
    listeners: Vec<Listener>,
    rescan_replies: HashMap<RescanId, Sender<Vec<ReloadEvent>>>,
    idle_replies: HashMap<WaitId, Sender<()>>,
    next_id: u64,
}

/// Starts the driver of `dir` on a thread of its own: its command channel,
/// its views and its thread.
pub(super) fn spawn(
    dir: PathBuf,
    runtime: Runtime,
    settings: SettingsFn,
) -> (Sender<Msg>, Arc<View>, std::thread::JoinHandle<()>) {
    let (commands, inbox) = mpsc::channel();
    let view = Arc::new(View {
        current: ArcSwap::from_pointee(PluginSet::default()),
        status: ArcSwap::from_pointee(Published::default()),
    });
    let driver = Driver {
        dir,
        runtime,
        state: DirState::new(settings),
        inputs: commands.clone(),
        view: view.clone(),
        listeners: Vec::new(),
        rescan_replies: HashMap::new(),
        idle_replies: HashMap::new(),
        next_id: 0,
    };
    let thread = std::thread::Builder::new()
        .name("nodestatus-plugin-dir".into())
        .spawn(move || driver.run(inbox))
        .expect("a thread for the plugin directory's driver");
    (commands, view, thread)
}

impl Driver {
    fn run(mut self, inbox: Receiver<Msg>) {
        while let Ok(msg) = inbox.recv() {
            match msg {
                Msg::Stop => break,
                Msg::Input(input) => self.feed(input),
                Msg::Apply(input, ack) => {
                    self.feed(input);
                    let _ = ack.send(());
                }
                Msg::Rescan { wait, reply } => {
                    let id = self.next_id();
                    self.rescan_replies.insert(id, reply);
                    self.feed(DirInput::Rescan { id, wait });
                }
                Msg::WaitIdle { cached_only, reply } => {
                    let id = self.next_id();
                    self.idle_replies.insert(id, reply);
                    self.feed(DirInput::WaitIdle { id, cached_only });
                }
                Msg::Listen(l) => self.listeners.push(l),
            }
        }
    }

    fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Steps `input`, and every input its actions give at once (a listing,
    /// reads), performing the actions; then publishes the views, and only
    /// then tells the listeners and answers the waiters, so that whoever
    /// is told reads the new state.
    fn feed(&mut self, input: DirInput) {
        let mut queue = VecDeque::from([input]);
        let mut told = Vec::new();
        while let Some(input) = queue.pop_front() {
            for action in self.state.step(input, Instant::now()) {
                match action {
                    DirAction::List { id, extra_files } => queue.push_back(DirInput::Listed {
                        id,
                        listing: list(&self.dir, &extra_files).map_err(|e| e.to_string()),
                    }),
                    DirAction::Read { id, files } => {
                        let files = files
                            .into_iter()
                            .map(|(file, stamp)| {
                                let read = read(&self.runtime, &file);
                                (file, stamp, read)
                            })
                            .collect();
                        queue.push_back(DirInput::Read { id, files });
                    }
                    DirAction::Load(job) => queue.extend(self.load(job)),
                    DirAction::TierUp { file, token, job } => self.tier_up(file, token, job),
                    DirAction::Store { setters, withheld } => self
                        .view
                        .current
                        .store(Arc::new(PluginSet::new(setters).with_withheld(withheld))),
                    DirAction::Retry {
                        file,
                        attempts,
                        wait,
                    } => tracing::warn!(
                        file = %file.display(),
                        attempts,
                        "the load failed for a reason that may pass; loading the file again in {wait:?}"
                    ),
                    DirAction::ListFailed(error) => tracing::error!(
                        dir = %self.dir.display(), error,
                        "cannot read the plugin directory; keeping the loaded plugins"
                    ),
                    told_later => told.push(told_later),
                }
            }
        }
        self.publish();
        for action in told {
            match action {
                DirAction::Emit(event) => {
                    event.log();
                    for l in &self.listeners {
                        l(&event);
                    }
                }
                DirAction::RescanDone { id, events } => {
                    if let Some(reply) = self.rescan_replies.remove(&id) {
                        let _ = reply.send(events);
                    }
                }
                DirAction::Idle(id) => {
                    if let Some(reply) = self.idle_replies.remove(&id) {
                        let _ = reply.send(());
                    }
                }
                _ => {}
            }
        }
    }

    /// Starts `job` on a thread of its own; when no thread starts, its
    /// failure (transient: tried again later).
    fn load(&self, job: Job) -> Option<DirInput> {
        let Job {
            file,
            bytes,
            config,
            token,
        } = job;
        let (runtime, inputs) = (self.runtime.clone(), self.inputs.clone());
        let name = file.clone();
        let spawned = std::thread::Builder::new()
            .name("nodestatus-load".into())
            .spawn(move || {
                let started = std::time::Instant::now();
                // A load that panics ends too: a waited rescan never waits
                // for a load that will not end.
                let load = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    load_setter(&runtime, &file, &bytes, &config)
                }));
                let result = match load {
                    Ok(Ok((setter, tier_up))) => LoadResult::Ready {
                        loaded: loaded(setter),
                        tier_up,
                    },
                    Ok(Err(Refusal::Disabled(name))) => LoadResult::Disabled(name),
                    Ok(Err(Refusal::Failed(e))) => LoadResult::Failed {
                        error: error_chain(&e),
                        transient: e.is_transient(),
                    },
                    Err(_) => LoadResult::Failed {
                        error: "the load panicked".into(),
                        transient: false,
                    },
                };
                let _ = inputs.send(Msg::Input(DirInput::Loaded {
                    file,
                    token,
                    took: started.elapsed(),
                    result,
                }));
            });
        match spawned {
            Ok(_) => None,
            Err(e) => Some(DirInput::Loaded {
                file: name,
                token,
                took: std::time::Duration::ZERO,
                result: LoadResult::Failed {
                    error: format!("cannot start a plugin load thread: {e}"),
                    transient: true,
                },
            }),
        }
    }

    /// Runs Cranelift's compile on a thread of its own.
    fn tier_up(&self, file: PathBuf, token: u64, job: TierUp) {
        let inputs = self.inputs.clone();
        let name = file.clone();
        let spawned = std::thread::Builder::new()
            .name("nodestatus-tier-up".into())
            .spawn(move || {
                let ok = job.run().unwrap_or(false);
                let _ = inputs.send(Msg::Input(DirInput::TieredUp { file, token, ok }));
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start a Cranelift compile; the plugin keeps Winch's code: {e}");
            // Its result, so that the next one may start.
            let _ = self.inputs.send(Msg::Input(DirInput::TieredUp {
                file: name,
                token,
                ok: false,
            }));
        }
    }

    fn publish(&self) {
        self.view.status.store(Arc::new(Published {
            files: self
                .state
                .files()
                .iter()
                .map(|(f, st)| (f.clone(), st.clone()))
                .collect(),
            loading: self
                .state
                .loading()
                .iter()
                .map(|(f, l)| (f.clone(), l.since, l.cached))
                .collect(),
            source_problems: self.state.source_problems().clone(),
        }));
    }
}

/// What the step reads of a loaded setter.
fn loaded(setter: Setter) -> Loaded<Setter> {
    let plugin = setter.plugin();
    Loaded {
        name: setter.name().to_owned(),
        version: plugin.metadata().version.clone(),
        sha256: plugin.sha256().to_owned(),
        compiled: plugin.compiled(),
        setter,
    }
}

/// Reads a file to load ([`read_plugin_file`]: opened without blocking,
/// a regular file within the size cap).
fn read(runtime: &Runtime, file: &Path) -> ReadResult {
    match read_plugin_file(file) {
        Ok(bytes) => {
            let sha256 = sha256_hex(&bytes);
            let cached = runtime
                .cache()
                .is_some_and(|c| c.entry_path(&sha256).is_file());
            ReadResult::Content {
                sha256,
                bytes,
                cached,
            }
        }
        Err(LoadError::Read { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            tracing::debug!(file = %file.display(), "plugin file vanished while reading");
            ReadResult::Vanished
        }
        Err(e) => ReadResult::Failed {
            error: error_chain(&e),
            transient: e.is_transient(),
        },
    }
}

/// The stamp of a regular file (symlinks followed: ConfigMap volumes link
/// each key through `..data`), `None` for anything else.
fn stamp(path: &Path) -> Option<Stamp> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).ok().filter(|m| m.is_file())?;
    Some(Stamp {
        len: meta.len(),
        modified: meta.modified().ok(),
        inode: meta.ino(),
    })
}

/// The plugin files of `dir` and those of `extra` that exist, by path.
fn list(dir: &Path, extra: &[PathBuf]) -> std::io::Result<Vec<(PathBuf, Stamp)>> {
    let mut out: Vec<(PathBuf, Stamp)> = extra
        .iter()
        .filter_map(|f| Some((f.clone(), stamp(f)?)))
        .collect();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !is_plugin_file_name(name) {
            continue;
        }
        if let Some(s) = stamp(&entry.path()) {
            out.push((entry.path(), s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}
