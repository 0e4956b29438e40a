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

use crate::ownership::{self, Ownership};
use crate::policy::{self, FieldPath};
use crate::runtime::{CallContext, CallError, CallErrorKind, EmittedEvent, Plugin, Runtime};
use crate::validate::{self, Problem};

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
///
/// Each plugin's output is checked in order, cheapest first, and discarded
/// whole at the first failure, with a typed [`CallErrorKind`]:
///
/// 1. its size ([`validate::MAX_NODE_BYTES`], kind `Limit`), before parsing;
/// 2. JSON, a Node, `metadata.name` (kind `Output`);
/// 3. the number of fields it changes ([`ownership::MAX_FIELDS_PER_PLUGIN`],
///    kind `Limit`), before the policy and validation look at each;
/// 4. the policy: each changed field against its [`policy::Allowance`]
///    (kind `Policy`); list items count by merge key, so a second entry of a
///    condition type is a change of that type;
/// 5. the API server's rules and nodestatus's own ([`validate`]), for
///    problems the output adds to its input (kind `Invalid`): a plugin is
///    not blamed for what the node already held;
/// 6. the ownership record's bounds (kind `Limit`).
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
    let mut known = validate::problems(&current);

    for plugin in set.plugins() {
        let started = Instant::now();
        let outcome = run_one(
            runtime,
            plugin,
            &current_json,
            &current,
            &known,
            ctx.clone(),
        )
        .and_then(|acc| {
            if let Some(next) = &acc.node {
                ownership
                    .record(plugin.name(), &acc.changed, next)
                    .map_err(|e| CallError::new(CallErrorKind::Limit, e.to_string()))?;
            }
            Ok(acc)
        })
        .map(|acc| {
            if let Some(next) = acc.node {
                current = next;
                current_json = acc.json;
                known = acc.problems;
            }
            report.events.extend(
                acc.events
                    .into_iter()
                    .map(|e| (plugin.name().to_owned(), e)),
            );
            acc.changed
        });
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
    crate::agent::patch::server_address_order(&mut current);
    (current, report)
}

/// A plugin's output that passed every check.
struct Accepted {
    /// The output's text (the next plugin's input).
    json: String,
    /// The output, or `None` when it is the input unchanged.
    node: Option<Value>,
    /// The fields it changed.
    changed: Vec<FieldPath>,
    /// The events it recorded.
    events: Vec<EmittedEvent>,
    /// The output's problems (all already in the input).
    problems: Vec<Problem>,
}

fn run_one(
    runtime: &Runtime,
    plugin: &Plugin,
    input_json: &str,
    input: &Value,
    known: &[Problem],
    ctx: CallContext,
) -> Result<Accepted, CallError> {
    let out = plugin.call_set(runtime, input_json, ctx)?;
    if out.json == input_json {
        return Ok(Accepted {
            json: out.json,
            node: None,
            changed: Vec::new(),
            events: out.events,
            problems: known.to_vec(),
        });
    }
    if out.json.len() > validate::MAX_NODE_BYTES {
        return Err(CallError::new(
            CallErrorKind::Limit,
            format!(
                "the output is {} bytes, over the {}-byte bound of a node (etcd refuses requests over 1.5 MiB)",
                out.json.len(),
                validate::MAX_NODE_BYTES
            ),
        ));
    }
    let output: Value = serde_json::from_str(&out.json).map_err(|e| {
        CallError::new(
            CallErrorKind::Output,
            format!("the output is not JSON: {e}"),
        )
    })?;
    policy::validate(&output).map_err(|e| {
        CallError::new(
            CallErrorKind::Output,
            format!("the output is not a valid Node: {e}"),
        )
    })?;
    let changed = policy::diff(input, &output);
    if changed.len() > ownership::MAX_FIELDS_PER_PLUGIN {
        return Err(CallError::new(
            CallErrorKind::Limit,
            ownership::Error::TooManyFields {
                fields: changed.len(),
            }
            .to_string(),
        ));
    }
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
    let problems = validate::problems(&output);
    let added = validate::introduced(known, problems.clone());
    if !added.is_empty() {
        let who = if added
            .iter()
            .any(|p| p.rule.origin() == validate::Origin::ApiServer)
        {
            "the API server would refuse the node"
        } else {
            "the node breaks nodestatus's rules"
        };
        return Err(CallError::new(
            CallErrorKind::Invalid,
            format!("output discarded: {who}: {}", validate::describe(&added)),
        ));
    }
    Ok(Accepted {
        json: out.json,
        node: Some(output),
        changed,
        events: out.events,
        problems,
    })
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
