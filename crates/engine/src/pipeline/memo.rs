//! Incremental passes: a setter whose inputs are the same as at its last
//! call is not called again; its last part stands.
//!
//! What a call's inputs are, and how each is compared:
//!
//! - the node it was given, less what changes at every write and means
//!   nothing to a setter (`metadata.resourceVersion`, the times of
//!   `metadata.managedFields`, every condition's `lastHeartbeatTime`):
//!   a fingerprint of the rest;
//! - the plugin: the very same load (its code, its grants, its settings
//!   and its config are fixed at load; a reload is another plugin);
//! - what it read ([`nodestatus_runtime::Trace`]): each host function's
//!   answer, each file opened, stat'ed or listed, each `/proc` copy,
//!   asked again of this pass ([`Plugin::inputs_changed`]).
//!
//! A call is never stood for by an earlier one when it read a clock or
//! randomness, keeps its instance, recorded events, was handed stream
//! lines, returned a 0.1 node (the whole node, with its times) or failed:
//! each of those is called every pass. Every setter is called at least once
//! per report period ([`Memo::new`]'s `max_age`), and at once when any of
//! its inputs changes: a changed input is in the node in the same pass as
//! before.
//!
//! [`Incremental::Check`] calls every setter anyway and compares: a result
//! that would have stood and differs is a defect of the trace, logged,
//! counted ([`MemoStats::mismatches`]) and, in a debug build, a panic.

use std::collections::HashMap;
use std::hash::Hasher;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde_json::Value;

use nodestatus_runtime::{CallContext, CallError, Plugin, Runtime, SetOutput, SetResult, Trace};

pub use crate::config::Incremental;

/// What a memo did, since it was made.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemoStats {
    /// Calls stood for by an earlier result.
    pub skipped: u64,
    /// Calls made (every call in [`Incremental::Check`] mode).
    pub called: u64,
    /// In [`Incremental::Check`] mode: results that would have stood,
    /// compared with the called one.
    pub checked: u64,
    /// Of those, the ones that differ.
    pub mismatches: u64,
}

/// The counts of every memo of the process, since it started (a fleet's
/// agents each have their own memo).
static TOTALS: [std::sync::atomic::AtomicU64; 4] =
    [const { std::sync::atomic::AtomicU64::new(0) }; 4];

impl MemoStats {
    /// The sum over every memo of the process, since it started.
    pub fn process() -> Self {
        let at = |i: usize| TOTALS[i].load(std::sync::atomic::Ordering::Relaxed);
        Self {
            skipped: at(0),
            called: at(1),
            checked: at(2),
            mismatches: at(3),
        }
    }
}

/// Adds 1 to count `i` of `stats` and of the process's [`TOTALS`].
fn count(field: &mut u64, i: usize) {
    *field += 1;
    TOTALS[i].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
}

/// A setter's last result that may stand for its next call.
struct Entry {
    /// The load that returned it (a reload is another plugin; the weak
    /// pointer keeps its allocation, so no other plugin takes its address).
    plugin: Weak<dyn std::any::Any + Send + Sync>,
    node: u64,
    trace: Trace,
    part: Option<String>,
    at: Instant,
}

/// One node's last results, by plugin: held by its agent from pass to
/// pass (see the [module docs](self)).
pub struct Memo {
    mode: Incremental,
    max_age: Duration,
    entries: HashMap<String, Entry>,
    stats: MemoStats,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo")
            .field("mode", &self.mode)
            .field("max_age", &self.max_age)
            .field("entries", &self.entries.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// How a setter's call went, for its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Called {
    /// Called.
    #[default]
    Yes,
    /// Not called: its last part stood.
    Skipped,
}

impl Memo {
    /// A memo in `mode`, whose results stand for at most `max_age` (the
    /// report period: every setter is called at least once in it).
    pub fn new(mode: Incremental, max_age: Duration) -> Self {
        Self {
            mode,
            max_age,
            entries: HashMap::new(),
            stats: MemoStats::default(),
        }
    }

    /// Its mode.
    pub fn mode(&self) -> Incremental {
        self.mode
    }

    /// A new mode and period (a config reload); a change of mode forgets
    /// every result.
    pub fn configure(&mut self, mode: Incremental, max_age: Duration) {
        if mode != self.mode {
            self.entries.clear();
        }
        self.mode = mode;
        self.max_age = max_age;
    }

    /// What it did so far.
    pub fn stats(&self) -> MemoStats {
        self.stats
    }

    /// Forgets `plugin`'s result: its next call is made (a call through
    /// `on-lines`, whose part the next `set` must see).
    pub fn forget(&mut self, plugin: &str) {
        self.entries.remove(plugin);
    }

    /// Drops the results of plugins not in `names` (gone from the set).
    pub fn retain(&mut self, names: impl Fn(&str) -> bool) {
        self.entries.retain(|k, _| names(k));
    }

    /// `set` of `plugin` over `input` (the node as text, `node` its
    /// fingerprint, [`node_print`]), unless its last result may stand:
    /// then that result, and [`Called::Skipped`].
    pub fn call_set(
        &mut self,
        runtime: &Runtime,
        plugin: &Arc<Plugin>,
        input: &str,
        node: u64,
        ctx: CallContext,
    ) -> (Result<SetOutput, CallError>, Called) {
        self.call_with(
            plugin.name(),
            plugin,
            node,
            |trace| plugin.inputs_changed(trace, &ctx),
            || plugin.call_set(runtime, input, ctx.clone()),
        )
    }

    /// [`Self::call_set`] of the load `plugin` (its identity only), named
    /// `name`: `changed` says what of a trace's inputs reads otherwise now
    /// (`None`: nothing), `call` calls it.
    fn call_with<P: Send + Sync + 'static>(
        &mut self,
        name: &str,
        plugin: &Arc<P>,
        node: u64,
        changed: impl FnOnce(&Trace) -> Option<String>,
        call: impl FnOnce() -> Result<SetOutput, CallError>,
    ) -> (Result<SetOutput, CallError>, Called) {
        let why = |e: &Entry| {
            if !std::ptr::addr_eq(e.plugin.as_ptr(), Arc::as_ptr(plugin)) {
                Some("another load of the plugin".to_owned())
            } else if e.node != node {
                Some("the node".to_owned())
            } else if e.at.elapsed() >= self.max_age {
                Some("the report period".to_owned())
            } else {
                changed(&e.trace)
            }
        };
        let standing = match (self.mode, self.entries.get(name)) {
            (Incremental::Off, _) | (_, None) => None,
            (_, Some(e)) => match why(e) {
                None => Some((e.part.clone(), e.trace.clone())),
                Some(why) => {
                    tracing::debug!(plugin = name, "called: changed since its last call: {why}");
                    None
                }
            },
        };
        if let (Some((part, trace)), Incremental::On) = (&standing, self.mode) {
            count(&mut self.stats.skipped, 0);
            let out = SetOutput {
                result: SetResult::Part(part.clone()),
                events: Vec::new(),
                trace: trace.clone(),
            };
            return (Ok(out), Called::Skipped);
        }
        count(&mut self.stats.called, 1);
        let out = call();
        if let (Some((part, _)), Ok(o)) = (&standing, &out) {
            count(&mut self.stats.checked, 2);
            let called = match &o.result {
                SetResult::Part(p) => p.as_deref(),
                SetResult::Node(_) => None,
            };
            if called != part.as_deref() {
                count(&mut self.stats.mismatches, 3);
                tracing::error!(
                    plugin = name,
                    stood = part.as_deref().unwrap_or("(none)"),
                    called = called.unwrap_or("(none)"),
                    "incrementalPasses check: the part that would have stood differs from the called one: an input the trace missed"
                );
                debug_assert!(
                    false,
                    "incrementalPasses check: {name}'s part that would have stood differs from the called one: {part:?} against {called:?}"
                );
            }
        }
        match &out {
            Ok(o) if self.mode != Incremental::Off && may_stand(o) => {
                let part = match &o.result {
                    SetResult::Part(p) => p.clone(),
                    SetResult::Node(_) => unreachable!("may_stand refuses a node"),
                };
                let plugin: Arc<dyn std::any::Any + Send + Sync> = plugin.clone();
                self.entries.insert(
                    name.to_owned(),
                    Entry {
                        plugin: Arc::downgrade(&plugin),
                        node,
                        trace: o.trace.clone(),
                        part,
                        at: Instant::now(),
                    },
                );
            }
            _ => {
                if let Ok(o) = &out {
                    tracing::debug!(
                        plugin = name,
                        unrepeatable = o.trace.unrepeatable().map(|u| u.as_str()),
                        events = o.events.len(),
                        "its result cannot stand for its next call"
                    );
                }
                self.entries.remove(name);
            }
        }
        (out, Called::Yes)
    }
}

/// Whether a call's result may stand for a later call: a part (not a 0.1
/// node), no events, a repeatable trace.
fn may_stand(out: &SetOutput) -> bool {
    matches!(out.result, SetResult::Part(_))
        && out.events.is_empty()
        && out.trace.unrepeatable().is_none()
}

/// The fingerprint of a node as a setter's input: every field but
/// `metadata.resourceVersion`, the times of `metadata.managedFields` and
/// the conditions' `lastHeartbeatTime`, keys in order (a `serde_json` map
/// is sorted).
pub fn node_print(node: &Value) -> u64 {
    let mut h = nodestatus_runtime::trace::hasher();
    print_value(&mut h, node, Place::Root);
    h.finish()
}

/// Where a value is in the node, as far as the skipped fields go.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    Metadata,
    ManagedFields,
    ManagedField,
    Status,
    Conditions,
    Condition,
    Other,
}

fn print_value(h: &mut impl Hasher, v: &Value, at: Place) {
    match v {
        Value::Null => h.write_u8(0),
        Value::Bool(b) => {
            h.write_u8(1);
            h.write_u8(u8::from(*b));
        }
        Value::Number(n) => {
            h.write_u8(2);
            h.write(n.to_string().as_bytes());
            h.write_u8(0xff);
        }
        Value::String(s) => {
            h.write_u8(3);
            h.write(s.as_bytes());
            h.write_u8(0xff);
        }
        Value::Array(items) => {
            h.write_u8(4);
            h.write_usize(items.len());
            let inner = match at {
                Place::ManagedFields => Place::ManagedField,
                Place::Conditions => Place::Condition,
                _ => Place::Other,
            };
            for i in items {
                print_value(h, i, inner);
            }
        }
        Value::Object(map) => {
            h.write_u8(5);
            for (k, v) in map {
                let inner = match (at, k.as_str()) {
                    (Place::Metadata, "resourceVersion") => continue,
                    (Place::ManagedField, "time") => continue,
                    (Place::Condition, "lastHeartbeatTime") => continue,
                    (Place::Root, "metadata") => Place::Metadata,
                    (Place::Root, "status") => Place::Status,
                    (Place::Metadata, "managedFields") => Place::ManagedFields,
                    (Place::Status, "conditions") => Place::Conditions,
                    _ => Place::Other,
                };
                h.write(k.as_bytes());
                h.write_u8(0xff);
                print_value(h, v, inner);
            }
            h.write_u8(0xfe);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(rv: &str, beat: &str, reason: &str) -> Value {
        json!({
            "metadata": {"name": "n", "resourceVersion": rv,
                "managedFields": [{"manager": "m", "time": beat}]},
            "status": {"conditions": [{"type": "Ready", "status": "True",
                "reason": reason, "lastHeartbeatTime": beat,
                "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
        })
    }

    #[test]
    fn a_heartbeat_or_a_resource_version_is_not_a_change() {
        let a = node_print(&node("1", "2026-11-29T10:00:00Z", "KubeletReady"));
        let b = node_print(&node("2", "2026-11-29T10:00:10Z", "KubeletReady"));
        assert_eq!(a, b);
    }

    #[test]
    fn any_other_field_is_a_change() {
        let a = node_print(&node("1", "2026-11-29T10:00:00Z", "KubeletReady"));
        let b = node_print(&node("1", "2026-11-29T10:00:00Z", "Other"));
        assert_ne!(a, b);
        // A heartbeat's name outside a condition is a field like another.
        let with = |v: &str| {
            node_print(&json!({"metadata": {"name": "n",
                "annotations": {"lastHeartbeatTime": v}}}))
        };
        assert_ne!(with("a"), with("b"));
        // Keys and strings cannot run into each other.
        assert_ne!(
            node_print(&json!({"ab": "c"})),
            node_print(&json!({"a": "bc"}))
        );
    }

    /// A part with a repeatable, empty trace.
    fn part(text: &str) -> Result<SetOutput, CallError> {
        Ok(SetOutput {
            result: SetResult::Part(Some(text.to_owned())),
            events: Vec::new(),
            trace: Trace::default(),
        })
    }

    /// One call of `memo` for the load `p`: what it returned and how.
    fn call(
        memo: &mut Memo,
        p: &Arc<()>,
        node: u64,
        unchanged: bool,
        answer: &str,
    ) -> (Option<String>, Called) {
        let changed = (!unchanged).then(|| "an input".to_owned());
        let (out, how) = memo.call_with("p", p, node, |_| changed, || part(answer));
        match out.unwrap().result {
            SetResult::Part(p) => (p, how),
            SetResult::Node(_) => unreachable!(),
        }
    }

    #[test]
    fn a_result_stands_while_its_inputs_hold_and_no_longer() {
        let p = Arc::new(());
        let mut memo = Memo::new(Incremental::On, Duration::from_secs(300));
        assert_eq!(
            call(&mut memo, &p, 1, true, "a"),
            (Some("a".into()), Called::Yes)
        );
        // The same node and inputs: the part stands, whatever a call says.
        assert_eq!(
            call(&mut memo, &p, 1, true, "b"),
            (Some("a".into()), Called::Skipped)
        );
        // Another node, or an input changed: called.
        assert_eq!(
            call(&mut memo, &p, 2, true, "c"),
            (Some("c".into()), Called::Yes)
        );
        assert_eq!(
            call(&mut memo, &p, 2, false, "d"),
            (Some("d".into()), Called::Yes)
        );
        // Another load of the plugin: called.
        let reloaded = Arc::new(());
        assert_eq!(
            call(&mut memo, &reloaded, 2, true, "e"),
            (Some("e".into()), Called::Yes)
        );
        assert_eq!(
            memo.stats(),
            MemoStats {
                skipped: 1,
                called: 4,
                checked: 0,
                mismatches: 0
            }
        );
    }

    #[test]
    fn every_setter_is_called_once_a_period_and_never_when_off() {
        let p = Arc::new(());
        let mut memo = Memo::new(Incremental::On, Duration::ZERO);
        call(&mut memo, &p, 1, true, "a");
        assert_eq!(call(&mut memo, &p, 1, true, "b").1, Called::Yes);
        let mut off = Memo::new(Incremental::Off, Duration::from_secs(300));
        call(&mut off, &p, 1, true, "a");
        assert_eq!(call(&mut off, &p, 1, true, "b").1, Called::Yes);
    }

    #[test]
    fn what_cannot_be_repeated_never_stands() {
        let p = Arc::new(());
        let mut memo = Memo::new(Incremental::On, Duration::from_secs(300));
        let mut clock = Trace::default();
        clock.mark(nodestatus_runtime::Unrepeatable::Clock);
        let outs = [
            SetOutput {
                result: SetResult::Part(None),
                events: Vec::new(),
                trace: clock,
            },
            SetOutput {
                result: SetResult::Part(None),
                events: vec![nodestatus_runtime::EmittedEvent {
                    event_type: nodestatus_runtime::EventType::Normal,
                    reason: "R".into(),
                    message: "m".into(),
                }],
                trace: Trace::default(),
            },
            SetOutput {
                result: SetResult::Node("{}".into()),
                events: Vec::new(),
                trace: Trace::default(),
            },
        ];
        for out in outs {
            let _ = memo.call_with("p", &p, 1, |_| None, || Ok(out));
            let (_, how) = memo.call_with("p", &p, 1, |_| None, || part("x"));
            assert_eq!(how, Called::Yes);
            memo.forget("p");
        }
    }

    #[test]
    #[cfg_attr(debug_assertions, should_panic(expected = "would have stood differs"))]
    fn the_check_calls_every_setter_and_catches_a_part_that_would_have_differed() {
        let p = Arc::new(());
        let mut memo = Memo::new(Incremental::Check, Duration::from_secs(300));
        call(&mut memo, &p, 1, true, "a");
        assert_eq!(
            call(&mut memo, &p, 1, true, "a"),
            (Some("a".into()), Called::Yes)
        );
        assert_eq!(memo.stats().mismatches, 0);
        // An input the trace missed: the same inputs, another part.
        call(&mut memo, &p, 1, true, "b");
        assert_eq!(memo.stats().mismatches, 1);
    }

    #[test]
    fn the_modes_parse_by_their_names() {
        for n in Incremental::NAMES {
            assert_eq!(Incremental::parse(n).unwrap().as_str(), n);
        }
        assert_eq!(Incremental::parse("yes"), None);
    }
}
