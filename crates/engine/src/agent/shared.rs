//! What the loops share: the node as last seen, whether it is registered
//! and ready, the health `/readyz` reports, whether the server answers,
//! and how a pass, an event or a failure is written. Each loop's own part
//! lives in its module ([`super::register`], [`super::sync`],
//! [`super::lease`], [`super::watch`]) and takes this part beside it; none
//! of them, nor this module, imports the [`super::State`] that holds them.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio::time::Instant;

use super::common::{Error, FAILURES_BEFORE_NOT_READY, NodeProblem};
use super::decide::{self, Random};
use super::health::Failing;
use super::io::{Action, Loop, Observation};
use super::reach::Reach;
use crate::config::Config;
use crate::pipeline::{PassOptions, PassReport, SetterError};
use nodestatus_runtime::EventType;

/// What a step may read besides the state and its input: the time, the
/// wall clock for the timestamps it writes, and random draws.
pub struct Ctx<'a> {
    /// Now, on the loops' clock.
    pub now: Instant,
    /// Now, on the wall clock (lease renewals, event times).
    pub wall: Timestamp,
    /// The random draws of the jitter.
    pub rng: &'a dyn Random,
}

/// The node as last seen: from the watch, a GET, or a write's answer.
#[derive(Debug, Clone)]
pub struct Live {
    /// The node.
    pub node: Option<Arc<Value>>,
    /// Its uid, the lease's owner.
    pub uid: Option<String>,
    /// Whether the copy can be trusted for a try 0: not after a failed
    /// watch or a connection reset, until a restarted watch has listed the
    /// node again.
    pub stale: bool,
    /// When the watch last (re)started.
    pub watch_started: Instant,
    /// Whether the running list has seen the node.
    pub(super) listed: bool,
}

/// What the loops share.
#[derive(Debug)]
pub struct Shared {
    pub(super) cfg: Arc<Config>,
    /// The machine's hostname (its facts, read once by the driver).
    pub(super) hostname: String,
    pub(super) live: Live,
    /// Whether the node was registered in this run (the kubelet's
    /// `registrationCompleted`).
    pub(super) registered: bool,
    /// Whether the node is found deleted (and not seen since).
    pub(super) node_gone: bool,
    /// `spec.unschedulable` as last seen by a status sync.
    pub(super) unschedulable: bool,
    /// Whether the node is ready to its own checks.
    pub(super) readiness: Readiness,
    pub(super) failing: BTreeMap<&'static str, Failing>,
    pub(super) last_sync_ok: Option<Instant>,
    pub(super) last_lease_ok: Option<Instant>,
    pub(super) last_pass: Option<Arc<PassReport>>,
    /// The API server's version, learned before the first registration
    /// try.
    pub(super) server: Option<nodestatus_model::node::kubelet::ServerVersion>,
    /// The kubelet fields this server did not keep as a status patch wrote
    /// them (a feature gate off drops its field): not written again in this
    /// run, where they would be patched on every pass.
    pub(super) server_drops: nodestatus_model::node::kubelet::CurrentFields,
    /// Whether the server answers, and what waits for it.
    pub(super) reach: Reach,
}

/// What decides the node's readiness besides its setters' own answers.
#[derive(Debug, Default)]
pub struct Readiness {
    /// Whether the readiness checks (one pass of the setters) have run.
    pub(super) checks_ran: bool,
    /// The machine itself is shutting down.
    pub(super) shutting_down: bool,
    /// Consecutive failed passes of each plugin that affects readiness.
    pub(super) failures: BTreeMap<String, (u32, SetterError)>,
    /// Whether the container runtime did not answer before the last pass
    /// that asked it.
    pub(super) runtime_failing: bool,
}

impl Shared {
    /// What the loops of an agent for `cfg.node_name` on a machine named
    /// `hostname` share, at `now`: nothing seen yet.
    pub fn new(cfg: Arc<Config>, hostname: String, now: Instant) -> Self {
        Self {
            cfg,
            hostname,
            live: Live {
                node: None,
                uid: None,
                stale: false,
                watch_started: now,
                listed: false,
            },
            registered: false,
            node_gone: false,
            unschedulable: false,
            readiness: Readiness::default(),
            failing: BTreeMap::new(),
            last_sync_ok: None,
            last_lease_ok: None,
            last_pass: None,
            server: None,
            server_drops: Default::default(),
            reach: Reach::default(),
        }
    }

    /// The lease's renewal period: a quarter of its duration.
    pub(super) fn lease_period(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.cfg.node_lease_duration_seconds as f64 * 0.25)
    }

    /// A whole renewal or status pass failed with `e`: when no answer
    /// came, the server is down, and only the lease probes it until it
    /// answers (while the reach is armed: [`Reach::arm`]).
    pub(super) fn unanswered(&mut self, e: &Error, ctx: &Ctx) {
        let class = match e {
            Error::RetriesExceeded(inner) | Error::LeaseRetriesExceeded(inner) => inner,
            other => other,
        };
        let Error::Api(c) = class else { return };
        if self.reach.failed(c.class(), ctx.now) {
            tracing::warn!(
                node = self.cfg.node_name,
                "the API server does not answer: the status sync and the watch wait, and the lease probes it until it answers"
            );
        }
    }

    /// Takes `node` as the live node unless the one held is newer (by
    /// resourceVersion, for the same node).
    pub(super) fn offer(&mut self, node: Value, out: &mut Vec<Action>) {
        if let Some(uid) = node.pointer("/metadata/uid").and_then(Value::as_str) {
            self.live.uid = Some(uid.to_owned());
        }
        let rv = |n: &Value| {
            n.pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        let held = self.live.node.as_deref();
        let same_node =
            held.is_none_or(|l| l.pointer("/metadata/uid") == node.pointer("/metadata/uid"));
        if !same_node || decide::newer(held.and_then(rv).as_deref(), rv(&node).as_deref()) {
            self.live.node = Some(Arc::new(node));
            self.came_back(out);
        }
    }

    /// The node is gone: forget it (and its uid, so that no lease is created
    /// pointing at it).
    pub(super) fn forget_node(&mut self, out: &mut Vec<Action>) {
        self.live.node = None;
        self.live.uid = None;
        if self.registered && !self.node_gone {
            self.node_gone = true;
            out.push(Action::Observe(Observation::NodeDeleted(true)));
            tracing::error!(
                node = self.cfg.node_name,
                "the node was deleted from the API server; nodestatus does not register it again in this run (the kubelet's rule): restart nodestatus to register it, or set reRegisterDeletedNode: true"
            );
        }
    }

    /// The node exists (again): recreated by someone else after a deletion.
    pub(super) fn came_back(&mut self, out: &mut Vec<Action>) {
        if self.node_gone {
            self.node_gone = false;
            out.push(Action::Observe(Observation::NodeDeleted(false)));
            tracing::info!(node = self.cfg.node_name, "the node exists again");
        }
    }

    /// The node exists and is ours: registration is complete.
    pub(super) fn registered_with(&mut self, node: Value, out: &mut Vec<Action>) {
        self.offer(node, out);
        self.registered = true;
        self.node_gone = false;
        out.push(Action::Observe(Observation::NodeDeleted(false)));
    }

    /// Problems that make the node not ready: the node's own shutdown, and
    /// plugins whose failure affects readiness that failed
    /// [`FAILURES_BEFORE_NOT_READY`] passes in a row.
    pub fn node_problems(&self) -> Vec<NodeProblem> {
        let mut p = Vec::new();
        if self.readiness.shutting_down {
            p.push(NodeProblem::ShuttingDown);
        }
        for (plugin, (n, error)) in &self.readiness.failures {
            if *n >= FAILURES_BEFORE_NOT_READY {
                p.push(NodeProblem::PluginFailing {
                    plugin: plugin.clone(),
                    error: error.clone(),
                });
            }
        }
        p
    }

    /// A pass of the setters over `base` for `for_loop`, with the options
    /// the state decides: the first pass of a run keeps the node's Ready as
    /// it is (no NotReady at a restart, no Ready=True before a check), and
    /// with an external cloud provider the addresses it wrote stay.
    pub(super) fn run_pass(&mut self, for_loop: Loop, base: Arc<Value>) -> Action {
        let options = PassOptions {
            keep_ready: !std::mem::replace(&mut self.readiness.checks_ran, true),
            keep_addresses: self.cfg.external_cloud_provider,
            // In companion mode the kubelet writes its runtime's and
            // machine's fields itself.
            companion: self.cfg.companion,
            server_drops: self.server_drops,
            release: self.server,
        };
        Action::RunPass {
            for_loop,
            base,
            problems: self
                .node_problems()
                .iter()
                .map(ToString::to_string)
                .collect(),
            options,
        }
    }

    /// Notes what one pass (not one try) found: its setters' failures
    /// ([`State::note_failures`]), and whether the container runtime stopped
    /// or started answering again, observed once at each change.
    pub(super) fn note_pass(&mut self, report: &PassReport, out: &mut Vec<Action>) {
        self.note_failures(report);
        if let Some(answer) = &report.container_runtime
            && answer.is_err() != self.readiness.runtime_failing
        {
            self.readiness.runtime_failing = answer.is_err();
            out.push(Action::Observe(Observation::ContainerRuntime(
                answer.clone(),
            )));
        }
    }

    /// Counts one pass (not one try) of the setters: a plugin that affects
    /// readiness and failed adds one to its count; any other outcome clears
    /// it; a plugin that is gone no longer counts.
    fn note_failures(&mut self, report: &PassReport) {
        self.readiness
            .failures
            .retain(|name, _| report.setters.iter().any(|s| &s.plugin == name));
        for s in &report.setters {
            match (&s.outcome, s.affects_readiness) {
                (Err(e), true) => {
                    let count = self
                        .readiness
                        .failures
                        .get(&s.plugin)
                        .map_or(0, |(n, _)| *n);
                    self.readiness
                        .failures
                        .insert(s.plugin.clone(), (count + 1, e.clone()));
                }
                _ => {
                    self.readiness.failures.remove(&s.plugin);
                }
            }
        }
    }

    /// The events a pass's setters asked for.
    pub(super) fn pass_events(&self, report: &PassReport, ctx: &Ctx, out: &mut Vec<Action>) {
        for (plugin, e) in &report.events {
            out.push(self.event(ctx, e.event_type, &e.reason, &e.message, Some(plugin)));
        }
    }

    /// A loop failed: counted, kept for `/readyz`, and when the credentials
    /// were refused after start, a Warning event when it starts.
    pub(super) fn failed(&mut self, l: &'static str, e: &Error, ctx: &Ctx, out: &mut Vec<Action>) {
        let class = match e {
            Error::RetriesExceeded(inner) | Error::LeaseRetriesExceeded(inner) => inner.class(),
            other => other.class(),
        };
        out.push(Action::Observe(Observation::LoopError(l, class)));
        let first = !self.failing.contains_key(l);
        let since = self.failing.get(l).map_or(ctx.now, |x| x.since);
        self.failing.insert(
            l,
            Failing {
                class,
                message: e.to_string(),
                since,
            },
        );
        if first && matches!(class, "unauthorized" | "forbidden") {
            let reason = if l == "lease" {
                "FailedLeaseRenewal"
            } else {
                "FailedNodeStatusUpdate"
            };
            out.push(self.event(
                ctx,
                EventType::Warning,
                reason,
                &format!("the {l} loop's credentials were refused ({class}); retrying: {e}"),
                None,
            ));
        }
    }

    /// A loop succeeded again.
    pub(super) fn recovered(&mut self, l: &'static str, ctx: &Ctx) {
        if let Some(f) = self.failing.remove(l) {
            tracing::info!(
                node = self.cfg.node_name,
                after = ?ctx.now.saturating_duration_since(f.since),
                "the {l} loop recovered"
            );
        }
    }

    /// An event about the node, as the kubelet records it.
    pub(super) fn event(
        &self,
        ctx: &Ctx,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) -> Action {
        let name = self.cfg.node_name.clone();
        let now = ctx.wall;
        // The kubelet's `<node>.<nanoseconds in hex>`, and a hash of what
        // the event says: one step can record several events at the same
        // instant, and a second create of one name is refused.
        let said = fnv1a(
            [plugin.unwrap_or(""), reason, message]
                .iter()
                .flat_map(|s| s.bytes().chain([0])),
        );
        Action::RecordEvent(Box::new(Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.{:x}{said:08x}", now.as_nanosecond())),
                namespace: Some("default".into()),
                ..Default::default()
            },
            involved_object: ObjectReference {
                kind: Some("Node".into()),
                name: Some(name.clone()),
                // The kubelet's node reference uses the node name as its UID.
                uid: Some(name.clone()),
                ..Default::default()
            },
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(event_type.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(
                    plugin.map_or("nodestatus".to_owned(), |p| format!("nodestatus/{p}")),
                ),
                host: Some(name.clone()),
            }),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            reporting_component: Some("nodestatus".into()),
            reporting_instance: Some(name),
            ..Default::default()
        }))
    }
}

/// 32-bit FNV-1a: a short, stable hash for event names.
fn fnv1a(bytes: impl Iterator<Item = u8>) -> u32 {
    bytes.fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
