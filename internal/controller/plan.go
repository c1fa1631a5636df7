package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// replan commits the allocator's plan when it changes anything.
func (c *Controller) replan(ctx context.Context) (allocator.Plan, error) {
	c.lock(ctx)
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, err := c.snapshot(ctx)
	if err != nil {
		return allocator.Plan{}, err
	}
	if p := c.settled; p != nil && p.valid(s, now) {
		c.settledHits.Add(1)
		if c.checkSettled != nil {
			c.checkSettled(p.plan, c.plan(s, now), s, now)
		}
		return p.plan, nil
	}
	pl := c.plan(s, now)
	if !changes(s, pl, now) {
		c.settled = &settledPlan{snap: s, plan: pl}
		return pl, nil
	}
	c.settled = nil
	if err := c.commit(ctx, s, pl, now, commitWrites{}); err != nil {
		return allocator.Plan{}, fmt.Errorf("commit plan: %w", err)
	}
	return pl, nil
}

// settledPlan is a plan that changed nothing. Planned again from the
// same snapshot before its NextWake it would change nothing again: a
// plan depends on time only through cooldowns (NextWake) and through
// what it changes (deadlines, unmet_since), and this one changed
// nothing. The leader's in-memory snapshot keeps its slices while nothing
// is written (store.Cached rebuilds a table when read after a change), so
// a settled loop plans once, not every pass.
type settledPlan struct {
	snap allocator.Snapshot
	plan allocator.Plan
}

func (p *settledPlan) valid(s allocator.Snapshot, now time.Time) bool {
	return (p.plan.NextWake.IsZero() || now.Before(p.plan.NextWake)) &&
		store.Same(p.snap.Machines, s.Machines) && store.Same(p.snap.Reservations, s.Reservations) &&
		store.Same(p.snap.Clusters, s.Clusters) && store.Same(p.snap.Nodes, s.Nodes)
}

func changes(s allocator.Snapshot, pl allocator.Plan, now time.Time) bool {
	if len(pl.Reclaims) > 0 || len(pl.Provisions) > 0 {
		return true
	}
	for i, cs := range pl.Clusters {
		if statusChanged(s.Clusters[i], cs, now) {
			return true
		}
	}
	return false
}

// statusChanged reports whether the plan changes what cluster c stores of
// its state.
func statusChanged(c domain.Cluster, cs allocator.ClusterState, now time.Time) bool {
	if c.Status != cs.Status || c.Unfulfilled != cs.Unfulfilled || c.UnfulfilledMessage != cs.Message {
		return true
	}
	// A cluster unmet before unmet_since existed starts waiting now.
	return !allocator.UnmetSince(c.UnmetSince, cs, now).Equal(c.UnmetSince)
}
