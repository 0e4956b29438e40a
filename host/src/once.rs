//! `nodestatus once`: run every setter once over a node and report.

use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::pipeline::{self, PassReport};
use crate::plugin_dir::{PluginDir, ReloadEvent};
use crate::runtime::CallContext;

/// The context of a one-shot pass: this machine's facts, and the container
/// runtime's when the config names one.
pub fn context(cfg: &crate::config::Config) -> CallContext {
    CallContext {
        container_runtime: crate::cri::Client::from_config(cfg)
            .map(|c| std::sync::Arc::new(c.facts_blocking())),
        ..CallContext::default()
    }
}

/// A fresh node as the kubelet's `initialNode` would start it, before any
/// setter ran: the name, the default labels and the attach-detach annotation.
pub fn initial_node(name: &str, hostname: &str) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": hostname,
                "kubernetes.io/os": std::env::consts::OS,
                "kubernetes.io/arch": go_arch(),
                "beta.kubernetes.io/os": std::env::consts::OS,
                "beta.kubernetes.io/arch": go_arch(),
            },
            "annotations": {
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
        },
        "spec": {},
        "status": {},
    })
}

/// This build's architecture in Go's spelling (`GOARCH`), as Kubernetes uses.
pub fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        "x86" => "386",
        "powerpc64" => "ppc64le",
        "s390x" => "s390x",
        "riscv64" => "riscv64",
        other => other,
    }
}

/// Writes, for people, what loading did and what each setter changed.
pub fn write_report(
    out: &mut dyn Write,
    loads: &[ReloadEvent],
    report: &PassReport,
) -> std::io::Result<()> {
    for e in loads {
        if let ReloadEvent::Failed { file, error, .. } = e {
            writeln!(out, "refused {}: {error}", file.display())?;
        }
    }
    for s in &report.setters {
        match &s.outcome {
            Ok(changed) if changed.is_empty() => writeln!(
                out,
                "{} {}: no change ({:.1?})",
                s.plugin, s.version, s.duration
            )?,
            Ok(changed) => {
                let fields: Vec<String> = changed.iter().map(ToString::to_string).collect();
                writeln!(
                    out,
                    "{} {}: set {} ({:.1?})",
                    s.plugin,
                    s.version,
                    fields.join(", "),
                    s.duration
                )?
            }
            Err(e) => writeln!(
                out,
                "{} {}: FAILED [{}] {e}",
                s.plugin,
                s.version,
                e.kind.as_str()
            )?,
        }
    }
    for (plugin, path) in &report.released {
        writeln!(
            out,
            "removed {path} (owned by {plugin}, which is no longer loaded)"
        )?;
    }
    for (plugin, e) in &report.events {
        writeln!(
            out,
            "event from {plugin}: {} {}: {}",
            e.event_type.as_str(),
            e.reason,
            e.message
        )?;
    }
    Ok(())
}

/// Loads the directory, runs one pass over `node`, and returns the result.
pub fn run_once(
    dir: &PluginDir,
    node: &Value,
    ctx: &CallContext,
) -> (Vec<ReloadEvent>, Value, PassReport) {
    let loads = dir.rescan();
    let set = dir.current();
    let (out, report) = pipeline::run_pass(dir.runtime(), &set, node, ctx);
    (loads, out, report)
}

/// How many plugins were refused at load or failed in the pass (a policy
/// refusal is a failure): what `once --strict` gates on.
pub fn failed(loads: &[ReloadEvent], report: &PassReport) -> usize {
    loads
        .iter()
        .filter(|e| matches!(e, ReloadEvent::Failed { .. }))
        .count()
        + report.failures().count()
}

/// What `once` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// The resulting Node, as pretty JSON.
    Json,
    /// The resulting Node, as YAML.
    Yaml,
    /// A unified diff of the input node's pretty JSON against the result's.
    Diff,
}

impl Output {
    /// `after` (from `before`) in this form, ending with a newline.
    pub fn render(self, before: &Value, after: &Value) -> anyhow::Result<String> {
        Ok(match self {
            Output::Json => format!("{}\n", serde_json::to_string_pretty(after)?),
            Output::Yaml => serde_yaml::to_string(after)?,
            Output::Diff => {
                let old = format!("{}\n", serde_json::to_string_pretty(before)?);
                let new = format!("{}\n", serde_json::to_string_pretty(after)?);
                similar::TextDiff::from_lines(&old, &new)
                    .unified_diff()
                    .context_radius(3)
                    .header("node (input)", "node (after the setters)")
                    .to_string()
            }
        })
    }
}

/// The plugins of one `once`: a directory, or the files given one by one
/// (copied into a private directory, under their own file names), or both.
pub struct PluginSet {
    dir: std::path::PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl PluginSet {
    /// `dir` as it is when no `files` are given; otherwise a private
    /// directory with `dir`'s `*.wasm` files and `files`. Two files with
    /// one name are refused.
    pub fn gather(dir: Option<&Path>, files: &[std::path::PathBuf]) -> anyhow::Result<Self> {
        if files.is_empty() {
            let dir = dir.ok_or_else(|| anyhow::anyhow!("give --plugin-dir or --plugin"))?;
            return Ok(Self {
                dir: dir.to_owned(),
                _tmp: None,
            });
        }
        let tmp = tempfile::tempdir()?;
        let mut sources: Vec<std::path::PathBuf> = Vec::new();
        if let Some(d) = dir {
            for entry in std::fs::read_dir(d)
                .map_err(|e| anyhow::anyhow!("cannot read --plugin-dir {}: {e}", d.display()))?
            {
                let path = entry?.path();
                if path.extension().is_some_and(|x| x == "wasm") {
                    sources.push(path);
                }
            }
        }
        sources.extend(files.iter().cloned());
        for src in &sources {
            let name = src
                .file_name()
                .ok_or_else(|| anyhow::anyhow!("--plugin {} names no file", src.display()))?;
            let dest = tmp.path().join(name);
            if dest.exists() {
                anyhow::bail!(
                    "two plugins named {}: {} and another; a plugin is named by its file",
                    name.to_string_lossy(),
                    src.display()
                );
            }
            let bytes = crate::runtime::read_plugin_file(src)
                .map_err(|e| anyhow::anyhow!("--plugin {}: {e}", src.display()))?;
            std::fs::write(&dest, bytes)?;
        }
        Ok(Self {
            dir: tmp.path().to_owned(),
            _tmp: Some(tmp),
        })
    }

    /// The directory to load.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// Reads a node from a JSON file.
pub fn read_node(path: &Path) -> anyhow::Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read node file {}: {e}", path.display()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| anyhow::anyhow!("{} is not JSON: {e}", path.display()))?;
    crate::policy::validate(&v)
        .map_err(|e| anyhow::anyhow!("{} is not a Node: {e}", path.display()))?;
    Ok(v)
}
