//! `nodestatus config check` and `config default`.

use std::path::PathBuf;
use std::process::ExitCode;

use nodestatus_engine::config::{ConfigFile, DEFAULT_CONFIG, Layers, Severity};

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
        Ok(ExitCode::SUCCESS)
    }
}
