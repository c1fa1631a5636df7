package random

import (
	"regexp"
	"testing"
	"time"
)

// TestSameSeedSameDraws: two sources of one seed draw the same IDs and
// durations; another seed draws others.
func TestSameSeedSameDraws(t *testing.T) {
	a, b, c := New(42), New(42), New(43)
	for i := range 100 {
		ia, ib, ic := a.ID("n-"), b.ID("n-"), c.ID("n-")
		if ia != ib {
			t.Fatalf("draw %d: %s and %s from one seed", i, ia, ib)
		}
		if ia == ic {
			t.Fatalf("draw %d: seeds 42 and 43 both drew %s", i, ia)
		}
		if !regexp.MustCompile(`^n-[0-9a-f]{12}$`).MatchString(ia) {
			t.Fatalf("id %q", ia)
		}
		if da, db := a.Duration(time.Second), b.Duration(time.Second); da != db || da < 0 || da > time.Second {
			t.Fatalf("durations %s and %s", da, db)
		}
	}
	if a.Seed() != 42 || a.Duration(0) != 0 || a.Duration(-time.Second) != 0 {
		t.Fatal("seed or empty durations")
	}
	if FromEntropy().ID("") == FromEntropy().ID("") {
		t.Fatal("two entropy-seeded sources drew the same ID")
	}
}
