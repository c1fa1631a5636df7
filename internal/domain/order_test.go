package domain

import (
	"testing"
	"time"
)

// TestByCreated: a zero time first (the store's NULLS FIRST), then by
// time, then by ID.
func TestByCreated(t *testing.T) {
	t1 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		ta   time.Time
		ia   string
		tb   time.Time
		ib   string
		want int
	}{
		{time.Time{}, "z", t1, "a", -1},
		{t1, "a", time.Time{}, "z", 1},
		{t1, "z", t1.Add(time.Second), "a", -1},
		{t1, "a", t1, "b", -1},
		{t1, "b", t1, "a", 1},
		{t1, "a", t1, "a", 0},
	} {
		if got := ByCreated(c.ta, c.ia, c.tb, c.ib); got != c.want {
			t.Errorf("ByCreated(%v %s, %v %s) = %d, want %d", c.ta, c.ia, c.tb, c.ib, got, c.want)
		}
	}
}
