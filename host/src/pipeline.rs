//! One pass of the setters over a node: node in, setters in order (each
//! output diffed against its input, checked by the policy and the API
//! server's rules, its conditions' times stamped), the host's built-in
//! steps, ownership, node out.
//!
//! Like the kubelet's `setNodeStatus`, each setter sees the node as the
//! previous one left it, and a setter that fails is logged and skipped while
//! the others go on. Unlike the kubelet, a failed setter cannot leave half its
//! changes behind: its whole output is discarded.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use crate::node::{self, Diff, FieldPath};
use crate::ownership::{self, Ownership};
use crate::policy::{self, Allowance};
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

/// The name of the built-in step that writes the `kubernetes.io/os` and
/// `kubernetes.io/arch` labels.
pub const OS_ARCH_LABELS: &str = "os-arch-labels";

/// The built-in step that gives every capacity key an allocatable
/// ([`node::kubelet::allocatable_for_every_capacity_key`]).
pub const ALLOCATABLE: &str = "allocatable-for-capacity";

/// What a pass did.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    /// One entry per setter, in run order.
    pub setters: Vec<SetterReport>,
    /// One entry per built-in step of the host ([`OS_ARCH_LABELS`],
    /// [`ALLOCATABLE`]), in run order, after the setters.
    pub builtins: Vec<SetterReport>,
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
///    kind `Limit`), from the one [`Diff`] of output and input, before the
///    policy and validation look at each;
/// 4. the policy: each changed field against its [`policy::Allowance`]
///    (kind `Policy`); list items count by merge key, so a second entry of a
///    condition type is a change of that type;
/// 5. the API server's rules and nodestatus's own ([`validate`]), for
///    problems the output adds to its input (kind `Invalid`): a plugin is
///    not blamed for what the node already held;
/// 6. the ownership record's bounds (kind `Limit`).
///
/// Once accepted, the conditions it wrote get their times from the host's
/// clock ([`node::stamp_times`]: heartbeat now, transition kept unless the
/// status flipped), whatever times it wrote (valid ones: a bad time is
/// refused by step 5 like any bad field).
///
/// After the setters, the fields of plugins no longer loaded are removed,
/// then the host's built-in steps run, through the same diff, policy and
/// validation (with the default allowance) and into
/// [`PassReport::builtins`]: the `kubernetes.io/os` and `kubernetes.io/arch`
/// labels, forced when missing or wrong as the kubelet does after its
/// setters. They own no fields: the host writes them on every pass.
pub fn pass(
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
    report.builtins.push(builtin(
        OS_ARCH_LABELS,
        node::kubelet::os_arch_labels,
        &mut current,
    ));
    report.builtins.push(builtin(
        ALLOCATABLE,
        node::kubelet::allocatable_for_every_capacity_key,
        &mut current,
    ));
    ownership.write(&mut current);
    node::patch::server_address_order(&mut current);
    (current, report)
}

/// Runs one built-in step of the host over `current`, with the checks of a
/// plugin's output and the default allowance. `step` returns the new node,
/// or `None` when it changes nothing (the steady state, which costs no copy).
fn builtin(name: &str, step: fn(&Value) -> Option<Value>, current: &mut Value) -> SetterReport {
    let started = Instant::now();
    let outcome = match step(current) {
        None => Ok(Vec::new()),
        Some(output) => {
            let known = validate::problems(current);
            check(current, output, &Allowance::default(), &known).map(|c| {
                *current = c.node;
                c.changed
            })
        }
    };
    if let Err(e) = &outcome {
        tracing::warn!(
            step = name,
            kind = e.kind.as_str(),
            "built-in step failed: {e}"
        );
    }
    SetterReport {
        plugin: name.to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        outcome,
        duration: started.elapsed(),
        affects_readiness: false,
    }
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
    let checked = check(input, output, &plugin.settings().fields, known)?;
    let json = if checked.stamped {
        serde_json::to_string(&checked.node).expect("a Value serializes")
    } else {
        out.json
    };
    Ok(Accepted {
        json,
        node: Some(checked.node),
        changed: checked.changed,
        events: out.events,
        problems: checked.problems,
    })
}

/// A new node that passed the checks of a write.
struct Checked {
    /// The node, its conditions' times stamped.
    node: Value,
    /// The fields that changed.
    changed: Vec<FieldPath>,
    /// The node's problems (all already in the input).
    problems: Vec<Problem>,
    /// Whether stamping the times changed the node.
    stamped: bool,
}

/// The checks of every write, a plugin's or a built-in step's: the diff,
/// its bound, the policy, the API server's rules; then the condition times.
fn check(
    input: &Value,
    mut output: Value,
    allowance: &Allowance,
    known: &[Problem],
) -> Result<Checked, CallError> {
    let changed = Diff::new(input, &output).paths();
    if changed.len() > ownership::MAX_FIELDS_PER_PLUGIN {
        return Err(CallError::new(
            CallErrorKind::Limit,
            ownership::Error::TooManyFields {
                fields: changed.len(),
            }
            .to_string(),
        ));
    }
    allowance
        .check_all(&changed)
        .map_err(|e| CallError::new(CallErrorKind::Policy, e.to_string()))?;
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
    // Stamping writes valid times only, so it adds no problem (the list may
    // keep one that it fixed, which only spares a later setter the blame).
    let stamped = node::stamp_times(input, &mut output, &changed, SystemTime::now());
    Ok(Checked {
        node: output,
        changed,
        problems,
        stamped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::kubelet::os_arch_labels;
    use serde_json::json;

    #[test]
    fn kubelet_order_with_ready_last() {
        assert!(default_order("node-address") < default_order("machine-info"));
        assert!(default_order("pid-pressure") < default_order("volumes"));
        assert!(default_order("volumes") < default_order("gpu"));
        assert!(default_order("gpu") < default_order("ready"));
    }

    #[test]
    fn a_built_in_step_is_diffed_and_reported_like_a_plugin() {
        let mut node = json!({"kind": "Node", "metadata": {"name": "n", "labels": {"kubernetes.io/os": "plan9"}}});
        let r = builtin(OS_ARCH_LABELS, os_arch_labels, &mut node);
        assert_eq!(
            r.outcome.unwrap(),
            vec![
                FieldPath::Label("kubernetes.io/os".into()),
                FieldPath::Label("kubernetes.io/arch".into())
            ]
        );
        assert_eq!(
            node["metadata"]["labels"]["kubernetes.io/os"],
            std::env::consts::OS
        );
        // The steady state changes nothing.
        let again = builtin(OS_ARCH_LABELS, os_arch_labels, &mut node);
        assert_eq!(again.outcome.unwrap(), Vec::<FieldPath>::new());
    }

    #[test]
    fn a_built_in_step_goes_through_the_policy() {
        // A step that writes a label NodeRestriction refuses is refused,
        // and the node is left as it was.
        fn bad(node: &Value) -> Option<Value> {
            let mut n = node.clone();
            n["metadata"]["labels"]["node-role.kubernetes.io/master"] = json!("");
            Some(n)
        }
        let mut node = json!({"kind": "Node", "metadata": {"name": "n", "labels": {}}});
        let before = node.clone();
        let r = builtin("bad", bad, &mut node);
        let e = r.outcome.unwrap_err();
        assert_eq!(e.kind, CallErrorKind::Policy, "{e}");
        assert_eq!(node, before);
    }
}
