//! Politeness at fleet scale: many agents on one virtual clock, each its
//! own [`State`] with its own random draws, against one API server that
//! can go down and, as a restarting kube-apiserver does, hold the
//! connections it accepts before it serves them. What a fleet of kubelets
//! is to the control plane (KEP-589): renewals spread over the period, no
//! herd after an outage (issue 32's goals: the peak of an idle fleet at
//! most 2x its mean; after an outage at most 3x the steady rate, every
//! lease fresh within 40 s).

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};

use super::*;
use crate::agent::WatchEvent;
use crate::agent::decide::{self, Random};

/// A seeded generator (splitmix64): each agent's own draws, as different
/// as real ones, the same on every run.
struct Seeded(AtomicU64);

impl Random for Seeded {
    fn unit(&self) -> f64 {
        let mut z = self
            .0
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) as f64 / (u64::MAX as f64 + 1.0)
    }
}

/// The API server: up, except during `outage` (seconds after the start),
/// when it refuses connections until `hold` seconds before its end, then
/// accepts them and answers them all when it serves again, 403 for its
/// first `warm` seconds (its authorizer's caches are not filled yet).
#[derive(Debug, Clone, Copy)]
struct Server {
    outage: Option<(f64, f64)>,
    hold: f64,
    warm: f64,
}

/// What became of one request.
enum Fate {
    /// Served at this time.
    Served(f64),
    /// Answered 403 at this time.
    Forbidden(f64),
    /// Refused at this time.
    Refused(f64),
    /// Given up at this time (no answer within the patience).
    Timeout(f64),
}

impl Server {
    /// What becomes of a request sent at `t` by a client that waits at
    /// most `patience` seconds for its connection.
    fn fate(&self, t: f64, patience: f64) -> Fate {
        match self.outage {
            Some((down, up)) if t >= down && t < up => {
                if t < up - self.hold {
                    Fate::Refused(t)
                } else if up - t <= patience {
                    Fate::Forbidden(up)
                } else {
                    Fate::Timeout(t + patience)
                }
            }
            Some((_, up)) if t >= up && t < up + self.warm => Fate::Forbidden(t),
            _ => Fate::Served(t),
        }
    }
}

/// What the fleet did, seen from the server.
#[derive(Debug, Default)]
struct Seen {
    /// When each request that reached the server's handlers was served.
    served: Vec<f64>,
    /// Per agent, when its lease writes succeeded.
    renewed: BTreeMap<usize, Vec<f64>>,
    /// When failed tries were given up (refused or timed out).
    failed: Vec<f64>,
}

/// Something for one agent at a time (its timers are queued apart).
enum Due {
    /// An answer, or what its watch saw.
    Input(Input),
}

/// `n` agents for `secs` seconds: agent `i` starts `i * ramp / n` in, and
/// draws from its own seeded generator.
fn run_fleet(n: usize, ramp: f64, secs: f64, server: Server) -> Seen {
    let t0 = Instant::now();
    let at = |s: f64| t0 + Duration::from_secs_f64(s);
    // The kubelet's defaults: passes every 10 s, a report every 5 min.
    let mut agents: Vec<(State, Seeded)> = (0..n)
        .map(|i| {
            let start = at(ramp * i as f64 / n as f64);
            let mut s = State::new(config(""), "host-a".into(), start);
            s.shared.server = Some(nodestatus_model::node::kubelet::ServerVersion::NEWEST);
            (s, Seeded(AtomicU64::new(i as u64 * 7919 + 1)))
        })
        .collect();
    let mut seen = Seen::default();
    // (time in ns, sequence, agent) -> what is due.
    let mut queue: BinaryHeap<Reverse<(u128, u64, usize)>> = BinaryHeap::new();
    let mut due: BTreeMap<u64, Due> = BTreeMap::new();
    let mut seq = 0u64;
    // Per agent, the time (ns) of its queued timer.
    let mut scheduled: Vec<Option<u128>> = vec![None; n];
    let ns_of = |t: Instant| (t - t0).as_nanos();
    let mut push = |queue: &mut BinaryHeap<_>, due: &mut BTreeMap<u64, Due>, t: f64, i, d| {
        seq += 1;
        due.insert(seq, d);
        queue.push(Reverse(((t * 1e9).round() as u128, seq, i)));
    };
    let push_ns = |queue: &mut BinaryHeap<Reverse<(u128, u64, usize)>>, i, ns: u128| {
        queue.push(Reverse((ns, 0, i)));
    };
    for (i, (s, _)) in agents.iter().enumerate() {
        let w = ns_of(s.next_wakeup().unwrap());
        scheduled[i] = Some(w);
        push_ns(&mut queue, i, w);
    }
    // The watches break when the server goes away.
    if let Some((down, _)) = server.outage {
        for i in 0..n {
            push(
                &mut queue,
                &mut due,
                down,
                i,
                Due::Input(Input::Watch(WatchEvent::Failed)),
            );
        }
    }
    while let Some(Reverse((ns, id, i))) = queue.pop() {
        let t = ns as f64 / 1e9;
        if t > secs {
            break;
        }
        let input = if id == 0 {
            // A timer: only the agent's latest.
            if scheduled[i] != Some(ns) {
                continue;
            }
            scheduled[i] = None;
            Input::Tick
        } else {
            match due.remove(&id).expect("queued") {
                Due::Input(input) => input,
            }
        };
        let (state, rng) = &mut agents[i];
        let ctx = Ctx {
            now: t0 + Duration::from_nanos(ns as u64),
            wall: Timestamp::UNIX_EPOCH,
            rng: &*rng,
        };
        // Passes are answered at once, in the order asked.
        let mut pending: VecDeque<Action> = state.step(input, &ctx).into();
        while let Some(action) = pending.pop_front() {
            let (call, patience) = match action {
                Action::RunPass { base, .. } => {
                    let new = set_condition(&base, "Ready", "True");
                    let a = Answer::Pass(Loop::Sync, Ok((new, PassReport::default())));
                    let a = match a {
                        Answer::Pass(_, r)
                            if matches!(state.phase(), crate::agent::Phase::Registering(_)) =>
                        {
                            Answer::Pass(Loop::Register, r)
                        }
                        a => a,
                    };
                    pending.extend(state.step(Input::Answer(a), &ctx));
                    continue;
                }
                Action::Call(c) => (c, 10.0),
                Action::Probe {
                    call,
                    connect_within,
                } => (call, connect_within.as_secs_f64()),
                Action::RestartWatch => {
                    let e = match server.fate(t, 30.0) {
                        Fate::Served(s) => {
                            seen.served.push(s);
                            (s, WatchEvent::Resumed)
                        }
                        Fate::Forbidden(s) => {
                            seen.served.push(s);
                            (s, WatchEvent::Failed)
                        }
                        Fate::Refused(s) | Fate::Timeout(s) => (s, WatchEvent::Failed),
                    };
                    push(&mut queue, &mut due, e.0, i, Due::Input(Input::Watch(e.1)));
                    continue;
                }
                Action::RecordEvent(_) => {
                    if let Fate::Served(s) = server.fate(t, 10.0) {
                        seen.served.push(s);
                    }
                    continue;
                }
                _ => continue,
            };
            let (when, answer) = match server.fate(t, patience) {
                Fate::Served(s) => {
                    seen.served.push(s);
                    if matches!(call, Call::UpdateLease(_) | Call::CreateLease(_)) {
                        seen.renewed.entry(i).or_default().push(s);
                    }
                    (s, served(&call))
                }
                Fate::Forbidden(s) => {
                    seen.served.push(s);
                    (s, failed(&call, api(403)))
                }
                Fate::Refused(s) => {
                    seen.failed.push(s);
                    (s, failed(&call, refused()))
                }
                Fate::Timeout(s) => {
                    seen.failed.push(s);
                    (s, failed(&call, timeout()))
                }
            };
            push(
                &mut queue,
                &mut due,
                when,
                i,
                Due::Input(Input::Answer(answer)),
            );
        }
        let w = state.next_wakeup().map(ns_of);
        if let Some(w) = w
            && w != scheduled[i].unwrap_or(u128::MAX)
        {
            scheduled[i] = Some(w);
            push_ns(&mut queue, i, w);
        }
    }
    seen
}

/// A refused connection.
fn refused() -> client::Error {
    client::Error::Transport {
        kind: "test",
        source: kube::Error::Service("connection refused".into()),
    }
}

/// The server's answer to `c`.
fn served(c: &Call) -> Answer {
    let ready = || with_meta(node("1", &[("Ready", "True")]), "uid-1", "1");
    match c {
        Call::GetNode(l) => Answer::Node(*l, Ok(Some(ready()))),
        Call::CreateNode(n) => Answer::Created(Ok(with_meta(n.clone(), "uid-1", "1"))),
        Call::PatchStatus(l, _) => Answer::Patched(*l, Ok(ready())),
        Call::GetLease => Answer::Lease(Ok(Some(lease("1")))),
        Call::CreateLease(l) | Call::UpdateLease(l) => Answer::LeaseWritten(Ok(l.clone())),
        Call::GetVersion => {
            Answer::Version(Ok(nodestatus_model::node::kubelet::ServerVersion::NEWEST))
        }
    }
}

/// `c` failed with `e`.
fn failed(c: &Call, e: client::Error) -> Answer {
    match c {
        Call::GetNode(l) => Answer::Node(*l, Err(e)),
        Call::CreateNode(_) => Answer::Created(Err(e)),
        Call::PatchStatus(l, _) => Answer::Patched(*l, Err(e)),
        Call::GetLease => Answer::Lease(Err(e)),
        Call::CreateLease(_) | Call::UpdateLease(_) => Answer::LeaseWritten(Err(e)),
        Call::GetVersion => Answer::Version(Err(e)),
    }
}

/// The most of `times` in any one second of `[from, to)`, and the mean.
fn peak_and_mean(times: &[f64], from: f64, to: f64) -> (usize, f64) {
    let mut bins = BTreeMap::<i64, usize>::new();
    let mut count = 0;
    for t in times.iter().filter(|t| **t >= from && **t < to) {
        *bins.entry(t.floor() as i64).or_default() += 1;
        count += 1;
    }
    (
        bins.values().copied().max().unwrap_or(0),
        count as f64 / (to - from),
    )
}

const UP: Server = Server {
    outage: None,
    hold: 0.0,
    warm: 0.0,
};

/// Renewals spread over the period whatever the start times: agents
/// started at the same instant (a fleet rebooted at once, `simulate`
/// without a ramp) renew at the kubelet's rate of N/10 a second with the
/// peak in one second at most twice the mean, as agents started over a
/// ramp do. (With the kubelet's rule alone, the 4 % jitter spreads agents
/// started together by at most 0.4 s a period: a herd for minutes.)
#[test]
fn a_fleet_renews_its_leases_spread_over_the_period_whatever_its_start() {
    let n = 500;
    for ramp in [0.0, 1.0, 10.0] {
        let seen = run_fleet(n, ramp, 120.0, UP);
        let all: Vec<f64> = seen.renewed.values().flatten().copied().collect();
        let (peak, mean) = peak_and_mean(&all, 30.0, 110.0);
        assert!(
            peak as f64 <= 2.0 * mean,
            "started over {ramp} s: peak {peak}/s against {mean:.1}/s"
        );
        let model = n as f64 / 10.0;
        assert!(
            mean <= 1.01 * model && mean >= 0.95 * model,
            "{mean:.2} renewals a second for {n} agents; the kubelet's model is {model}"
        );
        for (agent, times) in &seen.renewed {
            for w in times.windows(2) {
                assert!(
                    w[1] - w[0] >= 10.0,
                    "agent {agent} renewed {:.1} s apart",
                    w[1] - w[0]
                );
            }
        }
    }
}

/// A 60 s outage whose last 5 s hold the connections, and which answers
/// 403 for its first second back (a restarting apiserver): while the
/// server does not answer, each agent probes with
/// its lease only, every 5 to 10 s, giving up on a connection after
/// 0.5 s; so when it serves again it holds a few probes, not every try of
/// every loop. Every lease is fresh within 11 s of the recovery, the peak
/// of all requests (leases, the watches resuming, the held passes) in any
/// second after it is at most 3x the steady rate, and the renewals are
/// spread again.
#[test]
fn after_an_outage_the_fleet_comes_back_without_a_herd() {
    let n = 500;
    let (down, up) = (60.0, 120.0);
    let seen = run_fleet(
        n,
        0.0,
        300.0,
        Server {
            outage: Some((down, up)),
            hold: 5.0,
            warm: 1.0,
        },
    );
    let (_, steady) = peak_and_mean(&seen.served, 30.0, down);
    let model = n as f64 / 10.0;
    assert!(
        steady >= 0.95 * model && steady <= 1.1 * model,
        "{steady:.1} requests a second before the outage; the model is {model}"
    );
    let slowest = seen
        .renewed
        .values()
        .map(|t| {
            t.iter()
                .find(|t| **t >= up)
                .map(|t| t - up)
                .expect("every agent renews after the outage")
        })
        .fold(0.0, f64::max);
    assert!(
        slowest <= 11.0,
        "the last lease fresh {slowest:.1} s after the recovery"
    );
    let (peak, _) = peak_and_mean(&seen.served, up, up + 120.0);
    assert!(
        peak as f64 <= 3.0 * steady,
        "peak {peak}/s after the recovery against {steady:.1}/s steady"
    );
    let renewals: Vec<f64> = seen.renewed.values().flatten().copied().collect();
    let (peak, mean) = peak_and_mean(&renewals, up + 60.0, 300.0);
    assert!(
        peak as f64 <= 2.0 * mean,
        "renewals after the recovery: peak {peak}/s against {mean:.1}/s"
    );
    // While it was down, one probe an agent every 7.5 s on average, never
    // a try of every loop.
    let (worst, probes) = peak_and_mean(&seen.failed, down + 20.0, up - 5.0);
    assert!(
        probes <= 1.5 * model && (worst as f64) <= 3.0 * model,
        "{probes:.1} failed tries a second late in the outage (peak {worst}) from {n} agents"
    );
}

/// The watches of a fleet fail at the same instant when the apiserver
/// goes away; their restarts (each a list and a watch) are spread over
/// the backoff's delay, not all at its end.
#[test]
fn watches_that_failed_together_restart_spread() {
    let n = 100;
    let mut restarts: Vec<Duration> = (0..n)
        .map(|i| {
            let mut b = decide::Backoff::new(Duration::from_millis(500), Duration::from_secs(30));
            let mut at = Duration::ZERO;
            for _ in 0..6 {
                at += decide::jitter(
                    b.next_delay(),
                    decide::WATCH_RETRY_JITTER,
                    i as f64 / n as f64,
                );
            }
            at
        })
        .collect();
    restarts.sort();
    let spread = restarts[n - 1] - restarts[0];
    assert!(
        spread >= Duration::from_secs(20),
        "the sixth restarts of {n} watches within {spread:?}"
    );
}
