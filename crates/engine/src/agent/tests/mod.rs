//! The kubelet's rules, each checked on the pure step in virtual time: a
//! [`Sim`] holds a [`State`], sets the clock where a test wants it, feeds
//! inputs and answers, and reads the actions. No API server, no timer, no
//! thread: minutes of the loops take microseconds.
//!
//! Each rule of the kubelet's node status that the loops own
//! (`pkg/kubelet/kubelet_node_status.go`, `pkg/kubelet/nodelease`) has a
//! test named after it, in the module of its loop.

mod fleet;
mod health;
mod lease;
mod reach;
mod register;
mod sync;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::client;
use super::decide::FixedRandom;
use super::{Action, Answer, Call, Ctx, Input, Loop, Observation, State};
use crate::config::{Config, ConfigFile};
use crate::pipeline::{PassOptions, PassReport, SetterError, SetterErrorKind, SetterReport};

/// The node's name in every test.
pub const NAME: &str = "n1";

/// A state under a controlled clock.
pub struct Sim {
    pub state: State,
    pub t0: Instant,
    pub now: Instant,
    pub rng: FixedRandom,
}

impl Sim {
    /// An agent for [`NAME`] with `yaml` over the defaults, at t0, with
    /// every random draw 0.5.
    pub fn new(yaml: &str) -> Self {
        let mut sim = Self::unversioned(yaml);
        sim.state.shared.server = Some(nodestatus_model::node::kubelet::ServerVersion::NEWEST);
        sim
    }

    /// Like [`Sim::new`], before the server's version is known: the first
    /// registration try asks for it.
    pub fn unversioned(yaml: &str) -> Self {
        let t0 = Instant::now();
        Self {
            state: State::new(config(yaml), "host-a".into(), t0),
            t0,
            now: t0,
            rng: FixedRandom(0.5),
        }
    }

    /// An agent whose node is registered (created at once).
    pub fn registered(yaml: &str) -> Self {
        let mut sim = Self::new(yaml);
        sim.register();
        sim
    }

    /// Runs the registration through: first try, pass, create.
    pub fn register(&mut self) {
        let a = self.advance_to_next();
        let base = pass_base(&a).expect("the registration runs the setters");
        let a = self.answer(Answer::Pass(
            Loop::Register,
            Ok((base, PassReport::default())),
        ));
        let created = match call(&a) {
            Some(Call::CreateNode(n)) => n.clone(),
            other => panic!("expected a create, got {other:?}"),
        };
        let a = self.answer(Answer::Created(Ok(with_meta(created, "uid-1", "1"))));
        assert!(
            a.iter()
                .any(|a| matches!(a, Action::RegisterDone(Ok(true)))),
            "{a:?}"
        );
    }

    /// One step now.
    pub fn step(&mut self, input: Input) -> Vec<Action> {
        let ctx = Ctx {
            now: self.now,
            wall: Timestamp::UNIX_EPOCH,
            rng: &self.rng,
        };
        self.state.step(input, &ctx)
    }

    /// A tick now.
    pub fn tick(&mut self) -> Vec<Action> {
        self.step(Input::Tick)
    }

    /// Moves the clock to the next wakeup and ticks.
    pub fn advance_to_next(&mut self) -> Vec<Action> {
        let t = self.state.next_wakeup().expect("something is due later");
        assert!(t >= self.now, "a timer in the past");
        self.now = t;
        self.tick()
    }

    /// Answers a call or a pass.
    pub fn answer(&mut self, a: Answer) -> Vec<Action> {
        self.step(Input::Answer(a))
    }

    /// When the next wakeup is, after t0.
    pub fn next_in(&self) -> Duration {
        self.state
            .next_wakeup()
            .expect("something is due")
            .duration_since(self.t0)
    }
}

/// A validated config: `yaml` over `nodeName: n1`.
pub fn config(yaml: &str) -> Arc<Config> {
    let text = format!("nodeName: {NAME}\n{yaml}");
    Arc::new(
        ConfigFile::parse(&text, Path::new("test.yaml"))
            .and_then(ConfigFile::validate)
            .unwrap(),
    )
}

/// The one API call among `actions`.
pub fn call(actions: &[Action]) -> Option<&Call> {
    let calls: Vec<&Call> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Call(c) => Some(c),
            _ => None,
        })
        .collect();
    assert!(calls.len() <= 1, "more than one call: {calls:?}");
    calls.into_iter().next()
}

/// The base of the pass among `actions`.
pub fn pass_base(actions: &[Action]) -> Option<Value> {
    pass(actions).map(|(base, _, _)| base)
}

/// The pass among `actions`: its base, the node problems and options.
pub fn pass(actions: &[Action]) -> Option<(Value, Vec<String>, PassOptions)> {
    actions.iter().find_map(|a| match a {
        Action::RunPass {
            base,
            problems,
            options,
            ..
        } => Some(((**base).clone(), problems.clone(), *options)),
        _ => None,
    })
}

/// The observations among `actions`.
pub fn observed(actions: &[Action]) -> Vec<Observation> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Observe(o) => Some(o.clone()),
            _ => None,
        })
        .collect()
}

/// The reasons of the events among `actions`.
pub fn events(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::RecordEvent(e) => e.reason.clone(),
            _ => None,
        })
        .collect()
}

/// Whether `actions` drop the connections.
pub fn resets(actions: &[Action]) -> bool {
    actions
        .iter()
        .any(|a| matches!(a, Action::ResetConnections { .. }))
}

/// An error answer of the API server.
pub fn api(code: u16) -> client::Error {
    client::Error::Api {
        kind: "test",
        code,
        reason: "Test".into(),
        message: format!("HTTP {code}"),
    }
}

/// No answer within the deadline.
pub fn timeout() -> client::Error {
    client::Error::Timeout {
        kind: "test",
        after: Duration::from_secs(10),
    }
}

/// `node` with a uid and a resourceVersion, as the server answers it.
pub fn with_meta(mut node: Value, uid: &str, rv: &str) -> Value {
    node["metadata"]["uid"] = json!(uid);
    node["metadata"]["resourceVersion"] = json!(rv);
    node
}

/// A node with the conditions `(type, status)`, at resourceVersion `rv`.
pub fn node(rv: &str, conditions: &[(&str, &str)]) -> Value {
    let conditions: Vec<Value> = conditions
        .iter()
        .map(|(t, s)| json!({"type": t, "status": s, "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R", "message": "m"}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": NAME, "uid": "uid-1", "resourceVersion": rv},
        "spec": {},
        "status": {"conditions": conditions},
    })
}

/// `base` with condition `t`'s status set to `status`.
pub fn set_condition(base: &Value, t: &str, status: &str) -> Value {
    let mut n = base.clone();
    if !n["status"]["conditions"].is_array() {
        n["status"]["conditions"] = json!([]);
    }
    let list = n["status"]["conditions"].as_array_mut().unwrap();
    match list.iter_mut().find(|c| c["type"] == t) {
        Some(c) => c["status"] = json!(status),
        None => list.push(json!({"type": t, "status": status, "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": "R", "message": "m"})),
    }
    n
}

/// `base` with every condition's heartbeat moved on (a second later than
/// any heartbeat this function wrote before): no change of status.
pub fn heartbeat(base: &Value) -> Value {
    static BEATS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let beat = BEATS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let at = Timestamp::from_second(1_767_225_600 + beat as i64).unwrap();
    let mut n = base.clone();
    for c in n["status"]["conditions"]
        .as_array_mut()
        .into_iter()
        .flatten()
    {
        c["lastHeartbeatTime"] = json!(at.to_string());
    }
    n
}

/// A pass's answer for the status sync: `new` and a report.
pub fn sync_pass(new: Value, report: PassReport) -> Answer {
    Answer::Pass(Loop::Sync, Ok((new, report)))
}

/// A report in which `plugin` (which affects readiness) failed or not.
pub fn report_with(plugin: &str, failed: bool) -> PassReport {
    PassReport {
        setters: vec![SetterReport {
            plugin: plugin.into(),
            version: "1".into(),
            outcome: if failed {
                Err(SetterError::new(SetterErrorKind::Output, "broken"))
            } else {
                Ok(Vec::new())
            },
            duration: Duration::ZERO,
            called: Duration::ZERO,
            affects_readiness: true,
            lines: 0,
            skipped: false,
        }],
        ..PassReport::default()
    }
}

/// A lease as the server answers it.
pub fn lease(rv: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": {"name": NAME, "namespace": "kube-node-lease", "resourceVersion": rv},
        "spec": {"holderIdentity": NAME, "leaseDurationSeconds": 40},
    }))
    .unwrap()
}

/// The sync's result among `actions`, if the pass ended.
pub fn sync_done(actions: &[Action]) -> Option<Result<super::SyncOutcome, String>> {
    actions.iter().find_map(|a| match a {
        Action::SyncDone { result, .. } => Some(match result {
            Ok(o) => Ok(o.clone()),
            Err(e) => Err(e.to_string()),
        }),
        _ => None,
    })
}

/// The lease renewal's result among `actions`, if it ended.
pub fn lease_done(actions: &[Action]) -> Option<Result<(), String>> {
    actions.iter().find_map(|a| match a {
        Action::LeaseDone(r) => Some(r.as_ref().map(|_| ()).map_err(ToString::to_string)),
        _ => None,
    })
}

/// Runs one status sync pass through from a tick: try 0 from the live
/// copy, the setters answered with `new`, the patch (if any) answered with
/// the node as patched. Returns every action of the pass.
pub fn sync_through(sim: &mut Sim, new: impl Fn(&Value) -> Value) -> Vec<Action> {
    let mut all = sim.advance_to_next();
    let base = match pass_base(&all) {
        Some(b) => b,
        None => {
            assert!(
                matches!(call(&all), Some(Call::GetNode(Loop::Sync))),
                "{all:?}"
            );
            let live = sim
                .state
                .live()
                .node
                .as_deref()
                .cloned()
                .unwrap_or_else(|| node("1", &[]));
            let a = sim.answer(Answer::Node(Loop::Sync, Ok(Some(live))));
            let b = pass_base(&a).unwrap();
            all.extend(a);
            b
        }
    };
    let next = new(&base);
    let a = sim.answer(sync_pass(next.clone(), PassReport::default()));
    let patched = matches!(call(&a), Some(Call::PatchStatus(..)));
    all.extend(a);
    if patched {
        let rv = base["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1)
            + 1;
        let mut stored = next;
        stored["metadata"]["resourceVersion"] = json!(rv.to_string());
        all.extend(sim.answer(Answer::Patched(Loop::Sync, Ok(stored))));
    }
    all
}
