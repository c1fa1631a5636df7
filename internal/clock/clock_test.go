package clock

import (
	"testing"
	"time"
)

func TestFakeFiresWaitersInOrder(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	a, b := f.After(2*time.Second), f.After(time.Second)
	f.Step(time.Second)
	select {
	case <-b:
	default:
		t.Fatal("1s waiter did not fire")
	}
	select {
	case <-a:
		t.Fatal("2s waiter fired early")
	default:
	}
	f.Step(time.Second)
	<-a
}

func TestScaledRunsFaster(t *testing.T) {
	c := NewScaled(1000)
	start := c.Now()
	time.Sleep(10 * time.Millisecond)
	if d := c.Now().Sub(start); d < 5*time.Second {
		t.Fatalf("10ms of wall time at 1000x gave %v", d)
	}
}

func TestAnchoredContinuesTimeline(t *testing.T) {
	virt := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	realStart := time.Now().Add(-time.Second)
	c := NewAnchored(Anchor{Speed: 60, Virtual: virt, Real: realStart})
	// One wall second at 60x: about a minute past the anchor.
	if d := c.Now().Sub(virt); d < 59*time.Second || d > 2*time.Minute {
		t.Fatalf("anchored clock is %v past its anchor, want about 1m", d)
	}
	if a := c.Anchor(); !a.Virtual.Equal(virt) || a.Speed != 60 {
		t.Fatalf("anchor %+v", a)
	}
}

// TestScaledDoesNotOverflow: 100 days of real time at 1000× is 273 years
// of clock time, more than a time.Duration holds. The clock keeps
// counting (and re-anchors, keeping the same timeline) instead of
// wrapping around.
func TestScaledDoesNotOverflow(t *testing.T) {
	virtual := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	real := time.Now().Add(-100 * 24 * time.Hour)
	c := NewAnchored(Anchor{Speed: 1000, Virtual: virtual, Real: real})
	got := c.Now()
	wantSecs := float64(100*24*3600) * 1000
	if d := float64(got.Unix()-virtual.Unix()) - wantSecs; d < 0 || d > 10*1000 {
		t.Fatalf("now %v: %.0f s after the anchor, want about %.0f", got, float64(got.Unix()-virtual.Unix()), wantSecs)
	}
	// It re-anchored: the next reading continues the same timeline.
	a := c.Anchor()
	if !a.Real.After(real) || !a.Virtual.After(virtual) {
		t.Fatalf("not re-anchored: %+v", a)
	}
	if next := c.Now(); next.Before(got) || next.Sub(got) > time.Minute {
		t.Fatalf("after re-anchoring: %v, then %v", got, next)
	}
	// The old anchor, loaded again (a restart), gives the same time.
	again := NewAnchored(Anchor{Speed: 1000, Virtual: virtual, Real: real}).Now()
	if d := again.Sub(c.Now()); d < -time.Minute || d > time.Minute {
		t.Fatalf("old anchor reads %v, re-anchored clock %v", again, c.Now())
	}
}

func TestScaleKeepsSubSecondPrecision(t *testing.T) {
	origin := time.Date(2026, 12, 1, 0, 0, 0, 500, time.UTC)
	got := scale(origin, 1500*time.Millisecond, 60)
	if want := origin.Add(90 * time.Second); !got.Equal(want) {
		t.Fatalf("scale: %v, want %v", got, want)
	}
}

// TestAnchoredOnBase: a scaled clock over an injected base runs Speed
// times faster than that base, and its After fires on the base's time.
func TestAnchoredOnBase(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	base := NewFake(t0)
	c := NewAnchoredOn(Anchor{Speed: 60, Virtual: t0, Real: t0}, base)
	base.Step(time.Second)
	if got, want := c.Now(), t0.Add(time.Minute); !got.Equal(want) {
		t.Fatalf("after 1s of base time at 60x: %v, want %v", got, want)
	}
	after := c.After(2 * time.Minute)
	base.Step(time.Second)
	select {
	case <-after:
		t.Fatal("fired after 1 of 2 base seconds")
	case <-time.After(20 * time.Millisecond):
	}
	base.Step(time.Second)
	select {
	case got := <-after:
		if want := t0.Add(3 * time.Minute); !got.Equal(want) {
			t.Fatalf("fired at %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("did not fire after 2 base seconds")
	}
}

func TestFakeNextIsTheEarliestWaiter(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	if _, ok := f.Next(); ok {
		t.Fatal("Next with no waiter reported one")
	}
	f.After(3 * time.Second)
	f.After(time.Second)
	if at, ok := f.Next(); !ok || !at.Equal(time.Unix(1, 0).UTC()) {
		t.Fatalf("Next = %v, %v; want 1s", at, ok)
	}
	f.Step(time.Second)
	if at, ok := f.Next(); !ok || !at.Equal(time.Unix(3, 0).UTC()) {
		t.Fatalf("after the 1s waiter fired, Next = %v, %v; want 3s", at, ok)
	}
}
