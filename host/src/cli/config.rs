//! `nodestatus config check` and `config default`.

use std::path::PathBuf;
use std::process::ExitCode;

use nodestatus_engine::config::{Config, ConfigFile, DEFAULT_CONFIG, Layers, Severity};

/// Check configuration.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Validate a config file without running anything. Prints the
    /// effective settings, each with its source (default, file or flag),
    /// or each error with the field it names.
    Check {
        /// The config file (default: the embedded default config).
        file: Option<PathBuf>,
        /// The flags, as `run` would put them over the file.
        #[command(flatten)]
        flags: Box<ConfigFile>,
    },
    /// Print the embedded default config: the grants and settings of the
    /// bundled setters, used when no --config is given.
    Default,
}

impl Command {
    /// Runs the subcommand.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        let (file, flags) = match self {
            Command::Default => {
                print!("{DEFAULT_CONFIG}");
                return Ok(ExitCode::SUCCESS);
            }
            Command::Check { file, flags } => (file, flags),
        };
        let layers = Layers {
            file,
            flags: *flags,
        };
        let written = layers.written()?;
        let config = layers.load()?;
        for w in config.warnings() {
            let level = match w.severity {
                Severity::Warning => "warning",
                Severity::Notice => "note",
            };
            eprintln!("{level}: {w}");
        }
        let name = layers
            .file
            .as_ref()
            .map_or("the embedded default config".into(), |f| {
                f.display().to_string()
            });
        println!(
            "{name}: ok (node {:?}, pluginDir {}, update every {:?}, report every {:?}, lease {}s, {} plugin section(s))",
            config.node_name,
            config.plugin_dir.display(),
            config.node_status_update_frequency,
            config.node_status_report_frequency,
            config.node_lease_duration_seconds,
            config.plugins.len()
        );
        for (key, value, source) in config.provenance(&written, &layers.flags) {
            println!("  {key:<28} {value:<40} ({source})");
        }
        if !config.plugins.is_empty() {
            println!("plugins:");
            for line in plugin_lines(&config) {
                println!("  {line}");
            }
        }
        Ok(ExitCode::SUCCESS)
    }
}

/// One line for each plugin section: where the plugin comes from, what it
/// is granted, and what its bytes must verify against (the settings an
/// operator confirms before a rollout).
pub fn plugin_lines(config: &Config) -> Vec<String> {
    config
        .plugins
        .iter()
        .map(|(name, p)| {
            let source = match &p.image {
                Some(i) => format!(
                    "image {} (pullPolicy {}, failurePolicy {})",
                    i.reference,
                    i.pull_policy.as_str(),
                    i.failure_policy.as_str()
                ),
                None => format!(
                    "file {}",
                    config.plugin_dir.join(format!("{name}.wasm")).display()
                ),
            };
            let s = &p.sandbox;
            let mut grants: Vec<String> = s.paths.iter().map(|g| g.to_string()).collect();
            grants.extend(s.env.iter().map(|v| format!("env {v}")));
            if s.container_runtime {
                grants.push("containerRuntime".to_owned());
            }
            let grants = if grants.is_empty() {
                "none".to_owned()
            } else {
                grants.join(", ")
            };
            let verify = match (&p.image, &s.sha256) {
                (Some(i), _) if i.key.is_some() => format!(
                    "signature by the key {}",
                    i.key
                        .as_ref()
                        .map(|k| k.display().to_string())
                        .unwrap_or_default()
                ),
                (Some(i), _) if i.policy.is_some() => format!(
                    "signature policy {}",
                    i.policy
                        .as_ref()
                        .map(|p| p.field.as_str())
                        .unwrap_or_default()
                ),
                (Some(_), _) => {
                    "none: the signature is not checked (no verify key or policy)".to_owned()
                }
                (None, Some(sha)) => format!("sha256 {sha}"),
                (None, None) => "none (a file of the plugin directory)".to_owned(),
            };
            let enabled = if p.enabled { "" } else { " [disabled]" };
            format!("{name}{enabled}: {source}; grants: {grants}; verify: {verify}")
        })
        .collect()
}
