//! Whether the API server answers, and what the loops do while it does
//! not: the part of the state that keeps a fleet from coming back as a
//! herd after an outage (issue 32).
//!
//! The kubelet's loops each retry on their own: the status sync runs its 5
//! tries every 10 s, the lease backs off to 7 s, the informer's watch
//! re-lists. When a whole fleet loses its apiserver, every one of those
//! tries is in flight when it comes back, and a restarting apiserver holds
//! the connections it accepts before it serves (its listener opens well
//! before its handlers): they all land in the same second, a peak of 20
//! times the steady rate (docs/benchmarks.md). nodestatus does this
//! instead, a documented departure from the kubelet that changes nothing
//! while the server answers:
//!
//! - **Down** once a whole renewal or status pass failed without an answer
//!   (connection refused or reset, TLS, no answer within the deadline). A
//!   server that answers with any status (even 403, 429 or 500) is not
//!   down: its loops keep the kubelet's tries and backoff.
//! - **While down** only the lease probes: one try a renewal, the next one
//!   from half a lease period to a whole one later (5 to 10 s by default,
//!   at random), and never sooner than the kubelet's lease backoff would
//!   retry (200 ms doubling to 7 s: with a short lease, the backoff rules),
//!   on a connection that must be made within [`PROBE_CONNECT`] (0.5 s;
//!   after three probes in a row that could not connect, doubled at each
//!   further one, up to the call's deadline, so that a slow but live server
//!   is still reached). The status sync holds its passes (the machine's
//!   own shutdown still writes), and a failed watch waits.
//! - **Back** on the first probe that the server serves ([`serving`]: a
//!   probe answered 401, 403, 429 or 5xx, as a restarting apiserver answers
//!   in its first second, is a failed probe): the lease is renewed by that
//!   probe, and its next renewal has a random phase again (the probes that
//!   a restarting server held are served in the same second, and would
//!   otherwise renew together from then on). The watch starts again (one
//!   request that streams the node first: no list) and the held pass runs
//!   a second later (from the watch's copy: no GET), 3 to 13 s after the
//!   answer (30 % to 130 % of a lease period, at random): the fleet's
//!   watches come back spread over 10 s, mostly after its leases, not in
//!   one second with them; and a node that the lifecycle controller marked
//!   Unknown while it was away is Ready again within about 24 s.
//!
//! So at most one request of a node is in flight while the server is away,
//! and only for its connect timeout: when a restarting apiserver starts to
//! serve, it holds the probes of the last 0.5 s (about N/8 a second are
//! sent), with those that probe on in that second: about twice the steady
//! rate of N/10 a second (the kubelet's loops: 20 times,
//! docs/benchmarks.md), and every lease is renewed within 10 s of its
//! return (the kubelet's backoff: 7 s).

use std::time::Duration;

use tokio::time::Instant;

use super::client::ErrorClass;

/// The connect timeout of a probe while the server is down; doubled for
/// each probe in a row past [`PATIENT_PROBES`] that could not connect in
/// time.
pub const PROBE_CONNECT: Duration = Duration::from_millis(500);

/// Probes in a row that may fail to connect within [`PROBE_CONNECT`]
/// before the connect timeout doubles.
pub const PATIENT_PROBES: u32 = 3;

/// Where the server stands, as the loops last found it.
#[derive(Debug, Default)]
pub struct Reach {
    /// Whether a failure without an answer finds the server down: once the
    /// node is registered and the lease runs (not while registering, and
    /// not in companion mode, where the status sync is the only loop and
    /// keeps trying).
    armed: bool,
    /// Since when no answer came, while down.
    down: Option<Down>,
    /// After coming back: when the held pass and the watch resume.
    resume_at: Option<Instant>,
}

#[derive(Debug)]
struct Down {
    since: Instant,
    /// Probes in a row that could not connect in time.
    timeouts: u32,
}

impl Reach {
    /// Whether the server is down.
    pub fn is_down(&self) -> bool {
        self.down.is_some()
    }

    /// Whether the status sync holds its passes and a failed watch waits:
    /// while the server is down, and after it came back until the resume
    /// time has been acted on ([`Self::resumed`]).
    pub fn holding(&self) -> bool {
        self.down.is_some() || self.resume_at.is_some()
    }

    /// When the held loops resume (`None` while down or when nothing is
    /// held).
    pub fn resume_at(&self) -> Option<Instant> {
        self.down.is_none().then_some(self.resume_at).flatten()
    }

    /// The connect timeout of a probe, while down: [`PROBE_CONNECT`],
    /// doubled for each probe in a row past the third that could not
    /// connect in time (a restarting apiserver holds connections for
    /// seconds, a slow but live one for ever), up to `deadline`.
    pub fn probe_connect(&self, deadline: Duration) -> Option<Duration> {
        self.down.as_ref().map(|d| {
            let doublings = d.timeouts.saturating_sub(PATIENT_PROBES).min(8);
            (PROBE_CONNECT * 2u32.pow(doublings)).min(deadline)
        })
    }

    /// Whether a failure without an answer finds the server down from now
    /// on ([`Self::failed`]).
    pub fn arm(&mut self, armed: bool) {
        self.armed = armed;
    }

    /// A whole renewal or pass failed with an error of `class` at `now`:
    /// while armed, the server is down if that error was no answer.
    /// Returns whether it went down now.
    pub fn failed(&mut self, class: ErrorClass, now: Instant) -> bool {
        if !self.armed || !unanswered(class) || self.down.is_some() {
            return false;
        }
        self.down = Some(Down {
            since: now,
            timeouts: 0,
        });
        self.resume_at = None;
        true
    }

    /// A probe failed with an error of `class`: one that could not connect
    /// in time counts towards a longer connect timeout; any other (nothing
    /// listens, or an answer of a server not serving yet) starts the count
    /// again.
    pub fn probe_failed(&mut self, class: ErrorClass) {
        if let Some(d) = &mut self.down {
            if class == ErrorClass::Timeout {
                d.timeouts += 1;
            } else {
                d.timeouts = 0;
            }
        }
    }

    /// The server answered at `now`; while down, it is back: the held
    /// loops resume at `resume_at`. Returns how long it was down, when it
    /// was.
    pub fn answered(&mut self, now: Instant, resume_at: Instant) -> Option<Duration> {
        let down = self.down.take()?;
        self.resume_at = Some(resume_at);
        Some(now.saturating_duration_since(down.since))
    }

    /// The held loops resumed.
    pub fn resumed(&mut self) {
        self.resume_at = None;
    }
}

/// How long after a failed probe the next one comes, by the draw `r` in
/// `[0, 1)`: from half the lease `period` to all of it.
pub fn probe_delay(period: Duration, r: f64) -> Duration {
    period.mul_f64(0.5 + 0.5 * r)
}

/// How long after the server answered again the held loops resume, by the
/// draw `r` in `[0, 1)`: from 30 % of a lease `period` to 130 %.
pub fn resume_delay(period: Duration, r: f64) -> Duration {
    period.mul_f64(0.3 + r)
}

/// Whether an error of `class` is no answer from the server.
pub fn unanswered(class: ErrorClass) -> bool {
    matches!(class, ErrorClass::Transport | ErrorClass::Timeout)
}

/// Whether an error of `class` shows a server that serves: an answer
/// about the object itself (404, 409, another status, one that could not
/// be read). A server that does not answer, or answers 401, 403, 429 or
/// 5xx, does not yet, as far as a probe can tell: a restarting
/// kube-apiserver answers 403 to everyone until its authorizer's caches
/// are filled, and 429 or 503 while it is not ready.
pub fn serving(class: ErrorClass) -> bool {
    matches!(
        class,
        ErrorClass::NotFound | ErrorClass::Conflict | ErrorClass::Status | ErrorClass::Decode
    )
}
