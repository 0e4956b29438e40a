//! Registration (`registerWithAPIServer`): create the Node, with backoff
//! from 100 ms doubling to 7 s; on AlreadyExists or Forbidden (since 1.32),
//! GET it and reconcile what the kubelet reconciles. Only here may an error
//! end the agent: credentials refused at start are an identity error
//! ([`Error::Permanent`]).
//!
//! Each try: wait out the backoff step, build the initial node (the
//! kubelet's `initialNode`: default labels, `nodeLabels`,
//! `registerWithTaints`, the attach-detach annotation, `providerID`, the
//! external cloud provider's taint and annotation) and run the setters over
//! it once, then CREATE it. With `registerNode: false`, only GET until the
//! node exists.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::client;
use super::common::{Error, PROVIDED_NODE_IP, UNINITIALIZED_TAINT};
use super::decide::Backoff;
use super::io::{Action, Answer, Call, Loop, Observation};
use super::shared::{Ctx, Shared};
use crate::pipeline::PassReport;
use nodestatus_model::node::patch;

/// Where a registration is.
#[derive(Debug)]
enum Op {
    /// Waiting for the next try.
    Idle,
    /// GET `/version`, before the first try of a registration.
    Version,
    /// `registerNode: false`: a GET to see whether the node exists.
    Waiting,
    /// The setters run over the initial node.
    Pass,
    /// The node is being created (with the pass's report, whose events are
    /// recorded once it is).
    Creating(PassReport),
    /// The create was refused (AlreadyExists, Forbidden): a GET, and the
    /// create's error if the node is not there either.
    Getting(client::Error),
    /// The existing node is being reconciled.
    Reconciling,
}

/// How a registration ended.
#[derive(Debug)]
pub enum Ended {
    /// The node exists and is ours (created, or found and reconciled).
    Registered(Value),
    /// The credentials may not register this node: the agent stops
    /// ([`Action::Exit`] is out).
    Stopped,
}

/// The registration loop's state.
#[derive(Debug)]
pub struct Register {
    backoff: Backoff,
    next_at: Option<Instant>,
    op: Op,
}

impl Register {
    /// A registration whose first try comes after the first backoff step.
    pub fn new(now: Instant) -> Self {
        let mut backoff = Backoff::registration();
        let first = backoff.next_delay();
        Self {
            backoff,
            next_at: Some(now + first),
            op: Op::Idle,
        }
    }

    /// When the next try is due (`None` while one runs).
    pub fn next_at(&self) -> Option<Instant> {
        matches!(self.op, Op::Idle)
            .then_some(self.next_at)
            .flatten()
    }

    /// Starts registering again (a deleted node, `reRegisterDeletedNode`).
    pub fn restart(&mut self, now: Instant) {
        *self = Self::new(now);
    }

    /// Whether a try runs.
    pub fn busy(&self) -> bool {
        !matches!(self.op, Op::Idle)
    }

    /// A registration that waits to be asked for (no try is due).
    pub fn waiting() -> Self {
        Self {
            backoff: Backoff::registration(),
            next_at: None,
            op: Op::Idle,
        }
    }
}

/// A try is due: GET (`registerNode: false`) or run the setters over the
/// initial node.
impl Register {
    /// Time passed: a try that is due starts.
    pub(super) fn tick(
        &mut self,
        s: &mut Shared,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> Option<Ended> {
        if self.next_at().is_none_or(|t| ctx.now < t) {
            return None;
        }
        if s.server.is_none() {
            self.op = Op::Version;
            out.push(Action::Call(Call::GetVersion));
            return None;
        }
        begin(self, s, out);
        None
    }

    /// An answer to one of registration's calls or passes.
    pub(super) fn answer(
        &mut self,
        s: &mut Shared,
        a: Answer,
        ctx: &Ctx,
        out: &mut Vec<Action>,
    ) -> Option<Ended> {
        let me = self;
        let op = std::mem::replace(&mut me.op, Op::Idle);
        let result: Result<Option<Value>, Error> = match (op, a) {
            (Op::Version, Answer::Version(r)) => match r {
                Ok(v) => {
                    tracing::info!(node = s.cfg.node_name, server = %v, "API server version");
                    s.server = Some(v);
                    begin(me, s, out);
                    return None;
                }
                Err(e) => Err(e.into()),
            },
            (Op::Waiting, Answer::Node(_, r)) => match r {
                Ok(Some(n)) => Ok(Some(n)),
                Ok(None) => {
                    tracing::info!(node = s.cfg.node_name, retry_in = ?me.backoff.peek(), "registerNode is false: waiting for the node to exist");
                    Ok(None)
                }
                Err(e) => Err(e.into()),
            },
            (Op::Pass, Answer::Pass(_, Ok((node, report)))) => {
                s.note_pass(&report, out);
                s.last_pass = Some(std::sync::Arc::new(report.clone()));
                match nodestatus_model::validate::node(&node) {
                    Err(problems) => {
                        Err(nodestatus_model::validate::Error::Refused(problems).into())
                    }
                    Ok(()) => {
                        me.op = Op::Creating(report);
                        out.push(Action::Call(Call::CreateNode(node)));
                        return None;
                    }
                }
            }
            (Op::Pass, Answer::Pass(_, Err(e))) => Err(Error::Pass(e)),
            (Op::Creating(report), Answer::Created(r)) => match r {
                Ok(created) => {
                    tracing::info!(node = s.cfg.node_name, "node registered");
                    s.pass_events(&report, ctx, out);
                    Ok(Some(created))
                }
                // AlreadyExists, or Forbidden (since 1.32): GET and reconcile.
                Err(
                    e @ client::Error::Api {
                        code: 409 | 403, ..
                    },
                ) => {
                    me.op = Op::Getting(e);
                    out.push(Action::Call(Call::GetNode(Loop::Register)));
                    return None;
                }
                Err(e) => Err(e.into()),
            },
            (Op::Getting(create_err), Answer::Node(_, r)) => match r {
                Ok(Some(existing)) => {
                    let reconciled = reconcile(&existing, &wanted_labels(s));
                    match patch::two_way(&existing, &reconciled) {
                        Some(p) => {
                            me.op = Op::Reconciling;
                            let body =
                                serde_json::value::to_raw_value(&p).expect("a patch serializes");
                            out.push(Action::Call(Call::PatchStatus(Loop::Register, body)));
                            return None;
                        }
                        None => {
                            tracing::info!(
                                node = s.cfg.node_name,
                                "node already exists; reconciled"
                            );
                            Ok(Some(existing))
                        }
                    }
                }
                Ok(None) => Err(create_err.into()),
                // The GET is refused too: the create's error says why (a 403
                // is an identity error at start).
                Err(get_err) if get_err.is_permanent() => Err(create_err.into()),
                // A transient failure of the GET: retry with backoff.
                Err(get_err) => Err(get_err.into()),
            },
            (Op::Reconciling, Answer::Patched(_, r)) => match r {
                Ok(current) => {
                    tracing::info!(node = s.cfg.node_name, "node already exists; reconciled");
                    Ok(Some(current))
                }
                Err(e) => Err(e.into()),
            },
            (op, a) => {
                tracing::debug!(?op, ?a, "registration: an answer it did not wait for");
                me.op = op;
                return None;
            }
        };
        match result {
            Ok(Some(node)) => {
                me.backoff.reset();
                Some(Ended::Registered(node))
            }
            Ok(None) => {
                schedule(me, ctx);
                out.push(Action::RegisterDone(Ok(false)));
                None
            }
            Err(e) if e.is_permanent() => {
                let e = match e {
                    Error::Permanent(_) => e,
                    other => Error::Permanent(Box::new(other)),
                };
                tracing::error!(node = s.cfg.node_name, "unable to register node: {e}");
                out.push(Action::Exit(e));
                Some(Ended::Stopped)
            }
            Err(e) => {
                out.push(Action::Observe(Observation::LoopError(
                    "register",
                    e.class(),
                )));
                tracing::warn!(node = s.cfg.node_name, retry_in = ?me.backoff.peek(), "unable to register node, backing off: {e}");
                schedule(me, ctx);
                out.push(Action::RegisterDone(Err(e)));
                None
            }
        }
    }
}

/// The try itself, once the server's version is known.
fn begin(me: &mut Register, s: &mut Shared, out: &mut Vec<Action>) {
    if !s.cfg.register_node {
        me.op = Op::Waiting;
        out.push(Action::Call(Call::GetNode(Loop::Register)));
        return;
    }
    me.op = Op::Pass;
    let node = initial_node(s);
    out.push(s.run_pass(Loop::Register, std::sync::Arc::new(node)));
}

fn schedule(me: &mut Register, ctx: &Ctx) {
    let step = me.backoff.next_delay();
    me.next_at = Some(ctx.now + step);
}

/// The node as the kubelet's `initialNode` builds it, before the setters.
pub(super) fn initial_node(s: &Shared) -> Value {
    let cfg = &s.cfg;
    let mut node = wanted_labels(s);
    let mut taints = serde_json::to_value(&cfg.register_with_taints).expect("taints serialize");
    if cfg.external_cloud_provider {
        if let Some(list) = taints.as_array_mut()
            && !list.iter().any(|t| t["key"] == UNINITIALIZED_TAINT)
        {
            list.push(json!({"key": UNINITIALIZED_TAINT, "value": "true", "effect": "NoSchedule"}));
        }
        if !cfg.node_ips.is_empty() {
            let ips: Vec<String> = cfg.node_ips.iter().map(ToString::to_string).collect();
            node["metadata"]["annotations"][PROVIDED_NODE_IP] = json!(ips.join(","));
        }
    }
    if taints.as_array().is_some_and(|l| !l.is_empty()) {
        node["spec"]["taints"] = taints;
    }
    if let Some(p) = &cfg.provider_id {
        node["spec"]["providerID"] = json!(p);
    }
    node
}

/// The kubelet's initial node with `nodeLabels` applied: what the default
/// labels should be.
fn wanted_labels(s: &Shared) -> Value {
    let mut node = nodestatus_model::node::kubelet::initial_node(&s.cfg.node_name, &s.hostname);
    if let Some(labels) = node
        .pointer_mut("/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for (k, v) in &s.cfg.node_labels {
            labels.insert(k.clone(), Value::String(v.clone()));
        }
    }
    node
}

/// The labels the kubelet reconciles on an existing node
/// (`updateDefaultLabels`), each only where the initial node has it.
pub const DEFAULT_LABELS: &[&str] = &[
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "node.kubernetes.io/windows-build",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
];

/// The kubelet's reconcile of an existing node against the initial node
/// (`nodeLabels` already applied to it): the attach-detach annotation, and
/// each of [`DEFAULT_LABELS`] that the initial node has (an empty value
/// removes it). Other `nodeLabels` and taints are never applied again.
pub fn reconcile(existing: &Value, initial: &Value) -> Value {
    let mut n = existing.clone();
    let meta = n["metadata"].as_object_mut().expect("a node has metadata");
    let ann = meta.entry("annotations").or_insert_with(|| json!({}));
    ann["volumes.kubernetes.io/controller-managed-attach-detach"] = json!("true");
    let labels = meta.entry("labels").or_insert_with(|| json!({}));
    for key in DEFAULT_LABELS {
        match initial["metadata"]["labels"].get(*key) {
            Some(Value::String(v)) if v.is_empty() => {
                if let Some(l) = labels.as_object_mut() {
                    l.remove(*key);
                }
            }
            Some(v) => labels[*key] = v.clone(),
            None => {}
        }
    }
    n
}
