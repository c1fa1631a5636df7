package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/store"
)

// replan plans what changed (allocator.Partitioned: the partitions whose
// inputs changed, or whose plan's wake-up came) and commits that plan
// when it changes anything; the partitions it planned are then settled.
func (c *Controller) replan(ctx context.Context) (allocator.Plan, error) {
	c.lock(ctx)
	defer c.mu.Unlock()
	now := c.clock.Now()
	pl, tok, err := c.planWith(ctx, now, allocator.With{})
	if err != nil {
		return allocator.Plan{}, err
	}
	if !changes(pl) {
		c.parts.Settle(tok)
		return pl, nil
	}
	if err := c.commit(ctx, pl, &tok, now, commitWrites{}); err != nil {
		return allocator.Plan{}, fmt.Errorf("commit plan: %w", err)
	}
	return pl, nil
}

// planWith plans, with the plan lock held, what changed and the
// partitions with's rows fall in (a request's cluster, planned as the
// request would leave it). It returns the plan (its Clusters: the states
// that change) and the token that settles the partitions it planned once
// the plan is committed.
func (c *Controller) planWith(ctx context.Context, now time.Time, with allocator.With) (allocator.Plan, allocator.Token, error) {
	if err := c.loadParts(ctx); err != nil {
		return allocator.Plan{}, allocator.Token{}, err
	}
	c.refreshBook(ctx, now)
	cfg := c.planConfig()
	pl, tok := c.parts.Plan(now, cfg, with)
	if c.checkParts != nil && len(with.Clusters)+len(with.Nodes) == 0 {
		c.checkParts(pl, tok, now, cfg)
	}
	return pl, tok, nil
}

// loadParts makes sure the planner holds the world: over a store that
// holds it in memory (store.Memory: the leader's copy) it follows that
// world's commits (Watch), loaded once a term; over any other every plan
// loads the world afresh (every partition is planned).
func (c *Controller) loadParts(ctx context.Context) error {
	if ca, ok := store.MemoryOf(c.store); ok {
		if c.parts.Loaded() {
			return nil
		}
		err := ca.Watch(ctx, partsWatcher{&c.parts})
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrNotCached) {
			return fmt.Errorf("read snapshot: %w", err)
		}
	}
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	c.parts.Load(allocator.Snapshot(s))
	return nil
}

// partsWatcher feeds the planner what the in-memory copy commits.
type partsWatcher struct{ pp *allocator.Faceted }

func (w partsWatcher) Load(s store.Snapshot) { w.pp.Load(allocator.Snapshot(s)) }
func (w partsWatcher) Apply(x store.Written) { w.pp.Apply(allocator.Changes(x)) }
func (w partsWatcher) Reset()                { w.pp.Reset() }

// changes reports whether pl changes anything: a plan's Clusters are
// only the states that change.
func changes(pl allocator.Plan) bool {
	return len(pl.Reclaims)+len(pl.Provisions)+len(pl.Clusters) > 0
}
