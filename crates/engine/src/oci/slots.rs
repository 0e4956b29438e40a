//! Each plugin's slot: brought in line with the config, handed a new
//! version, told the loader's verdict, failed, stopped or restored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nodestatus_registry::{Digest, Fetched, Reference};
use tokio::time::Instant;

use super::check::key_id;
use super::{Error, MAX_BACKOFF, MIN_BACKOFF, Puller, Report, Result, Slot};
use crate::config::{Config, FailurePolicy, ImageSource, PullPolicy};

/// What the puller records beside each component it wrote and the loader
/// accepted: the version to start from at the next start.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Running {
    image: String,
    digest: String,
}
impl Puller {
    /// Brings the slots in line with `cfg`; returns whether a plugin went
    /// away (its file is removed: the next rescan unloads it).
    pub(super) fn reconcile(&mut self, cfg: &Config, now: Instant) -> bool {
        let wanted: BTreeMap<&String, (&ImageSource, Option<bool>)> = cfg
            .plugins
            .iter()
            .filter(|(_, p)| p.enabled)
            .filter_map(|(name, p)| p.image.as_ref().map(|i| (name, (i, p.affects_readiness))))
            .collect();
        let registries_changed = self.registries != cfg.registries;
        self.registries = cfg.registries.clone();
        if self.limits != cfg.registry_cache {
            self.limits = cfg.registry_cache;
            self.collected = None;
        }
        let gone: Vec<String> = self
            .slots
            .keys()
            .filter(|n| !wanted.contains_key(n))
            .cloned()
            .collect();
        for name in &gone {
            let slot = self.slots.remove(name).expect("a slot");
            let _ = std::fs::remove_file(&slot.file);
            let _ = std::fs::remove_file(self.running_file(name));
            self.plugins.set_source_problem(name, None);
            self.plugins.set_withheld(name, None);
        }
        let mut changed = !gone.is_empty();
        for (name, (source, affects_readiness)) in wanted {
            let key_id = key_id(source);
            if let Some(slot) = self.slots.get_mut(name) {
                slot.affects_readiness = affects_readiness;
            }
            match self.slots.get_mut(name) {
                Some(slot) if slot.source == *source && slot.key_id == key_id => {
                    if registries_changed {
                        slot.due = Some(now);
                        slot.backoff = MIN_BACKOFF;
                    }
                }
                Some(slot) => {
                    // Another reference or key: check it now; the running
                    // version stays until the new one loads, or until the
                    // check finds that the new policy does not trust it.
                    slot.source = source.clone();
                    slot.key_id = key_id;
                    slot.refused = None;
                    // Checked again in full (a new key verifies it again).
                    slot.handed = None;
                    slot.due = Some(now);
                    slot.backoff = MIN_BACKOFF;
                }
                None => {
                    changed = true;
                    self.slots.insert(
                        name.clone(),
                        Slot {
                            source: source.clone(),
                            file: self.active_dir.join(format!("{name}.wasm")),
                            handed: None,
                            running: None,
                            refused: None,
                            awaiting: None,
                            due: Some(now),
                            backoff: MIN_BACKOFF,
                            failing: None,
                            key_id,
                            stopped: None,
                            affects_readiness,
                        },
                    );
                }
            }
        }
        if changed {
            self.plugins
                .set_extra_files(self.slots.values().map(|s| s.file.clone()).collect());
        }
        !gone.is_empty()
    }

    fn running_file(&self, name: &str) -> PathBuf {
        self.active_dir.join(format!(".{name}.running.json"))
    }

    /// The version that ran last for `name`, if it is of `image`.
    pub(super) fn last_running(&self, name: &str, image: &Reference) -> Option<Digest> {
        let text = std::fs::read(self.running_file(name)).ok()?;
        let r: Running = serde_json::from_slice(&text).ok()?;
        (r.image == image.to_string())
            .then(|| r.digest.parse().ok())
            .flatten()
    }

    /// Writes `fetched`'s component as `name`'s file for the loader.
    pub(super) fn hand(
        &mut self,
        name: &str,
        fetched: &Fetched,
        result: &'static str,
    ) -> Result<()> {
        let slot = self.slots.get(name).expect("a slot");
        write_atomic(&slot.file, &fetched.artifact.bytes)?;
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.handed = Some(fetched.artifact.digest.clone());
        slot.awaiting = Some(result);
        Ok(())
    }

    /// A failed check of `name`: kept, retried with backoff, reported.
    pub(super) fn failed(&mut self, name: &str, e: Error, now: Instant) -> Report {
        let slot = self.slots.get_mut(name).expect("a slot");
        let error = nodestatus_runtime::error_chain(&e);
        let new_failure = slot.failing.as_deref() != Some(error.as_str());
        slot.failing = Some(error.clone());
        slot.due = Some(now + slot.backoff);
        let cap = slot.source.pull_interval.clamp(MIN_BACKOFF, MAX_BACKOFF);
        slot.backoff = (slot.backoff * 2).min(cap);
        let digest = match &e {
            Error::Refused { digest, .. } => Some(digest.clone()),
            _ => None,
        };
        let report = Report {
            plugin: name.to_owned(),
            reference: slot.source.reference.clone(),
            result: e.kind(),
            digest,
            running: slot.running.clone(),
            stopped: slot.stopped.clone(),
            stopped_now: false,
            error: Some(error),
            new_failure,
            failure_policy: slot.source.failure_policy,
        };
        self.plugins
            .set_source_problem(name, Some(report.message()));
        if slot.running.is_none()
            && slot.stopped.is_none()
            && slot.source.failure_policy == FailurePolicy::Closed
        {
            // Never pulled, or no version loads: it fails closed.
            self.plugins.set_withheld(
                name,
                Some(crate::pipeline::Withheld {
                    plugin: name.to_owned(),
                    version: String::new(),
                    affects_readiness: slot.withheld_affects_readiness(),
                    reason: report.message(),
                }),
            );
        }
        report
    }

    /// A good check of `name`.
    pub(super) fn succeeded(&mut self, name: &str, result: &'static str, now: Instant) -> Report {
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.failing = None;
        slot.backoff = MIN_BACKOFF;
        // A pinned digest never changes; a tag resolved once
        // (`IfNotPresent`) is not asked again while a version of it runs.
        slot.due = match (slot.source.reference.is_pinned(), slot.source.pull_policy) {
            (true, _) | (false, PullPolicy::IfNotPresent) => None,
            (false, PullPolicy::Always) => Some(now + slot.source.pull_interval),
        };
        slot.stopped = None;
        self.plugins.set_source_problem(name, None);
        self.plugins.set_withheld(name, None);
        Report {
            plugin: name.to_owned(),
            reference: slot.source.reference.clone(),
            result,
            digest: slot.running.clone(),
            running: slot.running.clone(),
            stopped: None,
            stopped_now: false,
            error: None,
            new_failure: false,
            failure_policy: slot.source.failure_policy,
        }
    }

    /// Reads the loader's verdict on each file written since the last
    /// rescan.
    pub(super) fn verdicts(&mut self, now: Instant) -> Vec<Report> {
        let status: BTreeMap<PathBuf, crate::plugin_dir::FileStatus> = self
            .plugins
            .status()
            .into_iter()
            .map(|s| (s.file.clone(), s))
            .collect();
        let mut reports = Vec::new();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = self.slots.get_mut(&name).expect("a slot");
            let Some(result) = slot.awaiting.take() else {
                continue;
            };
            let digest = slot.handed.clone().expect("a handed digest");
            let written = std::fs::read(&slot.file)
                .map(|b| nodestatus_runtime::sha256_hex(&b))
                .ok();
            let st = status.get(&slot.file);
            let accepted = st.is_some_and(|s| s.sha256.is_some() && s.sha256 == written);
            if accepted {
                slot.running = Some(digest.clone());
                slot.refused = None;
                let record = Running {
                    image: slot.source.reference.to_string(),
                    digest: digest.to_string(),
                };
                let path = self.running_file(&name);
                if let Err(e) = write_atomic(&path, &serde_json::to_vec(&record).expect("json")) {
                    tracing::warn!(plugin = name, "cannot record the running version: {e}");
                }
                reports.push(self.succeeded(&name, result, now));
            } else {
                let error = st
                    .and_then(|s| s.error.clone())
                    .unwrap_or_else(|| "not loaded".to_owned());
                slot.refused = Some((digest.clone(), error.clone()));
                let e = Error::Refused {
                    reference: slot.source.reference.clone(),
                    digest,
                    error,
                };
                reports.push(self.failed(&name, e, now));
            }
        }
        reports
    }

    /// Puts the running version back in `name`'s file after the loader
    /// refused another, so that a reload (new settings, a restart) loads
    /// the good one.
    pub(super) fn restore(&mut self, name: &str) {
        let slot = &self.slots[name];
        let (Some(running), Some(handed)) = (slot.running.clone(), slot.handed.clone()) else {
            return;
        };
        if running == handed {
            return;
        }
        let reference = slot.source.reference.with_digest(&running);
        let Ok(cache) = self.cache() else { return };
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        match cache.get(&reference, &running, cap) {
            Ok(Some(artifact)) => {
                let file = self.slots[name].file.clone();
                if write_atomic(&file, &artifact.bytes).is_ok() {
                    self.slots.get_mut(name).expect("a slot").handed = Some(running);
                }
            }
            _ => tracing::warn!(
                plugin = name,
                "the running version {running} is no longer in the registry cache: a restart loads the refused one"
            ),
        }
    }

    /// Stops `name`'s running version, which the verification policy in
    /// force does not trust (`e` says why): its file is removed (the next
    /// rescan unloads it and releases its fields), and the plugin is
    /// withheld from each pass, so that the node's readiness follows its
    /// `affects-readiness`, until a version the policy trusts loads. Checked
    /// again with the backoff of a failure.
    pub(super) fn stop(&mut self, name: &str, e: Error, now: Instant) -> Report {
        let set = self.plugins.current();
        let setter = set.setters().iter().find(|s| s.name() == name);
        let affects_readiness = setter.is_some_and(|s| s.affects_readiness());
        let version = setter.map_or_else(String::new, |s| s.plugin().metadata().version.clone());
        let slot = self.slots.get_mut(name).expect("a slot");
        slot.stopped = slot.running.take();
        slot.handed = None;
        slot.awaiting = None;
        let _ = std::fs::remove_file(&slot.file);
        let _ = std::fs::remove_file(self.running_file(name));
        let mut report = self.failed(name, e, now);
        report.stopped_now = true;
        report.new_failure = true;
        let message = report.message();
        self.plugins.set_withheld(
            name,
            Some(crate::pipeline::Withheld {
                plugin: name.to_owned(),
                version,
                affects_readiness,
                reason: message,
            }),
        );
        report
    }
}

/// Writes `bytes` to `path` (its directory made owner-only if missing),
/// atomically and durably ([`nodestatus_files::write_atomic`]), so that a
/// rescan never reads half a file and a crash leaves a whole one.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let err = |source| Error::Write {
        path: path.to_owned(),
        source,
    };
    let dir = path.parent().expect("a file in a directory");
    std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
        .create(dir)
        .map_err(err)?;
    nodestatus_files::write_atomic(path, bytes).map_err(err)
}
