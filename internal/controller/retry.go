package controller

import (
	"context"
	"errors"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// setLastError keeps a failed turn's error on the node (Node.LastError;
// empty: it succeeded again) and, for machine provider failures (reason),
// records a lifecycle event, so operators and tenants see why a node is
// stuck. Nothing is written while the error stays the same.
func (c *Controller) setLastError(ctx context.Context, n domain.Node, msg string, reason domain.EventReason) {
	if n.LastError == msg {
		return
	}
	c.lock(ctx)
	defer c.mu.Unlock()
	var obs []Observation
	err := c.store.Update(ctx, func(tx store.Tx) error {
		obs = obs[:0]
		cur, err := tx.GetNode(ctx, n.ID)
		if err != nil || cur.LastError == msg {
			return err
		}
		cur.LastError = msg
		if err := tx.UpdateNode(ctx, cur); err != nil {
			return err
		}
		if reason == "" {
			return nil
		}
		now := c.clock.Now()
		e := domain.Event{ID: c.NewID("ev-"), ClusterID: cur.ClusterID, NodeID: cur.ID, NodeName: cur.Name,
			Reason: reason, Message: msg, Timestamp: now}
		if _, err := tx.AddEvent(ctx, e); err != nil {
			return err
		}
		obs = append(obs, lifecycle.EventObservation(e))
		return nil
	})
	if err != nil {
		if !errors.Is(err, domain.ErrNotFound) {
			c.log.Error("record node error", "node", n.Name, "cluster", n.ClusterID, "err", err)
		}
		return
	}
	c.observe(obs)
	if len(obs) > 0 {
		c.notify()
	}
}
