//! RFC 3339 timestamps without a date library: the API server's
//! `metav1.Time` (seconds) and `MicroTime` (microseconds), written
//! ([`rfc3339`], [`rfc3339_micros`]) and checked as Go parses them
//! ([`go_rfc3339`]).

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

/// Seconds since the epoch of a UTC time as [`rfc3339`] writes it
/// (`2026-01-02T03:04:05Z`, a fraction of a second allowed and dropped);
/// `None` for any other form.
pub fn unix_seconds(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !s.ends_with('Z') {
        return None;
    }
    let n = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (n(0..4)?, n(5..7)?, n(8..10)?);
    let (h, mi, sec) = (n(11..13)?, n(14..16)?, n(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 59 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's `days_from_civil`).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (mo + if mo > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + sec)
}

/// The current time as [`rfc3339`] writes it.
pub fn now() -> String {
    rfc3339(SystemTime::now())
}

/// Whether Go's `time.Parse(time.RFC3339, s)` accepts `s`: `YYYY-MM-DD`,
/// `T`, an hour of one or two digits, `:MM:SS` with seconds 00–59 (no leap
/// second), an optional fraction after `.` or `,`, then `Z` or `±hh:mm`.
pub fn go_rfc3339(s: &str) -> Result<(), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let num = |i: &mut usize, n: usize, what: &str| -> Result<u32, String> {
        let d = b
            .get(*i..*i + n)
            .filter(|d| d.iter().all(u8::is_ascii_digit));
        let d = d.ok_or_else(|| format!("expected {n} digits of {what} at byte {i}"))?;
        *i += n;
        Ok(d.iter().fold(0, |a, c| a * 10 + u32::from(c - b'0')))
    };
    let lit = |i: &mut usize, c: u8| -> Result<(), String> {
        if b.get(*i) == Some(&c) {
            *i += 1;
            Ok(())
        } else {
            Err(format!("expected {:?} at byte {i}", c as char))
        }
    };
    let year = num(&mut i, 4, "year")?;
    lit(&mut i, b'-')?;
    let month = num(&mut i, 2, "month")?;
    if !(1..=12).contains(&month) {
        return Err("month out of range".into());
    }
    lit(&mut i, b'-')?;
    let day = num(&mut i, 2, "day")?;
    lit(&mut i, b'T')?;
    let hour_digits = if b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        2
    } else {
        1
    };
    if num(&mut i, hour_digits, "hour")? > 23 {
        return Err("hour out of range".into());
    }
    lit(&mut i, b':')?;
    if num(&mut i, 2, "minute")? > 59 {
        return Err("minute out of range".into());
    }
    lit(&mut i, b':')?;
    if num(&mut i, 2, "second")? > 59 {
        return Err("second out of range (Go refuses leap seconds)".into());
    }
    if matches!(b.get(i), Some(b'.' | b',')) && b.get(i + 1).is_some_and(u8::is_ascii_digit) {
        i += 1;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
    }
    if b.get(i) == Some(&b'Z') {
        i += 1;
    } else {
        if !matches!(b.get(i), Some(b'+' | b'-')) {
            return Err("expected Z or a ±hh:mm offset".into());
        }
        i += 1;
        num(&mut i, 2, "offset hours")?;
        lit(&mut i, b':')?;
        num(&mut i, 2, "offset minutes")?;
    }
    if i != b.len() {
        return Err(format!("extra text {:?}", &s[i..]));
    }
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if !(1..=days).contains(&day) {
        return Err("day out of range".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_reads_what_rfc3339_writes() {
        for secs in [0i64, 86_401, 1_795_910_400, 951_782_400] {
            let t = UNIX_EPOCH + Duration::from_secs(secs as u64);
            assert_eq!(unix_seconds(&rfc3339(t)), Some(secs));
        }
        assert_eq!(unix_seconds("2026-11-29T00:00:00.5Z"), Some(1_795_910_400));
        assert_eq!(unix_seconds("yesterday"), None);
        assert_eq!(unix_seconds("2026-13-01T00:00:00Z"), None);
    }

    #[test]
    fn formats_known_instants() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_600); // 2026-01-01
        assert_eq!(rfc3339(t), "2026-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_micros(951_782_400_000_001); // 2000-02-29
        assert_eq!(rfc3339_micros(t), "2000-02-29T00:00:00.000001Z");
    }

    /// The verdicts of Go 1.19's `time.Parse(time.RFC3339, …)` and
    /// `metav1.Time.UnmarshalJSON` for these inputs. Go also accepts an
    /// offset like `+-1:00`; nodestatus does not.
    #[test]
    fn times_follow_go() {
        for s in [
            "2026-01-01T00:00:00Z",
            "2026-01-01T0:00:00Z",
            "2024-02-29T23:59:59.123456789+05:30",
            "2026-01-01T00:00:00,5Z",
            "0000-01-01T00:00:00-00:00",
            "2026-01-01T00:00:00+99:99",
            "2026-01-01T00:00:00.1234567891234Z",
        ] {
            assert_eq!(go_rfc3339(s), Ok(()), "{s}");
        }
        for s in [
            "2016-12-31T23:59:60Z",
            "2026-02-29T00:00:00Z",
            "2026-01-01t00:00:00Z",
            "2026-01-01T00:00:00z",
            "2026-01-01 00:00:00Z",
            "2026-1-01T00:00:00Z",
            "2026-01-01T24:00:00Z",
            "2026-01-01T00:00:00",
            "2026-01-01T00:00:00+0100",
            "2026-01-01T00:00:00.Z",
            "2026-13-01T00:00:00Z",
            "2026-01-00T00:00:00Z",
            "2026-01-01T00:00:00Zjunk",
            "",
            "2026-01-01T00:0:00Z",
            "2026-01-01T1:2:03Z",
            "+026-01-01T00:00:00Z",
        ] {
            assert!(go_rfc3339(s).is_err(), "{s}");
        }
    }
}
