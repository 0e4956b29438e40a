//! Field paths: how policy, ownership and the pass report name one field of
//! a Node.

use std::fmt;

use serde_json::{Map, Value};

use super::Error;
use super::conditions::conditions_by_type;

/// One field of a Node, at the granularity that policy, ownership and
/// patches need: one label, one condition type, one capacity resource, one
/// `nodeInfo` field, or a whole list such as `status.addresses`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FieldPath {
    /// A top-level field other than metadata, spec and status (`kind`).
    Top(String),
    /// `metadata.<key>`, other than labels and annotations.
    Meta(String),
    /// `metadata.labels[<key>]`.
    Label(String),
    /// `metadata.annotations[<key>]`.
    Annotation(String),
    /// `spec.<key>`.
    Spec(String),
    /// `status.conditions[<type>]`.
    Condition(String),
    /// `status.capacity[<resource>]`.
    Capacity(String),
    /// `status.allocatable[<resource>]`.
    Allocatable(String),
    /// `status.nodeInfo.<field>`.
    NodeInfo(String),
    /// `status.<key>`, as a whole (addresses, images, ...).
    Status(String),
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Top(k) => write!(f, "{k}"),
            Self::Meta(k) => write!(f, "metadata.{k}"),
            Self::Label(k) => write!(f, "metadata.labels[{k}]"),
            Self::Annotation(k) => write!(f, "metadata.annotations[{k}]"),
            Self::Spec(k) => write!(f, "spec.{k}"),
            Self::Condition(k) => write!(f, "status.conditions[{k}]"),
            Self::Capacity(k) => write!(f, "status.capacity[{k}]"),
            Self::Allocatable(k) => write!(f, "status.allocatable[{k}]"),
            Self::NodeInfo(k) => write!(f, "status.nodeInfo.{k}"),
            Self::Status(k) => write!(f, "status.{k}"),
        }
    }
}

impl std::str::FromStr for FieldPath {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let keyed = |prefix: &str| {
            s.strip_prefix(prefix)
                .and_then(|r| r.strip_suffix(']'))
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
        };
        let dotted = |prefix: &str| {
            s.strip_prefix(prefix)
                .filter(|k| !k.is_empty() && !k.contains(['.', '[', ']']))
                .map(str::to_owned)
        };
        keyed("metadata.labels[")
            .map(Self::Label)
            .or_else(|| keyed("metadata.annotations[").map(Self::Annotation))
            .or_else(|| keyed("status.conditions[").map(Self::Condition))
            .or_else(|| keyed("status.capacity[").map(Self::Capacity))
            .or_else(|| keyed("status.allocatable[").map(Self::Allocatable))
            .or_else(|| dotted("status.nodeInfo.").map(Self::NodeInfo))
            .or_else(|| dotted("status.").map(Self::Status))
            .or_else(|| dotted("metadata.").map(Self::Meta))
            .or_else(|| dotted("spec.").map(Self::Spec))
            .or_else(|| {
                (!s.is_empty() && !s.contains(['.', '[', ']'])).then(|| Self::Top(s.to_owned()))
            })
            .ok_or_else(|| Error::NotAPath { text: s.to_owned() })
    }
}

impl serde::Serialize for FieldPath {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for FieldPath {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl FieldPath {
    /// The JSON pointer of the object that holds the field and the field's
    /// key in it; `None` for a condition, an entry of a list.
    fn container(&self) -> Option<(&'static str, &str)> {
        Some(match self {
            Self::Label(k) => ("/metadata/labels", k),
            Self::Annotation(k) => ("/metadata/annotations", k),
            Self::Capacity(k) => ("/status/capacity", k),
            Self::Allocatable(k) => ("/status/allocatable", k),
            Self::NodeInfo(k) => ("/status/nodeInfo", k),
            Self::Status(k) => ("/status", k),
            Self::Meta(k) => ("/metadata", k),
            Self::Spec(k) => ("/spec", k),
            Self::Top(k) => ("", k),
            Self::Condition(_) => return None,
        })
    }

    /// The field's value in `node` (the first entry of a condition type);
    /// `None` when absent or null.
    pub fn get<'a>(&self, node: &'a Value) -> Option<&'a Value> {
        match self.container() {
            None => {
                let Self::Condition(t) = self else {
                    unreachable!("only conditions have no container")
                };
                conditions_by_type(node.pointer("/status/conditions"))
                    .into_iter()
                    .find_map(|(k, c)| (k == t).then_some(c))
            }
            Some((ptr, key)) => node
                .pointer(ptr)
                .and_then(Value::as_object)
                .and_then(|m| m.get(key))
                .filter(|v| !v.is_null()),
        }
    }

    /// Whether the field is present (and not null) in `node`.
    pub fn exists_in(&self, node: &Value) -> bool {
        self.get(node).is_some()
    }

    /// Removes the field from `node`; returns whether it was there.
    pub fn remove_from(&self, node: &mut Value) -> bool {
        match self.container() {
            None => {
                let Self::Condition(t) = self else {
                    unreachable!("only conditions have no container")
                };
                let Some(list) = node
                    .pointer_mut("/status/conditions")
                    .and_then(Value::as_array_mut)
                else {
                    return false;
                };
                let before = list.len();
                list.retain(|c| c.get("type").and_then(Value::as_str) != Some(t.as_str()));
                list.len() != before
            }
            Some((ptr, key)) => node
                .pointer_mut(ptr)
                .and_then(Value::as_object_mut)
                .is_some_and(|m: &mut Map<String, Value>| m.remove(key).is_some()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_round_trip() {
        for p in [
            FieldPath::Label("example.com/x".into()),
            FieldPath::Condition("Ready".into()),
            FieldPath::Capacity("nvidia.com/gpu".into()),
            FieldPath::NodeInfo("bootID".into()),
            FieldPath::Status("addresses".into()),
            FieldPath::Meta("name".into()),
            FieldPath::Spec("taints".into()),
            FieldPath::Top("kind".into()),
        ] {
            assert_eq!(p.to_string().parse::<FieldPath>().unwrap(), p);
        }
        assert_eq!(
            "status.conditions[".parse::<FieldPath>(),
            Err(Error::NotAPath {
                text: "status.conditions[".into()
            })
        );
    }

    #[test]
    fn a_path_is_found_and_removed_in_a_node() {
        let mut n = json!({
            "metadata": {"labels": {"a": "1", "n": null}},
            "status": {"conditions": [{"type": "X"}, {"type": "Ready"}], "capacity": {"cpu": "2"}}
        });
        let label = FieldPath::Label("a".into());
        let x = FieldPath::Condition("X".into());
        assert!(label.exists_in(&n) && x.exists_in(&n));
        assert!(
            !FieldPath::Label("n".into()).exists_in(&n),
            "null is absent"
        );
        assert!(FieldPath::Capacity("cpu".into()).exists_in(&n));
        assert!(label.remove_from(&mut n) && !label.remove_from(&mut n));
        assert!(x.remove_from(&mut n) && !x.exists_in(&n));
        assert_eq!(n["status"]["conditions"], json!([{"type": "Ready"}]));
    }
}
