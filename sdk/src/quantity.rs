//! Kubernetes resource quantities (`2`, `1500m`, `16Gi`, `100M`), exact to the
//! milli-unit, with the canonical formatting the API server uses.

use std::fmt;

/// A resource quantity, held exactly in thousandths of a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Quantity {
    millis: i128,
    format: Format,
}

/// How a quantity is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Format {
    /// Powers of 1024: `Ki`, `Mi`, `Gi`, ...
    BinarySI,
    /// Powers of 1000: `m`, ``, `k`, `M`, `G`, ...
    DecimalSI,
}

const BINARY: &[(&str, u32)] = &[
    ("Ki", 10),
    ("Mi", 20),
    ("Gi", 30),
    ("Ti", 40),
    ("Pi", 50),
    ("Ei", 60),
];
const DECIMAL: &[(&str, i32)] = &[
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];

impl Quantity {
    /// A value in thousandths of a unit, written in `format`.
    pub fn new(millis: i128, format: Format) -> Self {
        Self { millis, format }
    }

    /// Whole units, written in decimal (`cpu`, `pods`).
    pub fn units(n: i64) -> Self {
        Self {
            millis: n as i128 * 1000,
            format: Format::DecimalSI,
        }
    }

    /// Thousandths of a unit (`1500m` CPU).
    pub fn millis(m: i64) -> Self {
        Self {
            millis: m as i128,
            format: Format::DecimalSI,
        }
    }

    /// A byte count, written in binary units (`memory`, `ephemeral-storage`).
    pub fn bytes(b: u64) -> Self {
        Self {
            millis: b as i128 * 1000,
            format: Format::BinarySI,
        }
    }

    /// Parses the API server's quantity syntax. Sub-milli fractions round up,
    /// as the API server does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("{s:?} is not a quantity (for example 2, 500m, 16Gi, 1.5G)");
        // ASCII whitespace only, as the other SDKs trim it (Kubernetes
        // itself refuses any).
        let t = s.trim_matches([' ', '\t', '\r', '\n']);
        if t.is_empty() || t.len() > 64 {
            return Err(err());
        }
        let num_end = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(t.len());
        let (num, suffix) = t.split_at(num_end);
        let (neg, digits) = match num.as_bytes().first() {
            Some(b'-') => (true, &num[1..]),
            Some(b'+') => (false, &num[1..]),
            _ => (false, num),
        };
        let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
        if (int.is_empty() && frac.is_empty())
            || !int.bytes().all(|b| b.is_ascii_digit())
            || !frac.bytes().all(|b| b.is_ascii_digit())
        {
            return Err(err());
        }
        // value = int.frac * 10^dec_exp * 2^bin_exp
        let (dec_exp, bin_exp, format) = if suffix.is_empty() {
            (0, 0, Format::DecimalSI)
        } else if let Some((_, e)) = BINARY.iter().find(|(n, _)| *n == suffix) {
            (0, *e, Format::BinarySI)
        } else if let Some((_, e)) = DECIMAL.iter().find(|(n, _)| *n == suffix) {
            (*e, 0, Format::DecimalSI)
        } else if let Some(e) = suffix.strip_prefix(['e', 'E']) {
            (e.parse::<i32>().map_err(|_| err())?, 0, Format::DecimalSI)
        } else {
            return Err(err());
        };
        let digits = format!("{int}{frac}");
        let digits = digits.trim_start_matches('0');
        let mantissa: i128 = if digits.is_empty() {
            0
        } else {
            digits.parse().map_err(|_| err())?
        };
        // millis = mantissa * 10^(dec_exp + 3 - frac.len()) * 2^bin_exp
        let exp10 = dec_exp + 3 - frac.len() as i32;
        let scaled = if exp10 >= 0 {
            10i128
                .checked_pow(exp10 as u32)
                .and_then(|p| mantissa.checked_mul(p))
        } else {
            let p = 10i128.checked_pow((-exp10) as u32).ok_or_else(err)?;
            // Round up, as resource.Quantity does for sub-milli precision.
            Some((mantissa + p - 1) / p)
        }
        .and_then(|m| m.checked_mul(1i128 << bin_exp))
        .ok_or_else(err)?;
        Ok(Self {
            millis: if neg { -scaled } else { scaled },
            format,
        })
    }

    /// The value in thousandths of a unit.
    pub fn as_millis(&self) -> i128 {
        self.millis
    }

    /// The value in whole units, rounded up.
    pub fn as_units_ceil(&self) -> i128 {
        self.millis.div_euclid(1000) + i128::from(self.millis.rem_euclid(1000) != 0)
    }

    /// The format it is written in.
    pub fn format(&self) -> Format {
        self.format
    }

    /// `self - other`, never below zero (the kubelet's allocatable rule).
    pub fn saturating_sub(self, other: Quantity) -> Quantity {
        Self {
            millis: (self.millis - other.millis).max(0),
            format: self.format,
        }
    }
}

impl std::ops::Add for Quantity {
    type Output = Quantity;

    /// `self + other`, in `self`'s format.
    fn add(self, other: Quantity) -> Quantity {
        Self {
            millis: self.millis + other.millis,
            format: self.format,
        }
    }
}

impl fmt::Display for Quantity {
    /// The canonical form: the largest suffix that writes the value as a
    /// whole number. As Kubernetes does, a binary quantity under 1Ki is
    /// written in decimal (`1000` bytes is `1k`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let m = self.millis;
        if m % 1000 != 0 {
            return write!(f, "{m}m");
        }
        let units = m / 1000;
        if units == 0 {
            return f.write_str("0");
        }
        match self.format {
            Format::BinarySI if units.abs() >= 1024 => {
                for (name, exp) in BINARY.iter().rev() {
                    let d = 1i128 << exp;
                    if units % d == 0 {
                        return write!(f, "{}{name}", units / d);
                    }
                }
                write!(f, "{units}")
            }
            _ => {
                for (name, exp) in DECIMAL.iter().rev().filter(|(_, e)| *e > 0) {
                    let d = 10i128.pow(*exp as u32);
                    if units % d == 0 {
                        return write!(f, "{}{name}", units / d);
                    }
                }
                write!(f, "{units}")
            }
        }
    }
}

impl std::str::FromStr for Quantity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_api_syntax() {
        assert_eq!(Quantity::parse("2").unwrap().as_millis(), 2000);
        assert_eq!(Quantity::parse("1500m").unwrap().as_millis(), 1500);
        assert_eq!(
            Quantity::parse("100Mi").unwrap().as_millis(),
            100 * 1024 * 1024 * 1000
        );
        assert_eq!(
            Quantity::parse("1.5G").unwrap().as_millis(),
            1_500_000_000_000
        );
        assert_eq!(Quantity::parse("1e3").unwrap().as_millis(), 1_000_000);
        assert_eq!(Quantity::parse("0.0001").unwrap().as_millis(), 1);
        assert_eq!(Quantity::parse("-1").unwrap().as_millis(), -1000);
        for bad in ["", "x", "1X", "1.2.3", "--1", "Mi"] {
            assert!(Quantity::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn formats_canonically() {
        assert_eq!(Quantity::bytes(16 * 1024 * 1024 * 1024).to_string(), "16Gi");
        assert_eq!(Quantity::bytes(32876232 * 1024).to_string(), "32876232Ki");
        assert_eq!(Quantity::bytes(1000).to_string(), "1k");
        assert_eq!(Quantity::bytes(1023).to_string(), "1023");
        assert_eq!(Quantity::units(110).to_string(), "110");
        assert_eq!(Quantity::units(2000).to_string(), "2k");
        assert_eq!(Quantity::millis(1500).to_string(), "1500m");
        assert_eq!(Quantity::bytes(0).to_string(), "0");
        let q = Quantity::parse("100Mi").unwrap();
        assert_eq!(Quantity::parse(&q.to_string()).unwrap(), q);
    }

    #[test]
    fn subtraction_saturates() {
        let cap = Quantity::bytes(1 << 30);
        let r = Quantity::parse("2Gi").unwrap();
        assert_eq!(cap.saturating_sub(r).as_millis(), 0);
        assert_eq!(
            cap.saturating_sub(Quantity::parse("512Mi").unwrap())
                .to_string(),
            "512Mi"
        );
    }
}
