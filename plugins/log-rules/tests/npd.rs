//! log-rules over node-problem-detector's published configs (copied from
//! NPD's `config/` as they are), natively: the subscriptions they make, and
//! what matches become. The host's matching of the same patterns is tested
//! in the engine (streams) and end to end in `tests/all/events.rs`.

use log_rules::{LogRules, Settings, check, go_duration, subscriptions};
use nodestatus_sdk::host::{set_native_config, take_native_events};
use nodestatus_sdk::reactor::{Lines, Source};
use nodestatus_sdk::{EventType, Node};

fn config(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/npd/{name}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn settings(json: &str) -> Settings {
    let s: Settings = serde_json::from_str(json).unwrap();
    check(&s).unwrap();
    s
}

#[test]
fn every_published_config_reads_and_makes_one_stream_per_monitor() {
    for (name, source, patterns) in [
        ("kernel-monitor", Source::Kmsg, 14),
        ("readonly-monitor", Source::Kmsg, 1),
        ("docker-monitor", Source::Journal(vec!["dockerd".into()]), 3),
        (
            "systemd-monitor",
            Source::Journal(vec!["systemd".into()]),
            3,
        ),
        (
            "kernel-monitor-filelog",
            Source::File("/var/log/kern.log".into()),
            6,
        ),
    ] {
        let s = settings(&config(name));
        let subs = subscriptions(&s);
        assert_eq!(subs.streams.len(), 1, "{name}");
        let st = &subs.streams[0];
        assert_eq!(st.source, source, "{name}");
        assert_eq!(st.patterns.len(), patterns, "{name}");
        assert!(
            st.patterns.iter().all(|p| p.ends_with("\\z")),
            "anchored as NPD anchors"
        );
        assert_eq!(st.span, 10, "{name}: NPD's bufferSize");
        assert_eq!(st.lookback_seconds, 300, "{name}: lookback 5m");
    }
    let filelog = subscriptions(&settings(&config("kernel-monitor-filelog")));
    assert_eq!(
        filelog.streams[0].extract.as_deref(),
        Some("kernel: \\[.*\\] (.*)")
    );
}

#[test]
fn several_monitors_with_one_source_get_streams_of_their_own() {
    let s = settings(&format!(
        r#"{{"monitors": [{}, {}]}}"#,
        config("kernel-monitor"),
        config("kernel-monitor")
    ));
    let names: Vec<String> = subscriptions(&s)
        .streams
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["kernel-monitor", "kernel-monitor-1"]);
}

fn run(json: &str, node: &str, lines: &Lines) -> (Node, Vec<(EventType, String, String)>) {
    set_native_config(json);
    let _ = take_native_events();
    let part = nodestatus_sdk::reactor::run_lines::<LogRules>(node, lines)
        .unwrap()
        .unwrap();
    let mut n = Node::parse(node).unwrap();
    let p: serde_json::Value = serde_json::from_str(&part).unwrap();
    for c in p["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
    {
        n.set_condition(
            c["type"].as_str().unwrap(),
            c["status"].as_str().unwrap().parse().unwrap(),
            c["reason"].as_str().unwrap(),
            c["message"].as_str().unwrap(),
        );
    }
    (n, take_native_events())
}

const NODE: &str = r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"},"status":{}}"#;

/// kernel-monitor.json's rules, by index: 1 TaskHung (temporary), 13
/// DockerHung (permanent, KernelDeadlock).
#[test]
fn a_permanent_rule_sets_its_condition_with_npds_event_and_a_temporary_one_records_an_event() {
    let json = config("kernel-monitor");
    let line = "task docker:4242 blocked for more than 120 seconds.";
    let (node, events) = run(&json, NODE, &Lines::of("kernel-monitor", 0, &[]));
    assert!(events.is_empty());
    let c = node.condition("KernelDeadlock").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("KernelHasNoDeadlock"))
    );
    let mut lines = Lines::of("kernel-monitor", 1, &[line]);
    lines
        .matches
        .extend(Lines::of("kernel-monitor", 13, &[line]).matches);
    let (node, events) = run(&json, &node.to_json(), &lines);
    let c = node.condition("KernelDeadlock").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("True", Some("DockerHung"))
    );
    assert_eq!(c.message.as_deref(), Some(line));
    assert_eq!(
        events,
        vec![
            (EventType::Warning, "TaskHung".into(), line.into()),
            (
                EventType::Warning,
                "DockerHung".into(),
                format!(
                    "Node condition KernelDeadlock is now: True, reason: DockerHung, message: {line:?}"
                )
            ),
        ]
    );
    // The same match again changes nothing and records nothing (NPD: a
    // condition changes only when its status or reason does).
    let (again, events) = run(
        &json,
        &node.to_json(),
        &Lines::of("kernel-monitor", 13, &[line]),
    );
    assert!(events.is_empty());
    assert_eq!(
        again.condition("KernelDeadlock"),
        node.condition("KernelDeadlock")
    );
    // And a pass with no line keeps it (a restart does not reset it).
    let (kept, _) = run(&json, &node.to_json(), &Lines::default());
    assert_eq!(kept.condition("KernelDeadlock").unwrap().status, "True");
}

#[test]
fn a_resolve_rule_and_clear_after_bring_a_condition_back() {
    let json = r#"{"plugin":"kmsg","source":"gpu","conditions":[{"type":"GpuFell","reason":"GpuOnBus","message":"ok","clearAfter":"1h"}],
      "rules":[{"type":"permanent","condition":"GpuFell","reason":"FellOff","pattern":"fallen off the bus"},
               {"type":"resolve","condition":"GpuFell","pattern":"driver loaded"}]}"#;
    let (node, _) = run(
        json,
        NODE,
        &Lines::of("gpu", 0, &["GPU has fallen off the bus"]),
    );
    assert_eq!(node.condition("GpuFell").unwrap().status, "True");
    let (node, events) = run(
        json,
        &node.to_json(),
        &Lines::of("gpu", 1, &["driver loaded"]),
    );
    let c = node.condition("GpuFell").unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_deref()),
        ("False", Some("GpuOnBus"))
    );
    assert_eq!(events[0].0, EventType::Normal);
    // clearAfter: a True condition whose transition is over an hour old.
    let old = r#"{"kind":"Node","apiVersion":"v1","metadata":{"name":"n"},"status":{"conditions":[
      {"type":"GpuFell","status":"True","reason":"FellOff","message":"x","lastTransitionTime":"2020-01-01T00:00:00Z","lastHeartbeatTime":"2020-01-01T00:00:00Z"}]}}"#;
    let (node, events) = run(json, old, &Lines::default());
    assert_eq!(node.condition("GpuFell").unwrap().status, "False");
    assert_eq!(events.len(), 1);
}

#[test]
fn a_bad_config_names_the_rule() {
    for (json, says) in [
        (
            r#"{"plugin":"tail","rules":[]}"#,
            "is not kmsg, filelog or journald",
        ),
        (r#"{"plugin":"filelog","rules":[]}"#, "needs logPath"),
        (
            r#"{"plugin":"kmsg","source":"k","rules":[{"type":"permanent","condition":"X","reason":"R","pattern":"p"}]}"#,
            "rule 0 (R) names condition \"X\"",
        ),
        (
            r#"{"plugin":"kmsg","lookback":"5 minutes","rules":[]}"#,
            "lookback",
        ),
        (
            r#"{"plugin":"kmsg","rules":[{"type":"sometimes","pattern":"p"}]}"#,
            "type \"sometimes\"",
        ),
    ] {
        let s: Settings = serde_json::from_str(json).unwrap();
        let e = check(&s).unwrap_err();
        assert!(e.contains(says), "{e}");
    }
}

#[test]
fn go_durations_read_as_go_reads_them() {
    assert_eq!(go_duration("5m").unwrap(), 300.0);
    assert_eq!(go_duration("1h30m").unwrap(), 5400.0);
    assert_eq!(go_duration("0").unwrap(), 0.0);
    assert_eq!(go_duration("1.5s").unwrap(), 1.5);
    assert!(go_duration("5").is_err());
}
