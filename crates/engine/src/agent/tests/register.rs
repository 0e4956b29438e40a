//! Registration (`registerWithAPIServer`).

use std::time::Duration;

use serde_json::json;

use super::*;
use crate::agent::{Error, Phase};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The first try after 100 ms; each failed try waits twice as long, up to
/// 7 s.
#[test]
fn registration_backs_off_from_100ms_doubling_to_7s() {
    let mut sim = Sim::new("");
    assert_eq!(sim.next_in(), ms(100));
    let mut waits = Vec::new();
    let mut last = Duration::ZERO;
    for _ in 0..9 {
        let a = sim.advance_to_next();
        let at = sim.now.duration_since(sim.t0);
        waits.push((at - last).as_millis());
        last = at;
        let base = pass_base(&a).unwrap();
        let a = sim.answer(Answer::Pass(
            Loop::Register,
            Ok((base, PassReport::default())),
        ));
        assert!(matches!(call(&a), Some(Call::CreateNode(_))));
        let a = sim.answer(Answer::Created(Err(timeout())));
        assert!(a.iter().any(|a| matches!(a, Action::RegisterDone(Err(_)))));
        assert!(observed(&a).contains(&Observation::LoopError("register", "timeout")));
    }
    assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
    assert!(
        matches!(sim.state.phase(), Phase::Registering(_)),
        "errors after start are retried"
    );
}

/// Before its first registration try the agent asks the server's
/// version (retried with the registration's backoff when it fails), and
/// each pass then writes the fields a kubelet of that version writes; in
/// companion mode the kubelet writes those, so the passes do not.
#[test]
fn the_servers_version_is_learned_first_and_decides_the_kubelet_fields() {
    use nodestatus_model::node::kubelet::ServerVersion;
    let v136 = ServerVersion {
        major: 1,
        minor: 36,
    };
    for (yaml, want) in [
        ("", Some(v136)),
        (
            "companion: true
",
            None,
        ),
    ] {
        let mut sim = Sim::unversioned(yaml);
        let a = sim.advance_to_next();
        assert!(matches!(call(&a), Some(Call::GetVersion)), "{a:?}");
        assert!(pass(&a).is_none());
        // A failure backs off like any failed try: 200 ms after the first.
        let a = sim.answer(Answer::Version(Err(timeout())));
        assert!(a.iter().any(|a| matches!(a, Action::RegisterDone(Err(_)))));
        assert_eq!(sim.next_in(), ms(300));
        let a = sim.advance_to_next();
        assert!(matches!(call(&a), Some(Call::GetVersion)), "{a:?}");
        let a = sim.answer(Answer::Version(Ok(v136)));
        // The try goes on at once: its pass, or (companion mode) its GET.
        assert!(
            pass(&a).is_some() || matches!(call(&a), Some(Call::GetNode(Loop::Register))),
            "{a:?}"
        );
        assert_eq!(
            sim.state.shared.server,
            Some(v136),
            "known once, not asked again"
        );
        let pass_action = sim.state.run_pass(Loop::Sync, json!({}).into());
        let (_, _, options) = pass(&[pass_action]).unwrap();
        assert_eq!(options.kubelet_fields(), want, "{yaml:?}");
    }
}

/// The initial node: the default labels, `nodeLabels` over them, the
/// taints, the attach-detach annotation and the providerID; the setters
/// run over it once, with Ready kept as it is (none: no check ran yet).
#[test]
fn the_initial_node_has_the_kubelets_labels_taints_annotation_and_provider_id() {
    let mut sim = Sim::new(
        "nodeLabels: {kubernetes.io/hostname: custom, example.com/pool: blue}\nregisterWithTaints: [{key: k, value: v, effect: NoSchedule}]\nproviderID: aws:///i-1\n",
    );
    let a = sim.advance_to_next();
    let (base, problems, options) = pass(&a).unwrap();
    let labels = &base["metadata"]["labels"];
    assert_eq!(labels["kubernetes.io/hostname"], "custom", "nodeLabels win");
    assert_eq!(labels["example.com/pool"], "blue");
    assert_eq!(labels["kubernetes.io/os"], std::env::consts::OS);
    assert!(labels.get("beta.kubernetes.io/arch").is_some());
    assert_eq!(
        base["spec"]["taints"],
        json!([{"key": "k", "value": "v", "effect": "NoSchedule"}])
    );
    assert_eq!(base["spec"]["providerID"], "aws:///i-1");
    assert_eq!(
        base["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
        "true"
    );
    assert!(problems.is_empty());
    assert!(options.keep_ready, "the first pass keeps Ready as it is");
}

/// `cloudProvider: external`: the uninitialized taint and the
/// provided-node-ip annotation, and the cloud's addresses kept.
#[test]
fn an_external_cloud_provider_adds_the_uninitialized_taint_and_the_node_ip_annotation() {
    let mut sim = Sim::new("cloudProvider: external\nnodeIP: 10.0.0.7\n");
    let (base, _, options) = pass(&sim.advance_to_next()).unwrap();
    assert_eq!(
        base["spec"]["taints"][0],
        json!({"key": "node.cloudprovider.kubernetes.io/uninitialized", "value": "true", "effect": "NoSchedule"})
    );
    assert_eq!(
        base["metadata"]["annotations"]["alpha.kubernetes.io/provided-node-ip"],
        "10.0.0.7"
    );
    assert!(options.keep_addresses);
}

/// Created: the node is ours, the pass's events are recorded, the status
/// sync and the lease start at once.
#[test]
fn once_created_the_sync_and_the_lease_start_at_once() {
    let mut sim = Sim::new("");
    let base = pass_base(&sim.advance_to_next()).unwrap();
    let mut report = PassReport::default();
    report.events.push((
        "machine-info".into(),
        nodestatus_runtime::EmittedEvent {
            event_type: nodestatus_runtime::EventType::Warning,
            reason: "Rebooted".into(),
            message: "rebooted".into(),
        },
    ));
    sim.answer(Answer::Pass(Loop::Register, Ok((base.clone(), report))));
    let a = sim.answer(Answer::Created(Ok(with_meta(base, "uid-1", "1"))));
    assert_eq!(events(&a), ["Rebooted"]);
    assert!(matches!(sim.state.phase(), Phase::Running));
    assert_eq!(sim.state.live().uid.as_deref(), Some("uid-1"));
    let a = sim.tick();
    assert!(
        pass_base(&a).is_some(),
        "the first sync pass at once: {a:?}"
    );
    assert!(
        matches!(call(&a), Some(Call::GetLease)),
        "the first renewal at once: {a:?}"
    );
}

/// AlreadyExists (409) and, since 1.32, Forbidden (403): GET the node and
/// reconcile the annotation and the default labels, patching only a
/// change; other `nodeLabels` are never applied again.
#[test]
fn an_existing_node_is_reconciled_on_409_and_403() {
    for code in [409, 403] {
        let mut sim =
            Sim::new("nodeLabels: {topology.kubernetes.io/zone: z1, example.com/pool: blue}\n");
        let base = pass_base(&sim.advance_to_next()).unwrap();
        sim.answer(Answer::Pass(
            Loop::Register,
            Ok((base, PassReport::default())),
        ));
        let a = sim.answer(Answer::Created(Err(api(code))));
        assert!(
            matches!(call(&a), Some(Call::GetNode(Loop::Register))),
            "{code}"
        );
        let existing = json!({"metadata": {"name": NAME, "uid": "u", "resourceVersion": "5", "labels": {
            "kubernetes.io/hostname": "host-a", "topology.kubernetes.io/zone": "old", "example.com/pool": "green"}}});
        let a = sim.answer(Answer::Node(Loop::Register, Ok(Some(existing.clone()))));
        let Some(Call::PatchStatus(Loop::Register, body)) = call(&a) else {
            panic!("{a:?}")
        };
        let p: Value = serde_json::from_str(body.get()).unwrap();
        assert_eq!(p["metadata"]["labels"]["topology.kubernetes.io/zone"], "z1");
        assert!(
            p["metadata"]["labels"].get("example.com/pool").is_none(),
            "nodeLabels other than the default labels are never applied again"
        );
        assert_eq!(
            p["metadata"]["annotations"]["volumes.kubernetes.io/controller-managed-attach-detach"],
            "true"
        );
        let a = sim.answer(Answer::Patched(Loop::Register, Ok(existing)));
        assert!(
            a.iter()
                .any(|a| matches!(a, Action::RegisterDone(Ok(true))))
        );
        assert!(matches!(sim.state.phase(), Phase::Running));
    }
}

/// A node that is already as it should be is not patched.
#[test]
fn a_reconciled_node_is_not_patched() {
    let mut sim = Sim::new("");
    let base = pass_base(&sim.advance_to_next()).unwrap();
    sim.answer(Answer::Pass(
        Loop::Register,
        Ok((base.clone(), PassReport::default())),
    ));
    sim.answer(Answer::Created(Err(api(409))));
    let existing = with_meta(base, "u", "3");
    let a = sim.answer(Answer::Node(Loop::Register, Ok(Some(existing))));
    assert!(call(&a).is_none(), "{a:?}");
    assert!(matches!(sim.state.phase(), Phase::Running));
}

/// Credentials that may neither create nor read this node are an identity
/// error at start: the agent ends, the only error that does.
#[test]
fn a_403_on_create_and_get_is_an_identity_error_that_ends_the_agent() {
    let mut sim = Sim::new("");
    let base = pass_base(&sim.advance_to_next()).unwrap();
    sim.answer(Answer::Pass(
        Loop::Register,
        Ok((base, PassReport::default())),
    ));
    sim.answer(Answer::Created(Err(api(403))));
    let a = sim.answer(Answer::Node(Loop::Register, Err(api(403))));
    let exit = a.iter().find_map(|a| match a {
        Action::Exit(e) => Some(e),
        _ => None,
    });
    assert!(matches!(exit, Some(Error::Permanent(_))), "{a:?}");
    assert!(exit.unwrap().to_string().contains("403"));
    assert!(matches!(sim.state.phase(), Phase::Stopped));
    assert_eq!(sim.state.next_wakeup(), None);
}

/// A transient failure of the GET after a 409 is retried, not fatal.
#[test]
fn a_transient_get_after_a_409_is_retried() {
    let mut sim = Sim::new("");
    let base = pass_base(&sim.advance_to_next()).unwrap();
    sim.answer(Answer::Pass(
        Loop::Register,
        Ok((base, PassReport::default())),
    ));
    sim.answer(Answer::Created(Err(api(409))));
    let a = sim.answer(Answer::Node(Loop::Register, Err(api(503))));
    assert!(a.iter().all(|a| !matches!(a, Action::Exit(_))));
    assert_eq!(sim.next_in(), ms(100 + 200));
}

/// `registerNode: false`: only GETs, until the node exists.
#[test]
fn register_node_false_waits_for_the_node_and_never_creates_it() {
    let mut sim = Sim::new("registerNode: false\n");
    for _ in 0..3 {
        let a = sim.advance_to_next();
        assert!(
            matches!(call(&a), Some(Call::GetNode(Loop::Register))),
            "{a:?}"
        );
        let a = sim.answer(Answer::Node(Loop::Register, Ok(None)));
        assert!(
            a.iter()
                .any(|a| matches!(a, Action::RegisterDone(Ok(false))))
        );
    }
    sim.advance_to_next();
    sim.answer(Answer::Node(Loop::Register, Ok(Some(node("9", &[])))));
    assert!(matches!(sim.state.phase(), Phase::Running));
}

/// A node the setters made that the API server would refuse is not sent;
/// the try is retried.
#[test]
fn an_initial_node_the_server_would_refuse_is_not_created() {
    let mut sim = Sim::new("");
    let mut base = pass_base(&sim.advance_to_next()).unwrap();
    base["status"]["capacity"] = json!({"cpu": "lots"});
    let a = sim.answer(Answer::Pass(
        Loop::Register,
        Ok((base, PassReport::default())),
    ));
    assert!(call(&a).is_none(), "{a:?}");
    assert!(observed(&a).contains(&Observation::LoopError("register", "refused")));
}

/// An agent made to act on request (the tests that drive one step of a
/// loop at a time) starts nothing on its own: the registration begins when
/// asked, as at a start; once registered no timer runs a sync or a
/// renewal; a sync and a renewal run when asked, the renewal from the copy
/// given; and once told to run its loops, the sync and the lease start.
#[tokio::test(start_paused = true)]
async fn an_agent_on_request_acts_only_when_asked_until_its_loops_run() {
    let mut sim = Sim::new("");
    sim.state = std::mem::replace(
        &mut sim.state,
        State::new(config(""), "host-a".into(), sim.t0),
    )
    .on_request();
    assert_eq!(sim.state.next_wakeup(), None, "no registration of its own");
    assert!(sim.tick().is_empty());

    // Asked: the first try after the backoff's first step, as at a start.
    sim.now += Duration::from_secs(30);
    assert!(sim.step(Input::Register).is_empty());
    assert_eq!(sim.next_in(), Duration::from_millis(30_100));
    sim.register();
    assert!(matches!(sim.state.phase(), Phase::Running));
    assert_eq!(
        sim.state.next_wakeup(),
        None,
        "no sync or renewal of its own"
    );
    sim.now += Duration::from_secs(60);
    assert!(sim.tick().is_empty());

    // A sync when asked: its pass, from the live node, to its end.
    let a = sim.step(Input::SyncNow);
    let base = pass_base(&a).expect("a pass from the live node");
    let a = sim.answer(sync_pass(base, PassReport::default()));
    assert!(
        a.iter().any(|a| matches!(a, Action::SyncDone { .. })),
        "{a:?}"
    );
    // A renewal when asked, from the copy given: an update, no GET.
    let a = sim.step(Input::LeaseNow(Some(lease("7"))));
    let written = match call(&a) {
        Some(Call::UpdateLease(l)) => {
            assert_eq!(l.metadata.resource_version.as_deref(), Some("7"));
            l.clone()
        }
        other => panic!("expected an update of the copy given, got {other:?}"),
    };
    let a = sim.answer(Answer::LeaseWritten(Ok(written)));
    assert!(
        a.iter().any(|a| matches!(a, Action::LeaseDone(Ok(())))),
        "{a:?}"
    );
    assert_eq!(
        sim.state.next_wakeup(),
        None,
        "nothing of its own after them"
    );

    // Its loops run: the lease's renewal and the sync's pass are due now.
    let a = sim.step(Input::RunLoops);
    assert!(a.is_empty(), "{a:?}");
    assert_eq!(sim.state.next_wakeup(), Some(sim.now));
}
