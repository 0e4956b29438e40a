//! `nodestatus run`: config, connection (or the embedded local apiserver),
//! plugin directory, the node loops, and a clean shutdown on SIGTERM/SIGINT.
//!
//! SIGTERM and SIGINT stop the process within a bounded time and leave the
//! node as it is: a restart of nodestatus is not a node outage. The node's
//! own shutdown marks it Ready=False `node is shutting down`, written at
//! once, and the loops go on until SIGTERM: logind's `PrepareForShutdown`
//! where logind exists ([`nodestatus_engine::node_shutdown`]), or SIGUSR2 (the
//! operator's signal).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use nodestatus_controlplane::EmbeddedApiserver;
use nodestatus_engine::agent::Agent;
use nodestatus_engine::agent::client::{NodeClient, Traffic};
use nodestatus_engine::config::Layers;
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};

/// Register this node and keep its status and lease current.
///
/// Connects with --kubeconfig, $KUBECONFIG or the in-cluster config; with
/// none of them, starts a local etcd and kube-apiserver on loopback (the
/// embedded default) and registers this machine with a `system:node:<name>`
/// identity.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Kubeconfig of the node's identity. Default: $KUBECONFIG, then the
    /// in-cluster config, then the embedded local apiserver.
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// State directory of the embedded local apiserver. Default:
    /// $XDG_DATA_HOME/nodestatus/embedded, else
    /// ~/.local/share/nodestatus/embedded.
    #[arg(long)]
    pub embedded_dir: Option<PathBuf>,
    /// The embedded cluster's node monitor grace period: how long its node
    /// lifecycle controller waits for a silent node before it marks it
    /// Unknown (kube-controller-manager's default since Kubernetes 1.32).
    /// Taken when the cluster starts, not when a run attaches to one left
    /// running.
    #[arg(long, default_value = "50s")]
    pub embedded_node_monitor_grace_period: nodestatus_engine::config::GoDuration,
    /// Stop the embedded cluster that earlier runs left running (in
    /// --embedded-dir), and exit.
    #[arg(long)]
    pub embedded_stop: bool,
    /// Address of the HTTP endpoint (/livez, /readyz, /metrics, /status);
    /// empty to disable.
    #[arg(long, default_value = DEFAULT_ADDRESS)]
    pub address: String,
    /// The settings: --config (else the embedded default), each flag over
    /// it. Read again while running when --config is given.
    #[command(flatten)]
    pub layers: Layers,
}

/// The default address of the HTTP endpoint.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:10258";

/// `nodestatus run`: the engine on a tokio runtime, until SIGTERM or
/// SIGINT.
pub fn execute(args: Args) -> anyhow::Result<std::process::ExitCode> {
    super::limit_malloc_arenas();
    super::on_tokio(run(args))
}

/// The longest a start waits for the plugins that the precompile cache
/// holds (a compile is never waited for).
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// How long a stop may take at most after SIGTERM: the loops drop their
/// in-flight calls at once; this bounds the HTTP drain and the watcher.
pub const STOP_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

async fn kubeconfig_config(path: &std::path::Path) -> anyhow::Result<kube::Config> {
    let kc = kube::config::Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .with_context(|| format!("using kubeconfig {}", path.display()))
}

async fn connect(
    o: &Args,
    node_name: &str,
) -> anyhow::Result<(kube::Config, Option<EmbeddedApiserver>)> {
    let kubeconfig = o
        .kubeconfig
        .clone()
        .or_else(|| std::env::var_os("KUBECONFIG").map(PathBuf::from));
    if let Some(path) = kubeconfig {
        return Ok((kubeconfig_config(&path).await?, None));
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        let cfg = kube::Config::incluster().context("reading the in-cluster config")?;
        return Ok((cfg, None));
    }
    let dir = embedded_dir(o);
    let (mut cluster, attached) =
        EmbeddedApiserver::start_or_attach(&dir, node_name, o.embedded_node_monitor_grace_period.0)
            .await?;
    if attached {
        eprintln!(
            "no kubeconfig given: the local cluster in {} is still running from an earlier run",
            dir.display()
        );
    } else {
        eprintln!(
            "no kubeconfig given: started a local etcd, kube-apiserver and kube-controller-manager (node lifecycle controller, root CA publisher) in {}",
            dir.display()
        );
    }
    // The cluster lives beside the engine, as a real one: stopping the
    // engine leaves it running, and its node lifecycle controller marks the
    // silent node Unknown; the next run attaches to it.
    cluster.detach()?;
    eprintln!(
        "it keeps running when nodestatus stops; stop it with: nodestatus run --embedded-stop --embedded-dir {}",
        dir.display()
    );
    let admin = cluster.write_admin_kubeconfig()?;
    let node_kubeconfig = cluster.write_node_kubeconfig(node_name)?;
    // Which release it runs, as the server says (an attached cluster may
    // be of another release than this run would start).
    let release = match cluster.admin_client()?.apiserver_version().await {
        Ok(v) => format!("Kubernetes {}", v.git_version),
        Err(e) => format!("its version unknown: {e}"),
    };
    eprintln!("local kube-apiserver ({release}) at {}", cluster.server);
    // The kubectl of the control plane's own build when there is one (a
    // fresh machine has no other), else the one on PATH.
    let kubectl = nodestatus_controlplane::apiserver_binary().with_file_name("kubectl");
    let kubectl = if kubectl.exists() {
        kubectl.display().to_string()
    } else {
        "kubectl".to_owned()
    };
    eprintln!(
        "see this node with:\n\n    {kubectl} --kubeconfig {} get node {node_name} -o wide\n",
        admin.display()
    );
    Ok((kubeconfig_config(&node_kubeconfig).await?, Some(cluster)))
}

/// The embedded cluster's state directory: --embedded-dir, else
/// `$XDG_DATA_HOME/nodestatus/embedded`, else
/// `~/.local/share/nodestatus/embedded` (as the config follows
/// `$XDG_CONFIG_HOME`).
fn embedded_dir(o: &Args) -> PathBuf {
    o.embedded_dir.clone().unwrap_or_else(|| {
        std::env::var_os("XDG_DATA_HOME")
            .filter(|d| Path::new(d).is_absolute())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| "/var/lib".into())
            .join("nodestatus/embedded")
    })
}

/// The active setters' names, in run order.
fn run_order(plugins: &PluginDir) -> Vec<String> {
    plugins
        .current()
        .setters()
        .iter()
        .map(|p| p.name().to_owned())
        .collect()
}

fn none_if_empty(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

/// The start's line about the setters: those ready, in run order, and the
/// files still loading in the background (by plugin name), which join the
/// passes when ready.
fn start_order(
    ready: &[String],
    loading: &[(PathBuf, std::time::Duration, bool)],
    waited: std::time::Duration,
) -> String {
    let ready = if ready.is_empty() && !loading.is_empty() {
        "none ready yet".to_owned()
    } else {
        none_if_empty(ready)
    };
    let mut line = format!("setters, in run order: {ready} (after {waited:.1?})");
    if !loading.is_empty() {
        let mut names: Vec<String> = loading
            .iter()
            .map(|(file, _, _)| {
                nodestatus_runtime::name_of_file(file).unwrap_or_else(|| file.display().to_string())
            })
            .collect();
        names.sort();
        line += &format!(
            "; {} loading in the background: {}",
            names.len(),
            names.join(", ")
        );
    }
    line
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(o: Args) -> anyhow::Result<()> {
    if o.embedded_stop {
        let dir = embedded_dir(&o);
        let stopped = EmbeddedApiserver::stop_detached(&dir)?;
        eprintln!(
            "{} {}",
            if stopped {
                "stopped the local cluster in"
            } else {
                "no local cluster running in"
            },
            dir.display()
        );
        return Ok(());
    }
    let cfg = Arc::new(o.layers.load()?);
    crate::cli::log_config_warnings(&cfg);
    // The HTTP endpoint's port first: a busy port fails the start, before
    // anything else starts, rather than leaving an engine that probes
    // cannot reach.
    let listener = match o.address.as_str() {
        "" => None,
        address => {
            let addr: std::net::SocketAddr = address
                .parse()
                .with_context(|| format!("--address {address:?} is not host:port"))?;
            Some(
                nodestatus_engine::http::bind(addr)
                    .await
                    .with_context(|| {
                        format!(
                            "cannot serve /livez /readyz /metrics on --address {addr} (is another nodestatus running?): give another --address, or \"\" for none"
                        )
                    })?,
            )
        }
    };
    let (kube_config, _cluster) = connect(&o, &cfg.node_name).await?;
    let plugins = PluginDir::open(&cfg, None, super::compiler_exe())?;
    if !cfg.plugin_dir.is_dir() {
        anyhow::bail!("pluginDir {} is not a directory", cfg.plugin_dir.display());
    }
    // Plugins by reference (`image:`): from the registry cache now, the
    // registry itself in the background once the loops run.
    let mut puller = nodestatus_engine::oci::Puller::new(&cfg, plugins.clone());
    puller.start_from_cache(&cfg);
    // Loading never holds the node back: the files the precompile cache
    // holds load in milliseconds and are waited for (at most
    // START_WAIT); every compile goes on in the background, and its plugin
    // joins at the first pass after it is ready.
    plugins.rescan_in_background();
    let waited = std::time::Instant::now();
    let plugins_ = plugins.clone();
    tokio::task::spawn_blocking(move || plugins_.wait_for_cached(START_WAIT))
        .await
        .context("waiting for the cached plugins")?;
    let loading = plugins.loading();
    tracing::info!(
        "{}",
        start_order(&run_order(&plugins), &loading, waited.elapsed())
    );
    for (file, _, compiling) in &loading {
        let what = if *compiling { "compiling" } else { "loading" };
        tracing::info!(file = %file.display(), "{what} in the background; the plugin joins the first pass after it is ready");
    }
    if !loading.is_empty() {
        // The run order once the start's background loads are done: once,
        // from a thread of its own (a process exit does not wait for it).
        let plugins = plugins.clone();
        let spawned = std::thread::Builder::new()
            .name("nodestatus-start-order".into())
            .spawn(move || {
                if plugins.wait_idle(std::time::Duration::from_secs(3600)) {
                    tracing::info!(
                        "setters, in run order: {} (every load of the start done after {:.1?})",
                        none_if_empty(&run_order(&plugins)),
                        waited.elapsed()
                    );
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no thread for the run order after the start's loads: {e}");
        }
    }
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watcher = plugins.watch(stop_watch.clone())?;
    let deadline = nodestatus_engine::agent::client::call_deadline(&cfg);
    let node_client = NodeClient::from_config(
        kube_config,
        &cfg.node_name,
        Arc::new(Traffic::default()),
        deadline,
    )?;
    // The reacting plugins' streams (the kernel log, log files, the
    // journal) and watched paths: a match wakes a pass at once.
    let agent = Agent::new(cfg.clone(), node_client, plugins.clone())
        .with_streams(nodestatus_engine::streams::Streams::new());
    let handle = agent.handle();
    {
        // A plugin that becomes ready (or stops) runs from a pass now.
        let handle = handle.clone();
        plugins.on_event(move |e| {
            if !matches!(e, ReloadEvent::Failed { kept: None, .. }) {
                handle.plugins_changed();
            }
        });
    }

    let cancel = CancellationToken::new();
    let http = listener.map(|listener| {
        let (agent, cancel) = (handle.clone(), cancel.clone());
        tokio::spawn(async move {
            if let Err(e) = nodestatus_engine::http::serve_on(listener, agent, cancel).await {
                tracing::error!("the HTTP endpoint failed: {e}");
            }
        })
    });
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut usr2 = signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?;
    let signals = {
        let cancel = cancel.clone();
        let agent = handle.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {
                        tracing::info!("SIGINT: stopping; the node is left as it is");
                        break;
                    }
                    _ = term.recv() => {
                        tracing::info!("SIGTERM: stopping; the node is left as it is");
                        break;
                    }
                    _ = usr2.recv() => {
                        tracing::warn!("SIGUSR2: the node is shutting down");
                        let agent = agent.clone();
                        tokio::spawn(async move {
                            if let Err(e) = agent.node_shutdown().await {
                                tracing::warn!("could not write {}: {e}; the next pass retries", nodestatus_engine::agent::SHUTTING_DOWN);
                            }
                        });
                    }
                }
            }
            cancel.cancel();
        })
    };
    // The config file, read again while running (nodestatus_engine::live_config).
    let live = o.layers.file.clone().map(|path| {
        let layers = o.layers.clone();
        let live = nodestatus_engine::live_config::LiveConfig::new(path, cfg.clone(), move || {
            Ok(layers.load()?)
        });
        tokio::spawn(nodestatus_engine::live_config::watch(
            live,
            handle.clone(),
            plugins.clone(),
            cancel.clone(),
        ))
    });
    let pulls = tokio::spawn(puller.run(handle.clone(), cancel.clone()));
    // The node's own shutdown from logind, where it exists (else a no-op).
    let logind = tokio::spawn(nodestatus_engine::node_shutdown::watch(
        handle.clone(),
        cancel.clone(),
    ));
    let result = agent.run(cancel.clone()).await;
    cancel.cancel();
    if let Some(h) = http {
        let _ = tokio::time::timeout(STOP_BOUND, h).await;
    }
    signals.abort();
    logind.abort();
    pulls.abort();
    if let Some(live) = live {
        live.abort();
    }
    stop_watch.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    Ok(result?)
}
