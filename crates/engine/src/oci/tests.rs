//! What one check's report tells the nodes: each report is logged once and
//! counted on every node, and a new version or a new failure is one event
//! for the nodes ([`Nodes::record_event`]: `run`'s one agent records it at
//! once, `simulate`'s fleet spreads its nodes' over an update period).

use std::sync::{Arc, Mutex};

use nodestatus_registry::{Digest, Reference};
use nodestatus_runtime::EventType;

use super::{Report, report};
use crate::agent::{AgentHandle, Nodes};
use crate::config::{Config, FailurePolicy};

/// Nodes that keep the events they are told of; no agent runs.
#[derive(Default)]
struct Told(Mutex<Vec<(EventType, String, String)>>);

impl Nodes for Told {
    fn cfg(&self) -> Arc<Config> {
        unreachable!("a report reads no config")
    }

    fn set_config(&self, _: Arc<Config>) {
        unreachable!("a report changes no config")
    }

    fn each(&self, _: &mut dyn FnMut(&AgentHandle)) {}

    fn record_event(
        &self,
        event_type: EventType,
        reason: &str,
        message: &str,
        plugin: Option<&str>,
    ) {
        assert_eq!(plugin, Some("probe"));
        self.0
            .lock()
            .unwrap()
            .push((event_type, reason.to_owned(), message.to_owned()));
    }
}

fn check(result: &'static str, error: Option<&str>, new_failure: bool) -> Report {
    let digest = Digest::of(b"version 2");
    Report {
        plugin: "probe".into(),
        reference: Reference::parse(&format!("registry.example/vendor/probe@{digest}")).unwrap(),
        result,
        digest: Some(digest.clone()),
        running: Some(digest),
        stopped: None,
        stopped_now: false,
        error: error.map(str::to_owned),
        new_failure,
        failure_policy: FailurePolicy::Open,
    }
}

#[test]
fn a_new_version_or_a_new_failure_is_one_event_for_the_nodes_a_repeat_none() {
    let told = Told::default();
    report(&told, &check("pulled", None, false));
    report(&told, &check("unchanged", None, false));
    report(
        &told,
        &check("bad-signature", Some("signed by another key"), true),
    );
    report(
        &told,
        &check("bad-signature", Some("signed by another key"), false),
    );
    let mut stopped = check("bad-signature", Some("no key trusts it"), true);
    stopped.stopped_now = true;
    report(&told, &stopped);
    let events = told.0.into_inner().unwrap();
    let kinds: Vec<(EventType, &str)> = events.iter().map(|(t, r, _)| (*t, r.as_str())).collect();
    assert_eq!(
        kinds,
        [
            (EventType::Normal, "PluginPulled"),
            (EventType::Warning, "FailedPluginPull"),
            (EventType::Warning, "PluginUntrusted"),
        ]
    );
    assert!(
        events[0]
            .2
            .starts_with("plugin probe: registry.example/vendor/probe@sha256:")
    );
    assert!(
        events[1]
            .2
            .contains("signed by another key; keeping sha256:"),
        "{}",
        events[1].2
    );
}
