//! The puller's rounds: the start from the cache, each check of what is
//! due, the loop, and the cache's collection.

use std::collections::BTreeSet;

use nodestatus_registry::{Cache, Client, Digest, Fetcher, Reference};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::check::{Required, read_key};
use super::{COLLECT_EVERY, CONFIG_POLL, Error, Puller, Report, Result, report};
use crate::agent::Nodes;
use crate::config::{Config, ImageSource, PullPolicy};

impl Puller {
    /// For a command that runs one pass and ends (`once`, `plugin list`):
    /// each image plugin of `cfg` as `run` takes it at its start and its
    /// first check. The version in the registry cache when the plugin is
    /// pinned or its `pullPolicy` is `IfNotPresent` (no request); else, or
    /// when the cache holds none, the registry's, pulled and verified (and
    /// cached); with `Always` and the registry failing, the cached version,
    /// as `run` keeps it. Each is written for the loader: the caller's
    /// rescan loads it. One report per plugin: `cached`, `unchanged` or
    /// `pulled` with the digest written in `running`, or the failure, with
    /// `running` the version written anyway, if any.
    pub async fn prepare(&mut self, cfg: &Config) -> Vec<Report> {
        self.start_from_cache(cfg);
        let now = Instant::now();
        // A plugin not in the cache is asked of the registry below, which
        // says why it cannot be had, if it cannot.
        self.pending.clear();
        let mut reports = Vec::new();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = self.slots.get_mut(&name).expect("a slot");
            // What is written counts as what runs: the loader's verdict is
            // the caller's rescan's.
            slot.running = slot.handed.clone();
            let cached = slot.handed.is_some();
            let asks = !cached
                || (!slot.source.reference.is_pinned()
                    && slot.source.pull_policy == PullPolicy::Always);
            if !asks {
                reports.push(self.succeeded(&name, "cached", now));
                continue;
            }
            let report = match self.check(&name).await {
                Ok(Some((fetched, result))) => match self.hand(&name, &fetched, result) {
                    Ok(()) => {
                        let slot = self.slots.get_mut(&name).expect("a slot");
                        let same = slot.running == slot.handed;
                        slot.running = slot.handed.clone();
                        self.succeeded(&name, if same { "unchanged" } else { result }, now)
                    }
                    Err(e) => self.failed(&name, e, now),
                },
                Ok(None) => self.succeeded(&name, "unchanged", now),
                Err(e) => self.failed(&name, e, now),
            };
            reports.push(report);
        }
        reports
    }

    pub(super) fn cache(&mut self) -> Result<Cache> {
        if let Some(c) = &self.cache {
            return Ok(c.clone());
        }
        let cache = Cache::open(&self.cache_dir).map_err(|source| Error::Cache {
            path: self.cache_dir.clone(),
            source,
        })?;
        self.cache = Some(cache.clone());
        Ok(cache)
    }

    /// Takes each image plugin of `cfg` from the registry cache, without
    /// the network, and writes it for the loader; call before the plugin
    /// directory's first
    /// [`PluginDir::rescan`](crate::plugin_dir::PluginDir::rescan). What is
    /// not cached is pulled by [`Puller::tick`].
    pub fn start_from_cache(&mut self, cfg: &Config) {
        let now = Instant::now();
        self.reconcile(cfg, now);
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let source = self.slots[&name].source.clone();
            let result = self.take_from_cache(&name, &source);
            if let Err(e) = result {
                // Whatever an earlier run left there is not this image.
                let _ = std::fs::remove_file(&self.slots[&name].file);
                let untrusted = e.is_untrusted();
                let report = self.failed(&name, e, now);
                if untrusted {
                    // The version cached is signed by no key the policy
                    // trusts: it does not run, and the plugin counts as
                    // failing (its metadata unknown: the config's
                    // affectsReadiness decides, else its failurePolicy)
                    // until one that is loads.
                    let affects_readiness = self.slots[&name].withheld_affects_readiness();
                    self.plugins.set_withheld(
                        &name,
                        Some(crate::pipeline::Withheld {
                            plugin: name.clone(),
                            version: String::new(),
                            affects_readiness,
                            reason: report.message(),
                        }),
                    );
                }
                self.pending.push(report);
            }
        }
    }

    fn take_from_cache(&mut self, name: &str, source: &ImageSource) -> Result<()> {
        let cache = self.cache()?;
        let key = read_key(source)?;
        let fetcher = Fetcher::new(self.client(&source.reference)?, cache);
        let cap = nodestatus_runtime::MAX_PLUGIN_BYTES as u64;
        let reference = &source.reference;
        let last = self
            .last_running(name, reference)
            .map(|d| reference.with_digest(&d));
        let fetched = match last.and_then(|r| {
            fetcher
                .fetch_cached_trusted(&r, cap, key.as_ref().map(Required::trust))
                .ok()
        }) {
            Some(f) => f,
            None => {
                fetcher.fetch_cached_trusted(reference, cap, key.as_ref().map(Required::trust))?
            }
        };
        self.hand(name, &fetched, "cached")
    }

    pub(super) fn client(&self, reference: &Reference) -> Result<Client> {
        Client::new(self.registries.clone())
            .map(|c| c.with_timeout(self.timeout))
            .map_err(|source| Error::Settings {
                reference: reference.clone(),
                source,
            })
    }

    /// One round: applies `cfg`'s images, checks each plugin that is due,
    /// hands new versions to the loader (one rescan for all) and returns
    /// what happened. Never fails: each failure is a [`Report`].
    pub async fn tick(&mut self, cfg: &Config) -> Vec<Report> {
        let now = Instant::now();
        let mut reports = std::mem::take(&mut self.pending);
        let mut rescan = self.reconcile(cfg, now);
        // Written at start (from the cache): the caller's rescan loaded them.
        reports.extend(self.verdicts(now));
        let due: Vec<String> = self
            .slots
            .iter()
            .filter(|(_, s)| s.due.is_some_and(|d| d <= now))
            .map(|(n, _)| n.clone())
            .collect();
        for name in due {
            match self.check(&name).await {
                Ok(Some((fetched, result))) => match self.hand(&name, &fetched, result) {
                    Ok(()) => rescan = true,
                    Err(e) => reports.push(self.failed(&name, e, now)),
                },
                Ok(None) => reports.push(self.succeeded(&name, "unchanged", now)),
                Err(e) if e.is_untrusted() => match self.trusts_running(&name).await {
                    Err(distrust) if distrust.is_untrusted() => {
                        reports.push(self.stop(&name, distrust, now));
                        rescan = true;
                    }
                    _ => reports.push(self.failed(&name, e, now)),
                },
                Err(e) => reports.push(self.failed(&name, e, now)),
            }
        }
        if rescan {
            let plugins = self.plugins.clone();
            let _ = tokio::task::spawn_blocking(move || plugins.rescan()).await;
            let verdicts = self.verdicts(now);
            let refused: Vec<String> = verdicts
                .iter()
                .filter(|r| r.result == "refused")
                .map(|r| r.plugin.clone())
                .collect();
            reports.extend(verdicts);
            if !refused.is_empty() {
                for name in &refused {
                    self.restore(name);
                }
                let plugins = self.plugins.clone();
                let _ = tokio::task::spawn_blocking(move || plugins.rescan()).await;
            }
        }
        let stale = self
            .collected
            .is_none_or(|at| now.duration_since(at) >= COLLECT_EVERY);
        if rescan || stale {
            self.collect(now).await;
        }
        reports
    }

    /// The versions no collection of the cache removes: each that runs or
    /// is written for the loader, each plugin's pinned digest, the digest
    /// each plugin's tag last resolved to (what a start with the registry
    /// down takes), and what each plugin ran last (its record in the
    /// active directory).
    pub fn in_use(&mut self) -> BTreeSet<Digest> {
        let mut keep = BTreeSet::new();
        let cache = self.cache().ok();
        let names: Vec<String> = self.slots.keys().cloned().collect();
        for name in names {
            let slot = &self.slots[&name];
            let reference = slot.source.reference.clone();
            keep.extend(slot.running.iter().chain(&slot.handed).cloned());
            keep.extend(reference.digest().cloned());
            if let Some(d) = cache
                .as_ref()
                .and_then(|c| c.tag(&reference).ok().flatten())
            {
                keep.insert(d);
            }
            keep.extend(self.last_running(&name, &reference));
        }
        keep
    }

    /// Removes from the registry cache what no plugin uses, past the
    /// bounds in force; logged, never failing the round.
    async fn collect(&mut self, now: Instant) {
        self.collected = Some(now);
        let Ok(cache) = self.cache() else { return };
        let keep = self.in_use();
        let limits = self.limits;
        let done = tokio::task::spawn_blocking(move || {
            cache.collect(&keep, &limits, std::time::SystemTime::now())
        })
        .await;
        match done {
            Ok(Ok(c)) if !c.removed.is_empty() => tracing::info!(
                removed = c.removed.len(),
                freed = c.freed,
                kept = c.kept,
                "registry cache: removed the versions no plugin uses, past registryCacheMaxAge or registryCacheMaxSize"
            ),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(
                "registry cache: cannot collect: {}",
                nodestatus_runtime::error_chain(&e)
            ),
            Err(e) => tracing::warn!("registry cache: the collection failed: {e}"),
        }
    }

    /// Makes every plugin due at the next [`Puller::tick`], a pinned one
    /// that runs included (benchmarks, tools).
    pub fn due_now(&mut self) {
        let now = Instant::now();
        for slot in self.slots.values_mut() {
            slot.due = Some(now);
        }
    }

    /// When the next check is due (`None`: none is).
    pub fn next_due(&self) -> Option<Instant> {
        self.slots.values().filter_map(|s| s.due).min()
    }

    /// Checks the images of the config in force until `cancel` fires,
    /// reporting each check to `nodes` (metric, log, `/readyz`, events):
    /// `run`'s one agent, or every node of `simulate`'s fleet, which this
    /// one puller serves (one pull per process).
    pub async fn run(mut self, nodes: impl Nodes, cancel: CancellationToken) {
        loop {
            let cfg = nodes.cfg();
            let reports = tokio::select! {
                r = self.tick(&cfg) => r,
                _ = cancel.cancelled() => return,
            };
            for r in &reports {
                report(&nodes, r);
            }
            let now = Instant::now();
            let wake = self
                .next_due()
                .map_or(now + CONFIG_POLL, |d| d.min(now + CONFIG_POLL));
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => {}
                _ = cancel.cancelled() => return,
            }
        }
    }
}
