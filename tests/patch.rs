//! A strategic merge patch applied as the API server applies it to a Node,
//! for the tests of the engine's patch builder (`tests/all/patch_props.rs`).

use serde_json::{Value, json};

/// Applies a patch made by `nodestatus_model::node::patch::two_way` the way
/// the API server applies a strategic merge patch to a Node: the oracle of
/// the patch tests (the engine itself never applies a patch).
pub fn apply(old: &Value, patch: &Value) -> Value {
    let mut out = old.clone();
    if let Some(meta) = patch.get("metadata").and_then(Value::as_object) {
        let target = out
            .as_object_mut()
            .expect("a node is an object")
            .entry("metadata")
            .or_insert_with(|| json!({}));
        merge_object(target, &Value::Object(meta.clone()));
    }
    let Some(status) = patch.get("status").and_then(Value::as_object) else {
        return out;
    };
    let target = out
        .as_object_mut()
        .expect("a node is an object")
        .entry("status")
        .or_insert_with(|| json!({}));
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("made an object");
    for (k, v) in status {
        match k.as_str() {
            "$setElementOrder/conditions" => {}
            "conditions" => {}
            _ if v.is_null() => {
                t.remove(k);
            }
            // The directive is applied only to a list that is there: into a
            // node with no addresses, the server copies it as an entry (and
            // decodes it as an empty address).
            "addresses"
                if t.get(k)
                    .and_then(Value::as_array)
                    .is_some_and(|l| !l.is_empty()) =>
            {
                let list: Vec<Value> = v
                    .as_array()
                    .map(|l| {
                        l.iter()
                            .filter(|e| e.get("$patch").is_none())
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                t.insert(k.clone(), Value::Array(list));
            }
            _ if v.is_object() && t.get(k).is_some_and(Value::is_object) => {
                merge_object(t.get_mut(k).expect("checked"), v);
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    if status.contains_key("conditions") || status.contains_key("$setElementOrder/conditions") {
        let current: Vec<Value> = t
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut merged: Vec<Value> = current;
        for e in status
            .get("conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let ty = e.get("type").and_then(Value::as_str).unwrap_or_default();
            let pos = merged
                .iter()
                .position(|c| c.get("type").and_then(Value::as_str) == Some(ty));
            if e.get("$patch").and_then(Value::as_str) == Some("delete") {
                if let Some(p) = pos {
                    merged.remove(p);
                }
                continue;
            }
            match pos {
                Some(p) => merge_object(&mut merged[p], e),
                None => merged.push(e.clone()),
            }
        }
        if let Some(order) = status
            .get("$setElementOrder/conditions")
            .and_then(Value::as_array)
        {
            let rank = |c: &Value| {
                let ty = c.get("type").and_then(Value::as_str);
                order
                    .iter()
                    .position(|o| o.get("type").and_then(Value::as_str) == ty)
                    .unwrap_or(usize::MAX)
            };
            merged.sort_by_key(rank);
        }
        t.insert("conditions".into(), Value::Array(merged));
    }
    out
}

fn merge_object(target: &mut Value, patch: &Value) {
    if !target.is_object() {
        *target = json!({});
    }
    let t = target.as_object_mut().expect("made an object");
    for (k, v) in patch.as_object().into_iter().flatten() {
        if v.is_null() {
            t.remove(k);
        } else if v.is_object() && t.get(k).is_some_and(Value::is_object) {
            merge_object(t.get_mut(k).expect("checked"), v);
        } else {
            t.insert(k.clone(), v.clone());
        }
    }
}
