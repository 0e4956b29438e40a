//! Kubernetes resource quantities (`2`, `1500m`, `16Gi`, `100M`): one parser
//! ([`parse_go`], apimachinery's `ParseQuantity`), a value exact to the
//! milli-unit ([`Quantity`]), and the canonical formatting the API server
//! uses.

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

    /// A byte count, written in binary units (`memory`; kubelet 1.37 writes
    /// `ephemeral-storage` in decimal, [`Quantity::units`]).
    pub fn bytes(b: u64) -> Self {
        Self {
            millis: b as i128 * 1000,
            format: Format::BinarySI,
        }
    }

    /// Parses the API server's quantity syntax ([`parse_go`]), with at
    /// least one digit, after trimming ASCII whitespace (as the other SDKs
    /// do; Kubernetes itself refuses any). Sub-milli fractions round up, as
    /// the API server does.
    pub fn parse(s: &str) -> Result<Self, String> {
        let err = || format!("{s:?} is not a quantity (for example 2, 500m, 16Gi, 1.5G)");
        let t = s.trim_matches([' ', '\t', '\r', '\n']);
        if t.len() > 64
            || !t
                .bytes()
                .next()
                .is_some_and(|b| b.is_ascii_digit() || b".+-".contains(&b))
        {
            return Err(err());
        }
        let p = parse_go(t).map_err(|_| err())?;
        // Go accepts `.`, `-` and `Gi` as zero; a value needs a digit here.
        let mantissa_end = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(t.len());
        if !t[..mantissa_end].bytes().any(|b| b.is_ascii_digit()) {
            return Err(err());
        }
        let magnitude = p.milli_ceil_wide().ok_or_else(err)?;
        let format = if p.exp2 > 0 {
            Format::BinarySI
        } else {
            Format::DecimalSI
        };
        Ok(Self {
            millis: if p.negative { -magnitude } else { magnitude },
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

/// Why [`parse_go`] refused a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Not the quantity syntax.
    Syntax,
    /// An exponent beyond what nodestatus checks (`1e1001`).
    OutOfRange,
}

/// A parsed quantity: `digits × 10^exp10 × 2^exp2`, with its sign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// Below zero (`-0` is not).
    pub negative: bool,
    /// The digits, without the point.
    pub digits: String,
    /// The power of ten.
    pub exp10: i64,
    /// The power of two (binary suffixes).
    pub exp2: u32,
}

impl Parsed {
    /// The value in thousandths, rounded up (`Quantity.MilliValue` of a
    /// non-negative value), or `None` beyond `i64`, where Go's `MilliValue`
    /// wraps or gives 0 depending on the path its parser took.
    pub fn milli_ceil(&self) -> Option<i128> {
        self.milli_ceil_wide()
            .filter(|m| *m <= i128::from(i64::MAX))
    }

    fn milli_ceil_wide(&self) -> Option<i128> {
        let d = self.digits.trim_start_matches('0');
        if d.is_empty() {
            return Some(0);
        }
        if d.len() > 38 {
            return None;
        }
        let m: i128 = d.parse().ok()?;
        let m = m.checked_mul(1i128.checked_shl(self.exp2)?)?;
        let e = self.exp10 + 3;
        if e >= 0 {
            m.checked_mul(10i128.checked_pow(u32::try_from(e).ok()?)?)
        } else {
            let p = match u32::try_from(-e).ok().and_then(|e| 10i128.checked_pow(e)) {
                Some(p) => p,
                // Smaller than a thousandth: rounds up to one.
                None => return Some(1),
            };
            Some((m + p - 1) / p)
        }
    }
}

/// `resource.ParseQuantity`: `[+-]?digits[.digits][suffix]`, where the
/// suffix is a decimal SI one (`n u m "" k M G T P E`), a binary one
/// (`Ki Mi Gi Ti Pi Ei`) or an exponent (`e3`, `E-2`). As in Go, `1.` and
/// `.5` parse, and a lone sign or `.` is zero.
pub fn parse_go(s: &str) -> Result<Parsed, ParseError> {
    use ParseError::*;
    let b = s.as_bytes();
    if b.is_empty() {
        return Err(Syntax);
    }
    let mut pos = 0;
    let mut negative = false;
    if matches!(b[0], b'+' | b'-') {
        negative = b[0] == b'-';
        pos = 1;
    }
    let digits_from = |p: usize| p + b[p..].iter().take_while(|c| c.is_ascii_digit()).count();
    let int_end = digits_from(pos);
    let int = &s[pos..int_end];
    pos = int_end;
    let mut frac = "";
    if pos < b.len() && b[pos] == b'.' {
        let end = digits_from(pos + 1);
        frac = &s[pos + 1..end];
        pos = end;
    }
    let suffix_start = pos;
    while pos < b.len() && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < b.len() && matches!(b[pos], b'+' | b'-') {
        pos += 1;
    }
    pos = digits_from(pos);
    if pos != b.len() {
        return Err(Syntax);
    }
    let suffix = &s[suffix_start..];
    let (exp10, exp2): (i64, u32) = match suffix {
        "" => (0, 0),
        "n" => (-9, 0),
        "u" => (-6, 0),
        "m" => (-3, 0),
        "k" => (3, 0),
        "M" => (6, 0),
        "G" => (9, 0),
        "T" => (12, 0),
        "P" => (15, 0),
        "E" => (18, 0),
        "Ki" => (0, 10),
        "Mi" => (0, 20),
        "Gi" => (0, 30),
        "Ti" => (0, 40),
        "Pi" => (0, 50),
        "Ei" => (0, 60),
        _ if suffix.len() > 1 && matches!(suffix.as_bytes()[0], b'e' | b'E') => {
            let e: i64 = suffix[1..].parse().map_err(|_| Syntax)?;
            if !(-1000..=1000).contains(&e) {
                return Err(OutOfRange);
            }
            (e, 0)
        }
        _ => return Err(Syntax),
    };
    let digits = format!("{int}{frac}");
    let zero = digits.bytes().all(|c| c == b'0');
    Ok(Parsed {
        negative: negative && !zero,
        exp10: exp10 - frac.len() as i64,
        digits,
        exp2,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdicts of apimachinery 1.20.2's `Quantity.UnmarshalJSON` (built
    /// with Go 1.19 from the API server's own source tree) for these inputs.
    #[test]
    fn quantities_follow_apimachinery() {
        let ok = [
            "0",
            "1",
            "+1",
            "1.",
            ".5",
            ".",
            "-",
            "+",
            "+.",
            "-.",
            "500m",
            "1.5Gi",
            "1e3",
            "1E-3",
            "5e+2",
            "2Ei",
            "0.5n",
            "00012",
            "1000000000000000000000",
            "-0",
            "Gi",
            "e3",
            "1E",
            ".Ki",
            "1e-1000",
        ];
        let bad = [
            "", "1.5.5", "1ki", "1e", "1 Gi", "abc", "1Gib", "1e3.5", "0x10", "--1", "1m5", "1EE",
            "1Ei5",
        ];
        for s in ok {
            assert!(parse_go(s).is_ok(), "{s} should parse");
        }
        for s in bad {
            assert_eq!(
                parse_go(s).unwrap_err(),
                ParseError::Syntax,
                "{s} should not parse"
            );
        }
        assert!(parse_go("-1").unwrap().negative);
        assert!(!parse_go("-0").unwrap().negative);
        let milli = |s: &str| parse_go(s).unwrap().milli_ceil();
        assert_eq!(milli("1.5"), Some(1500));
        assert_eq!(milli("1Ki"), Some(1_024_000));
        assert_eq!(milli("0.9999"), Some(1000));
        assert_eq!(milli("1n"), Some(1));
        assert_eq!(milli("2e-3"), Some(2));
        assert_eq!(milli("1.0000001"), Some(1001));
        assert_eq!(milli("1e-1000"), Some(1));
        assert_eq!(milli("1e100"), None);
        assert_eq!(milli("1000000000000000000000"), None);
    }

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
