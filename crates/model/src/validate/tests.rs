//! The validation rules, each against the API server's verdicts.

use super::checker::{prefer_avoid_pods, taints_annotation};
use super::*;
use serde_json::json;

fn rules(node: &Value) -> Vec<Rule> {
    problems(node).into_iter().map(|p| p.rule).collect()
}

fn base() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n", "labels": {"a": "1"}, "annotations": {"x/y": "z"}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-01-01T00:00:00Z"}],
            "capacity": {"cpu": "2", "pods": "110", "example.com/gpu": "1"},
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [{"names": ["a"], "sizeBytes": 1}],
            "volumesInUse": ["v"],
            "nodeInfo": {"kernelVersion": "6"}
        }
    })
}

#[test]
fn a_good_node_passes() {
    assert_eq!(problems(&base()), vec![]);
    assert!(node(&base()).is_ok());
}

/// The ten outputs of issue 13 that sent a node NotReady against the real
/// API server (the `output` integration tests send each one to it).
#[test]
fn the_ten_refused_outputs_are_caught() {
    /// An edit of a valid node, and the rule it breaks.
    type Case = (fn(&mut Value), Rule);
    let cases: Vec<Case> = vec![
        (
            |n| {
                drop(
                    n["status"]["conditions"][0]
                        .as_object_mut()
                        .unwrap()
                        .remove("type"),
                )
            },
            Rule::ConditionType,
        ),
        (
            |n| n["status"]["addresses"] = json!([{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "InternalIP", "address": "10.0.0.1"}]),
            Rule::DuplicateAddress,
        ),
        (
            |n| n["status"]["capacity"]["cpu"] = json!("-1"),
            Rule::NegativeQuantity,
        ),
        (
            |n| n["status"]["capacity"]["pods"] = json!("1.5"),
            Rule::NonIntegerQuantity,
        ),
        (
            |n| n["metadata"]["annotations"]["big"] = json!("x".repeat(300_000)),
            Rule::AnnotationsTooLarge,
        ),
        (
            |n| n["status"]["volumesInUse"] = json!(vec!["kubernetes.io/csi/x^".repeat(4); 30_000]),
            Rule::TooLarge,
        ),
        (
            |n| n["status"]["conditions"][0]["lastHeartbeatTime"] = json!("2016-12-31T23:59:60Z"),
            Rule::Time,
        ),
        (
            |n| n["status"]["daemonEndpoints"]["kubeletEndpoint"]["Port"] = json!("10250"),
            Rule::Type,
        ),
        (
            |n| n["metadata"]["annotations"][PREFER_AVOID_PODS_ANNOTATION] = json!("{not json"),
            Rule::PreferAvoidPods,
        ),
        (
            |n| n["status"]["addresses"][0]["type"] = json!(7),
            Rule::Type,
        ),
    ];
    for (i, (f, rule)) in cases.into_iter().enumerate() {
        let mut n = base();
        f(&mut n);
        let r = rules(&n);
        assert!(r.contains(&rule), "case {i}: {r:?}");
        assert!(node(&n).is_err(), "case {i}");
        assert!(update(&base(), &n).is_err(), "case {i}");
    }
}

#[test]
fn the_error_names_the_problems() {
    let mut n = base();
    n["status"]["capacity"]["cpu"] = json!("-1");
    let e = Error::Refused(update(&base(), &n).unwrap_err());
    assert!(e.to_string().contains("status.capacity[cpu]"), "{e}");
}

#[test]
fn own_rules_are_not_the_api_servers() {
    let mut n = base();
    n["status"]["conditions"] = json!([{"type": "Ready", "status": "Maybe"}, {"type": "Ready", "status": "True"}, {"type": "", "status": "True"}]);
    let mut r = rules(&n);
    r.sort();
    assert_eq!(
        r,
        vec![
            Rule::EmptyConditionType,
            Rule::DuplicateCondition,
            Rule::ConditionStatus
        ]
    );
    assert!(node(&n).is_ok());
}

#[test]
fn only_new_problems_block_an_update() {
    let mut old = base();
    old["metadata"]["labels"]["bad key"] = json!("v");
    let mut new = old.clone();
    new["status"]["capacity"]["memory"] = json!("1Gi");
    assert!(node(&new).is_err());
    assert!(update(&old, &new).is_ok());
    new["status"]["capacity"]["memory"] = json!("1Gii");
    let e = update(&old, &new).unwrap_err();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0].path, "status.capacity[memory]");
}

#[test]
fn integer_resources_follow_apimachinery() {
    assert!(is_integer_resource("pods"));
    assert!(is_integer_resource("example.com/gpu"));
    assert!(!is_integer_resource("cpu"));
    assert!(!is_integer_resource("hugepages-2Mi"));
    assert!(!is_integer_resource("kubernetes.io/foo"));
    // Numbers are quantities too, as Go parses the raw JSON.
    let mut n = base();
    n["status"]["capacity"]["pods"] = json!(110);
    n["status"]["allocatable"] = json!({"cpu": 1.5, "pods": 2.5});
    assert_eq!(rules(&n), vec![Rule::NonIntegerQuantity]);
}

#[test]
fn annotation_keys_are_checked_lowercased() {
    // Annotation keys are checked lowercased.
    let mut n = base();
    n["metadata"]["annotations"] = json!({"Example.COM/Key": "v"});
    assert!(node(&n).is_ok());
}

#[test]
fn scheduler_annotations_are_parsed() {
    assert!(prefer_avoid_pods(r#"{"preferAvoidPods":[{"podSignature":{"podController":{"apiVersion":"v1","kind":"ReplicationController","name":"foo","uid":"abc","controller":true}},"reason":"r"}]}"#).is_ok());
    assert!(prefer_avoid_pods("{}").is_ok());
    assert!(prefer_avoid_pods(r#"{"preferAvoidPods":[{"podSignature":{}}]}"#).is_err());
    assert!(prefer_avoid_pods("[1]").is_err());
    assert!(taints_annotation(r#"[{"key":"a","value":"b","effect":"NoSchedule"}]"#).is_ok());
    assert!(
        taints_annotation(
            r#"[{"key":"a","effect":"NoSchedule"},{"key":"a","effect":"NoSchedule"}]"#
        )
        .is_err()
    );
    assert!(taints_annotation(r#"[{"key":"a","effect":"Sometimes"}]"#).is_err());
}

#[test]
fn problems_are_bounded() {
    let mut n = base();
    n["status"]["conditions"] =
        Value::Array((0..20_000).map(|_| json!({"status": "True"})).collect());
    assert_eq!(problems(&n).len(), MAX_PROBLEMS);
    assert!(describe(&problems(&n)).ends_with(&format!("and {} more", MAX_PROBLEMS - 5)));
}

/// The fields a current kubelet writes: well typed they pass, and each
/// wrong type is one problem at its path, as the API server's decoder
/// refuses it.
#[test]
fn the_current_kubelets_fields_are_typed() {
    let mut good = base();
    good["status"]["runtimeHandlers"] = json!([
        {"name": "", "features": {"recursiveReadOnlyMounts": true, "userNamespaces": false}},
        {"name": "runc"}
    ]);
    good["status"]["features"] = json!({"supplementalGroupsPolicy": true});
    good["status"]["declaredFeatures"] = json!(["ExtendWebSocketsToKubelet"]);
    good["status"]["nodeInfo"]["swap"] = json!({"capacity": 2147483648u64});
    good["status"]["nodeInfo"]["runningInUserNamespace"] = json!(false);
    assert_eq!(problems(&good), vec![]);
    /// An edit of a good node, and the path it breaks.
    type Case = (fn(&mut Value), &'static str);
    let cases: Vec<Case> = vec![
        (
            |n| n["status"]["runtimeHandlers"] = json!({"name": "runc"}),
            "status.runtimeHandlers",
        ),
        (
            |n| n["status"]["runtimeHandlers"][0]["name"] = json!(1),
            "status.runtimeHandlers[0].name",
        ),
        (
            |n| n["status"]["runtimeHandlers"][0]["features"]["userNamespaces"] = json!("yes"),
            "status.runtimeHandlers[0].features.userNamespaces",
        ),
        (
            |n| n["status"]["features"]["supplementalGroupsPolicy"] = json!("true"),
            "status.features.supplementalGroupsPolicy",
        ),
        (
            |n| n["status"]["declaredFeatures"] = json!([1]),
            "status.declaredFeatures[0]",
        ),
        (
            |n| n["status"]["nodeInfo"]["swap"]["capacity"] = json!("2Gi"),
            "status.nodeInfo.swap.capacity",
        ),
        (
            |n| n["status"]["nodeInfo"]["runningInUserNamespace"] = json!(0),
            "status.nodeInfo.runningInUserNamespace",
        ),
    ];
    for (edit, path) in cases {
        let mut n = good.clone();
        edit(&mut n);
        let p = problems(&n);
        assert_eq!(p.len(), 1, "{path}: {p:?}");
        assert_eq!(p[0].path, path);
        assert_eq!(p[0].rule, Rule::Type, "{path}");
    }
}
