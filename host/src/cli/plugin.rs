//! `nodestatus plugin check` and `plugin list`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use nodestatus_engine::config::Layers;
use nodestatus_engine::pipeline::Setter;
use nodestatus_engine::plugin_dir::{PluginDir, ReloadEvent};
use nodestatus_runtime::Plugin;

/// Inspect plugins.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Print a plugin's metadata, or say exactly why it would be refused.
    Check {
        /// The plugin file.
        file: PathBuf,
        /// The settings it is checked against.
        #[command(flatten)]
        layers: Layers,
    },
    /// Load a plugin directory and list its plugins in run order, with
    /// versions, hashes and grants, and every file that would be refused.
    List {
        /// The settings, pluginDir included.
        #[command(flatten)]
        layers: Layers,
    },
}

impl Command {
    /// Runs the subcommand.
    pub fn execute(self) -> anyhow::Result<ExitCode> {
        match self {
            Command::Check { file, layers } => check(&file, &layers),
            Command::List { layers } => list(&layers),
        }
    }
}

fn check(file: &std::path::Path, layers: &Layers) -> anyhow::Result<ExitCode> {
    let config = Arc::new(layers.load()?);
    let dir = PluginDir::open(&config, None, super::compiler_exe())?;
    // A plugin is named by its file: its settings are that name's.
    let name = nodestatus_runtime::name_of_file(file).unwrap_or_default();
    let plugin_config = Arc::new(config.plugin_settings(&name));
    match Plugin::load_file(dir.runtime(), file, &|_| plugin_config.sandbox.clone()) {
        Ok(p) => {
            let s = Setter::new(Arc::new(p), plugin_config.clone());
            let p = s.plugin();
            let (allow, deny) = s.config().fields.describe();
            let info = serde_json::json!({
                "file": file,
                "sha256": p.sha256(),
                "metadata": p.metadata(),
                "granted": {"paths": p.granted_paths(), "withheld": p.withheld()},
                "enabled": s.config().enabled,
                "affectsReadiness": s.affects_readiness(),
                "order": s.order(),
                "fields": {"allow": allow, "deny": deny},
            });
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!(
                "{} would be refused: {}",
                file.display(),
                nodestatus_runtime::error_chain(&e)
            );
            Ok(ExitCode::FAILURE)
        }
    }
}

fn list(layers: &Layers) -> anyhow::Result<ExitCode> {
    let config = Arc::new(layers.load()?);
    let dir = PluginDir::open(&config, None, super::compiler_exe())?;
    let events = dir.rescan();
    println!(
        "{:>6}  {:<20} {:<10} {:<14} grants",
        "order", "plugin", "version", "sha256"
    );
    for s in dir.current().setters() {
        let p = s.plugin();
        let grants: Vec<String> = p.granted_paths().iter().map(|g| g.to_string()).collect();
        println!(
            "{:>6}  {:<20} {:<10} {:<14} {}",
            s.order(),
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
    let mut refused = 0;
    for e in &events {
        if let Some(line) = e.not_running() {
            println!("{line}");
        }
        if matches!(e, ReloadEvent::Failed { .. }) {
            refused += 1;
        }
    }
    Ok(if refused == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
