//! The agent as a value: its whole [`State`], the [`Input`]s it takes, the
//! [`Action`]s it asks for, and the one [`State::step`] that turns an input
//! into actions.
//!
//! `step` does no I/O. It reads no clock and draws no random number of its
//! own: the time (`tokio::time::Instant`, so a test can run minutes of
//! virtual time at once), the wall clock for the timestamps it writes, and
//! the random draws come in a [`Ctx`]. What it cannot do itself (an API
//! call, a pass of the setters, an event, a metric) it returns as an
//! [`Action`]; the answer of a call or a pass comes back as the next
//! [`Input`]. The driver ([`super::Agent`]) performs the actions and feeds
//! the answers back, and does nothing else.
//!
//! The rules of the three loops live in [`super::register`],
//! [`super::sync`] and [`super::lease`], each a part of the state with its
//! own `step`; this module holds what they share: the live node, the
//! readiness bookkeeping and the health that `/readyz` reports.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::Value;
use tokio::time::Instant;

use super::client::ErrorClass;
use super::decide::{self, Random};
pub use super::health::{Failing, Snapshot};
pub use super::io::{Action, Answer, Call, Input, Loop, Observation, WatchEvent};
use super::lease::LeaseLoop;
use super::reach::Reach;
use super::register::Register;
use super::sync::Sync;
use super::watch::WatchLoop;
use super::{Error, FAILURES_BEFORE_NOT_READY, NodeProblem};
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

/// Where the agent is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Registering the node (at start, or again after a deletion with
    /// `reRegisterDeletedNode`).
    Registering,
    /// The node exists: the status sync and the lease run.
    Running,
    /// An identity error at start ended it.
    Stopped,
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

/// The whole state of one node's agent.
#[derive(Debug)]
pub struct State {
    pub(super) cfg: Arc<Config>,
    /// The machine's hostname (its facts, read once by the driver).
    pub(super) hostname: String,
    pub(super) phase: Phase,
    pub(super) live: Live,
    /// Whether the node was registered in this run (the kubelet's
    /// `registrationCompleted`).
    pub(super) registered: bool,
    /// Whether the node is found deleted (and not seen since).
    pub(super) node_gone: bool,
    /// Whether the readiness checks (one pass of the setters) have run.
    pub(super) checks_ran: bool,
    /// The machine itself is shutting down.
    pub(super) shutting_down: bool,
    /// Consecutive failed passes of each plugin that affects readiness.
    pub(super) failures: BTreeMap<String, (u32, SetterError)>,
    /// Whether the container runtime did not answer before the last pass
    /// that asked it.
    pub(super) runtime_failing: bool,
    /// `spec.unschedulable` as last seen by a status sync.
    pub(super) unschedulable: bool,
    pub(super) failing: BTreeMap<&'static str, Failing>,
    pub(super) last_sync_ok: Option<Instant>,
    pub(super) last_lease_ok: Option<Instant>,
    pub(super) last_pass: Option<Arc<PassReport>>,
    /// The API server's version, learned before the first registration
    /// try.
    pub(super) server: Option<nodestatus_model::node::kubelet::ServerVersion>,
    pub(super) register: Register,
    pub(super) sync: Sync,
    pub(super) lease: LeaseLoop,
    pub(super) watch: WatchLoop,
    /// Whether the server answers, and what waits for it.
    pub(super) reach: Reach,
    /// Whether the loops run on their timers: `false` for an agent that
    /// acts only when asked ([`Input::Register`], [`Input::SyncNow`],
    /// [`Input::LeaseNow`]) until [`Input::RunLoops`].
    pub(super) loops: bool,
}

impl State {
    /// The state of an agent for `cfg.node_name` on a machine named
    /// `hostname`, starting at `now`: registration first.
    pub fn new(cfg: Arc<Config>, hostname: String, now: Instant) -> Self {
        Self {
            hostname,
            phase: Phase::Registering,
            live: Live {
                node: None,
                uid: None,
                stale: false,
                watch_started: now,
                listed: false,
            },
            registered: false,
            node_gone: false,
            checks_ran: false,
            shutting_down: false,
            failures: BTreeMap::new(),
            runtime_failing: false,
            unschedulable: false,
            failing: BTreeMap::new(),
            last_sync_ok: None,
            last_lease_ok: None,
            last_pass: None,
            server: None,
            register: Register::new(now),
            sync: Sync::new(&cfg, now),
            lease: LeaseLoop::new(),
            watch: WatchLoop::new(),
            reach: Reach::default(),
            loops: true,
            cfg,
        }
    }

    /// The same state, acting only when asked: no registration starts,
    /// and once registered no timer starts a status sync or a renewal,
    /// until [`Input::RunLoops`]. What a request starts (the
    /// registration's backoff, the tries of a sync) runs its course.
    pub fn on_request(mut self) -> Self {
        self.loops = false;
        self.register = Register::waiting();
        self
    }

    /// The config in force.
    pub fn cfg(&self) -> &Arc<Config> {
        &self.cfg
    }

    /// Where the agent is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The node as last seen.
    pub fn live(&self) -> &Live {
        &self.live
    }

    /// The copy `/readyz` and `/status` read.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            cfg: self.cfg.clone(),
            registered: self.registered,
            node_gone: self.node_gone,
            last_sync_ok: self.last_sync_ok,
            last_lease_ok: self.last_lease_ok,
            failing: self.failing.clone(),
            last_pass: self.last_pass.clone(),
            node: self.live.node.clone(),
        }
    }

    /// When the state next has something to do without an input: the
    /// earliest timer of the loops that run. `None`: nothing until an input.
    pub fn next_wakeup(&self) -> Option<Instant> {
        match self.phase {
            Phase::Stopped => None,
            Phase::Registering => [self.register.next_at(), self.lease_timer()]
                .into_iter()
                .flatten()
                .min(),
            Phase::Running => [
                self.sync
                    .next_at()
                    .filter(|_| self.loops && !self.reach.holding()),
                self.lease_timer().filter(|_| self.loops),
                self.watch.retry_at(),
                self.reach.resume_at(),
            ]
            .into_iter()
            .flatten()
            .min(),
        }
    }

    /// The phase of the lease renewals after the first one, in `[0, 1)` of
    /// a period, instead of a random draw.
    pub fn set_lease_phase(&mut self, phase: f64) {
        self.lease.set_phase(phase);
    }

    /// Whether the server is found down (only the lease probes it).
    pub fn server_down(&self) -> bool {
        self.reach.is_down()
    }

    /// The server served a call: when it was down, it is back, and the
    /// status sync and the watch resume 30 % to 130 % of a lease period
    /// later ([`super::reach`]).
    fn served(&mut self, ctx: &Ctx) {
        let resume_at = ctx.now + super::reach::resume_delay(self.lease_period(), ctx.rng.unit());
        if let Some(down) = self.reach.answered(ctx.now, resume_at) {
            self.lease.rephase();
            tracing::info!(
                node = self.cfg.node_name,
                after = ?down,
                resume_in = ?resume_at - ctx.now,
                "the API server answers again; the status sync and the watch resume spread over the lease period after the next"
            );
        }
    }

    /// A whole renewal or status pass failed with `e`: when no answer
    /// came, the server is down, and only the lease probes it until it
    /// answers. Not while registering, and not without a lease loop (in
    /// companion mode the status sync is the only loop, and keeps trying).
    pub(super) fn unanswered(&mut self, e: &Error, ctx: &Ctx) {
        if self.phase != Phase::Running || self.cfg.companion {
            return;
        }
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

    /// Drops every pooled connection after a failed try (the kubelet's
    /// `closeAllConns`), the watch's too: a running watch starts again on a
    /// new one (the driver does it when the connections were dropped).
    pub(super) fn reset_connections(&mut self, ctx: &Ctx, out: &mut Vec<Action>) {
        let watch = !self.watch.failed() && !self.reach.holding();
        if watch {
            self.live.watch_started = ctx.now;
        }
        out.push(Action::ResetConnections { watch });
    }

    /// The lease's renewal period: a quarter of its duration.
    pub(super) fn lease_period(&self) -> std::time::Duration {
        std::time::Duration::from_secs_f64(self.cfg.node_lease_duration_seconds as f64 * 0.25)
    }

    /// Time passed while the status sync was held: at the resume time, the
    /// failed watch resumes, and the held pass runs a second later (after
    /// the watch, so that it can start from the watch's copy).
    fn resume_due(&mut self, ctx: &Ctx, out: &mut Vec<Action>) {
        if self.reach.resume_at().is_none_or(|t| ctx.now < t) {
            return;
        }
        self.reach.resumed();
        let mut pass_at = ctx.now;
        if self.watch.failed() {
            super::watch::resume(self, ctx, out);
            pass_at += std::time::Duration::from_secs(1);
        }
        self.sync.resume(pass_at);
    }

    fn lease_timer(&self) -> Option<Instant> {
        self.lease.next_at()
    }

    /// Takes one input; returns what the driver must do.
    pub fn step(&mut self, input: Input, ctx: &Ctx) -> Vec<Action> {
        let mut out = Vec::new();
        match input {
            Input::Tick => {
                if self.phase == Phase::Running {
                    self.resume_due(ctx, &mut out);
                    super::watch::tick(self, ctx, &mut out);
                }
                match self.phase {
                    Phase::Registering => super::register::tick(self, ctx, &mut out),
                    Phase::Running if self.loops => super::sync::tick(self, ctx, &mut out),
                    Phase::Running | Phase::Stopped => {}
                }
                if self.loops && self.lease_timer().is_some_and(|t| ctx.now >= t) {
                    super::lease::start(self, ctx, &mut out);
                }
            }
            Input::Register => super::register::asked(self, ctx),
            Input::RunLoops => self.run_loops(ctx),
            Input::SyncNow => super::sync::start_now(self, ctx, &mut out),
            Input::PluginsChanged => {
                if self.phase == Phase::Running && !self.node_gone {
                    super::sync::start_now(self, ctx, &mut out)
                }
            }
            Input::LeaseNow(cached) => {
                self.lease.set_cache(cached);
                super::lease::start(self, ctx, &mut out)
            }
            Input::NodeShutdown => super::sync::node_shutdown(self, ctx, &mut out),
            Input::NodeShutdownCancelled => self.shutting_down = false,
            Input::Config(cfg) => {
                self.sync.set_config(&cfg);
                self.cfg = cfg;
            }
            Input::Watch(e) => super::watch::event(self, e, ctx, &mut out),
            Input::Event {
                event_type,
                reason,
                message,
                plugin,
            } => out.push(self.event(ctx, event_type, &reason, &message, plugin.as_deref())),
            Input::Answer(a) => {
                if a.serving() == Some(true) {
                    self.served(ctx);
                }
                self.answer(a, ctx, &mut out)
            }
        }
        out
    }

    fn answer(&mut self, a: Answer, ctx: &Ctx, out: &mut Vec<Action>) {
        match a {
            Answer::Lease(_) | Answer::LeaseWritten(_) => super::lease::answer(self, a, ctx, out),
            Answer::Created(_)
            | Answer::Version(_)
            | Answer::Node(Loop::Register, _)
            | Answer::Patched(Loop::Register, _)
            | Answer::Pass(Loop::Register, _) => super::register::answer(self, a, ctx, out),
            Answer::Node(Loop::Sync, _)
            | Answer::Patched(Loop::Sync, _)
            | Answer::Pass(Loop::Sync, _) => super::sync::answer(self, a, ctx, out),
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
    pub(super) fn registered_with(&mut self, node: Value, ctx: &Ctx, out: &mut Vec<Action>) {
        self.offer(node, out);
        self.registered = true;
        if self.node_gone {
            self.node_gone = false;
        }
        out.push(Action::Observe(Observation::NodeDeleted(false)));
        if self.phase == Phase::Registering {
            self.phase = Phase::Running;
            if self.loops {
                self.start_loops(ctx.now);
            }
        }
    }

    /// The status sync and the lease start (once the node is registered).
    fn start_loops(&mut self, now: Instant) {
        self.sync.start(now);
        // In companion mode the kubelet owns the lease.
        if !self.cfg.companion {
            self.lease.start(now);
        }
    }

    /// An agent that acted only when asked runs its loops from now on:
    /// the registration when the node is not registered and none runs,
    /// else the status sync and the lease.
    fn run_loops(&mut self, ctx: &Ctx) {
        if std::mem::replace(&mut self.loops, true) {
            return;
        }
        match self.phase {
            Phase::Registering => super::register::asked(self, ctx),
            Phase::Running => self.start_loops(ctx.now),
            Phase::Stopped => {}
        }
    }

    /// Problems that make the node not ready: the node's own shutdown, and
    /// plugins whose failure affects readiness that failed
    /// [`FAILURES_BEFORE_NOT_READY`] passes in a row.
    pub fn node_problems(&self) -> Vec<NodeProblem> {
        let mut p = Vec::new();
        if self.shutting_down {
            p.push(NodeProblem::ShuttingDown);
        }
        for (plugin, (n, error)) in &self.failures {
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
    pub(super) fn run_pass(&mut self, for_loop: Loop, base: Value) -> Action {
        let options = PassOptions {
            keep_ready: !std::mem::replace(&mut self.checks_ran, true),
            keep_addresses: self.cfg.external_cloud_provider,
            // In companion mode the kubelet writes its runtime's and
            // machine's fields itself.
            kubelet_fields: self.server.filter(|_| !self.cfg.companion),
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
            && answer.is_err() != self.runtime_failing
        {
            self.runtime_failing = answer.is_err();
            out.push(Action::Observe(Observation::ContainerRuntime(
                answer.clone(),
            )));
        }
    }

    /// Counts one pass (not one try) of the setters: a plugin that affects
    /// readiness and failed adds one to its count; any other outcome clears
    /// it; a plugin that is gone no longer counts.
    fn note_failures(&mut self, report: &PassReport) {
        self.failures
            .retain(|name, _| report.setters.iter().any(|s| &s.plugin == name));
        for s in &report.setters {
            match (&s.outcome, s.affects_readiness) {
                (Err(e), true) => {
                    let count = self.failures.get(&s.plugin).map_or(0, |(n, _)| *n);
                    self.failures
                        .insert(s.plugin.clone(), (count + 1, e.clone()));
                }
                _ => {
                    self.failures.remove(&s.plugin);
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

/// Whether an error of an API call is a conflict (a stale lease).
pub(super) fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Api(c) if c.class() == ErrorClass::Conflict)
}

/// 32-bit FNV-1a: a short, stable hash for event names.
fn fnv1a(bytes: impl Iterator<Item = u8>) -> u32 {
    bytes.fold(0x811c_9dc5, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}
