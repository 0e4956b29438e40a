//! The node as a pass builds it: every write checked and accepted in one
//! place, a 0.1 setter's whole node through the one diff, a 0.2 setter's
//! part merged field by field.

use std::cell::OnceCell;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::Value;

use nodestatus_model::node::part::Standing;
use nodestatus_model::node::{self, Diff, FieldPath, Part};
use nodestatus_model::ownership::{self, Ownership};
use nodestatus_model::policy::{self, Allowance};
use nodestatus_model::validate::{self, Problem};
use nodestatus_runtime::{CallContext, EmittedEvent, Runtime, SetResult};

use super::{Builtin, PluginSet, Setter, SetterError, SetterErrorKind, SetterReport};

/// How a setter's call went: the time in the sandbox (zero when not
/// called), and whether its last part stood instead.
#[derive(Debug, Default)]
pub(super) struct Calling {
    pub called: Duration,
    pub skipped: bool,
}

/// The node as a pass builds it, step by step: every write, a setter's or
/// a built-in step's, goes through [`Work::accept`], the one place where
/// an output is checked, its fields' ownership recorded and the node
/// moved on; the ownership record is written and the whole node validated
/// once, at the end ([`Work::finish`]).
pub(super) struct Work<'a> {
    /// The node as it came, its ownership record, and its problems, found
    /// only when a write needs them (a pass of parts that change nothing
    /// validates nothing).
    input: &'a Value,
    found: Ownership,
    input_problems: OnceCell<Vec<Problem>>,
    /// The node so far, and its text while it is current (the next
    /// setter's input; `None`: serialized when a setter needs it).
    pub(super) current: Value,
    json: Option<Arc<str>>,
    /// The fingerprint of the node as a setter's input
    /// ([`super::memo::node_print`]), with the text it goes with.
    print: Option<(Arc<str>, u64)>,
    /// Its problems (all already in the input) once a write changed it;
    /// `None`: the input's.
    known: Option<Vec<Problem>>,
    ownership: Ownership,
    /// Whether fields of a plugin no longer loaded were removed (a change
    /// no write's check saw).
    released: bool,
    /// The condition types whose parts said the same again: their
    /// heartbeat is due ([`Work::beat`]).
    heartbeats: Vec<String>,
}

impl<'a> Work<'a> {
    pub(super) fn new(node: &'a Value) -> Self {
        let found = Ownership::from_node(node);
        Self {
            input: node,
            ownership: found.clone(),
            found,
            input_problems: OnceCell::new(),
            known: None,
            current: node.clone(),
            json: None,
            print: None,
            released: false,
            heartbeats: Vec::new(),
        }
    }

    /// The input's problems.
    fn input_problems(&self) -> &[Problem] {
        self.input_problems
            .get_or_init(|| validate::problems(self.input))
    }

    /// The problems of the node so far.
    fn known(&self) -> &[Problem] {
        match &self.known {
            Some(k) => k,
            None => self.input_problems(),
        }
    }

    /// The node so far as text, the next setter's input.
    fn json(&mut self) -> Arc<str> {
        let current = &self.current;
        self.json
            .get_or_insert_with(|| {
                Arc::from(serde_json::to_string(current).expect("a Value serializes"))
            })
            .clone()
    }

    /// The fingerprint of the node so far as a setter's input, whose text
    /// is `json`.
    fn print(&mut self, json: &Arc<str>) -> u64 {
        match &self.print {
            Some((text, print)) if Arc::ptr_eq(text, json) => *print,
            _ => {
                let print = super::memo::node_print(&self.current);
                self.print = Some((json.clone(), print));
                print
            }
        }
    }

    /// Runs one setter over the node so far: a 0.1 setter's output, once
    /// parsed as a Node, or a 0.2 setter's part, is accepted as its write.
    /// With a `memo`, a setter whose inputs did not change since its last
    /// call is not called, and its last part stands (`skipped`).
    pub(super) fn setter(
        &mut self,
        runtime: &Runtime,
        setter: &Setter,
        ctx: CallContext,
        lines: Option<&nodestatus_runtime::reactor::Batch>,
        memo: Option<&mut super::memo::Memo>,
        how: &mut Calling,
    ) -> Result<(Vec<FieldPath>, Vec<EmittedEvent>), SetterError> {
        let input = self.json();
        let started = Instant::now();
        let plugin = setter.plugin();
        let out = match (lines, memo) {
            (Some(batch), memo) => {
                if let Some(m) = memo {
                    m.forget(plugin.name());
                }
                plugin.call_lines(runtime, &input, batch, ctx)
            }
            (None, Some(memo)) => {
                let print = self.print(&input);
                let (out, called) = memo.call_set(runtime, plugin, &input, print, ctx);
                how.skipped = called == super::memo::Called::Skipped;
                out
            }
            (None, None) => plugin.call_set(runtime, &input, ctx),
        };
        how.called = started.elapsed();
        let out = out?;
        let write = match out.result {
            SetResult::Node(text) if *text == *input => return Ok((Vec::new(), out.events)),
            SetResult::Node(text) => {
                // Its size was bounded by the runtime ([`nodestatus_runtime::MAX_OUTPUT_BYTES`]).
                let node: Value = serde_json::from_str(&text).map_err(|e| {
                    SetterError::new(
                        SetterErrorKind::Output,
                        format!("the output is not JSON: {e}"),
                    )
                })?;
                policy::validate(&node).map_err(|e| {
                    SetterError::new(
                        SetterErrorKind::Output,
                        format!("the output is not a valid Node: {e}"),
                    )
                })?;
                Write::Node {
                    node,
                    text: Some(text),
                }
            }
            SetResult::Part(None) => return Ok((Vec::new(), out.events)),
            SetResult::Part(Some(text)) => {
                let part: Value = serde_json::from_str(&text).map_err(|e| {
                    SetterError::new(
                        SetterErrorKind::Output,
                        format!("the part is not JSON: {e}"),
                    )
                })?;
                Write::Part(
                    Part::parse(part, &self.current)
                        .map_err(|e| SetterError::new(SetterErrorKind::Output, e.to_string()))?,
                )
            }
        };
        let owner = setter.plugin().name();
        let changed = self.accept(Some(owner), write, &setter.config().fields)?;
        Ok((changed, out.events))
    }

    /// Runs one built-in step over the node so far, with the default
    /// allowance; it owns no field.
    pub(super) fn builtin(&mut self, b: Builtin) -> SetterReport {
        let started = Instant::now();
        let outcome = match (b.step)(&self.current) {
            None => Ok(Vec::new()),
            Some(node) => self.accept(
                None,
                Write::Node { node, text: None },
                &Allowance::default(),
            ),
        };
        if let Err(e) = &outcome {
            tracing::warn!(
                step = b.name,
                kind = e.kind.as_str(),
                "built-in step failed: {e}"
            );
        }
        SetterReport {
            plugin: b.name.to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            outcome,
            duration: started.elapsed(),
            called: Duration::ZERO,
            affects_readiness: false,
            lines: 0,
            skipped: false,
        }
    }

    /// The one place a write is taken: a whole node (whose text is `text`,
    /// when a setter gave it) or a setter's part. It moves the node on if
    /// it passes the checks of every write (the bound on its fields, the
    /// allowance, the API server's rules for problems it adds); a setter's
    /// (`owner`) condition times are stamped and its fields recorded as its
    /// own: those it changed in a node, those it names in a part.
    fn accept(
        &mut self,
        owner: Option<&str>,
        write: Write,
        allowance: &Allowance,
    ) -> Result<Vec<FieldPath>, SetterError> {
        let checked = match write {
            Write::Node { node, text } => {
                let checked = check(
                    &self.current,
                    node,
                    allowance,
                    self.known(),
                    owner.is_some(),
                )?;
                if let Some(owner) = owner {
                    self.ownership
                        .record(owner, &checked.changed, &checked.node)
                        .map_err(limit)?;
                }
                self.json = text.filter(|_| !checked.stamped).map(Arc::from);
                checked
            }
            Write::Part(part) => {
                let owner = owner.expect("only a setter writes a part");
                let merged = merge(
                    &self.current,
                    &self.ownership,
                    owner,
                    part,
                    allowance,
                    || self.known(),
                )?;
                self.ownership.set(owner, merged.owned).map_err(limit)?;
                self.heartbeats.extend(merged.heartbeats);
                let Some(checked) = merged.checked else {
                    return Ok(Vec::new());
                };
                self.json = None;
                checked
            }
        };
        self.current = checked.node;
        self.known = Some(checked.problems);
        Ok(checked.changed)
    }

    /// Gives the conditions whose parts said the same again their
    /// heartbeat, as the kubelet's setters do every pass (a heartbeat is a
    /// valid time: no check can refuse it). One write after the setters, so
    /// that their inputs are one text.
    pub(super) fn beat(&mut self, now: SystemTime) {
        if self.heartbeats.is_empty() {
            return;
        }
        let now = Value::String(node::condition_time(now));
        let types = std::mem::take(&mut self.heartbeats);
        if let Some(list) = self
            .current
            .pointer_mut("/status/conditions")
            .and_then(Value::as_array_mut)
        {
            for c in list.iter_mut().filter_map(Value::as_object_mut) {
                let of_type = c.get("type").and_then(Value::as_str);
                if of_type.is_some_and(|t| types.iter().any(|h| h == t))
                    && c.get("lastHeartbeatTime") != Some(&now)
                {
                    c.insert("lastHeartbeatTime".to_owned(), now.clone());
                    self.json = None;
                }
            }
        }
    }

    /// Removes the fields of plugins no longer in `set`.
    pub(super) fn release_unloaded(&mut self, set: &PluginSet) -> Vec<(String, FieldPath)> {
        let released = self
            .ownership
            .release_unloaded(|p| set.contains(p), &mut self.current);
        if !released.is_empty() {
            self.json = None;
            self.released = true;
        }
        released
    }

    /// The node the pass made: the ownership record written, the addresses
    /// in the server's order; or what the API server would refuse in it,
    /// when the checks of each step missed it (the removal of a gone
    /// plugin's fields and the ownership record are checked only here).
    pub(super) fn finish(mut self) -> Result<Value, Vec<Problem>> {
        let recorded = self.ownership != self.found;
        self.ownership.write(&mut self.current);
        node::patch::server_address_order(&mut self.current);
        let known = if recorded || self.released {
            validate::problems(&self.current)
        } else if let Some(known) = self.known.take() {
            known
        } else {
            // No write changed the node: nothing to refuse that the input
            // did not hold.
            return Ok(self.current);
        };
        let refused: Vec<Problem> = validate::introduced(self.input_problems(), known)
            .into_iter()
            .filter(|p| p.rule.origin() == validate::Origin::ApiServer)
            .collect();
        if refused.is_empty() {
            Ok(self.current)
        } else {
            Err(refused)
        }
    }
}

/// What [`node::kubelet::current_kubelet_fields`] reads, from the pass's
/// context: the container runtime's answer (nothing known when it did not
/// answer or none is configured) and the machine's facts.
pub(super) fn runtime_and_machine(ctx: &CallContext) -> node::kubelet::RuntimeAndMachine {
    let runtime = ctx
        .container_runtime
        .as_deref()
        .and_then(|r| r.as_ref().ok());
    node::kubelet::RuntimeAndMachine {
        runtime_handlers: runtime.map(|r| r.handlers.clone()),
        supplemental_groups_policy: runtime
            .and_then(|r| r.features.as_ref())
            .map(|f| f.supplemental_groups_policy),
        swap_bytes: ctx.facts.swap_bytes(),
        running_in_user_namespace: ctx.facts.running_in_user_namespace(),
    }
}

/// A new node that passed the checks of a write.
pub(super) struct Checked {
    /// The node, its conditions' times stamped.
    pub(super) node: Value,
    /// The fields that changed.
    pub(super) changed: Vec<FieldPath>,
    /// The node's problems (all already in the input).
    pub(super) problems: Vec<Problem>,
    /// Whether stamping the times changed the node.
    pub(super) stamped: bool,
}

/// The checks of every write, a plugin's or a built-in step's: the diff,
/// its bound, the policy, the API server's rules; then, with `stamp`, the
/// condition times.
fn check(
    input: &Value,
    mut output: Value,
    allowance: &Allowance,
    known: &[Problem],
    stamp: bool,
) -> Result<Checked, SetterError> {
    let changed = Diff::new(input, &output).paths();
    if changed.len() > ownership::MAX_FIELDS_PER_PLUGIN {
        return Err(SetterError::new(
            SetterErrorKind::Limit,
            ownership::Error::TooManyFields {
                fields: changed.len(),
            }
            .to_string(),
        ));
    }
    allowance
        .check_all(&changed)
        .map_err(|e| SetterError::new(SetterErrorKind::Policy, e.to_string()))?;
    let problems = validated(&output, known)?;
    // Stamping writes valid times only, so it adds no problem (the list may
    // keep one that it fixed, which only spares a later setter the blame).
    let stamped = stamp && node::stamp_times(input, &mut output, &changed, SystemTime::now());
    Ok(Checked {
        node: output,
        changed,
        problems,
        stamped,
    })
}

/// The problems of `node`, a write's result, if it adds none to `known`
/// (a write is not blamed for what the node already held).
fn validated(node: &Value, known: &[Problem]) -> Result<Vec<Problem>, SetterError> {
    let problems = validate::problems(node);
    let added = validate::introduced(known, problems.clone());
    if added.is_empty() {
        return Ok(problems);
    }
    let who = if added
        .iter()
        .any(|p| p.rule.origin() == validate::Origin::ApiServer)
    {
        "the API server would refuse the node"
    } else {
        "the node breaks nodestatus's rules"
    };
    Err(SetterError::new(
        SetterErrorKind::Invalid,
        format!("output discarded: {who}: {}", validate::describe(&added)),
    ))
}

/// A write of the node so far: a whole node (a 0.1 setter's output, or a
/// built-in step's, with the setter's text), or a 0.2 setter's part.
enum Write {
    Node { node: Value, text: Option<String> },
    Part(Part),
}

/// A ownership bound, as a setter's error.
fn limit(e: ownership::Error) -> SetterError {
    SetterError::new(SetterErrorKind::Limit, e.to_string())
}

/// What a part does to the node so far.
pub(super) struct Merged {
    /// The fields it names and sets: the setter's own from now on.
    pub(super) owned: Vec<FieldPath>,
    /// The condition types it says the same of again (heartbeat due).
    pub(super) heartbeats: Vec<String>,
    /// The new node, when the part changes anything.
    pub(super) checked: Option<Checked>,
}

/// The checks of a part of `owner` and its merge into `current`, without
/// any whole-node diff: the bound on its fields, each field it names
/// against the allowance, then field by field against the node. Fields
/// that `owner` owned and the part leaves out are removed (unless another
/// plugin owns them too); a node is built and validated only when
/// something changes.
pub(super) fn merge<'k>(
    current: &Value,
    ownership: &Ownership,
    owner: &str,
    part: Part,
    allowance: &Allowance,
    known: impl FnOnce() -> &'k [Problem],
) -> Result<Merged, SetterError> {
    if part.len() > ownership::MAX_FIELDS_PER_PLUGIN {
        return Err(limit(ownership::Error::TooManyFields {
            fields: part.len(),
        }));
    }
    for f in part.fields() {
        allowance
            .check(&f.path)
            .map_err(|e| SetterError::new(SetterErrorKind::Policy, e.to_string()))?;
    }
    let dropped: Vec<FieldPath> = ownership
        .owned_by(owner)
        .filter(|p| !part.names(p) && p.exists_in(current))
        .filter(|p| !ownership.owned_by_another(owner, p))
        .cloned()
        .collect();
    let mut owned = Vec::with_capacity(part.len());
    let mut heartbeats = Vec::new();
    let mut changes = Vec::new();
    for f in part.fields() {
        if f.value.is_some() {
            owned.push(f.path.clone());
        }
        match f.standing(current) {
            Standing::Held => {}
            Standing::Heartbeat => {
                if let FieldPath::Condition(t) = &f.path {
                    heartbeats.push(t.clone());
                }
            }
            Standing::Changes => changes.push(f),
        }
    }
    if changes.is_empty() && dropped.is_empty() {
        return Ok(Merged {
            owned,
            heartbeats,
            checked: None,
        });
    }
    let mut next = current.clone();
    let mut changed = Vec::with_capacity(changes.len() + dropped.len());
    for f in changes {
        match &f.value {
            Some(v) => node::part::set(&mut next, &f.path, v.clone()),
            None => {
                f.path.remove_from(&mut next);
            }
        }
        changed.push(f.path.clone());
    }
    for p in dropped {
        p.remove_from(&mut next);
        changed.push(p);
    }
    // The times are the host's, whatever the part wrote: stamped before the
    // checks, which then see the node as it is to be written.
    let stamped = node::stamp_times(current, &mut next, &changed, SystemTime::now());
    let problems = validated(&next, known())?;
    Ok(Merged {
        owned,
        heartbeats,
        checked: Some(Checked {
            node: next,
            changed,
            problems,
            stamped,
        }),
    })
}
