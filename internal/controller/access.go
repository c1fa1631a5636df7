package controller

import (
	"context"
	"errors"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// RecordAccess takes what a driver learned of a cluster's permissions
// (its check when it starts, or a call the cluster refused). The next
// pass records it in the cluster's access record (Cluster.Access), with a
// PermissionMissing lifecycle event when a permission is newly missing:
// once per cluster, not once per pod. It never blocks: drivers call it on
// the way to a pod's notice.
func (c *Controller) RecordAccess(r driver.AccessReport) {
	c.access.push(r)
	c.Kick()
}

// recordAccess records the reports RecordAccess queued.
func (c *Controller) recordAccess(ctx context.Context) error {
	reports := c.access.take()
	if len(reports) == 0 {
		return nil
	}
	c.lock(ctx)
	defer c.mu.Unlock()
	var errs []error
	for _, r := range reports {
		var obs []Observation
		err := c.store.Update(ctx, func(tx store.Tx) error {
			obs = obs[:0]
			e, err := c.applyAccess(ctx, tx, r)
			if err != nil || e == nil {
				return err
			}
			if _, err := tx.AddEvent(ctx, *e); err != nil {
				return err
			}
			obs = append(obs, Observation{Time: e.Timestamp, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message})
			return nil
		})
		if err != nil {
			// Kept for the next pass: the driver reports a refusal once.
			c.access.push(r)
			errs = append(errs, fmt.Errorf("record the access of cluster %s: %w", r.ClusterID, err))
			continue
		}
		c.observe(obs)
		if len(obs) > 0 {
			c.notify()
		}
	}
	return errors.Join(errs...)
}

// applyAccess writes report r into its cluster's access record in tx and
// returns the event to post, if a permission is newly missing. A cluster
// gone since the report has nothing to record.
func (c *Controller) applyAccess(ctx context.Context, tx store.Tx, r driver.AccessReport) (*domain.Event, error) {
	cl, err := tx.GetCluster(ctx, r.ClusterID)
	if errors.Is(err, domain.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	now := c.clock.Now()
	next, added := cl.Access.Merge(r.Checked, r.Missing, now)
	if !r.Checked && len(added) == 0 {
		return nil, nil // known already
	}
	if err := tx.SetAccess(ctx, cl.ID, next); err != nil {
		return nil, err
	}
	if len(added) == 0 {
		return nil, nil
	}
	e := &domain.Event{ID: c.NewID("ev-"), ClusterID: cl.ID, Reason: domain.ReasonPermissionMissing, Timestamp: now,
		Message: domain.AccessMessage(added)}
	if r.NodeName != "" {
		e.Message = fmt.Sprintf("on the way to node %s's notice, %s", r.NodeName, e.Message)
		if n, ok := c.nodeNamed(ctx, cl.ID, r.NodeName); ok {
			e.NodeID, e.NodeName = n.ID, n.Name
		}
	}
	return e, nil
}

// nodeNamed finds the live node of a cluster by name in the snapshot.
func (c *Controller) nodeNamed(ctx context.Context, clusterID, name string) (domain.Node, bool) {
	if ca, ok := store.MemoryOf(c.store); ok {
		if n, ok, loaded := ca.NodeNamed(clusterID, name); loaded {
			return n, ok
		}
	}
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return domain.Node{}, false
	}
	for _, n := range s.Nodes {
		if n.ClusterID == clusterID && n.Name == name {
			return *n, true
		}
	}
	return domain.Node{}, false
}
