package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/steprun"
	"github.com/sparecap/sparecap/internal/store"
)

// step is the step runner's step of key: a node's (provisioning's or
// reclaim's, by its state), or a removed node's cleanup. The node is read
// once, here.
func (c *Controller) step(ctx context.Context, key string) (steprun.Due, error) {
	id, cleanup := reclaim.CleanupOf(key)
	if !cleanup {
		id = key
	}
	n, err := c.store.GetNode(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return steprun.Due{}, nil // archived: nothing left to do
	}
	if err != nil {
		return steprun.Due{}, fmt.Errorf("node %s: %w", id, err)
	}
	moved := c.moved.Load()
	var due steprun.Due
	switch {
	case cleanup:
		err = c.reclaim.Cleanup(ctx, n)
	case n.State == domain.NodePending || n.State == domain.NodeProvisioning:
		due, err = c.provision.Step(ctx, n)
	case n.State == domain.NodeDraining || n.State == domain.NodeRemoving:
		due, err = c.reclaim.Step(ctx, n)
	}
	c.stepped(ctx, n, err, c.moved.Load() != moved)
	return due, err
}

// stepped records a step's outcome on its node (its last error, or none)
// and wakes the loop when the step failed or some node moved meanwhile:
// a node that became ready or left changes its cluster's state and may
// free capacity. A drain waiting for its work moves nothing and wakes
// nothing.
func (c *Controller) stepped(ctx context.Context, n domain.Node, err error, moved bool) {
	if ctx.Err() != nil {
		return // cut off by the end of the term
	}
	if err != nil {
		c.noteError(ctx, n, err)
		c.log.Warn("node step failed; retrying with backoff", "err", err)
	} else {
		c.clearError(ctx, n)
	}
	if err != nil || moved {
		c.movedNodes()
	}
}

// due is when node n, as stored, is next due: reclaim's answer for a
// drain or a removal, provisioning's for the rest.
func (c *Controller) due(n domain.Node, now time.Time) steprun.Due {
	if d := c.reclaim.Due(n, now); !d.At.IsZero() {
		return d
	}
	return c.provision.Due(n, now)
}

// enqueue schedules the steps node n needs now that a commit wrote it:
// its own if it is in flight, its cleanup if that is pending.
func (c *Controller) enqueue(n domain.Node, now time.Time) {
	if n.State != domain.NodeProvisioning {
		c.provision.Forget(n.ID)
	}
	if n.CleanupPending {
		c.runner.Add(reclaim.CleanupKey(n.ID), steprun.Due{})
	}
	if slices.Contains(inFlight, n.State) {
		d := c.due(n, now)
		d.At = time.Time{} // now
		c.runner.Add(n.ID, d)
	}
}

// inFlight are the node states the step machines move on.
var inFlight = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}

// work is every step there is to run, in the store's order: the nodes
// in flight, then the cleanups pending. A pending node whose machine is
// still being vacated is left out: the removal that frees the machine
// starts it.
func (c *Controller) work(ctx context.Context, now time.Time) ([]steprun.Item, error) {
	nodes, err := c.nodesInFlight(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes in flight: %w", err)
	}
	cleanups, err := c.store.ListNodes(ctx, store.NodeFilter{CleanupPending: true, IncludeRemoved: true})
	if err != nil {
		return nil, fmt.Errorf("list nodes to clean up: %w", err)
	}
	var active map[string]bool // built only when a node is pending
	if slices.ContainsFunc(nodes, func(n domain.Node) bool { return n.State == domain.NodePending }) {
		if active, err = c.activeMachines(ctx); err != nil {
			return nil, err
		}
	}
	items := make([]steprun.Item, 0, len(nodes)+len(cleanups))
	for _, n := range nodes {
		if n.State == domain.NodePending && active[n.MachineID] {
			continue
		}
		items = append(items, steprun.Item{Key: n.ID, Due: c.due(n, now)})
	}
	for _, n := range cleanups {
		items = append(items, steprun.Item{Key: reclaim.CleanupKey(n.ID)})
	}
	return items, nil
}

// resync hands every step there is to the runner: what a new leader does
// once, and the backstop for a change no commit reported. A step the
// runner holds keeps its time (a drain its poll).
func (c *Controller) resync(ctx context.Context, now time.Time) error {
	items, err := c.work(ctx, now)
	if err != nil {
		return err
	}
	for _, it := range items {
		it.Due.At = time.Time{} // now, or when its backoff ends
		c.runner.Ensure(it.Key, it.Due)
	}
	c.lastResync = now
	return nil
}

// activeMachines are the machines an active node occupies, as the
// snapshot (memory on the leader) has them.
func (c *Controller) activeMachines(ctx context.Context) (map[string]bool, error) {
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	active := map[string]bool{}
	for _, n := range s.Nodes {
		if n.State.Active() {
			active[n.MachineID] = true
		}
	}
	return active, nil
}

// nodesInFlight lists the nodes the step machines move on: from the
// leader's in-memory copy when it is loaded (it holds the live nodes in
// the store's order), else from the store.
func (c *Controller) nodesInFlight(ctx context.Context) ([]domain.Node, error) {
	if s, ok := store.LoadedSnapshot(c.store); ok {
		// Worked out once per version of the copy.
		if f := c.inFlight.Load(); f != nil && store.Same(f.of, s.Nodes) {
			return f.nodes, nil
		}
		var out []domain.Node
		for _, n := range s.Nodes {
			if slices.Contains(inFlight, n.State) {
				out = append(out, *n)
			}
		}
		c.inFlight.Store(&inFlightNodes{of: s.Nodes, nodes: out})
		return out, nil
	}
	return c.store.ListNodes(ctx, store.NodeFilter{States: inFlight})
}

// inFlightNodes are the nodes in flight of a version of the in-memory
// copy's nodes (of); callers must not modify them.
type inFlightNodes struct {
	of    []*domain.Node
	nodes []domain.Node
}
