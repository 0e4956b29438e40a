//! `nodestatus simulate --nodes N`: N simulated nodes in one process
//! against one apiserver, each a full agent (its own name, lease, loops,
//! jitter and ownership) whose setters are the real plugins, run over the
//! facts of a simulated machine ([`nodestatus_fleet`]).
//!
//! All agents share one wasmtime engine, one plugin set (with its
//! precompile cache) and one API client (one connection pool); each has its
//! own watch of its node, as a kubelet has. Nodes start spread over
//! `--ramp`; SIGUSR1 restarts every agent, spread over `--rollout-over` (a
//! DaemonSet rollout); SIGTERM and SIGINT stop them all and leave the nodes
//! as they are.
//!
//! The plugins come from the same sources as `run`'s, each run once for the
//! whole process ([`Agents`] fans them out to the nodes): the plugin
//! directory, watched (a file dropped, replaced or removed loads once); the
//! config file, read again while it runs (a valid change derives every
//! node's config anew and reloads the plugins whose settings changed); and
//! the registry puller for the config's `image:` plugins: one pull per
//! process, not one per node, and each node told of it (its metric and
//! events) as its own puller would tell it. A version that fails
//! verification or loading keeps the one that runs, on every node.
//!
//! The credential must be allowed to write nodes, their status and leases
//! (as kwok's is; deploy/kubernetes/simulate/rbac.yaml): never a real
//! node's. A `system:node:<name>` identity, or one in `system:nodes`, is
//! refused at start.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use nodestatus_engine::agent::Agent;
use nodestatus_engine::agent::client::{NodeClient, Traffic};
use nodestatus_engine::config::{Config, GoDuration, Layers};
use nodestatus_engine::live_config::{self, LiveConfig};
use nodestatus_engine::oci::Puller;
use nodestatus_engine::plugin_dir::PluginDir;
use nodestatus_fleet::{Agents, Fleet, Template};

/// Run N simulated nodes in one process against one apiserver.
///
/// Each node runs the real setters over a simulated machine of its own
/// (capacity, labels, a memory pressure that flips for --flapping of
/// them). Needs a credential allowed to write nodes, nodes/status and
/// leases (deploy/kubernetes/simulate/rbac.yaml), never a node's own.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Kubeconfig of the simulator's credential. Default: $KUBECONFIG,
    /// then the in-cluster config.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// How many nodes.
    #[arg(long)]
    pub nodes: usize,
    /// Node i is named `<prefix>-<i>`.
    #[arg(long, default_value = "nodestatus-sim")]
    pub name_prefix: String,
    /// The seed of the machines' shapes and ids and of each node's jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// The fraction of nodes whose memory pressure flips (0.01: 1 %).
    #[arg(long, default_value_t = 0.0)]
    pub flapping: f64,
    /// How long a flapping node stays in each state.
    #[arg(long, default_value = "60s")]
    pub flap_period: GoDuration,
    /// How long after the start the flapping begins.
    #[arg(long, default_value = "0s")]
    pub flap_from: GoDuration,
    /// The nodes start spread evenly over this window. Default: 20 ms a
    /// node (50 registrations a second).
    #[arg(long)]
    pub ramp: Option<GoDuration>,
    /// On SIGUSR1, every agent restarts, spread evenly over this window (a
    /// DaemonSet rollout).
    #[arg(long, default_value = "2m")]
    pub rollout_over: GoDuration,
    /// Where the simulated machines' files go: a folder a node, removed at
    /// exit (and the directory, when simulate made it). Default: a new
    /// directory in $TMPDIR.
    #[arg(long)]
    pub state_dir: Option<PathBuf>,
    /// The settings of every node (nodeName and hostnameOverride are each
    /// node's own), read again while it runs. Without --config: the config
    /// that scripts/run.sh gives `nodestatus run` on this machine
    /// ($NODESTATUS_RUN_CONFIG, else
    /// ${XDG_CONFIG_HOME:-~/.config}/nodestatus/config.yaml) when it
    /// exists, so that the simulated nodes are granted what the real one
    /// is; else the embedded default.
    #[command(flatten)]
    pub layers: Layers,
}

/// Errors of `simulate` before its nodes start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The credential is a node's own.
    #[error(
        "the credential is node identity {user:?} (groups {groups:?}): simulate needs one allowed to write every simulated node and lease, never a real node's (see deploy/kubernetes/simulate/rbac.yaml)"
    )]
    NodeCredential {
        /// Its user name.
        user: String,
        /// Its groups.
        groups: Vec<String>,
    },
    /// No kubeconfig and not in a cluster.
    #[error(
        "no credential: give --kubeconfig (or $KUBECONFIG) of an identity allowed to write nodes and leases; simulate never starts the embedded apiserver"
    )]
    NoCredential,
}

/// `nodestatus simulate`: the fleet on a tokio runtime, until SIGTERM or
/// SIGINT.
pub fn execute(args: Args) -> anyhow::Result<std::process::ExitCode> {
    super::on_tokio(run(args))
}

async fn connect(o: &Args) -> anyhow::Result<kube::Config> {
    let path = o
        .kubeconfig
        .clone()
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
    if let Some(path) = path {
        let kc = kube::config::Kubeconfig::read_from(&path)
            .with_context(|| format!("reading kubeconfig {}", path.display()))?;
        return kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .with_context(|| format!("using kubeconfig {}", path.display()));
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return kube::Config::incluster().context("reading the in-cluster config");
    }
    Err(Error::NoCredential.into())
}

/// Refuses a node's own credential: asks the apiserver who it is
/// (SelfSubjectReview). An apiserver that cannot say (before 1.28) is
/// let through with a warning.
async fn check_identity(client: &kube::Client) -> anyhow::Result<()> {
    let body = serde_json::json!({
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "SelfSubjectReview",
    });
    let req = http::Request::post("/apis/authentication.k8s.io/v1/selfsubjectreviews")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(&body)?)
        .context("building the SelfSubjectReview")?;
    let review: serde_json::Value =
        match tokio::time::timeout(Duration::from_secs(10), client.request(req)).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => {
                tracing::warn!("could not ask the apiserver who the credential is: {e}");
                return Ok(());
            }
            Err(_) => anyhow::bail!("the apiserver did not answer a SelfSubjectReview in 10s"),
        };
    let info = &review["status"]["userInfo"];
    let user = info["username"].as_str().unwrap_or_default().to_owned();
    let groups: Vec<String> = info["groups"]
        .as_array()
        .map(|g| {
            g.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if user.starts_with("system:node:") || groups.iter().any(|g| g == "system:nodes") {
        return Err(Error::NodeCredential { user, groups }.into());
    }
    tracing::info!(%user, "simulating as");
    Ok(())
}

/// What every simulated node's agent shares: one engine, one client.
struct Shared {
    fleet: Arc<Fleet>,
    /// The running agents, and each node's config in force.
    agents: Arc<Agents>,
    client: kube::Client,
    /// The client's config, for each node's probes of a server that does
    /// not answer (their own connections).
    probes: Arc<kube::Config>,
    plugins: Arc<PluginDir>,
    deadline: Duration,
    /// The passes' permits: at most two per core at once.
    permits: Arc<tokio::sync::Semaphore>,
}

/// Node `i`'s agent under `cfg`, made anew at each (re)start.
fn agent(shared: &Shared, i: usize, cfg: Arc<Config>) -> Agent {
    let fleet = &shared.fleet;
    let m = &fleet.machines[i];
    let node_client = NodeClient::new(shared.client.clone(), &m.name, Arc::new(Traffic::default()))
        .with_deadline(shared.deadline)
        .with_probes_from(shared.probes.clone());
    Agent::with_facts(
        cfg,
        node_client,
        shared.plugins.clone(),
        Arc::new(fleet.random(i)),
        m.facts(),
    )
    .with_pass_limit(shared.permits.clone())
    // Renewals spread evenly over the period from the first ones: node i's
    // phase is the i-th of the golden-ratio sequence, whatever the ramp.
    .with_lease_phase(nodestatus_fleet::spread(i))
}

/// The config file that scripts/run.sh writes and gives `nodestatus run`:
/// `$NODESTATUS_RUN_CONFIG`, else `${XDG_CONFIG_HOME:-~/.config}/nodestatus/config.yaml`.
pub fn run_sh_config() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("NODESTATUS_RUN_CONFIG").or_else(|| {
        var("XDG_CONFIG_HOME")
            .or_else(|| var("HOME").map(|h| h.join(".config")))
            .map(|c| c.join("nodestatus/config.yaml"))
    })
}

/// The simulator's files: a folder a machine, its image plugins' folder,
/// and the directory when it made it, removed when dropped (at exit,
/// whatever ends the run).
struct StateDir {
    path: PathBuf,
    made: bool,
    machines: Vec<PathBuf>,
}

impl StateDir {
    /// Removes what this run wrote there (the whole directory when the run
    /// made it), once: the machines' folders side by side, a few thousand
    /// small files for a large fleet. Returns how many it removed.
    fn remove(&mut self) -> usize {
        let dirs = if self.made {
            vec![self.path.clone()]
        } else {
            std::mem::take(&mut self.machines)
        };
        self.made = false;
        self.machines.clear();
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
        let chunk = dirs.len().div_ceil(workers).max(1);
        std::thread::scope(|s| {
            let parts: Vec<_> = dirs
                .chunks(chunk)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .filter(|d| std::fs::remove_dir_all(d).is_ok())
                            .count()
                    })
                })
                .collect();
            parts.into_iter().map(|p| p.join().unwrap_or(0)).sum()
        })
    }
}

impl Drop for StateDir {
    /// On an early return (an error at start): what the run wrote goes.
    fn drop(&mut self) {
        self.remove();
    }
}

/// Runs the fleet until SIGTERM or SIGINT.
pub async fn run(o: Args) -> anyhow::Result<()> {
    let mut layers = o.layers.clone();
    if layers.file.is_none()
        && let Some(file) = run_sh_config().filter(|f| f.is_file())
    {
        layers.file = Some(file);
    }
    match &layers.file {
        Some(file) => {
            tracing::info!(config = %file.display(), "the config of every simulated node")
        }
        None => tracing::info!(
            "the config of every simulated node: the embedded default (no --config, and no {})",
            run_sh_config().map_or_else(String::new, |f| f.display().to_string())
        ),
    }
    let base = Arc::new(layers.load()?);
    crate::cli::log_config_warnings(&base);
    let mut kube_config = connect(&o).await?;
    kube_config.headers.push((
        http::header::USER_AGENT,
        http::HeaderValue::from_static(concat!("nodestatus-simulate/", env!("CARGO_PKG_VERSION"))),
    ));
    let client = kube::Client::try_from(kube_config.clone()).context("building the API client")?;
    check_identity(&client).await?;
    let probes = Arc::new(kube_config);

    let state_dir = o.state_dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("nodestatus-simulate-{}", std::process::id()))
    });
    let template = Template {
        nodes: o.nodes,
        name_prefix: o.name_prefix.clone(),
        seed: o.seed,
        flapping: o.flapping,
        flap_period: o.flap_period.0,
        flap_from: o.flap_from.0,
    };
    let made = !state_dir.exists();
    let fleet = Arc::new(Fleet::create(template, &state_dir)?);
    let mut state = StateDir {
        path: state_dir.clone(),
        made: made || o.state_dir.is_none(),
        // The machines' folders, and the image plugins' files the puller
        // writes beside them.
        machines: fleet
            .machines
            .iter()
            .map(|m| m.dir.clone())
            .chain([state_dir.join("registry-plugins")])
            .collect(),
    };
    let plugins = PluginDir::open(&base, None, super::compiler_exe())?;
    if !base.plugin_dir.is_dir() {
        anyhow::bail!("pluginDir {} is not a directory", base.plugin_dir.display());
    }
    // Plugins by reference (`image:`), as `run` takes them: from the
    // registry cache now, the registry itself in the background once the
    // nodes run; one puller for the whole fleet.
    // Its components for the loader in its own state directory, never in
    // `<cacheDir>/registry-plugins`, which a `run` on this machine (or
    // another simulate) writes for its own versions of the same names; the
    // registry cache beside it is shared, its writes atomic and by content.
    let mut puller =
        Puller::new(&base, plugins.clone()).with_active_dir(state_dir.join("registry-plugins"));
    puller.start_from_cache(&base);
    plugins.rescan();
    // The plugin directory is watched as `run` watches it: a file dropped,
    // replaced or removed is loaded once for the whole fleet, and each
    // node runs the new set from its next pass (so a rollout spreads over
    // the nodes' update periods, as it does over real nodes).
    let stop_watch = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = plugins.watch(stop_watch.clone())?;
    tracing::info!(
        nodes = o.nodes,
        setters = plugins.current().setters().len(),
        flapping = fleet.template.flapping_count(),
        "simulating"
    );
    let deadline = nodestatus_engine::agent::client::call_deadline(&base);
    // Each node's config is derived from the file's (`Machine::config`),
    // anew at each live change.
    let agents = Arc::new(Agents::new(fleet.clone(), base.clone()));

    let cancel = CancellationToken::new();
    let ramp = o
        .ramp
        .as_ref()
        .map(|r| r.0)
        .unwrap_or(Duration::from_millis(20) * o.nodes as u32);
    // Each node: its agent until its restart token fires (a rollout), then
    // a new agent, until `cancel`.
    let restarts: Vec<Arc<tokio::sync::Notify>> = (0..o.nodes)
        .map(|_| Arc::new(tokio::sync::Notify::new()))
        .collect();
    // The passes of all nodes share the engine: at most two per core at
    // once (the instance pool has 64 slots).
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let permits = Arc::new(tokio::sync::Semaphore::new((2 * cores).min(32)));
    let shared = Arc::new(Shared {
        fleet: fleet.clone(),
        agents: agents.clone(),
        client: client.clone(),
        probes,
        plugins: plugins.clone(),
        deadline,
        permits,
    });
    let mut tasks = tokio::task::JoinSet::new();
    for (i, restart) in restarts.iter().enumerate() {
        let start = ramp.mul_f64(i as f64 / o.nodes as f64);
        let (shared, fleet) = (shared.clone(), fleet.clone());
        let (cancel, restart) = (cancel.clone(), restart.clone());
        tasks.spawn(async move {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tokio::time::sleep(start) => {}
            }
            loop {
                let run = cancel.child_token();
                let a = shared.agents.start(i, |cfg| agent(&shared, i, cfg));
                let stop = run.clone();
                let mut task = tokio::spawn(a.run(run));
                let ended = tokio::select! {
                    _ = cancel.cancelled() => None,
                    _ = restart.notified() => None,
                    r = &mut task => Some(r),
                };
                let result = match ended {
                    Some(r) => r,
                    None => {
                        stop.cancel();
                        task.await
                    }
                };
                shared.agents.stopped(i);
                match result {
                    Ok(Err(e)) if e.is_permanent() => {
                        tracing::error!(node = %fleet.machines[i].name, "{e}");
                        return;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(node = %fleet.machines[i].name, "{e}; starting it again in 1 s");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                    _ => {}
                }
                if cancel.is_cancelled() {
                    return;
                }
            }
        });
    }
    // The config file, read again while it runs: a change reaches every
    // node (its own config derived anew) and the shared plugin directory.
    let live = layers.file.clone().map(|path| {
        let layers = layers.clone();
        let live = LiveConfig::new(path, base.clone(), move || Ok(layers.load()?));
        tokio::spawn(live_config::watch(
            live,
            agents.clone(),
            plugins.clone(),
            cancel.clone(),
        ))
    });
    let pulls = tokio::spawn(puller.run(agents.clone(), cancel.clone()));
    let flapper = {
        let (fleet, cancel) = (fleet.clone(), cancel.clone());
        tokio::spawn(async move { fleet.flap(cancel).await })
    };
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut usr1 = signal(SignalKind::user_defined1()).context("installing the SIGUSR1 handler")?;
    let rollout_over = o.rollout_over.0;
    let mut result = Ok(());
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            // A node's task ends only on a permanent error (its
            // credential may not register it): when every one has, the
            // simulation has nothing left to run.
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                if tasks.is_empty() {
                    result = Err(anyhow::anyhow!(
                        "every simulated node stopped on a permission error (see the log): the credential may not write nodes and leases (deploy/kubernetes/simulate/rbac.yaml)"
                    ));
                    break;
                }
            }
            _ = usr1.recv() => {
                tracing::info!(over = ?rollout_over, "SIGUSR1: restarting every agent (a rollout)");
                let (restarts, cancel) = (restarts.clone(), cancel.clone());
                tokio::spawn(async move {
                    let n = restarts.len();
                    for (i, r) in restarts.iter().enumerate() {
                        let at = rollout_over.mul_f64(i as f64 / n as f64);
                        let next = rollout_over.mul_f64((i + 1) as f64 / n as f64);
                        r.notify_one();
                        tokio::select! {
                            _ = cancel.cancelled() => return,
                            _ = tokio::time::sleep(next - at) => {}
                        }
                    }
                    tracing::info!("rollout done");
                });
            }
        }
    }
    tracing::info!(
        "stopping {} simulated nodes; they are left as they are",
        o.nodes
    );
    cancel.cancel();
    let _ = tokio::time::timeout(super::run::STOP_BOUND, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    let flips = flapper.await.unwrap_or(0);
    pulls.abort();
    if let Some(live) = live {
        live.abort();
    }
    stop_watch.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    // Everything that takes time at exit is done before the last line:
    // the plugin directory's driver (an in-flight load or compile), then
    // the machines' folders; nothing is left for after "stopped".
    let cleanup = std::time::Instant::now();
    drop((shared, agents, plugins));
    let removed = state.remove();
    let memo = nodestatus_engine::pipeline::MemoStats::process();
    tracing::info!(
        flips,
        incremental_skipped = memo.skipped,
        incremental_checked = memo.checked,
        incremental_mismatches = memo.mismatches,
        folders_removed = removed,
        cleanup = ?cleanup.elapsed(),
        "stopped"
    );
    result
}
