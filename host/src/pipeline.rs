//! One pass of the setters over a node: node in, setters in order, diff,
//! policy check, ownership, node out.
//!
//! Like the kubelet's `setNodeStatus`, each setter sees the node as the
//! previous one left it, and a setter that fails is logged and skipped while
//! the others go on. Unlike the kubelet, a failed setter cannot leave half its
//! changes behind: its whole output is discarded.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::ownership::Ownership;
use crate::policy::{self, FieldPath};
use crate::runtime::{CallContext, CallError, CallErrorKind, EmittedEvent, Plugin, Runtime};

/// The order of the kubelet's own setters, which nodestatus ships as plugins.
/// Plugins not named here run after `volumes` and before `ready`, by name.
pub const KUBELET_ORDER: &[&str] = &[
    "node-address",
    "machine-info",
    "version-info",
    "daemon-endpoints",
    "images",
    "os-arch",
    "memory-pressure",
    "disk-pressure",
    "pid-pressure",
    "volumes",
];

/// The default position of a plugin: the kubelet's order for its setters
/// (10, 20, ...), 1000 for every other plugin, and 10000 for `ready`, which
/// must come last because Ready must be the last condition.
pub fn default_order(name: &str) -> i32 {
    if name == "ready" {
        return 10_000;
    }
    KUBELET_ORDER
        .iter()
        .position(|n| *n == name)
        .map_or(1000, |i| (i as i32 + 1) * 10)
}

/// An immutable, ordered set of plugins. A pass holds an `Arc` to one set for
/// its whole run, so a reload that swaps in a new set never tears a pass.
#[derive(Debug, Default, Clone)]
pub struct PluginSet {
    plugins: Vec<Arc<Plugin>>,
}

impl PluginSet {
    /// Orders `plugins` by (order, name).
    pub fn new(mut plugins: Vec<Arc<Plugin>>) -> Self {
        plugins.sort_by(|a, b| (order_of(a), a.name()).cmp(&(order_of(b), b.name())));
        Self { plugins }
    }

    /// The plugins, in run order.
    pub fn plugins(&self) -> &[Arc<Plugin>] {
        &self.plugins
    }

    /// Whether a plugin of that name is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.plugins.iter().any(|p| p.name() == name)
    }
}

/// A plugin's effective position.
pub fn order_of(p: &Plugin) -> i32 {
    p.settings()
        .order
        .unwrap_or_else(|| default_order(p.name()))
}

/// What one setter did in a pass.
#[derive(Debug, Clone)]
pub struct SetterReport {
    /// The plugin.
    pub plugin: String,
    /// Its version.
    pub version: String,
    /// The fields it changed, or why its output was discarded.
    pub outcome: Result<Vec<FieldPath>, CallError>,
    /// Wall time of the call, checks included.
    pub duration: Duration,
    /// Whether its failure makes the node not Ready.
    pub affects_readiness: bool,
}

/// What a pass did.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    /// One entry per setter, in run order.
    pub setters: Vec<SetterReport>,
    /// Fields removed because the plugin that owned them is gone.
    pub released: Vec<(String, FieldPath)>,
    /// Events the setters asked for, with the plugin that asked.
    pub events: Vec<(String, EmittedEvent)>,
}

impl PassReport {
    /// The setters that failed.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &CallError)> {
        self.setters
            .iter()
            .filter_map(|s| s.outcome.as_ref().err().map(|e| (s.plugin.as_str(), e)))
    }
}

/// Runs every plugin of `set` over `node` and returns the new node.
///
/// `node` is never modified: the setters work on a copy, and the caller
/// compares old and new. The ownership record is read from and written back
/// to the node's annotation.
pub fn run_pass(
    runtime: &Runtime,
    set: &PluginSet,
    node: &Value,
    ctx: &CallContext,
) -> (Value, PassReport) {
    let mut report = PassReport::default();
    let mut ownership = Ownership::from_node(node);
    let mut current = node.clone();
    let mut current_json = serde_json::to_string(&current).expect("a Value serializes");

    for plugin in set.plugins() {
        let started = Instant::now();
        let outcome = run_one(runtime, plugin, &current_json, &current, ctx.clone()).map(
            |(json, next, changed, events)| {
                if let Some(next) = next {
                    ownership.record(plugin.name(), &changed, &next);
                    current = next;
                    current_json = json;
                }
                report
                    .events
                    .extend(events.into_iter().map(|e| (plugin.name().to_owned(), e)));
                changed
            },
        );
        if let Err(e) = &outcome {
            tracing::warn!(
                plugin = plugin.name(),
                kind = e.kind.as_str(),
                "setter failed: {e}"
            );
        }
        report.setters.push(SetterReport {
            plugin: plugin.name().to_owned(),
            version: plugin.metadata().version.clone(),
            outcome,
            duration: started.elapsed(),
            affects_readiness: plugin.affects_readiness(),
        });
    }

    report.released = ownership.release_unloaded(|p| set.contains(p), &mut current);
    for (plugin, path) in &report.released {
        tracing::info!(plugin, field = %path, "removed a field owned by a plugin that is no longer loaded");
    }
    ownership.write(&mut current);
    (current, report)
}

type Accepted = (String, Option<Value>, Vec<FieldPath>, Vec<EmittedEvent>);

fn run_one(
    runtime: &Runtime,
    plugin: &Plugin,
    input_json: &str,
    input: &Value,
    ctx: CallContext,
) -> Result<Accepted, CallError> {
    let out = plugin.call_set(runtime, input_json, ctx)?;
    if out.json == input_json {
        return Ok((out.json, None, Vec::new(), out.events));
    }
    let output: Value = serde_json::from_str(&out.json).map_err(|e| {
        CallError::new(
            CallErrorKind::Output,
            format!("the output is not JSON: {e}"),
        )
    })?;
    let changed = policy::diff(input, &output);
    policy::validate(&output, &changed).map_err(|e| {
        CallError::new(
            CallErrorKind::Output,
            format!("the output is not a valid Node: {e}"),
        )
    })?;
    let refused: BTreeSet<String> = changed
        .iter()
        .filter_map(|p| plugin.settings().fields.check(p).err())
        .collect();
    if !refused.is_empty() {
        return Err(CallError::new(
            CallErrorKind::Policy,
            format!(
                "output discarded: {}",
                refused.into_iter().collect::<Vec<_>>().join("; ")
            ),
        ));
    }
    Ok((out.json, Some(output), changed, out.events))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubelet_order_with_ready_last() {
        assert!(default_order("node-address") < default_order("machine-info"));
        assert!(default_order("pid-pressure") < default_order("volumes"));
        assert!(default_order("volumes") < default_order("gpu"));
        assert!(default_order("gpu") < default_order("ready"));
    }
}
