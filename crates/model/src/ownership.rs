//! Which plugin owns which fields of the node, recorded on the node itself.
//!
//! Every field a plugin changes becomes its own. The record lives in the
//! annotation [`OWNED_FIELDS_ANNOTATION`] (JSON: plugin name to field paths),
//! so it survives a restart of the engine. When a plugin is no longer loaded
//! (its file was deleted, or the operator disabled it), the fields it owned
//! and no loaded plugin also owns are removed from the node on the next pass:
//! nothing is orphaned, unlike node-problem-detector's conditions.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::node::FieldPath;

/// The annotation that holds the ownership record.
pub const OWNED_FIELDS_ANNOTATION: &str = "nodestatus.io/owned-fields";

/// The most fields one plugin may own. A pass that would give it more is
/// refused before the policy and validation look at it (issue 13: 20,000
/// condition types took 20 s and made a 600 KB record). The busiest shipped
/// setter owns about 40.
pub const MAX_FIELDS_PER_PLUGIN: usize = 512;

/// The largest ownership record, as the annotation's JSON text. It counts
/// against the API server's 256 KiB for all annotations.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;

/// Why a plugin's fields cannot be recorded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The plugin would own more than [`MAX_FIELDS_PER_PLUGIN`] fields.
    #[error(
        "the output changes {fields} fields, over the bound of {MAX_FIELDS_PER_PLUGIN} fields a plugin may own: set fewer labels, conditions or resources, or group them"
    )]
    TooManyFields {
        /// How many it would own.
        fields: usize,
    },
    /// The record would be larger than [`MAX_RECORD_BYTES`].
    #[error(
        "recording the output's fields would make the {OWNED_FIELDS_ANNOTATION} annotation {bytes} bytes, over its bound of {MAX_RECORD_BYTES}: use shorter label, condition or resource names"
    )]
    RecordTooLarge {
        /// The record's size, had it been accepted.
        bytes: usize,
    },
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Plugin name to the fields it owns.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct Ownership(BTreeMap<String, BTreeSet<FieldPath>>);

impl Ownership {
    /// Reads the record from the node's annotation. A missing or unreadable
    /// annotation gives an empty record (logged), never an error: the worst
    /// case is a field that is not cleaned up, never a field wrongly removed.
    pub fn from_node(node: &Value) -> Self {
        let Some(text) = node
            .pointer("/metadata/annotations")
            .and_then(|a| a.get(OWNED_FIELDS_ANNOTATION))
            .and_then(Value::as_str)
        else {
            return Self::default();
        };
        serde_json::from_str(text).unwrap_or_else(|e| {
            tracing::warn!(error = %e, "ignoring unreadable {OWNED_FIELDS_ANNOTATION} annotation");
            Self::default()
        })
    }

    /// The fields `plugin` owns.
    pub fn owned_by(&self, plugin: &str) -> impl Iterator<Item = &FieldPath> {
        self.0.get(plugin).into_iter().flatten()
    }

    /// The plugins in the record.
    pub fn plugins(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Records that `plugin` changed `changed` in a pass whose result is
    /// `node`: fields it set are now its own, fields it removed are not.
    /// Refused, with the record unchanged, when the plugin would own more
    /// than [`MAX_FIELDS_PER_PLUGIN`] fields or the record would outgrow
    /// [`MAX_RECORD_BYTES`].
    pub fn record(&mut self, plugin: &str, changed: &[FieldPath], node: &Value) -> Result<()> {
        if changed.is_empty() {
            return Ok(());
        }
        if changed.len() > MAX_FIELDS_PER_PLUGIN {
            return Err(Error::TooManyFields {
                fields: changed.len(),
            });
        }
        let mut owned = self.0.get(plugin).cloned().unwrap_or_default();
        let present = present(node, changed);
        for (path, here) in changed.iter().zip(present) {
            if here {
                owned.insert(path.clone());
            } else {
                owned.remove(path);
            }
        }
        self.replace(plugin, owned)
    }

    /// Records that `plugin` owns exactly `fields` now (a 0.2 setter's
    /// part: what it sets, and nothing else). Refused, with the record
    /// unchanged, on the bounds of [`Ownership::record`].
    pub fn set(&mut self, plugin: &str, fields: impl IntoIterator<Item = FieldPath>) -> Result<()> {
        let owned: BTreeSet<FieldPath> = fields.into_iter().collect();
        if self.0.get(plugin).map_or(owned.is_empty(), |o| *o == owned) {
            return Ok(());
        }
        self.replace(plugin, owned)
    }

    /// Makes `owned` the fields of `plugin`, within the bounds.
    fn replace(&mut self, plugin: &str, owned: BTreeSet<FieldPath>) -> Result<()> {
        if owned.len() > MAX_FIELDS_PER_PLUGIN {
            return Err(Error::TooManyFields {
                fields: owned.len(),
            });
        }
        let previous = if owned.is_empty() {
            self.0.remove(plugin)
        } else {
            self.0.insert(plugin.to_owned(), owned)
        };
        let bytes = serde_json::to_string(self)
            .expect("ownership serializes")
            .len();
        if bytes > MAX_RECORD_BYTES {
            match previous {
                Some(p) => self.0.insert(plugin.to_owned(), p),
                None => self.0.remove(plugin),
            };
            return Err(Error::RecordTooLarge { bytes });
        }
        Ok(())
    }

    /// Whether a plugin other than `plugin` owns `path`.
    pub fn owned_by_another(&self, plugin: &str, path: &FieldPath) -> bool {
        self.0
            .iter()
            .any(|(p, owned)| p != plugin && owned.contains(path))
    }

    /// Removes from `node` every field owned by a plugin that `is_loaded`
    /// says is gone, unless a loaded plugin owns it too, and forgets those
    /// plugins. Returns what was removed, for the log.
    pub fn release_unloaded(
        &mut self,
        is_loaded: impl Fn(&str) -> bool,
        node: &mut Value,
    ) -> Vec<(String, FieldPath)> {
        let gone: Vec<String> = self.0.keys().filter(|p| !is_loaded(p)).cloned().collect();
        let mut removed = Vec::new();
        for plugin in gone {
            let fields = self.0.remove(&plugin).unwrap_or_default();
            for path in fields {
                let shared = self.0.values().any(|owned| owned.contains(&path));
                if !shared && path.remove_from(node) {
                    removed.push((plugin.clone(), path));
                }
            }
        }
        removed
    }

    /// Writes the record into the node's annotation (removing the annotation
    /// when nothing is owned).
    pub fn write(&self, node: &mut Value) {
        let Some(meta) = node.get_mut("metadata").and_then(Value::as_object_mut) else {
            return;
        };
        if self.0.is_empty() {
            if let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) {
                ann.remove(OWNED_FIELDS_ANNOTATION);
            }
            return;
        }
        let ann = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Map::new()));
        if !ann.is_object() {
            *ann = Value::Object(Map::new());
        }
        let text = serde_json::to_string(self).expect("ownership serializes");
        ann.as_object_mut()
            .expect("made an object above")
            .insert(OWNED_FIELDS_ANNOTATION.to_owned(), Value::String(text));
    }
}

/// Whether each of `paths` is present in `node`, reading the conditions
/// once (so many condition paths cost one pass over the list).
fn present(node: &Value, paths: &[FieldPath]) -> Vec<bool> {
    let types: std::collections::HashSet<&str> =
        if paths.iter().any(|p| matches!(p, FieldPath::Condition(_))) {
            crate::node::conditions_by_type(node.pointer("/status/conditions"))
                .into_iter()
                .map(|(t, _)| t)
                .collect()
        } else {
            Default::default()
        };
    paths
        .iter()
        .map(|p| match p {
            FieldPath::Condition(t) => types.contains(t.as_str()),
            _ => p.exists_in(node),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn record_survives_the_annotation_and_releases_only_what_is_unshared() {
        let mut node = json!({
            "metadata": {"name": "n", "labels": {"a": "1", "b": "2"}},
            "status": {"conditions": [{"type": "X", "status": "True"}, {"type": "Ready", "status": "True"}]}
        });
        let mut own = Ownership::default();
        own.record(
            "p1",
            &[
                FieldPath::Label("a".into()),
                FieldPath::Condition("X".into()),
            ],
            &node,
        )
        .unwrap();
        own.record(
            "p2",
            &[FieldPath::Label("b".into()), FieldPath::Label("a".into())],
            &node,
        )
        .unwrap();
        own.write(&mut node);

        let mut again = Ownership::from_node(&node);
        assert_eq!(again, own);
        let removed = again.release_unloaded(|p| p == "p2", &mut node);
        assert_eq!(
            removed,
            vec![("p1".to_string(), FieldPath::Condition("X".into()))]
        );
        assert_eq!(node["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            node["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}])
        );
        again.write(&mut node);
        assert_eq!(
            Ownership::from_node(&node).plugins().collect::<Vec<_>>(),
            vec!["p2"]
        );
    }

    #[test]
    fn a_removed_field_is_no_longer_owned() {
        let node = json!({"metadata": {"name": "n", "labels": {}}});
        let mut own = Ownership::default();
        own.record("p", &[FieldPath::Label("a".into())], &node)
            .unwrap();
        assert_eq!(own.owned_by("p").count(), 0);
        assert!(
            Ownership::from_node(
                &json!({"metadata": {"annotations": {OWNED_FIELDS_ANNOTATION: "garbage"}}})
            )
            .0
            .is_empty()
        );
    }

    #[test]
    fn the_record_is_bounded_and_unchanged_when_refused() {
        let mut node =
            json!({"metadata": {"name": "n", "labels": {}}, "status": {"conditions": []}});
        let many: Vec<FieldPath> = (0..20_000)
            .map(|i| FieldPath::Condition(format!("T{i}")))
            .collect();
        node["status"]["conditions"] = Value::Array(
            (0..20_000)
                .map(|i| json!({"type": format!("T{i}"), "status": "True"}))
                .collect(),
        );
        let mut own = Ownership::default();
        own.record("small", &many[..3], &node).unwrap();
        let before = own.clone();
        assert_eq!(
            own.record("big", &many, &node),
            Err(Error::TooManyFields { fields: 20_000 })
        );
        assert_eq!(own, before);
        // Under the field bound, over the size bound: long names.
        let long: Vec<FieldPath> = (0..MAX_FIELDS_PER_PLUGIN)
            .map(|i| FieldPath::Label(format!("example.com/{i}-{}", "x".repeat(200))))
            .collect();
        for p in &long {
            let FieldPath::Label(k) = p else {
                unreachable!()
            };
            node["metadata"]["labels"][k] = json!("v");
        }
        let e = own.record("long", &long, &node).unwrap_err();
        assert!(
            matches!(e, Error::RecordTooLarge { bytes } if bytes > MAX_RECORD_BYTES),
            "{e}"
        );
        assert_eq!(own, before);
        own.write(&mut node);
        let text = node["metadata"]["annotations"][OWNED_FIELDS_ANNOTATION]
            .as_str()
            .unwrap();
        assert!(text.len() < 100, "{text}");
    }
}
