//! Conditions: read by their merge key, and their times stamped by the host.

use std::collections::HashMap;
use std::time::SystemTime;

use serde_json::Value;

use super::FieldPath;

/// The conditions of a node by type, in list order. Entries without a string
/// `type` are reported under the type `""`.
pub fn conditions_by_type(v: Option<&Value>) -> Vec<(&str, &Value)> {
    v.and_then(Value::as_array)
        .map(|list| {
            list.iter()
                .map(|c| (c.get("type").and_then(Value::as_str).unwrap_or(""), c))
                .collect()
        })
        .unwrap_or_default()
}

/// The time of a condition, as the API server writes a `metav1.Time`:
/// RFC 3339 in whole seconds, UTC (`2026-01-02T03:04:05Z`).
pub fn condition_time(t: SystemTime) -> String {
    nodestatus_apimachinery::time::rfc3339(t)
}

/// Stamps the times of the conditions a setter wrote, with the kubelet's
/// rules, so that a setter only says type, status, reason and message:
///
/// - `lastHeartbeatTime` is `now`;
/// - `lastTransitionTime` is the previous condition's (the same type in
///   `input`, the setter's input) when the status is unchanged, else `now`
///   (a new condition, or a flip).
///
/// A condition counts as written when the diff names its type in `changed`
/// and the output has it; every entry of that type is stamped, and the
/// host's times win over any the setter wrote. An empty `reason` or
/// `message` is removed, as the API server omits it. Returns whether
/// `output` changed. `now` is read (and formatted) only when the setter wrote a
/// condition.
pub fn stamp_times(
    input: &Value,
    output: &mut Value,
    changed: &[FieldPath],
    now: SystemTime,
) -> bool {
    let types: Vec<&str> = changed
        .iter()
        .filter_map(|p| match p {
            FieldPath::Condition(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    if types.is_empty() {
        return false;
    }
    let now = &condition_time(now);
    let mut previous: HashMap<&str, &Value> = HashMap::with_capacity(types.len());
    for (t, c) in conditions_by_type(conditions_of(input)) {
        if types.contains(&t) {
            previous.entry(t).or_insert(c);
        }
    }
    let Some(list) = output
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut stamped = false;
    for c in list {
        let t = c.get("type").and_then(Value::as_str).unwrap_or("");
        if !types.contains(&t) {
            continue;
        }
        let prev = previous.get(t).copied();
        let transition = match prev {
            Some(p) if p.get("status") == c.get("status") => p
                .get("lastTransitionTime")
                .and_then(Value::as_str)
                .unwrap_or(now)
                .to_owned(),
            _ => now.to_owned(),
        };
        let Some(c) = c.as_object_mut() else {
            continue;
        };
        // As the API server stores it: an empty reason or message is
        // omitted (`omitempty`), so the server's copy compares equal.
        for key in ["reason", "message"] {
            if c.get(key).and_then(Value::as_str) == Some("") {
                c.remove(key);
                stamped = true;
            }
        }
        for (key, value) in [
            ("lastHeartbeatTime", now),
            ("lastTransitionTime", &transition),
        ] {
            if c.get(key).and_then(Value::as_str) != Some(value) {
                c.insert(key.to_owned(), Value::String(value.to_owned()));
                stamped = true;
            }
        }
    }
    stamped
}

/// The node's `status.conditions`, if any.
pub(super) fn conditions_of(node: &Value) -> Option<&Value> {
    node.get("status").and_then(|s| s.get("conditions"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: &str = "2026-01-01T00:00:00Z";
    const NOW: &str = "2026-01-01T00:00:10Z";

    fn now() -> SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_767_225_610)
    }

    fn node(conditions: Value) -> Value {
        json!({"metadata": {"name": "n"}, "status": {"conditions": conditions}})
    }

    fn stamp(input: &Value, output: &mut Value) -> bool {
        let changed = crate::node::Diff::new(input, output).paths();
        stamp_times(input, output, &changed, now())
    }

    #[test]
    fn a_bare_condition_gets_the_kubelets_times() {
        let input = node(json!([
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
            {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
        ]));
        // The setter says type, status, reason and message only.
        let mut output = node(json!([
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory", "message": "m"},
            {"type": "Ready", "status": "False", "reason": "KubeletNotReady", "message": "m"},
            {"type": "GPU", "status": "True", "reason": "Fine", "message": "m"},
        ]));
        assert!(stamp(&input, &mut output));
        let c = &output["status"]["conditions"];
        // Unchanged status: the transition time is kept.
        assert_eq!(c[0]["lastHeartbeatTime"], NOW);
        assert_eq!(c[0]["lastTransitionTime"], T0);
        // A flip and a new condition: now.
        assert_eq!(c[1]["lastHeartbeatTime"], NOW);
        assert_eq!(c[1]["lastTransitionTime"], NOW);
        assert_eq!(c[2]["lastHeartbeatTime"], NOW);
        assert_eq!(c[2]["lastTransitionTime"], NOW);
    }

    #[test]
    fn the_hosts_stamp_wins_and_unwritten_conditions_are_left() {
        let input = node(json!([
            {"type": "A", "status": "True", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
            {"type": "B", "status": "True", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
        ]));
        let mut output = input.clone();
        output["status"]["conditions"][0]["lastHeartbeatTime"] = json!("1999-01-01T00:00:00Z");
        output["status"]["conditions"][0]["lastTransitionTime"] = json!("1999-01-01T00:00:00Z");
        assert!(stamp(&input, &mut output));
        let c = &output["status"]["conditions"];
        assert_eq!(c[0]["lastHeartbeatTime"], NOW);
        assert_eq!(c[0]["lastTransitionTime"], T0);
        // B is not the setter's write: its heartbeat stays.
        assert_eq!(c[1], input["status"]["conditions"][1]);
        // An output already stamped as the host would is left as it is.
        let mut same = output.clone();
        assert!(!stamp_times(
            &input,
            &mut same,
            &[FieldPath::Condition("A".into())],
            now()
        ));
        assert_eq!(same, output);
    }

    #[test]
    fn a_previous_condition_without_a_transition_time_gets_now() {
        let input = node(json!([{"type": "A", "status": "True"}]));
        let mut output = node(json!([{"type": "A", "status": "True", "reason": "R"}]));
        assert!(stamp(&input, &mut output));
        assert_eq!(output["status"]["conditions"][0]["lastTransitionTime"], NOW);
    }

    /// The API server omits an empty `reason` or `message` (`omitempty`), so
    /// a setter that writes `""` must not leave it on the node: the next
    /// pass would see the server's copy without it as a change, and patch
    /// every 10 s instead of every report period.
    #[test]
    fn an_empty_reason_or_message_is_written_as_the_api_server_stores_it() {
        let server = node(json!([
            {"type": "A", "status": "True", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
        ]));
        let mut output =
            node(json!([{"type": "A", "status": "True", "reason": "", "message": ""}]));
        stamp(&server, &mut output);
        assert_eq!(
            output["status"]["conditions"][0],
            json!({"type": "A", "status": "True", "lastHeartbeatTime": NOW, "lastTransitionTime": T0})
        );
        assert!(!crate::node::Diff::new(&server, &output).status_changed());
        // A non-empty one stays.
        let mut output =
            node(json!([{"type": "A", "status": "True", "reason": "R", "message": ""}]));
        stamp(&server, &mut output);
        assert_eq!(output["status"]["conditions"][0]["reason"], "R");
        assert!(output["status"]["conditions"][0].get("message").is_none());
    }

    #[test]
    fn condition_times_are_whole_seconds_in_utc() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(1_767_225_600_999);
        assert_eq!(condition_time(now()), NOW);
        assert_eq!(condition_time(t), "2026-01-01T00:00:00Z");
    }
}
