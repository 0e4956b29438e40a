//! Politeness at fleet scale: many agents on one virtual clock, each its
//! own [`Sim`] with its own jitter draw, against one API server that can
//! go down. What a fleet of kubelets is to the control plane (KEP-589):
//! renewals spread over the period, no herd after an outage.

use super::*;
use crate::agent::decide;

/// What the fleet sent: when (seconds after the start), which agent, and
/// whether the lease write succeeded.
#[derive(Debug, Clone, Copy)]
struct Write {
    at: f64,
    agent: usize,
    ok: bool,
}

/// `n` agents for `secs` seconds: agent `i` starts `i * ramp / n` in,
/// draws `i / n` for its jitter, and the API server is down during
/// `outage` (seconds after the start). Returns every lease write.
fn run_fleet(n: usize, ramp: f64, secs: f64, outage: Option<(f64, f64)>) -> Vec<Write> {
    let t0 = Instant::now();
    let yaml = "nodeStatusUpdateFrequency: 5m\n";
    let mut sims: Vec<Sim> = (0..n)
        .map(|i| {
            let start = t0 + Duration::from_secs_f64(ramp * i as f64 / n as f64);
            Sim {
                state: State::new(config(yaml), "host-a".into(), start),
                t0: start,
                now: start,
                rng: FixedRandom(i as f64 / n as f64),
            }
        })
        .collect();
    let mut writes = Vec::new();
    while let Some((i, t)) = sims
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.state.next_wakeup().map(|t| (i, t)))
        .min_by_key(|&(_, t)| t)
    {
        let at = (t - t0).as_secs_f64();
        if at > secs {
            break;
        }
        let up = outage.is_none_or(|(from, to)| at < from || at >= to);
        let sim = &mut sims[i];
        sim.now = t.max(sim.now);
        // Every call and pass answered at once, in the order asked.
        let mut pending: std::collections::VecDeque<Action> = sim.tick().into();
        while let Some(action) = pending.pop_front() {
            let Some(answer) = reply(&action, up) else {
                continue;
            };
            if let Answer::LeaseWritten(r) = &answer {
                writes.push(Write {
                    at,
                    agent: i,
                    ok: r.is_ok(),
                });
            }
            pending.extend(sim.answer(answer));
        }
    }
    writes
}

/// The server's answer to one action, if it asks for one.
fn reply(a: &Action, up: bool) -> Option<Answer> {
    let ready = || with_meta(node("1", &[("Ready", "True")]), "uid-1", "1");
    Some(match a {
        Action::RunPass { for_loop, base, .. } => Answer::Pass(
            *for_loop,
            Ok((set_condition(base, "Ready", "True"), PassReport::default())),
        ),
        Action::Call(c) => match c {
            Call::GetNode(l) => Answer::Node(*l, if up { Ok(Some(ready())) } else { down() }),
            Call::CreateNode(n) => Answer::Created(if up {
                Ok(with_meta(n.clone(), "uid-1", "1"))
            } else {
                down()
            }),
            Call::PatchStatus(l, _) => Answer::Patched(*l, if up { Ok(ready()) } else { down() }),
            Call::GetLease => Answer::Lease(if up { Ok(Some(lease("1"))) } else { down() }),
            Call::CreateLease(l) | Call::UpdateLease(l) => {
                Answer::LeaseWritten(if up { Ok(l.clone()) } else { down() })
            }
            Call::GetVersion => Answer::Version(if up {
                Ok(nodestatus_model::node::kubelet::ServerVersion::NEWEST)
            } else {
                down()
            }),
        },
        _ => return None,
    })
}

/// The server is down: no answer.
fn down<T>() -> client::Result<T> {
    Err(timeout())
}

/// The most writes in any one second of `[from, to)`, and the mean.
fn peak_and_mean(writes: &[Write], from: f64, to: f64) -> (usize, f64) {
    let mut bins = std::collections::BTreeMap::<i64, usize>::new();
    let mut count = 0;
    for w in writes.iter().filter(|w| w.ok && w.at >= from && w.at < to) {
        *bins.entry(w.at.floor() as i64).or_default() += 1;
        count += 1;
    }
    (
        bins.values().copied().max().unwrap_or(0),
        count as f64 / (to - from),
    )
}

/// Agents started at the same instant renew together: the 4 % jitter
/// spreads them by at most 0.4 s a period, so a fleet restarted at once
/// is a herd for minutes. Started over a ramp (`simulate --ramp`, a
/// DaemonSet rollout), the renewals are spread from the first period,
/// at the kubelet's rate of N/10 a second.
#[test]
fn a_fleet_started_over_a_ramp_renews_its_leases_spread_over_the_period() {
    let n = 100;
    let together = run_fleet(n, 0.0, 120.0, None);
    let (peak, mean) = peak_and_mean(&together, 20.0, 80.0);
    assert!(
        peak as f64 > 3.0 * mean,
        "started together, peak {peak}/s against {mean:.1}/s: no herd?"
    );
    let ramped = run_fleet(n, 10.0, 120.0, None);
    let (peak, mean) = peak_and_mean(&ramped, 20.0, 80.0);
    assert!(
        peak as f64 <= 2.0 * mean,
        "over a ramp, peak {peak}/s against {mean:.1}/s"
    );
    let model = n as f64 / 10.0;
    assert!(
        mean <= 1.01 * model && mean >= 0.95 * model,
        "{mean:.2} renewals a second for {n} agents; the kubelet's model is {model}"
    );
}

/// After a 60 s outage, every agent's retries keep the phase of its own
/// failure (the backoff runs from it, capped at 7 s), so the fleet comes
/// back within 7 s of the recovery, spread over those seconds: every lease
/// fresh within 40 s, the peak under 3x the steady rate.
#[test]
fn after_an_outage_the_fleet_comes_back_spread_within_7s() {
    let n = 100;
    let (down, up) = (60.0, 120.0);
    let writes = run_fleet(n, 10.0, 200.0, Some((down, up)));
    let (_, steady) = peak_and_mean(&writes, 20.0, down);
    let mut back = vec![None; n];
    for w in writes.iter().filter(|w| w.ok && w.at >= up) {
        back[w.agent].get_or_insert(w.at - up);
    }
    let slowest = back
        .iter()
        .map(|b| b.expect("every agent renews after the outage"))
        .fold(0.0, f64::max);
    assert!(
        slowest <= 7.0,
        "the last lease fresh {slowest:.1} s after the recovery"
    );
    let (peak, _) = peak_and_mean(&writes, up, up + 40.0);
    assert!(
        peak as f64 <= 3.0 * steady,
        "peak {peak}/s after the recovery against {steady:.1}/s steady"
    );
    // During the outage each agent backs off on its own schedule, from its
    // own failure: the tries never come all at once. They are many,
    // though, as the kubelet's: 5 tries a renewal, and backoff from
    // 200 ms, so in the outage's first 7 s each agent renews up to 6
    // times: 3n tries a second at worst (30x the steady renewals), then
    // 5n/7 a second on average at the 7 s cap (up to 2n in one second).
    let mut bins = std::collections::BTreeMap::<i64, usize>::new();
    for w in writes.iter().filter(|w| !w.ok) {
        *bins.entry(w.at.floor() as i64).or_default() += 1;
    }
    let worst = bins.values().copied().max().unwrap_or(0);
    let late = bins
        .range((down as i64 + 20)..(up as i64))
        .map(|(_, c)| *c)
        .max()
        .unwrap_or(0);
    assert!(
        worst <= 3 * n && late <= 2 * n,
        "{worst} failed tries in one second from {n} agents ({late} late in the outage)"
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
