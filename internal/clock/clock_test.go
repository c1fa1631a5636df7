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
