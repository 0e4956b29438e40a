//! The plugin directory as a value: its whole [`DirState`], the
//! [`DirInput`]s it takes, the [`DirAction`]s it asks for, and the one
//! [`DirState::step`] that turns an input into actions.
//!
//! `step` does no I/O, reads no clock and takes no lock: the time comes
//! with each input (`tokio::time::Instant`, so a test runs minutes of
//! retries at once), and what it cannot do itself (list the directory,
//! read a file, load a component, compile Cranelift's code, store the set,
//! tell the listeners) it returns as an action. The driver
//! (`plugin_dir/driver.rs`) performs them and feeds the results back.
//!
//! The state is generic over the loaded setter `S` and the Cranelift
//! compile `T` that is to replace Winch's code, so that the rules are
//! tested without a component (`super::tests`); the engine runs it with
//! [`Setter`] and [`TierUp`].
//!
//! The rules:
//! - a rescan lists the directory (and the registry's files,
//!   [`DirInput::ExtraFiles`]), reads each file whose stamp changed or
//!   whose retry is due, and loads each one whose content changed, unless
//!   a load of that content is under way; a file gone unloads its plugin;
//! - a load ends in the set only if it is still the file's latest: a load
//!   superseded (the file changed again, went away, or its plugin's
//!   settings changed) is discarded;
//! - a new version replaces the old one only when it loads; a failed one
//!   leaves the old running, except after a settings change (the old one
//!   ran under the old grants) or when the plugin is disabled;
//! - a load that failed for a reason that may pass is tried again, at the
//!   first rescan after a wait that doubles with each failure in a row
//!   ([`retry_wait`]); a refusal the file earns is not;
//! - one plugin per name: the file whose stem is the name exactly wins,
//!   then the first by path;
//! - a waited rescan applies its own loads together, when the last ends,
//!   so that no "loaded" event is ever told of a plugin then refused;
//! - a plugin that starts on Winch's code gets Cranelift's, one compile at
//!   a time and only while no load runs, unless it was replaced meanwhile.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::ReloadEvent;
use crate::config::SettingsFn;
use crate::pipeline::{Setter, Withheld};
use nodestatus_runtime::{TierUp, name_of_file};

/// The first wait before a file whose load failed for a transient reason
/// ([`nodestatus_runtime::LoadError::is_transient`]: a compiler process
/// killed for memory, a `metadata` call past its deadline on a starved
/// CPU, an I/O error) is loaded again, by the first rescan after it (the
/// periodic one, [`super::RESCAN_INTERVAL`], or an event's). The wait
/// doubles with each failure in a row, up to [`RETRY_MAX`].
pub const RETRY_FIRST: Duration = Duration::from_secs(30);

/// The longest wait between two loads of a file that keeps failing for a
/// transient reason.
pub const RETRY_MAX: Duration = Duration::from_secs(600);

/// The wait before the `attempts`-th load again: `first`, doubled for each
/// failure before, at most `max`.
pub fn retry_wait(first: Duration, max: Duration, attempts: u32) -> Duration {
    first
        .saturating_mul(1u32 << attempts.saturating_sub(1).min(20))
        .min(max)
}

pub use io::*;

/// A transient failure's next load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    /// When the first rescan after it loads the file again.
    pub at: Instant,
    /// Failures in a row of this content.
    pub attempts: u32,
}

/// Where Cranelift's compile of a file's plugin is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierUpPhase {
    /// Waits for its turn: no load runs and no other compile does.
    Queued,
    /// Runs.
    Running,
}

/// What the directory knows of one file.
#[derive(Debug, Clone)]
pub struct FileState<S> {
    /// Its stamp when last read.
    pub stamp: Stamp,
    /// The sha256 of its content last read (empty: to read again).
    pub sha256: String,
    /// The plugin running from it, and the load that gave it.
    pub plugin: Option<(Loaded<S>, Token)>,
    /// The last load error, if the file on disk is not what runs.
    pub error: Option<String>,
    /// How long its last load took.
    pub took: Option<Duration>,
    /// Whether its last load compiled it.
    pub compiled: bool,
    /// The operator's settings changed since it was loaded: if the new
    /// settings refuse it, the running version is not kept.
    pub settings_changed: bool,
    /// When it is loaded again after a transient failure.
    pub retry: Option<Retry>,
    /// Cranelift's compile of its plugin, while one waits or runs.
    pub tier_up: Option<TierUpPhase>,
}

/// A load under way.
#[derive(Debug, Clone)]
pub struct Loading {
    /// The content being loaded.
    pub sha256: String,
    /// Its stamp at the listing.
    pub stamp: Stamp,
    /// Since when.
    pub since: Instant,
    /// Whether the precompile cache holds it (no compile).
    pub cached: bool,
    /// Which load.
    pub token: Token,
    /// The waited rescan that started it, which applies it.
    batch: Option<RescanId>,
}

/// What a load settled, to apply.
struct Settled<S, T> {
    file: PathBuf,
    stamp: Stamp,
    sha256: String,
    took: Option<Duration>,
    token: Token,
    result: LoadResult<S, T>,
}

/// A rescan under way.
struct Rescan<S, T> {
    wait: bool,
    /// The files gone at its listing.
    gone: Vec<PathBuf>,
    /// After its reads: the events so far.
    events: Vec<ReloadEvent>,
    /// After its reads: the loads it waits for.
    pending: BTreeSet<Token>,
    /// Its own loads that ended, applied together at its end.
    parked: Vec<Settled<S, T>>,
    /// Whether its reads are done.
    read: bool,
}

/// The whole state of a plugin directory.
pub struct DirState<S = Setter, T = TierUp> {
    settings: SettingsFn,
    backoff: (Duration, Duration),
    extra_files: BTreeSet<PathBuf>,
    source_problems: BTreeMap<String, String>,
    withheld: BTreeMap<String, Withheld>,
    files: BTreeMap<PathBuf, FileState<S>>,
    loading: BTreeMap<PathBuf, Loading>,
    next_token: Token,
    rescans: BTreeMap<RescanId, Rescan<S, T>>,
    idle_waits: BTreeMap<WaitId, bool>,
    /// Cranelift's compiles waiting for their turn.
    tier_ups: VecDeque<(PathBuf, Token, T)>,
    /// The one that runs.
    tiering: Option<(PathBuf, Token)>,
    /// The setters of the active set.
    active: Vec<S>,
}

impl<S: Clone, T> DirState<S, T> {
    /// A directory with nothing loaded, under `settings`.
    pub fn new(settings: SettingsFn) -> Self {
        Self {
            settings,
            backoff: (RETRY_FIRST, RETRY_MAX),
            extra_files: BTreeSet::new(),
            source_problems: BTreeMap::new(),
            withheld: BTreeMap::new(),
            files: BTreeMap::new(),
            loading: BTreeMap::new(),
            next_token: 0,
            rescans: BTreeMap::new(),
            idle_waits: BTreeMap::new(),
            tier_ups: VecDeque::new(),
            tiering: None,
            active: Vec::new(),
        }
    }

    /// What it knows of each file.
    pub fn files(&self) -> &BTreeMap<PathBuf, FileState<S>> {
        &self.files
    }

    /// The loads under way, by file.
    pub fn loading(&self) -> &BTreeMap<PathBuf, Loading> {
        &self.loading
    }

    /// Why each plugin's source cannot give the version it should.
    pub fn source_problems(&self) -> &BTreeMap<String, String> {
        &self.source_problems
    }

    /// The setters of the active set.
    pub fn active(&self) -> &[S] {
        &self.active
    }

    /// Takes one input at `now`; returns what to do.
    pub fn step(&mut self, input: DirInput<S, T>, now: Instant) -> Vec<DirAction<S, T>> {
        let mut out = Vec::new();
        match input {
            DirInput::Rescan { id, wait } => {
                self.rescans.insert(
                    id,
                    Rescan {
                        wait,
                        gone: Vec::new(),
                        events: Vec::new(),
                        pending: BTreeSet::new(),
                        parked: Vec::new(),
                        read: false,
                    },
                );
                out.push(DirAction::List {
                    id,
                    extra_files: self.extra_files.iter().cloned().collect(),
                });
            }
            DirInput::Listed { id, listing } => self.listed(id, listing, now, &mut out),
            DirInput::Read { id, files } => self.read(id, files, now, &mut out),
            DirInput::Loaded {
                file,
                token,
                took,
                result,
            } => self.loaded(file, token, took, result, now, &mut out),
            DirInput::TieredUp { file, token, .. } => {
                if self.tiering.as_ref() == Some(&(file.clone(), token)) {
                    self.tiering = None;
                    if let Some(st) = self.files.get_mut(&file) {
                        st.tier_up = None;
                    }
                }
            }
            DirInput::SettingsChanged(settings) => self.settings_changed(settings),
            DirInput::ExtraFiles(files) => self.extra_files = files,
            DirInput::SourceProblem { plugin, problem } => {
                match problem {
                    Some(p) => self.source_problems.insert(plugin, p),
                    None => self.source_problems.remove(&plugin),
                };
            }
            DirInput::Withheld { plugin, withheld } => {
                match withheld {
                    Some(w) => self.withheld.insert(plugin, w),
                    None => self.withheld.remove(&plugin),
                };
                out.push(self.store());
            }
            DirInput::RetryBackoff { first, max } => self.backoff = (first, max),
            DirInput::WaitIdle { id, cached_only } => {
                self.idle_waits.insert(id, cached_only);
            }
        }
        self.settle_waits(now, &mut out);
        self.next_tier_up(&mut out);
        out
    }

    /// The set to store: the active setters, and the plugins withheld.
    fn store(&self) -> DirAction<S, T> {
        DirAction::Store {
            setters: self.active.clone(),
            withheld: self.withheld.values().cloned().collect(),
        }
    }

    /// Whether a retry of `file` is due at `now`.
    fn due(&self, file: &Path, now: Instant) -> bool {
        self.files
            .get(file)
            .and_then(|st| st.retry)
            .is_some_and(|r| r.at <= now)
    }

    fn listed(
        &mut self,
        id: RescanId,
        listing: Result<Vec<(PathBuf, Stamp)>, String>,
        now: Instant,
        out: &mut Vec<DirAction<S, T>>,
    ) {
        let listing = match listing {
            Ok(l) => l,
            Err(e) => {
                out.push(DirAction::ListFailed(e));
                self.rescans.remove(&id);
                out.push(DirAction::RescanDone {
                    id,
                    events: Vec::new(),
                });
                return;
            }
        };
        let present: BTreeSet<&PathBuf> = listing.iter().map(|(p, _)| p).collect();
        // A load of a file that is gone is discarded when it ends.
        let vanished: Vec<PathBuf> = self
            .loading
            .keys()
            .chain(self.files.keys())
            .filter(|f| !present.contains(f))
            .cloned()
            .collect();
        for f in vanished {
            self.forget_load(&f);
        }
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|f| !present.contains(f))
            .cloned()
            .collect();
        let to_read: Vec<(PathBuf, Stamp)> = listing
            .into_iter()
            .filter(|(file, stamp)| {
                self.files.get(file).is_none_or(|st| st.stamp != *stamp) || self.due(file, now)
            })
            .collect();
        let Some(rescan) = self.rescans.get_mut(&id) else {
            return;
        };
        rescan.gone = gone;
        if to_read.is_empty() {
            self.read(id, Vec::new(), now, out);
        } else {
            out.push(DirAction::Read { id, files: to_read });
        }
    }

    fn read(
        &mut self,
        id: RescanId,
        files: Vec<(PathBuf, Stamp, ReadResult)>,
        now: Instant,
        out: &mut Vec<DirAction<S, T>>,
    ) {
        let Some(wait) = self.rescans.get(&id).map(|r| r.wait) else {
            return;
        };
        let mut same = Vec::new();
        let mut settled = Vec::new();
        for (file, stamp, result) in files {
            let (sha256, bytes, cached) = match result {
                ReadResult::Vanished => continue,
                ReadResult::Failed { error, transient } => {
                    self.forget_load(&file);
                    settled.push(Settled {
                        file,
                        stamp,
                        sha256: String::new(),
                        took: None,
                        token: Token::MAX,
                        result: LoadResult::Failed { error, transient },
                    });
                    continue;
                }
                ReadResult::Content {
                    sha256,
                    bytes,
                    cached,
                } => (sha256, bytes, cached),
            };
            let due = self.due(&file, now);
            if !due && self.files.get(&file).is_some_and(|st| st.sha256 == sha256) {
                self.forget_load(&file);
                same.push((file, stamp));
                continue;
            }
            if self.loading.get(&file).is_some_and(|l| l.sha256 == sha256) {
                // Already loading, this very content.
                continue;
            }
            let name = name_of_file(&file).unwrap_or_default();
            let config = Arc::new((self.settings)(&name));
            if !config.enabled {
                self.forget_load(&file);
                settled.push(Settled {
                    file,
                    stamp,
                    sha256,
                    took: None,
                    token: Token::MAX,
                    result: LoadResult::Disabled(name),
                });
                continue;
            }
            // A load of older content is superseded.
            self.forget_load(&file);
            let token = self.next_token;
            self.next_token += 1;
            self.loading.insert(
                file.clone(),
                Loading {
                    sha256,
                    stamp,
                    since: now,
                    cached,
                    token,
                    batch: wait.then_some(id),
                },
            );
            out.push(DirAction::Load(Job {
                file,
                bytes,
                config,
                token,
            }));
        }
        let gone = self
            .rescans
            .get_mut(&id)
            .map(|r| std::mem::take(&mut r.gone))
            .unwrap_or_default();
        let events = self.apply(gone, same, settled, now, out);
        let pending: BTreeSet<Token> = self.loading.values().map(|l| l.token).collect();
        let rescan = self.rescans.get_mut(&id).expect("the rescan");
        rescan.events = events;
        rescan.read = true;
        if wait {
            // Its own loads, and those of the same content already under
            // way: what it returns has every file's outcome.
            rescan.pending = pending;
        }
    }

    /// Forgets the load of `file` under way, if any, and one that ended
    /// but waits for its rescan's end: its result is discarded, and no
    /// rescan waits for it.
    fn forget_load(&mut self, file: &Path) {
        let token = self.loading.remove(file).map(|l| l.token);
        for r in self.rescans.values_mut() {
            if let Some(t) = token {
                r.pending.remove(&t);
            }
            r.parked.retain(|s| s.file != file);
        }
    }

    fn loaded(
        &mut self,
        file: PathBuf,
        token: Token,
        took: Duration,
        result: LoadResult<S, T>,
        now: Instant,
        out: &mut Vec<DirAction<S, T>>,
    ) {
        if self.loading.get(&file).map(|l| l.token) != Some(token) {
            // Superseded: a newer load, the file gone, or new settings.
            return;
        }
        let l = self.loading.remove(&file).expect("the load");
        for r in self.rescans.values_mut() {
            r.pending.remove(&token);
        }
        let settled = Settled {
            file,
            stamp: l.stamp,
            sha256: l.sha256,
            took: Some(took),
            token,
            result,
        };
        match l.batch.and_then(|id| self.rescans.get_mut(&id)) {
            Some(rescan) => rescan.parked.push(settled),
            None => {
                self.apply(Vec::new(), Vec::new(), vec![settled], now, out);
            }
        }
    }

    /// Ends each rescan and each wait whose loads are all done.
    fn settle_waits(&mut self, now: Instant, out: &mut Vec<DirAction<S, T>>) {
        let done: Vec<RescanId> = self
            .rescans
            .iter()
            .filter(|(_, r)| r.read && r.pending.is_empty())
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            let mut rescan = self.rescans.remove(&id).expect("a rescan");
            if !rescan.parked.is_empty() {
                let parked = std::mem::take(&mut rescan.parked);
                let events = self.apply(Vec::new(), Vec::new(), parked, now, out);
                rescan.events.extend(events);
            }
            out.push(DirAction::RescanDone {
                id,
                events: rescan.events,
            });
        }
        let loading = &self.loading;
        let idle: Vec<WaitId> = self
            .idle_waits
            .iter()
            .filter(|(_, cached_only)| !loading.values().any(|l| l.cached || !**cached_only))
            .map(|(id, _)| *id)
            .collect();
        for id in idle {
            self.idle_waits.remove(&id);
            out.push(DirAction::Idle(id));
        }
    }

    /// Starts the next Cranelift compile when none runs and no load does.
    fn next_tier_up(&mut self, out: &mut Vec<DirAction<S, T>>) {
        if self.tiering.is_some() || !self.loading.is_empty() {
            return;
        }
        while let Some((file, token, job)) = self.tier_ups.pop_front() {
            let Some(st) = self.files.get_mut(&file) else {
                continue;
            };
            if st.plugin.as_ref().map(|p| p.1) != Some(token) {
                // Replaced or stopped meanwhile.
                continue;
            }
            st.tier_up = Some(TierUpPhase::Running);
            self.tiering = Some((file.clone(), token));
            out.push(DirAction::TierUp { file, token, job });
            return;
        }
    }

    fn settings_changed(&mut self, settings: SettingsFn) {
        let old = std::mem::replace(&mut self.settings, settings.clone());
        let changed =
            |file: &Path| name_of_file(file).is_none_or(|name| old(&name) != settings(&name));
        // Loads under the old settings of a changed plugin are discarded
        // when they end.
        let stale: Vec<PathBuf> = self
            .loading
            .keys()
            .filter(|f| changed(f))
            .cloned()
            .collect();
        for f in stale {
            self.forget_load(&f);
        }
        for (file, st) in self.files.iter_mut() {
            if st.plugin.is_some() && !changed(file) {
                continue;
            }
            // Neither the stamp nor the hash matches any more: reloaded.
            st.stamp.len = u64::MAX;
            st.sha256.clear();
            st.settings_changed = true;
        }
    }
}

mod apply;
mod io;
#[cfg(test)]
mod tests;
