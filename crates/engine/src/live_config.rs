//! Live configuration: the config file is read again while the engine runs,
//! and a valid change is put in force at the next pass boundary.
//!
//! - The file is checked every [`POLL`] and on every change that inotify
//!   reports in its directory. Only a change of its *content* counts (a
//!   sha256 of the bytes): a mounted ConfigMap swaps its `..data` symlink
//!   every sync without changing anything, and an editor's save-as-rename
//!   is one change, not three.
//! - What can change live: the plugins' sections (grants, limits, order,
//!   config, fields, pins, enabled, images), `registries`,
//!   `nodeStatusUpdateFrequency`,
//!   `nodeStatusReportFrequency` and `nodeStatusMaxImages`. The plugins
//!   whose settings changed are loaded again under the new ones (the others
//!   run on untouched: [`PluginDir::set_settings`]); one that they refuse
//!   stops (its old grants are not kept).
//! - What cannot ([`restart_only_changes`]): the node's identity and
//!   registration, the directories, the cache, compilation, the runtime
//!   endpoint, the lease duration and companion mode. A change to any of
//!   them is refused whole, with a message that names them: nothing of that
//!   file is applied until it is undone or the engine restarts.
//! - An invalid file is refused whole, logged and counted
//!   (`nodestatus_config_reloads_total{result="refused"}`), and the last
//!   good config stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use crate::agent::Nodes;
use crate::config::{Class, Config};
use crate::plugin_dir::PluginDir;

/// How often the file is read again when no inotify event came.
pub const POLL: Duration = Duration::from_secs(2);

/// The outcome of one check of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The content is the same as the last one seen.
    Unchanged,
    /// A valid change, now in force; what changed.
    Applied(Vec<String>),
    /// The new content is not put in force, and why.
    Refused(String),
}

/// The settings that a running engine cannot change ([`Class::Restart`])
/// that differ between `old` and `new`, by their config key.
pub fn restart_only_changes(old: &Config, new: &Config) -> Vec<&'static str> {
    old.changed(new, Class::Restart)
}

/// The live settings ([`Class::Live`]) and the plugin sections that differ
/// between `old` and `new`.
pub fn live_changes(old: &Config, new: &Config) -> Vec<String> {
    let mut out: Vec<String> = old
        .changed(new, Class::Live)
        .into_iter()
        .map(str::to_owned)
        .collect();
    let names: std::collections::BTreeSet<&String> =
        old.plugins.keys().chain(new.plugins.keys()).collect();
    for name in names {
        if old.plugins.get(name) != new.plugins.get(name) {
            out.push(format!("plugins.{name}"));
        }
    }
    out
}

/// The config file as last seen, and the config in force.
pub struct LiveConfig {
    path: PathBuf,
    load: Box<dyn Fn() -> anyhow::Result<Config> + Send + Sync>,
    seen: Option<[u8; 32]>,
    current: Arc<Config>,
}

impl LiveConfig {
    /// Watches `path`, whose content gave `current`; `load` reads and
    /// validates it again (with the command line's flags over it, as at
    /// start).
    pub fn new(
        path: PathBuf,
        current: Arc<Config>,
        load: impl Fn() -> anyhow::Result<Config> + Send + Sync + 'static,
    ) -> Self {
        let seen = content_hash(&path);
        Self {
            path,
            load: Box::new(load),
            seen,
            current,
        }
    }

    /// The config in force.
    pub fn current(&self) -> Arc<Config> {
        self.current.clone()
    }

    /// Reads the file; a new content is validated and compared with the
    /// config in force.
    pub fn check(&mut self) -> Outcome {
        let hash = content_hash(&self.path);
        if hash == self.seen {
            return Outcome::Unchanged;
        }
        self.seen = hash;
        let new = match (self.load)() {
            Ok(c) => c,
            Err(e) => {
                return Outcome::Refused(format!(
                    "the changed config file is invalid, so the running config stays: {e:#}"
                ));
            }
        };
        let restart = restart_only_changes(&self.current, &new);
        if !restart.is_empty() {
            return Outcome::Refused(format!(
                "the config file changed {}, which take effect only at a restart: nothing of this change is applied; restart nodestatus, or undo {}",
                restart.join(", "),
                if restart.len() == 1 { "it" } else { "them" }
            ));
        }
        let changed = live_changes(&self.current, &new);
        self.current = Arc::new(new);
        Outcome::Applied(changed)
    }
}

/// The sha256 of the file's content (`None` when it cannot be read).
fn content_hash(path: &Path) -> Option<[u8; 32]> {
    nodestatus_runtime::files::read_regular(path, crate::config::MAX_CONFIG_BYTES)
        .ok()
        .map(|bytes| Sha256::digest(&bytes).into())
}

/// Checks the config file every [`POLL`] and on inotify events in its
/// directory ([`crate::dir_watch`]) until `cancel`, and puts each valid
/// change in force: the config of each node (`run`'s one agent, or every
/// node of `simulate`'s fleet, each its own derived from the file's), then
/// the plugin directory's settings and one rescan.
pub async fn watch(
    mut live: LiveConfig,
    nodes: impl Nodes,
    plugins: Arc<PluginDir>,
    cancel: CancellationToken,
) {
    // The directory, not the file: a ConfigMap's and an editor's updates
    // replace the file (or the symlink to it).
    let dir = match live.path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let stop = cancel.clone();
    let watcher = crate::dir_watch::spawn(
        "nodestatus-config-watch",
        &dir,
        POLL,
        crate::dir_watch::Inotify::BestEffort,
        move || stop.is_cancelled(),
        move || apply(&mut live, &nodes, &plugins),
    );
    cancel.cancelled().await;
    if let Ok(thread) = watcher {
        let _ = tokio::task::spawn_blocking(move || thread.join()).await;
    }
}

/// One check of the file, and what follows from it.
fn apply(live: &mut LiveConfig, nodes: &dyn Nodes, plugins: &Arc<PluginDir>) {
    let counted = |result: &'static str| {
        nodes.each(&mut |agent| agent.metrics().config_reload(result));
    };
    match live.check() {
        Outcome::Unchanged => {}
        Outcome::Refused(why) => {
            tracing::error!(file = %live.path.display(), "{why}");
            counted("refused");
        }
        Outcome::Applied(changed) => {
            let cfg = live.current();
            nodes.set_config(cfg.clone());
            plugins.set_settings(cfg.settings_fn());
            plugins.rescan();
            tracing::info!(
                file = %live.path.display(),
                "config reloaded, in force from the next pass: {}",
                if changed.is_empty() {
                    "no setting changed".to_owned()
                } else {
                    changed.join(", ")
                }
            );
            counted("applied");
        }
    }
}
