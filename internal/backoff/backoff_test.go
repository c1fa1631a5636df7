package backoff

import (
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/random"
)

// TestGapDoublesToMaxWithinItsBand: each gap lies in its band around
// First·2^(fails-1), capped at Max, and the draws spread over the band.
func TestGapDoublesToMaxWithinItsBand(t *testing.T) {
	p := Policy{First: 250 * time.Millisecond, Max: 5 * time.Second, Low: 50, High: 100}
	r := random.New(1)
	for fails, base := range map[int]time.Duration{0: 250 * time.Millisecond, 1: 250 * time.Millisecond, 2: 500 * time.Millisecond,
		3: time.Second, 5: 4 * time.Second, 6: 5 * time.Second, 100: 5 * time.Second} {
		lo, hi := base/2, base
		seenLow, seenHigh := false, false
		for range 200 {
			g := p.Gap(fails, r)
			if g < lo || g > hi {
				t.Fatalf("fails %d: gap %v outside [%v, %v]", fails, g, lo, hi)
			}
			seenLow = seenLow || g < lo+(hi-lo)/4
			seenHigh = seenHigh || g > hi-(hi-lo)/4
		}
		if !seenLow || !seenHigh {
			t.Errorf("fails %d: 200 draws did not spread over [%v, %v]", fails, lo, hi)
		}
	}
}

// TestGapWithoutJitter: zero Low and High mean the gap itself.
func TestGapWithoutJitter(t *testing.T) {
	p := Policy{First: time.Second, Max: 3 * time.Second}
	for fails, want := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 3 * time.Second, 9: 3 * time.Second} {
		if g := p.Gap(fails, random.New(7)); g != want {
			t.Errorf("fails %d: %v, want %v", fails, g, want)
		}
	}
}

// TestSameSeedSameGaps: the jitter is drawn from the seeded source only.
func TestSameSeedSameGaps(t *testing.T) {
	p := Policy{First: time.Millisecond, Max: 100 * time.Millisecond, Low: 50, High: 150}
	a, b := random.New(42), random.New(42)
	for i := 1; i < 20; i++ {
		if ga, gb := p.Gap(i, a), p.Gap(i, b); ga != gb {
			t.Fatalf("failure %d: %v and %v from one seed", i, ga, gb)
		}
	}
}

// TestKeyed: failures count per key and are forgotten on success.
func TestKeyed(t *testing.T) {
	k := NewKeyed(Policy{First: time.Second, Max: time.Minute}, random.New(1))
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	if r := k.Retry("a"); r != (Retry{}) || k.Err("a") != nil {
		t.Fatalf("a fresh key has a backoff: %+v", r)
	}
	boom := errors.New("boom")
	k.Fail("a", t0, boom)
	k.Fail("a", t0.Add(time.Second), boom)
	k.Fail("b", t0, nil)
	if r := k.Retry("a"); !r.FailedAt.Equal(t0.Add(time.Second)) || !r.At.Equal(t0.Add(3*time.Second)) {
		t.Errorf("a after two failures: %+v, want failed at +1s, again at +3s", r)
	}
	if r := k.Retry("b"); !r.At.Equal(t0.Add(time.Second)) {
		t.Errorf("b after one failure: %+v", r)
	}
	if !errors.Is(k.Err("a"), boom) {
		t.Errorf("a's error: %v", k.Err("a"))
	}
	k.OK("a")
	if r := k.Retry("a"); r != (Retry{}) || k.Err("a") != nil {
		t.Errorf("a after a success: %+v, %v", r, k.Err("a"))
	}
	k.Fail("a", t0, boom)
	if r := k.Retry("a"); !r.At.Equal(t0.Add(time.Second)) {
		t.Errorf("a's count did not restart after a success: %+v", r)
	}
}
