//! The shared conformance vectors in `sdk/conformance/`, which the Python, JS
//! and C SDKs run too: quantities, the condition rules and RFC 3339 times.

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

#[test]
fn quantities_parse_and_format_as_the_vectors_say() {
    let v = vectors("quantity.json");
    let mut failures = Vec::new();
    for case in cases(&v, "parse") {
        let input = str_of(case, "input");
        let want_millis: i128 = str_of(case, "millis").parse().unwrap();
        match Quantity::parse(input) {
            Ok(q) => {
                let got = (q.as_millis(), q.format(), q.to_string());
                let want = (
                    want_millis,
                    format_of(str_of(case, "format")),
                    str_of(case, "canonical").to_owned(),
                );
                if got != want {
                    failures.push(format!("parse {input:?}: got {got:?}, want {want:?}"));
                }
            }
            Err(e) => failures.push(format!("parse {input:?}: refused: {e}")),
        }
    }
    for case in cases(&v, "invalid") {
        let input = str_of(case, "input");
        if let Ok(q) = Quantity::parse(input) {
            failures.push(format!("parse {input:?}: accepted as {q}, want it refused"));
        }
    }
    for case in cases(&v, "format") {
        let millis: i128 = str_of(case, "millis").parse().unwrap();
        let format = format_of(str_of(case, "format"));
        let q = Quantity::new(millis, format);
        let want = str_of(case, "canonical");
        if q.to_string() != want {
            failures.push(format!("format {millis}m {format:?}: got {q}, want {want}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn quantity_arithmetic_follows_the_vectors() {
    let v = vectors("quantity.json");
    let q = |case: &Value, key: &str| Quantity::parse(str_of(case, key)).unwrap();
    let mut failures = Vec::new();
    for case in cases(&v, "arithmetic") {
        let (a, b) = (q(case, "a"), q(case, "b"));
        let got = (a.add(b).to_string(), a.saturating_sub(b).to_string());
        let want = (str_of(case, "add"), str_of(case, "saturating_sub"));
        if (got.0.as_str(), got.1.as_str()) != want {
            failures.push(format!("{case}: got {got:?}"));
        }
    }
    for case in cases(&v, "units_ceil") {
        let got = q(case, "input").as_units_ceil().to_string();
        if got != str_of(case, "units_ceil") {
            failures.push(format!("{case}: got {got}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn status(s: &str) -> ConditionStatus {
    s.parse().unwrap()
}

#[test]
fn conditions_follow_the_vectors() {
    let v = vectors("condition.json");
    let mut failures = Vec::new();
    for case in cases(&v, "set") {
        let name = str_of(case, "name");
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
        if got != case["want"] {
            failures.push(format!("{name}: conditions {got}, want {}", case["want"]));
        }
        let transition = json!({
            "previous": t.previous.map(|s| s.as_str()),
            "current": t.current.as_str(),
            "flipped": t.flipped,
        });
        if transition != case["transition"] {
            failures.push(format!(
                "{name}: transition {transition}, want {}",
                case["transition"]
            ));
        }
    }
    for case in cases(&v, "remove") {
        let name = str_of(case, "name");
        let mut node = node_with(&case["conditions"]);
        let removed = node.remove_condition(str_of(case, "remove"));
        let got = conditions_of(&node);
        if got != case["want"] || Value::Bool(removed) != case["removed"] {
            failures.push(format!(
                "{name}: removed {removed}, left {got}; want {} and {}",
                case["removed"], case["want"]
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
    let v = vectors("time.json");
    let mut failures = Vec::new();
    for case in cases(&v, "rfc3339") {
        let secs = case["seconds"].as_u64().unwrap();
        let got = nodestatus_sdk::time::rfc3339(UNIX_EPOCH + Duration::from_secs(secs));
        if got != str_of(case, "rfc3339") {
            failures.push(format!("{secs}: got {got}, want {}", case["rfc3339"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
