//! What the directory's step takes ([`DirInput`]) and asks for
//! ([`DirAction`]), and the values they carry.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::super::ReloadEvent;
use crate::config::{PluginConfig, SettingsFn};
use crate::pipeline::{Setter, Withheld};
use nodestatus_runtime::TierUp;

/// What tells a file's versions apart without reading it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// Its length.
    pub len: u64,
    /// When it was last written.
    pub modified: Option<SystemTime>,
    /// Its inode: a file renamed into place has a new one.
    pub inode: u64,
}

/// Which load: a result whose token is no longer its file's is discarded.
pub type Token = u64;

/// Which rescan a listing, a read or a reply belongs to.
pub type RescanId = u64;

/// Which wait for the loads to end ([`DirInput::WaitIdle`]).
pub type WaitId = u64;

/// What reading a file gave.
#[derive(Debug)]
pub enum ReadResult {
    /// Its content.
    Content {
        /// Its sha256, in hex.
        sha256: String,
        /// The bytes.
        bytes: Vec<u8>,
        /// Whether the precompile cache holds its code (no compile).
        cached: bool,
    },
    /// It went away between the listing and the read.
    Vanished,
    /// It could not be read.
    Failed {
        /// Why, with every cause.
        error: String,
        /// Whether it may pass (then the file is read again later).
        transient: bool,
    },
}

/// A loaded plugin: what the step reads of it, and the setter itself.
#[derive(Debug, Clone)]
pub struct Loaded<S> {
    /// The setter.
    pub setter: S,
    /// Its name.
    pub name: String,
    /// Its version.
    pub version: String,
    /// The sha256 of its component.
    pub sha256: String,
    /// Whether its load compiled it (it was not in the precompile cache).
    pub compiled: bool,
}

/// What loading a file gave.
#[derive(Debug)]
pub enum LoadResult<S, T> {
    /// It runs; `tier_up`: Cranelift's compile that is to replace Winch's
    /// code.
    Ready {
        /// The plugin.
        loaded: Loaded<S>,
        /// Cranelift's compile behind Winch's code, if any.
        tier_up: Option<T>,
    },
    /// Its plugin is disabled in the config.
    Disabled(String),
    /// It could not be loaded.
    Failed {
        /// Why, with every cause.
        error: String,
        /// Whether it may pass ([`nodestatus_runtime::LoadError::is_transient`]).
        transient: bool,
    },
}

/// A file to load.
#[derive(Debug)]
pub struct Job {
    /// The file.
    pub file: PathBuf,
    /// Its content.
    pub bytes: Vec<u8>,
    /// The operator's settings of its plugin.
    pub config: Arc<PluginConfig>,
    /// Which load.
    pub token: Token,
}

/// What the directory takes.
pub enum DirInput<S = Setter, T = TierUp> {
    /// Bring the loaded set in line with the directory; `wait`: its reply
    /// waits for every load it needs.
    Rescan {
        /// Which rescan.
        id: RescanId,
        /// Whether its reply waits for the loads.
        wait: bool,
    },
    /// The listing a [`DirAction::List`] asked for.
    Listed {
        /// Which rescan.
        id: RescanId,
        /// Each plugin file and its stamp, or why the directory could not
        /// be read.
        listing: Result<Vec<(PathBuf, Stamp)>, String>,
    },
    /// The files a [`DirAction::Read`] asked for.
    Read {
        /// Which rescan.
        id: RescanId,
        /// Each file, its stamp at the listing, and what reading it gave.
        files: Vec<(PathBuf, Stamp, ReadResult)>,
    },
    /// A load ended.
    Loaded {
        /// The file.
        file: PathBuf,
        /// Which load.
        token: Token,
        /// How long it took.
        took: Duration,
        /// What it gave.
        result: LoadResult<S, T>,
    },
    /// Cranelift's compile of a plugin ended.
    TieredUp {
        /// The file.
        file: PathBuf,
        /// The load whose plugin it compiled.
        token: Token,
        /// Whether its code runs now.
        ok: bool,
    },
    /// The operator's settings changed (a live config change).
    SettingsChanged(SettingsFn),
    /// The files outside the directory loaded as if they were in it.
    ExtraFiles(BTreeSet<PathBuf>),
    /// Why a plugin's source cannot give the version it should (`None`:
    /// it can again).
    SourceProblem {
        /// The plugin.
        plugin: String,
        /// Why.
        problem: Option<String>,
    },
    /// A plugin none of whose versions may run (`None`: no longer).
    Withheld {
        /// The plugin.
        plugin: String,
        /// Why, and what the pass reports.
        withheld: Option<Withheld>,
    },
    /// The first and the longest wait before a transient failure's file
    /// is loaded again.
    RetryBackoff {
        /// The first wait.
        first: Duration,
        /// The longest.
        max: Duration,
    },
    /// Tell when no load runs ([`DirAction::Idle`]); `cached_only`: no
    /// load of a file the precompile cache holds.
    WaitIdle {
        /// Which wait.
        id: WaitId,
        /// Whether only loads from the precompile cache count.
        cached_only: bool,
    },
}

/// What the directory asks its driver to do.
#[derive(Debug)]
pub enum DirAction<S = Setter, T = TierUp> {
    /// List the directory's plugin files and `extra_files`
    /// ([`DirInput::Listed`]).
    List {
        /// Which rescan.
        id: RescanId,
        /// The registry's files, listed too.
        extra_files: Vec<PathBuf>,
    },
    /// Read these files ([`DirInput::Read`]).
    Read {
        /// Which rescan.
        id: RescanId,
        /// Each file and its stamp at the listing.
        files: Vec<(PathBuf, Stamp)>,
    },
    /// Load a component on a thread of its own ([`DirInput::Loaded`]).
    Load(Job),
    /// Run Cranelift's compile of a plugin on a thread of its own
    /// ([`DirInput::TieredUp`]).
    TierUp {
        /// The file.
        file: PathBuf,
        /// The load whose plugin it compiles.
        token: Token,
        /// The compile.
        job: T,
    },
    /// Make these the active set.
    Store {
        /// The setters.
        setters: Vec<S>,
        /// The plugins withheld.
        withheld: Vec<Withheld>,
    },
    /// Tell the log and the listeners.
    Emit(ReloadEvent),
    /// A load failed for a reason that may pass: it is tried again.
    Retry {
        /// The file.
        file: PathBuf,
        /// Its failures in a row.
        attempts: u32,
        /// The wait.
        wait: Duration,
    },
    /// The directory could not be listed: the loaded plugins are kept.
    ListFailed(String),
    /// A rescan is done: what it changed.
    RescanDone {
        /// Which rescan.
        id: RescanId,
        /// Its events.
        events: Vec<ReloadEvent>,
    },
    /// No load that the wait counts runs.
    Idle(WaitId),
}
