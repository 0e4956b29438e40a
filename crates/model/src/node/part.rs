//! A setter's part of the node (WIT `nodestatus:plugin@0.2.1`): the fields
//! it sets, read out of a JSON object with the shape of a Node, compared
//! with the node field by field, and merged into it.
//!
//! A part names its fields as [`FieldPath`] does, the granularity of the
//! policy and the ownership record: each label, annotation, capacity,
//! allocatable and `nodeInfo` key; each condition by its merge key `type`;
//! each other key of `status`, `spec` and `metadata` whole. A `null` (or a
//! condition `{"type": T, "$patch": "delete"}`, as a strategic merge patch
//! says it) removes the field. `kind`, `apiVersion` and `metadata.name` may
//! be present when they are the node's own, and are no fields.

use serde_json::{Map, Value};

use super::FieldPath;

/// Why a part cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The part is not a JSON object.
    #[error("the part is not a JSON object with the shape of a Node")]
    NotAnObject,
    /// A section that holds fields (`metadata`, `metadata.labels`,
    /// `status.capacity`, ...) is not an object.
    #[error("`{section}` in the part is not an object")]
    NotAMap {
        /// The section.
        section: &'static str,
    },
    /// `status.conditions` is not a list.
    #[error("`status.conditions` in the part is not a list")]
    ConditionsNotAList,
    /// A condition is not an object with a string `type`.
    #[error("`status.conditions[{index}]` in the part is not an object with a string `type`")]
    ConditionWithoutType {
        /// Its index in the part's list.
        index: usize,
    },
    /// A condition type is listed twice.
    #[error("the part lists the condition type {type_:?} twice: a part holds one entry per type")]
    DuplicateCondition {
        /// The type.
        type_: String,
    },
    /// A condition carries a `$patch` other than `delete`.
    #[error(
        "the condition {type_:?} in the part carries `$patch: {directive}`: only `delete` is understood"
    )]
    Directive {
        /// The condition type.
        type_: String,
        /// The directive.
        directive: String,
    },
    /// A value of a map of strings (labels, annotations, capacity,
    /// allocatable, `nodeInfo`) is neither a string nor null.
    #[error("{path} in the part is not a string (nor null, to remove it)")]
    NotAString {
        /// The field.
        path: FieldPath,
    },
    /// `kind`, `apiVersion` or `metadata.name` names another object than
    /// the node.
    #[error("the part's {field} is {found}, not the node's {expected}")]
    NotThisNode {
        /// Which of the three.
        field: &'static str,
        /// What the part says, as JSON.
        found: String,
        /// What the node says, as JSON.
        expected: String,
    },
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// One field of a part: its path and its value, `None` to remove it.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The field.
    pub path: FieldPath,
    /// Its value in the part; `None`: removed (`null`, or a condition's
    /// `$patch: delete`).
    pub value: Option<Value>,
}

/// A setter's part of the node, field by field, in the part's order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Part {
    fields: Vec<Field>,
}

/// How a field of a part stands against the node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// The node holds it as the part says.
    Held,
    /// A condition the node holds as the part says but for its times
    /// (which are the host's): only its heartbeat is due, as for every
    /// condition a part names.
    Heartbeat,
    /// The part changes it.
    Changes,
}

impl Part {
    /// Reads `part`, a setter's output, for the node `node`.
    pub fn parse(part: Value, node: &Value) -> Result<Self> {
        let Value::Object(top) = part else {
            return Err(Error::NotAnObject);
        };
        let mut fields = Vec::new();
        for (key, value) in top {
            match key.as_str() {
                "kind" | "apiVersion" => {
                    let field = if key == "kind" { "kind" } else { "apiVersion" };
                    same_as_node(field, value, node.get(&key))?;
                }
                "metadata" => metadata(value, node, &mut fields)?,
                "spec" => each_key(value, "spec", &mut fields, |k, v| {
                    Ok(Field::new(FieldPath::Spec(k), v))
                })?,
                "status" => status(value, &mut fields)?,
                _ => fields.push(Field::new(FieldPath::Top(key), value)),
            }
        }
        Ok(Self { fields })
    }

    /// Its fields, in order.
    pub fn fields(&self) -> &[Field] {
        &self.fields
    }

    /// How many fields it names.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether it names no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Whether it names `path`.
    pub fn names(&self, path: &FieldPath) -> bool {
        self.fields.iter().any(|f| &f.path == path)
    }
}

impl Field {
    fn new(path: FieldPath, value: Value) -> Self {
        Self {
            path,
            value: (!value.is_null()).then_some(value),
        }
    }

    /// How it stands against `node`.
    pub fn standing(&self, node: &Value) -> Standing {
        let held = self.path.get(node);
        match (&self.value, held) {
            (None, None) => Standing::Held,
            (None, Some(_)) | (Some(_), None) => Standing::Changes,
            (Some(v), Some(h)) => match self.path {
                FieldPath::Condition(_) if same_condition(v, h) => Standing::Heartbeat,
                FieldPath::Condition(_) => Standing::Changes,
                _ if v == h => Standing::Held,
                _ => Standing::Changes,
            },
        }
    }
}

/// Whether two conditions say the same but for their times (an empty
/// `reason` or `message` reads as absent, as the API server stores it).
fn same_condition(part: &Value, held: &Value) -> bool {
    let (Some(p), Some(h)) = (part.as_object(), held.as_object()) else {
        return part == held;
    };
    let meaningful = |m: &'_ Map<String, Value>, k: &str| {
        let time = matches!(k, "lastHeartbeatTime" | "lastTransitionTime");
        let empty =
            matches!(k, "reason" | "message") && m.get(k).and_then(Value::as_str) == Some("");
        !time && !empty
    };
    let count = |m: &Map<String, Value>| m.keys().filter(|k| meaningful(m, k)).count();
    count(p) == count(h)
        && p.iter()
            .filter(|(k, _)| meaningful(p, k))
            .all(|(k, v)| h.get(k) == Some(v))
}

fn same_as_node(field: &'static str, found: Value, expected: Option<&Value>) -> Result<()> {
    match expected {
        Some(e) if *e == found => Ok(()),
        None if field == "kind" && found == "Node" => Ok(()),
        None if field == "apiVersion" && found == "v1" => Ok(()),
        _ => Err(Error::NotThisNode {
            field,
            found: found.to_string(),
            expected: expected.unwrap_or(&Value::Null).to_string(),
        }),
    }
}

/// Hands each key of the section `value` (an object, or null for none) to
/// `field`.
fn each_key(
    value: Value,
    section: &'static str,
    fields: &mut Vec<Field>,
    mut field: impl FnMut(String, Value) -> Result<Field>,
) -> Result<()> {
    match value {
        Value::Null => Ok(()),
        Value::Object(m) => {
            for (k, v) in m {
                fields.push(field(k, v)?);
            }
            Ok(())
        }
        _ => Err(Error::NotAMap { section }),
    }
}

/// A map of strings: each key a field, each value a string or null.
fn strings(
    value: Value,
    section: &'static str,
    fields: &mut Vec<Field>,
    make: fn(String) -> FieldPath,
) -> Result<()> {
    each_key(value, section, fields, |k, v| {
        let path = make(k);
        if v.is_string() || v.is_null() {
            Ok(Field::new(path, v))
        } else {
            Err(Error::NotAString { path })
        }
    })
}

fn metadata(value: Value, node: &Value, fields: &mut Vec<Field>) -> Result<()> {
    let Value::Object(m) = value else {
        return if value.is_null() {
            Ok(())
        } else {
            Err(Error::NotAMap {
                section: "metadata",
            })
        };
    };
    for (k, v) in m {
        match k.as_str() {
            "name" => same_as_node("metadata.name", v, node.pointer("/metadata/name"))?,
            "labels" => strings(v, "metadata.labels", fields, FieldPath::Label)?,
            "annotations" => strings(v, "metadata.annotations", fields, FieldPath::Annotation)?,
            _ => fields.push(Field::new(FieldPath::Meta(k), v)),
        }
    }
    Ok(())
}

fn status(value: Value, fields: &mut Vec<Field>) -> Result<()> {
    let Value::Object(m) = value else {
        return if value.is_null() {
            Ok(())
        } else {
            Err(Error::NotAMap { section: "status" })
        };
    };
    for (k, v) in m {
        match k.as_str() {
            "conditions" => conditions(v, fields)?,
            "capacity" => strings(v, "status.capacity", fields, FieldPath::Capacity)?,
            "allocatable" => strings(v, "status.allocatable", fields, FieldPath::Allocatable)?,
            "nodeInfo" => strings(v, "status.nodeInfo", fields, FieldPath::NodeInfo)?,
            _ => fields.push(Field::new(FieldPath::Status(k), v)),
        }
    }
    Ok(())
}

fn conditions(value: Value, fields: &mut Vec<Field>) -> Result<()> {
    let list = match value {
        Value::Null => return Ok(()),
        Value::Array(list) => list,
        _ => return Err(Error::ConditionsNotAList),
    };
    let first = fields.len();
    for (index, c) in list.into_iter().enumerate() {
        let Value::Object(mut c) = c else {
            return Err(Error::ConditionWithoutType { index });
        };
        let Some(type_) = c.get("type").and_then(Value::as_str).map(str::to_owned) else {
            return Err(Error::ConditionWithoutType { index });
        };
        let path = FieldPath::Condition(type_.clone());
        if fields[first..].iter().any(|f| f.path == path) {
            return Err(Error::DuplicateCondition { type_ });
        }
        let value = match c.remove("$patch") {
            None => Some(Value::Object(c)),
            Some(d) if d == "delete" => None,
            Some(d) => {
                return Err(Error::Directive {
                    type_,
                    directive: d.as_str().map_or_else(|| d.to_string(), str::to_owned),
                });
            }
        };
        fields.push(Field { path, value });
    }
    Ok(())
}

/// Writes `value` at `path` in `node`, making the sections it needs: a
/// condition replaces the first entry of its type (and drops any later
/// one, so one entry stays) or is appended.
pub fn set(node: &mut Value, path: &FieldPath, value: Value) {
    let (keys, key): (&[&str], &str) = match path {
        FieldPath::Top(k) => (&[], k),
        FieldPath::Meta(k) => (&["metadata"], k),
        FieldPath::Label(k) => (&["metadata", "labels"], k),
        FieldPath::Annotation(k) => (&["metadata", "annotations"], k),
        FieldPath::Spec(k) => (&["spec"], k),
        FieldPath::Capacity(k) => (&["status", "capacity"], k),
        FieldPath::Allocatable(k) => (&["status", "allocatable"], k),
        FieldPath::NodeInfo(k) => (&["status", "nodeInfo"], k),
        FieldPath::Status(k) => (&["status"], k),
        FieldPath::Condition(t) => {
            let list = section(node, &["status"])
                .entry("conditions")
                .or_insert_with(|| Value::Array(Vec::new()));
            if !list.is_array() {
                *list = Value::Array(Vec::new());
            }
            let list = list.as_array_mut().expect("made a list");
            let of_type = |c: &Value| c.get("type").and_then(Value::as_str) == Some(t.as_str());
            match list.iter().position(of_type) {
                Some(i) => {
                    list[i] = value;
                    let mut seen = false;
                    list.retain(|c| {
                        let keep = !of_type(c) || !seen;
                        seen |= of_type(c);
                        keep
                    });
                }
                None => list.push(value),
            }
            return;
        }
    };
    section(node, keys).insert(key.to_owned(), value);
}

/// The object at `keys` in `node`, made (over whatever was there) when it
/// is not one.
fn section<'a>(node: &'a mut Value, keys: &[&str]) -> &'a mut Map<String, Value> {
    let mut at = node;
    for k in keys {
        at = object(at)
            .entry(k.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    object(at)
}

fn object(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    v.as_object_mut().expect("made an object")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n1", "labels": {"a": "1"}},
            "status": {
                "capacity": {"cpu": "4"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "ok",
                     "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady",
                     "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"}
                ],
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]
            }
        })
    }

    fn paths(p: &Part) -> Vec<String> {
        p.fields().iter().map(|f| f.path.to_string()).collect()
    }

    #[test]
    fn a_part_names_its_fields_as_policy_and_ownership_do() {
        let part = Part::parse(
            json!({
                "kind": "Node", "apiVersion": "v1",
                "metadata": {"name": "n1", "labels": {"x": "1", "gone": null}, "annotations": {"y": "2"}},
                "spec": {"taints": []},
                "status": {
                    "conditions": [{"type": "GPU", "status": "True"}, {"type": "Old", "$patch": "delete"}],
                    "capacity": {"example.com/gpu": "2"}, "allocatable": {"example.com/gpu": "2"},
                    "nodeInfo": {"kernelVersion": "6.1"}, "addresses": []
                }
            }),
            &node(),
        )
        .unwrap();
        assert_eq!(
            paths(&part),
            [
                "metadata.labels[x]",
                "metadata.labels[gone]",
                "metadata.annotations[y]",
                "spec.taints",
                "status.conditions[GPU]",
                "status.conditions[Old]",
                "status.capacity[example.com/gpu]",
                "status.allocatable[example.com/gpu]",
                "status.nodeInfo.kernelVersion",
                "status.addresses",
            ]
        );
        // null and `$patch: delete` remove; the directive is not kept.
        assert_eq!(part.fields()[1].value, None);
        assert_eq!(part.fields()[5].value, None);
        assert_eq!(
            part.fields()[4].value,
            Some(json!({"type": "GPU", "status": "True"}))
        );
        assert!(Part::parse(json!({}), &node()).unwrap().is_empty());
    }

    #[test]
    fn each_malformed_part_is_refused_saying_why() {
        let refused = |p: Value| Part::parse(p, &node()).unwrap_err();
        assert_eq!(refused(json!([])), Error::NotAnObject);
        assert_eq!(refused(json!("x")), Error::NotAnObject);
        assert_eq!(
            refused(json!({"metadata": {"labels": []}})),
            Error::NotAMap {
                section: "metadata.labels"
            }
        );
        assert_eq!(
            refused(json!({"status": 1})),
            Error::NotAMap { section: "status" }
        );
        assert_eq!(
            refused(json!({"status": {"conditions": {}}})),
            Error::ConditionsNotAList
        );
        assert_eq!(
            refused(json!({"status": {"conditions": [{"status": "True"}]}})),
            Error::ConditionWithoutType { index: 0 }
        );
        assert_eq!(
            refused(json!({"status": {"conditions": [{"type": "A"}, {"type": "A"}]}})),
            Error::DuplicateCondition { type_: "A".into() }
        );
        assert_eq!(
            refused(json!({"status": {"conditions": [{"type": "A", "$patch": "replace"}]}})),
            Error::Directive {
                type_: "A".into(),
                directive: "replace".into()
            }
        );
        assert_eq!(
            refused(json!({"metadata": {"labels": {"x": 1}}})),
            Error::NotAString {
                path: FieldPath::Label("x".into())
            }
        );
        // Another object than this node.
        for p in [
            json!({"kind": "Pod"}),
            json!({"apiVersion": "v2"}),
            json!({"metadata": {"name": "n2"}}),
        ] {
            let e = refused(p);
            assert!(matches!(e, Error::NotThisNode { .. }), "{e}");
            assert!(e.to_string().contains("not the node's"), "{e}");
        }
    }

    #[test]
    fn a_field_stands_against_the_node_as_held_heartbeat_due_or_changed() {
        let n = node();
        let standing = |p: Value| {
            let part = Part::parse(p, &n).unwrap();
            part.fields()
                .iter()
                .map(|f| f.standing(&n))
                .collect::<Vec<_>>()
        };
        use Standing::*;
        assert_eq!(
            standing(json!({"metadata": {"labels": {"a": "1", "b": "2", "c": null}}})),
            [Held, Changes, Held]
        );
        assert_eq!(
            standing(json!({"metadata": {"labels": {"a": null}}})),
            [Changes]
        );
        // A condition compares but for its times; an empty reason or
        // message reads as absent.
        assert_eq!(
            standing(json!({"status": {"conditions": [
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": ""},
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "other"},
                {"type": "New", "status": "True"},
            ]}})),
            [Heartbeat, Changes, Changes]
        );
        // The times the node holds, given back: the times are the host's,
        // so the heartbeat is due all the same (the WIT: heartbeat now).
        let ready = n.pointer("/status/conditions/1").unwrap().clone();
        assert_eq!(
            standing(json!({"status": {"conditions": [ready]}})),
            [Heartbeat]
        );
        assert_eq!(
            standing(
                json!({"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}})
            ),
            [Held]
        );
    }

    #[test]
    fn set_writes_a_field_making_its_sections_and_keeps_one_entry_per_condition_type() {
        let mut n = json!({"metadata": {"name": "n"}, "status": {"conditions": [
            {"type": "A", "status": "False"}, {"type": "B"}, {"type": "A", "status": "Unknown"}
        ]}});
        set(&mut n, &FieldPath::Label("x".into()), json!("1"));
        set(&mut n, &FieldPath::Capacity("cpu".into()), json!("2"));
        set(
            &mut n,
            &FieldPath::Spec("unschedulable".into()),
            json!(true),
        );
        set(
            &mut n,
            &FieldPath::Condition("A".into()),
            json!({"type": "A", "status": "True"}),
        );
        set(
            &mut n,
            &FieldPath::Condition("C".into()),
            json!({"type": "C", "status": "True"}),
        );
        assert_eq!(
            n,
            json!({"metadata": {"name": "n", "labels": {"x": "1"}},
            "spec": {"unschedulable": true},
            "status": {"capacity": {"cpu": "2"}, "conditions": [
                {"type": "A", "status": "True"}, {"type": "B"}, {"type": "C", "status": "True"}
            ]}})
        );
        // A section that is not an object is made one.
        let mut odd = json!({"metadata": {"labels": null}});
        set(&mut odd, &FieldPath::Label("x".into()), json!("1"));
        assert_eq!(odd["metadata"]["labels"], json!({"x": "1"}));
    }

    /// Every part the SDKs' vectors expect is one the host reads.
    #[test]
    fn the_sdks_conformance_parts_are_read_by_the_host() {
        let text = include_str!("../../../../sdk/conformance/part.json");
        let doc: Value = serde_json::from_str(text).unwrap();
        let node = &doc["node"];
        let cases = doc["cases"].as_array().unwrap();
        assert!(cases.len() >= 10);
        for case in cases {
            let part = Part::parse(case["part"].clone(), node)
                .unwrap_or_else(|e| panic!("{}: {e}", case["name"]));
            let top_keys = case["part"].as_object().unwrap().len();
            assert!(part.len() >= top_keys, "{}", case["name"]);
        }
    }
}
