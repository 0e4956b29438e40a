//! The value types of the settings: durations, labels, taints, IPs, names.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Deserialize;

use super::Result;

/// A Go-style duration: `10s`, `5m`, `1m30s`, `250ms`, `1h`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct GoDuration(pub Duration);

/// The longest duration [`GoDuration::parse`] accepts: Go's own limit
/// (`time.Duration` is an int64 of nanoseconds, about 292 years). Every field
/// has a much smaller range of its own.
pub const MAX_DURATION: Duration = Duration::from_nanos(i64::MAX as u64);

impl GoDuration {
    /// Parses `1h2m3s4ms` style text, as Go's `time.ParseDuration` does,
    /// with checked arithmetic: a negative duration, or one longer than
    /// [`MAX_DURATION`], is an error.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("{s:?} is not a duration (for example 10s, 5m, 1m30s, 250ms)");
        let t = s.trim();
        if t == "0" {
            return Ok(Self(Duration::ZERO));
        }
        if t.starts_with('-') {
            return Err(format!(
                "{s:?} is negative: give a positive duration such as 10s"
            ));
        }
        let mut rest = t.strip_prefix('+').unwrap_or(t);
        if rest.is_empty() {
            return Err(err());
        }
        let too_long = || {
            format!(
                "{s:?} is too long: the longest duration is 2562047h (about 292 years), and each field has a smaller range"
            )
        };
        let mut total: u128 = 0;
        while !rest.is_empty() {
            let int_end = rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(rest.len());
            let (int, tail) = rest.split_at(int_end);
            let (frac, tail) = match tail.strip_prefix('.') {
                Some(t) => t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len())),
                None => ("", tail),
            };
            if int.is_empty() && frac.is_empty() {
                return Err(err());
            }
            let unit_end = tail
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(tail.len());
            let (unit, next) = tail.split_at(unit_end);
            let nanos: u128 = match unit {
                "ns" => 1,
                "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
                "ms" => 1_000_000,
                "s" => 1_000_000_000,
                "m" => 60_000_000_000,
                "h" => 3_600_000_000_000,
                "" => {
                    return Err(format!(
                        "{s:?} has a number without a unit: add one of ns, us, ms, s, m, h (for example 10s)"
                    ));
                }
                _ => return Err(err()),
            };
            // Leading zeros cannot overflow; any other digit past the 25th does.
            let int = int.trim_start_matches('0');
            let whole: u128 = if int.is_empty() {
                0
            } else if int.len() > 25 {
                return Err(too_long());
            } else {
                int.parse().map_err(|_| err())?
            };
            // Digits past the 18th are below a nanosecond for every unit.
            let frac = &frac[..frac.len().min(18)];
            let part: u128 = if frac.is_empty() {
                0
            } else {
                frac.parse::<u128>().map_err(|_| err())? * nanos / 10u128.pow(frac.len() as u32)
            };
            total = whole
                .checked_mul(nanos)
                .and_then(|w| w.checked_add(part))
                .and_then(|v| v.checked_add(total))
                .filter(|v| *v <= MAX_DURATION.as_nanos())
                .ok_or_else(too_long)?;
            rest = next;
        }
        Ok(Self(Duration::from_nanos(total as u64)))
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = GoDuration;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration such as 10s, 5m or 250ms")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<GoDuration, E> {
                GoDuration::parse(s).map_err(E::custom)
            }
            // A bare number (`10`) reads as YAML's integer: say that it
            // needs a unit, not that a string was expected.
            fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_u128<E: serde::de::Error>(self, n: u128) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_i128<E: serde::de::Error>(self, n: i128) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<GoDuration, E> {
                GoDuration::parse(&n.to_string()).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

impl std::str::FromStr for GoDuration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

/// `nodeLabels`: in the file a map, as a flag `key=value,key=value`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Labels(pub BTreeMap<String, String>);

/// The comma-separated items of a list flag, each cut in two by `cut`; an
/// item it cannot cut is an error that shows the expected `form`.
fn flag_items<'a>(
    s: &'a str,
    form: &'a str,
    cut: fn(&'a str) -> Option<(&'a str, &'a str)>,
) -> impl Iterator<Item = Result<(String, String), String>> + 'a {
    s.split(',').filter(|i| !i.is_empty()).map(move |i| {
        cut(i)
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
            .ok_or_else(|| format!("{i:?} is not {form}"))
    })
}

impl std::str::FromStr for Labels {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        flag_items(s, "key=value", |i| i.split_once('='))
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// `registerWithTaints`: in the file a list of taints, as a flag
/// `key=value:Effect,key:Effect`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Taints(pub Vec<Taint>);

impl std::str::FromStr for Taints {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        flag_items(s, "key=value:Effect", |i| i.rsplit_once(':'))
            .map(|item| {
                let (kv, effect) = item?;
                let (key, value) = kv.split_once('=').unwrap_or((&kv, ""));
                Ok(Taint {
                    key: key.into(),
                    value: value.into(),
                    effect,
                })
            })
            .collect::<Result<_, _>>()
            .map(Self)
    }
}

/// A taint, as `registerWithTaints` lists them.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct Taint {
    /// The taint key.
    pub key: String,
    /// The taint value.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    pub effect: String,
}

pub(super) fn parse_node_ips(s: &str) -> Result<Vec<std::net::IpAddr>, String> {
    let ips: Vec<std::net::IpAddr> = s
        .split(',')
        .map(|p| {
            p.trim()
                .parse()
                .map_err(|_| format!("{p:?} is not an IP address"))
        })
        .collect::<Result<_, _>>()?;
    if ips.len() > 2 || (ips.len() == 2 && ips[0].is_ipv4() == ips[1].is_ipv4()) {
        return Err("give one IP, or two of different families for dual stack".into());
    }
    for ip in &ips {
        let bad = ip.is_loopback()
            || ip.is_multicast()
            || ip.is_unspecified()
            || match ip {
                std::net::IpAddr::V4(v4) => v4.is_link_local(),
                std::net::IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
            };
        if bad {
            return Err(format!(
                "{ip} is loopback, link-local, multicast or unspecified"
            ));
        }
    }
    Ok(ips)
}

/// Parses YAML into JSON (for tools and tests that read manifests).
pub fn yaml_to_json(text: &str) -> Result<serde_json::Value, String> {
    serde_yaml::from_str(text).map_err(|e| e.to_string())
}

/// A byte size written as a Kubernetes quantity (`512Mi`, `2Gi`), in
/// `min..=max` bytes: the error names `field` and the range (`between 64Mi
/// and 64Gi`), then `hint`.
pub(super) fn byte_size(field: &str, value: &str, min: u64, max: u64, hint: &str) -> Result<u64> {
    use nodestatus_apimachinery::quantity::Quantity;
    let bytes = Quantity::parse(value)
        .map_err(|e| super::Error::invalid(field, e))?
        .as_units_ceil();
    if !(i128::from(min)..=i128::from(max)).contains(&bytes) {
        return Err(super::Error::invalid(
            field,
            format!(
                "{value} must be between {} and {}{hint}",
                Quantity::bytes(min),
                Quantity::bytes(max)
            ),
        ));
    }
    Ok(bytes as u64)
}
