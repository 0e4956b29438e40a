//! The shared conformance vectors in `sdk/conformance/`, which the Python, JS
//! and C SDKs run too: quantities, the condition rules, RFC 3339 times and
//! the part a setter returns.

use std::time::{Duration, UNIX_EPOCH};

use nodestatus_sdk::quantity::Format;
use nodestatus_sdk::{ConditionStatus, Node, Quantity};
use serde_json::{Value, json};

fn vectors(name: &str) -> Value {
    let path = format!("{}/conformance/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn cases<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    let list = v[key].as_array().unwrap_or_else(|| panic!("no {key} list"));
    assert!(!list.is_empty(), "{key} has no case");
    list
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v[key].as_str().unwrap_or_else(|| panic!("{v}: no {key}"))
}

fn format_of(name: &str) -> Format {
    match name {
        "BinarySI" => Format::BinarySI,
        "DecimalSI" => Format::DecimalSI,
        other => panic!("unknown format {other}"),
    }
}

/// Checks every case of `group` in the vectors file `file` with `check`,
/// which says what is wrong with a case (`None` when it passes); fails with
/// every wrong case at once.
fn check_cases(file: &str, group: &str, check: impl Fn(&Value) -> Option<String>) {
    let v = vectors(file);
    let failures: Vec<String> = cases(&v, group).iter().filter_map(check).collect();
    assert!(
        failures.is_empty(),
        "{file}, {group}:\n{}",
        failures.join("\n")
    );
}

#[test]
fn quantities_parse_and_format_as_the_vectors_say() {
    check_cases("quantity.json", "parse", |case| {
        let input = str_of(case, "input");
        let want = (
            str_of(case, "millis").parse::<i128>().unwrap(),
            format_of(str_of(case, "format")),
            str_of(case, "canonical").to_owned(),
        );
        match Quantity::parse(input) {
            Ok(q) => {
                let got = (q.as_millis(), q.format(), q.to_string());
                (got != want).then(|| format!("parse {input:?}: got {got:?}, want {want:?}"))
            }
            Err(e) => Some(format!("parse {input:?}: refused: {e}")),
        }
    });
    check_cases("quantity.json", "invalid", |case| {
        let input = str_of(case, "input");
        let accepted = Quantity::parse(input).ok();
        accepted.map(|q| format!("parse {input:?}: accepted as {q}, want it refused"))
    });
    check_cases("quantity.json", "format", |case| {
        let millis: i128 = str_of(case, "millis").parse().unwrap();
        let format = format_of(str_of(case, "format"));
        let q = Quantity::new(millis, format);
        let want = str_of(case, "canonical");
        (q.to_string() != want)
            .then(|| format!("format {millis}m {format:?}: got {q}, want {want}"))
    });
}

#[test]
fn quantity_arithmetic_follows_the_vectors() {
    let q = |case: &Value, key: &str| Quantity::parse(str_of(case, key)).unwrap();
    check_cases("quantity.json", "arithmetic", |case| {
        let (a, b) = (q(case, "a"), q(case, "b"));
        let got = ((a + b).to_string(), a.saturating_sub(b).to_string());
        let want = (str_of(case, "add"), str_of(case, "saturating_sub"));
        ((got.0.as_str(), got.1.as_str()) != want).then(|| format!("{case}: got {got:?}"))
    });
    check_cases("quantity.json", "units_ceil", |case| {
        let got = q(case, "input").as_units_ceil().to_string();
        (got != str_of(case, "units_ceil")).then(|| format!("{case}: got {got}"))
    });
}

fn status(s: &str) -> ConditionStatus {
    s.parse().unwrap()
}

#[test]
fn conditions_follow_the_vectors() {
    check_cases("condition.json", "set", |case| {
        let mut node = node_with(&case["conditions"]);
        let set = &case["set"];
        let t = node.set_condition_at(
            str_of(set, "type"),
            status(str_of(set, "status")),
            str_of(set, "reason"),
            str_of(set, "message"),
            str_of(set, "now"),
        );
        let got = conditions_of(&node);
        let transition = json!({
            "previous": t.previous.map(|s| s.as_str()),
            "current": t.current.as_str(),
            "flipped": t.flipped,
        });
        (got != case["want"] || transition != case["transition"]).then(|| {
            format!(
                "{}: conditions {got}, transition {transition}; want {} and {}",
                str_of(case, "name"),
                case["want"],
                case["transition"]
            )
        })
    });
    check_cases("condition.json", "remove", |case| {
        let mut node = node_with(&case["conditions"]);
        let removed = node.remove_condition(str_of(case, "remove"));
        let got = conditions_of(&node);
        (got != case["want"] || Value::Bool(removed) != case["removed"]).then(|| {
            format!(
                "{}: removed {removed}, left {got}; want {} and {}",
                str_of(case, "name"),
                case["removed"],
                case["want"]
            )
        })
    });
}

fn node_with(conditions: &Value) -> Node {
    let mut status = json!({});
    if !conditions.is_null() {
        status["conditions"] = conditions.clone();
    }
    let node = json!({"metadata": {"name": "n1"}, "status": status});
    Node::parse(&node.to_string()).unwrap()
}

fn conditions_of(node: &Node) -> Value {
    let out: Value = serde_json::from_str(&node.to_json()).unwrap();
    out["status"]["conditions"].clone()
}

#[test]
fn times_are_written_as_the_vectors_say() {
    check_cases("time.json", "rfc3339", |case| {
        let secs = case["seconds"].as_u64().unwrap();
        let got = nodestatus_sdk::time::rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
        (got != str_of(case, "rfc3339"))
            .then(|| format!("{secs}: got {got}, want {}", case["rfc3339"]))
    });
}

/// Applies one op of `part.json` through the node API.
fn apply_op(node: &mut Node, op: &Value) {
    let op = op.as_array().unwrap_or_else(|| panic!("{op}: not a list"));
    let arg = |i: usize| {
        op[i]
            .as_str()
            .unwrap_or_else(|| panic!("{op:?}: argument {i} is not a string"))
    };
    let quantity = |i: usize| Quantity::parse(arg(i)).unwrap();
    match arg(0) {
        "set_label" => node.set_label(arg(1), arg(2)),
        "remove_label" => {
            node.remove_label(arg(1));
        }
        "set_annotation" => node.set_annotation(arg(1), arg(2)),
        "remove_annotation" => {
            node.remove_annotation(arg(1));
        }
        "set_condition" => {
            node.set_condition(arg(1), status(arg(2)), arg(3), arg(4));
        }
        "remove_condition" => {
            node.remove_condition(arg(1));
        }
        "set_capacity" => node.set_capacity(arg(1), quantity(2)),
        "set_allocatable" => node.set_allocatable(arg(1), quantity(2)),
        "remove_resource" => node.remove_resource(arg(1)),
        "set_node_info" => node.set_node_info(arg(1), arg(2)),
        "set_addresses" => {
            let pairs: Vec<(&str, &str)> = op[1]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_str().unwrap(), p[1].as_str().unwrap()))
                .collect();
            node.set_addresses(&pairs);
        }
        other => panic!("unknown op {other}"),
    }
}

/// A part as `part.json` compares it: each condition by its type, status,
/// reason and message (an empty reason or message as absent) and `$patch`.
fn comparable(part: &Value) -> Value {
    let mut part = part.clone();
    if let Some(list) = part
        .pointer_mut("/status/conditions")
        .and_then(Value::as_array_mut)
    {
        for c in list {
            let Some(c) = c.as_object_mut() else { continue };
            c.retain(|k, v| {
                matches!(
                    k.as_str(),
                    "type" | "status" | "reason" | "message" | "$patch"
                ) && v != ""
            });
        }
    }
    part
}

#[test]
fn parts_follow_the_vectors() {
    let v = vectors("part.json");
    let input = v["node"].to_string();
    check_cases("part.json", "cases", |case| {
        let mut node = Node::parse(&input).unwrap();
        for op in case["ops"].as_array().unwrap() {
            apply_op(&mut node, op);
        }
        let got = comparable(&node.part());
        (got != comparable(&case["part"]))
            .then(|| format!("{}: got {got}, want {}", str_of(case, "name"), case["part"]))
    });
}

#[test]
fn run_returns_the_part_as_text() {
    struct Labels;
    impl nodestatus_sdk::Setter for Labels {
        fn metadata() -> nodestatus_sdk::Metadata {
            nodestatus_sdk::Metadata::new("labels", "0.1.0")
        }
        fn set(node: &mut Node) -> nodestatus_sdk::Result<()> {
            node.set_label("example.com/x", "y");
            Ok(())
        }
    }
    struct Nothing;
    impl nodestatus_sdk::Setter for Nothing {
        fn metadata() -> nodestatus_sdk::Metadata {
            nodestatus_sdk::Metadata::new("nothing", "0.1.0")
        }
        fn set(_: &mut Node) -> nodestatus_sdk::Result<()> {
            Ok(())
        }
    }
    let input = vectors("part.json")["node"].to_string();
    assert_eq!(
        nodestatus_sdk::run::<Labels>(&input).unwrap().as_deref(),
        Some(r#"{"metadata":{"labels":{"example.com/x":"y"}}}"#)
    );
    assert_eq!(
        nodestatus_sdk::run::<Nothing>(&input).unwrap().as_deref(),
        Some("{}")
    );
    assert!(nodestatus_sdk::run::<Nothing>("[]").is_err());
}

#[test]
#[should_panic(expected = "time.json, rfc3339")]
fn a_wrong_case_fails_the_check() {
    check_cases("time.json", "rfc3339", |case| Some(format!("{case}")));
}
