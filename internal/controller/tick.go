package controller

import (
	"context"
	"errors"
	"time"
)

// Tick is one turn of Run's loop on a virtual clock, for a simulation
// that jumps the clock from one due time to the next: a pass (plan,
// commit, hand changed nodes to the runner, sweep, prune), then the
// steps due now, inline and in a fixed order (steprun.RunDue). No
// goroutine runs and nothing sleeps, so a run repeats exactly.
//
// It returns when to tick next: the plan's wake-up, the runner's first
// queued step (now, if a step queued one for now), and, if the steps
// moved nodes, the replan Run would make for them half an Interval
// after the pass (virtual time does not pass during a pass, so Run's
// replanGap is Interval/2 here). Zero: nothing is due.
func (c *Controller) Tick(ctx context.Context) (time.Time, error) {
	moved := c.moved.Load()
	next, err := c.pass(ctx, false)
	errs := []error{err}
	errs = append(errs, c.runner.RunDue(ctx)...)
	now := c.clock.Now()
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.moved.Load() != moved {
		earlier(now.Add(replanGap(c.cfg.Interval, 0)))
	}
	if at, ok := c.runner.Earliest(); ok {
		if at.Before(now) {
			at = now
		}
		earlier(at)
	}
	return next, errors.Join(errs...)
}
