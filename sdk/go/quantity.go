package nodestatus

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Format is how a Quantity is written: in powers of 1000 or of 1024.
type Format uint8

const (
	// DecimalSI writes m, k, M, G, T, P, E.
	DecimalSI Format = iota
	// BinarySI writes Ki, Mi, Gi, Ti, Pi, Ei.
	BinarySI
)

func (f Format) String() string {
	if f == BinarySI {
		return "BinarySI"
	}
	return "DecimalSI"
}

// Quantity is a Kubernetes resource quantity (2, 1500m, 16Gi, 1.5G), exact
// to the milli-unit: Units + Millis/1000 with 0 <= Millis < 1000 (so -1.5 is
// Units -2, Millis 500). Whole units fit in int64 (up to 7Ei).
type Quantity struct {
	Units  int64
	Millis int32
	Format Format
}

// Units is a count of whole units, written in decimal (cpu, pods).
func Units(n int64) Quantity { return Quantity{Units: n} }

// MilliUnits is thousandths of a unit (1500m of CPU).
func MilliUnits(m int64) Quantity {
	u, r := m/1000, m%1000
	if r < 0 {
		u, r = u-1, r+1000
	}
	return Quantity{Units: u, Millis: int32(r)}
}

// Bytes is a byte count, written in binary units (memory).
func Bytes(b uint64) Quantity {
	if b > math.MaxInt64 {
		b = math.MaxInt64
	}
	return Quantity{Units: int64(b), Format: BinarySI}
}

var (
	binarySuffixes  = []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"} // 2^(10 i+10)
	decimalSuffixes = map[string]int{"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
	bigThousand     = big.NewInt(1000)
)

// ParseQuantity parses the API server's syntax: [+-]digits[.digits][suffix]
// with suffix one of n u m k M G T P E Ki Mi Gi Ti Pi Ei or e<exp>/E<exp>.
// ASCII whitespace around it is ignored. A fraction below the milli-unit
// rounds up (away from zero), as the API server does.
func ParseQuantity(s string) (Quantity, error) {
	bad := func() (Quantity, error) {
		return Quantity{}, fmt.Errorf("%q is not a quantity (for example 2, 500m, 16Gi, 1.5G)", s)
	}
	t := strings.Trim(s, " \t\r\n")
	if t == "" || len(t) > 64 {
		return bad()
	}
	end := 0
	for end < len(t) && strings.IndexByte("0123456789.+-", t[end]) >= 0 {
		end++
	}
	num, suffix := t[:end], t[end:]
	neg := strings.HasPrefix(num, "-")
	digits := num
	if neg || strings.HasPrefix(num, "+") {
		digits = num[1:]
	}
	whole, frac, _ := strings.Cut(digits, ".")
	if (whole == "" && frac == "") || !allDigits(whole) || !allDigits(frac) {
		return bad()
	}
	decExp, binExp, format := 0, 0, DecimalSI
	if suffix != "" {
		if i := indexOf(binarySuffixes, suffix); i >= 0 {
			binExp, format = 10*i+10, BinarySI
		} else if e, ok := decimalSuffixes[suffix]; ok {
			decExp = e
		} else if (suffix[0] == 'e' || suffix[0] == 'E') && isExponent(suffix[1:]) {
			var e int
			if _, err := fmt.Sscan(strings.TrimPrefix(suffix[1:], "+"), &e); err != nil {
				return bad()
			}
			decExp = e
		} else {
			return bad()
		}
	}
	mantissa, _ := new(big.Int).SetString("0"+whole+frac, 10)
	exp10 := decExp + 3 - len(frac)
	if exp10 > 38 || exp10 < -38 {
		return bad()
	}
	scaled := new(big.Int)
	if exp10 >= 0 {
		scaled.Mul(mantissa, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(exp10)), nil))
	} else {
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(-exp10)), nil)
		scaled.Add(mantissa, p).Sub(scaled, big.NewInt(1)).Quo(scaled, p) // round up
	}
	scaled.Lsh(scaled, uint(binExp))
	if neg {
		scaled.Neg(scaled)
	}
	q, ok := fromMillis(scaled, format)
	if !ok {
		return Quantity{}, fmt.Errorf("%q is out of range: whole units must fit in 64 bits (up to 7Ei)", s)
	}
	return q, nil
}

// MustParseQuantity is ParseQuantity for constants; it panics on bad input.
func MustParseQuantity(s string) Quantity {
	q, err := ParseQuantity(s)
	if err != nil {
		panic(err)
	}
	return q
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func isExponent(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return s != "" && allDigits(s)
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// QuantityFromMillis is the quantity of this many thousandths of a unit
// (a decimal integer, any size); false when its whole units do not fit in
// int64.
func QuantityFromMillis(millis string, f Format) (Quantity, bool) {
	m, ok := new(big.Int).SetString(millis, 10)
	if !ok {
		return Quantity{}, false
	}
	return fromMillis(m, f)
}

func fromMillis(m *big.Int, f Format) (Quantity, bool) {
	u, r := new(big.Int).DivMod(m, bigThousand, new(big.Int)) // Euclidean: 0 <= r < 1000
	if !u.IsInt64() {
		return Quantity{}, false
	}
	return Quantity{Units: u.Int64(), Millis: int32(r.Int64()), Format: f}, true
}

// AsMillis is the value in thousandths of a unit, as a decimal integer.
func (q Quantity) AsMillis() string { return q.bigMillis().String() }

func (q Quantity) bigMillis() *big.Int {
	m := new(big.Int).Mul(big.NewInt(q.Units), bigThousand)
	return m.Add(m, big.NewInt(int64(q.Millis)))
}

// UnitsCeil is the value in whole units, rounded up.
func (q Quantity) UnitsCeil() int64 {
	if q.Millis > 0 && q.Units < math.MaxInt64 {
		return q.Units + 1
	}
	return q.Units
}

// Cmp is -1, 0 or 1 as q is less than, equal to or greater than o.
func (q Quantity) Cmp(o Quantity) int {
	switch {
	case q.Units < o.Units || (q.Units == o.Units && q.Millis < o.Millis):
		return -1
	case q.Units == o.Units && q.Millis == o.Millis:
		return 0
	}
	return 1
}

// Add is q + o, in q's format, saturating at the int64 range of units.
func (q Quantity) Add(o Quantity) Quantity {
	s, ok := fromMillis(new(big.Int).Add(q.bigMillis(), o.bigMillis()), q.Format)
	if !ok {
		if q.Units > 0 {
			return Quantity{Units: math.MaxInt64, Format: q.Format}
		}
		return Quantity{Units: math.MinInt64, Format: q.Format}
	}
	return s
}

// SubFloor0 is q - o, but never below zero (the kubelet's allocatable rule),
// in q's format.
func (q Quantity) SubFloor0(o Quantity) Quantity {
	d := new(big.Int).Sub(q.bigMillis(), o.bigMillis())
	if d.Sign() < 0 {
		return Quantity{Format: q.Format}
	}
	s, ok := fromMillis(d, q.Format)
	if !ok {
		return Quantity{Units: math.MaxInt64, Format: q.Format}
	}
	return s
}

// String is the canonical form: "<n>m" when not whole, else the largest
// suffix of its format that writes it as a whole number ("16Gi", "2k",
// "1500"); a binary quantity under 1Ki is written in decimal, as
// Kubernetes does (1000 bytes is "1k").
func (q Quantity) String() string {
	if q.Millis != 0 {
		return q.AsMillis() + "m"
	}
	u := q.Units
	if u == 0 {
		return "0"
	}
	if q.Format == BinarySI && (u >= 1024 || u <= -1024) {
		for i := len(binarySuffixes) - 1; i >= 0; i-- {
			d := int64(1) << (10*i + 10)
			if u%d == 0 {
				return fmt.Sprintf("%d%s", u/d, binarySuffixes[i])
			}
		}
		return fmt.Sprint(u)
	}
	for _, s := range []struct {
		name string
		d    int64
	}{{"E", 1e18}, {"P", 1e15}, {"T", 1e12}, {"G", 1e9}, {"M", 1e6}, {"k", 1e3}} {
		if u%s.d == 0 {
			return fmt.Sprintf("%d%s", u/s.d, s.name)
		}
	}
	return fmt.Sprint(u)
}

// MarshalText writes the canonical form, so that a Quantity is a JSON string.
func (q Quantity) MarshalText() ([]byte, error) { return []byte(q.String()), nil }

// UnmarshalText parses a quantity.
func (q *Quantity) UnmarshalText(b []byte) error {
	p, err := ParseQuantity(string(b))
	if err != nil {
		return err
	}
	*q = p
	return nil
}
