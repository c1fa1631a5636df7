package controller

import "time"

// Settled says that, at the clock's now, Run has nothing left to do until
// the clock moves: its loop waits for a later time with no kick pending
// (and no move, unless it waits out the replan gap of one), and no node
// step is running or due. A harness that drives the server on a virtual
// clock (the simulator's fidelity test, stepping a clock.Fake) waits for
// it before it jumps to the next due time, as the simulator's Tick is
// done by construction.
func (c *Controller) Settled() bool {
	now := c.clock.Now()
	// The signals before the wait: a wake clears the wait first, so a
	// wake in between shows as a cleared wait.
	kicked, moved := c.kicked.Load(), c.movedSig.Load()
	gap, until := c.waitGap.Load(), c.waitUntil.Load()
	switch {
	case until == 0 || !now.Before(time.Unix(0, until)):
		return false // awake, or its time came
	case kicked || len(c.kick) > 0:
		return false
	case !gap && (moved || len(c.moves) > 0):
		return false
	}
	return !c.runner.Busy()
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
