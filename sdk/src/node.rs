//! [`Node`]: a `v1.Node` in JSON that parses only what a setter touches, and
//! records what it writes.
//!
//! The input is split once into its top-level fields and the fields of
//! `metadata` and `status`, each kept as raw JSON text. A field is parsed the
//! first time a setter reads it. A setter that sets a label and a condition
//! never parses the node's 50 images.
//!
//! # The part
//!
//! Every write through `Node` is recorded, and [`Node::part`] is what the
//! setter returns to the host (WIT `nodestatus:plugin@0.2.1`): each field it
//! wrote during the call, with the value it holds at the end, whether or not
//! the node held that value already. A field, as the host counts them, is a
//! label, an annotation, a `capacity`, `allocatable` or `nodeInfo` key, a
//! condition (by type), or any other key of `status` as a whole
//! (`addresses`, `images`):
//!
//! - the setters ([`Node::set_label`], [`Node::set_capacity`],
//!   [`Node::set_condition`], [`Node::set_addresses`], ...) write their one
//!   field; the last write of a field wins;
//! - the removers write their field as removed: `null` for a key
//!   ([`Node::remove_label`], [`Node::remove_resource`], ...), a delete
//!   directive `{"type": T, "$patch": "delete"}` for a condition
//!   ([`Node::remove_condition`]), whether or not the node had it;
//! - the raw accessors of `status` ([`Node::status_mut`],
//!   [`Node::set_status`], [`Node::remove_status`]) write the whole key they
//!   name; for a keyed section (`capacity`, `allocatable`, `nodeInfo`,
//!   `conditions`) that is **every** key in it after the call (and, as
//!   removed, every key it held at that access and no longer holds), so a
//!   setter that owns a few keys should use the per-key setters.
//!
//! Reads always see the node with the writes so far.

use std::cell::OnceCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, Visitor};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::condition::{Condition, ConditionStatus, Transition};
use crate::quantity::Quantity;

mod part;

/// One field, raw until read, serialized again only if changed.
struct Field {
    raw: Option<Box<RawValue>>,
    value: OnceCell<Value>,
    dirty: bool,
}

impl Field {
    fn raw(raw: Box<RawValue>) -> Self {
        Self {
            raw: Some(raw),
            value: OnceCell::new(),
            dirty: false,
        }
    }

    fn new(value: Value) -> Self {
        let cell = OnceCell::new();
        let _ = cell.set(value);
        Self {
            raw: None,
            value: cell,
            dirty: true,
        }
    }

    fn get(&self) -> &Value {
        self.value.get_or_init(|| {
            self.raw
                .as_ref()
                .and_then(|r| serde_json::from_str(r.get()).ok())
                .unwrap_or(Value::Null)
        })
    }

    fn get_mut(&mut self) -> &mut Value {
        self.get();
        self.dirty = true;
        self.value.get_mut().expect("initialized by get")
    }

    fn write(&self, out: &mut String) {
        match (&self.raw, self.dirty) {
            (Some(raw), false) => out.push_str(raw.get()),
            _ => out.push_str(&serde_json::to_string(self.get()).expect("a Value serializes")),
        }
    }
}

/// An ordered object of lazy fields.
#[derive(Default)]
struct Fields(Vec<(String, Field)>);

impl Fields {
    fn position(&self, key: &str) -> Option<usize> {
        self.0.iter().position(|(k, _)| k == key)
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.position(key)
            .map(|i| self.0[i].1.get())
            .filter(|v| !v.is_null())
    }

    fn get_mut_or(&mut self, key: &str, default: impl FnOnce() -> Value) -> &mut Value {
        let i = match self.position(key) {
            Some(i) => i,
            None => {
                self.0.push((key.to_owned(), Field::new(Value::Null)));
                self.0.len() - 1
            }
        };
        let v = self.0[i].1.get_mut();
        if v.is_null() {
            *v = default();
        }
        v
    }

    fn remove(&mut self, key: &str) {
        self.0.retain(|(k, _)| k != key);
    }

    fn write(&self, out: &mut String) {
        out.push('{');
        for (i, (k, f)) in self.0.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_key(out, k);
            f.write(out);
        }
        out.push('}');
    }
}

fn write_key(out: &mut String, k: &str) {
    if k.bytes().all(|b| b != b'"' && b != b'\\' && b >= 0x20) {
        out.push('"');
        out.push_str(k);
        out.push('"');
    } else {
        out.push_str(&serde_json::to_string(k).expect("a string serializes"));
    }
    out.push(':');
}

enum Top {
    Raw(Field),
    Nested(Fields),
}

/// A Node, as JSON, parsed lazily, with the fields a setter wrote (its
/// part). See the module docs.
pub struct Node {
    top: Vec<(String, Top)>,
    written: part::Written,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

struct FieldsSeed;

impl<'de> DeserializeSeed<'de> for FieldsSeed {
    type Value = Fields;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Fields, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Fields;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Fields, A::Error> {
                let mut out = Vec::with_capacity(m.size_hint().unwrap_or(8));
                while let Some(k) = m.next_key::<String>()? {
                    let raw: Box<RawValue> = m.next_value()?;
                    out.push((k, Field::raw(raw)));
                }
                Ok(Fields(out))
            }
        }
        d.deserialize_map(V)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Node as a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Node, A::Error> {
        let mut top = Vec::with_capacity(5);
        while let Some(k) = m.next_key::<String>()? {
            let v = if k == "metadata" || k == "status" {
                Top::Nested(m.next_value_seed(FieldsSeed)?)
            } else {
                Top::Raw(Field::raw(m.next_value()?))
            };
            top.push((k, v));
        }
        Ok(Node {
            top,
            written: part::Written::default(),
        })
    }
}

impl Node {
    /// Splits a Node's JSON into lazily parsed fields. Fails on text that is
    /// not a JSON object, or whose `metadata` or `status` is not an object.
    pub fn parse(json: &str) -> Result<Self, serde_json::Error> {
        let mut de = serde_json::Deserializer::from_str(json);
        let node = de::Deserializer::deserialize_map(&mut de, NodeVisitor)?;
        de.end()?;
        Ok(node)
    }

    /// A Node with only a name, for tests and examples.
    pub fn named(name: &str) -> Self {
        let json = serde_json::json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {}});
        Self::parse(&json.to_string()).expect("a valid node")
    }

    /// The whole Node as JSON, with the writes so far: unchanged fields byte
    /// for byte, changed ones re-serialized. For tests and debugging: a
    /// setter returns only its part ([`Node::part`]).
    pub fn to_json(&self) -> String {
        let mut out = String::with_capacity(self.size_hint());
        out.push('{');
        for (i, (k, t)) in self.top.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            write_key(&mut out, k);
            match t {
                Top::Raw(f) => f.write(&mut out),
                Top::Nested(fs) => fs.write(&mut out),
            }
        }
        out.push('}');
        out
    }

    fn size_hint(&self) -> usize {
        let field = |f: &Field| f.raw.as_ref().map_or(64, |r| r.get().len() + 8);
        self.top
            .iter()
            .map(|(k, t)| {
                k.len()
                    + match t {
                        Top::Raw(f) => field(f),
                        Top::Nested(fs) => fs.0.iter().map(|(k, f)| k.len() + field(f)).sum(),
                    }
            })
            .sum::<usize>()
            + 64
    }

    fn nested(&mut self, section: &str) -> &mut Fields {
        let i = match self.top.iter().position(|(k, _)| k == section) {
            Some(i) => i,
            None => {
                self.top
                    .push((section.to_owned(), Top::Nested(Fields::default())));
                self.top.len() - 1
            }
        };
        match &mut self.top[i].1 {
            Top::Nested(f) => f,
            Top::Raw(_) => unreachable!("metadata and status are always nested"),
        }
    }

    fn nested_ref(&self, section: &str) -> Option<&Fields> {
        self.top
            .iter()
            .find(|(k, _)| k == section)
            .and_then(|(_, t)| match t {
                Top::Nested(f) => Some(f),
                Top::Raw(_) => None,
            })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        self.metadata("name").and_then(Value::as_str).unwrap_or("")
    }

    /// A field of `metadata`, parsed on first use.
    pub fn metadata(&self, key: &str) -> Option<&Value> {
        self.nested_ref("metadata").and_then(|f| f.get(key))
    }

    /// A field of `status`, parsed on first use.
    pub fn status(&self, key: &str) -> Option<&Value> {
        self.nested_ref("status").and_then(|f| f.get(key))
    }

    /// A field of `status` to change; created as `default()` when missing or
    /// null.
    ///
    /// The part then holds the whole key: for `capacity`, `allocatable`,
    /// `nodeInfo` and `conditions`, every key (every condition) in it after
    /// the call, each as the setter's own, and every one it held here and no
    /// longer holds as removed (see the module docs). To own one key or one
    /// condition, use its setter instead ([`Node::set_capacity`],
    /// [`Node::set_condition`]).
    pub fn status_mut(&mut self, key: &str, default: impl FnOnce() -> Value) -> &mut Value {
        self.claim_status(key);
        self.status_value_mut(key, default)
    }

    /// Removes a field of `status`. The part holds the key as removed
    /// (`null`); for a keyed section, each of its keys (see
    /// [`Node::status_mut`]).
    pub fn remove_status(&mut self, key: &str) {
        self.claim_status(key);
        self.nested("status").remove(key);
    }

    /// Replaces a field of `status`; the part holds the whole key (see
    /// [`Node::status_mut`]).
    pub fn set_status(&mut self, key: &str, value: Value) {
        self.claim_status(key);
        if self.status(key) != Some(&value) {
            *self.status_value_mut(key, || Value::Null) = value;
        }
    }

    /// Records a raw write of `status.<key>` (see [`Node::status_mut`]).
    fn claim_status(&mut self, key: &str) {
        if part::KEYED.contains(&key) {
            if !self.written.is_claimed(key) {
                let before = self.section_keys(key);
                self.written.claim(key, before);
            }
        } else {
            self.written.status_key(key);
        }
    }

    /// A field of `status` to change, recording nothing: the writers that
    /// record their own field use it.
    fn status_value_mut(&mut self, key: &str, default: impl FnOnce() -> Value) -> &mut Value {
        self.nested("status").get_mut_or(key, default)
    }

    fn string_map(&self, section: &str, key: &str) -> Option<&Map<String, Value>> {
        self.nested_ref(section)?.get(key)?.as_object()
    }

    fn string_map_mut(&mut self, section: &str, key: &str) -> &mut Map<String, Value> {
        let v = self
            .nested(section)
            .get_mut_or(key, || Value::Object(Map::new()));
        if !v.is_object() {
            *v = Value::Object(Map::new());
        }
        v.as_object_mut().expect("made an object above")
    }

    fn set_in(&mut self, section: &str, map: &str, key: &str, value: &str) {
        self.written.key(map, key);
        if self
            .string_map(section, map)
            .and_then(|m| m.get(key))
            .and_then(Value::as_str)
            != Some(value)
        {
            self.string_map_mut(section, map)
                .insert(key.to_owned(), Value::String(value.to_owned()));
        }
    }

    fn remove_in(&mut self, section: &str, map: &str, key: &str) -> bool {
        self.written.key(map, key);
        if self
            .string_map(section, map)
            .is_some_and(|m| m.contains_key(key))
        {
            self.string_map_mut(section, map).remove(key);
            true
        } else {
            false
        }
    }

    /// A label's value.
    pub fn label(&self, key: &str) -> Option<&str> {
        self.string_map("metadata", "labels")?.get(key)?.as_str()
    }

    /// Sets a label; the part holds it even when the node already has that
    /// value.
    pub fn set_label(&mut self, key: &str, value: &str) {
        self.set_in("metadata", "labels", key, value);
    }

    /// Removes a label (in the part: `null`, whether or not it was there);
    /// returns whether it was there.
    pub fn remove_label(&mut self, key: &str) -> bool {
        self.remove_in("metadata", "labels", key)
    }

    /// An annotation's value.
    pub fn annotation(&self, key: &str) -> Option<&str> {
        self.string_map("metadata", "annotations")?
            .get(key)?
            .as_str()
    }

    /// Sets an annotation; the part holds it even when the node already has
    /// that value.
    pub fn set_annotation(&mut self, key: &str, value: &str) {
        self.set_in("metadata", "annotations", key, value);
    }

    /// Removes an annotation (in the part: `null`, whether or not it was
    /// there); returns whether it was there.
    pub fn remove_annotation(&mut self, key: &str) -> bool {
        self.remove_in("metadata", "annotations", key)
    }

    /// `status.capacity[name]`, parsed.
    pub fn capacity(&self, name: &str) -> Option<Quantity> {
        self.quantity("capacity", name)
    }

    /// `status.allocatable[name]`, parsed.
    pub fn allocatable(&self, name: &str) -> Option<Quantity> {
        self.quantity("allocatable", name)
    }

    fn quantity(&self, map: &str, name: &str) -> Option<Quantity> {
        self.string_map("status", map)?
            .get(name)?
            .as_str()?
            .parse()
            .ok()
    }

    /// Sets `status.capacity[name]`.
    pub fn set_capacity(&mut self, name: &str, q: Quantity) {
        self.set_in("status", "capacity", name, &q.to_string());
    }

    /// Sets `status.allocatable[name]`.
    pub fn set_allocatable(&mut self, name: &str, q: Quantity) {
        self.set_in("status", "allocatable", name, &q.to_string());
    }

    /// Removes `status.capacity[name]` and `status.allocatable[name]` (in
    /// the part: `null` in both).
    pub fn remove_resource(&mut self, name: &str) {
        self.remove_in("status", "capacity", name);
        self.remove_in("status", "allocatable", name);
    }

    /// `status.nodeInfo.<field>`.
    pub fn node_info(&self, field: &str) -> Option<&str> {
        self.string_map("status", "nodeInfo")?.get(field)?.as_str()
    }

    /// Sets `status.nodeInfo.<field>`.
    pub fn set_node_info(&mut self, field: &str, value: &str) {
        self.set_in("status", "nodeInfo", field, value);
    }

    /// Replaces `status.addresses` with `(type, address)` pairs: one field,
    /// the whole list.
    pub fn set_addresses(&mut self, addresses: &[(&str, &str)]) {
        let list: Vec<Value> = addresses
            .iter()
            .map(|(t, a)| serde_json::json!({"type": t, "address": a}))
            .collect();
        self.set_status("addresses", Value::Array(list));
    }

    /// The condition of this type, if any.
    pub fn condition(&self, type_: &str) -> Option<Condition> {
        self.status("conditions")?
            .as_array()?
            .iter()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))
            .and_then(|c| serde_json::from_value(c.clone()).ok())
    }

    /// Sets a condition with the kubelet's rules, at the current time (in a
    /// component, the host's: see [`crate::condition_time`]). See
    /// [`Node::set_condition_at`].
    pub fn set_condition(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
    ) -> Transition {
        self.set_condition_at(type_, status, reason, message, &crate::condition_time())
    }

    /// Sets a condition with the kubelet's rules:
    /// - `lastHeartbeatTime` is `now` on every call;
    /// - a new condition, or one whose status flips, gets `lastTransitionTime`
    ///   = `now`; otherwise the transition time is kept;
    /// - reason and message are replaced.
    ///
    /// A new condition is appended. The part holds the condition, once, as
    /// last set (the host stamps its times again, with the same rules, and
    /// merges it into the node by type). The returned [`Transition`] says
    /// whether the status flipped, which is when the kubelet records an
    /// event.
    pub fn set_condition_at(
        &mut self,
        type_: &str,
        status: ConditionStatus,
        reason: &str,
        message: &str,
        now: &str,
    ) -> Transition {
        self.written.key("conditions", type_);
        let list = self.status_value_mut("conditions", || Value::Array(Vec::new()));
        if !list.is_array() {
            *list = Value::Array(Vec::new());
        }
        let list = list.as_array_mut().expect("made an array above");
        let existing = list
            .iter_mut()
            .find(|c| c.get("type").and_then(Value::as_str) == Some(type_));
        let previous = existing
            .as_ref()
            .and_then(|c| c.get("status"))
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<ConditionStatus>().ok());
        let flipped = previous != Some(status);
        let transition_time = match (&existing, flipped) {
            (Some(c), false) => c
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .unwrap_or(now)
                .to_owned(),
            _ => now.to_owned(),
        };
        let new = serde_json::json!({
            "type": type_,
            "status": status.as_str(),
            "lastHeartbeatTime": now,
            "lastTransitionTime": transition_time,
            "reason": reason,
            "message": message,
        });
        match existing {
            Some(c) => *c = new,
            None => list.push(new),
        }
        Transition {
            previous,
            current: status,
            flipped,
        }
    }

    /// Removes a condition (in the part: `{"type": type_, "$patch":
    /// "delete"}`, whether or not it was there); returns whether it was
    /// there.
    pub fn remove_condition(&mut self, type_: &str) -> bool {
        self.written.key("conditions", type_);
        let is_it = |c: &Value| c.get("type").and_then(Value::as_str) == Some(type_);
        let present = self
            .status("conditions")
            .and_then(Value::as_array)
            .is_some_and(|l| l.iter().any(is_it));
        if present
            && let Some(list) = self
                .status_value_mut("conditions", || Value::Array(Vec::new()))
                .as_array_mut()
        {
            list.retain(|c| !is_it(c));
        }
        present
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample() -> String {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "1"}},
            "spec": {"taints": []},
            "status": {
                "images": [{"names": ["x"], "sizeBytes": 1}],
                "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2020-01-01T00:00:00Z", "lastTransitionTime": "2020-01-01T00:00:00Z", "reason": "r", "message": "m"}]
            }
        })
        .to_string()
    }

    #[test]
    fn untouched_node_is_byte_identical() {
        let s = sample();
        assert_eq!(Node::parse(&s).unwrap().to_json(), s);
        let weird = r#"{"metadata":{"name":"a\"b","x":[1, 2]},"status":{},"extra":{"k":"v"}}"#;
        assert_eq!(Node::parse(weird).unwrap().to_json(), weird);
    }

    #[test]
    fn edits_touch_only_their_field() {
        let mut n = Node::parse(&sample()).unwrap();
        n.set_label("example.com/x", "y");
        n.set_capacity("example.com/dongle", Quantity::units(2));
        n.set_node_info("kernelVersion", "6.1");
        let out: Value = serde_json::from_str(&n.to_json()).unwrap();
        assert_eq!(
            out["metadata"]["labels"],
            json!({"a": "1", "example.com/x": "y"})
        );
        assert_eq!(out["status"]["capacity"]["example.com/dongle"], "2");
        assert_eq!(out["status"]["nodeInfo"]["kernelVersion"], "6.1");
        assert_eq!(
            out["status"]["images"],
            json!([{"names": ["x"], "sizeBytes": 1}])
        );
        assert!(n.remove_label("a"));
        assert!(!n.remove_label("a"));
        assert_eq!(n.label("example.com/x"), Some("y"));
    }

    #[test]
    fn conditions_follow_the_kubelet_rules() {
        let mut n = Node::parse(&sample()).unwrap();
        let t = n.set_condition_at(
            "Ready",
            ConditionStatus::True,
            "r2",
            "m2",
            "2021-01-01T00:00:00Z",
        );
        assert!(!t.flipped);
        let c = n.condition("Ready").unwrap();
        assert_eq!(
            c.last_heartbeat_time.as_deref(),
            Some("2021-01-01T00:00:00Z")
        );
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2020-01-01T00:00:00Z")
        );
        assert_eq!(c.reason.as_deref(), Some("r2"));

        let t = n.set_condition_at(
            "Ready",
            ConditionStatus::False,
            "r3",
            "m3",
            "2022-01-01T00:00:00Z",
        );
        assert!(t.flipped);
        assert_eq!(t.previous, Some(ConditionStatus::True));
        let c = n.condition("Ready").unwrap();
        assert_eq!(
            c.last_transition_time.as_deref(),
            Some("2022-01-01T00:00:00Z")
        );

        let t = n.set_condition_at(
            "Custom",
            ConditionStatus::Unknown,
            "",
            "",
            "2022-01-01T00:00:00Z",
        );
        assert!(t.flipped && t.previous.is_none());
        let types: Vec<_> = n
            .status("conditions")
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].clone())
            .collect();
        assert_eq!(types, vec![json!("Ready"), json!("Custom")]);
        assert!(n.remove_condition("Custom"));
        assert!(n.condition("Custom").is_none());
    }

    #[test]
    fn rejects_non_objects() {
        assert!(Node::parse("[1]").is_err());
        assert!(Node::parse(r#"{"metadata": 3}"#).is_err());
        assert!(Node::parse("{} trailing").is_err());
    }
}
