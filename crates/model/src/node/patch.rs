//! The status patch: a two-way strategic merge patch from the node on the
//! server to the node the setters computed, as the kubelet sends it to
//! `nodes/<name>/status`, built from the one [`Diff`].
//!
//! - Maps (labels, annotations, capacity, allocatable, nodeInfo, ...) carry
//!   only changed keys; a removed key is `null`. A status map that appears
//!   is sent whole, one that goes is `null`; an empty one changes nothing.
//! - `status.conditions` merges on `type`: the patch lists every type in the
//!   new order in `$setElementOrder/conditions` and carries only the changed
//!   fields of the changed conditions (a heartbeat-only change is `type` plus
//!   `lastHeartbeatTime`); a removed condition is `{"$patch": "delete"}`.
//! - `status.addresses` is sent whole with `{"$patch": "replace"}`, because
//!   its merge key (`type`) is not unique; without the directive when the
//!   old node has no addresses (the API server would store the directive as
//!   an empty address), as the kubelet does.
//! - Other lists (images, volumesInUse, ...) have no merge key and are
//!   replaced whole.
//! - `spec` is never sent; nothing unchanged is sent.
//!
//! The server's side of the same rules, for the tests, is the test kit's
//! `nodestatus_tests::patch::apply`.

use std::collections::HashMap;

use serde_json::{Map, Value, json};

use super::conditions::{conditions_by_type, conditions_of};
use super::{Change, Diff, FieldPath};

/// The patch from `old` to `new`, or `None` when nothing differs.
pub fn two_way(old: &Value, new: &Value) -> Option<Value> {
    Diff::new(old, new).patch()
}

/// Whether the status changed in a way the kubelet reports at once; see
/// [`Diff::status_changed`].
pub fn changed(old: &Value, new: &Value) -> bool {
    Diff::new(old, new).status_changed()
}

impl Diff<'_> {
    /// The strategic merge patch from the old node to the new one, or
    /// `None` when it would carry nothing.
    pub fn patch(&self) -> Option<Value> {
        let mut meta = Map::new();
        let mut status = Map::new();
        let mut conditions = false;
        for c in &self.changes {
            match &c.path {
                FieldPath::Label(k) => self.meta_key(&mut meta, "labels", k, c),
                FieldPath::Annotation(k) => self.meta_key(&mut meta, "annotations", k, c),
                FieldPath::Capacity(k) => self.status_key(&mut status, "capacity", k, c),
                FieldPath::Allocatable(k) => self.status_key(&mut status, "allocatable", k, c),
                FieldPath::NodeInfo(k) => self.status_key(&mut status, "nodeInfo", k, c),
                FieldPath::Status(k) => status_field(&mut status, k, c),
                FieldPath::Condition(_) => conditions = true,
                FieldPath::Top(_) | FieldPath::Meta(_) | FieldPath::Spec(_) => {}
            }
        }
        if conditions || self.conditions_reordered {
            self.conditions_patch(&mut status);
        }
        let mut patch = Map::new();
        if !meta.is_empty() {
            patch.insert("metadata".into(), Value::Object(meta));
        }
        if !status.is_empty() {
            patch.insert("status".into(), Value::Object(status));
        }
        if patch.is_empty() {
            return None;
        }
        let mut patch = Value::Object(patch);
        sort_keys(&mut patch);
        Some(patch)
    }

    /// One key of `metadata.<map>`. A map of another shape on either side
    /// is diffed whole, as empty where it is not an object.
    fn meta_key(&self, meta: &mut Map<String, Value>, map: &str, key: &str, c: &Change) {
        let (b, a) = (
            self.before.get("metadata").and_then(|m| m.get(map)),
            self.after.get("metadata").and_then(|m| m.get(map)),
        );
        let is_map = |v: Option<&Value>| v.is_none_or(|v| v.is_object() || v.is_null());
        let entry = meta.entry(map).or_insert_with(|| json!({}));
        if !(is_map(b) && is_map(a)) {
            *entry = diff_object(b, a).unwrap_or_else(|| json!({}));
            return;
        }
        entry
            .as_object_mut()
            .expect("made an object")
            .insert(key.to_owned(), merge_value(c.before, c.after));
    }

    /// One key of `status.<map>`: the key's change when the map is an
    /// object on both sides, else the whole new map (`null` when gone).
    fn status_key(&self, status: &mut Map<String, Value>, map: &str, key: &str, c: &Change) {
        let (b, a) = (
            status_of(self.before).and_then(|s| s.get(map)),
            status_of(self.after).and_then(|s| s.get(map)),
        );
        match (b, a) {
            (Some(b), Some(a)) if b.is_object() && a.is_object() => {
                status
                    .entry(map)
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .expect("made an object")
                    .insert(key.to_owned(), merge_value(c.before, c.after));
            }
            (_, a) => {
                status.insert(map.to_owned(), a.cloned().unwrap_or(Value::Null));
            }
        }
    }

    /// The conditions' part of the patch: the changed entries in the new
    /// order, deletions, and the new order of the types.
    fn conditions_patch(&self, out: &mut Map<String, Value>) {
        let changed: HashMap<&str, &Change> = self
            .changes
            .iter()
            .filter_map(|c| match &c.path {
                FieldPath::Condition(t) => Some((t.as_str(), c)),
                _ => None,
            })
            .collect();
        let (oc, nc) = (
            conditions_by_type(conditions_of(self.before)),
            conditions_by_type(conditions_of(self.after)),
        );
        let mut entries = Vec::new();
        for (t, n) in &nc {
            match changed.get(t).map(|c| c.before) {
                None => {}
                Some(Some(o)) if o == *n => {}
                Some(Some(o)) => {
                    let mut d = match diff_object(Some(o), Some(n)) {
                        Some(Value::Object(m)) => m,
                        _ => Map::new(),
                    };
                    d.insert("type".into(), Value::String((*t).to_owned()));
                    entries.push(Value::Object(d));
                }
                Some(None) => entries.push((*n).clone()),
            }
        }
        for (t, _) in &oc {
            if changed.get(t).is_some_and(|c| c.after.is_none()) {
                entries.push(json!({"$patch": "delete", "type": t}));
            }
        }
        if entries.is_empty() && !self.conditions_reordered {
            return;
        }
        let order: Vec<Value> = nc.iter().map(|(t, _)| json!({"type": t})).collect();
        out.insert("$setElementOrder/conditions".into(), Value::Array(order));
        if !entries.is_empty() {
            out.insert("conditions".into(), Value::Array(entries));
        }
    }
}

fn status_of(node: &Value) -> Option<&Map<String, Value>> {
    node.get("status").and_then(Value::as_object)
}

/// A whole status field (addresses, images, daemonEndpoints, ...).
fn status_field(status: &mut Map<String, Value>, key: &str, c: &Change) {
    let value = match (key, c.after) {
        // As the kubelet's `preparePatchBytesforNodeStatus`: the replace
        // directive only when the server has addresses to replace. With
        // none there, the server stores the directive as an empty address.
        ("addresses", Some(Value::Array(list)))
            if c.before
                .and_then(Value::as_array)
                .is_some_and(|l| !l.is_empty()) =>
        {
            let mut l = list.clone();
            l.push(json!({"$patch": "replace"}));
            Value::Array(l)
        }
        _ => merge_value(c.before, c.after),
    };
    status.insert(key.to_owned(), value);
}

/// What a merge patch sends for one changed value: `null` when removed, the
/// changed keys when both sides are objects, else the new value.
fn merge_value(before: Option<&Value>, after: Option<&Value>) -> Value {
    match (before, after) {
        (_, None) => Value::Null,
        (Some(b), Some(a)) if b.is_object() && a.is_object() => {
            diff_object(Some(b), Some(a)).unwrap_or_else(|| json!({}))
        }
        (_, Some(a)) => a.clone(),
    }
}

/// Puts `status.addresses` in the order the API server stores them: entries
/// grouped by `type`, the groups in the order of each type's first entry,
/// entries of one type in their own order. The server's strategic merge
/// sorts a merged list stably by the position of the first entry with the
/// same merge key (`normalizeSliceOrder` in apimachinery), and `type` is not
/// unique among addresses: `[InternalIP a, Hostname h, InternalIP b]` is
/// stored as `[InternalIP a, InternalIP b, Hostname h]`. The pipeline's node
/// out is in this order, so that what it sends is what the server keeps and
/// the next pass sees no change.
pub fn server_address_order(node: &mut Value) {
    let Some(list) = node
        .pointer_mut("/status/addresses")
        .and_then(Value::as_array_mut)
    else {
        return;
    };
    let key = |v: &Value| v.get("type").and_then(Value::as_str).map(str::to_owned);
    let mut first: Vec<Option<String>> = Vec::new();
    for a in list.iter() {
        let k = key(a);
        if !first.contains(&k) {
            first.push(k);
        }
    }
    list.sort_by_key(|a| {
        let k = key(a);
        first.iter().position(|f| *f == k)
    });
}

/// Sorts object keys, as Go's encoding/json writes maps, so patch bodies are
/// byte-for-byte what the kubelet would send. List order is kept.
fn sort_keys(v: &mut Value) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(String, Value)> = std::mem::take(m).into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            for (k, mut x) in entries {
                sort_keys(&mut x);
                m.insert(k, x);
            }
        }
        Value::Array(l) => l.iter_mut().for_each(sort_keys),
        _ => {}
    }
}

fn obj(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

/// A recursive merge diff of two objects: changed keys carry the new value
/// (nested objects diffed again), removed keys are `null`.
fn diff_object(old: Option<&Value>, new: Option<&Value>) -> Option<Value> {
    let empty = Map::new();
    let (o, n) = (obj(old).unwrap_or(&empty), obj(new).unwrap_or(&empty));
    let mut out = Map::new();
    for (k, nv) in n {
        match o.get(k) {
            Some(ov) if ov == nv => {}
            Some(ov) if ov.is_object() && nv.is_object() => {
                if let Some(d) = diff_object(Some(ov), Some(nv)) {
                    out.insert(k.clone(), d);
                }
            }
            _ => {
                out.insert(k.clone(), nv.clone());
            }
        }
    }
    for k in o.keys() {
        if !n.contains_key(k) {
            out.insert(k.clone(), Value::Null);
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by `patch_props` against the real API server.
    #[test]
    fn addresses_are_grouped_by_type_as_the_server_stores_them() {
        let mut n = json!({"status": {"addresses": [
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "Hostname", "address": "node"},
            {"type": "InternalDNS", "address": "node.example.com"},
            {"type": "InternalIP", "address": "10.0.0.2"}
        ]}});
        server_address_order(&mut n);
        let order: Vec<&str> = n["status"]["addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["address"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["10.0.0.1", "10.0.0.2", "node", "node.example.com"]);
        let mut none = json!({"status": {}});
        server_address_order(&mut none);
        assert_eq!(none, json!({"status": {}}));
    }
}
