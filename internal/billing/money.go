package billing

import (
	"fmt"
	"math/big"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
)

// Money is an exact, non-negative amount of dollars: a 128-bit numerator
// over the fixed denominator Denom.
//
// Every amount sparecap computes is rate × factor × GPU-seconds, where the
// rate has at most 6 decimals (micro-dollars per GPU-hour) and the factor
// is in basis points of the rate (10000 = full price, 5000 = half). So
// amount = micro$/h × bp × GPU-s / (10^6 · 10^4 · 3600), and with
// Denom = 3.6·10^13 every amount is an integer numerator: sums are exact,
// in any order and any split, and nothing is rounded until it is shown.
type Money struct{ hi, lo uint64 }

// Denom is the denominator of every Money value.
const Denom = 36_000_000_000_000

// MicrosPerDollar is the scale of rates: micro-dollars.
const MicrosPerDollar = 1_000_000

// FullBP is the factor of a full price, in basis points.
const FullBP = 10_000

// amount is rate (micro-dollars per GPU-hour) × factor (basis points) ×
// GPU-seconds, as Money. rate×factor stays below 2^64 for any rate under
// $1.8 billion per GPU-hour.
func amount(rateMicros, factorBP uint64, gpuSeconds uint64) Money {
	hi, lo := bits.Mul64(rateMicros*factorBP, gpuSeconds)
	return Money{hi, lo}
}

// Add returns m + o.
func (m Money) Add(o Money) Money {
	lo, carry := bits.Add64(m.lo, o.lo, 0)
	hi, _ := bits.Add64(m.hi, o.hi, carry)
	return Money{hi, lo}
}

// Sub returns m - o; o must not exceed m.
func (m Money) Sub(o Money) Money {
	lo, borrow := bits.Sub64(m.lo, o.lo, 0)
	hi, _ := bits.Sub64(m.hi, o.hi, borrow)
	return Money{hi, lo}
}

// Less reports whether m < o.
func (m Money) Less(o Money) bool {
	return m.hi < o.hi || (m.hi == o.hi && m.lo < o.lo)
}

// IsZero reports whether m is zero.
func (m Money) IsZero() bool { return m.hi == 0 && m.lo == 0 }

// Rat returns m as an exact rational number of dollars.
func (m Money) Rat() *big.Rat {
	n := new(big.Int).SetUint64(m.hi)
	n.Lsh(n, 64)
	n.Or(n, new(big.Int).SetUint64(m.lo))
	return new(big.Rat).SetFrac(n, big.NewInt(Denom))
}

// Round returns m in dollars rounded half to even at decimals places, as
// a plain decimal string ("12.34").
func (m Money) Round(decimals int) string {
	return roundRat(m.Rat(), decimals)
}

// PerUnit returns m divided by n (above 0), in dollars rounded half to
// even at decimals places: the cost of one of n units of work.
func (m Money) PerUnit(n int64, decimals int) string {
	return roundRat(new(big.Rat).Quo(m.Rat(), big.NewRat(n, 1)), decimals)
}

func roundRat(r *big.Rat, decimals int) string {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)
	n := new(big.Int).Mul(r.Num(), scale)
	q, rem := new(big.Int).QuoRem(n, r.Denom(), new(big.Int))
	// Half to even: compare 2·rem with the denominator.
	switch new(big.Int).Lsh(rem, 1).Cmp(r.Denom()) {
	case 1:
		q.Add(q, big.NewInt(1))
	case 0:
		if q.Bit(0) == 1 {
			q.Add(q, big.NewInt(1))
		}
	}
	s := q.String()
	if decimals == 0 {
		return s
	}
	if len(s) <= decimals {
		s = strings.Repeat("0", decimals-len(s)+1) + s
	}
	return s[:len(s)-decimals] + "." + s[len(s)-decimals:]
}

// Exact returns m with every decimal it has, or, when its decimal
// expansion does not end (a price × seconds / 3600 often does not), to 12
// places followed by "…".
func (m Money) Exact() string {
	r := m.Rat()
	if s, ok := finite(r, 12); ok {
		return s
	}
	return roundRat(r, 12) + "…"
}

func finite(r *big.Rat, max int) (string, bool) {
	for d := 0; d <= max; d++ {
		scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(d)), nil)
		n := new(big.Int).Mul(r.Num(), scale)
		if new(big.Int).Rem(n, r.Denom()).Sign() == 0 {
			return roundRat(r, d), true
		}
	}
	return "", false
}

var decimalRE = regexp.MustCompile(`^([0-9]{1,9})(?:\.([0-9]{1,6}))?$`)

// ParseRate reads a price per GPU-hour such as "2.99" into micro-dollars.
func ParseRate(s string) (uint64, error) {
	m := decimalRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("price %q is not a decimal amount of dollars with at most 6 decimals, like \"2.99\"", s)
	}
	// Base 10 explicitly: "09" is not octal.
	whole, _ := strconv.ParseUint(m[1], 10, 64)
	frac, _ := strconv.ParseUint(m[2]+strings.Repeat("0", 6-len(m[2])), 10, 64)
	return whole*MicrosPerDollar + frac, nil
}

// FormatRate writes micro-dollars per GPU-hour as a decimal string without
// trailing zeros beyond two places ("2.99", "0.445", "1.00").
func FormatRate(micros uint64) string {
	s := fmt.Sprintf("%d.%06d", micros/MicrosPerDollar, micros%MicrosPerDollar)
	for strings.HasSuffix(s, "0") && len(s)-strings.Index(s, ".") > 3 {
		s = s[:len(s)-1]
	}
	return s
}

// ParsePercent reads a discount in percent with at most two decimals
// ("50", "12.5") into basis points.
func ParsePercent(s string) (uint64, error) {
	m := regexp.MustCompile(`^([0-9]{1,3})(?:\.([0-9]{1,2}))?$`).FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("discount %q is not a percentage with at most two decimals, like \"50\"", s)
	}
	whole, _ := strconv.ParseUint(m[1], 10, 64)
	frac, _ := strconv.ParseUint(m[2]+strings.Repeat("0", 2-len(m[2])), 10, 64)
	bp := whole*100 + frac
	if bp > FullBP {
		return 0, fmt.Errorf("discount %q is more than 100%%", s)
	}
	return bp, nil
}

// AtFullRate is what gpuSeconds cost at rateMicros per GPU-hour, with no
// discount: what a simulation's useful work would have cost on demand.
func AtFullRate(rateMicros, gpuSeconds uint64) Money { return amount(rateMicros, FullBP, gpuSeconds) }

// Numerator is m's numerator over Denom in decimal: m exactly, as a
// store keeps it.
func (m Money) Numerator() string {
	if m.hi == 0 {
		return strconv.FormatUint(m.lo, 10)
	}
	n := new(big.Int).SetUint64(m.hi)
	n.Lsh(n, 64)
	return n.Or(n, new(big.Int).SetUint64(m.lo)).String()
}

// ParseNumerator is the Money whose Numerator is s.
func ParseNumerator(s string) (Money, error) {
	n, ok := new(big.Int).SetString(s, 10)
	if !ok || n.Sign() < 0 || n.BitLen() > 128 {
		return Money{}, fmt.Errorf("amount %.40q is not a numerator of 128 bits", s)
	}
	lo := new(big.Int).And(n, new(big.Int).SetUint64(^uint64(0))).Uint64()
	return Money{hi: new(big.Int).Rsh(n, 64).Uint64(), lo: lo}, nil
}
