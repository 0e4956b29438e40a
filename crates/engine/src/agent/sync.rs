//! The status sync (`syncNodeStatus`): every `nodeStatusUpdateFrequency`
//! (4 % jitter), run the setters on a copy of the live node and patch
//! `nodes/<name>/status` only when the status changed or the report period
//! ran out.
//!
//! A pass is up to 5 tries (`nodeStatusUpdateRetry`): the first from the
//! live node (the watch's copy, when it is trusted), the others from a
//! fresh GET; after a failed try past the first, every connection is
//! dropped (`onRepeatedHeartbeatFailure`). At start, a fast update runs
//! every 100 ms until the node is Ready (2 minutes at most); it patches only
//! a change with Ready not False, and ends at its first failure.
//!
//! The failure counter of a readiness setter counts passes, not tries, and
//! only the events of the try whose result reached the server are recorded.

use std::sync::Arc;

use serde_json::Value;
use tokio::time::Instant;

use super::common::{Error, SHUTTING_DOWN, SyncOutcome, is_ready, ready_status};
use super::decide::{
    self, FastUpdate, NODE_STATUS_UPDATE_RETRY, PassKind, ReportSchedule, SyncClock,
};
use super::io::{Action, Answer, Call, Loop, Observation};
use super::shared::{Ctx, Shared};
use super::watch::{self, WatchLoop};
use crate::config::Config;
use crate::pipeline::PassReport;
use nodestatus_model::node::Diff;
use nodestatus_model::node::kubelet::{self, CurrentField};
use nodestatus_runtime::EventType;

/// Where a try of the pass is.
#[derive(Debug)]
enum Op {
    /// No pass runs.
    Idle,
    /// A GET of the node for this try.
    Getting,
    /// The setters run over `base`.
    Running(Arc<Value>),
    /// The patch is sent; what to report when it lands.
    Patching {
        base: Arc<Value>,
        changed: bool,
        bytes: usize,
        /// The kubelet fields the patched node holds, to compare with the
        /// server's answer.
        written: Vec<(CurrentField, Value)>,
    },
}

/// One pass of the status sync: its tries so far.
#[derive(Debug)]
struct Pass {
    kind: PassKind,
    attempt: usize,
    /// Whether the node's shutdown began it (its end is what the shutdown
    /// waits for).
    for_shutdown: bool,
    /// The report of the last try that ran the setters.
    report: Option<PassReport>,
    /// The last try's error.
    last_error: Option<Error>,
    op: Op,
}

/// The status sync's state.
#[derive(Debug)]
pub struct Sync {
    clock: SyncClock,
    fast: FastUpdate,
    report: ReportSchedule,
    started: bool,
    /// When the next pass is due (`None` while one runs).
    next_at: Option<Instant>,
    pass: Option<Pass>,
    /// The node's shutdown asked for a pass while one ran: one more, at
    /// once, when it ends.
    shutdown_pending: bool,
    /// Matched lines wait, or a watched path changed, since the last pass
    /// began: a triggered pass is due as soon as the gate allows.
    triggered: bool,
    gate: decide::TriggerGate,
}

impl Sync {
    /// A status sync for `cfg`, not started.
    pub fn new(cfg: &Config, now: Instant) -> Self {
        Self {
            clock: SyncClock::new(cfg.node_status_update_frequency, now),
            fast: FastUpdate::new(now),
            report: ReportSchedule::new(cfg.node_status_report_frequency),
            started: false,
            next_at: None,
            pass: None,
            shutdown_pending: false,
            triggered: false,
            gate: decide::TriggerGate::default(),
        }
    }

    /// Starts the loop at `now` (once the node is registered): the first
    /// regular pass at once, the fast update from now.
    pub fn start(&mut self, now: Instant) {
        if !self.started {
            self.started = true;
            self.clock.restart(now);
            self.fast = FastUpdate::new(now);
            self.next_at = Some(now);
        }
    }

    /// When the next pass is due (`None` while one runs, or before start).
    pub fn next_at(&self) -> Option<Instant> {
        self.pass.is_none().then_some(self.next_at).flatten()
    }

    /// A live config change: the report period from the last write on, the
    /// update period from the next regular pass on.
    pub fn set_config(&mut self, cfg: &Config) {
        self.report.set_period(cfg.node_status_report_frequency);
        self.clock.set_period(cfg.node_status_update_frequency);
    }

    /// When the next periodic report is due.
    pub fn next_report(&self) -> Option<Instant> {
        self.report.next_due()
    }

    /// The held loops resume ([`super::reach`]): the pass that was due
    /// while the server did not answer runs at `at`.
    pub fn resume(&mut self, at: Instant) {
        if let Some(next) = &mut self.next_at {
            *next = (*next).max(at);
        }
    }
}

/// A pass is due: start it.
/// What the state does after a status sync's step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum After {
    /// Nothing more.
    Nothing,
    /// The node was deleted and `reRegisterDeletedNode` is set: register
    /// it again.
    RegisterAgain,
}

impl Sync {
    /// Time passed: a pass that is due starts (unless the server is found
    /// down, [`super::reach`]). The node is registered.
    pub(super) fn tick(
        &mut self,
        s: &mut Shared,
        w: &mut WatchLoop,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if s.reach.holding() || self.next_at().is_none_or(|t| ctx.now < t) {
            return;
        }
        let kind = match self.clock.kind(ctx.now) {
            PassKind::Fast if self.triggered => PassKind::Triggered,
            kind => kind,
        };
        begin(self, s, w, kind, false, ctx, out);
    }

    /// A reacting plugin has matched lines waiting, or a watched path
    /// changed ([`crate::streams`]): a pass runs at once, or as soon as
    /// [`decide::TriggerGate`] allows (once the one running ends).
    pub(super) fn trigger(
        &mut self,
        s: &mut Shared,
        w: &mut WatchLoop,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if !self.started {
            return;
        }
        self.triggered = true;
        if self.pass.is_some() {
            return;
        }
        let at = self.gate.next_allowed(ctx.now);
        self.next_at = Some(self.next_at.map_or(at, |t| t.min(at)));
        self.tick(s, w, ctx, out);
    }

    /// A regular pass now ([`super::AgentHandle::sync_now`]), unless one
    /// runs.
    pub(super) fn start_now(
        &mut self,
        s: &mut Shared,
        w: &mut WatchLoop,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        if self.pass.is_none() {
            begin(self, s, w, PassKind::Regular, false, ctx, out);
        }
    }

    /// The node itself is shutting down: Ready=False `node is shutting
    /// down`, written at once by a pass that reports whatever changed.
    pub(super) fn node_shutdown(
        &mut self,
        s: &mut Shared,
        w: &mut WatchLoop,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        s.readiness.shutting_down = true;
        tracing::warn!(
            node = s.cfg.node_name,
            "{SHUTTING_DOWN}: marking it not Ready"
        );
        self.report.force();
        if self.pass.is_some() {
            self.shutdown_pending = true;
        } else {
            begin(self, s, w, PassKind::Regular, true, ctx, out);
        }
    }

    /// An answer to the current try.
    pub(super) fn answer(
        &mut self,
        s: &mut Shared,
        w: &mut WatchLoop,
        a: Answer,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> After {
        let me = self;
        let Some(pass) = me.pass.as_mut() else {
            tracing::debug!(?a, "status sync: an answer with no pass running");
            return After::Nothing;
        };
        let op = std::mem::replace(&mut pass.op, Op::Idle);
        let kind = pass.kind;
        match (op, a) {
            (Op::Getting, Answer::Node(_, r)) => match r {
                Ok(Some(n)) => {
                    s.offer(n.clone(), out);
                    let base = Arc::new(n);
                    let action = s.run_pass(Loop::Sync, base.clone());
                    set_op(me, Op::Running(base));
                    out.push(action);
                    After::Nothing
                }
                Ok(None) => gone(me, s, w, ctx, out),
                Err(e) => try_failed(me, s, w, e.into(), ctx, out),
            },
            (Op::Running(base), Answer::Pass(_, Ok((new, report)))) => {
                me.pass.as_mut().expect("a pass runs").report = Some(report);
                let diff = Diff::new(&base, &new);
                let changed = diff.status_changed();
                let due = me.report.due(ctx.now);
                let write = decide::write(kind, changed, due, ready_status(&new).as_deref());
                let patch = match write {
                    decide::Write::Skip => None,
                    _ => diff.patch(),
                };
                let Some(p) = patch else {
                    s.came_back(out);
                    note_schedulable(s, &base, ctx, out);
                    return finish(me, s, w, Ok(SyncOutcome::Unchanged), ctx, out);
                };
                let body = serde_json::value::to_raw_value(&p).expect("a patch serializes");
                let bytes = body.get().len();
                out.push(Action::Observe(Observation::Patch(bytes)));
                let written = kubelet::written_values(&base, &new);
                set_op(
                    me,
                    Op::Patching {
                        base,
                        changed,
                        bytes,
                        written,
                    },
                );
                out.push(Action::Call(Call::PatchStatus(Loop::Sync, body)));
                After::Nothing
            }
            (Op::Running(_), Answer::Pass(_, Err(e))) => {
                try_failed(me, s, w, Error::Pass(e), ctx, out)
            }
            (
                Op::Patching {
                    base,
                    changed,
                    bytes,
                    written,
                },
                Answer::Patched(_, r),
            ) => match r {
                Ok(updated) => {
                    note_server_drops(s, &written, &updated);
                    note_ready_flip(s, &base, &updated);
                    s.offer(updated, out);
                    s.came_back(out);
                    note_schedulable(s, &base, ctx, out);
                    me.report.written(ctx.now, changed, ctx.rng.unit());
                    let outcome = if changed {
                        SyncOutcome::Patched { bytes }
                    } else {
                        SyncOutcome::Reported { bytes }
                    };
                    finish(me, s, w, Ok(outcome), ctx, out)
                }
                Err(e) if e.code() == Some(404) => gone(me, s, w, ctx, out),
                Err(e) => try_failed(me, s, w, e.into(), ctx, out),
            },
            (op, a) => {
                tracing::debug!(?op, ?a, "status sync: an answer it did not wait for");
                set_op(me, op);
                After::Nothing
            }
        }
    }
}

/// The kubelet fields the server did not keep as the patch wrote them
/// (a field whose feature gate is off on the server is dropped) are left
/// alone from now on, each said once: written again, each pass would patch
/// the same change.
fn note_server_drops(s: &mut Shared, written: &[(CurrentField, Value)], answer: &Value) {
    for field in kubelet::not_kept(written, answer).iter() {
        if s.server_drops.contains(field) {
            continue;
        }
        s.server_drops = s.server_drops.with(field);
        tracing::warn!(
            node = s.cfg.node_name,
            server = ?s.server.map(|v| v.to_string()),
            field = field.path(),
            "the API server did not keep the field as written (its feature gate off?): not writing it again in this run",
        );
    }
}

fn begin(
    me: &mut Sync,
    s: &mut Shared,
    w: &mut WatchLoop,
    kind: PassKind,
    for_shutdown: bool,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) {
    heal_watch(s, w, ctx, out);
    // Every pass hands the plugins what waits for them.
    me.triggered = false;
    if kind == PassKind::Triggered {
        me.gate.take(ctx.now);
    }
    me.pass = Some(Pass {
        kind,
        attempt: 0,
        for_shutdown,
        report: None,
        last_error: None,
        op: Op::Idle,
    });
    try_next(me, s, out);
}

/// A watch that has not listed the node again for two update periods
/// since it (re)started is stuck (a connection that stopped answering):
/// start it again.
fn heal_watch(s: &mut Shared, w: &mut WatchLoop, ctx: &Ctx, out: &mut Vec<Action>) {
    let since = ctx.now.saturating_duration_since(s.live.watch_started);
    if s.live.stale && !w.failed() && since > s.cfg.node_status_update_frequency * 2 {
        tracing::info!(
            node = s.cfg.node_name,
            "the watch of the node has not listed it since {since:?}: restarting it",
        );
        watch::resume(w, s, ctx, out);
    }
}

/// Starts the current try: from the live node (try 0 with a trusted copy)
/// or a GET.
fn try_next(me: &mut Sync, s: &mut Shared, out: &mut Vec<Action>) {
    let attempt = me.pass.as_ref().expect("a pass runs").attempt;
    let trusted = s.live.node.is_some() && !s.live.stale;
    let cached = s.live.node.clone();
    match (decide::source(attempt, trusted), cached) {
        (decide::Source::Cache, Some(base)) => {
            let action = s.run_pass(Loop::Sync, base.clone());
            set_op(me, Op::Running(base));
            out.push(action);
        }
        _ => {
            set_op(me, Op::Getting);
            out.push(Action::Call(Call::GetNode(Loop::Sync)));
        }
    }
}

fn set_op(me: &mut Sync, op: Op) {
    me.pass.as_mut().expect("a pass runs").op = op;
}

/// The node is not on the server: the pass ends (no more tries).
fn gone(
    me: &mut Sync,
    s: &mut Shared,
    w: &mut WatchLoop,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) -> After {
    s.forget_node(out);
    let name = s.cfg.node_name.clone();
    finish(me, s, w, Err(Error::NodeGone(name)), ctx, out)
}

fn try_failed(
    me: &mut Sync,
    s: &mut Shared,
    w: &mut WatchLoop,
    e: Error,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) -> After {
    let pass = me.pass.as_mut().expect("a pass runs");
    let attempt = pass.attempt;
    tracing::warn!(
        node = s.cfg.node_name,
        attempt,
        "error updating node status, will retry: {e}"
    );
    let reset = decide::reset_after_failure(attempt);
    pass.last_error = Some(e);
    if reset {
        w.reset_connections(s, ctx, out);
    }
    // While the server does not answer, the other tries would not be
    // answered either: the pass ends ([`super::reach`]).
    let probing = s.reach.is_down()
        && pass_error_unanswered(me.pass.as_ref().and_then(|p| p.last_error.as_ref()));
    // A 429 asks to back off: the pass ends, the next comes after the
    // update period.
    let throttled = me
        .pass
        .as_ref()
        .and_then(|p| p.last_error.as_ref())
        .is_some_and(Error::throttled);
    let pass = me.pass.as_mut().expect("a pass runs");
    pass.attempt += 1;
    if pass.attempt < NODE_STATUS_UPDATE_RETRY && !probing && !throttled {
        try_next(me, s, out);
        After::Nothing
    } else {
        let last = pass.last_error.take().expect("set above");
        finish(
            me,
            s,
            w,
            Err(Error::RetriesExceeded(Box::new(last))),
            ctx,
            out,
        )
    }
}

fn pass_error_unanswered(e: Option<&Error>) -> bool {
    matches!(e, Some(Error::Api(c)) if super::reach::unanswered(c.class()))
}

/// The pass ended: count its failures (per pass, not per try), record its
/// events if it reached the server, and schedule the next one.
fn finish(
    me: &mut Sync,
    s: &mut Shared,
    w: &mut WatchLoop,
    result: super::common::Result<SyncOutcome>,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) -> After {
    let pass = me.pass.take().expect("a pass runs");
    if let Some(report) = pass.report {
        s.note_pass(&report, out);
        if result.is_ok() {
            s.pass_events(&report, ctx, out);
        }
        s.last_pass = Some(Arc::new(report));
    }
    out.push(Action::Observe(Observation::SyncResult(match &result {
        Ok(SyncOutcome::Patched { .. }) => "patched",
        Ok(SyncOutcome::Reported { .. }) => "reported",
        Ok(SyncOutcome::Unchanged) => "unchanged",
        Err(_) => "error",
    })));
    match &result {
        Ok(_) => {
            s.last_sync_ok = Some(ctx.now);
            s.recovered("sync", ctx);
        }
        Err(e) => {
            s.failed("sync", e, ctx, out);
            s.unanswered(e, ctx);
        }
    }
    if pass.kind == PassKind::Fast && result.is_err() {
        // The kubelet's fast update ends on a failed patch; the regular
        // sync goes on.
        me.fast.end();
    }
    let mut after = After::Nothing;
    match &result {
        Err(Error::NodeGone(name)) if s.cfg.re_register_deleted_node => {
            tracing::warn!(
                node = name,
                "node was deleted; registering it again (reRegisterDeletedNode: true)"
            );
            after = After::RegisterAgain;
        }
        Err(e) => tracing::warn!(
            retry_in = "the next update period",
            "unable to update node status: {e}"
        ),
        Ok(_) => {}
    }
    // The fast update stops once the live node is Ready (as the kubelet's
    // checks its lister before each tick).
    let ready = s.live.node.as_deref().is_some_and(is_ready);
    let fast_now = me.fast.active(ctx.now, ready);
    let delay = me.clock.after(pass.kind, ctx.now, fast_now, ctx.rng.unit());
    me.next_at = Some(ctx.now + delay);
    if me.triggered {
        let at = me.gate.next_allowed(ctx.now);
        me.next_at = Some((ctx.now + delay).min(at));
    }
    out.push(Action::SyncDone {
        result,
        for_shutdown: pass.for_shutdown,
    });
    if std::mem::take(&mut me.shutdown_pending) {
        begin(me, s, w, PassKind::Regular, true, ctx, out);
    }
    after
}

/// `NodeSchedulable` / `NodeNotSchedulable` on a flip of
/// `spec.unschedulable` (the kubelet's last hook).
fn note_schedulable(s: &mut Shared, node: &Value, ctx: &Ctx, out: &mut Vec<Action>) {
    let now = node
        .pointer("/spec/unschedulable")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    if s.unschedulable != now {
        s.unschedulable = now;
        let reason = if now {
            "NodeNotSchedulable"
        } else {
            "NodeSchedulable"
        };
        let message = format!("Node {} status is now: {reason}", s.cfg.node_name);
        out.push(s.event(ctx, EventType::Normal, reason, &message, None));
    }
}

fn note_ready_flip(s: &Shared, old: &Value, new: &Value) {
    if let (Some(a), Some(b)) = (ready_status(old), ready_status(new))
        && a != b
    {
        tracing::info!(
            node = s.cfg.node_name,
            from = a,
            to = b,
            "node Ready condition changed"
        );
    }
}
