//! A server that does not answer (`agent/reach.rs`): only the lease
//! probes it, once a period, on connections given up fast; the status
//! sync and the watch wait, and come back spread when it answers.

use std::time::Duration;

use super::*;
use crate::agent::WatchEvent;
use crate::agent::reach::PROBE_CONNECT;

/// The probe among `actions`: its call and connect timeout.
fn probe(actions: &[Action]) -> Option<(&Call, Duration)> {
    actions.iter().find_map(|a| match a {
        Action::Probe {
            call,
            connect_within,
        } => Some((call, *connect_within)),
        _ => None,
    })
}

/// A refused connection.
fn refused() -> client::Error {
    client::Error::Transport {
        kind: "test",
        source: kube::Error::Service("connection refused".into()),
    }
}

/// A registered agent whose lease is cached and whose server stopped
/// answering: one whole renewal (the kubelet's 5 tries) failed without an
/// answer, and its watch failed.
fn down() -> Sim {
    let mut sim = Sim::registered("nodeStatusUpdateFrequency: 10s\n");
    let a = sim.tick();
    if let Some(base) = pass_base(&a) {
        sim.answer(sync_pass(base, PassReport::default()));
    }
    let a = match call(&a) {
        Some(Call::GetLease) => sim.answer(Answer::Lease(Ok(Some(lease("1"))))),
        _ => a,
    };
    let Some(Call::UpdateLease(l)) = call(&a) else {
        panic!("{a:?}")
    };
    let l = l.clone();
    sim.answer(Answer::LeaseWritten(Ok(l)));
    sim.step(Input::Watch(WatchEvent::Failed));
    assert!(!sim.state.server_down());
    // The next renewal: 5 tries, none answered (the passes before it
    // answered, from a GET: the watch failed).
    loop {
        let a = sim.advance_to_next();
        let calls: Vec<&Call> = a
            .iter()
            .filter_map(|a| match a {
                Action::Call(c) => Some(c),
                _ => None,
            })
            .collect();
        let renewing = calls.iter().any(|c| matches!(c, Call::UpdateLease(_)));
        if calls.iter().any(|c| matches!(c, Call::GetNode(_))) {
            let b = sim.answer(Answer::Node(
                Loop::Sync,
                Ok(Some(node("1", &[("Ready", "True")]))),
            ));
            let base = pass_base(&b).unwrap();
            sim.answer(sync_pass(base, PassReport::default()));
        } else if let Some(base) = pass_base(&a) {
            sim.answer(sync_pass(base, PassReport::default()));
        }
        if renewing {
            break;
        }
    }
    let mut a = Vec::new();
    for _ in 0..5 {
        a = sim.answer(Answer::LeaseWritten(Err(timeout())));
    }
    assert!(lease_done(&a).unwrap().is_err());
    assert!(sim.state.server_down(), "no answer to a whole renewal");
    sim
}

/// While the server does not answer, a renewal is one probe on a
/// connection given up after 0.5 s (doubled for each probe in a row past
/// the third that could not connect, up to the call's deadline; a refused
/// one starts the count again), from half a period to a whole one apart
/// (here the draw 0.5: 7.5 s); nothing else is sent: no pass, no watch.
#[test]
fn a_server_that_does_not_answer_is_probed_by_the_lease_alone() {
    let mut sim = down();
    let mut connects = Vec::new();
    for i in 0..10 {
        let start = sim.now;
        let a = sim.advance_to_next();
        assert_eq!(sim.now - start, Duration::from_millis(7500), "probe {i}");
        assert!(pass(&a).is_none() && call(&a).is_none(), "{a:?}");
        assert!(!a.iter().any(|a| matches!(a, Action::RestartWatch)));
        let (c, within) = probe(&a).expect("a probe");
        assert!(matches!(c, Call::UpdateLease(_)));
        connects.push(within.as_secs_f64());
        // Held (a starting server), refused (nothing listens), then held
        // for good (a slow one).
        let e = if i == 2 { refused() } else { timeout() };
        let a = sim.answer(Answer::LeaseWritten(Err(e)));
        assert!(lease_done(&a).unwrap().is_err(), "one try a probe");
        assert!(probe(&a).is_none() && call(&a).is_none());
    }
    assert_eq!(connects, [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 1.0, 2.0, 4.0]);
    assert_eq!(PROBE_CONNECT, Duration::from_millis(500));
}

/// The first answer ends it: the lease renewed by the probe is followed by
/// a random phase again, and the watch and the held pass resume 3 to 13 s
/// later (here 8 s), the watch first and the pass a second later, from
/// the resumed watch's copy: no GET.
#[test]
fn when_the_server_answers_again_the_watch_and_the_pass_resume_spread() {
    let mut sim = down();
    sim.advance_to_next();
    let a = sim.answer(Answer::LeaseWritten(Ok(lease("2"))));
    assert_eq!(lease_done(&a), Some(Ok(())));
    assert!(!sim.state.server_down());
    let back = sim.now;
    let a = sim.advance_to_next();
    assert_eq!((sim.now - back).as_millis(), 8_000);
    assert!(a.iter().any(|a| matches!(a, Action::RestartWatch)), "{a:?}");
    assert!(pass(&a).is_none() && call(&a).is_none(), "{a:?}");
    sim.step(Input::Watch(WatchEvent::Resumed));
    let a = sim.advance_to_next();
    assert_eq!((sim.now - back).as_millis(), 9_000);
    assert!(
        pass(&a).is_some(),
        "the held pass, from the live copy: {a:?}"
    );
    assert!(call(&a).is_none(), "no GET");
    sim.answer(sync_pass(pass_base(&a).unwrap(), PassReport::default()));
    // The lease's next renewal: a period (+2 %) and half a period more.
    let a = sim.advance_to_next();
    assert_eq!((sim.now - back).as_millis(), 15_200);
    assert!(matches!(call(&a), Some(Call::UpdateLease(_))), "{a:?}");
}

/// A probe answered 403, 429 or 503 (a restarting apiserver before its
/// authorizer's caches are filled, or before it is ready) is a failed
/// probe: the node stays in probes, one try each, until one is served.
#[test]
fn a_probe_answered_403_or_503_is_not_a_server_back() {
    let mut sim = down();
    for code in [403, 429, 503] {
        let a = sim.advance_to_next();
        assert!(probe(&a).is_some(), "{a:?}");
        let a = sim.answer(Answer::LeaseWritten(Err(api(code))));
        assert!(lease_done(&a).unwrap().is_err(), "one try");
        assert!(probe(&a).is_none() && call(&a).is_none(), "{a:?}");
        assert!(sim.state.server_down(), "{code}");
    }
    // A 409 is about the lease itself: the server serves; the next try
    // GETs the lease, as the kubelet's.
    let a = sim.advance_to_next();
    assert!(probe(&a).is_some());
    let a = sim.answer(Answer::LeaseWritten(Err(api(409))));
    assert!(!sim.state.server_down());
    assert!(matches!(call(&a), Some(Call::GetLease)), "{a:?}");
}

/// An answer of any status is an answer: a server that refuses (403, 429,
/// 500) is not down, and its loops keep the kubelet's retries and
/// backoff.
#[test]
fn an_error_status_is_an_answer() {
    let mut sim = Sim::registered("");
    let a = sim.tick();
    assert!(matches!(call(&a), Some(Call::GetLease)));
    let mut a = sim.answer(Answer::Lease(Err(api(500))));
    for _ in 1..5 {
        assert!(matches!(call(&a), Some(Call::GetLease)), "{a:?}");
        a = sim.answer(Answer::Lease(Err(api(503))));
    }
    assert!(lease_done(&a).unwrap().is_err());
    assert!(!sim.state.server_down());
}

/// Companion mode has no lease to probe with: its status sync keeps the
/// kubelet's tries whatever the server does.
#[test]
fn companion_mode_never_holds_its_status_sync() {
    let mut sim = Sim::new("companion: true\nregisterNode: false\n");
    sim.advance_to_next();
    sim.answer(Answer::Node(Loop::Register, Ok(Some(node("1", &[])))));
    let a = sim.advance_to_next();
    let mut a = match pass_base(&a) {
        Some(b) => sim.answer(sync_pass(
            set_condition(&b, "Ready", "False"),
            PassReport::default(),
        )),
        None => a,
    };
    for _ in 0..5 {
        a = match call(&a) {
            Some(Call::GetNode(_)) => sim.answer(Answer::Node(Loop::Sync, Err(timeout()))),
            Some(Call::PatchStatus(..)) => sim.answer(Answer::Patched(Loop::Sync, Err(timeout()))),
            other => panic!("{other:?}"),
        };
    }
    assert!(sync_done(&a).unwrap().is_err());
    assert!(!sim.state.server_down());
    let start = sim.now;
    let a = sim.advance_to_next();
    assert!(sim.now - start <= Duration::from_secs(11));
    assert!(matches!(call(&a), Some(Call::GetNode(Loop::Sync))) || pass(&a).is_some());
}

/// A 429 (API Priority and Fairness) asks to back off: the renewal ends at
/// once (no four more tries), the next one after the backoff stretched by
/// a random part of itself (the draw 0.5: 300 ms); a status pass ends too,
/// the next after the update period. The server is not down.
#[test]
fn a_429_ends_the_renewal_and_the_pass() {
    let mut sim = Sim::registered("nodeStatusUpdateFrequency: 10s\n");
    let a = sim.tick();
    assert!(matches!(call(&a), Some(Call::GetLease)), "{a:?}");
    let base = pass_base(&a).expect("the first pass");
    let a = sim.answer(Answer::Lease(Err(api(429))));
    assert!(lease_done(&a).unwrap().is_err(), "one try: {a:?}");
    assert!(call(&a).is_none());
    assert!(!sim.state.server_down());
    // The pass: its patch answered 429, no GET after it.
    let a = sim.answer(sync_pass(
        set_condition(&base, "Ready", "True"),
        PassReport::default(),
    ));
    assert!(matches!(call(&a), Some(Call::PatchStatus(..))), "{a:?}");
    let a = sim.answer(Answer::Patched(Loop::Sync, Err(api(429))));
    assert!(sync_done(&a).unwrap().is_err(), "the pass ended: {a:?}");
    assert!(call(&a).is_none(), "{a:?}");
    let start = sim.now;
    loop {
        let a = sim.advance_to_next();
        if matches!(call(&a), Some(Call::GetLease)) {
            break;
        }
        assert!(sim.now - start < Duration::from_secs(1), "{a:?}");
    }
    assert_eq!((sim.now - start).as_millis(), 300, "200 ms x 1.5");
}
