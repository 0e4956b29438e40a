//! `nodestatus plugin check` and `plugin list`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use crate::config::Layers;
use crate::plugin_dir::{PluginDir, ReloadEvent};
use crate::runtime::Plugin;

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
    match Plugin::load_file(dir.runtime(), file, &|name| config.plugin_settings(name)) {
        Ok(p) => {
            let (allow, deny) = p.settings().fields.describe();
            let info = serde_json::json!({
                "file": file,
                "sha256": p.sha256(),
                "metadata": p.metadata(),
                "granted": {"paths": p.granted_paths(), "withheld": p.withheld()},
                "affectsReadiness": p.affects_readiness(),
                "order": crate::pipeline::order_of(&p),
                "fields": {"allow": allow, "deny": deny},
            });
            println!("{}", serde_json::to_string_pretty(&info)?);
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!(
                "{} would be refused: {}",
                file.display(),
                crate::plugin_dir::describe_load_error(&e)
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
    for p in dir.current().plugins() {
        let grants: Vec<String> = p.granted_paths().iter().map(|g| g.to_string()).collect();
        println!(
            "{:>6}  {:<20} {:<10} {:<14} {}",
            crate::pipeline::order_of(p),
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
