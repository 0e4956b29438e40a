//! The agent as a value: its whole [`State`], and the one [`State::step`]
//! that turns an [`Input`] into [`Action`]s.
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
//! The state is its parts: where the agent is in its life ([`Phase`], the
//! registration's own state inside it while it registers), each loop's
//! part, owned and stepped by its module ([`super::sync`],
//! [`super::lease`], [`super::watch`]), and what they share
//! ([`Shared`]). This module only routes an input to the part it is for
//! and moves the agent between phases; the loops' modules never import
//! it.

use std::sync::Arc;

use tokio::time::Instant;

use super::common::NodeProblem;
use super::health::Snapshot;
use super::io::{Action, Answer, Input, Loop};
use super::lease::LeaseLoop;
use super::register::{self, Register};
use super::shared::{Ctx, Live, Shared};
use super::sync::{self, Sync};
use super::watch::{self, WatchLoop};
use crate::config::Config;

/// Where the agent is in its life.
#[derive(Debug)]
pub enum Phase {
    /// Registering the node (at start, when asked, or again after a
    /// deletion with `reRegisterDeletedNode`): the registration's own
    /// state.
    Registering(Box<Register>),
    /// The node exists: the status sync and the lease run.
    Running,
    /// An identity error at start ended it.
    Stopped,
}

/// The whole state of one node's agent.
#[derive(Debug)]
pub struct State {
    pub(super) phase: Phase,
    pub(super) shared: Shared,
    pub(super) sync: Sync,
    pub(super) lease: LeaseLoop,
    pub(super) watch: WatchLoop,
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
            phase: Phase::Registering(Box::new(Register::new(now))),
            sync: Sync::new(&cfg, now),
            lease: LeaseLoop::new(),
            watch: WatchLoop::new(),
            shared: Shared::new(cfg, hostname, now),
            loops: true,
        }
    }

    /// The same state, acting only when asked: no registration starts,
    /// and once registered no timer starts a status sync or a renewal,
    /// until [`Input::RunLoops`]. What a request starts (the
    /// registration's backoff, the tries of a sync) runs its course.
    pub fn on_request(mut self) -> Self {
        self.loops = false;
        self.phase = Phase::Registering(Box::new(Register::waiting()));
        self
    }

    /// The config in force.
    pub fn cfg(&self) -> &Arc<Config> {
        &self.shared.cfg
    }

    /// Where the agent is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }

    /// The node as last seen.
    pub fn live(&self) -> &Live {
        &self.shared.live
    }

    /// Problems that make the node not ready.
    pub fn node_problems(&self) -> Vec<NodeProblem> {
        self.shared.node_problems()
    }

    /// The copy `/readyz` and `/status` read.
    pub fn snapshot(&self) -> Snapshot {
        let s = &self.shared;
        Snapshot {
            cfg: s.cfg.clone(),
            registered: s.registered,
            node_gone: s.node_gone,
            last_sync_ok: s.last_sync_ok,
            last_lease_ok: s.last_lease_ok,
            failing: s.failing.clone(),
            last_pass: s.last_pass.clone(),
            node: s.live.node.clone(),
        }
    }

    /// When the state next has something to do without an input: the
    /// earliest timer of the loops that run. `None`: nothing until an input.
    pub fn next_wakeup(&self) -> Option<Instant> {
        let lease = self.lease.next_at().filter(|_| self.loops);
        match &self.phase {
            Phase::Stopped => None,
            Phase::Registering(r) => [r.next_at(), lease].into_iter().flatten().min(),
            Phase::Running => [
                self.sync
                    .next_at()
                    .filter(|_| self.loops && !self.shared.reach.holding()),
                lease,
                self.watch.retry_at(),
                self.shared.reach.resume_at(),
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
        self.shared.reach.is_down()
    }

    /// Takes one input; returns what the driver must do.
    pub fn step(&mut self, input: Input, ctx: &Ctx) -> Vec<Action> {
        let mut out = Vec::new();
        let running = matches!(self.phase, Phase::Running);
        match input {
            Input::Tick => {
                if running {
                    self.resume_due(ctx, &mut out);
                    self.watch.tick(&mut self.shared, ctx, &mut out);
                }
                match &mut self.phase {
                    Phase::Registering(r) => {
                        let ended = r.tick(&mut self.shared, ctx, &mut out);
                        self.registration(ended, ctx, &mut out);
                    }
                    Phase::Running if self.loops => {
                        self.sync
                            .tick(&mut self.shared, &mut self.watch, ctx, &mut out)
                    }
                    Phase::Running | Phase::Stopped => {}
                }
                if self.loops && self.lease.next_at().is_some_and(|t| ctx.now >= t) {
                    self.lease.start(&mut self.shared, ctx, &mut out);
                }
            }
            Input::Register => self.register_asked(ctx),
            Input::RunLoops => self.run_loops(ctx),
            Input::SyncNow => self
                .sync
                .start_now(&mut self.shared, &mut self.watch, ctx, &mut out),
            Input::Triggered => {
                if running && !self.shared.node_gone {
                    self.sync
                        .trigger(&mut self.shared, &mut self.watch, ctx, &mut out)
                }
            }
            Input::PluginsChanged => {
                if running && !self.shared.node_gone {
                    self.sync
                        .start_now(&mut self.shared, &mut self.watch, ctx, &mut out)
                }
            }
            Input::LeaseNow(cached) => {
                self.lease.set_cache(cached);
                self.lease.start(&mut self.shared, ctx, &mut out)
            }
            Input::NodeShutdown => {
                self.sync
                    .node_shutdown(&mut self.shared, &mut self.watch, ctx, &mut out)
            }
            Input::NodeShutdownCancelled => self.shared.readiness.shutting_down = false,
            Input::Config(cfg) => {
                self.sync.set_config(&cfg);
                self.shared.cfg = cfg;
                self.arm_reach();
            }
            Input::Watch(e) => self.watch.event(&mut self.shared, e, ctx, &mut out),
            Input::Event {
                event_type,
                reason,
                message,
                plugin,
            } => out.push(
                self.shared
                    .event(ctx, event_type, &reason, &message, plugin.as_deref()),
            ),
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
            Answer::Lease(_) | Answer::LeaseWritten(_) => {
                self.lease
                    .answer(&mut self.shared, &self.watch, a, ctx, out)
            }
            Answer::Created(_)
            | Answer::Version(_)
            | Answer::Node(Loop::Register, _)
            | Answer::Patched(Loop::Register, _)
            | Answer::Pass(Loop::Register, _) => match &mut self.phase {
                Phase::Registering(r) => {
                    let ended = r.answer(&mut self.shared, a, ctx, out);
                    self.registration(ended, ctx, out);
                }
                _ => tracing::debug!(?a, "registration: an answer with none running"),
            },
            Answer::Node(Loop::Sync, _)
            | Answer::Patched(Loop::Sync, _)
            | Answer::Pass(Loop::Sync, _) => {
                let after = self
                    .sync
                    .answer(&mut self.shared, &mut self.watch, a, ctx, out);
                if after == sync::After::RegisterAgain {
                    self.phase = Phase::Registering(Box::new(Register::new(ctx.now)));
                    self.arm_reach();
                }
            }
        }
    }

    /// What a step of the registration ended with.
    fn registration(&mut self, ended: Option<register::Ended>, ctx: &Ctx, out: &mut Vec<Action>) {
        match ended {
            None => {}
            Some(register::Ended::Registered(node)) => {
                self.shared.registered_with(node, out);
                self.phase = Phase::Running;
                self.arm_reach();
                if self.loops {
                    self.start_loops(ctx.now);
                }
                out.push(Action::RegisterDone(Ok(true)));
            }
            Some(register::Ended::Stopped) => {
                self.phase = Phase::Stopped;
                self.arm_reach();
            }
        }
    }

    /// Registering is asked for (an agent that acts on request): unless
    /// the agent stopped or a try runs, the registration starts again, its
    /// first try after the backoff's first step, as at a start.
    fn register_asked(&mut self, ctx: &Ctx) {
        match &self.phase {
            Phase::Stopped => return,
            Phase::Registering(r) if r.busy() => return,
            _ => {}
        }
        self.phase = Phase::Registering(Box::new(Register::new(ctx.now)));
        self.arm_reach();
    }

    /// Only a registered node whose lease runs finds the server down
    /// ([`super::reach`]): not while registering, and not in companion
    /// mode, where the status sync is the only loop and keeps trying.
    fn arm_reach(&mut self) {
        let armed = matches!(self.phase, Phase::Running) && !self.shared.cfg.companion;
        self.shared.reach.arm(armed);
    }

    /// The status sync and the lease start (once the node is registered).
    fn start_loops(&mut self, now: Instant) {
        self.sync.start(now);
        // In companion mode the kubelet owns the lease.
        if !self.shared.cfg.companion {
            self.lease.begin(now);
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
            Phase::Registering(_) => self.register_asked(ctx),
            Phase::Running => self.start_loops(ctx.now),
            Phase::Stopped => {}
        }
    }

    /// The server served a call: when it was down, it is back, and the
    /// status sync and the watch resume 30 % to 130 % of a lease period
    /// later ([`super::reach`]).
    fn served(&mut self, ctx: &Ctx) {
        let period = self.shared.lease_period();
        let resume_at = ctx.now + super::reach::resume_delay(period, ctx.rng.unit());
        if let Some(down) = self.shared.reach.answered(ctx.now, resume_at) {
            self.lease.rephase();
            tracing::info!(
                node = self.shared.cfg.node_name,
                after = ?down,
                resume_in = ?resume_at - ctx.now,
                "the API server answers again; the status sync and the watch resume spread over the lease period after the next"
            );
        }
    }

    /// Time passed while the status sync was held: at the resume time, the
    /// failed watch resumes, and the held pass runs a second later (after
    /// the watch, so that it can start from the watch's copy).
    fn resume_due(&mut self, ctx: &Ctx, out: &mut Vec<Action>) {
        if self.shared.reach.resume_at().is_none_or(|t| ctx.now < t) {
            return;
        }
        self.shared.reach.resumed();
        let mut pass_at = ctx.now;
        if self.watch.failed() {
            watch::resume(&mut self.watch, &mut self.shared, ctx, out);
            pass_at += std::time::Duration::from_secs(1);
        }
        self.sync.resume(pass_at);
    }
}

/// What the step's tests and the driver reach through the state.
impl State {
    /// A pass of the setters over `base` for `for_loop`, with the options
    /// the state decides.
    #[cfg(test)]
    pub(super) fn run_pass(&mut self, for_loop: Loop, base: Arc<serde_json::Value>) -> Action {
        self.shared.run_pass(for_loop, base)
    }

    /// The node is gone.
    #[cfg(test)]
    pub(super) fn forget_node(&mut self, out: &mut Vec<Action>) {
        self.shared.forget_node(out)
    }

    /// An event about the node, as the kubelet records it.
    pub(super) fn event(
        &self,
        ctx: &Ctx,
        event_type: nodestatus_runtime::EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) -> Action {
        self.shared.event(ctx, event_type, reason, message, plugin)
    }
}
