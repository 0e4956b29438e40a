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

use nodestatus_model::node::{self, FieldPath};
use nodestatus_runtime::{CallContext, CallError, CallErrorKind, EmittedEvent, Plugin, Runtime};

use crate::config::PluginConfig;
use nodestatus_model::validate::{self, Problem};

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

/// One setter of a pass: a loaded plugin, and what the operator decided
/// around its sandbox (its order, the fields it may change, whether its
/// failure makes the node not Ready).
#[derive(Debug, Clone)]
pub struct Setter {
    plugin: Arc<Plugin>,
    config: Arc<PluginConfig>,
}

impl Setter {
    /// `plugin`, under the operator's `config` for it.
    pub fn new(plugin: Arc<Plugin>, config: Arc<PluginConfig>) -> Self {
        Self { plugin, config }
    }

    /// The plugin.
    pub fn plugin(&self) -> &Arc<Plugin> {
        &self.plugin
    }

    /// The operator's config for it.
    pub fn config(&self) -> &PluginConfig {
        &self.config
    }

    /// Its name.
    pub fn name(&self) -> &str {
        self.plugin.name()
    }

    /// Its effective position: the config's `order`, else
    /// [`default_order`].
    pub fn order(&self) -> i32 {
        self.config
            .order
            .unwrap_or_else(|| default_order(self.plugin.name()))
    }

    /// Whether its failure makes the node not Ready: the config's
    /// `affectsReadiness`, else what its metadata says.
    pub fn affects_readiness(&self) -> bool {
        self.config
            .affects_readiness
            .unwrap_or(self.plugin.metadata().affects_readiness)
    }
}

impl From<Arc<Plugin>> for Setter {
    /// `plugin` with the engine's defaults around its sandbox: the default
    /// order and allowance, its own `affects-readiness`.
    fn from(plugin: Arc<Plugin>) -> Self {
        Self::new(plugin, Arc::new(PluginConfig::default()))
    }
}

/// A plugin that the config wants to run and that no version of may run
/// now: each pass reports it failed, so that the node's readiness follows
/// its `affects-readiness` as if it had run and failed, and its fields are
/// released as those of any plugin that does not run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// The plugin.
    pub plugin: String,
    /// The version that ran last, if one did.
    pub version: String,
    /// Whether its failure makes the node not Ready.
    pub affects_readiness: bool,
    /// Why it does not run.
    pub reason: String,
}

/// An immutable, ordered set of setters, and the plugins withheld from
/// it. A pass holds an `Arc` to one set for its whole run, so a reload that
/// swaps in a new set never tears a pass.
#[derive(Debug, Default, Clone)]
pub struct PluginSet {
    setters: Vec<Setter>,
    withheld: Vec<Withheld>,
}

impl PluginSet {
    /// Orders `setters` by (order, name).
    pub fn new(mut setters: Vec<Setter>) -> Self {
        setters.sort_by(|a, b| (a.order(), a.name()).cmp(&(b.order(), b.name())));
        Self {
            setters,
            withheld: Vec::new(),
        }
    }

    /// The same setters, with `withheld` (those of a name that runs left
    /// out: a version of it was allowed again).
    pub fn with_withheld(mut self, withheld: impl IntoIterator<Item = Withheld>) -> Self {
        self.withheld = withheld
            .into_iter()
            .filter(|w| !self.contains(&w.plugin))
            .collect();
        self
    }

    /// The setters, in run order.
    pub fn setters(&self) -> &[Setter] {
        &self.setters
    }

    /// The plugins withheld from the set.
    pub fn withheld(&self) -> &[Withheld] {
        &self.withheld
    }

    /// Whether a plugin of that name is in the set.
    pub fn contains(&self, name: &str) -> bool {
        self.setters.iter().any(|s| s.name() == name)
    }
}

/// Why a setter's output was discarded, a bounded set fit for metric
/// labels: its call failed in the sandbox ([`CallErrorKind`]), or what it
/// returned failed one of the engine's checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SetterErrorKind {
    /// The call failed in the sandbox.
    Call(CallErrorKind),
    /// The output is not JSON, or not a Node.
    Output,
    /// The output changes fields outside the allowance.
    Policy,
    /// The output would be refused by the API server (or breaks one of
    /// nodestatus's own node rules): see [`validate`].
    Invalid,
    /// The output is over a cost bound: too large a node, or more fields
    /// than a plugin may own (see [`nodestatus_model::ownership`]).
    Limit,
    /// The plugin did not run: no version of it may run now ([`Withheld`]).
    Withheld,
}

impl SetterErrorKind {
    /// The label value: the sandbox's for a failed call
    /// ([`CallErrorKind::as_str`]), else `output`, `policy`, `invalid`,
    /// `limit` or `withheld`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Call(k) => k.as_str(),
            Self::Output => "output",
            Self::Policy => "policy",
            Self::Invalid => "invalid",
            Self::Limit => "limit",
            Self::Withheld => "withheld",
        }
    }
}

impl From<CallErrorKind> for SetterErrorKind {
    fn from(k: CallErrorKind) -> Self {
        Self::Call(k)
    }
}

impl serde::Serialize for SetterErrorKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// Why a setter's output was discarded, with what happened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SetterError {
    /// What kind of failure.
    pub kind: SetterErrorKind,
    /// What happened, for people.
    pub message: String,
}

impl SetterError {
    /// A failure of `kind`.
    pub fn new(kind: impl Into<SetterErrorKind>, message: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            message: message.into(),
        }
    }
}

impl From<CallError> for SetterError {
    fn from(e: CallError) -> Self {
        Self::new(e.kind, e.message)
    }
}

/// What one setter did in a pass.
#[derive(Debug, Clone)]
pub struct SetterReport {
    /// The plugin.
    pub plugin: String,
    /// Its version.
    pub version: String,
    /// The fields it changed, or why its output was discarded.
    pub outcome: Result<Vec<FieldPath>, SetterError>,
    /// Wall time of the call, checks included.
    pub duration: Duration,
    /// Of which the call into the sandbox (zero for a step of the host's
    /// own, or a plugin not called): the rest is the host's work.
    pub called: Duration,
    /// Whether its failure makes the node not Ready.
    pub affects_readiness: bool,
    /// Matched lines handed to it (through `on-lines`, instead of `set`);
    /// 0 for a call of `set`.
    pub lines: usize,
    /// Whether it was not called, its last part standing: its inputs had
    /// not changed ([`memo`]).
    pub skipped: bool,
}

/// The name of the built-in step that writes the `kubernetes.io/os` and
/// `kubernetes.io/arch` labels.
pub const OS_ARCH_LABELS: &str = "os-arch-labels";

/// The built-in step that gives every capacity key an allocatable
/// ([`node::kubelet::allocatable_for_every_capacity_key`]).
pub const ALLOCATABLE: &str = "allocatable-for-capacity";

/// The built-in step that writes what a current kubelet writes from its
/// container runtime and machine ([`PassOptions::kubelet_fields`]).
pub const CURRENT_KUBELET_FIELDS: &str = "current-kubelet-fields";

/// The built-in step that writes `capacity[ephemeral-storage]` in the
/// units of the server's kubelet
/// ([`node::kubelet::ephemeral_storage_in_release_units`]).
pub const RELEASE_UNITS: &str = "ephemeral-storage-in-release-units";

/// The built-in step that writes `nodeInfo.kubeProxyVersion` for a server
/// older than 1.33, as its kubelet does
/// ([`node::kubelet::kube_proxy_version_for_release`]).
pub const KUBE_PROXY_VERSION: &str = "kube-proxy-version-for-release";

/// The reason of the Warning event that says a reacting plugin's queue
/// dropped matched lines.
pub const STREAM_LINES_DROPPED: &str = "StreamLinesDropped";

/// The built-in step that keeps Ready the last condition
/// ([`node::kubelet::ready_last`]).
pub const READY_LAST: &str = "ready-last";

/// The built-in step that keeps the node's Ready condition as the pass
/// found it ([`PassOptions::keep_ready`]).
pub const KEEP_READY: &str = "keep-ready-until-checked";

/// The built-in step that keeps the addresses a cloud-controller-manager
/// wrote ([`PassOptions::keep_addresses`]).
pub const KEEP_ADDRESSES: &str = "keep-cloud-addresses";

/// What a pass does besides the setters, decided by the agent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassOptions {
    /// Keep the node's Ready condition as it is, and drop the setters'
    /// `NodeReady`/`NodeNotReady` events: the first pass of a run, whose
    /// readiness checks have not run before it (no NotReady at a restart,
    /// no Ready=True before a check).
    pub keep_ready: bool,
    /// `cloudProvider: external`: once the node has addresses (the
    /// cloud-controller-manager's), they stay as they are.
    pub keep_addresses: bool,
    /// Companion mode: the kubelet beside the engine writes the fields it
    /// reads from its container runtime and machine, so the passes do not
    /// ([`PassOptions::kubelet_fields`]).
    pub companion: bool,
    /// Those of the [`kubelet_fields`](Self::kubelet_fields) the server did
    /// not keep as written ([`node::kubelet::not_kept`]): left as the node
    /// has them.
    pub server_drops: node::kubelet::CurrentFields,
    /// The server's release (`None`: not known, nothing of a release is
    /// written). Also in companion mode: the units its kubelet writes
    /// `capacity[ephemeral-storage]` in
    /// ([`node::kubelet::ephemeral_storage_in_release_units`]).
    pub release: Option<node::kubelet::ServerVersion>,
}

impl PassOptions {
    /// The release whose kubelet's runtime and machine fields (runtime
    /// handlers, features, swap, declared features, kubeProxyVersion before
    /// 1.33) the pass writes ([`node::kubelet::current_kubelet_fields`]):
    /// the server's, unless in companion mode, where the kubelet writes
    /// them.
    pub fn kubelet_fields(&self) -> Option<node::kubelet::ServerVersion> {
        self.release.filter(|_| !self.companion)
    }
}

/// What a pass did.
#[derive(Debug, Clone, Default)]
pub struct PassReport {
    /// One entry per setter, in run order.
    pub setters: Vec<SetterReport>,
    /// One entry per built-in step of the host ([`OS_ARCH_LABELS`],
    /// [`ALLOCATABLE`], [`READY_LAST`], ...), in run order, after the
    /// setters.
    pub builtins: Vec<SetterReport>,
    /// Fields removed because the plugin that owned them is gone.
    pub released: Vec<(String, FieldPath)>,
    /// Events the setters asked for, with the plugin that asked.
    pub events: Vec<(String, EmittedEvent)>,
    /// What the API server would refuse in the pass's node, when the
    /// checks of each step missed it: the pass then gives back its input
    /// unchanged, since one refused field fails a whole status update.
    pub refused: Option<Vec<Problem>>,
    /// What the container runtime answered before the pass, when one is
    /// configured: its name and version, or why it did not answer. Filled
    /// in by the agent, whose step logs each change of it.
    pub container_runtime: Option<Result<String, String>>,
    /// With [`Incremental::Check`]: the parts that would have stood and
    /// differ from the called ones, in this pass.
    pub mismatches: u64,
}

impl PassReport {
    /// The setters that failed.
    pub fn failures(&self) -> impl Iterator<Item = (&str, &SetterError)> {
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
/// 1. its size: the runtime refuses more than
///    [`nodestatus_runtime::MAX_OUTPUT_BYTES`] (the bound of a node) before
///    anything parses it (kind `output-too-large`);
/// 2. JSON, and a Node (a 0.1 setter's output, with its `metadata.name`)
///    or a part ([`node::Part::parse`], a 0.2 setter's) (kind `Output`);
/// 3. the number of fields: those a 0.1 output changes, from the one
///    [`node::Diff`] of output and input, or those a part names
///    ([`nodestatus_model::ownership::MAX_FIELDS_PER_PLUGIN`], kind `Limit`),
///    before the policy and validation look at each;
/// 4. the policy: each of those fields against its
///    [`nodestatus_model::policy::Allowance`] (kind `Policy`); list items
///    count by merge key, so a second entry of a condition type is a change
///    of that type. A part's every field is checked, changed or not: a part
///    cannot name a field its plugin may not set;
/// 5. the API server's rules and nodestatus's own ([`validate`]), for
///    problems the write adds to its input (kind `Invalid`): a plugin is
///    not blamed for what the node already held. A part that changes
///    nothing (the steady state) builds no node and validates nothing;
/// 6. the ownership record's bounds (kind `Limit`).
///
/// Once accepted, the conditions it wrote get their times from the host's
/// clock ([`node::stamp_times`]: heartbeat now, transition kept unless the
/// status flipped). A 0.1 setter's times must be valid (a bad time is
/// refused by step 5 like any bad field); a part's are ignored. A part's
/// condition that says the same again gets only its heartbeat, after the
/// setters. The fields a 0.2 setter owned and its part leaves out are
/// removed, unless another plugin owns them too.
///
/// After the setters, the fields of plugins no longer loaded are removed,
/// then the host's built-in steps run, through the same diff, policy and
/// validation (with the default allowance) and into
/// [`PassReport::builtins`]: with [`PassOptions::kubelet_fields`], what a
/// kubelet of the server's release writes from its container runtime and
/// machine ([`node::kubelet::current_kubelet_fields`]); the
/// `kubernetes.io/os` and `kubernetes.io/arch` labels, forced when missing
/// or wrong as the kubelet does after its setters; an allocatable for every
/// capacity key; Ready moved back to the end of the conditions when a
/// setter appended one after it. They own no fields: the host writes them
/// on every pass.
pub fn pass(
    runtime: &Runtime,
    set: &PluginSet,
    node: &Value,
    ctx: &CallContext,
    options: PassOptions,
) -> (Value, PassReport) {
    pass_with(runtime, set, node, ctx, options, None, None)
}

/// [`pass`], where a reacting plugin with matches waiting in `streams` is
/// called through `on-lines` with them (its part means what `set`'s does),
/// instead of `set`. Matches its queue dropped are said in a Warning event
/// ([`STREAM_LINES_DROPPED`]). With a `memo` (the node's, from its last
/// passes), a setter whose inputs did not change is not called: its last
/// part stands ([`memo`]).
pub fn pass_with(
    runtime: &Runtime,
    set: &PluginSet,
    node: &Value,
    ctx: &CallContext,
    options: PassOptions,
    streams: Option<&crate::streams::Streams>,
    mut memo: Option<&mut Memo>,
) -> (Value, PassReport) {
    let mut report = PassReport::default();
    let mut work = Work::new(node);
    if let Some(m) = memo.as_deref_mut() {
        m.retain(|name| set.contains(name));
    }
    let mut memo = memo.filter(|m| m.mode() != Incremental::Off);
    let mismatches_before = memo.as_ref().map_or(0, |m| m.stats().mismatches);

    for setter in set.setters() {
        let plugin = setter.plugin();
        let started = Instant::now();
        let mut how = work::Calling::default();
        let batch = match (streams, plugin.subscriptions()) {
            (Some(s), Some(_)) => s.take(plugin.name()),
            _ => None,
        };
        if let Some(b) = batch.as_ref().filter(|b| b.dropped > 0) {
            report.events.push((
                plugin.name().to_owned(),
                EmittedEvent {
                    event_type: nodestatus_runtime::EventType::Warning,
                    reason: STREAM_LINES_DROPPED.to_owned(),
                    message: format!(
                        "{} matched lines for plugin {} were dropped: its queue ({} lines) was full; see nodestatus_stream_lines_total",
                        b.dropped,
                        plugin.name(),
                        crate::streams::QUEUE_CAPACITY
                    ),
                },
            ));
        }
        let lines = batch.as_ref().map_or(0, |b| b.matches.len());
        let outcome = work
            .setter(
                runtime,
                setter,
                ctx.clone(),
                batch.as_ref(),
                memo.as_deref_mut(),
                &mut how,
            )
            .map(|(changed, events)| {
                report
                    .events
                    .extend(events.into_iter().map(|e| (plugin.name().to_owned(), e)));
                changed
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
            called: how.called,
            affects_readiness: setter.affects_readiness(),
            lines,
            skipped: how.skipped,
        });
    }
    report.mismatches = memo
        .as_ref()
        .map_or(0, |m| m.stats().mismatches - mismatches_before);
    work.beat(SystemTime::now());
    for w in set.withheld() {
        report.setters.push(SetterReport {
            plugin: w.plugin.clone(),
            version: w.version.clone(),
            outcome: Err(SetterError::new(SetterErrorKind::Withheld, &w.reason)),
            duration: Duration::ZERO,
            called: Duration::ZERO,
            affects_readiness: w.affects_readiness,
            lines: 0,
            skipped: false,
        });
    }
    report.released = work.release_unloaded(set);
    for (plugin, path) in &report.released {
        tracing::info!(plugin, field = %path, "removed a field owned by a plugin that is no longer loaded");
    }
    if options.keep_ready {
        report
            .events
            .retain(|(_, e)| !matches!(e.reason.as_str(), "NodeReady" | "NodeNotReady"));
    }
    let facts = options.kubelet_fields().map(|_| runtime_and_machine(ctx));
    for step in builtins(node, options, facts.as_ref()) {
        report.builtins.push(work.builtin(step));
    }
    match work.finish() {
        Ok(current) => (current, report),
        Err(refused) => {
            tracing::error!(
                "the pass's node would be refused by the API server, so nothing of it is written: {}",
                validate::describe(&refused)
            );
            report.refused = Some(refused);
            (node.clone(), report)
        }
    }
}

/// What a built-in step writes over the node so far (`None`: it changes
/// nothing, the steady state, which costs no copy).
type StepFn<'a> = Box<dyn Fn(&Value) -> Option<Value> + 'a>;

/// A built-in step of the host: its name and what it writes.
struct Builtin<'a> {
    name: &'static str,
    step: StepFn<'a>,
}

/// The host's built-in steps of a pass over `node` (the node as it came),
/// in order, as `options` decide.
fn builtins<'a>(
    node: &'a Value,
    options: PassOptions,
    facts: Option<&'a node::kubelet::RuntimeAndMachine>,
) -> Vec<Builtin<'a>> {
    let mut steps = Vec::new();
    if options.keep_ready {
        steps.push(Builtin {
            name: KEEP_READY,
            step: Box::new(move |c: &Value| node::kubelet::keep_condition(node, c, "Ready")),
        });
    }
    if options.keep_addresses {
        steps.push(Builtin {
            name: KEEP_ADDRESSES,
            step: Box::new(move |c: &Value| node::kubelet::keep_addresses(node, c)),
        });
    }
    if let Some(server) = options.release {
        steps.push(Builtin {
            name: RELEASE_UNITS,
            step: Box::new(move |c: &Value| {
                node::kubelet::ephemeral_storage_in_release_units(c, server)
            }),
        });
    }
    if let Some(server) = options.kubelet_fields() {
        steps.push(Builtin {
            name: KUBE_PROXY_VERSION,
            step: Box::new(move |c: &Value| {
                node::kubelet::kube_proxy_version_for_release(c, server)
            }),
        });
    }
    if let (Some(server), Some(facts)) = (options.kubelet_fields(), facts) {
        let skip = options.server_drops;
        steps.push(Builtin {
            name: CURRENT_KUBELET_FIELDS,
            step: Box::new(move |c: &Value| {
                node::kubelet::current_kubelet_fields(c, server, facts, skip)
            }),
        });
    }
    steps.push(Builtin {
        name: OS_ARCH_LABELS,
        step: Box::new(node::kubelet::os_arch_labels),
    });
    steps.push(Builtin {
        name: ALLOCATABLE,
        step: Box::new(node::kubelet::allocatable_for_every_capacity_key),
    });
    steps.push(Builtin {
        name: READY_LAST,
        step: Box::new(node::kubelet::ready_last),
    });
    steps
}

pub mod memo;
#[cfg(test)]
mod tests;
mod work;

pub use memo::{Incremental, Memo, MemoStats};

use work::{Work, runtime_and_machine};
