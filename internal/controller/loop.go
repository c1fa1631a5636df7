package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// Run runs the control plane until ctx ends: passes of its loop (Turn's
// pass) after each of which it sleeps until a cooldown ends, a Kick, a
// node's turn moved a node, or Interval; and node turns, which the
// executor runs in its worker pools as each comes due (by its own answer,
// by a commit that changed its node, or when its driver woke it), never
// found by a walk of every node. A new term starts by handing the
// executor every node in flight once.
func (c *Controller) Run(ctx context.Context) error {
	r := c.exec.Runner()
	r.Reset()
	c.lastResync = time.Time{}
	var wg sync.WaitGroup
	wg.Go(func() { r.Run(ctx) })
	defer wg.Wait()
	for {
		start := c.clock.Now()
		next, err := c.pass(ctx)
		if err != nil && ctx.Err() == nil {
			c.log.Error("reconcile", "err", err)
		}
		if !c.sleep(ctx, start, c.clock.Now().Sub(start), next) {
			return nil
		}
	}
}

// sleep waits after a pass that started at start and took took until the
// loop is due again (next, at most Interval), kicked, or a node moved
// (then at least the replan gap after start); false once ctx ended.
func (c *Controller) sleep(ctx context.Context, start time.Time, took time.Duration, next time.Time) bool {
	wait := nextWait(next, c.clock.Now(), c.cfg.Interval)
	c.waiting(wait, false)
	select {
	case <-ctx.Done():
		return false
	case <-c.kick:
		c.woke()
	case <-c.moves:
		c.woke()
		// Turns that moved nodes come by the thousand while a fleet comes
		// up: replanning after each batch kept the plan lock from their
		// commits, so the loop replans for them at most every replanGap.
		if gap := start.Add(replanGap(c.cfg.Interval, took)).Sub(c.clock.Now()); gap > 0 {
			c.waiting(gap, true)
			select {
			case <-ctx.Done():
				return false
			case <-c.kick:
			case <-c.clock.After(gap):
			}
			c.woke()
		}
	case <-c.clock.After(wait):
		c.woke()
	}
	return true
}

// Turn is one turn of the control plane at the clock's now, for a caller
// that drives it on a virtual clock (the simulator, tests): a pass (plan
// and commit what changed, hand new nodes to the executor, sweep, finish
// deleted clusters, prune), then the turns of every node due now, inline
// and in a fixed order (by due time, then key). No goroutine runs and
// nothing sleeps, so a run repeats exactly.
//
// It returns when something is next due, as Due would answer once Run's
// loop slept after the same pass: the plan's wake-up, the executor's
// first queued turn, and, if the turns moved nodes, the replan Run would
// make for them half an Interval after the pass (virtual time does not
// pass during a pass). Zero: nothing is due.
func (c *Controller) Turn(ctx context.Context) (time.Time, error) {
	moved := c.moved.Load()
	next, err := c.pass(ctx)
	errs := []error{err}
	r := c.exec.Runner()
	errs = append(errs, r.RunDue(ctx)...)
	now := c.clock.Now()
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if c.moved.Load() != moved {
		earlier(now.Add(replanGap(c.cfg.Interval, 0)))
	}
	if at, ok := r.Earliest(); ok {
		if at.Before(now) {
			at = now // one a turn added for now: at once
		}
		earlier(at)
	}
	return next, errors.Join(errs...)
}

// replanGap is the least time between the starts of two passes the loop
// makes for node steps that moved nodes: half the interval, or four times
// what the last pass took if that is longer, so that such passes hold the
// plan lock a fifth of the time at most. (A million GPUs coming up: a pass
// plans and commits in 40-60 ms, and the steps' transitions wait for the
// same lock.) Kicks (a request, a cooldown's end) do not wait.
func replanGap(interval, took time.Duration) time.Duration {
	return max(interval/2, 4*took)
}

// nextWait is how long the loop sleeps: until next, at most interval.
// Overdue work does not shorten the sleep: steps are the runner's, and
// nothing else is ever overdue.
func nextWait(next, now time.Time, interval time.Duration) time.Duration {
	if next.IsZero() {
		return interval
	}
	d := next.Sub(now)
	if d <= 0 {
		return interval
	}
	return min(d, interval)
}

// pass is one pass of the loop: it records what drivers reported, plans
// and commits what changed, hands the executor every node in flight once a
// term and then every SweepEvery (the backstop for a change no commit or
// driver reported), checks ready nodes for loss when due, finishes
// deleted clusters and prunes old events. It returns when the plan wakes
// next (a cooldown's end), or zero.
func (c *Controller) pass(ctx context.Context) (time.Time, error) {
	if err := c.recordAccess(ctx); err != nil {
		c.log.Warn("cannot record what a cluster's permission check found", "err", err)
	}
	if err := c.recordNotes(ctx); err != nil {
		c.log.Warn("cannot record a driver's note", "err", err)
	}
	c.refreshPools(ctx, c.clock.Now())
	pl, err := c.replan(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := c.clock.Now()
	w := &wake{now: now, next: pl.NextWake}
	w.earlier(c.nextPriceChange(now))
	var errs []error
	if c.lastResync.IsZero() || now.Sub(c.lastResync) >= c.cfg.SweepEvery {
		if err := c.resync(ctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.sweepIfDue(ctx, now); err != nil {
		errs = append(errs, err)
	}
	if err := c.claimsIfDue(ctx, now, w); err != nil {
		errs = append(errs, err)
	}
	if err := c.finishDeletions(ctx); err != nil {
		errs = append(errs, err)
	}
	if err := c.pruneIfDue(ctx); err != nil {
		errs = append(errs, err)
	}
	return w.next, errors.Join(errs...)
}

// wake is the earliest time something is due, as a pass works it out.
type wake struct {
	now, next time.Time
}

// earlier makes t the wake-up if it comes first. Only the future counts:
// see nextWait.
func (w *wake) earlier(t time.Time) {
	if t.After(w.now) && (w.next.IsZero() || t.Before(w.next)) {
		w.next = t
	}
}

// sweepIfDue checks ready nodes for loss when the backstop's time has
// come (a change no watch reported): every ready node whose cluster says
// something of it that needs its step (lifecycle.Attention) is handed to
// the executor. Changes a driver sees reach their node alone (wake).
func (c *Controller) sweepIfDue(ctx context.Context, now time.Time) error {
	if !c.sweepNow.Swap(false) && now.Sub(c.lastSweep) < c.cfg.SweepEvery {
		return nil
	}
	c.lastSweep = now
	s, err := c.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("list ready nodes: %w", err)
	}
	for _, n := range s.Nodes {
		if n.State != domain.NodeReady {
			continue
		}
		if h, err := c.cluster.Health(ctx, n.ClusterID, n.Name); err == nil && lifecycle.Attention(*n, h) {
			c.exec.Runner().Wake(n.ID, time.Time{})
		}
	}
	return nil
}

// pruneIfDue prunes old events when the oldest is due (nextPrune) and
// archives old removed nodes hourly (nextArchive), each at most once a
// minute: work that follows the data, not the clock.
func (c *Controller) pruneIfDue(ctx context.Context) error {
	now := c.clock.Now()
	if !now.Before(c.nextPrune) {
		err := c.store.Update(ctx, func(tx store.Tx) error {
			_, err := tx.PruneEvents(ctx, now.Add(-c.cfg.EventRetention))
			return err
		})
		if err == nil {
			c.nextPrune, err = c.pruneDue(ctx, now)
		}
		if err != nil {
			return fmt.Errorf("prune events: %w", err)
		}
	}
	if !now.Before(c.nextArchive) {
		archived, err := c.archive(ctx, now.Add(-c.cfg.EventRetention))
		if err != nil {
			return fmt.Errorf("archive removed nodes: %w", err)
		}
		c.nextArchive = now.Add(archiveEvery)
		if archived == archiveBatch*archiveBatches {
			c.nextArchive = now.Add(time.Minute) // a backlog left
		}
	}
	return nil
}

// finishDeletions marks deleted clusters whose nodes are all removed as
// gone: those the planner counts no node of (it follows every commit; no
// walk of the clusters).
func (c *Controller) finishDeletions(ctx context.Context) error {
	for _, id := range c.parts.Finished() {
		c.mu.Lock()
		gone := false
		err := c.store.Update(ctx, func(tx store.Tx) error {
			nodes, err := tx.ListNodes(ctx, store.NodeFilter{ClusterID: id})
			if err != nil || len(nodes) > 0 {
				return err
			}
			cur, err := tx.GetCluster(ctx, id)
			if err != nil {
				return err
			}
			cur.DeletedAt, gone = c.clock.Now(), true
			return tx.UpdateCluster(ctx, cur)
		})
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("finish deleting cluster %s: %w", id, err)
		}
		if gone && c.OnClusterGone != nil {
			c.OnClusterGone(id)
		}
	}
	return nil
}
