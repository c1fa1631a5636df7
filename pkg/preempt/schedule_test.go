package preempt

import (
	"testing"
	"time"
)

// TestScheduleFollowsTheMeasuredCost: with a rate, the interval is Daly's
// for the store's measured save time, worked out again after each save;
// before one, the first checkpoint comes early; without a rate, the
// wrapper's interval.
func TestScheduleFollowsTheMeasuredCost(t *testing.T) {
	t.Setenv(EnvPreemptionRate, "4.1")
	t.Setenv(EnvCheckpointInterval, "")
	store, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	s := NewSchedule(store, 10*time.Minute)
	s.First, s.now, s.last = 30*time.Second, func() time.Time { return now }, now
	if s.Rate != 4.1 || s.Interval() != 30*time.Second {
		t.Fatalf("before a save: rate %g, interval %s; want 4.1 and the first checkpoint's 30s", s.Rate, s.Interval())
	}
	now = now.Add(30 * time.Second)
	if !s.Due() {
		t.Fatal("not due after the first interval")
	}
	save := func(step int64, took time.Duration) {
		if _, err := store.Save(step, func(string) error { time.Sleep(took); return nil }); err != nil {
			t.Fatal(err)
		}
		s.Saved()
	}
	save(1, 20*time.Millisecond)
	if want := Interval(4.1, store.Cost()); s.Interval() != want || s.Due() {
		t.Fatalf("after a save of %s: interval %s, due %v; want Daly's %s, not due", store.Cost(), s.Interval(), s.Due(), want)
	}
	before := s.Interval()
	save(2, 120*time.Millisecond)
	if s.Interval() <= before {
		t.Fatalf("a slower save (%s) made the interval %s, not longer than %s", store.Cost(), s.Interval(), before)
	}

	t.Setenv(EnvPreemptionRate, "lots")
	t.Setenv(EnvCheckpointInterval, "2m")
	fixed := NewSchedule(store, 10*time.Minute)
	if fixed.Rate != 0 || fixed.Interval() != 2*time.Minute {
		t.Fatalf("without a rate: rate %g, interval %s; want 0 and the wrapper's 2m", fixed.Rate, fixed.Interval())
	}
}
