//! The pure decisions of the node loops: when to write, what to write, how
//! long to wait. No I/O here, and no clock or random source of its own: the
//! time (`tokio::time::Instant`, so virtual time works) and the random
//! draws come in as arguments, so a test can check every rule with fixed
//! values.

use std::time::Duration;

use tokio::time::Instant;

/// Tries of one status update (`nodeStatusUpdateRetry`).
pub const NODE_STATUS_UPDATE_RETRY: usize = 5;
/// Tries of one lease renewal.
pub const LEASE_UPDATE_RETRY: usize = 5;
/// Jitter factor of the sync and lease periods.
pub const JITTER: f64 = 0.04;
/// Jitter factor of the watch's restart backoff, as client-go's
/// reflector has it (1.0: each delay is stretched by up to itself), so that
/// the watches of a fleet, which all fail at the same instant when the
/// apiserver goes away, do not all list again at the same instants.
pub const WATCH_RETRY_JITTER: f64 = 1.0;
/// The fast status update's period, at start until the node is Ready.
pub const FAST_UPDATE_PERIOD: Duration = Duration::from_millis(100);
/// How long the fast status update may last at most.
pub const FAST_UPDATE_LIMIT: Duration = Duration::from_secs(120);

/// A source of uniform draws in `[0, 1)`.
pub trait Random: Send + Sync {
    /// One draw.
    fn unit(&self) -> f64;
}

/// The thread's random generator.
#[derive(Debug, Default, Clone, Copy)]
pub struct ThreadRandom;

impl Random for ThreadRandom {
    fn unit(&self) -> f64 {
        rand::random::<f64>()
    }
}

/// Always the same draw (tests).
#[derive(Debug, Clone, Copy)]
pub struct FixedRandom(pub f64);

impl Random for FixedRandom {
    fn unit(&self) -> f64 {
        self.0
    }
}

/// Exponential backoff: `initial`, doubling, capped at `max`.
#[derive(Debug, Clone)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff from `initial` to `max`.
    pub fn new(initial: Duration, max: Duration) -> Self {
        Self {
            initial,
            max,
            next: initial,
        }
    }

    /// The registration's: 100 ms doubling to 7 s.
    pub fn registration() -> Self {
        Self::new(Duration::from_millis(100), Duration::from_secs(7))
    }

    /// The lease's: 200 ms doubling to 7 s.
    pub fn lease() -> Self {
        Self::new(Duration::from_millis(200), Duration::from_secs(7))
    }

    /// The next delay.
    pub fn next_delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(self.max);
        d
    }

    /// The delay that [`Self::next_delay`] will return.
    pub fn peek(&self) -> Duration {
        self.next
    }

    /// Back to the initial delay.
    pub fn reset(&mut self) {
        self.next = self.initial;
    }
}

/// `d` plus up to `factor` of itself, by the draw `r` in `[0, 1)`
/// (`wait.Jitter`).
pub fn jitter(d: Duration, factor: f64, r: f64) -> Duration {
    d.mul_f64(1.0 + r * factor)
}

/// When the next periodic report is due (`nodeStatusReportFrequency`).
#[derive(Debug, Clone)]
pub struct ReportSchedule {
    period: Duration,
    last: Option<Instant>,
    /// Seconds added to the period, in `[-period/2, +period/2)`.
    delay: f64,
}

impl ReportSchedule {
    /// A schedule with report period `period`; the first report is due at once.
    pub fn new(period: Duration) -> Self {
        Self {
            period,
            last: None,
            delay: 0.0,
        }
    }

    /// Changes the report period (a live config change), from the last
    /// write on.
    pub fn set_period(&mut self, period: Duration) {
        self.period = period;
    }

    /// Whether an unchanged status must be reported at `now`.
    pub fn due(&self, now: Instant) -> bool {
        self.next_due().is_none_or(|t| now >= t)
    }

    /// When the next report is due (`None`: now).
    pub fn next_due(&self) -> Option<Instant> {
        let last = self.last?;
        let secs = (self.period.as_secs_f64() + self.delay).max(0.0);
        Some(last + Duration::from_secs_f64(secs))
    }

    /// A status was written at `now`. After a change (or the first write
    /// after a restart) the next report comes at a random point of the
    /// period, drawn from `r`; after a purely periodic report, exactly a
    /// period later.
    pub fn written(&mut self, now: Instant, changed: bool, r: f64) {
        let first = self.last.is_none();
        self.last = Some(now);
        self.delay = if changed || first {
            (r - 0.5) * self.period.as_secs_f64()
        } else {
            0.0
        };
    }

    /// Forgets the last report: the next pass reports.
    pub fn force(&mut self) {
        self.last = None;
    }
}

/// Which kind of pass runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// The regular pass, every `nodeStatusUpdateFrequency`.
    Regular,
    /// The fast update at start (every 100 ms until Ready, 2 min at most).
    Fast,
    /// Between regular passes, at once, because a reacting plugin has
    /// matched lines waiting or a watched path changed
    /// ([`crate::streams`]). It writes as a regular pass does, and leaves
    /// the regular schedule as it is.
    Triggered,
}

/// How often passes run for matched lines and watched paths: at once for
/// the first [`TriggerGate::BURST`], then at most one a second, so that a
/// flood of matches makes about one status patch a second, and a single
/// message is written at once.
#[derive(Debug, Clone, Copy)]
pub struct TriggerGate {
    tokens: f64,
    at: Option<Instant>,
}

impl Default for TriggerGate {
    fn default() -> Self {
        Self {
            tokens: Self::BURST,
            at: None,
        }
    }
}

impl TriggerGate {
    /// Passes that may run back to back.
    pub const BURST: f64 = 2.0;
    /// Passes a second, once the burst is spent.
    pub const RATE: f64 = 1.0;

    fn refill(&mut self, now: Instant) {
        if let Some(at) = self.at {
            let elapsed = now.saturating_duration_since(at).as_secs_f64();
            self.tokens = (self.tokens + elapsed * Self::RATE).min(Self::BURST);
        }
        self.at = Some(now);
    }

    /// When a triggered pass may start, from `now` on.
    pub fn next_allowed(&mut self, now: Instant) -> Instant {
        self.refill(now);
        if self.tokens >= 1.0 {
            now
        } else {
            now + Duration::from_secs_f64((1.0 - self.tokens) / Self::RATE)
        }
    }

    /// A triggered pass starts at `now`.
    pub fn take(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = (self.tokens - 1.0).max(0.0);
    }
}

/// Whether a pass writes the status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Write {
    /// Patch: the status changed.
    Change,
    /// Patch: nothing changed but the report period ran out.
    Report,
    /// Write nothing.
    Skip,
}

/// The kubelet's rule: a regular pass patches when the status changed or
/// the report is due; the fast update patches only when the status changed
/// and Ready (after the setters) is not False.
pub fn write(kind: PassKind, changed: bool, due: bool, new_ready: Option<&str>) -> Write {
    match kind {
        PassKind::Fast if changed && new_ready != Some("False") => Write::Change,
        PassKind::Fast => Write::Skip,
        PassKind::Regular | PassKind::Triggered if changed => Write::Change,
        PassKind::Regular | PassKind::Triggered if due => Write::Report,
        PassKind::Regular | PassKind::Triggered => Write::Skip,
    }
}

/// The start-up fast update: every 100 ms until the node is Ready, for at
/// most 2 minutes from `started`.
#[derive(Debug, Clone, Copy)]
pub struct FastUpdate {
    until: Instant,
    done: bool,
}

impl FastUpdate {
    /// The fast update of a run started at `started`.
    pub fn new(started: Instant) -> Self {
        Self {
            until: started + FAST_UPDATE_LIMIT,
            done: false,
        }
    }

    /// Ends the fast update (its patch failed: the kubelet falls back to
    /// the regular sync).
    pub fn end(&mut self) {
        self.done = true;
    }

    /// Whether the fast update still runs at `now`, given whether the node
    /// is Ready; once over, it never comes back.
    pub fn active(&mut self, now: Instant, ready: bool) -> bool {
        if ready || now >= self.until {
            self.done = true;
        }
        !self.done
    }
}

/// The sync loop's timing: the next regular pass every jittered update
/// period, and the fast update in between while it runs.
#[derive(Debug, Clone)]
pub struct SyncClock {
    period: Duration,
    next_regular: Instant,
}

impl SyncClock {
    /// A clock whose first regular pass is due at `now`.
    pub fn new(period: Duration, now: Instant) -> Self {
        Self {
            period,
            next_regular: now,
        }
    }

    /// Starts again at `now`: the first regular pass due at once.
    pub fn restart(&mut self, now: Instant) {
        self.next_regular = now;
    }

    /// Changes the period from the next regular pass on (a live config
    /// change); the pass already scheduled keeps its time.
    pub fn set_period(&mut self, period: Duration) {
        self.period = period;
    }

    /// The kind of pass to run at `now`.
    pub fn kind(&self, now: Instant) -> PassKind {
        if now >= self.next_regular {
            PassKind::Regular
        } else {
            PassKind::Fast
        }
    }

    /// A pass of `kind` ended at `now`; returns how long to sleep. A regular
    /// pass schedules the next one a jittered period later (`JitterUntil`,
    /// sliding: from the end of the pass), whatever its result: the retries
    /// are inside the pass. While `fast` the loop wakes every 100 ms, never
    /// past the next regular pass.
    pub fn after(&mut self, kind: PassKind, now: Instant, fast: bool, r: f64) -> Duration {
        if kind == PassKind::Regular {
            self.next_regular = now + jitter(self.period, JITTER, r);
        }
        let regular = self.next_regular.saturating_duration_since(now);
        if fast {
            regular.min(FAST_UPDATE_PERIOD)
        } else {
            regular
        }
    }
}

/// Where a try of a status update reads the node from: the first from the
/// watch's cache (when it has the node), the others from a fresh GET.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The node as the watch last saw it.
    Cache,
    /// A GET from the apiserver.
    Get,
}

/// The source of try `attempt` (0-based).
pub fn source(attempt: usize, cached: bool) -> Source {
    if attempt == 0 && cached {
        Source::Cache
    } else {
        Source::Get
    }
}

/// Whether the connections are dropped after try `attempt` failed: after
/// any failed try past the first (`onRepeatedHeartbeatFailure`).
pub fn reset_after_failure(attempt: usize) -> bool {
    attempt >= 1
}

/// Whether a node seen from the watch (`incoming`) is at least as new as the
/// one cached: resourceVersions compared as numbers when both are, else the
/// incoming one wins.
pub fn newer(cached: Option<&str>, incoming: Option<&str>) -> bool {
    match (
        cached.and_then(|v| v.parse::<u64>().ok()),
        incoming.and_then(|v| v.parse::<u64>().ok()),
    ) {
        (Some(c), Some(i)) => i >= c,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_cap() {
        let mut b = Backoff::registration();
        let seq: Vec<u128> = (0..9).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(seq, vec![100, 200, 400, 800, 1600, 3200, 6400, 7000, 7000]);
        b.reset();
        assert_eq!(b.next_delay(), Duration::from_millis(100));
        let mut l = Backoff::lease();
        let seq: Vec<u128> = (0..7).map(|_| l.next_delay().as_millis()).collect();
        assert_eq!(seq, vec![200, 400, 800, 1600, 3200, 6400, 7000]);
    }

    #[test]
    fn jitter_adds_up_to_four_percent() {
        let p = Duration::from_secs(10);
        assert_eq!(jitter(p, JITTER, 0.0), p);
        assert_eq!(jitter(p, JITTER, 0.5), Duration::from_millis(10_200));
        assert!(jitter(p, JITTER, 0.999_999) < Duration::from_millis(10_400));
        for _ in 0..100 {
            let d = jitter(p, JITTER, ThreadRandom.unit());
            assert!(d >= p && d < Duration::from_millis(10_400));
        }
    }

    #[test]
    fn the_report_is_due_a_jittered_period_after_a_change_and_exactly_one_after_a_report() {
        let t0 = Instant::now();
        let period = Duration::from_secs(300);
        let mut s = ReportSchedule::new(period);
        assert!(s.due(t0), "the first pass reports");
        // A change at t0, drawn 0.1: due at t0 + 300 s + (0.1 - 0.5) * 300 s = t0 + 180 s.
        s.written(t0, true, 0.1);
        assert_eq!(s.next_due(), Some(t0 + Duration::from_secs(180)));
        assert!(!s.due(t0 + Duration::from_secs(179)));
        assert!(s.due(t0 + Duration::from_secs(180)));
        // A periodic report: exactly one period later, whatever the draw.
        let t1 = t0 + Duration::from_secs(180);
        s.written(t1, false, 0.9);
        assert_eq!(s.next_due(), Some(t1 + period));
        // The draw spans [-period/2, +period/2).
        s.written(t1, true, 0.0);
        assert_eq!(s.next_due(), Some(t1 + Duration::from_secs(150)));
        s.force();
        assert!(s.due(t1));
    }

    #[test]
    fn the_fast_update_patches_only_a_change_that_is_not_not_ready() {
        use PassKind::*;
        assert_eq!(write(Fast, true, true, Some("True")), Write::Change);
        assert_eq!(write(Fast, true, false, None), Write::Change);
        assert_eq!(write(Fast, true, true, Some("False")), Write::Skip);
        assert_eq!(write(Fast, false, true, Some("True")), Write::Skip);
        assert_eq!(write(Regular, true, false, Some("False")), Write::Change);
        assert_eq!(write(Regular, false, true, Some("True")), Write::Report);
        assert_eq!(write(Regular, false, false, Some("True")), Write::Skip);
    }

    #[test]
    fn the_fast_update_ends_at_ready_or_after_two_minutes_and_never_restarts() {
        let t0 = Instant::now();
        let mut f = FastUpdate::new(t0);
        assert!(f.active(t0, false));
        assert!(f.active(t0 + Duration::from_secs(119), false));
        assert!(!f.active(t0 + Duration::from_secs(120), false));
        assert!(
            !f.active(t0 + Duration::from_secs(1), false),
            "over is over"
        );
        let mut g = FastUpdate::new(t0);
        assert!(!g.active(t0, true));
        assert!(!g.active(t0, false));
    }

    #[test]
    fn the_clock_runs_fast_passes_between_regular_ones() {
        let t0 = Instant::now();
        let mut c = SyncClock::new(Duration::from_secs(10), t0);
        assert_eq!(c.kind(t0), PassKind::Regular);
        // Draw 0.5: the next regular pass 10.2 s later; fast: wake in 100 ms.
        assert_eq!(
            c.after(PassKind::Regular, t0, true, 0.5),
            FAST_UPDATE_PERIOD
        );
        let t1 = t0 + FAST_UPDATE_PERIOD;
        assert_eq!(c.kind(t1), PassKind::Fast);
        assert_eq!(
            c.after(PassKind::Fast, t1, false, 0.0),
            Duration::from_millis(10_100)
        );
        assert_eq!(
            c.kind(t0 + Duration::from_millis(10_200)),
            PassKind::Regular
        );
    }

    #[test]
    fn the_first_try_reads_the_cache_and_the_others_get() {
        assert_eq!(source(0, true), Source::Cache);
        assert_eq!(source(0, false), Source::Get);
        for a in 1..NODE_STATUS_UPDATE_RETRY {
            assert_eq!(source(a, true), Source::Get);
        }
        assert!(!reset_after_failure(0));
        assert!(reset_after_failure(1) && reset_after_failure(4));
    }

    #[test]
    fn an_older_watch_event_does_not_replace_a_newer_node() {
        assert!(newer(Some("10"), Some("11")));
        assert!(newer(Some("10"), Some("10")));
        assert!(!newer(Some("10"), Some("9")));
        assert!(newer(None, Some("1")));
        assert!(newer(Some("x"), Some("1")));
    }
}
