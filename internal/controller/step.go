package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// enqueue hands the executor the turns node n needs now that a commit
// wrote it: its own if it is in flight, its cleanup if that is pending.
func (c *Controller) enqueue(n domain.Node, now time.Time) {
	if n.CleanupPending {
		c.exec.Runner().Add(lifecycle.CleanupKey(n.ID), lifecycle.Due{})
	}
	if slices.Contains(inFlight, n.State) {
		c.exec.Runner().Add(n.ID, c.exec.DueOf(n))
	}
}

// inFlight are the node states the step machines move on.
var inFlight = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}

// work is every turn there is to run, in the store's order: the nodes in
// flight, then the cleanups pending. A pending node whose machine is
// still being vacated is left out: the removal that frees the machine
// starts it.
func (c *Controller) work(ctx context.Context) ([]lifecycle.Item, error) {
	nodes, err := c.nodesInFlight(ctx)
	if err != nil {
		return nil, fmt.Errorf("list nodes in flight: %w", err)
	}
	cleanups, err := c.store.ListNodes(ctx, store.NodeFilter{CleanupPending: true, IncludeRemoved: true})
	if err != nil {
		return nil, fmt.Errorf("list nodes to clean up: %w", err)
	}
	items := make([]lifecycle.Item, 0, len(nodes)+len(cleanups))
	for _, n := range nodes {
		if n.State == domain.NodePending {
			if busy, err := c.machineBusy(ctx, n); err != nil || busy {
				continue
			}
		}
		items = append(items, lifecycle.Item{Key: n.ID, Due: c.exec.DueOf(n)})
	}
	for _, n := range cleanups {
		items = append(items, lifecycle.Item{Key: lifecycle.CleanupKey(n.ID)})
	}
	return items, nil
}

// resync hands every turn there is to the executor: what a new leader
// does once, and the backstop for a change no commit or driver reported.
// A key the executor holds keeps its time.
func (c *Controller) resync(ctx context.Context, now time.Time) error {
	items, err := c.work(ctx)
	if err != nil {
		return err
	}
	for _, it := range items {
		c.exec.Runner().Ensure(it.Key, it.Due)
	}
	c.lastResync = now
	return nil
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

// wake is the drivers' Hooks.Wake: something changed for the node named
// nodeName in cluster clusterID, or will at at; its turn (and only its)
// runs then.
func (c *Controller) wake(clusterID, nodeName string, at time.Time) {
	n, ok := c.nodeNamed(context.Background(), clusterID, nodeName)
	if ok {
		c.exec.Runner().Wake(n.ID, at)
	}
}
