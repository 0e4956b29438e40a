//! The node lease (the kubelet's lease controller).

use super::*;

/// The written lease among `actions`.
fn written(actions: &[Action]) -> Lease {
    match call(actions) {
        Some(Call::CreateLease(l) | Call::UpdateLease(l)) => l.clone(),
        other => panic!("expected a lease write, got {other:?}"),
    }
}

/// A registered agent whose lease exists and is cached.
fn leased(yaml: &str) -> Sim {
    let mut sim = Sim::registered(yaml);
    let a = sim.tick();
    assert!(matches!(call(&a), Some(Call::GetLease)), "{a:?}");
    let a = sim.answer(Answer::Lease(Ok(Some(lease("1")))));
    let l = written(&a);
    let a = sim.answer(Answer::LeaseWritten(Ok(l)));
    assert_eq!(lease_done(&a), Some(Ok(())));
    sim
}

/// The first renewal as soon as the node exists: a GET, then a create when
/// missing, owned by the node, held by it, for `nodeLeaseDurationSeconds`,
/// renewed now (a MicroTime).
#[test]
fn a_missing_lease_is_created_owned_by_the_node() {
    let mut sim = Sim::registered("nodeLeaseDurationSeconds: 40\n");
    let a = sim.tick();
    assert!(matches!(call(&a), Some(Call::GetLease)));
    let a = sim.answer(Answer::Lease(Ok(None)));
    let Some(Call::CreateLease(l)) = call(&a) else {
        panic!("{a:?}")
    };
    let spec = l.spec.as_ref().unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some(NAME));
    assert_eq!(spec.lease_duration_seconds, Some(40));
    assert!(spec.renew_time.is_some());
    assert_eq!(l.metadata.namespace.as_deref(), Some("kube-node-lease"));
    let owner = &l.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.uid.as_str()), ("Node", "uid-1"));
}

/// Renewed every quarter of the duration with 4 % jitter (here +2 %), by
/// an optimistic update of the cached lease: no GET. The second renewal of
/// a start comes a random part of a period later (`agent/lease.rs`).
#[test]
fn the_lease_is_renewed_every_quarter_of_its_duration_from_the_cache() {
    let mut sim = leased("nodeLeaseDurationSeconds: 40\nnodeStatusUpdateFrequency: 5m\n");
    // The second renewal of a start has its random phase: here half a
    // period more.
    for expected in [15_200, 10_200, 10_200] {
        let start = sim.now;
        let a = sim.advance_to_next();
        assert_eq!((sim.now - start).as_millis(), expected);
        let l = written(&a);
        assert!(
            matches!(call(&a), Some(Call::UpdateLease(_))),
            "no GET: {a:?}"
        );
        assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(40));
        sim.answer(Answer::LeaseWritten(Ok(l)));
    }
}

/// A 409 drops the cache: the next try GETs a fresh copy, then updates it.
#[test]
fn a_conflict_leads_to_a_get_and_another_try() {
    let mut sim = leased("nodeStatusUpdateFrequency: 5m\n");
    let a = sim.advance_to_next();
    assert!(matches!(call(&a), Some(Call::UpdateLease(_))));
    let a = sim.answer(Answer::LeaseWritten(Err(api(409))));
    assert!(matches!(call(&a), Some(Call::GetLease)), "{a:?}");
    assert!(!resets(&a), "a conflict does not drop the connections");
    let a = sim.answer(Answer::Lease(Ok(Some(lease("7")))));
    let l = written(&a);
    assert_eq!(l.metadata.resource_version.as_deref(), Some("7"));
    let a = sim.answer(Answer::LeaseWritten(Ok(l)));
    assert_eq!(lease_done(&a), Some(Ok(())));
}

/// Five failed tries make one failed renewal ("failed 5 attempts to update
/// lease"); the connections are dropped after each failed try past the
/// first; failed renewals back off from 200 ms doubling to 7 s, and a
/// success resets the backoff. (The server answers with errors here; one
/// that does not answer is `agent/reach.rs`'s rule.)
#[test]
fn failed_renewals_back_off_from_200ms_to_7s() {
    let mut sim = leased("nodeStatusUpdateFrequency: 5m\n");
    let mut waits = Vec::new();
    sim.advance_to_next();
    for _ in 0..7 {
        let mut a = Vec::new();
        for attempt in 0..5 {
            a = sim.answer(Answer::LeaseWritten(Err(api(500))));
            assert_eq!(resets(&a), attempt >= 1, "try {attempt}");
        }
        let err = lease_done(&a).unwrap().unwrap_err();
        assert!(
            err.starts_with("failed 5 attempts to update lease"),
            "{err}"
        );
        let start = sim.now;
        sim.advance_to_next();
        waits.push((sim.now - start).as_millis());
    }
    assert_eq!(waits, [200, 400, 800, 1600, 3200, 6400, 7000]);
    let l = lease("9");
    let a = sim.answer(Answer::LeaseWritten(Ok(l)));
    assert_eq!(lease_done(&a), Some(Ok(())));
    sim.advance_to_next();
    let a = sim.answer(Answer::LeaseWritten(Err(api(500))));
    let mut a = a;
    for _ in 1..5 {
        a = sim.answer(Answer::LeaseWritten(Err(api(500))));
    }
    assert!(lease_done(&a).unwrap().is_err());
    let start = sim.now;
    sim.advance_to_next();
    assert_eq!((sim.now - start).as_millis(), 200, "reset by the success");
}

/// A node that is not there blocks the create, not the renewals: without
/// its uid no lease is created, and the renewal stops at once.
#[test]
fn a_missing_node_blocks_the_create_but_not_the_renewals() {
    let mut sim = leased("nodeStatusUpdateFrequency: 5m\n");
    let mut forgotten = Vec::new();
    sim.state.forget_node(&mut forgotten);
    // The cached lease is still renewed.
    let a = sim.advance_to_next();
    assert!(matches!(call(&a), Some(Call::UpdateLease(_))));
    // Gone: GET, missing, and no create without the node.
    let a = sim.answer(Answer::LeaseWritten(Err(api(404))));
    assert!(matches!(call(&a), Some(Call::GetLease)));
    let a = sim.answer(Answer::Lease(Ok(None)));
    assert!(call(&a).is_none(), "{a:?}");
    let err = lease_done(&a).unwrap().unwrap_err();
    assert!(
        err.contains("the lease is created once the node exists"),
        "{err}"
    );
}

/// Companion mode: the kubelet owns the lease.
#[test]
fn companion_mode_holds_no_lease() {
    let mut sim = Sim::new("companion: true\nregisterNode: false\n");
    sim.advance_to_next();
    sim.answer(Answer::Node(Loop::Register, Ok(Some(node("1", &[])))));
    for _ in 0..5 {
        let a = sync_through(&mut sim, heartbeat);
        assert!(
            !a.iter()
                .any(|a| matches!(a, Action::Call(Call::GetLease | Call::UpdateLease(_)))),
            "{a:?}"
        );
    }
}

/// A phase given (`simulate`'s node i: the i-th of the golden-ratio
/// sequence) replaces the draw of the second renewal's phase, once.
#[test]
fn a_given_phase_replaces_the_draw_once() {
    let mut sim = Sim::registered("nodeLeaseDurationSeconds: 40\nnodeStatusUpdateFrequency: 5m\n");
    sim.state.set_lease_phase(0.25);
    let a = sim.tick();
    assert!(matches!(call(&a), Some(Call::GetLease)));
    let a = sim.answer(Answer::Lease(Ok(Some(lease("1")))));
    let a = sim.answer(Answer::LeaseWritten(Ok(written(&a))));
    assert_eq!(lease_done(&a), Some(Ok(())));
    for expected in [12_700, 10_200] {
        let start = sim.now;
        let a = sim.advance_to_next();
        assert_eq!((sim.now - start).as_millis(), expected);
        sim.answer(Answer::LeaseWritten(Ok(written(&a))));
    }
}
