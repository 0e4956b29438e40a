//! What the agent reports about itself: `/readyz`, the loop errors, and the
//! events of refused credentials.

use std::time::Duration;

use super::*;

/// Errors after start are retried, never fatal: a 401 of the status sync
/// is counted, reported in `/readyz`, and a Warning event says so when it
/// starts (once, not at every pass).
#[test]
fn refused_credentials_after_start_are_retried_and_reported_once() {
    let mut sim = Sim::registered("");
    let mut first = true;
    for _ in 0..2 {
        let mut a = sim.advance_to_next();
        for _ in 0..5 {
            a = match call(&a) {
                Some(Call::GetNode(_)) => sim.answer(Answer::Node(Loop::Sync, Err(api(401)))),
                _ => {
                    let base = pass_base(&a).unwrap();
                    sim.answer(sync_pass(
                        set_condition(&base, "Ready", "True"),
                        PassReport::default(),
                    ));
                    sim.answer(Answer::Patched(Loop::Sync, Err(api(401))))
                }
            };
        }
        assert!(sync_done(&a).unwrap().is_err());
        assert!(observed(&a).contains(&Observation::LoopError("sync", "unauthorized")));
        let warned = events(&a) == ["FailedNodeStatusUpdate"];
        assert_eq!(warned, first, "{:?}", events(&a));
        first = false;
    }
    let why = sim.state.snapshot().ready_reason(sim.now).unwrap();
    assert!(why.contains("unauthorized"), "{why}");
    assert!(matches!(sim.state.phase(), crate::agent::Phase::Running));
}

/// `/readyz`: not registered; then ready after a sync; then not when no
/// sync succeeded for three update periods, or no lease renewal for a
/// lease duration.
#[test]
fn readyz_follows_registration_the_sync_and_the_lease() {
    let mut sim = Sim::new("nodeStatusUpdateFrequency: 10s\nnodeLeaseDurationSeconds: 40\n");
    let snap = sim.state.snapshot();
    assert_eq!(
        snap.ready_reason(sim.now).as_deref(),
        Some("the node is not registered yet")
    );
    sim.register();
    sync_through(&mut sim, |b| set_condition(b, "Ready", "True"));
    let now = sim.now;
    let snap = sim.state.snapshot();
    assert_eq!(snap.ready_reason(now), None);
    let why = snap.ready_reason(now + Duration::from_secs(36)).unwrap();
    assert!(why.starts_with("no successful status sync for"), "{why}");
    let mut renewed = sim.state.snapshot();
    renewed.last_sync_ok = Some(now + Duration::from_secs(60));
    renewed.last_lease_ok = Some(now);
    let why = renewed.ready_reason(now + Duration::from_secs(61)).unwrap();
    assert!(why.starts_with("no lease renewal for"), "{why}");
}
