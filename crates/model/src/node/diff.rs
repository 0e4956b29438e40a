//! The one diff of two Nodes. Policy, ownership, the pass report, the status
//! loop's report-on-change rule and the status patch all read it.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value};

use super::FieldPath;
use super::conditions::{conditions_by_type, conditions_of};

/// One changed field: its path and its value on each side (`None` where
/// absent). For a condition the values are the first entry of that type;
/// for a map that is not an object on one side (its shape changed) the path
/// is `<map>[*]` and the values are the maps themselves.
#[derive(Debug, Clone, PartialEq)]
pub struct Change<'a> {
    /// The field.
    pub path: FieldPath,
    /// Its value in the old node.
    pub before: Option<&'a Value>,
    /// Its value in the new node.
    pub after: Option<&'a Value>,
}

/// Every field that differs between two nodes, named by [`FieldPath`].
///
/// The walk compares each section whole before it descends, so an
/// unchanged section costs one equality check. Maps (labels, annotations,
/// capacity, allocatable, nodeInfo, spec, metadata) are compared key by
/// key, conditions by their merge key `type` (in linear time), and every
/// other status field whole. Changes come in the order of the old node's
/// keys, then the new node's added keys.
#[derive(Debug, Clone)]
pub struct Diff<'a> {
    pub(super) before: &'a Value,
    pub(super) after: &'a Value,
    pub(super) changes: Vec<Change<'a>>,
    /// Whether the list of condition types (duplicates included) is in
    /// another order, or of another length: the patch then lists the new
    /// order even when no condition changed.
    pub(super) conditions_reordered: bool,
}

impl<'a> Diff<'a> {
    /// Diffs `before` against `after`.
    pub fn new(before: &'a Value, after: &'a Value) -> Self {
        let mut d = Self {
            before,
            after,
            changes: Vec::new(),
            conditions_reordered: false,
        };
        d.each_changed_key(Some(before), Some(after), |d, key, bv, av| match key {
            "metadata" => d.metadata(bv, av),
            "spec" => d.map(bv, av, FieldPath::Spec),
            "status" => d.status(bv, av),
            _ => d.push(FieldPath::Top(key.to_owned()), bv, av),
        });
        d
    }

    /// The changes, in order.
    pub fn changes(&self) -> &[Change<'a>] {
        &self.changes
    }

    /// Whether nothing differs (a reorder of the conditions alone is no
    /// change of a field).
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The changed fields, in order.
    pub fn paths(&self) -> Vec<FieldPath> {
        self.changes.iter().map(|c| c.path.clone()).collect()
    }

    /// Whether the status changed in a way the kubelet reports at once
    /// (`nodeStatusHasChanged`, plus labels and annotations): any change of
    /// a label, an annotation or a status field other than the conditions,
    /// or of a condition beyond its `lastHeartbeatTime`. A heartbeat-only
    /// change, or a reorder of the conditions, waits for the report period.
    pub fn status_changed(&self) -> bool {
        let mut types: HashSet<&str> = HashSet::new();
        for c in &self.changes {
            match &c.path {
                FieldPath::Condition(t) => {
                    types.insert(t);
                }
                FieldPath::Top(_) | FieldPath::Meta(_) | FieldPath::Spec(_) => {}
                _ => return true,
            }
        }
        if types.is_empty() {
            return false;
        }
        // The entries of each changed type, in order, on each side: a type
        // listed twice compares all its entries.
        let group = |node: &'a Value| {
            let mut m: HashMap<&str, Vec<&Value>> = HashMap::new();
            for (t, c) in conditions_by_type(conditions_of(node)) {
                if types.contains(t) {
                    m.entry(t).or_default().push(c);
                }
            }
            m
        };
        let (b, a) = (group(self.before), group(self.after));
        types.iter().any(|t| {
            let (x, y) = (
                b.get(t).map_or(&[][..], Vec::as_slice),
                a.get(t).map_or(&[][..], Vec::as_slice),
            );
            x.len() != y.len() || x.iter().zip(y).any(|(x, y)| !same_but_heartbeat(x, y))
        })
    }

    fn push(&mut self, path: FieldPath, before: Option<&'a Value>, after: Option<&'a Value>) {
        self.changes.push(Change {
            path,
            before,
            after,
        });
    }

    /// Compares two objects key by key; a side that is not an object (nor
    /// absent, nor null) is a change of the map's shape, named `<map>[*]`.
    fn map(&mut self, b: Option<&'a Value>, a: Option<&'a Value>, make: fn(String) -> FieldPath) {
        let shapeless = |v: Option<&Value>| v.is_some_and(|v| !v.is_object() && !v.is_null());
        if shapeless(b) || shapeless(a) {
            self.push(make("*".to_owned()), b, a);
            return;
        }
        self.each_changed_key(b, a, |d, key, bv, av| d.push(make(key.to_owned()), bv, av));
    }

    /// Hands each key whose value differs between two objects to `each`,
    /// in the order of the old object's keys, then the new one's added
    /// keys. A side that is not an object reads as empty.
    fn each_changed_key(
        &mut self,
        b: Option<&'a Value>,
        a: Option<&'a Value>,
        mut each: impl FnMut(&mut Self, &'a str, Option<&'a Value>, Option<&'a Value>),
    ) {
        let (bm, am) = (as_map(b).unwrap_or(&EMPTY), as_map(a).unwrap_or(&EMPTY));
        for key in union_keys(bm, am) {
            let (bv, av) = (bm.get(key), am.get(key));
            if bv != av {
                each(self, key, bv, av);
            }
        }
    }

    fn metadata(&mut self, b: Option<&'a Value>, a: Option<&'a Value>) {
        self.each_changed_key(b, a, |d, key, bv, av| match key {
            "labels" => d.map(bv, av, FieldPath::Label),
            "annotations" => d.map(bv, av, FieldPath::Annotation),
            _ => d.push(FieldPath::Meta(key.to_owned()), bv, av),
        });
    }

    fn status(&mut self, b: Option<&'a Value>, a: Option<&'a Value>) {
        self.each_changed_key(b, a, |d, key, bv, av| match key {
            "conditions" => d.conditions(bv, av),
            "capacity" => d.map(bv, av, FieldPath::Capacity),
            "allocatable" => d.map(bv, av, FieldPath::Allocatable),
            "nodeInfo" => d.map(bv, av, FieldPath::NodeInfo),
            _ => d.push(FieldPath::Status(key.to_owned()), bv, av),
        });
    }

    /// Compares conditions by their merge key, `type`, in linear time. A
    /// type listed more than once counts as changed unless the very same
    /// entries are in the input, so a plugin cannot slip a second entry of
    /// a type it may not touch past the policy (the API server would keep
    /// one of the two).
    fn conditions(&mut self, b: Option<&'a Value>, a: Option<&'a Value>) {
        type Groups<'v> = (Vec<&'v str>, HashMap<&'v str, Vec<&'v Value>>);
        fn by_type<'v>(list: &[(&'v str, &'v Value)]) -> Groups<'v> {
            let mut order = Vec::with_capacity(list.len());
            let mut map: HashMap<&str, Vec<&Value>> = HashMap::with_capacity(list.len());
            for &(t, c) in list {
                let e = map.entry(t).or_default();
                if e.is_empty() {
                    order.push(t);
                }
                e.push(c);
            }
            (order, map)
        }
        let (bl, al) = (conditions_by_type(b), conditions_by_type(a));
        self.conditions_reordered =
            bl.len() != al.len() || bl.iter().zip(&al).any(|(x, y)| x.0 != y.0);
        let ((bo, bm), (ao, am)) = (by_type(&bl), by_type(&al));
        let mut seen = HashSet::with_capacity(bo.len() + ao.len());
        for t in bo.into_iter().chain(ao) {
            let (bv, av) = (bm.get(t), am.get(t));
            if seen.insert(t) && bv != av {
                self.push(
                    FieldPath::Condition(t.to_owned()),
                    bv.map(|v| v[0]),
                    av.map(|v| v[0]),
                );
            }
        }
    }
}

/// Whether two conditions are equal but for `lastHeartbeatTime`.
fn same_but_heartbeat(x: &Value, y: &Value) -> bool {
    const HB: &str = "lastHeartbeatTime";
    match (x.as_object(), y.as_object()) {
        (Some(x), Some(y)) => {
            let len = |m: &Map<String, Value>| m.len() - usize::from(m.contains_key(HB));
            len(x) == len(y) && x.iter().all(|(k, v)| k == HB || y.get(k) == Some(v))
        }
        _ => x == y,
    }
}

/// The empty map that an absent one reads as.
static EMPTY: std::sync::LazyLock<Map<String, Value>> = std::sync::LazyLock::new(Map::new);

fn union_keys<'k>(b: &'k Map<String, Value>, a: &'k Map<String, Value>) -> Vec<&'k str> {
    let mut keys: Vec<&str> = b.keys().map(String::as_str).collect();
    keys.extend(a.keys().map(String::as_str).filter(|k| !b.contains_key(*k)));
    keys
}

fn as_map(v: Option<&Value>) -> Option<&Map<String, Value>> {
    v.and_then(Value::as_object)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "uid": "u", "labels": {"a": "1"}, "annotations": {}},
            "spec": {},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "capacity": {"cpu": "2"},
                "nodeInfo": {"kernelVersion": "6"}
            }
        })
    }

    fn paths(before: &Value, after: &Value) -> Vec<FieldPath> {
        Diff::new(before, after).paths()
    }

    #[test]
    fn diff_names_each_field() {
        let before = node();
        let mut after = node();
        after["metadata"]["labels"]["b"] = json!("2");
        after["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        after["status"]["conditions"][0]["status"] = json!("False");
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "X", "status": "True"}));
        after["status"]["capacity"]["memory"] = json!("1Ki");
        after["status"]["addresses"] = json!([]);
        after["spec"]["taints"] = json!([]);
        after["metadata"]["uid"] = json!("v");
        let d = Diff::new(&before, &after);
        let mut p = d.paths();
        p.sort();
        let text: Vec<String> = p.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            vec![
                "metadata.uid",
                "metadata.labels[a]",
                "metadata.labels[b]",
                "spec.taints",
                "status.conditions[Ready]",
                "status.conditions[X]",
                "status.capacity[memory]",
                "status.addresses",
            ]
        );
        let ready = d
            .changes()
            .iter()
            .find(|c| c.path == FieldPath::Condition("Ready".into()))
            .unwrap();
        assert_eq!(ready.before.unwrap()["status"], "True");
        assert_eq!(ready.after.unwrap()["status"], "False");
        assert!(Diff::new(&before, &before).is_empty());
    }

    #[test]
    fn a_map_of_another_shape_is_one_change_of_the_whole_map() {
        let before = node();
        let mut after = node();
        after["metadata"]["labels"] = json!("x");
        assert_eq!(paths(&before, &after), vec![FieldPath::Label("*".into())]);
        // Absent and null maps are empty maps.
        after["metadata"]["labels"] = Value::Null;
        assert_eq!(paths(&before, &after), vec![FieldPath::Label("a".into())]);
    }

    #[test]
    fn a_second_entry_of_a_type_is_a_change_of_that_type() {
        let before = node();
        let mut after = node();
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(json!({"type": "Ready", "status": "False"}));
        assert_eq!(
            paths(&before, &after),
            vec![FieldPath::Condition("Ready".into())]
        );
        // The same duplicates in input and output are no change.
        assert!(Diff::new(&after, &after.clone()).is_empty());
    }

    #[test]
    fn a_reorder_of_the_conditions_changes_no_field() {
        let mut before = node();
        before["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .insert(0, json!({"type": "X", "status": "True"}));
        let mut after = before.clone();
        after["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .reverse();
        let d = Diff::new(&before, &after);
        assert!(d.is_empty() && d.conditions_reordered);
        assert!(!d.status_changed());
    }

    #[test]
    fn only_a_change_beyond_the_heartbeat_is_reported_at_once() {
        let mut before = node();
        before["status"]["conditions"][0]["lastHeartbeatTime"] = json!("t0");
        let mut after = before.clone();
        after["status"]["conditions"][0]["lastHeartbeatTime"] = json!("t1");
        assert!(!Diff::new(&before, &after).status_changed());
        // Dropping the heartbeat is no report either.
        after["status"]["conditions"][0]
            .as_object_mut()
            .unwrap()
            .remove("lastHeartbeatTime");
        assert!(!Diff::new(&before, &after).status_changed());
        after["status"]["conditions"][0]["reason"] = json!("R");
        assert!(Diff::new(&before, &after).status_changed());
        // A second entry of a type that differs only in its heartbeat is a
        // change: the list is longer.
        let mut twice = before.clone();
        let mut again = twice["status"]["conditions"][0].clone();
        again["lastHeartbeatTime"] = json!("t2");
        twice["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .push(again);
        assert!(Diff::new(&before, &twice).status_changed());
        // Spec and other metadata are not status.
        let mut spec = before.clone();
        spec["spec"]["podCIDR"] = json!("10.0.0.0/24");
        spec["metadata"]["uid"] = json!("other");
        let d = Diff::new(&before, &spec);
        assert!(!d.is_empty() && !d.status_changed());
        let mut label = before.clone();
        label["metadata"]["labels"]["b"] = json!("2");
        assert!(Diff::new(&before, &label).status_changed());
        let mut cap = before.clone();
        cap["status"]["capacity"]["cpu"] = json!("4");
        assert!(Diff::new(&before, &cap).status_changed());
    }

    #[test]
    fn twenty_thousand_conditions_diff_in_linear_time() {
        let before = node();
        let mut after = node();
        let list = after["status"]["conditions"].as_array_mut().unwrap();
        list.extend((0..20_000).map(|i| json!({"type": format!("T{i}"), "status": "True"})));
        let started = std::time::Instant::now();
        let d = Diff::new(&before, &after);
        assert_eq!(d.changes().len(), 20_000);
        assert!(d.patch().is_some());
        // Generous: the quadratic version took about 20 s.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            started.elapsed()
        );
    }
}
