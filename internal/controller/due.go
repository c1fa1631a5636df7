package controller

import "time"

// Due says when the control plane next has something to do at the
// clock's now and after: idle is false while it has something to do now
// (a pass under way or asked for, a node's turn running or due); next is
// the earliest later time its loop or a node's turn waits for (zero:
// none). It is the one answer the simulator jumps its virtual clock on
// (Turn returns it) and a harness that drives a server on a virtual clock
// waits for before it moves the clock on.
func (c *Controller) Due() (next time.Time, idle bool) {
	now := c.clock.Now()
	// The signals before the wait: a wake clears the wait first, so a
	// wake in between shows as a cleared wait.
	kicked, moved := c.kicked.Load(), c.movedSig.Load()
	gap, until := c.waitGap.Load(), c.waitUntil.Load()
	switch {
	case until == 0 || !now.Before(time.Unix(0, until)):
		return time.Time{}, false // awake, or its time came
	case kicked || len(c.kick) > 0:
		return time.Time{}, false
	case !gap && (moved || len(c.moves) > 0):
		return time.Time{}, false
	}
	r := c.exec.Runner()
	if r.Busy() {
		return time.Time{}, false
	}
	next = time.Unix(0, until).UTC()
	if at, ok := r.Earliest(); ok && at.Before(next) {
		next = at
	}
	return next, true
}

// waiting records that the loop is about to wait d (for the replan gap
// of a move if gap).
func (c *Controller) waiting(d time.Duration, gap bool) {
	c.waitGap.Store(gap)
	c.waitUntil.Store(c.clock.Now().Add(d).UnixNano())
}

// woke records that the loop woke: the wait first, then the signals it
// answers (a signal sent since is still in its channel).
func (c *Controller) woke() {
	c.waitUntil.Store(0)
	c.kicked.Store(false)
	if !c.waitGap.Load() {
		c.movedSig.Store(false)
	}
}
