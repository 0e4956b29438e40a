//! What a rescan or a load settles, applied to the files and the active
//! set: the events, the retries, one plugin per name.

use std::collections::BTreeMap;
use std::path::PathBuf;

use tokio::time::Instant;

use super::{
    DirAction, DirState, FileState, LoadResult, Retry, Settled, Stamp, TierUpPhase, retry_wait,
};
use crate::plugin_dir::ReloadEvent;

impl<S: Clone, T> DirState<S, T> {
    /// Applies the files `gone`, those whose content is the `same` under a
    /// new stamp, and the `loads` settled, at `now`; asks for the new set
    /// to be stored and the events told, and returns the events.
    pub(super) fn apply(
        &mut self,
        gone: Vec<PathBuf>,
        same: Vec<(PathBuf, Stamp)>,
        loads: Vec<Settled<S, T>>,
        now: Instant,
        out: &mut Vec<DirAction<S, T>>,
    ) -> Vec<ReloadEvent> {
        let mut events = Vec::new();
        for file in gone {
            if let Some(FileState {
                plugin: Some((p, _)),
                ..
            }) = self.files.remove(&file)
            {
                events.push(ReloadEvent::Unloaded {
                    file,
                    plugin: p.name,
                });
            }
        }
        for (file, stamp) in same {
            if let Some(st) = self.files.get_mut(&file) {
                st.stamp = stamp;
            }
        }

        // New and changed files; their events wait for the name check.
        let mut pending: BTreeMap<PathBuf, ReloadEvent> = BTreeMap::new();
        for settled in loads {
            let (file, state, event) = self.settle(settled, now, out);
            pending.insert(file.clone(), event);
            self.files.insert(file, state);
        }

        // One plugin per name. A plugin is named by its file, so two files
        // claim one name only as `a-b.wasm` and `a_b.wasm`: the file whose
        // stem is the name exactly wins, then the first by path.
        let mut claims: BTreeMap<String, Vec<(bool, PathBuf)>> = BTreeMap::new();
        for (file, st) in &self.files {
            if let Some((p, _)) = &st.plugin {
                let exact = file.file_stem().is_some_and(|s| *s == *p.name);
                claims
                    .entry(p.name.clone())
                    .or_default()
                    .push((!exact, file.clone()));
            }
        }
        let mut setters = Vec::new();
        for (name, mut claimants) in claims {
            claimants.sort();
            let winner = claimants[0].1.clone();
            for (_, file) in &claimants[1..] {
                let st = self.files.get_mut(file).expect("claimant is a file");
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
            let (p, _) = self.files[&winner]
                .plugin
                .as_ref()
                .expect("winner has a plugin");
            setters.push(p.setter.clone());
        }
        events.extend(pending.into_values());
        self.active = setters;
        if !events.is_empty() {
            out.push(self.store());
            out.extend(events.iter().cloned().map(DirAction::Emit));
        }
        events
    }

    /// One load's new state of its file, and its event.
    fn settle(
        &mut self,
        settled: Settled<S, T>,
        now: Instant,
        out: &mut Vec<DirAction<S, T>>,
    ) -> (PathBuf, FileState<S>, ReloadEvent) {
        let Settled {
            file,
            stamp,
            sha256,
            took,
            token,
            result,
        } = settled;
        let old = self.files.get(&file);
        let previous = old.and_then(|st| st.plugin.clone());
        let settings_changed = old.is_some_and(|st| st.settings_changed);
        let previous_tier_up = old.and_then(|st| st.tier_up);
        let version = |p: &(crate::plugin_dir::state::Loaded<S>, u64)| p.0.version.clone();
        match result {
            LoadResult::Ready { loaded, tier_up } => {
                let (plugin, version, sha) = (
                    loaded.name.clone(),
                    loaded.version.clone(),
                    loaded.sha256.clone(),
                );
                let event = match &previous {
                    None => ReloadEvent::Loaded {
                        file: file.clone(),
                        plugin,
                        version,
                        sha256: sha,
                    },
                    Some(_) => ReloadEvent::Reloaded {
                        file: file.clone(),
                        plugin,
                        version,
                        sha256: sha,
                        because: if settings_changed { "settings" } else { "file" },
                    },
                };
                let queued = tier_up.is_some();
                self.tier_ups.retain(|(f, _, _)| *f != file);
                if let Some(job) = tier_up {
                    self.tier_ups.push_back((file.clone(), token, job));
                }
                let state = FileState {
                    stamp,
                    sha256,
                    compiled: loaded.compiled,
                    took,
                    plugin: Some((loaded, token)),
                    error: None,
                    settings_changed: false,
                    retry: None,
                    tier_up: queued.then_some(TierUpPhase::Queued),
                };
                (file, state, event)
            }
            LoadResult::Disabled(plugin) => {
                // A disabled plugin stops whatever made the file load again.
                let event = ReloadEvent::Disabled {
                    file: file.clone(),
                    plugin: plugin.clone(),
                    stopped: previous.as_ref().map(version),
                };
                let error = format!("plugin {plugin:?} is disabled in the config");
                let state = FileState {
                    stamp,
                    sha256,
                    compiled: false,
                    took,
                    plugin: None,
                    error: Some(error),
                    settings_changed: false,
                    retry: None,
                    tier_up: None,
                };
                (file, state, event)
            }
            LoadResult::Failed { error, transient } => {
                // A transient failure: loaded again after a wait that
                // doubles with each such failure in a row of this content.
                let retry = transient.then(|| {
                    let attempts = old
                        .filter(|st| st.sha256 == sha256)
                        .and_then(|st| st.retry)
                        .map_or(1, |r| r.attempts.saturating_add(1));
                    let wait = retry_wait(self.backoff.0, self.backoff.1, attempts);
                    out.push(DirAction::Retry {
                        file: file.clone(),
                        attempts,
                        wait,
                    });
                    Retry {
                        at: now + wait,
                        attempts,
                    }
                });
                // Refused under new settings (a new pin, a grant now
                // refused...): the version loaded under the old ones stops
                // too.
                let kept = if settings_changed { None } else { previous };
                let event = ReloadEvent::Failed {
                    file: file.clone(),
                    error: error.clone(),
                    kept: kept.as_ref().map(version),
                };
                let tier_up = kept.as_ref().and(previous_tier_up);
                let state = FileState {
                    stamp,
                    sha256,
                    compiled: false,
                    took,
                    plugin: kept,
                    error: Some(error),
                    settings_changed: false,
                    retry,
                    tier_up,
                };
                (file, state, event)
            }
        }
    }
}
