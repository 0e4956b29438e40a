//! `nodestatus run`: config, connection (or the embedded local apiserver),
//! plugin directory, the node loops, and a clean shutdown on SIGTERM/SIGINT.
//!
//! SIGTERM and SIGINT stop the process within a bounded time and leave the
//! node as it is: a restart of nodestatus is not a node outage. The node's
//! own shutdown marks it Ready=False `node is shutting down`, written at
//! once, and the loops go on until SIGTERM: logind's `PrepareForShutdown`
//! where logind exists ([`crate::node_shutdown`]), or SIGUSR2 (the
//! operator's signal).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::agent::client::{NodeClient, Traffic};
use crate::cluster::LocalCluster;
use crate::config::{ConfigFile, GoDuration, Taint};
use crate::plugin_dir::PluginDir;
use crate::runtime::Runtime;

/// `run`'s flags; each overrides the config file.
#[derive(Debug, Default, Clone)]
#[allow(missing_docs)]
pub struct Options {
    pub config: Option<PathBuf>,
    pub kubeconfig: Option<PathBuf>,
    pub node_name: Option<String>,
    pub hostname_override: Option<String>,
    pub node_ip: Option<String>,
    pub node_labels: Vec<String>,
    pub register_node: Option<bool>,
    pub register_with_taints: Vec<String>,
    pub provider_id: Option<String>,
    pub node_status_update_frequency: Option<String>,
    pub node_status_report_frequency: Option<String>,
    pub node_lease_duration_seconds: Option<i64>,
    pub node_status_max_images: Option<i64>,
    pub plugin_dir: Option<PathBuf>,
    pub cache_dir: Option<PathBuf>,
    pub embedded_dir: Option<PathBuf>,
    pub address: Option<String>,
    /// The binary that compiles plugins in a bounded child process (its
    /// `compile-component` subcommand, see [`crate::runtime::compile`]):
    /// the running `nodestatus`. `None` compiles in-process, unbounded.
    pub compiler_exe: Option<PathBuf>,
}

/// The default address of the HTTP endpoint.
pub const DEFAULT_ADDRESS: &str = "127.0.0.1:10258";

fn flag_duration(flag: &str, v: Option<String>) -> anyhow::Result<Option<GoDuration>> {
    v.map(|s| GoDuration::parse(&s).map_err(|e| anyhow::anyhow!("--{flag}: {e}")))
        .transpose()
}

/// Applies the flags over the file and validates the result.
pub fn load_config(o: &Options) -> anyhow::Result<crate::config::Config> {
    let mut f = match &o.config {
        Some(p) => ConfigFile::read(p)?,
        None => ConfigFile::default(),
    };
    macro_rules! over {
        ($($field:ident),*) => { $( if let Some(v) = o.$field.clone() { f.$field = Some(v); } )* };
    }
    over!(
        node_name,
        hostname_override,
        provider_id,
        register_node,
        node_lease_duration_seconds,
        node_status_max_images,
        plugin_dir,
        cache_dir
    );
    if let Some(v) = o.node_ip.clone() {
        f.node_ip = Some(v);
    }
    for l in &o.node_labels {
        let (k, v) = l
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--node-labels: {l:?} is not key=value"))?;
        f.node_labels.insert(k.to_owned(), v.to_owned());
    }
    for t in &o.register_with_taints {
        let (kv, effect) = t.rsplit_once(':').ok_or_else(|| {
            anyhow::anyhow!("--register-with-taints: {t:?} is not key=value:Effect")
        })?;
        let (key, value) = kv.split_once('=').unwrap_or((kv, ""));
        f.register_with_taints.push(Taint {
            key: key.into(),
            value: value.into(),
            effect: effect.into(),
        });
    }
    if let Some(d) = flag_duration(
        "node-status-update-frequency",
        o.node_status_update_frequency.clone(),
    )? {
        f.node_status_update_frequency = Some(d);
    }
    if let Some(d) = flag_duration(
        "node-status-report-frequency",
        o.node_status_report_frequency.clone(),
    )? {
        f.node_status_report_frequency = Some(d);
    }
    Ok(f.validate()?)
}

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
    o: &Options,
    node_name: &str,
) -> anyhow::Result<(kube::Config, Option<LocalCluster>)> {
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
    let dir = o.embedded_dir.clone().unwrap_or_else(|| {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| "/var/lib".into())
            .join(".local/share/nodestatus/embedded")
    });
    eprintln!(
        "no kubeconfig given: starting a local etcd and kube-apiserver in {}",
        dir.display()
    );
    let cluster = LocalCluster::start_with(&dir, &[node_name], false, true).await?;
    let admin = cluster.write_admin_kubeconfig()?;
    let node_kubeconfig = cluster.write_node_kubeconfig(node_name)?;
    eprintln!("local kube-apiserver at {}", cluster.server);
    eprintln!(
        "see this node with:\n\n    kubectl --kubeconfig {} get node {node_name} -o wide\n",
        admin.display()
    );
    Ok((kubeconfig_config(&node_kubeconfig).await?, Some(cluster)))
}

/// Runs the agent until SIGTERM or SIGINT.
pub async fn run(o: Options) -> anyhow::Result<()> {
    let cfg = Arc::new(load_config(&o)?);
    for w in cfg.warnings() {
        tracing::warn!("config: {w}");
    }
    let (kube_config, _cluster) = connect(&o, &cfg.node_name).await?;
    let runtime = Runtime::with_options(cfg.runtime_options(o.compiler_exe.clone()))?;
    let settings = cfg.clone();
    let plugins = PluginDir::new(
        cfg.plugin_dir.clone(),
        runtime,
        Arc::new(move |n| settings.plugin_settings(n)),
    );
    if !cfg.plugin_dir.is_dir() {
        anyhow::bail!("pluginDir {} is not a directory", cfg.plugin_dir.display());
    }
    plugins.rescan();
    let order: Vec<String> = plugins
        .current()
        .plugins()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    tracing::info!("setters, in run order: {}", order.join(", "));
    let stop_watch = Arc::new(AtomicBool::new(false));
    let watcher = plugins.watch(stop_watch.clone())?;
    // Every call's deadline: min(nodeStatusUpdateFrequency, nodeLeaseDuration).
    let deadline = crate::agent::client::call_deadline(
        cfg.node_status_update_frequency,
        cfg.node_lease_duration_seconds,
    );
    let node_client = NodeClient::from_config(
        kube_config,
        &cfg.node_name,
        Arc::new(Traffic::default()),
        deadline,
    )?;
    let agent = Agent::new(cfg.clone(), node_client, plugins.clone());

    let cancel = CancellationToken::new();
    let address = o
        .address
        .clone()
        .unwrap_or_else(|| DEFAULT_ADDRESS.to_owned());
    let http = if address.is_empty() {
        None
    } else {
        let addr: std::net::SocketAddr = address
            .parse()
            .with_context(|| format!("--address {address:?} is not host:port"))?;
        let (agent, cancel) = (agent.clone(), cancel.clone());
        Some(tokio::spawn(async move {
            if let Err(e) = crate::http::serve(addr, agent, cancel).await {
                tracing::error!(%addr, "the HTTP endpoint failed: {e}");
            }
        }))
    };
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut usr2 = signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?;
    let signals = {
        let cancel = cancel.clone();
        let agent = agent.clone();
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
                                tracing::warn!("could not write {}: {e}; the next pass retries", crate::agent::SHUTTING_DOWN);
                            }
                        });
                    }
                }
            }
            cancel.cancel();
        })
    };
    // The config file, read again while running (crate::live_config).
    let live = o.config.clone().map(|path| {
        let options = o.clone();
        let live =
            crate::live_config::LiveConfig::new(path, cfg.clone(), move || load_config(&options));
        tokio::spawn(crate::live_config::watch(
            live,
            agent.clone(),
            plugins.clone(),
            cancel.clone(),
        ))
    });
    // The node's own shutdown from logind, where it exists (else a no-op).
    let logind = tokio::spawn(crate::node_shutdown::watch(agent.clone(), cancel.clone()));
    let result = agent.run(cancel.clone()).await;
    cancel.cancel();
    if let Some(h) = http {
        let _ = tokio::time::timeout(STOP_BOUND, h).await;
    }
    signals.abort();
    logind.abort();
    if let Some(live) = live {
        live.abort();
    }
    stop_watch.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    Ok(result?)
}
