//! The plugin directory: load every `*.wasm` at start, watch the directory,
//! and swap in a new [`PluginSet`] when files appear, change or go.
//!
//! - Each watch event (debounced) triggers a rescan of the whole directory, and
//!   a periodic rescan backs up the watch (inotify can overflow).
//! - Dotfiles and names not ending in `.wasm` (`*.tmp`, `*~`, `*.swp`) are
//!   ignored, so writers can write a temp file and rename it into place.
//! - A file whose sha256 did not change is not reloaded.
//! - A changed file is checked (without a compile), compiled (or taken from
//!   the precompile cache), type-checked against the world and asked for its
//!   metadata before it replaces the old version. If any step fails, the last
//!   good version keeps running and the error is reported.
//! - Loading never blocks the loops: the engine rescans with
//!   [`PluginDir::rescan_in_background`], which loads each file on a thread
//!   of its own and puts each plugin in the active set when it is ready, so
//!   a pass runs the plugins that are ready and a slow compile holds back
//!   nothing but its own plugin. [`PluginDir::rescan`] waits for every load
//!   (`once`, `plugin list`).
//! - [`PluginDir::load_component`] is the one entry point of a load: a
//!   component's bytes under the plugin name its path gives.
//! - The new set is swapped in atomically; a pass holds the set it started
//!   with, so it never sees half a reload.
//! - A plugin is named by its file: `gpu.wasm` (or `gpu_x.wasm` for
//!   `gpu-x`, as cargo writes it) must declare the name `gpu`, so grants and
//!   settings follow the operator's file name, never a name a plugin claims.
//! - A file is opened without blocking and must be a regular file within
//!   the size cap ([`nodestatus_runtime::read_plugin_file`]), so a FIFO or a
//!   huge file swapped in cannot hang or flood a rescan.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use crate::pipeline::PluginSet;
use nodestatus_runtime::{LoadError, Plugin, Runtime, name_of_file, read_plugin_file};

use crate::config::SettingsFn;
use crate::pipeline::Setter;

pub use crate::dir_watch::DEBOUNCE;
/// How often the directory is rescanned even without events.
pub const RESCAN_INTERVAL: Duration = Duration::from_secs(60);

/// What a rescan did to one file.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "result", rename_all = "lowercase")]
pub enum ReloadEvent {
    /// A new plugin is active.
    Loaded {
        /// The file.
        file: PathBuf,
        /// Its plugin name.
        plugin: String,
        /// Its version.
        version: String,
        /// Its sha256.
        sha256: String,
    },
    /// A new version replaced an old one.
    Reloaded {
        /// The file.
        file: PathBuf,
        /// Its plugin name.
        plugin: String,
        /// Its new version.
        version: String,
        /// Its new sha256.
        sha256: String,
    },
    /// The file is gone and its plugin unloaded.
    Unloaded {
        /// The file.
        file: PathBuf,
        /// The plugin that was loaded from it.
        plugin: String,
    },
    /// The file's plugin is disabled in the config (`enabled: false`): not
    /// loaded, and a version loaded before stops. Not a failure.
    Disabled {
        /// The file.
        file: PathBuf,
        /// The plugin it names.
        plugin: String,
        /// The version that stopped, if one ran.
        stopped: Option<String>,
    },
    /// The file could not be loaded.
    Failed {
        /// The file.
        file: PathBuf,
        /// Why, with every cause.
        error: String,
        /// The version that keeps running, if one was loaded before.
        kept: Option<String>,
    },
}

impl ReloadEvent {
    /// `loaded`, `reloaded`, `unloaded`, `disabled` or `failed`, for metrics.
    pub fn result(&self) -> &'static str {
        match self {
            Self::Loaded { .. } => "loaded",
            Self::Reloaded { .. } => "reloaded",
            Self::Unloaded { .. } => "unloaded",
            Self::Disabled { .. } => "disabled",
            Self::Failed { .. } => "failed",
        }
    }

    /// What `once` and `plugin list` print for a file that does not run: a
    /// refusal (with why) or a plugin disabled in the config.
    pub fn not_running(&self) -> Option<String> {
        match self {
            Self::Failed { file, error, .. } => {
                Some(format!("refused {}: {error}", file.display()))
            }
            Self::Disabled { file, .. } => Some(format!(
                "disabled {}: enabled: false in the config",
                file.display()
            )),
            _ => None,
        }
    }

    /// The file the event is about.
    pub fn file_mut(&mut self) -> &mut PathBuf {
        match self {
            Self::Loaded { file, .. }
            | Self::Reloaded { file, .. }
            | Self::Unloaded { file, .. }
            | Self::Disabled { file, .. }
            | Self::Failed { file, .. } => file,
        }
    }

    fn log(&self) {
        match self {
            Self::Loaded {
                file,
                plugin,
                version,
                sha256,
            } => tracing::info!(
                file = %file.display(), plugin, version, sha256 = &sha256[..12], "plugin loaded"
            ),
            Self::Reloaded {
                file,
                plugin,
                version,
                sha256,
            } => tracing::info!(
                file = %file.display(), plugin, version, sha256 = &sha256[..12], "plugin reloaded"
            ),
            Self::Unloaded { file, plugin } => {
                tracing::info!(file = %file.display(), plugin, "plugin unloaded")
            }
            Self::Disabled {
                file,
                plugin,
                stopped,
            } => tracing::info!(
                file = %file.display(), plugin, stopped = stopped.as_deref().unwrap_or("none"),
                "plugin disabled in the config: not loaded"
            ),
            Self::Failed { file, error, kept } => tracing::error!(
                file = %file.display(), kept = kept.as_deref().unwrap_or("none"), "plugin refused: {error}"
            ),
        }
    }
}

/// The state of one file, as `/status` and `plugin list` show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FileStatus {
    /// The file.
    pub file: PathBuf,
    /// The plugin running from it, if any.
    pub plugin: Option<String>,
    /// Its version.
    pub version: Option<String>,
    /// The sha256 of the running version.
    pub sha256: Option<String>,
    /// The last load error, if the file on disk is not what runs.
    pub error: Option<String>,
    /// How long its last load took, in seconds (the compile included).
    pub load_seconds: Option<f64>,
    /// Whether its last load compiled it (it was not in the precompile
    /// cache).
    pub compiled: bool,
    /// While a new version is being loaded: for how long, in seconds.
    pub loading_seconds: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Stamp {
    len: u64,
    modified: Option<SystemTime>,
    inode: u64,
}

struct FileState {
    stamp: Stamp,
    sha256: String,
    plugin: Option<Setter>,
    error: Option<String>,
    /// How long its last load took.
    took: Option<Duration>,
    /// Whether its last load compiled it.
    compiled: bool,
    /// The operator's settings changed since this file was loaded: if the
    /// new settings refuse it, its running version (loaded under the old
    /// grants) is not kept.
    settings_changed: bool,
}

/// A function told of every reload event ([`PluginDir::on_event`]).
type Listener = Box<dyn Fn(&ReloadEvent) + Send + Sync>;

/// A watched plugin directory and the plugin set loaded from it.
pub struct PluginDir {
    dir: PathBuf,
    runtime: Runtime,
    settings: std::sync::RwLock<SettingsFn>,
    files: Mutex<BTreeMap<PathBuf, FileState>>,
    rescan_lock: Mutex<()>,
    current: ArcSwap<PluginSet>,
    listeners: Mutex<Vec<Listener>>,
    /// The files being loaded now (by a background load).
    loading: Mutex<HashMap<PathBuf, Loading>>,
    /// Notified whenever a load ends.
    loaded: Condvar,
    next_token: AtomicU64,
    /// Files outside the directory loaded as if they were in it: plugins
    /// pulled from registries ([`crate::oci`]).
    extra_files: Mutex<std::collections::BTreeSet<PathBuf>>,
    /// Why a plugin source other than the directory cannot give the
    /// version it should (a registry down, a bad signature), by plugin
    /// name, for `/readyz`.
    source_problems: Mutex<BTreeMap<String, String>>,
}

/// A load under way.
struct Loading {
    /// The content being loaded.
    sha: String,
    since: std::time::Instant,
    /// Whether the precompile cache holds it (no compile).
    cached: bool,
    /// Which load: a load whose token is no longer the file's was
    /// superseded.
    token: u64,
}

/// A file to load.
struct Job {
    file: PathBuf,
    stamp: Stamp,
    sha: String,
    bytes: Vec<u8>,
    config: Arc<crate::config::PluginConfig>,
    token: u64,
}

/// What loading a file gave.
struct Load {
    file: PathBuf,
    stamp: Stamp,
    sha: String,
    took: Option<Duration>,
    result: Result<Setter, Refusal>,
}

/// What a rescan settles.
#[derive(Default)]
struct Plan {
    gone: Vec<PathBuf>,
    same: Vec<(PathBuf, Stamp)>,
    loads: Vec<Load>,
}

/// Why a component does not run.
#[derive(Debug)]
pub enum Refusal {
    /// Its plugin is disabled in the config.
    Disabled(String),
    /// It could not be loaded.
    Failed(LoadError),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Disabled(name) => write!(f, "plugin {name:?} is disabled in the config"),
            Self::Failed(e) => f.write_str(&nodestatus_runtime::error_chain(e)),
        }
    }
}

/// Whether a directory entry's name is a plugin file.
pub fn is_plugin_file_name(name: &str) -> bool {
    !name.starts_with('.') && name.ends_with(".wasm") && name.len() > ".wasm".len()
}

impl PluginDir {
    /// A plugin directory; nothing is loaded until [`PluginDir::rescan`].
    pub fn new(dir: impl Into<PathBuf>, runtime: Runtime, settings: SettingsFn) -> Arc<Self> {
        Arc::new(Self {
            dir: dir.into(),
            runtime,
            settings: std::sync::RwLock::new(settings),
            files: Mutex::new(BTreeMap::new()),
            rescan_lock: Mutex::new(()),
            current: ArcSwap::from_pointee(PluginSet::default()),
            listeners: Mutex::new(Vec::new()),
            loading: Mutex::new(HashMap::new()),
            loaded: Condvar::new(),
            next_token: AtomicU64::new(0),
            extra_files: Mutex::new(Default::default()),
            source_problems: Mutex::new(BTreeMap::new()),
        })
    }

    /// The plugin host as the engine opens it: a runtime with the config's
    /// precompile cache and compile limits (plugins compiled in a child of
    /// `compiler_exe`, the running `nodestatus`; in-process without one),
    /// over `dir` (default: the config's `pluginDir`), with the config's
    /// per-plugin settings. Nothing is loaded until [`PluginDir::rescan`].
    pub fn open(
        config: &Arc<crate::config::Config>,
        dir: Option<PathBuf>,
        compiler_exe: Option<PathBuf>,
    ) -> nodestatus_runtime::Result<Arc<Self>> {
        let runtime = Runtime::with_options(config.runtime_options(compiler_exe))?;
        let dir = dir.unwrap_or_else(|| config.plugin_dir.clone());
        Ok(Self::new(dir, runtime, config.settings_fn()))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replaces the operator's settings (a live config change). Every file
    /// is loaded again with them at the next [`PluginDir::rescan`]; a file
    /// that the new settings refuse keeps its running version, as a bad
    /// rebuild does.
    pub fn set_settings(&self, settings: SettingsFn) {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        *self.settings.write().expect("settings lock") = settings;
        // Loads under the old settings are discarded when they end.
        self.loading.lock().expect("loading lock").clear();
        self.loaded.notify_all();
        for st in self.files.lock().expect("files lock").values_mut() {
            // Neither the stamp nor the hash matches any more: reloaded.
            st.stamp.len = u64::MAX;
            st.sha256.clear();
            st.settings_changed = true;
        }
    }

    /// The runtime plugins are loaded into.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The active plugin set. Hold the `Arc` for a whole pass.
    pub fn current(&self) -> Arc<PluginSet> {
        self.current.load_full()
    }

    /// Calls `f` for every reload event from now on (metrics, status).
    pub fn on_event(&self, f: impl Fn(&ReloadEvent) + Send + Sync + 'static) {
        self.listeners
            .lock()
            .expect("listeners lock")
            .push(Box::new(f));
    }

    /// Each file's state.
    pub fn status(&self) -> Vec<FileStatus> {
        let loading: HashMap<PathBuf, f64> = self
            .loading()
            .into_iter()
            .map(|(f, d, _)| (f, d.as_secs_f64()))
            .collect();
        let mut status: Vec<FileStatus> = self
            .files
            .lock()
            .expect("files lock")
            .iter()
            .map(|(file, st)| FileStatus {
                file: file.clone(),
                plugin: st.plugin.as_ref().map(|p| p.name().to_owned()),
                version: st
                    .plugin
                    .as_ref()
                    .map(|p| p.plugin().metadata().version.clone()),
                sha256: st.plugin.as_ref().map(|p| p.plugin().sha256().to_owned()),
                error: st.error.clone(),
                load_seconds: st.took.map(|d| d.as_secs_f64()),
                compiled: st.compiled,
                loading_seconds: loading.get(file).copied(),
            })
            .collect();
        for (file, secs) in &loading {
            if !status.iter().any(|s| &s.file == file) {
                status.push(FileStatus {
                    file: file.clone(),
                    plugin: None,
                    version: None,
                    sha256: None,
                    error: None,
                    load_seconds: None,
                    compiled: false,
                    loading_seconds: Some(*secs),
                });
            }
        }
        status.sort_by(|a, b| a.file.cmp(&b.file));
        status
    }

    /// Loads `files` (outside the directory) at each rescan as if they were
    /// in it, named by their file names as directory files are: the plugins
    /// pulled from registries ([`crate::oci`]). A file left out of the set
    /// is unloaded at the next rescan.
    pub fn set_extra_files(&self, files: std::collections::BTreeSet<PathBuf>) {
        *self.extra_files.lock().expect("extra files lock") = files;
    }

    /// Records why plugin `name`'s source cannot give the version it
    /// should (`None`: it can again); `/readyz` shows these.
    pub fn set_source_problem(&self, name: &str, problem: Option<String>) {
        let mut problems = self.source_problems.lock().expect("problems lock");
        match problem {
            Some(p) => problems.insert(name.to_owned(), p),
            None => problems.remove(name),
        };
    }

    /// What [`PluginDir::set_source_problem`] recorded, by plugin name.
    pub fn source_problems(&self) -> BTreeMap<String, String> {
        self.source_problems.lock().expect("problems lock").clone()
    }

    fn list(&self) -> std::io::Result<Vec<(PathBuf, Stamp)>> {
        use std::os::unix::fs::MetadataExt;
        let mut out = Vec::new();
        for file in self.extra_files.lock().expect("extra files lock").iter() {
            if let Ok(meta) = std::fs::metadata(file)
                && meta.is_file()
            {
                let stamp = Stamp {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    inode: meta.ino(),
                };
                out.push((file.clone(), stamp));
            }
        }
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            if !is_plugin_file_name(name) {
                continue;
            }
            // Follow symlinks: ConfigMap volumes link each key through `..data`.
            let Ok(meta) = std::fs::metadata(entry.path()) else {
                continue;
            };
            if !meta.is_file() {
                continue;
            }
            out.push((
                entry.path(),
                Stamp {
                    len: meta.len(),
                    modified: meta.modified().ok(),
                    inode: meta.ino(),
                },
            ));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Brings the loaded set in line with the directory, waits for every
    /// load it started, and returns what changed. Safe to call at any time;
    /// concurrent calls run one at a time. (`once`, `plugin list`, tests:
    /// the engine itself uses [`PluginDir::rescan_in_background`].)
    ///
    /// Files are read ([`read_plugin_file`]) and loaded without holding the
    /// lock that [`PluginDir::status`] takes, so a slow load (bounded by the
    /// file size cap and the plugin's deadline) never blocks readers; the
    /// loads run side by side. Name conflicts are settled before any event
    /// is logged: no "loaded" line is ever written for a plugin that is then
    /// refused.
    pub fn rescan(&self) -> Vec<ReloadEvent> {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        let Some((mut plan, jobs)) = self.plan() else {
            return Vec::new();
        };
        let done: Vec<Load> = std::thread::scope(|s| {
            let running: Vec<_> = jobs
                .into_iter()
                .map(|job| s.spawn(move || self.load(job)))
                .collect();
            running
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        {
            let mut loading = self.loading.lock().expect("loading lock");
            for l in &done {
                loading.remove(&l.file);
            }
        }
        plan.loads.extend(done);
        let events = self.apply(plan);
        self.loaded.notify_all();
        events
    }

    /// Brings the loaded set in line with the directory without waiting for
    /// a compile: files that are gone, unchanged, unreadable or disabled are
    /// settled at once (their events returned), and every file to load is
    /// loaded on a thread of its own, which puts it in the active set (and
    /// tells the listeners) when it is done. A pass runs the plugins that
    /// are ready; one that becomes ready runs from the next pass on.
    ///
    /// A file already loading with the same content is not loaded twice; a
    /// load whose file changed, went away, or whose settings changed while
    /// it ran is discarded (a newer one replaces it).
    pub fn rescan_in_background(self: &Arc<Self>) -> Vec<ReloadEvent> {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        let Some((plan, jobs)) = self.plan() else {
            return Vec::new();
        };
        for job in jobs {
            let this = Arc::clone(self);
            let spawned = std::thread::Builder::new()
                .name("nodestatus-load".into())
                .spawn(move || {
                    let token = job.token;
                    let load = this.load(job);
                    this.finish(token, load);
                });
            if let Err(e) = spawned {
                tracing::error!("cannot start a plugin load thread: {e}; the next rescan retries");
            }
        }
        self.apply(plan)
    }

    /// Waits until no load of a file that the precompile cache holds is
    /// running, or `bound` passed; returns whether none is. A start waits
    /// for these (milliseconds each) so that the node registers with the
    /// plugins it had, and never for a compile.
    pub fn wait_for_cached(&self, bound: Duration) -> bool {
        self.wait_loading(bound, |l| l.cached)
    }

    /// Waits until no load runs, or `bound` passed; returns whether none
    /// does.
    pub fn wait_idle(&self, bound: Duration) -> bool {
        self.wait_loading(bound, |_| true)
    }

    fn wait_loading(&self, bound: Duration, counts: impl Fn(&Loading) -> bool) -> bool {
        let deadline = std::time::Instant::now() + bound;
        let mut loading = self.loading.lock().expect("loading lock");
        loop {
            if !loading.values().any(&counts) {
                return true;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                return false;
            }
            loading = self
                .loaded
                .wait_timeout(loading, deadline - now)
                .expect("loading lock")
                .0;
        }
    }

    /// The files being loaded now, each with how long it has been loading
    /// and whether it is being compiled (else taken from the precompile
    /// cache).
    pub fn loading(&self) -> Vec<(PathBuf, Duration, bool)> {
        self.loading
            .lock()
            .expect("loading lock")
            .iter()
            .map(|(f, l)| (f.clone(), l.since.elapsed(), !l.cached))
            .collect()
    }

    /// The load of one file: [`PluginDir::load_component`], timed.
    fn load(&self, job: Job) -> Load {
        let started = std::time::Instant::now();
        let result = self.load_component(&job.file, &job.bytes, &job.config);
        Load {
            file: job.file,
            stamp: job.stamp,
            sha: job.sha,
            took: Some(started.elapsed()),
            result,
        }
    }

    /// Loads a component: `bytes`, under the plugin name of `file` (its
    /// stem, see [`name_of_file`]), with `config`. The one entry point of
    /// every component the engine runs, whatever brought its bytes (the
    /// directory, a registry pull): the check before the compile, the
    /// memo of refused files, the precompile cache and the compile slots
    /// all apply. Blocks for as long as the compile takes.
    pub fn load_component(
        &self,
        file: &Path,
        bytes: &[u8],
        config: &Arc<crate::config::PluginConfig>,
    ) -> Result<Setter, Refusal> {
        if !config.enabled {
            // Not even compiled.
            return Err(Refusal::Disabled(name_of_file(file).unwrap_or_default()));
        }
        Plugin::load_bytes(&self.runtime, file, bytes, &|_| config.sandbox.clone())
            .map(|p| Setter::new(Arc::new(p), config.clone()))
            .map_err(Refusal::Failed)
    }

    /// A background load is done: applied, unless it was superseded.
    fn finish(&self, token: u64, load: Load) {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        {
            let mut loading = self.loading.lock().expect("loading lock");
            if loading.get(&load.file).map(|l| l.token) != Some(token) {
                tracing::debug!(file = %load.file.display(), "discarding a superseded load");
                return;
            }
            loading.remove(&load.file);
        }
        self.apply(Plan {
            loads: vec![load],
            ..Plan::default()
        });
        self.loaded.notify_all();
    }

    /// What a rescan finds: what to settle at once, and the files to load.
    /// `None` when the directory cannot be read. Called under the rescan
    /// lock.
    fn plan(&self) -> Option<(Plan, Vec<Job>)> {
        let listing = match self.list() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot read the plugin directory; keeping the loaded plugins");
                return None;
            }
        };
        let known: HashMap<PathBuf, (Stamp, String)> = self
            .files
            .lock()
            .expect("files lock")
            .iter()
            .map(|(p, st)| (p.clone(), (st.stamp.clone(), st.sha256.clone())))
            .collect();
        let present: HashMap<&PathBuf, &Stamp> = listing.iter().map(|(p, s)| (p, s)).collect();
        let mut loading = self.loading.lock().expect("loading lock");
        // A load of a file that is gone is discarded when it ends.
        loading.retain(|f, _| present.contains_key(f));

        let mut plan = Plan {
            gone: known
                .keys()
                .filter(|p| !present.contains_key(p))
                .cloned()
                .collect(),
            ..Plan::default()
        };
        let mut jobs = Vec::new();
        for (file, stamp) in &listing {
            if known.get(file).is_some_and(|k| k.0 == *stamp) {
                continue;
            }
            let bytes = match read_plugin_file(file) {
                Ok(b) => b,
                Err(LoadError::Read { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    tracing::debug!(file = %file.display(), "plugin file vanished while reading");
                    continue;
                }
                Err(e) => {
                    loading.remove(file);
                    plan.loads.push(Load {
                        file: file.clone(),
                        stamp: stamp.clone(),
                        sha: String::new(),
                        took: None,
                        result: Err(Refusal::Failed(e)),
                    });
                    continue;
                }
            };
            let sha = nodestatus_runtime::sha256_hex(&bytes);
            if known.get(file).is_some_and(|k| k.1 == sha) {
                loading.remove(file);
                plan.same.push((file.clone(), stamp.clone()));
                continue;
            }
            if loading.get(file).is_some_and(|l| l.sha == sha) {
                // Already loading, this very content.
                continue;
            }
            let settings = self.settings.read().expect("settings lock").clone();
            let name = name_of_file(file).unwrap_or_default();
            let config = Arc::new(settings(&name));
            if !config.enabled {
                loading.remove(file);
                plan.loads.push(Load {
                    file: file.clone(),
                    stamp: stamp.clone(),
                    sha,
                    took: None,
                    result: Err(Refusal::Disabled(name)),
                });
                continue;
            }
            let token = self.next_token.fetch_add(1, Ordering::Relaxed);
            let cached = self
                .runtime
                .cache()
                .is_some_and(|c| c.entry_path(&sha).is_file());
            loading.insert(
                file.clone(),
                Loading {
                    sha: sha.clone(),
                    since: std::time::Instant::now(),
                    cached,
                    token,
                },
            );
            jobs.push(Job {
                file: file.clone(),
                stamp: stamp.clone(),
                sha,
                bytes,
                config,
                token,
            });
        }
        Some((plan, jobs))
    }

    /// Applies what a rescan or a load found to the files and the active
    /// set, and tells the listeners. Called under the rescan lock.
    fn apply(&self, plan: Plan) -> Vec<ReloadEvent> {
        let Plan { gone, same, loads } = plan;
        let mut files = self.files.lock().expect("files lock");
        let mut events = Vec::new();

        // Files that are gone.
        for file in gone {
            if let Some(FileState {
                plugin: Some(p), ..
            }) = files.remove(&file)
            {
                events.push(ReloadEvent::Unloaded {
                    file,
                    plugin: p.name().to_owned(),
                });
            }
        }
        for (file, stamp) in same {
            if let Some(st) = files.get_mut(&file) {
                st.stamp = stamp;
            }
        }

        // New and changed files; their events wait for the name check.
        let mut pending: BTreeMap<PathBuf, ReloadEvent> = BTreeMap::new();
        for Load {
            file,
            stamp,
            sha,
            took,
            result,
        } in loads
        {
            let (previous, settings_changed) = files
                .get(&file)
                .map_or((None, false), |st| (st.plugin.clone(), st.settings_changed));
            let state = match result {
                Ok(p) => {
                    for w in p.plugin().withheld() {
                        // What the operator can grant is worth a warning;
                        // the files under a directory that holds /proc
                        // (`/`, granted for statvfs) never are: that grant
                        // serves what it is for.
                        if w.grantable() {
                            tracing::warn!(
                                plugin = p.name(),
                                "not granted, loading without it: {w}"
                            );
                        } else {
                            tracing::info!(plugin = p.name(), "granted for statvfs only: {w}");
                        }
                    }
                    let (plugin, version, sha256) = (
                        p.name().to_owned(),
                        p.plugin().metadata().version.clone(),
                        p.plugin().sha256().to_owned(),
                    );
                    pending.insert(
                        file.clone(),
                        match &previous {
                            None => ReloadEvent::Loaded {
                                file: file.clone(),
                                plugin,
                                version,
                                sha256,
                            },
                            Some(_) => ReloadEvent::Reloaded {
                                file: file.clone(),
                                plugin,
                                version,
                                sha256,
                            },
                        },
                    );
                    FileState {
                        stamp,
                        sha256: sha,
                        compiled: p.plugin().compiled(),
                        took,
                        plugin: Some(p),
                        error: None,
                        settings_changed: false,
                    }
                }
                Err(refusal) => {
                    let error = refusal.to_string();
                    // Refused under new settings (disabled, a new pin, a
                    // grant now refused...): the version loaded under the
                    // old ones stops too. A disabled plugin stops whatever
                    // made the file load again.
                    let version = |p: &Setter| p.plugin().metadata().version.clone();
                    let (event, kept) = match refusal {
                        Refusal::Disabled(plugin) => (
                            ReloadEvent::Disabled {
                                file: file.clone(),
                                plugin,
                                stopped: previous.as_ref().map(version),
                            },
                            None,
                        ),
                        Refusal::Failed(_) => {
                            let kept = if settings_changed { None } else { previous };
                            let event = ReloadEvent::Failed {
                                file: file.clone(),
                                error: error.clone(),
                                kept: kept.as_ref().map(version),
                            };
                            (event, kept)
                        }
                    };
                    pending.insert(file.clone(), event);
                    FileState {
                        stamp,
                        sha256: sha,
                        compiled: false,
                        took,
                        plugin: kept,
                        error: Some(error),
                        settings_changed: false,
                    }
                }
            };
            files.insert(file, state);
        }

        // One plugin per name. A plugin is named by its file, so two files
        // claim one name only as `a-b.wasm` and `a_b.wasm`: the file whose
        // stem is the name exactly wins, then the first by path.
        let mut claims: BTreeMap<String, Vec<(bool, PathBuf)>> = BTreeMap::new();
        for (file, st) in files.iter() {
            if let Some(p) = &st.plugin {
                let exact = file.file_stem().is_some_and(|s| s == p.name());
                claims
                    .entry(p.name().to_owned())
                    .or_default()
                    .push((!exact, file.clone()));
            }
        }
        let mut plugins = Vec::new();
        for (name, mut claimants) in claims {
            claimants.sort();
            let winner = claimants[0].1.clone();
            for (_, file) in &claimants[1..] {
                let st = files.get_mut(file).expect("claimant is a file");
                let error = format!(
                    "plugin name {name:?} is already loaded from {}; rename or remove one of them",
                    winner.display()
                );
                if st.error.as_deref() != Some(&error) || pending.contains_key(file) {
                    pending.insert(
                        file.clone(),
                        ReloadEvent::Failed {
                            file: file.clone(),
                            error: error.clone(),
                            kept: None,
                        },
                    );
                }
                st.error = Some(error);
            }
            let st = &files[&winner];
            plugins.push(st.plugin.clone().expect("winner has a plugin"));
        }
        events.extend(pending.into_values());

        if !events.is_empty() {
            self.current.store(Arc::new(PluginSet::new(plugins)));
        }
        drop(files);
        let listeners = self.listeners.lock().expect("listeners lock");
        for e in &events {
            e.log();
            for l in listeners.iter() {
                l(e);
            }
        }
        events
    }

    /// Watches the directory on a background thread until `stop` is set:
    /// every debounced event, and every [`RESCAN_INTERVAL`], rescans it
    /// ([`crate::dir_watch`]).
    pub fn watch(
        self: &Arc<Self>,
        stop: Arc<AtomicBool>,
    ) -> Result<std::thread::JoinHandle<()>, notify::Error> {
        self.watch_every(stop, RESCAN_INTERVAL)
    }

    /// Like [`PluginDir::watch`], with the rescan without events every
    /// `rescan` instead of [`RESCAN_INTERVAL`] (tests).
    pub fn watch_every(
        self: &Arc<Self>,
        stop: Arc<AtomicBool>,
        rescan: Duration,
    ) -> Result<std::thread::JoinHandle<()>, notify::Error> {
        let this = Arc::clone(self);
        crate::dir_watch::spawn(
            "nodestatus-plugin-watch",
            &self.dir,
            rescan,
            crate::dir_watch::Inotify::Required,
            move || stop.load(Ordering::Relaxed),
            move || {
                this.rescan_in_background();
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_and_dot_files_are_ignored() {
        assert!(is_plugin_file_name("gpu.wasm"));
        assert!(!is_plugin_file_name(".gpu.wasm"));
        assert!(!is_plugin_file_name("gpu.wasm.tmp"));
        assert!(!is_plugin_file_name("gpu.wasm~"));
        assert!(!is_plugin_file_name(".gpu.wasm.swp"));
        assert!(!is_plugin_file_name(".wasm"));
    }
}
