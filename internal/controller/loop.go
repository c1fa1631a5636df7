package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/store"
)

// Run reconciles until ctx ends: after each pass it sleeps until a
// cooldown ends, a NotReady node is due to be declared lost, a Kick, or
// Interval. Node steps are the step runner's (package steprun), which
// runs each node when its last step said it is due, and each node a
// commit changed at once, in worker pools of its own: a pass never walks
// the nodes to find the due ones, and a cluster whose API is slow or down
// never holds up another cluster's drains. A new term starts by handing
// the runner every node in flight once.
func (c *Controller) Run(ctx context.Context) error {
	c.runner.Reset()
	c.lastResync = time.Time{}
	var wg sync.WaitGroup
	wg.Go(func() { c.runner.Run(ctx) })
	defer wg.Wait()
	for {
		start := c.clock.Now()
		next, err := c.pass(ctx, false)
		if err != nil && ctx.Err() == nil {
			c.log.Error("reconcile", "err", err)
		}
		took := c.clock.Now().Sub(start)
		wait := nextWait(next, c.clock.Now(), c.cfg.Interval)
		c.waiting(wait, false)
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
			c.woke()
		case <-c.moves:
			c.woke()
			// Steps that moved nodes come by the thousand while a fleet
			// comes up: replanning after each batch kept the plan lock
			// from their transitions, so the loop replans for them at most
			// every replanGap.
			if gap := start.Add(replanGap(c.cfg.Interval, took)).Sub(c.clock.Now()); gap > 0 {
				c.waiting(gap, true)
				select {
				case <-ctx.Done():
					return nil
				case <-c.kick:
				case <-c.clock.After(gap):
				}
				c.woke()
			}
		case <-c.clock.After(wait):
			c.woke()
		}
	}
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

// Reconcile runs one pass and, in it, the step of every node in flight
// and every cleanup pending whose backoff has passed (concurrently, up to
// Config.Workers at a time; with one worker in order, on the caller's
// goroutine), and waits for them: plan and commit what changed, step,
// check ready nodes for loss, finish deleted clusters, prune old events
// and archive old removed nodes. It returns the earliest time something
// is due (a drain deadline, a registration timeout, a cooldown end, a
// retry), or zero. Tests and tools drive the controller with it; the
// server runs Run.
func (c *Controller) Reconcile(ctx context.Context) (time.Time, error) {
	return c.pass(ctx, true)
}

// pass is Reconcile; with steps false (Run) it leaves the node steps to
// the runner, and hands it every node once a term and then every
// SweepEvery, the backstop for a change no commit reported.
func (c *Controller) pass(ctx context.Context, steps bool) (time.Time, error) {
	if err := c.recordAccess(ctx); err != nil {
		c.log.Warn("cannot record what a cluster's permission check found", "err", err)
	}
	if err := c.recordNotes(ctx); err != nil {
		c.log.Warn("cannot record a driver's note", "err", err)
	}
	pl, err := c.replan(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := c.clock.Now()
	w := &wake{now: now, next: pl.NextWake}
	moved := c.moved.Load()
	var errs []error
	if steps {
		errs = append(errs, c.runSteps(ctx, now, w)...)
	} else if c.lastResync.IsZero() || now.Sub(c.lastResync) >= c.cfg.SweepEvery {
		if err := c.resync(ctx, now); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.sweepIfDue(ctx, now); err != nil {
		errs = append(errs, err)
	}
	w.earlier(c.lostDue)
	if err := c.finishDeletions(ctx); err != nil {
		errs = append(errs, err)
	}
	// Nodes that became ready or left in this pass's steps change cluster
	// states and may free capacity: plan again rather than wait for the
	// next pass. (Run's steps are the runner's: their moves wake the loop.)
	if steps && c.moved.Load() != moved {
		pl, err := c.replan(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			w.earlier(pl.NextWake)
		}
	}
	if err := c.pruneIfDue(ctx); err != nil {
		errs = append(errs, err)
	}
	return w.next, errors.Join(errs...)
}

// runSteps runs every step there is now (see Reconcile) and notes when
// the loop must wake for them in w.
func (c *Controller) runSteps(ctx context.Context, now time.Time, w *wake) []error {
	items, err := c.work(ctx, now)
	if err != nil {
		return []error{err}
	}
	next, errs := c.runner.RunNow(ctx, items, c.cfg.Workers == 1)
	w.earlier(next)
	return errs
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

// sweepIfDue checks ready nodes for loss when a node watch asked for it,
// when the backstop's time has come, or when a node seen not Ready
// reaches Config.NodeLostAfter.
func (c *Controller) sweepIfDue(ctx context.Context, now time.Time) error {
	if !c.sweepNow.Swap(false) && now.Sub(c.lastSweep) < c.cfg.SweepEvery && (c.lostDue.IsZero() || now.Before(c.lostDue)) {
		return nil
	}
	due, err := c.reclaim.Sweep(ctx)
	c.lostDue, c.lastSweep = due, now
	return err
}

// pruneIfDue prunes old events and archives old removed nodes, once a
// minute.
func (c *Controller) pruneIfDue(ctx context.Context) error {
	now := c.clock.Now()
	if now.Sub(c.lastPrune) < time.Minute {
		return nil
	}
	err := c.store.Update(ctx, func(tx store.Tx) error {
		_, err := tx.PruneEvents(ctx, now.Add(-c.cfg.EventRetention))
		return err
	})
	if err == nil {
		_, err = c.archive(ctx, now.Add(-c.cfg.EventRetention))
	}
	if err != nil {
		return fmt.Errorf("prune events and archive nodes: %w", err)
	}
	c.lastPrune = now
	return nil
}

// finishDeletions marks deleted clusters whose nodes are all removed as
// gone.
func (c *Controller) finishDeletions(ctx context.Context) error {
	// The snapshot (in memory on the leader) lists the same clusters as
	// ListClusters without a query per pass.
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	for i := range s.Clusters {
		cl := &s.Clusters[i] // not a copy of every cluster on every pass
		if !cl.Deleting {
			continue
		}
		c.mu.Lock()
		gone := false
		err := c.store.Update(ctx, func(tx store.Tx) error {
			nodes, err := tx.ListNodes(ctx, store.NodeFilter{ClusterID: cl.ID})
			if err != nil || len(nodes) > 0 {
				return err
			}
			cur, err := tx.GetCluster(ctx, cl.ID)
			if err != nil {
				return err
			}
			cur.DeletedAt, gone = c.clock.Now(), true
			return tx.UpdateCluster(ctx, cur)
		})
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("finish deleting cluster %s: %w", cl.ID, err)
		}
		if gone && c.OnClusterGone != nil {
			c.OnClusterGone(cl.ID)
		}
	}
	return nil
}
