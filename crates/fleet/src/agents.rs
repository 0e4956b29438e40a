//! The fleet's agents as one audience of the plugin sources
//! ([`nodestatus_engine::agent::Nodes`]): `simulate` runs one registry
//! puller and one config watcher for the whole process, and each of them
//! reports to, and configures, every node through [`Agents`].
//!
//! - **The config**: the file's config is the *base*; each node runs its
//!   own, derived from it by [`Machine::config`](crate::Machine::config) (its name, labels and
//!   taint). A live change of the file derives every node's config anew and
//!   puts it in force from the node's next pass; a node (re)started after
//!   it starts with it.
//! - **The handles**: an agent's handle is kept from its start until it
//!   stops (a restart of simulate's rollout makes a new agent, with a new
//!   handle). A report goes to the nodes that run when it is made; a node
//!   not started yet (the ramp) starts with the plugin set in force.
//! - **The events** of a source (a version pulled, a pull refused) are
//!   spread over one status update period (`nodeStatusUpdateFrequency`),
//!   node i's at its place [`spread`](crate::spread)`(i)` in it: N nodes
//!   each with its own puller would hear of a new version spread over
//!   their checks, not in one second. The metrics are counted at once.

use std::sync::{Arc, Mutex, PoisonError, RwLock};

use nodestatus_engine::agent::{Agent, AgentHandle, Nodes};
use nodestatus_engine::config::Config;
use nodestatus_runtime::EventType;

use crate::Fleet;

/// The fleet's running agents and the base config in force.
pub struct Agents {
    fleet: Arc<Fleet>,
    base: RwLock<Arc<Config>>,
    /// Node i's handle while its agent runs.
    handles: Vec<Mutex<Option<AgentHandle>>>,
}

impl Agents {
    /// No agent running yet; `base` in force.
    pub fn new(fleet: Arc<Fleet>, base: Arc<Config>) -> Self {
        let handles = fleet.machines.iter().map(|_| Mutex::new(None)).collect();
        Self {
            fleet,
            base: RwLock::new(base),
            handles,
        }
    }

    /// Node `i`'s config: derived from the base in force.
    pub fn config(&self, i: usize) -> Arc<Config> {
        let base = self.base.read().unwrap_or_else(PoisonError::into_inner);
        Arc::new(self.fleet.machines[i].config(&base))
    }

    /// Makes node `i`'s agent with `make` from its config in force, and
    /// keeps its handle until [`Agents::stopped`]. A live change either
    /// happened before (the agent starts with it) or reaches its handle
    /// after.
    pub fn start(&self, i: usize, make: impl FnOnce(Arc<Config>) -> Agent) -> Agent {
        let mut slot = self.handles[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let agent = make(self.config(i));
        *slot = Some(agent.handle());
        agent
    }

    /// Node `i`'s agent has stopped.
    pub fn stopped(&self, i: usize) {
        *self.handles[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// How many agents run now.
    pub fn running(&self) -> usize {
        let mut n = 0;
        self.each(&mut |_| n += 1);
        n
    }
}

impl Nodes for Agents {
    fn cfg(&self) -> Arc<Config> {
        self.base
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_config(&self, cfg: Arc<Config>) {
        *self.base.write().unwrap_or_else(PoisonError::into_inner) = cfg.clone();
        for (i, slot) in self.handles.iter().enumerate() {
            let slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(handle) = slot.as_ref() {
                handle.set_config(Arc::new(self.fleet.machines[i].config(&cfg)));
            }
        }
    }

    fn each(&self, f: &mut dyn FnMut(&AgentHandle)) {
        for handle in self.handles.iter().filter_map(running) {
            f(&handle);
        }
    }

    fn record_event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        let period = self.cfg().node_status_update_frequency;
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.each(&mut |h| h.record_event(event_type, reason, message, plugin));
            return;
        };
        let (reason, message) = (Arc::<str>::from(reason), Arc::<str>::from(message));
        let plugin = plugin.map(Arc::<str>::from);
        for (i, slot) in self.handles.iter().enumerate() {
            let Some(handle) = running(slot) else {
                continue;
            };
            let delay = period.mul_f64(crate::spread(i));
            let (reason, message, plugin) = (reason.clone(), message.clone(), plugin.clone());
            runtime.spawn(async move {
                tokio::time::sleep(delay).await;
                // An agent that stopped meanwhile drops it.
                handle.record_event(event_type, &reason, &message, plugin.as_deref());
            });
        }
    }
}

/// The handle in `slot`, if its agent runs: a clone, so that nothing runs
/// under the node's lock.
fn running(slot: &Mutex<Option<AgentHandle>>) -> Option<AgentHandle> {
    slot.lock().unwrap_or_else(PoisonError::into_inner).clone()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use nodestatus_engine::agent::client::{NodeClient, Traffic};
    use nodestatus_engine::config::ConfigFile;
    use nodestatus_engine::plugin_dir::PluginDir;
    use tokio_util::sync::CancellationToken;

    use super::*;
    use crate::Template;

    fn config(dir: &Path, report: &str) -> Arc<Config> {
        let yaml = format!(
            "pluginDir: {}\ncacheDir: {}\nnodeStatusReportFrequency: {report}\n",
            dir.join("plugins").display(),
            dir.join("cache").display()
        );
        Arc::new(
            ConfigFile::parse(&yaml, Path::new("test.yaml"))
                .and_then(ConfigFile::validate)
                .unwrap(),
        )
    }

    /// A config change reaches each running node as its own config (its
    /// name kept), none that is stopped; a node started after it starts
    /// with it; and a report reaches exactly the nodes that run.
    #[tokio::test]
    async fn a_live_change_reaches_every_running_node_as_its_own_config() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("plugins")).unwrap();
        let template = Template {
            nodes: 3,
            name_prefix: "sim".into(),
            seed: 7,
            flapping: 0.0,
            flap_period: Duration::from_secs(60),
            flap_from: Duration::ZERO,
        };
        let fleet = Arc::new(Fleet::create(template, &dir.path().join("machines")).unwrap());
        let base = config(dir.path(), "5m");
        let plugins = PluginDir::open(&base, None, None).unwrap();
        // No server answers: these agents act only on request, and a
        // config change is only a step of their state.
        let kube = kube::Client::try_from(kube::Config::new("http://127.0.0.1:9".parse().unwrap()))
            .unwrap();
        let agents = Arc::new(Agents::new(fleet.clone(), base));
        let cancel = CancellationToken::new();
        let mut handles = Vec::new();
        for i in [0, 2] {
            let agent = agents.start(i, |cfg| {
                let client =
                    NodeClient::new(kube.clone(), &cfg.node_name, Arc::new(Traffic::default()));
                Agent::new(cfg, client, plugins.clone())
                    .on_request()
                    .without_watch()
            });
            handles.push(agent.handle());
            tokio::spawn(agent.run(cancel.child_token()));
        }
        assert_eq!(agents.running(), 2);
        assert_eq!(handles[0].cfg().node_name, fleet.machines[0].name);

        agents.set_config(config(dir.path(), "1m"));
        assert_eq!(
            agents.cfg().node_status_report_frequency,
            Duration::from_secs(60)
        );
        for (h, i) in handles.iter().zip([0, 2]) {
            let mut waited = 0;
            while h.cfg().node_status_report_frequency != Duration::from_secs(60) {
                assert!(waited < 100, "node {i} never took the change");
                tokio::time::sleep(Duration::from_millis(20)).await;
                waited += 1;
            }
            assert_eq!(h.cfg().node_name, fleet.machines[i].name);
            assert!(
                h.cfg().node_labels.contains_key(crate::SIMULATED_LABEL),
                "node {i}'s own config is derived anew"
            );
        }
        // Node 1 starts after the change: with it.
        let later = agents.config(1);
        assert_eq!(later.node_name, fleet.machines[1].name);
        assert_eq!(later.node_status_report_frequency, Duration::from_secs(60));

        agents.stopped(2);
        let mut told = Vec::new();
        agents.each(&mut |h| told.push(h.name().to_owned()));
        assert_eq!(told, [fleet.machines[0].name.clone()]);
        cancel.cancel();
    }
}
