//! The node lease: a `coordination.k8s.io/v1` Lease named after the node
//! in `kube-node-lease`, renewed every quarter of `nodeLeaseDurationSeconds`
//! (4 % jitter), as the kubelet's lease controller does.
//!
//! A renewal is up to 5 tries. Each is an optimistic update of the cached
//! lease (its resourceVersion, no GET); a 409 or a 404 drops the cache, so
//! the next try GETs it (and creates it when missing, only while the node
//! exists: the lease is owned by the node). After a failed try past the
//! first (but a conflict), every connection is dropped. A renewal whose
//! tries all fail backs off from 200 ms doubling to 7 s. The lease's owner
//! reference to the Node is set once the node's uid is known, and
//! `leaseDurationSeconds` is written on every renewal.
//!
//! Two departures from the kubelet, both so that a fleet does not renew
//! as a herd: the second renewal after a start comes a random part of one
//! period later than the kubelet's (agents started together, by a
//! DaemonSet rollout, a power cut or `simulate`, renew spread over the
//! period from then on, whatever their start times); and while the server
//! does not answer, a renewal is one probe ([`super::reach`]).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, OwnerReference};
use tokio::time::Instant;

use super::client::{self, ErrorClass};
use super::common::Error;
use super::decide::{self, Backoff, JITTER, LEASE_UPDATE_RETRY};
use super::io::{Action, Answer, Call, Observation};
use super::shared::{Ctx, Shared};
use super::watch::WatchLoop;

/// Where a try is.
#[derive(Debug)]
enum Op {
    /// No renewal runs.
    Idle,
    /// A GET of the lease.
    Getting,
    /// The lease is being created.
    Creating,
    /// The lease is being updated from `base`, the copy it came from.
    Updating(Box<Lease>),
}

/// The lease loop's state.
#[derive(Debug)]
pub struct LeaseLoop {
    /// The lease as last written or read: the next update's base.
    cache: Option<Lease>,
    backoff: Backoff,
    next_at: Option<Instant>,
    attempt: usize,
    op: Op,
    /// Whether the renewals have had their random phase (after the first
    /// one of a start).
    phased: bool,
    /// The first phase, given instead of a draw.
    phase: Option<f64>,
}

impl LeaseLoop {
    /// A lease loop, not started.
    pub fn new() -> Self {
        Self {
            cache: None,
            backoff: Backoff::lease(),
            next_at: None,
            attempt: 0,
            op: Op::Idle,
            phased: false,
            phase: None,
        }
    }

    /// Starts the loop at `now` (once the node is registered): the first
    /// renewal at once.
    pub fn begin(&mut self, now: Instant) {
        if self.next_at.is_none() {
            self.next_at = Some(now);
        }
    }

    /// Replaces the cached lease, the next update's base (`None`: the next
    /// renewal GETs it first).
    pub fn set_cache(&mut self, lease: Option<Lease>) {
        self.cache = lease;
    }

    /// The next successful renewal is followed by a random phase, as the
    /// first of a start is: after an outage, the probes that a restarting
    /// server held and served together do not renew together from then on.
    pub fn rephase(&mut self) {
        self.phased = false;
    }

    /// The first phase, in `[0, 1)` of a period, instead of a random draw.
    pub fn set_phase(&mut self, phase: f64) {
        self.phase = Some(phase.clamp(0.0, 1.0));
    }

    /// When the next renewal is due (`None` before the start and while one
    /// runs).
    pub fn next_at(&self) -> Option<Instant> {
        matches!(self.op, Op::Idle)
            .then_some(self.next_at)
            .flatten()
    }
}

impl Default for LeaseLoop {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaseLoop {
    /// Starts a renewal unless one runs.
    pub(super) fn start(&mut self, s: &mut Shared, ctx: &Ctx, out: &mut Vec<Action>) {
        if !matches!(self.op, Op::Idle) {
            return;
        }
        self.attempt = 0;
        try_lease(self, s, ctx, out);
    }

    /// An answer to the current try.
    pub(super) fn answer(
        &mut self,
        s: &mut Shared,
        w: &WatchLoop,
        a: Answer,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) {
        let me = self;
        let op = std::mem::replace(&mut me.op, Op::Idle);
        match (op, a) {
            (Op::Getting, Answer::Lease(r)) => match r {
                Ok(Some(l)) => update(me, s, l, ctx, out),
                Ok(None) if s.live.uid.is_none() => try_failed(
                    me,
                    s,
                    w,
                    Error::LeaseWaitsForNode(s.cfg.node_name.clone()),
                    ctx,
                    out,
                ),
                Ok(None) => {
                    let lease = new_lease(s, None, ctx);
                    me.op = Op::Creating;
                    out.push(call(s, Call::CreateLease(lease)));
                }
                Err(e) => try_failed(me, s, w, e.into(), ctx, out),
            },
            (Op::Creating, Answer::LeaseWritten(r)) => match r {
                Ok(l) => {
                    me.cache = Some(l);
                    done(me, s, Ok(()), ctx, out);
                }
                Err(e) => try_failed(me, s, w, e.into(), ctx, out),
            },
            (Op::Updating(base), Answer::LeaseWritten(r)) => match r {
                Ok(l) => {
                    me.cache = Some(l);
                    done(me, s, Ok(()), ctx, out);
                }
                // Stale or gone: GET (and create if missing) on the next try.
                Err(
                    e @ client::Error::Api {
                        code: 409 | 404, ..
                    },
                ) => try_failed(me, s, w, e.into(), ctx, out),
                Err(e) => {
                    me.cache = Some(*base);
                    try_failed(me, s, w, e.into(), ctx, out);
                }
            },
            (op, a) => {
                tracing::debug!(?op, ?a, "lease: an answer it did not wait for");
                me.op = op;
            }
        }
    }
}

/// One try: an update of the cached lease, or a GET when there is none.
fn try_lease(me: &mut LeaseLoop, s: &mut Shared, ctx: &Ctx, out: &mut Vec<Action>) {
    match me.cache.take() {
        Some(base) => update(me, s, base, ctx, out),
        None => {
            me.op = Op::Getting;
            out.push(call(s, Call::GetLease));
        }
    }
}

/// `c` as an action: a call, or a probe while the server does not answer.
fn call(s: &Shared, c: Call) -> Action {
    match s.reach.probe_connect(client::call_deadline(&s.cfg)) {
        Some(connect_within) => Action::Probe {
            call: c,
            connect_within,
        },
        None => Action::Call(c),
    }
}

fn update(me: &mut LeaseLoop, s: &mut Shared, base: Lease, ctx: &Ctx, out: &mut Vec<Action>) {
    let lease = new_lease(s, Some(base.clone()), ctx);
    me.op = Op::Updating(Box::new(base));
    out.push(call(s, Call::UpdateLease(lease)));
}

fn try_failed(
    me: &mut LeaseLoop,
    s: &mut Shared,
    w: &WatchLoop,
    e: Error,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) {
    let attempt = me.attempt;
    // A probe of a server that does not serve is one try.
    if s.reach.is_down()
        && let Error::Api(c) = &e
        && !super::reach::serving(c.class())
    {
        s.reach.probe_failed(c.class());
        return done(
            me,
            s,
            Err(Error::LeaseRetriesExceeded(Box::new(e))),
            ctx,
            out,
        );
    }
    if decide::reset_after_failure(attempt) && !is_conflict(&e) {
        w.reset_connections(s, ctx, out);
    }
    // Without the node, no try can create the lease; a 429 asks to back
    // off.
    let stop = matches!(e, Error::LeaseWaitsForNode(_)) || e.throttled();
    me.attempt += 1;
    if !stop && me.attempt < LEASE_UPDATE_RETRY {
        try_lease(me, s, ctx, out);
    } else {
        done(
            me,
            s,
            Err(Error::LeaseRetriesExceeded(Box::new(e))),
            ctx,
            out,
        );
    }
}

/// A renewal ended: the next one a jittered interval later, or after the
/// backoff's next step.
fn done(
    me: &mut LeaseLoop,
    s: &mut Shared,
    result: super::common::Result<()>,
    ctx: &Ctx,
    out: &mut Vec<Action>,
) {
    out.push(Action::Observe(Observation::LeaseResult(result.is_ok())));
    let interval = s.lease_period();
    let delay = match &result {
        Ok(()) => {
            s.last_lease_ok = Some(ctx.now);
            s.recovered("lease", ctx);
            me.backoff.reset();
            let mut d = decide::jitter(interval, JITTER, ctx.rng.unit());
            if !std::mem::replace(&mut me.phased, true) {
                let u = me.phase.take().unwrap_or_else(|| ctx.rng.unit());
                d += interval.mul_f64(u);
            }
            d
        }
        Err(e) => {
            s.failed("lease", e, ctx, out);
            s.unanswered(e, ctx);
            let mut backoff = me.backoff.next_delay();
            if matches!(e, Error::LeaseRetriesExceeded(inner) if inner.throttled()) {
                // Throttled: the fleet's retries spread over the backoff.
                backoff = decide::jitter(backoff, 1.0, ctx.rng.unit());
            }
            let d = if s.reach.is_down() {
                // Never sooner than the kubelet's backoff would retry.
                super::reach::probe_delay(interval, ctx.rng.unit()).max(backoff)
            } else {
                backoff
            };
            tracing::warn!(retry_in = ?d, "unable to renew the node lease: {e}");
            d
        }
    };
    me.next_at = Some(ctx.now + delay);
    out.push(Action::LeaseDone(result));
}

/// The lease to write: `base` (or a new one) held by this node for
/// `nodeLeaseDurationSeconds`, renewed now, owned by the node once its uid
/// is known.
fn new_lease(s: &Shared, base: Option<Lease>, ctx: &Ctx) -> Lease {
    let name = s.cfg.node_name.clone();
    let mut lease = base.unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some("kube-node-lease".into()),
            ..Default::default()
        },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(name.clone());
    spec.lease_duration_seconds = Some(s.cfg.node_lease_duration_seconds);
    spec.renew_time = Some(MicroTime(ctx.wall));
    if let Some(uid) = s.live.uid.clone() {
        let owned = lease.metadata.owner_references.get_or_insert_with(Vec::new);
        if !owned.iter().any(|o| o.uid == uid) {
            owned.retain(|o| o.kind != "Node");
            owned.push(OwnerReference {
                api_version: "v1".into(),
                kind: "Node".into(),
                name: name.clone(),
                uid,
                ..Default::default()
            });
        }
    }
    lease
}

/// Whether an error of an API call is a conflict (a stale lease).
fn is_conflict(e: &Error) -> bool {
    matches!(e, Error::Api(c) if c.class() == ErrorClass::Conflict)
}
