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
//! - A plugin that starts on Winch's code (`compiler: tiered`) gets
//!   Cranelift's from a compile the directory starts once no load runs, one
//!   at a time.
//! - A plugin is named by its file: `gpu.wasm` (or `gpu_x.wasm` for
//!   `gpu-x`, as cargo writes it) must declare the name `gpu`, so grants and
//!   settings follow the operator's file name, never a name a plugin claims.
//! - A file is opened without blocking and must be a regular file within
//!   the size cap ([`nodestatus_runtime::read_plugin_file`]), so a FIFO or a
//!   huge file swapped in cannot hang or flood a rescan.
//!
//! It is built as the agent is: [`state`] holds the directory as a value
//! ([`DirState`]: the files seen, what is loaded, the loads under way with
//! their tokens, the failures and when they are tried again, the
//! Cranelift compiles waiting or running, what the registry puller gave,
//! the settings) and its pure step, whose rules are tested in virtual
//! time; `driver.rs` is the one thread that owns the state, performs the
//! step's actions (the listing, the reads, the loads and the compiles on
//! threads of their own, the set stored, the listeners told) and
//! publishes the active set and each file's state after every step.
//! [`PluginDir`] is a handle: its methods send the driver a command and
//! read the published views; no lock guards the state.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Sender};
use std::time::Duration;

use crate::config::SettingsFn;
use crate::pipeline::{PluginSet, Setter};
use driver::{Msg, View};
pub use load::is_plugin_file_name;
use load::load_setter;
#[cfg(doc)]
use nodestatus_runtime::read_plugin_file;
use nodestatus_runtime::{LoadError, Runtime};
use state::DirInput;

pub use crate::dir_watch::DEBOUNCE;
pub use state::{DirAction, DirState, RETRY_FIRST, RETRY_MAX, retry_wait};

mod driver;
mod load;
pub mod state;

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

/// A function told of every reload event ([`PluginDir::on_event`]).
type Listener = Box<dyn Fn(&ReloadEvent) + Send + Sync>;

/// The longest one load can take: a compile is stopped at
/// `compileTimeout`, at most an hour.
const LONGEST_LOAD: Duration = Duration::from_secs(3600 + 60);

/// A watched plugin directory and the plugin set loaded from it: a handle
/// on its driver (`plugin_dir/driver.rs`), which alone holds its [`DirState`], and the
/// views the driver publishes after every step.
pub struct PluginDir {
    dir: PathBuf,
    runtime: Runtime,
    commands: Sender<Msg>,
    view: Arc<View>,
    /// The driver's thread, joined when the directory is dropped.
    driver: Option<std::thread::JoinHandle<()>>,
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

impl PluginDir {
    /// A plugin directory; nothing is loaded until [`PluginDir::rescan`].
    /// Starts its driver, on a thread of its own, which ends when the
    /// directory is dropped.
    pub fn new(dir: impl Into<PathBuf>, runtime: Runtime, settings: SettingsFn) -> Arc<Self> {
        let dir = dir.into();
        let (commands, view, driver) = driver::spawn(dir.clone(), runtime.clone(), settings);
        Arc::new(Self {
            dir,
            runtime,
            commands,
            view,
            driver: Some(driver),
        })
    }

    /// Sends `input` to the driver and waits until it is applied and the
    /// views published.
    fn apply(&self, input: DirInput) {
        let (ack, done) = mpsc::channel();
        if self.commands.send(Msg::Apply(input, ack)).is_ok() {
            let _ = done.recv();
        }
    }

    /// Waits `first`, doubling up to `max`, instead of [`RETRY_FIRST`] and
    /// [`RETRY_MAX`] before a file whose load failed for a transient reason
    /// is loaded again (tests).
    pub fn set_retry_backoff(&self, first: Duration, max: Duration) {
        self.apply(DirInput::RetryBackoff { first, max });
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
        self.apply(DirInput::SettingsChanged(settings));
    }

    /// The runtime plugins are loaded into.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The active plugin set. Hold the `Arc` for a whole pass.
    pub fn current(&self) -> Arc<PluginSet> {
        self.view.current.load_full()
    }

    /// Calls `f` for every reload event from now on (metrics, status), on
    /// the directory's driver: `f` must not wait on the directory (a
    /// rescan, a setting), only read it.
    pub fn on_event(&self, f: impl Fn(&ReloadEvent) + Send + Sync + 'static) {
        let _ = self.commands.send(Msg::Listen(Box::new(f)));
    }

    /// Each file's state.
    pub fn status(&self) -> Vec<FileStatus> {
        let view = self.view.status.load();
        let loading: HashMap<&PathBuf, f64> = view
            .loading
            .iter()
            .map(|(f, since, _)| (f, since.elapsed().as_secs_f64()))
            .collect();
        let mut status: Vec<FileStatus> = view
            .files
            .iter()
            .map(|(file, st)| {
                let plugin = st.plugin.as_ref().map(|(p, _)| &p.setter);
                FileStatus {
                    file: file.clone(),
                    plugin: plugin.map(|p| p.name().to_owned()),
                    version: plugin.map(|p| p.plugin().metadata().version.clone()),
                    sha256: plugin.map(|p| p.plugin().sha256().to_owned()),
                    error: st.error.clone(),
                    load_seconds: st.took.map(|d| d.as_secs_f64()),
                    compiled: st.compiled,
                    compiler: plugin.map(|p| p.plugin().tier().as_str()),
                    loading_seconds: loading.get(file).copied(),
                }
            })
            .collect();
        for (file, secs) in &loading {
            if !status.iter().any(|s| &s.file == *file) {
                status.push(FileStatus {
                    file: (*file).clone(),
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
    pub fn set_extra_files(&self, files: BTreeSet<PathBuf>) {
        self.apply(DirInput::ExtraFiles(files));
    }

    /// Records why plugin `name`'s source cannot give the version it
    /// should (`None`: it can again); `/readyz` shows these.
    pub fn set_source_problem(&self, name: &str, problem: Option<String>) {
        self.apply(DirInput::SourceProblem {
            plugin: name.to_owned(),
            problem,
        });
    }

    /// Withholds plugin `name` from every pass from now on (`None`: no
    /// longer): a plugin whose source may give no version of it (an image
    /// the verification policy no longer trusts, [`crate::oci`]). The
    /// active set is replaced at once.
    pub fn set_withheld(&self, name: &str, withheld: Option<crate::pipeline::Withheld>) {
        self.apply(DirInput::Withheld {
            plugin: name.to_owned(),
            withheld,
        });
    }

    /// What [`PluginDir::set_source_problem`] recorded, by plugin name.
    pub fn source_problems(&self) -> BTreeMap<String, String> {
        self.view.status.load().source_problems.clone()
    }

    /// Brings the loaded set in line with the directory, waits for every
    /// load it started (and for those of the same content already under
    /// way), and returns what changed. Safe to call at any time, from any
    /// thread but the listeners' ([`PluginDir::on_event`]); rescans run one
    /// step at a time on the driver. (`once`, `plugin list`, tests: the
    /// engine itself uses [`PluginDir::rescan_in_background`].)
    ///
    /// Files are read ([`read_plugin_file`]) by the driver and loaded on
    /// threads of their own, side by side, so a slow load never blocks
    /// readers. The loads of one rescan are applied together, when the
    /// last ends: no "loaded" line is ever written for a plugin that is
    /// then refused for its name.
    pub fn rescan(&self) -> Vec<ReloadEvent> {
        self.rescan_with(true)
    }

    /// Brings the loaded set in line with the directory without waiting for
    /// a compile: files that are gone, unchanged, unreadable or disabled are
    /// settled at once (their events returned), and every file to load is
    /// loaded on a thread of its own, and put in the active set (and told
    /// to the listeners) when it is done. A pass runs the plugins that are
    /// ready; one that becomes ready runs from the next pass on.
    ///
    /// A file already loading with the same content is not loaded twice; a
    /// load whose file changed, went away, or whose settings changed while
    /// it ran is discarded (a newer one replaces it).
    pub fn rescan_in_background(self: &Arc<Self>) -> Vec<ReloadEvent> {
        self.rescan_with(false)
    }

    fn rescan_with(&self, wait: bool) -> Vec<ReloadEvent> {
        let (reply, events) = mpsc::channel();
        if self.commands.send(Msg::Rescan { wait, reply }).is_err() {
            return Vec::new();
        }
        events.recv_timeout(LONGEST_LOAD).unwrap_or_default()
    }

    /// Waits until no load of a file that the precompile cache holds is
    /// running, or `bound` passed; returns whether none is. A start waits
    /// for these (milliseconds each) so that the node registers with the
    /// plugins it had, and never for a compile.
    pub fn wait_for_cached(&self, bound: Duration) -> bool {
        self.wait_loading(bound, true)
    }

    /// Waits until no load runs, or `bound` passed; returns whether none
    /// does.
    pub fn wait_idle(&self, bound: Duration) -> bool {
        self.wait_loading(bound, false)
    }

    fn wait_loading(&self, bound: Duration, cached_only: bool) -> bool {
        let (reply, idle) = mpsc::channel();
        if self
            .commands
            .send(Msg::WaitIdle { cached_only, reply })
            .is_err()
        {
            return true;
        }
        idle.recv_timeout(bound).is_ok()
    }

    /// The files being loaded now, each with how long it has been loading
    /// and whether it is being compiled (else taken from the precompile
    /// cache).
    pub fn loading(&self) -> Vec<(PathBuf, Duration, bool)> {
        self.view
            .status
            .load()
            .loading
            .iter()
            .map(|(f, since, cached)| (f.clone(), since.elapsed(), !cached))
            .collect()
    }

    /// Loads a component: `bytes`, under the plugin name of `file` (its
    /// stem, see [`nodestatus_runtime::name_of_file`]), with `config`. The one entry point of
    /// every component the engine runs, whatever brought its bytes (the
    /// directory, a registry pull): the check before the compile, the
    /// memo of refused files, the precompile cache and the compile slots
    /// all apply. Blocks for as long as the compile takes; a plugin that
    /// starts on Winch's code gets Cranelift's from a thread of its own
    /// (the directory's driver runs these one at a time instead).
    pub fn load_component(
        &self,
        file: &Path,
        bytes: &[u8],
        config: &Arc<crate::config::PluginConfig>,
    ) -> Result<Setter, Refusal> {
        let (setter, tier_up) = load_setter(&self.runtime, file, bytes, config)?;
        if let Some(t) = tier_up {
            t.spawn();
        }
        Ok(setter)
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

impl Drop for PluginDir {
    /// Stops the driver and waits for it to drop the state (the plugins
    /// with it), unless the last handle goes on the driver's own thread (a
    /// listener's).
    fn drop(&mut self) {
        let _ = self.commands.send(Msg::Stop);
        if let Some(driver) = self.driver.take()
            && driver.thread().id() != std::thread::current().id()
        {
            let _ = driver.join();
        }
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
