//! A rescan: what changed in the directory, the loads it needs (side by
//! side, in the background or waited for), and the new set swapped in.

#[allow(unused_imports)]
use super::*;

/// The longest one load can take: a compile is stopped at
/// `compileTimeout`, at most an hour.
const LONGEST_LOAD: Duration = Duration::from_secs(3600 + 60);

impl PluginDir {
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
        let (events, in_flight) = self.rescan_locked();
        // Loads that a background rescan started, of the content this one
        // found: this rescan did not start them again, and waits for them
        // too (after giving the lock back: their end takes it), so that
        // what it returns, `status` included, has every file's outcome.
        if !in_flight.is_empty() {
            self.wait_loading(LONGEST_LOAD, |l| in_flight.contains(&l.token));
        }
        events
    }

    /// [`PluginDir::rescan`] under the rescan lock: its events, and the
    /// tokens of the loads already under way that it left to their own
    /// threads.
    fn rescan_locked(&self) -> (Vec<ReloadEvent>, Vec<u64>) {
        let _one_at_a_time = self.rescan_lock.lock().expect("rescan lock");
        let Some((mut plan, jobs)) = self.plan() else {
            return (Vec::new(), Vec::new());
        };
        let in_flight: Vec<u64> = {
            let own: std::collections::HashSet<u64> = jobs.iter().map(|j| j.token).collect();
            let loading = self.loading.lock().expect("loading lock");
            loading
                .values()
                .map(|l| l.token)
                .filter(|t| !own.contains(t))
                .collect()
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
        (events, in_flight)
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

    pub(super) fn wait_loading(&self, bound: Duration, counts: impl Fn(&Loading) -> bool) -> bool {
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
    pub(super) fn load(&self, job: Job) -> Load {
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
    pub(super) fn finish(&self, token: u64, load: Load) {
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
    pub(super) fn plan(&self) -> Option<(Plan, Vec<Job>)> {
        let listing = match self.list() {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(dir = %self.dir.display(), error = %e, "cannot read the plugin directory; keeping the loaded plugins");
                return None;
            }
        };
        // Per file: its stamp, its sha256, and whether a transient failure's
        // retry is due (then it is loaded again, unchanged as it is).
        let now = std::time::Instant::now();
        let known: HashMap<PathBuf, (Stamp, String, bool)> = self
            .files
            .lock()
            .expect("files lock")
            .iter()
            .map(|(p, st)| {
                let due = st.retry.is_some_and(|r| r.at <= now);
                (p.clone(), (st.stamp.clone(), st.sha256.clone(), due))
            })
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
            let due = known.get(file).is_some_and(|k| k.2);
            if known.get(file).is_some_and(|k| k.0 == *stamp) && !due {
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
            if known.get(file).is_some_and(|k| k.1 == sha) && !due {
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
    pub(super) fn apply(&self, plan: Plan) -> Vec<ReloadEvent> {
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
            // A transient failure: loaded again after a wait that doubles
            // with each such failure in a row of this content.
            let retry = match &result {
                Err(Refusal::Failed(e)) if e.is_transient() => {
                    let attempts = files
                        .get(&file)
                        .filter(|st| st.sha256 == sha)
                        .and_then(|st| st.retry)
                        .map_or(1, |r| r.attempts.saturating_add(1));
                    let (first, max) = *self.retry_backoff.lock().expect("retry backoff lock");
                    let wait = super::retry_wait(first, max, attempts);
                    tracing::warn!(
                        file = %file.display(),
                        attempts,
                        "the load failed for a reason that may pass; loading the file again in {wait:?}"
                    );
                    Some(super::Retry {
                        at: std::time::Instant::now() + wait,
                        attempts,
                    })
                }
                _ => None,
            };
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
                                because: if settings_changed { "settings" } else { "file" },
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
                        retry: None,
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
                        retry,
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
            self.store_set(plugins);
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
}
