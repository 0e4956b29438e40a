//! Generated tests of the hand-written strategic merge patch
//! ([`nodestatus_model::node::patch::two_way`]) against the real API server.
//!
//! Each case is a pair of nodes, old and new, with random labels,
//! annotations, conditions (reordered, added, removed, fields dropped),
//! addresses, capacity, allocatable, nodeInfo, images and volumes. The test
//! writes `old` to the server (a PUT of the status), then, as another agent
//! would between the engine's read and its write, adds a foreign condition,
//! label and annotation. It sends `two_way(old, new)` to `nodes/<name>/status`
//! and checks that the stored node is `new` plus the foreign fields, which
//! are untouched. One node is reused and the cases run in sequence.
//!
//! `NODESTATUS_PROPTEST_CASES` sets the number of cases (default 500, about half a
//! minute); for example `NODESTATUS_PROPTEST_CASES=5000 cargo test --test all
//! patch_props:: -- --nocapture`.

use std::time::Instant;

use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, Patch, PatchParams, PostParams};
use nodestatus_model::node::patch;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

use crate::kube::admin;
use crate::output::{fresh_node, get};

const LABEL_KEYS: &[&str] = &[
    "a",
    "b",
    "example.com/c",
    "kubernetes.io/hostname",
    "node.kubernetes.io/d",
];
const LABEL_VALUES: &[&str] = &["", "x", "y-1", "z.2_w"];
const ANNOTATION_KEYS: &[&str] = &["example.com/one", "two", "example.com/three"];
const CONDITION_TYPES: &[&str] = &[
    "Ready",
    "MemoryPressure",
    "DiskPressure",
    "PIDPressure",
    "NetworkUnavailable",
    "GPUHealthy",
];
const STATUSES: &[&str] = &["True", "False", "Unknown"];
const TIMES: &[&str] = &[
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:00:10Z",
    "2026-03-04T05:06:07Z",
];
const ADDRESSES: &[(&str, &str)] = &[
    ("InternalIP", "10.0.0.1"),
    ("InternalIP", "10.0.0.2"),
    ("ExternalIP", "192.0.2.1"),
    ("Hostname", "node"),
    ("InternalDNS", "node.example.com"),
];
const RESOURCES: &[&str] = &[
    "cpu",
    "memory",
    "pods",
    "ephemeral-storage",
    "hugepages-2Mi",
    "example.com/gpu",
];
/// Canonical quantities (the server writes a quantity back in canonical form).
const QUANTITIES: &[&str] = &["0", "1", "4", "110", "1k", "3Gi", "16Gi"];
const IMAGES: &[&str] = &[
    "registry.example.com/a:1",
    "registry.example.com/b@sha256:00",
    "c:latest",
];
const VOLUMES: &[&str] = &[
    "kubernetes.io/csi/d^v1",
    "kubernetes.io/csi/d^v2",
    "kubernetes.io/csi/d^v3",
];
const NODE_INFO: &[&str] = &[
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "bootID",
];

/// Written by "another agent" between the engine's read and its patch.
const FOREIGN_CONDITION: &str = "ForeignProblem";
const FOREIGN_LABEL: &str = "foreign.example.com/owner";
const FOREIGN_ANNOTATION: &str = "foreign.example.com/note";

fn pick(l: &'static [&'static str]) -> impl Strategy<Value = &'static str> {
    prop::sample::select(l)
}

fn condition() -> impl Strategy<Value = Map<String, Value>> {
    (
        pick(STATUSES),
        prop::option::of("[A-Z][a-z]{1,8}"),
        prop::option::of("[a-z ]{1,20}"),
        pick(TIMES),
        prop::option::of(pick(TIMES)),
    )
        .prop_map(|(status, reason, message, hb, lt)| {
            let mut c = Map::new();
            c.insert("status".into(), json!(status));
            c.insert("lastHeartbeatTime".into(), json!(hb));
            if let Some(r) = reason {
                c.insert("reason".into(), json!(r));
            }
            if let Some(m) = message.filter(|m| !m.trim().is_empty()) {
                c.insert("message".into(), json!(m));
            }
            if let Some(t) = lt {
                c.insert("lastTransitionTime".into(), json!(t));
            }
            c
        })
}

/// Labels, annotations and status of one side of a pair.
fn side() -> impl Strategy<Value = Value> {
    let conditions = prop::sample::subsequence(CONDITION_TYPES, 0..=CONDITION_TYPES.len())
        .prop_shuffle()
        .prop_flat_map(|types| {
            let n = types.len();
            (Just(types), prop::collection::vec(condition(), n))
        })
        .prop_map(|(types, bodies)| {
            types
                .into_iter()
                .zip(bodies)
                .map(|(t, mut c)| {
                    c.insert("type".into(), json!(t));
                    Value::Object(c)
                })
                .collect::<Vec<_>>()
        });
    let addresses = prop::sample::subsequence(ADDRESSES, 0..=ADDRESSES.len())
        .prop_shuffle()
        .prop_map(|l| {
            l.into_iter()
                .map(|(t, a)| json!({"type": t, "address": a}))
                .collect::<Vec<_>>()
        });
    let quantities = || prop::collection::btree_map(pick(RESOURCES), pick(QUANTITIES), 0..4);
    let images = prop::collection::vec(
        (
            prop::sample::subsequence(IMAGES, 1..=2),
            1u64..5_000_000_000,
        ),
        0..3,
    )
    .prop_map(|l| {
        l.into_iter()
            .map(|(names, size)| json!({"names": names, "sizeBytes": size}))
            .collect::<Vec<_>>()
    });
    let node_info = prop::option::of(prop::collection::btree_map(
        pick(NODE_INFO),
        "[a-z0-9.]{1,6}",
        1..4,
    ));
    (
        prop::collection::btree_map(pick(LABEL_KEYS), pick(LABEL_VALUES), 0..4),
        prop::collection::btree_map(pick(ANNOTATION_KEYS), "[ -~]{0,16}", 0..3),
        conditions,
        addresses,
        (quantities(), quantities()),
        images,
        prop::option::of(prop::sample::subsequence(VOLUMES, 0..=VOLUMES.len()).prop_shuffle()),
        node_info,
    )
        .prop_map(
            |(labels, annotations, conditions, addresses, (cap, alloc), images, volumes, info)| {
                let mut status = Map::new();
                let mut put = |k: &str, v: Value, keep: bool| {
                    if keep {
                        status.insert(k.into(), v);
                    }
                };
                put("conditions", json!(conditions), !conditions.is_empty());
                put("addresses", json!(addresses), !addresses.is_empty());
                put("capacity", json!(cap), !cap.is_empty());
                put("allocatable", json!(alloc), !alloc.is_empty());
                put("images", json!(images), !images.is_empty());
                put("volumesInUse", json!(volumes), volumes.is_some());
                put("nodeInfo", json!(info), info.is_some());
                json!({"labels": labels, "annotations": annotations, "status": status})
            },
        )
}

/// `base` with the labels, annotations and status of `side`.
fn with_side(base: &Value, side: &Value) -> Value {
    let mut n = base.clone();
    n["metadata"]["labels"] = side["labels"].clone();
    n["metadata"]["annotations"] = side["annotations"].clone();
    n["status"] = side["status"].clone();
    n
}

/// What a case compares, with the server's defaults folded in: an empty
/// map, list or string is the same as none, and nodeInfo fields the server
/// fills with "" are none.
fn view(n: &Value) -> Value {
    fn fold(v: &Value) -> Option<Value> {
        match v {
            Value::Null => None,
            Value::String(s) if s.is_empty() => None,
            Value::Object(m) => {
                let m: Map<String, Value> = m
                    .iter()
                    .filter_map(|(k, v)| fold(v).map(|v| (k.clone(), v)))
                    .collect();
                (!m.is_empty()).then_some(Value::Object(m))
            }
            Value::Array(l) if l.is_empty() => None,
            Value::Array(l) => Some(Value::Array(
                l.iter().map(|v| fold(v).unwrap_or(Value::Null)).collect(),
            )),
            other => Some(other.clone()),
        }
    }
    let s = &n["status"];
    // Label values may be "": keep labels whole.
    json!({
        "labels": n["metadata"]["labels"].as_object().cloned().unwrap_or_default(),
        "annotations": n["metadata"]["annotations"].as_object().cloned().unwrap_or_default(),
        "conditions": fold(&s["conditions"]),
        "addresses": fold(&s["addresses"]),
        "capacity": fold(&s["capacity"]),
        "allocatable": fold(&s["allocatable"]),
        "images": fold(&s["images"]),
        "volumesInUse": fold(&s["volumesInUse"]),
        "nodeInfo": fold(&s["nodeInfo"]),
    })
}

/// The API server's defaulting of a node status (`SetDefaults_NodeStatus`):
/// no allocatable means allocatable = capacity.
fn server_defaults(mut n: Value) -> Value {
    let s = &mut n["status"];
    if s.get("allocatable").is_none_or(Value::is_null)
        && let Some(cap) = s.get("capacity").filter(|c| !c.is_null()).cloned()
    {
        s["allocatable"] = cap;
    }
    n
}

/// `node` without the foreign writer's fields, which are checked apart.
fn without_foreign(mut n: Value) -> Value {
    if let Some(l) = n["metadata"]["labels"].as_object_mut() {
        l.remove(FOREIGN_LABEL);
    }
    if let Some(a) = n["metadata"]["annotations"].as_object_mut() {
        a.remove(FOREIGN_ANNOTATION);
    }
    if let Some(c) = n["status"]["conditions"].as_array_mut() {
        c.retain(|c| c["type"] != FOREIGN_CONDITION);
    }
    n
}

struct Checker {
    api: Api<Node>,
    name: &'static str,
}

impl Checker {
    /// One case: `old` on the server, a foreign write, then the patch.
    async fn case(&self, old_side: &Value, new_side: &Value) -> Result<(), TestCaseError> {
        let current = get(self.name).await;
        let old = with_side(&current, old_side);
        let node: Node = serde_json::from_value(old).unwrap();
        let stored = self
            .api
            .replace_status(self.name, &PostParams::default(), &node)
            .await
            .map_err(|e| TestCaseError::fail(format!("writing old: {e}")))?;
        let stored = serde_json::to_value(stored).unwrap();
        // The engine read `stored`; it computes `new` from it, and its pass
        // leaves addresses in the order the server stores them.
        let mut new = with_side(&stored, new_side);
        patch::server_address_order(&mut new);

        // Another agent writes between the read and the patch.
        let foreign = json!({
            "metadata": {"labels": {FOREIGN_LABEL: "npd"}, "annotations": {FOREIGN_ANNOTATION: "kept"}},
            "status": {"conditions": [{"type": FOREIGN_CONDITION, "status": "True", "reason": "Foreign", "lastHeartbeatTime": TIMES[0]}]}
        });
        self.api
            .patch_status(
                self.name,
                &PatchParams::default(),
                &Patch::Strategic(&foreign),
            )
            .await
            .map_err(|e| TestCaseError::fail(format!("foreign write: {e}")))?;

        let after = match patch::two_way(&stored, &new) {
            None => get(self.name).await,
            Some(p) => self
                .api
                .patch_status(self.name, &PatchParams::default(), &Patch::Strategic(&p))
                .await
                .map(|n| serde_json::to_value(n).unwrap())
                .map_err(|e| TestCaseError::fail(format!("the API server refused {p}: {e}")))?,
        };

        // The foreign fields are untouched.
        prop_assert_eq!(&after["metadata"]["labels"][FOREIGN_LABEL], "npd");
        prop_assert_eq!(
            &after["metadata"]["annotations"][FOREIGN_ANNOTATION],
            "kept"
        );
        let foreign_cond: Vec<&Value> = after["status"]["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|c| c["type"] == FOREIGN_CONDITION)
            .collect();
        prop_assert_eq!(foreign_cond.len(), 1, "{}", after["status"]["conditions"]);
        prop_assert_eq!(&foreign_cond[0]["reason"], "Foreign");
        // Everything else is the new node, conditions in its order, with the
        // server's defaults.
        prop_assert_eq!(
            view(&without_foreign(after.clone())),
            view(&server_defaults(new))
        );
        Ok(())
    }
}

/// A runtime and a checker on a fresh node `name`.
fn checker(name: &'static str) -> (tokio::runtime::Runtime, Checker) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let checker = rt.block_on(async {
        fresh_node(
            name,
            &json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}),
        )
        .await;
        Checker {
            api: Api::all(admin()),
            name,
        }
    });
    (rt, checker)
}

#[test]
fn the_patch_makes_the_server_hold_the_new_node_and_leaves_foreign_fields() {
    let cases: u32 = std::env::var("NODESTATUS_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(500);
    let (rt, checker) = checker("policy-prop");
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let started = Instant::now();
    let result = runner.run(&(side(), side()), |(old, new)| {
        rt.block_on(checker.case(&old, &new))
    });
    println!(
        "patch property test: {cases} cases against the real API server in {:?}",
        started.elapsed()
    );
    if let Err(e) = result {
        panic!("{e}");
    }
}

/// The first failure the property test found: addresses into a node that
/// had none were stored with an empty address, the `$patch: replace`
/// directive decoded as one.
#[test]
fn regression_addresses_into_a_node_without_any() {
    let (rt, checker) = checker("policy-prop-regress");
    let empty = json!({"labels": {}, "annotations": {}, "status": {}});
    let one = json!({"labels": {}, "annotations": {}, "status": {
        "addresses": [{"type": "InternalDNS", "address": "node.example.com"}]
    }});
    rt.block_on(checker.case(&empty, &one)).unwrap();
    rt.block_on(checker.case(&one, &empty)).unwrap();
}

/// The second: the server groups addresses by type (their merge key), so
/// `[InternalIP, Hostname, InternalDNS, InternalIP]` was stored in another
/// order than the engine's node, and every later pass saw a change.
#[test]
fn regression_addresses_of_one_type_apart() {
    let (rt, checker) = checker("policy-prop-regress2");
    let one = json!({"labels": {}, "annotations": {}, "status": {
        "addresses": [{"type": "InternalDNS", "address": "node.example.com"}]
    }});
    let apart = json!({"labels": {}, "annotations": {}, "status": {"addresses": [
        {"type": "InternalIP", "address": "10.0.0.1"},
        {"type": "Hostname", "address": "node"},
        {"type": "InternalDNS", "address": "node.example.com"},
        {"type": "InternalIP", "address": "10.0.0.2"}
    ]}});
    rt.block_on(checker.case(&one, &apart)).unwrap();
}

/// The patch builder against its oracle ([`nodestatus_tests::patch::apply`]),
/// with no server: golden patches, and generated pairs of nodes.
mod oracle {
    use nodestatus_model::node::patch::{changed, two_way};
    use nodestatus_tests::patch::apply;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn cond(t: &str, s: &str, hb: &str) -> Value {
        json!({"type": t, "status": s, "lastHeartbeatTime": hb, "lastTransitionTime": "2026-01-01T00:00:00Z", "reason": format!("R{s}"), "message": "m"})
    }

    fn node(hb: &str) -> Value {
        let conditions: Vec<Value> = ["MemoryPressure", "DiskPressure", "PIDPressure"]
            .iter()
            .map(|t| cond(t, "False", hb))
            .chain([cond("Ready", "True", hb)])
            .collect();
        json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "labels": {"a": "1"}},
            "spec": {"podCIDR": "10.0.0.0/24"},
            "status": {
                "conditions": conditions,
                "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n"}],
                "capacity": {"cpu": "2", "memory": "1Gi"},
                "images": [{"names": ["a"], "sizeBytes": 1}],
            }
        })
    }

    #[test]
    fn heartbeat_only_patch_is_the_kubelets() {
        let old = node("2026-01-01T00:00:00Z");
        let new = node("2026-01-01T00:00:10Z");
        let p = two_way(&old, &new).unwrap();
        assert_eq!(
            p.to_string(),
            r#"{"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"DiskPressure"},{"type":"PIDPressure"},{"type":"Ready"}],"conditions":[{"lastHeartbeatTime":"2026-01-01T00:00:10Z","type":"MemoryPressure"},{"lastHeartbeatTime":"2026-01-01T00:00:10Z","type":"DiskPressure"},{"lastHeartbeatTime":"2026-01-01T00:00:10Z","type":"PIDPressure"},{"lastHeartbeatTime":"2026-01-01T00:00:10Z","type":"Ready"}]}}"#
        );
        assert!(!changed(&old, &new));
        assert_eq!(apply(&old, &p), new);
    }

    #[test]
    fn golden_patch_for_a_flip_a_label_and_new_addresses() {
        let old = node("2026-01-01T00:00:00Z");
        let mut new = old.clone();
        new["status"]["conditions"][3] = json!({"type": "Ready", "status": "False", "lastHeartbeatTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:10Z", "reason": "KubeletNotReady", "message": "node is shutting down"});
        new["metadata"]["labels"]["b"] = json!("2");
        new["metadata"]["labels"]
            .as_object_mut()
            .unwrap()
            .remove("a");
        new["status"]["addresses"][0]["address"] = json!("10.0.0.2");
        new["spec"]["podCIDR"] = json!("changed");
        let p = two_way(&old, &new).unwrap();
        assert_eq!(
            p.to_string(),
            r#"{"metadata":{"labels":{"a":null,"b":"2"}},"status":{"$setElementOrder/conditions":[{"type":"MemoryPressure"},{"type":"DiskPressure"},{"type":"PIDPressure"},{"type":"Ready"}],"addresses":[{"address":"10.0.0.2","type":"InternalIP"},{"address":"n","type":"Hostname"},{"$patch":"replace"}],"conditions":[{"lastTransitionTime":"2026-01-01T00:00:10Z","message":"node is shutting down","reason":"KubeletNotReady","status":"False","type":"Ready"}]}}"#
        );
        assert!(changed(&old, &new));
        let mut expected = new.clone();
        expected["spec"] = old["spec"].clone();
        assert_eq!(apply(&old, &p), expected);
    }

    #[test]
    fn removed_conditions_are_deleted_and_nothing_unchanged_is_sent() {
        let old = node("t");
        assert!(two_way(&old, &old).is_none());
        let mut new = old.clone();
        new["status"]["conditions"]
            .as_array_mut()
            .unwrap()
            .remove(1);
        let p = two_way(&old, &new).unwrap();
        assert_eq!(
            p["status"]["conditions"],
            json!([{"$patch": "delete", "type": "DiskPressure"}])
        );
        assert_eq!(apply(&old, &p), new);
    }

    /// A status map that appears empty sends nothing (it changes no field,
    /// and the API server stores no empty map); one that appears with keys
    /// is sent whole, one that goes is `null`. Labels and annotations are
    /// always sent by key.
    #[test]
    fn maps_are_patched_by_key() {
        let mut old = node("t");
        old["status"].as_object_mut().unwrap().remove("capacity");
        let mut new = old.clone();
        new["status"]["capacity"] = json!({});
        assert_eq!(two_way(&old, &new), None);
        new["status"]["capacity"] = json!({"cpu": "2"});
        let p = two_way(&old, &new).unwrap();
        assert_eq!(p["status"]["capacity"], json!({"cpu": "2"}));
        // Gone: the whole map is removed.
        let p = two_way(&new, &old).unwrap();
        assert_eq!(p["status"]["capacity"], Value::Null);
        assert_eq!(apply(&new, &p), old);
        // Labels are always by key.
        let mut bare = old.clone();
        bare["metadata"].as_object_mut().unwrap().remove("labels");
        let p = two_way(&old, &bare).unwrap();
        assert_eq!(p["metadata"]["labels"], json!({"a": null}));
    }

    /// Found by `patch_props` against the real API server: into a node
    /// without addresses, `[a, {"$patch": "replace"}]` was stored as
    /// `[a, {}]`.
    #[test]
    fn addresses_into_a_node_without_any_carry_no_directive() {
        let mut old = node("t");
        old["status"].as_object_mut().unwrap().remove("addresses");
        let new = node("t");
        let p = two_way(&old, &new).unwrap();
        assert_eq!(p["status"]["addresses"], new["status"]["addresses"]);
        assert_eq!(apply(&old, &p), new);
        // With addresses there, the list is replaced whole.
        let mut fewer = new.clone();
        fewer["status"]["addresses"].as_array_mut().unwrap().pop();
        let p = two_way(&new, &fewer).unwrap();
        assert_eq!(
            p["status"]["addresses"].as_array().unwrap().last().unwrap(),
            &json!({"$patch": "replace"})
        );
        assert_eq!(apply(&new, &p), fewer);
    }

    fn arb_node() -> impl Strategy<Value = Value> {
        let cond_types = prop::sample::subsequence(vec!["A", "B", "C", "Ready"], 0..=4);
        (
            prop::collection::btree_map("[a-c]", "[x-z]{0,2}", 0..4),
            cond_types,
            prop::collection::vec(("[A-C]", "True|False"), 0..4),
            prop::collection::btree_map("cpu|memory|pods|gpu", "[1-9]", 0..4),
            prop::option::of(prop::collection::vec("[a-c]", 0..3)),
            "[0-9]",
        )
            .prop_map(|(labels, types, _, cap, addrs, hb)| {
                let mut n = json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "labels": labels}, "spec": {}, "status": {}});
                n["status"]["conditions"] = Value::Array(types.iter().map(|t| cond(t, if hb.as_str() < "5" { "True" } else { "False" }, &hb)).collect());
                n["status"]["capacity"] = json!(cap);
                if let Some(a) = addrs {
                    n["status"]["addresses"] = Value::Array(a.iter().map(|x| json!({"type": "InternalIP", "address": x})).collect());
                }
                n
            })
    }

    proptest! {
        #[test]
        fn applying_the_patch_to_the_old_node_gives_the_new_one(old in arb_node(), new in arb_node()) {
            let mut expected = new.clone();
            expected["spec"] = old["spec"].clone();
            match two_way(&old, &new) {
                None => prop_assert_eq!(&old, &expected),
                Some(p) => {
                    let applied = apply(&old, &p);
                    // An empty map and an absent one are the same to the API server.
                    prop_assert_eq!(normalize(applied), normalize(expected));
                }
            }
        }
    }

    fn normalize(mut v: Value) -> Value {
        if let Some(o) = v.as_object_mut() {
            for x in o.values_mut() {
                *x = normalize(x.take());
            }
            o.retain(|_, x| !x.as_object().is_some_and(|m| m.is_empty()));
        }
        v
    }
}
