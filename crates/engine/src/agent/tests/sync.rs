//! The status sync (`syncNodeStatus`, `updateNodeStatus`,
//! `fastStatusUpdateOnce`).

use std::time::Duration;

use super::*;
use crate::agent::{FAILURES_BEFORE_NOT_READY, Phase, SyncOutcome, WatchEvent};

fn secs(n: f64) -> Duration {
    Duration::from_secs_f64(n)
}

/// A registered agent whose node is Ready=True, past the fast update.
fn steady(yaml: &str) -> Sim {
    let mut sim = Sim::registered(yaml);
    sync_through(&mut sim, |b| set_condition(b, "Ready", "True"));
    sim
}

/// Each pass comes a jittered `nodeStatusUpdateFrequency` after the end of
/// the last (`JitterUntil`, factor 0.04; the draw here is 0.5: +2 %).
#[test]
fn passes_come_every_update_period_with_4_percent_jitter() {
    let mut sim = steady("nodeStatusUpdateFrequency: 10s\n");
    for _ in 0..2 {
        let start = sim.now;
        sync_through(&mut sim, heartbeat);
        assert_eq!((sim.now - start).as_millis(), 10_200);
    }
}

/// Try 0 reads the live copy (the watch's, or the last write's answer);
/// tries 1 to 4 GET; after a failed try past the first, every connection
/// is dropped; after the fifth, the pass fails with the kubelet's error.
#[test]
fn a_pass_is_five_tries_the_first_from_the_live_node_the_others_from_a_get() {
    let mut sim = steady("");
    let a = sim.advance_to_next();
    assert!(pass_base(&a).is_some(), "try 0 from the live copy: {a:?}");
    let a = sim.answer(sync_pass(
        set_condition(&node("2", &[]), "Ready", "False"),
        PassReport::default(),
    ));
    assert!(matches!(call(&a), Some(Call::PatchStatus(..))));
    let mut a = sim.answer(Answer::Patched(Loop::Sync, Err(timeout())));
    assert!(!resets(&a), "not after the first try");
    for attempt in 1..5 {
        assert!(
            matches!(call(&a), Some(Call::GetNode(Loop::Sync))),
            "try {attempt}: {a:?}"
        );
        let b = sim.answer(Answer::Node(
            Loop::Sync,
            Ok(Some(node("2", &[("Ready", "True")]))),
        ));
        let new = set_condition(&pass_base(&b).unwrap(), "Ready", "False");
        sim.answer(sync_pass(new, PassReport::default()));
        a = sim.answer(Answer::Patched(Loop::Sync, Err(api(500))));
        assert!(
            resets(&a),
            "after a failed try past the first: try {attempt}"
        );
    }
    let err = sync_done(&a).expect("the pass ended").unwrap_err();
    assert!(
        err.starts_with("update node status exceeds retry count"),
        "{err}"
    );
    assert!(observed(&a).contains(&Observation::SyncResult("error")));
    assert!(observed(&a).contains(&Observation::LoopError("sync", "server")));
    assert!(
        matches!(sim.state.phase(), Phase::Running),
        "retried at the next period"
    );
}

/// A stale live copy (a failed watch, not listed again) is not trusted:
/// try 0 GETs.
#[test]
fn a_stale_live_copy_is_not_used_by_try_0() {
    let mut sim = steady("");
    sim.step(Input::Watch(WatchEvent::Failed));
    // The failed watch is resumed after its backoff (500 ms, stretched by
    // the draw: 750 ms), before the pass.
    let start = sim.now;
    let a = sim.advance_to_next();
    assert_eq!((sim.now - start).as_millis(), 750);
    assert!(a.iter().any(|a| matches!(a, Action::RestartWatch)), "{a:?}");
    let a = sim.advance_to_next();
    assert!(matches!(call(&a), Some(Call::GetNode(Loop::Sync))), "{a:?}");
    assert!(pass_base(&a).is_none());
    // Resumed: trusted again.
    sim.step(Input::Watch(WatchEvent::Resumed));
    assert!(!sim.state.live().stale);
}

/// Decide from the live node: a change written by someone else (the node
/// lifecycle controller's Ready=Unknown) is the next pass's base, so the
/// Ready setter's True is a change, patched at once.
#[test]
fn a_change_seen_by_the_watch_is_the_next_passs_base() {
    let mut sim = steady("");
    let live = sim.state.live().node.as_deref().unwrap().clone();
    let rv: u64 = live["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let unknown = {
        let mut n = set_condition(&live, "Ready", "Unknown");
        n["metadata"]["resourceVersion"] = json!((rv + 1).to_string());
        n
    };
    sim.step(Input::Watch(WatchEvent::Applied(unknown, false)));
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    assert_eq!(
        super::super::ready_status(&base).as_deref(),
        Some("Unknown")
    );
    let a = sim.answer(sync_pass(
        set_condition(&base, "Ready", "True"),
        PassReport::default(),
    ));
    assert!(
        matches!(call(&a), Some(Call::PatchStatus(..))),
        "a real change: {a:?}"
    );
}

/// An older event (a lower resourceVersion) never replaces a newer node.
#[test]
fn an_older_watch_event_does_not_replace_the_live_node() {
    let mut sim = steady("");
    let held = sim.state.live().node.as_deref().unwrap().clone();
    sim.step(Input::Watch(WatchEvent::Applied(
        node("0", &[("Ready", "False")]),
        false,
    )));
    assert_eq!(sim.state.live().node.as_deref(), Some(&held));
}

/// Nothing changed (heartbeats aside): no PATCH until the report period
/// runs out; after a change, the next report comes at a random point of
/// the period (±50 %: here the draw 0.5, so exactly the period); after a
/// periodic report, exactly one period later.
#[test]
fn an_unchanged_status_is_reported_only_when_the_report_period_runs_out() {
    let mut sim = steady("nodeStatusUpdateFrequency: 10s\nnodeStatusReportFrequency: 1m\n");
    let changed_at = sim.now;
    let mut patched = Vec::new();
    for _ in 0..14 {
        let a = sync_through(&mut sim, heartbeat);
        if let Some(Ok(SyncOutcome::Reported { .. })) = sync_done(&a) {
            patched.push((sim.now - changed_at).as_millis());
        }
        assert!(!matches!(
            sync_done(&a),
            Some(Ok(SyncOutcome::Patched { .. }))
        ));
    }
    // Passes at 10.2 s steps: the first report is due at 60 s (pass 6,
    // 61.2 s); the next exactly 60 s after it (pass 12, 122.4 s).
    assert_eq!(patched, [61_200, 122_400]);
}

/// Fast updates at start: every 100 ms until the node is Ready, patching
/// only a change whose Ready is not False.
#[test]
fn the_fast_update_runs_every_100ms_until_ready_and_skips_not_ready() {
    let mut sim = Sim::registered("");
    // The regular pass at registration: Ready still False.
    let a = sync_through(&mut sim, |b| set_condition(b, "Ready", "False"));
    assert!(matches!(
        sync_done(&a),
        Some(Ok(SyncOutcome::Patched { .. }))
    ));
    let start = sim.now;
    // A fast pass 100 ms later: a change, but Ready False: not patched.
    let a = sync_through(&mut sim, |b| {
        set_condition(&set_condition(b, "X", "True"), "Ready", "False")
    });
    assert_eq!((sim.now - start).as_millis(), 100);
    assert_eq!(sync_done(&a).unwrap(), Ok(SyncOutcome::Unchanged));
    // Ready: patched, and the fast update ends.
    let a = sync_through(&mut sim, |b| set_condition(b, "Ready", "True"));
    assert!(matches!(
        sync_done(&a),
        Some(Ok(SyncOutcome::Patched { .. }))
    ));
    let at = sim.now;
    sync_through(&mut sim, heartbeat);
    assert!(sim.now - at > secs(9.0), "back to the regular period");
}

/// The fast update lasts two minutes at most.
#[test]
fn the_fast_update_stops_after_two_minutes() {
    let mut sim = Sim::registered("");
    let start = sim.now;
    loop {
        sync_through(&mut sim, |b| set_condition(b, "Ready", "False"));
        if sim.now - start > secs(121.0) {
            break;
        }
    }
    let at = sim.now;
    sync_through(&mut sim, |b| set_condition(b, "Ready", "False"));
    assert!(
        sim.now - at >= secs(10.0),
        "regular passes only after 2 min"
    );
}

/// A failed fast pass ends the fast update; the regular sync goes on.
#[test]
fn a_failed_fast_pass_ends_the_fast_update() {
    let mut sim = Sim::registered("");
    sync_through(&mut sim, |b| set_condition(b, "Ready", "False"));
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    let mut a = sim.answer(sync_pass(
        set_condition(&base, "Ready", "True"),
        PassReport::default(),
    ));
    // Answered errors: a server that does not answer is another rule
    // (`agent/reach.rs`).
    for _ in 0..5 {
        if let Some(Call::GetNode(_)) = call(&a) {
            a = sim.answer(Answer::Node(Loop::Sync, Err(api(503))));
        } else {
            a = sim.answer(Answer::Patched(Loop::Sync, Err(api(503))));
        }
    }
    assert!(sync_done(&a).unwrap().is_err());
    let at = sim.now;
    assert!(sim.state.next_wakeup().unwrap() - at > secs(9.0));
}

/// A readiness plugin that fails is counted once a pass, however many
/// tries the pass takes; after FAILURES_BEFORE_NOT_READY passes in a row,
/// the next pass's `ready` setter is told why the node is not ready.
#[test]
fn three_failed_passes_of_a_readiness_plugin_make_a_node_problem() {
    assert_eq!(FAILURES_BEFORE_NOT_READY, 3);
    let mut sim = steady("");
    for pass in 0..FAILURES_BEFORE_NOT_READY {
        let a = sim.advance_to_next();
        let (base, problems, _) = super::pass(&a).unwrap();
        assert!(problems.is_empty(), "pass {pass}: {problems:?}");
        // Two tries, both running the failing plugin.
        let a = sim.answer(sync_pass(
            set_condition(&base, "X", &pass.to_string()),
            report_with("gpu", true),
        ));
        let a = match call(&a) {
            Some(Call::PatchStatus(..)) => sim.answer(Answer::Patched(Loop::Sync, Err(timeout()))),
            _ => a,
        };
        let b = sim.answer(Answer::Node(Loop::Sync, Ok(Some(base.clone()))));
        assert!(pass_base(&b).is_some(), "{a:?} {b:?}");
        let new = heartbeat(&base);
        sim.answer(sync_pass(new, report_with("gpu", true)));
    }
    let a = sim.advance_to_next();
    let (_, problems, _) = super::pass(&a).unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].starts_with("plugin gpu is failing: broken"),
        "{problems:?}"
    );
    // One good pass clears it.
    let base = pass_base(&a).unwrap();
    sim.answer(sync_pass(heartbeat(&base), report_with("gpu", false)));
    let a = sim.advance_to_next();
    assert!(super::pass(&a).unwrap().1.is_empty());
}

/// Only the events of the try whose result reached the server are
/// recorded.
#[test]
fn only_the_events_of_the_try_that_reached_the_server_are_recorded() {
    let mut sim = steady("");
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    let mut report = PassReport::default();
    report.events.push((
        "ready".into(),
        nodestatus_runtime::EmittedEvent {
            event_type: nodestatus_runtime::EventType::Normal,
            reason: "NodeNotReady".into(),
            message: "m".into(),
        },
    ));
    let new = set_condition(&base, "Ready", "False");
    sim.answer(sync_pass(new.clone(), report.clone()));
    let a = sim.answer(Answer::Patched(Loop::Sync, Err(timeout())));
    assert!(events(&a).is_empty());
    sim.answer(Answer::Node(Loop::Sync, Ok(Some(base))));
    sim.answer(sync_pass(new.clone(), report));
    let a = sim.answer(Answer::Patched(
        Loop::Sync,
        Ok(with_meta(new, "uid-1", "9")),
    ));
    assert_eq!(events(&a), ["NodeNotReady"]);
}

/// `NodeSchedulable` / `NodeNotSchedulable` on a flip of
/// `spec.unschedulable` (a cordon), once.
#[test]
fn a_cordon_records_node_not_schedulable_once() {
    let mut sim = steady("");
    let mut cordoned = sim.state.live().node.as_deref().unwrap().clone();
    cordoned["spec"]["unschedulable"] = json!(true);
    cordoned["metadata"]["resourceVersion"] = json!("100");
    sim.step(Input::Watch(WatchEvent::Applied(cordoned, false)));
    let a = sync_through(&mut sim, heartbeat);
    assert_eq!(events(&a), ["NodeNotSchedulable"]);
    let a = sync_through(&mut sim, heartbeat);
    assert!(events(&a).is_empty());
}

/// A deleted node (the PATCH answers 404) is not registered again in this
/// run, as the kubelet's `registrationCompleted`; if someone creates it
/// again, it is kept current.
#[test]
fn a_deleted_node_is_not_registered_again_and_a_recreated_one_is_kept() {
    let mut sim = steady("");
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    sim.answer(sync_pass(
        set_condition(&base, "Ready", "False"),
        PassReport::default(),
    ));
    let a = sim.answer(Answer::Patched(Loop::Sync, Err(api(404))));
    assert!(sync_done(&a).unwrap().unwrap_err().contains("not found"));
    assert!(observed(&a).contains(&Observation::NodeDeleted(true)));
    assert!(
        matches!(sim.state.phase(), Phase::Running),
        "no registration"
    );
    assert!(
        sim.state
            .snapshot()
            .ready_reason(sim.now)
            .unwrap()
            .contains("deleted")
    );
    // The next pass GETs (no live copy): still gone.
    let a = sim.advance_to_next();
    assert!(matches!(call(&a), Some(Call::GetNode(Loop::Sync))));
    let a = sim.answer(Answer::Node(Loop::Sync, Ok(None)));
    assert!(sync_done(&a).unwrap().is_err());
    // Someone creates it again: it is kept current.
    sim.step(Input::Watch(WatchEvent::Applied(
        node("50", &[("Ready", "True")]),
        false,
    )));
    assert!(!sim.state.snapshot().node_gone);
}

/// A watch's list older than the node held (a watch cache behind the
/// node's own registration: the fleet bench at N = 2,500 saw 21 nodes
/// "deleted" a few milliseconds after they registered) does not make the
/// node gone; a list as new or newer without it does.
#[test]
fn a_list_older_than_the_node_held_does_not_make_it_gone() {
    let mut sim = steady("");
    let mut held = sim.state.live().node.as_deref().unwrap().clone();
    held["metadata"]["resourceVersion"] = json!("40");
    sim.step(Input::Watch(WatchEvent::Applied(held, false)));
    for (at, gone) in [(Some("39"), false), (Some("40"), true)] {
        sim.step(Input::Watch(WatchEvent::Restarted));
        sim.step(Input::Watch(WatchEvent::Listing));
        let a = sim.step(Input::Watch(WatchEvent::Listed(at.map(str::to_owned))));
        assert_eq!(sim.state.snapshot().node_gone, gone, "a list at {at:?}");
        assert_eq!(
            observed(&a).contains(&Observation::NodeDeleted(true)),
            gone,
            "a list at {at:?}: {a:?}"
        );
        assert_eq!(sim.state.live().node.is_some(), !gone, "a list at {at:?}");
    }
}

/// `reRegisterDeletedNode: true`: a deleted node is registered again.
#[test]
fn re_register_deleted_node_registers_it_again() {
    let mut sim = steady("reRegisterDeletedNode: true\n");
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    sim.answer(sync_pass(
        set_condition(&base, "Ready", "False"),
        PassReport::default(),
    ));
    sim.answer(Answer::Patched(Loop::Sync, Err(api(404))));
    assert!(matches!(sim.state.phase(), Phase::Registering(_)));
    let a = sim.advance_to_next();
    assert!(pass_base(&a).is_some(), "a registration pass: {a:?}");
}

/// The node's own shutdown: the `ready` setter is told at once, by a pass
/// that starts now and reports whatever changed; a pass that runs finishes
/// first. A cancelled shutdown clears it.
#[test]
fn the_nodes_shutdown_writes_not_ready_at_once() {
    let mut sim = steady("");
    let a = sim.step(Input::NodeShutdown);
    let (_, problems, _) = super::pass(&a).expect("a pass at once");
    assert_eq!(problems, ["node is shutting down"]);
    let base = pass_base(&a).unwrap();
    let a = sim.answer(sync_pass(heartbeat(&base), PassReport::default()));
    assert!(
        matches!(call(&a), Some(Call::PatchStatus(..))),
        "the report is forced: {a:?}"
    );
    let a = sim.answer(Answer::Patched(Loop::Sync, Ok(base)));
    assert!(a.iter().any(|a| matches!(
        a,
        Action::SyncDone {
            for_shutdown: true,
            ..
        }
    )));
    sim.step(Input::NodeShutdownCancelled);
    let a = sim.advance_to_next();
    assert!(super::pass(&a).unwrap().1.is_empty());
}

#[test]
fn a_shutdown_during_a_pass_runs_another_pass_after_it() {
    let mut sim = steady("");
    let a = sim.advance_to_next();
    let base = pass_base(&a).unwrap();
    let a = sim.step(Input::NodeShutdown);
    assert!(super::pass(&a).is_none(), "one pass at a time");
    let a = sim.answer(sync_pass(heartbeat(&base), PassReport::default()));
    let a = match call(&a) {
        Some(Call::PatchStatus(..)) => sim.answer(Answer::Patched(Loop::Sync, Ok(base.clone()))),
        _ => a,
    };
    assert!(a.iter().any(|a| matches!(
        a,
        Action::SyncDone {
            for_shutdown: false,
            ..
        }
    )));
    let (_, problems, _) = super::pass(&a).expect("the shutdown's pass follows at once");
    assert_eq!(problems, ["node is shutting down"]);
}

/// A restart is not an outage: the first pass of a run keeps the node's
/// Ready as it is (the registration's pass, or the first sync after
/// registering an existing node); the next decides.
#[test]
fn only_the_first_pass_of_a_run_keeps_ready() {
    let mut sim = Sim::new("");
    let a = sim.advance_to_next();
    assert!(super::pass(&a).unwrap().2.keep_ready);
    let base = pass_base(&a).unwrap();
    sim.answer(Answer::Pass(
        Loop::Register,
        Ok((base.clone(), PassReport::default())),
    ));
    sim.answer(Answer::Created(Ok(with_meta(base, "u", "1"))));
    let a = sim.advance_to_next();
    assert!(!super::pass(&a).unwrap().2.keep_ready);
}

/// A watch that has not listed the node for two update periods since it
/// restarted is restarted again.
#[test]
fn a_stuck_watch_is_restarted_after_two_periods() {
    let mut sim = steady("nodeStatusUpdateFrequency: 10s\n");
    let t = sim.now;
    sim.step(Input::Watch(WatchEvent::Restarted));
    let a = sync_through(&mut sim, heartbeat);
    assert!(!a.iter().any(|a| matches!(a, Action::RestartWatch)));
    let a = sync_through(&mut sim, heartbeat);
    assert!(sim.now - t > secs(20.0));
    assert!(a.iter().any(|a| matches!(a, Action::RestartWatch)), "{a:?}");
    // Resumed now: not again before two more periods.
    let a = sync_through(&mut sim, heartbeat);
    assert!(
        !a.iter().any(|a| matches!(a, Action::RestartWatch)),
        "{a:?}"
    );
}

/// A live config change: the new period from the next pass.
#[test]
fn a_new_update_period_applies_from_the_next_pass() {
    let mut sim = steady("nodeStatusUpdateFrequency: 10s\n");
    sim.step(Input::Config(config("nodeStatusUpdateFrequency: 20s\n")));
    let start = sim.now;
    sync_through(&mut sim, heartbeat);
    assert_eq!(
        (sim.now - start).as_millis(),
        10_200,
        "the pass already scheduled keeps its time"
    );
    let start = sim.now;
    sync_through(&mut sim, heartbeat);
    assert_eq!((sim.now - start).as_millis(), 20_400);
}

/// A plugin that becomes ready after the start (a background compile)
/// runs from a pass started at once, once the node is registered and no
/// pass runs; before the registration, and while a pass runs, nothing new
/// starts (the registration's pass, or the next one, runs the new set).
#[test]
fn a_plugin_ready_after_the_start_runs_from_a_pass_now() {
    let started =
        |a: &[Action]| pass_base(a).is_some() || matches!(call(a), Some(Call::GetNode(Loop::Sync)));
    let mut sim = Sim::new("");
    assert!(sim.step(Input::PluginsChanged).is_empty());
    sim.register();
    sync_through(&mut sim, heartbeat);
    let a = sim.step(Input::PluginsChanged);
    assert!(started(&a), "{a:?}");
    assert!(
        sim.step(Input::PluginsChanged).is_empty(),
        "a pass runs: the new set waits for it to end"
    );
}

/// Two events of one step (a cordon seen in the pass that also carries a
/// setter's event) are two Event objects: each has a name of its own, so
/// the second create is not refused as AlreadyExists and lost.
#[test]
fn events_of_one_step_have_names_of_their_own() {
    let sim = Sim::registered("");
    let ctx = crate::agent::Ctx {
        now: sim.now,
        wall: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        rng: &sim.rng,
    };
    let name = |reason: &str, plugin: Option<&str>| match sim.state.event(
        &ctx,
        nodestatus_runtime::EventType::Normal,
        reason,
        &format!("Node n1 status is now: {reason}"),
        plugin,
    ) {
        Action::RecordEvent(e) => e.metadata.name.clone().expect("a name"),
        other => panic!("{other:?}"),
    };
    let cordon = name("NodeNotSchedulable", None);
    let ready = name("NodeReady", Some("ready"));
    assert_ne!(cordon, ready);
    assert!(cordon.starts_with("n1."), "{cordon}");
    // The same event at the same instant is one object.
    assert_eq!(cordon, name("NodeNotSchedulable", None));
}

/// One sync pass whose container runtime answered `runtime`; the node is
/// unchanged. Returns what the pass observed.
fn pass_with_runtime(sim: &mut Sim, runtime: Result<&str, &str>) -> Vec<Observation> {
    let a = sim.advance_to_next();
    let base = pass_base(&a).expect("try 0 from the live copy");
    let report = PassReport {
        container_runtime: Some(runtime.map(str::to_owned).map_err(str::to_owned)),
        ..Default::default()
    };
    observed(&sim.answer(sync_pass(base, report)))
        .into_iter()
        .filter(|o| matches!(o, Observation::ContainerRuntime(_)))
        .collect()
}

/// A container runtime that stops answering is said once, however many
/// passes it stays silent, and its return once too (the driver logs each:
/// a warning, then "answers again").
#[test]
fn a_runtime_that_stops_answering_is_said_once_and_so_is_its_return() {
    let mut sim = steady("");
    let gone = || Observation::ContainerRuntime(Err("socket is gone".into()));
    let back = || Observation::ContainerRuntime(Ok("containerd 2.4.0".into()));
    assert_eq!(pass_with_runtime(&mut sim, Ok("containerd 2.4.0")), []);
    assert_eq!(pass_with_runtime(&mut sim, Err("socket is gone")), [gone()]);
    assert_eq!(pass_with_runtime(&mut sim, Err("socket is gone")), []);
    assert_eq!(
        pass_with_runtime(&mut sim, Ok("containerd 2.4.0")),
        [back()]
    );
    assert_eq!(pass_with_runtime(&mut sim, Ok("containerd 2.4.0")), []);
    assert_eq!(pass_with_runtime(&mut sim, Err("socket is gone")), [gone()]);
}

/// A reset after a failed try takes a running watch with it (the
/// kubelet's `closeAllConns` closes the watch's connection too), never a
/// failed one that waits for its own backoff.
#[test]
fn a_reset_takes_a_running_watch_but_not_a_failed_one() {
    let mut sim = steady("");
    for (failed, watch) in [(false, true), (true, false)] {
        if failed {
            sim.step(Input::Watch(WatchEvent::Failed));
        }
        let mut a = loop {
            let a = sim.advance_to_next();
            if pass_base(&a).is_some() || call(&a).is_some() {
                break a;
            }
        };
        if let Some(base) = pass_base(&a) {
            a = sim.answer(sync_pass(
                set_condition(&base, "Ready", "False"),
                PassReport::default(),
            ));
        }
        // Two failed tries: the reset comes after the second.
        let mut resets = Vec::new();
        for _ in 0..2 {
            a = match call(&a) {
                Some(Call::PatchStatus(..)) => {
                    sim.answer(Answer::Patched(Loop::Sync, Err(api(500))))
                }
                Some(Call::GetNode(_)) => sim.answer(Answer::Node(Loop::Sync, Err(api(500)))),
                other => panic!("{other:?}"),
            };
            resets.extend(a.iter().filter_map(|a| match a {
                Action::ResetConnections { watch } => Some(*watch),
                _ => None,
            }));
        }
        assert_eq!(resets, [watch], "watch failed: {failed}");
        // End the pass.
        for _ in 0..3 {
            a = match call(&a) {
                Some(Call::GetNode(_)) => sim.answer(Answer::Node(Loop::Sync, Err(api(500)))),
                _ => break,
            };
        }
    }
}

/// A stream's match (or a watched path's change) wakes a pass at once,
/// between regular passes, which writes a change as a regular pass does;
/// after a burst of two, a flood makes at most one pass a second; a trigger
/// while a pass runs gets one after it; the regular schedule stays where it
/// was.
#[test]
fn matched_lines_wake_a_pass_at_once_and_a_flood_about_one_a_second() {
    // A lease renewed rarely, so that every wakeup here is the sync's.
    let mut sim = steady("nodeStatusUpdateFrequency: 10s\nnodeLeaseDurationSeconds: 3600\n");
    let regular = sim.state.next_wakeup().unwrap();
    sim.now += secs(1.0);
    let a = sim.step(Input::Triggered);
    let base = pass_base(&a).expect("a pass at once");
    let a = sim.answer(sync_pass(
        set_condition(&base, "KernelDeadlock", "True"),
        PassReport::default(),
    ));
    assert!(
        matches!(call(&a), Some(Call::PatchStatus(..))),
        "a change is written at once: {a:?}"
    );
    let mut patched = set_condition(&base, "KernelDeadlock", "True");
    patched["metadata"]["resourceVersion"] = json!("9");
    let a = sim.answer(Answer::Patched(Loop::Sync, Ok(patched)));
    assert!(sync_done(&a).is_some());
    // The second at once too (the burst), unchanged: nothing written.
    let a = sim.step(Input::Triggered);
    let base = pass_base(&a).expect("the burst's second pass");
    let a = sim.answer(sync_pass(base, PassReport::default()));
    assert!(call(&a).is_none(), "nothing changed, nothing due: {a:?}");
    // The third waits a second.
    let a = sim.step(Input::Triggered);
    assert!(pass_base(&a).is_none(), "gated: {a:?}");
    let next = sim.state.next_wakeup().unwrap();
    assert_eq!(next.duration_since(sim.now), secs(1.0));
    let a = sim.advance_to_next();
    let base = pass_base(&a).expect("the gated pass");
    // A trigger while it runs: one more after it, within the gate.
    assert!(sim.step(Input::Triggered).is_empty());
    sim.answer(sync_pass(base, PassReport::default()));
    let again = sim.state.next_wakeup().unwrap();
    assert_eq!(again.duration_since(sim.now), secs(1.0), "the one after it");
    let a = sim.advance_to_next();
    let base = pass_base(&a).expect("the pass for the trigger that came while one ran");
    sim.answer(sync_pass(base, PassReport::default()));
    // No more triggers: the regular pass where it was.
    assert_eq!(sim.state.next_wakeup().unwrap(), regular);
}

/// A server that does not keep a kubelet field as the patch wrote it (a
/// 1.36 server with `NodeDeclaredFeatures` turned off drops
/// `declaredFeatures`): the field is left alone from the next pass on, so
/// the same change is not patched on every pass; a field it kept is still
/// written.
#[test]
fn a_kubelet_field_the_server_drops_is_not_written_again() {
    use nodestatus_model::node::kubelet::{CurrentField, CurrentFields, DECLARED_FEATURES};
    let mut sim = steady("");
    let a = sim.advance_to_next();
    let (_, _, options) = super::pass(&a).unwrap();
    assert_eq!(options.server_drops, CurrentFields::NONE);
    let base = pass_base(&a).unwrap();
    let mut new = heartbeat(&base);
    new["status"]["declaredFeatures"] = json!(DECLARED_FEATURES);
    new["status"]["nodeInfo"]["swap"] = json!({"capacity": 1024});
    let a = sim.answer(sync_pass(new.clone(), PassReport::default()));
    assert!(matches!(call(&a), Some(Call::PatchStatus(..))), "{a:?}");
    // The server's answer: swap kept, the declared features dropped.
    let mut answer = new.clone();
    answer["status"]
        .as_object_mut()
        .unwrap()
        .remove("declaredFeatures");
    answer["metadata"]["resourceVersion"] = json!("9");
    sim.answer(Answer::Patched(Loop::Sync, Ok(answer)));
    let want = CurrentFields::NONE.with(CurrentField::DeclaredFeatures);
    assert_eq!(sim.state.shared.server_drops, want);
    let a = sim.advance_to_next();
    let (_, _, options) = super::pass(&a).unwrap();
    assert_eq!(options.server_drops, want, "the next pass is told");
    // A later answer that drops it again says nothing new.
    sim.answer(sync_pass(pass_base(&a).unwrap(), PassReport::default()));
    assert_eq!(sim.state.shared.server_drops, want);
}
