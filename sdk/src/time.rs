//! RFC 3339 timestamps without a date library: the API server's
//! `metav1.Time` (seconds) and `MicroTime` (microseconds).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch to (year, month, day, h, m, s), proleptic
/// Gregorian, UTC (Howard Hinnant's `civil_from_days`).
fn civil(secs: i64) -> (i64, u32, u32, u32, u32, u32) {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400) as u32;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, rem / 3600, rem / 60 % 60, rem % 60)
}

fn since_epoch(t: SystemTime) -> Duration {
    t.duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// `2026-01-02T03:04:05Z`, the form of a condition's times.
pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(since_epoch(t).as_secs() as i64);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `2026-01-02T03:04:05.123456Z`, a `MicroTime`.
pub fn rfc3339_micros(t: SystemTime) -> String {
    let dur = since_epoch(t);
    let (y, mo, d, h, mi, s) = civil(dur.as_secs() as i64);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
        dur.subsec_micros()
    )
}

/// The current time as [`rfc3339`] writes it.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
        assert_eq!(rfc3339(t), "2026-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_micros(951_782_400_000_001); // 2000-02-29
        assert_eq!(rfc3339_micros(t), "2000-02-29T00:00:00.000001Z");
    }
}
