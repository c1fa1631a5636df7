package lifecycle

import (
	"context"
	"slices"
	"strings"
	"time"
)

// Earliest is when the first queued key is due, false when none is
// queued. A simulator jumps its virtual clock there (see RunDue).
func (r *Runner) Earliest() (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, its := range r.ready {
		if len(its) > 0 {
			return its[0].due.At, true
		}
	}
	if len(r.q) == 0 {
		return time.Time{}, false
	}
	return r.q[0].due.At, true
}

// RunDue runs, inline, by due time and then key (so that a replay
// repeats whatever the heap did with ties), the steps of every queued
// key due by now: what Run's timer and workers do, on the
// caller's goroutine and without a timer, for a simulation on a virtual
// clock. Keys a step adds for now wait for the next call. It returns the
// errors of the failed steps.
func (r *Runner) RunDue(ctx context.Context) []error {
	now := r.cfg.Clock.Now()
	var items []Item
	r.mu.Lock()
	for len(r.q) > 0 && !r.q[0].due.At.After(now) {
		it := r.q.pop()
		delete(r.queued, it.key)
		items = append(items, Item{Key: it.key, Due: it.due})
	}
	r.mu.Unlock()
	if len(items) == 0 {
		return nil
	}
	slices.SortFunc(items, func(a, b Item) int {
		if c := a.Due.At.Compare(b.Due.At); c != 0 {
			return c
		}
		return strings.Compare(a.Key, b.Key)
	})
	_, errs := r.RunNow(ctx, items, true)
	return errs
}
