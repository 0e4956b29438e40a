//! The pass's unit tests: built-in steps and parts, without a plugin.

use super::*;
use nodestatus_model::node::kubelet::os_arch_labels;
use serde_json::json;

#[test]
fn kubelet_order_with_ready_last() {
    assert!(default_order("node-address") < default_order("machine-info"));
    assert!(default_order("pid-pressure") < default_order("volumes"));
    assert!(default_order("volumes") < default_order("gpu"));
    assert!(default_order("gpu") < default_order("ready"));
}

/// Runs one built-in step over `node` as a pass does.
fn builtin(
    name: &'static str,
    step: impl Fn(&Value) -> Option<Value> + 'static,
    node: &mut Value,
) -> SetterReport {
    let mut work = Work::new(node);
    let r = work.builtin(Builtin {
        name,
        step: Box::new(step),
    });
    *node = work.current;
    r
}

#[test]
fn a_built_in_step_is_diffed_and_reported_like_a_plugin() {
    let mut node =
        json!({"kind": "Node", "metadata": {"name": "n", "labels": {"kubernetes.io/os": "plan9"}}});
    let r = builtin(OS_ARCH_LABELS, os_arch_labels, &mut node);
    assert_eq!(
        r.outcome.unwrap(),
        vec![
            FieldPath::Label("kubernetes.io/os".into()),
            FieldPath::Label("kubernetes.io/arch".into())
        ]
    );
    assert_eq!(
        node["metadata"]["labels"]["kubernetes.io/os"],
        std::env::consts::OS
    );
    // The steady state changes nothing.
    let again = builtin(OS_ARCH_LABELS, os_arch_labels, &mut node);
    assert_eq!(again.outcome.unwrap(), Vec::<FieldPath>::new());
}

#[test]
fn a_built_in_step_goes_through_the_policy() {
    // A step that writes a label NodeRestriction refuses is refused,
    // and the node is left as it was.
    fn bad(node: &Value) -> Option<Value> {
        let mut n = node.clone();
        n["metadata"]["labels"]["node-role.kubernetes.io/master"] = json!("");
        Some(n)
    }
    let mut node = json!({"kind": "Node", "metadata": {"name": "n", "labels": {}}});
    let before = node.clone();
    let r = builtin("bad", bad, &mut node);
    let e = r.outcome.unwrap_err();
    assert_eq!(e.kind, SetterErrorKind::Policy, "{e}");
    assert_eq!(node, before);
}

mod parts {
    //! A 0.2 setter's part, merged into the node so far ([`work::merge`]).
    use super::super::work::{Merged, merge};
    use super::*;
    use nodestatus_model::node::Part;
    use nodestatus_model::ownership::Ownership;
    use nodestatus_model::policy::Allowance;

    const T0: &str = "2026-01-01T00:00:00Z";

    fn node() -> Value {
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"mine": "1", "shared": "s", "other": "o"}},
            "status": {
                "capacity": {"cpu": "4"}, "allocatable": {"cpu": "4"},
                "conditions": [
                    {"type": "GPU", "status": "True", "reason": "Healthy", "lastHeartbeatTime": T0, "lastTransitionTime": T0},
                    {"type": "Ready", "status": "True", "reason": "KubeletReady", "lastHeartbeatTime": T0, "lastTransitionTime": T0}
                ]
            }
        })
    }

    fn owned() -> Ownership {
        let n = node();
        let mut o = Ownership::default();
        o.set(
            "gpu",
            [
                "metadata.labels[mine]",
                "metadata.labels[shared]",
                "status.conditions[GPU]",
            ]
            .map(|p| p.parse().unwrap()),
        )
        .unwrap();
        o.set("other", ["metadata.labels[shared]".parse().unwrap()])
            .unwrap();
        assert!(n.is_object());
        o
    }

    fn run(part: Value, allowance: &Allowance) -> Result<Merged, SetterError> {
        let n = node();
        let part = Part::parse(part, &n).unwrap();
        let known = validate::problems(&n);
        merge(&n, &owned(), "gpu", part, allowance, || &known)
    }

    fn changed(m: &Merged) -> Vec<String> {
        m.checked
            .as_ref()
            .map(|c| c.changed.iter().map(|p| p.to_string()).collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_steady_state_builds_no_node_and_only_beats_the_conditions_heartbeat() {
        let m = run(
            json!({"metadata": {"labels": {"mine": "1", "shared": "s"}},
                   "status": {"conditions": [{"type": "GPU", "status": "True", "reason": "Healthy", "message": ""}]}}),
            &Allowance::default(),
        )
        .unwrap();
        assert!(m.checked.is_none(), "nothing changed, so no node is built");
        assert_eq!(m.heartbeats, ["GPU"]);
        assert_eq!(m.owned.len(), 3);
    }

    #[test]
    fn a_field_left_out_is_removed_unless_another_plugin_owns_it_too() {
        // The part no longer names `mine` nor `shared`, nor the condition.
        let m = run(
            json!({"metadata": {"labels": {"new": "v"}}}),
            &Allowance::default(),
        )
        .unwrap();
        assert_eq!(
            changed(&m),
            [
                "metadata.labels[new]",
                "metadata.labels[mine]",
                "status.conditions[GPU]"
            ]
        );
        let n = &m.checked.unwrap().node;
        let labels = &n["metadata"]["labels"];
        assert_eq!(labels["new"], "v");
        assert!(labels.get("mine").is_none());
        assert_eq!(labels["shared"], "s", "`other` owns it too");
        assert_eq!(labels["other"], "o", "never the plugin's");
        let types: Vec<_> = n["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["type"].clone())
            .collect();
        assert_eq!(types, [json!("Ready")]);
        assert_eq!(m.owned.len(), 1);
    }

    #[test]
    fn a_changed_condition_gets_the_hosts_times_whatever_the_part_wrote() {
        let m = run(
            json!({"status": {"conditions": [
                {"type": "GPU", "status": "True", "reason": "Degraded", "lastHeartbeatTime": "garbage", "lastTransitionTime": "1999"}
            ]}}),
            &Allowance::default(),
        )
        .unwrap();
        let n = m.checked.unwrap().node;
        let gpu = &n["status"]["conditions"][0];
        assert_eq!(gpu["reason"], "Degraded");
        assert_eq!(gpu["lastTransitionTime"], T0, "the status did not flip");
        assert_ne!(gpu["lastHeartbeatTime"], T0);
        assert_ne!(gpu["lastHeartbeatTime"], "garbage");
        // A flip moves the transition.
        let m = run(
            json!({"status": {"conditions": [{"type": "GPU", "status": "False", "reason": "Lost"}]}}),
            &Allowance::default(),
        )
        .unwrap();
        let gpu = &m.checked.unwrap().node["status"]["conditions"][0];
        assert_ne!(gpu["lastTransitionTime"], T0);
    }

    #[test]
    fn a_part_cannot_name_a_field_outside_its_allowance_even_unchanged() {
        let allow = Allowance::parse(&["metadata.labels[mine]".into()], &[]).unwrap();
        // `shared` holds "s" already: naming it is still refused.
        let e = run(
            json!({"metadata": {"labels": {"mine": "1", "shared": "s"}}}),
            &allow,
        )
        .err()
        .unwrap();
        assert_eq!(e.kind, SetterErrorKind::Policy, "{e}");
        assert!(e.message.contains("metadata.labels[shared]"), "{e}");
        // Nor remove one.
        let e = run(json!({"metadata": {"labels": {"other": null}}}), &allow)
            .err()
            .unwrap();
        assert_eq!(e.kind, SetterErrorKind::Policy, "{e}");
    }

    #[test]
    fn a_part_the_api_server_would_refuse_is_refused_whole() {
        let e = run(
            json!({"metadata": {"labels": {"fine": "yes"}}, "status": {"capacity": {"example.com/gpu": "two"}}}),
            &Allowance::default(),
        )
        .err()
        .unwrap();
        assert_eq!(e.kind, SetterErrorKind::Invalid, "{e}");
    }

    #[test]
    fn a_part_over_the_bound_on_fields_is_refused_before_any_check() {
        let labels: serde_json::Map<String, Value> = (0
            ..=nodestatus_model::ownership::MAX_FIELDS_PER_PLUGIN)
            .map(|i| (format!("l{i}"), json!("v")))
            .collect();
        let e = run(
            json!({"metadata": {"labels": labels}}),
            &Allowance::default(),
        )
        .err()
        .unwrap();
        assert_eq!(e.kind, SetterErrorKind::Limit, "{e}");
    }
}
