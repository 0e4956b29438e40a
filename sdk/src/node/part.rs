//! What a setter wrote during one call, and the part made of it: each
//! written field with the value it holds at the end (see the module docs of
//! [`node`](super)).
//!
//! Only the names of the written fields are recorded; their values are read
//! from the node when the part is made, so the last write of a field wins
//! and the part never disagrees with what the setter reads back.

use serde_json::{Map, Value};

use super::Node;

/// The keyed sections of `status`: each of their keys (each condition, by
/// its type) is a field of its own.
pub(super) const KEYED: [&str; 4] = ["capacity", "allocatable", "nodeInfo", "conditions"];

/// Names in the order first written, each once.
#[derive(Default)]
struct Keys(Vec<String>);

impl Keys {
    fn insert(&mut self, key: &str) {
        if !self.0.iter().any(|k| k == key) {
            self.0.push(key.to_owned());
        }
    }
}

/// The fields a setter wrote.
#[derive(Default)]
pub(super) struct Written {
    labels: Keys,
    annotations: Keys,
    capacity: Keys,
    allocatable: Keys,
    node_info: Keys,
    /// Condition types.
    conditions: Keys,
    /// The other keys of `status`, each a field as a whole.
    status: Keys,
    /// The keyed sections written whole by a raw access, with the keys each
    /// held at the first such access.
    claimed: Vec<(String, Vec<String>)>,
}

impl Written {
    fn keys_mut(&mut self, map: &str) -> &mut Keys {
        match map {
            "labels" => &mut self.labels,
            "annotations" => &mut self.annotations,
            "capacity" => &mut self.capacity,
            "allocatable" => &mut self.allocatable,
            "nodeInfo" => &mut self.node_info,
            "conditions" => &mut self.conditions,
            other => unreachable!("{other} is not a keyed section"),
        }
    }

    /// Records a write of one key of a keyed map (`labels`, `annotations`,
    /// a keyed section of `status`), or of one condition by its type.
    pub(super) fn key(&mut self, map: &str, key: &str) {
        self.keys_mut(map).insert(key);
    }

    /// Records a write of a non-keyed `status` key, whole.
    pub(super) fn status_key(&mut self, key: &str) {
        self.status.insert(key);
    }

    pub(super) fn is_claimed(&self, section: &str) -> bool {
        self.claimed.iter().any(|(s, _)| s == section)
    }

    /// Records a raw write of a whole keyed section that held `before`.
    pub(super) fn claim(&mut self, section: &str, before: Vec<String>) {
        self.claimed.push((section.to_owned(), before));
    }

    fn claimed_before(&self, section: &str) -> Option<&[String]> {
        self.claimed
            .iter()
            .find(|(s, _)| s == section)
            .map(|(_, before)| before.as_slice())
    }
}

/// The type of a condition entry.
fn type_of(c: &Value) -> Option<&str> {
    c.get("type").and_then(Value::as_str)
}

impl Node {
    /// The keys a keyed section of `status` holds now (for `conditions`,
    /// the types).
    pub(super) fn section_keys(&self, section: &str) -> Vec<String> {
        match self.status(section) {
            Some(Value::Object(m)) => m.keys().cloned().collect(),
            Some(Value::Array(l)) if section == "conditions" => {
                l.iter().filter_map(type_of).map(str::to_owned).collect()
            }
            _ => Vec::new(),
        }
    }

    /// The setter's part: a JSON object with the shape of a Node that holds
    /// every field written through this `Node` since it was parsed, with the
    /// value it holds now (see the module docs); `{}` when none was.
    /// Removed keys are `null`, removed conditions
    /// `{"type": T, "$patch": "delete"}`; conditions come once per type, in
    /// the order first written. It holds no `kind`, `apiVersion` or name, and
    /// no empty section.
    pub fn part(&self) -> Value {
        let w = &self.written;
        let mut metadata = Map::new();
        // A section is read (parsed, when nothing read it yet) only when
        // the setter wrote in it.
        for (name, keys) in [("labels", &w.labels), ("annotations", &w.annotations)] {
            if keys.0.is_empty() {
                continue;
            }
            let current = self.string_map("metadata", name);
            insert_keyed(
                &mut metadata,
                name,
                keys.0.iter().map(String::as_str),
                current,
            );
        }
        let mut status = Map::new();
        self.conditions_part(&mut status);
        for (name, keys) in [
            ("capacity", &w.capacity),
            ("allocatable", &w.allocatable),
            ("nodeInfo", &w.node_info),
        ] {
            let claimed = w.claimed_before(name);
            if keys.0.is_empty() && claimed.is_none() {
                continue;
            }
            let current = self.string_map("status", name);
            let mut all: Vec<&str> = keys.0.iter().map(String::as_str).collect();
            if let Some(before) = claimed {
                all.extend(
                    current
                        .into_iter()
                        .flat_map(|m| m.keys().map(String::as_str)),
                );
                all.extend(before.iter().map(String::as_str));
            }
            insert_keyed(&mut status, name, all.into_iter(), current);
        }
        for key in &w.status.0 {
            let value = self.status(key).cloned().unwrap_or(Value::Null);
            status.insert(key.clone(), value);
        }
        let mut part = Map::new();
        if !metadata.is_empty() {
            part.insert("metadata".to_owned(), Value::Object(metadata));
        }
        if !status.is_empty() {
            part.insert("status".to_owned(), Value::Object(status));
        }
        Value::Object(part)
    }

    /// [`Node::part`] as JSON text: what the setter returns to the host.
    pub fn part_json(&self) -> String {
        serde_json::to_string(&self.part()).expect("a Value serializes")
    }

    fn conditions_part(&self, status: &mut Map<String, Value>) {
        let w = &self.written;
        if w.conditions.0.is_empty() && !w.is_claimed("conditions") {
            return;
        }
        let current: &[Value] = self
            .status("conditions")
            .and_then(Value::as_array)
            .map_or(&[], Vec::as_slice);
        let mut types: Vec<&str> = w.conditions.0.iter().map(String::as_str).collect();
        if let Some(before) = w.claimed_before("conditions") {
            types.extend(current.iter().filter_map(type_of));
            types.extend(before.iter().map(String::as_str));
        }
        let mut list: Vec<Value> = Vec::with_capacity(types.len());
        for t in types {
            if list.iter().any(|c| type_of(c) == Some(t)) {
                continue;
            }
            let entry = current.iter().find(|c| type_of(c) == Some(t));
            list.push(match entry {
                Some(c) => c.clone(),
                None => serde_json::json!({"type": t, "$patch": "delete"}),
            });
        }
        if !list.is_empty() {
            status.insert("conditions".to_owned(), Value::Array(list));
        }
    }
}

/// Inserts `section` into `out` with each of `keys` (once) and its value in
/// `current`, `null` where it has none; nothing when there is no key.
fn insert_keyed<'a>(
    out: &mut Map<String, Value>,
    section: &str,
    keys: impl Iterator<Item = &'a str>,
    current: Option<&Map<String, Value>>,
) {
    let mut map = Map::new();
    for k in keys {
        if !map.contains_key(k) {
            let value = current.and_then(|m| m.get(k)).cloned();
            map.insert(k.to_owned(), value.unwrap_or(Value::Null));
        }
    }
    if !map.is_empty() {
        out.insert(section.to_owned(), Value::Object(map));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConditionStatus, Quantity};
    use serde_json::json;

    fn node() -> Node {
        Node::parse(
            &json!({
                "apiVersion": "v1", "kind": "Node",
                "metadata": {"name": "n1", "labels": {"a": "1"}},
                "status": {
                    "capacity": {"cpu": "4", "memory": "8Gi"},
                    "images": [{"names": ["x"], "sizeBytes": 1}],
                    "conditions": [
                        {"type": "MemoryPressure", "status": "False"},
                        {"type": "Ready", "status": "True"}
                    ]
                }
            })
            .to_string(),
        )
        .unwrap()
    }

    #[test]
    fn nothing_written_is_an_empty_part() {
        let mut n = node();
        let _ = (n.label("a"), n.capacity("cpu"), n.condition("Ready"));
        assert_eq!(n.part(), json!({}));
        assert_eq!(n.part_json(), "{}");
        n.set_label("a", "1");
        assert_eq!(n.part(), json!({"metadata": {"labels": {"a": "1"}}}));
    }

    #[test]
    fn reads_see_the_writes_and_the_part_their_last_value() {
        let mut n = node();
        n.set_capacity("cpu", Quantity::units(8));
        assert_eq!(n.capacity("cpu"), Some(Quantity::units(8)));
        n.remove_resource("cpu");
        assert_eq!(n.capacity("cpu"), None);
        n.set_capacity("cpu", Quantity::units(2));
        n.set_condition_at("X", ConditionStatus::True, "R", "", "2026-01-01T00:00:00Z");
        n.remove_condition("X");
        assert!(n.condition("X").is_none());
        assert_eq!(
            n.part(),
            json!({"status": {
                "conditions": [{"type": "X", "$patch": "delete"}],
                "capacity": {"cpu": "2"},
                "allocatable": {"cpu": null}
            }})
        );
    }

    #[test]
    fn a_raw_access_to_a_keyed_section_claims_all_of_it() {
        let mut n = node();
        n.status_mut("capacity", || json!({}))
            .as_object_mut()
            .unwrap()
            .remove("memory");
        n.status_mut("capacity", || json!({}))["pods"] = json!("110");
        assert_eq!(
            n.part(),
            json!({"status": {"capacity": {"cpu": "4", "pods": "110", "memory": null}}})
        );

        let mut n = node();
        n.set_condition_at("Ready", ConditionStatus::False, "R", "m", "t");
        let list = n.status_mut("conditions", || json!([]));
        list.as_array_mut()
            .unwrap()
            .retain(|c| c["type"] != "MemoryPressure");
        let part = n.part();
        let types: Vec<_> = part["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["type"].clone(), c.get("$patch").cloned()))
            .collect();
        assert_eq!(
            types,
            vec![
                (json!("Ready"), None),
                (json!("MemoryPressure"), Some(json!("delete")))
            ]
        );
    }

    #[test]
    fn other_status_keys_are_whole_fields() {
        let mut n = node();
        n.remove_status("images");
        n.set_status(
            "daemonEndpoints",
            json!({"kubeletEndpoint": {"Port": 10250}}),
        );
        n.status_mut("volumesInUse", || json!([]))
            .as_array_mut()
            .unwrap()
            .push(json!("v"));
        n.remove_status("nodeInfo");
        assert_eq!(
            n.part(),
            json!({"status": {
                "images": null,
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "volumesInUse": ["v"]
            }})
        );
        n.remove_status("capacity");
        assert_eq!(
            n.part()["status"]["capacity"],
            json!({"cpu": null, "memory": null})
        );
    }
}
