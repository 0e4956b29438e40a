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

mod rescan;
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
    /// A new version replaced an old one, or the same one was loaded again
    /// under new settings.
    Reloaded {
        /// The file.
        file: PathBuf,
        /// Its plugin name.
        plugin: String,
        /// Its new version.
        version: String,
        /// Its new sha256.
        sha256: String,
        /// Why: `file` (its content changed) or `settings` (the operator's
        /// settings of the plugin changed).
        because: &'static str,
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
                because,
            } => tracing::info!(
                file = %file.display(), plugin, version, sha256 = &sha256[..12], because,
                "plugin reloaded"
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
    /// The compiler of the code that runs (`winch` until Cranelift's code
    /// replaces it, with `compiler: tiered`; `cranelift`).
    pub compiler: Option<&'static str>,
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
    /// Its last load failed for a transient reason
    /// ([`LoadError::is_transient`]): when it is loaded again.
    retry: Option<Retry>,
}

/// When a file whose load failed for a transient reason is loaded again,
/// and how many times in a row it failed so.
#[derive(Debug, Clone, Copy)]
struct Retry {
    at: std::time::Instant,
    attempts: u32,
}

/// The first wait before a file whose load failed for a transient reason
/// ([`LoadError::is_transient`]: a compiler process killed for memory, a
/// `metadata` call past its deadline on a starved CPU, an I/O error) is
/// loaded again, by the first rescan after it (the periodic one,
/// [`RESCAN_INTERVAL`], or an event's). The wait doubles with each failure
/// in a row, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_secs(30);

/// The longest wait between two loads of a file that keeps failing for a
/// transient reason.
pub const RETRY_MAX: Duration = Duration::from_secs(600);

/// The wait before the `attempts`-th load again: `first`, doubled for each
/// failure before, at most `max`.
fn retry_wait(first: Duration, max: Duration, attempts: u32) -> Duration {
    first
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(20))
        .min(max)
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
    /// The first and the longest wait before a transient failure's file is
    /// loaded again ([`RETRY_FIRST`], [`RETRY_MAX`]).
    retry_backoff: Mutex<(Duration, Duration)>,
    /// The plugins no version of which may run now, by name
    /// ([`PluginDir::set_withheld`]); held while a set is stored, so that
    /// every set stored carries the latest.
    withheld: Mutex<BTreeMap<String, crate::pipeline::Withheld>>,
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
            retry_backoff: Mutex::new((RETRY_FIRST, RETRY_MAX)),
            withheld: Mutex::new(BTreeMap::new()),
        })
    }

    /// Waits `first`, doubling up to `max`, instead of [`RETRY_FIRST`] and
    /// [`RETRY_MAX`] before a file whose load failed for a transient reason
    /// is loaded again (tests).
    pub fn set_retry_backoff(&self, first: Duration, max: Duration) {
        *self.retry_backoff.lock().expect("retry backoff lock") = (first, max);
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
        Self::open_with(config, dir, config.runtime_options(compiler_exe))
    }

    /// [`PluginDir::open`] for a command that runs one pass and ends
    /// (`once`, `plugin check`): with `compiler: tiered`, a plugin compiled
    /// by Winch keeps Winch's code, since a Cranelift compile behind it
    /// would be abandoned at the end, after taking a core from the loads.
    pub fn open_for_one_pass(
        config: &Arc<crate::config::Config>,
        dir: Option<PathBuf>,
        compiler_exe: Option<PathBuf>,
    ) -> nodestatus_runtime::Result<Arc<Self>> {
        let options = nodestatus_runtime::RuntimeOptions {
            tier_up: false,
            ..config.runtime_options(compiler_exe)
        };
        Self::open_with(config, dir, options)
    }

    fn open_with(
        config: &Arc<crate::config::Config>,
        dir: Option<PathBuf>,
        options: nodestatus_runtime::RuntimeOptions,
    ) -> nodestatus_runtime::Result<Arc<Self>> {
        let runtime = Runtime::with_options(options)?;
        let dir = dir.unwrap_or_else(|| config.plugin_dir.clone());
        Ok(Self::new(dir, runtime, config.settings_fn()))
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Replaces the operator's settings (a live config change). The files
    /// whose plugin's settings changed, and those that do not run, are
    /// loaded again with them at the next [`PluginDir::rescan`]; a plugin
    /// whose settings are the same is left as it runs. A file that the new
    /// settings refuse does not keep its running version (loaded under the
    /// old grants).
    pub fn set_settings(&self, settings: SettingsFn) {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        let old = std::mem::replace(
            &mut *self.settings.write().expect("settings lock"),
            settings.clone(),
        );
        let changed =
            |file: &Path| name_of_file(file).is_none_or(|name| old(&name) != settings(&name));
        // Loads under the old settings of a changed plugin are discarded
        // when they end.
        self.loading
            .lock()
            .expect("loading lock")
            .retain(|file, _| !changed(file));
        self.loaded.notify_all();
        for (file, st) in self.files.lock().expect("files lock").iter_mut() {
            if st.plugin.is_some() && !changed(file) {
                continue;
            }
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
                compiler: st.plugin.as_ref().map(|p| p.plugin().tier().as_str()),
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
                    compiler: None,
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

    /// Withholds plugin `name` from every pass from now on (`None`: no
    /// longer): a plugin whose source may give no version of it (an image
    /// the verification policy no longer trusts, [`crate::oci`]). The
    /// active set is replaced at once.
    pub fn set_withheld(&self, name: &str, withheld: Option<crate::pipeline::Withheld>) {
        let mut all = self.withheld.lock().expect("withheld lock");
        match withheld {
            Some(w) => all.insert(name.to_owned(), w),
            None => all.remove(name),
        };
        let set = PluginSet::clone(&self.current.load()).with_withheld(all.values().cloned());
        self.current.store(Arc::new(set));
    }

    /// Stores `setters` as the active set, with the plugins withheld.
    fn store_set(&self, setters: Vec<Setter>) {
        let withheld = self.withheld.lock().expect("withheld lock");
        let set = PluginSet::new(setters).with_withheld(withheld.values().cloned());
        self.current.store(Arc::new(set));
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
    fn a_transient_failures_wait_doubles_up_to_its_bound() {
        let s = Duration::from_secs;
        let waits: Vec<_> = (1..=8).map(|n| retry_wait(s(30), s(600), n)).collect();
        assert_eq!(
            waits,
            [30, 60, 120, 240, 480, 600, 600, 600].map(s).to_vec()
        );
        assert_eq!(retry_wait(s(30), s(600), u32::MAX), s(600));
    }

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
