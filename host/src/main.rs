use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};
use nodestatus::config::{Config, ConfigFile};
use nodestatus::plugin_dir::PluginDir;
use nodestatus::runtime::{Plugin, Runtime, compile};

/// A Kubernetes node status engine whose setters are sandboxed WebAssembly components.
#[derive(Parser)]
#[command(name = "nodestatus", version, about, long_about = None)]
struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Register this node and keep its status and lease current.
    ///
    /// Connects with --kubeconfig, $KUBECONFIG or the in-cluster config; with
    /// none of them, starts a local etcd and kube-apiserver on loopback (the
    /// embedded default) and registers this machine with a
    /// system:node:<name> identity.
    Run(Box<RunArgs>),
    /// Run every setter once over a node and print the resulting Node JSON.
    ///
    /// The node comes from --node, or is a fresh initial node named after
    /// --node-name (default: this machine's hostname). What each plugin
    /// changed, or why it failed, goes to stderr.
    Once {
        /// Directory of *.wasm plugins.
        #[arg(long, required_unless_present = "plugins")]
        plugin_dir: Option<PathBuf>,
        /// A plugin file to run; repeatable, beside or instead of
        /// --plugin-dir. Its file name is its name, as in a directory.
        #[arg(long = "plugin", value_name = "FILE")]
        plugins: Vec<PathBuf>,
        /// Exit with status 1 when a plugin is refused at load or a setter
        /// fails (a policy refusal included), so that CI can gate on it.
        #[arg(long)]
        strict: bool,
        /// What goes to stdout: the resulting Node as JSON or YAML, or a
        /// unified diff of the input node against it.
        #[arg(long, value_enum, default_value_t = nodestatus::once::Output::Json)]
        output: nodestatus::once::Output,
        /// A Node as JSON to start from.
        #[arg(long)]
        node: Option<PathBuf>,
        /// The name of the fresh node, when --node is not given.
        #[arg(long)]
        node_name: Option<String>,
        /// Config file (YAML) with per-plugin settings and grants.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Precompile cache directory.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
    },
    /// Check configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
    /// Print the version of nodestatus, of its WIT package and of wasmtime.
    Version,
    /// Start a new setter: a directory that builds, tests and checks it with
    /// one command (`./build.sh`).
    New {
        /// The language.
        #[arg(long, value_enum)]
        lang: nodestatus::scaffold::Lang,
        /// The plugin's name (lowercase letters, digits and '-'); also the
        /// new directory's.
        name: String,
        /// Where to create it (default: the current directory).
        #[arg(long, default_value = ".")]
        dir: PathBuf,
        /// The nodestatus checkout whose SDK and build scripts it uses
        /// (default: the one this binary was built from).
        #[arg(long)]
        sdk: Option<PathBuf>,
    },
    /// Inspect plugins.
    Plugin {
        #[command(subcommand)]
        command: PluginCommand,
    },
}

/// Flags of `run`. Each overrides the config file field of the same
/// KubeletConfiguration name.
#[derive(clap::Args)]
struct RunArgs {
    /// Config file (YAML, KubeletConfiguration field names).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Kubeconfig of the node's identity. Default: $KUBECONFIG, then the
    /// in-cluster config, then the embedded local apiserver.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// nodeName: the Node's name (default: the hostname).
    #[arg(long)]
    node_name: Option<String>,
    /// hostnameOverride.
    #[arg(long)]
    hostname_override: Option<String>,
    /// nodeIP: one IP, or two comma-separated for dual stack.
    #[arg(long = "node-ip")]
    node_ip: Option<String>,
    /// nodeLabels, as key=value,key=value.
    #[arg(long, value_delimiter = ',')]
    node_labels: Vec<String>,
    /// registerNode: create the Node (true) or wait for it (false).
    #[arg(long)]
    register_node: Option<bool>,
    /// registerWithTaints, as key=value:Effect,key:Effect.
    #[arg(long, value_delimiter = ',')]
    register_with_taints: Vec<String>,
    /// providerID.
    #[arg(long = "provider-id")]
    provider_id: Option<String>,
    /// nodeStatusUpdateFrequency, for example 10s.
    #[arg(long)]
    node_status_update_frequency: Option<String>,
    /// nodeStatusReportFrequency, for example 5m.
    #[arg(long)]
    node_status_report_frequency: Option<String>,
    /// nodeLeaseDurationSeconds.
    #[arg(long)]
    node_lease_duration_seconds: Option<i64>,
    /// nodeStatusMaxImages (-1: no limit).
    #[arg(long, allow_hyphen_values = true)]
    node_status_max_images: Option<i64>,
    /// pluginDir: the directory of *.wasm setters, watched for changes.
    #[arg(long)]
    plugin_dir: Option<PathBuf>,
    /// Precompile cache directory.
    #[arg(long)]
    cache_dir: Option<PathBuf>,
    /// State directory of the embedded local apiserver.
    #[arg(long)]
    embedded_dir: Option<PathBuf>,
    /// Address of the HTTP endpoint (/livez, /readyz, /metrics, /status);
    /// empty to disable.
    #[arg(long, default_value = nodestatus::run::DEFAULT_ADDRESS)]
    address: String,
}

#[derive(Subcommand)]
enum PluginCommand {
    /// Print a plugin's metadata, or say exactly why it would be refused.
    Check {
        /// The plugin file.
        file: PathBuf,
        /// Config file (YAML), to check the plugin against its settings.
        #[arg(long)]
        config: Option<PathBuf>,
    },
    /// Load a plugin directory and list its plugins in run order, with
    /// versions, hashes and grants, and every file that would be refused.
    List {
        /// Directory of *.wasm plugins (default: the config's pluginDir).
        #[arg(long)]
        plugin_dir: Option<PathBuf>,
        /// Config file (YAML) with per-plugin settings and grants.
        #[arg(long)]
        config: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Validate a config file without running anything. Prints the
    /// effective settings, or each error with the field it names.
    Check {
        /// The config file.
        file: PathBuf,
        /// pluginDir, as `run --plugin-dir` would override it.
        #[arg(long)]
        plugin_dir: Option<PathBuf>,
        /// cacheDir, as `run --cache-dir` would override it.
        #[arg(long)]
        cache_dir: Option<PathBuf>,
        /// nodeName, as `run --node-name` would override it.
        #[arg(long)]
        node_name: Option<String>,
    },
}

fn init_tracing(format: LogFormat) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(
            "warn,nodestatus=info,cranelift=warn,wasmtime=warn,kube_client::client::builder=off,kube_client::client::tls=error",
        ));
    // Colour only on a terminal, and never when NO_COLOR is set
    // (no-color.org): log files and pipes get plain text.
    use std::io::IsTerminal;
    let colour = std::io::stderr().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => b.init(),
        LogFormat::Json => b.json().init(),
    }
}

/// The plugin runtime of a one-shot command: plugins compiled in a child
/// of this binary, under the config's compile limits, cached in `cache_dir`.
fn runtime(config: &Config, cache_dir: PathBuf) -> anyhow::Result<Runtime> {
    let mut options = config.runtime_options(std::env::current_exe().ok());
    options.cache_dir = Some(cache_dir);
    Ok(Runtime::with_options(options)?)
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    let file = match path {
        Some(p) => ConfigFile::read(p)?,
        None => ConfigFile::default(),
    };
    Ok(file.validate()?)
}

fn main() -> ExitCode {
    // The engine compiles each plugin in a child of itself, bounded in time
    // and memory (nodestatus::runtime::compile); not a user command.
    if std::env::args_os().nth(1).as_deref() == Some(compile::SUBCOMMAND.as_ref()) {
        return compile::child_main();
    }
    let cli = Cli::parse();
    init_tracing(cli.log_format);
    if !matches!(cli.command, Command::Run(_)) {
        // The one-shot commands print to stdout; piped into `head`, they
        // should stop quietly, as other CLI tools do, not panic on EPIPE.
        // SAFETY: restores the default action before any thread starts.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
    }
    if let Command::Run(args) = cli.command {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("tokio runtime");
        return match rt.block_on(nodestatus::run::run(args.into_options())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run(cli.command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

impl RunArgs {
    fn into_options(self) -> nodestatus::run::Options {
        nodestatus::run::Options {
            config: self.config,
            kubeconfig: self.kubeconfig,
            node_name: self.node_name,
            hostname_override: self.hostname_override,
            node_ip: self.node_ip,
            node_labels: self.node_labels,
            register_node: self.register_node,
            register_with_taints: self.register_with_taints,
            provider_id: self.provider_id,
            node_status_update_frequency: self.node_status_update_frequency,
            node_status_report_frequency: self.node_status_report_frequency,
            node_lease_duration_seconds: self.node_lease_duration_seconds,
            node_status_max_images: self.node_status_max_images,
            plugin_dir: self.plugin_dir,
            cache_dir: self.cache_dir,
            embedded_dir: self.embedded_dir,
            address: Some(self.address),
            compiler_exe: std::env::current_exe().ok(),
        }
    }
}

fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(_) => unreachable!("handled in main"),
        Command::New {
            lang,
            name,
            dir,
            sdk,
        } => {
            let sdk = sdk.unwrap_or_else(nodestatus::scaffold::default_sdk);
            let exe = std::env::current_exe()?;
            let made = nodestatus::scaffold::create(lang, &name, &dir, &sdk, &exe)?;
            println!(
                "created {}: build, test and check it with {}/build.sh",
                made.display(),
                made.display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Version => {
            println!(
                "nodestatus {}\nwit nodestatus:plugin@0.1.1 (serves 0.1.0 too)\nwasmtime 48.0.8",
                env!("CARGO_PKG_VERSION")
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Config {
            command:
                ConfigCommand::Check {
                    file,
                    plugin_dir,
                    cache_dir,
                    node_name,
                },
        } => {
            let written = ConfigFile::read(&file)?;
            let mut flags = Vec::new();
            let mut f = written.clone();
            if let Some(p) = plugin_dir {
                f.plugin_dir = Some(p);
                flags.push("pluginDir");
            }
            if let Some(p) = cache_dir {
                f.cache_dir = Some(p);
                flags.push("cacheDir");
            }
            if let Some(n) = node_name {
                f.node_name = Some(n);
                flags.push("nodeName");
            }
            let config = f.validate()?;
            for w in config.warnings() {
                eprintln!("warning: {w}");
            }
            println!(
                "{}: ok (node {:?}, pluginDir {}, update every {:?}, report every {:?}, lease {}s, {} plugin section(s))",
                file.display(),
                config.node_name,
                config.plugin_dir.display(),
                config.node_status_update_frequency,
                config.node_status_report_frequency,
                config.node_lease_duration_seconds,
                config.plugins.len()
            );
            for (key, value, source) in config.provenance(&written, &flags) {
                println!("  {key:<28} {value:<40} ({source})");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Plugin {
            command: PluginCommand::List { plugin_dir, config },
        } => {
            let config = Arc::new(load_config(config.as_ref())?);
            let runtime = runtime(&config, config.cache_dir.clone())?;
            let dir_path = plugin_dir.unwrap_or_else(|| config.plugin_dir.clone());
            let settings = config.clone();
            let dir = PluginDir::new(
                dir_path,
                runtime,
                Arc::new(move |n| settings.plugin_settings(n)),
            );
            let events = dir.rescan();
            println!(
                "{:>6}  {:<20} {:<10} {:<14} grants",
                "order", "plugin", "version", "sha256"
            );
            for p in dir.current().plugins() {
                let grants: Vec<String> = p.granted_paths().iter().map(|g| g.to_string()).collect();
                println!(
                    "{:>6}  {:<20} {:<10} {:<14} {}",
                    nodestatus::pipeline::order_of(p),
                    p.name(),
                    p.metadata().version,
                    &p.sha256()[..12],
                    if grants.is_empty() {
                        "-".to_owned()
                    } else {
                        grants.join(",")
                    }
                );
            }
            let refused: Vec<_> = events
                .iter()
                .filter_map(|e| match e {
                    nodestatus::plugin_dir::ReloadEvent::Failed { file, error, .. } => {
                        Some((file, error))
                    }
                    _ => None,
                })
                .collect();
            for (file, error) in &refused {
                println!("refused {}: {error}", file.display());
            }
            Ok(if refused.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Once {
            plugin_dir,
            plugins,
            strict,
            output,
            node,
            node_name,
            config,
            cache_dir,
        } => {
            let mut config = load_config(config.as_ref())?;
            if let Some(n) = node_name {
                config.node_name = n;
            }
            let runtime = runtime(&config, cache_dir.unwrap_or(config.cache_dir.clone()))?;
            let cfg = Arc::new(config);
            let set = nodestatus::once::PluginSet::gather(plugin_dir.as_deref(), &plugins)?;
            let settings = cfg.clone();
            let dir = PluginDir::new(
                set.dir(),
                runtime,
                Arc::new(move |name| settings.plugin_settings(name)),
            );
            let node = match node {
                Some(p) => nodestatus::once::read_node(&p)?,
                None => {
                    let hostname = cfg.hostname_override.clone().unwrap_or_else(|| {
                        nodestatus::runtime::facts::Facts::default()
                            .system()
                            .hostname
                            .to_lowercase()
                    });
                    nodestatus::once::initial_node(&cfg.node_name, &hostname)
                }
            };
            let (loads, out, report) =
                nodestatus::once::run_once(&dir, &node, &nodestatus::once::context(&cfg));
            nodestatus::once::write_report(&mut std::io::stderr(), &loads, &report)?;
            print!("{}", output.render(&node, &out)?);
            let failed = nodestatus::once::failed(&loads, &report);
            Ok(if strict && failed > 0 {
                eprintln!("--strict: {failed} plugin(s) refused or failed");
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
        Command::Plugin {
            command: PluginCommand::Check { file, config },
        } => {
            let config = load_config(config.as_ref())?;
            let runtime = runtime(&config, config.cache_dir.clone())?;
            match Plugin::load_file(&runtime, &file, &|name| config.plugin_settings(name)) {
                Ok(p) => {
                    let (allow, deny) = p.settings().fields.describe();
                    let info = serde_json::json!({
                        "file": file,
                        "sha256": p.sha256(),
                        "metadata": p.metadata(),
                        "granted": {"paths": p.granted_paths(), "withheld": p.withheld()},
                        "affectsReadiness": p.affects_readiness(),
                        "order": nodestatus::pipeline::order_of(&p),
                        "fields": {"allow": allow, "deny": deny},
                    });
                    println!("{}", serde_json::to_string_pretty(&info)?);
                    Ok(ExitCode::SUCCESS)
                }
                Err(e) => {
                    eprintln!(
                        "{} would be refused: {}",
                        file.display(),
                        nodestatus::plugin_dir::describe_load_error(&e)
                    );
                    Ok(ExitCode::FAILURE)
                }
            }
        }
    }
}
