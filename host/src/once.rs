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
