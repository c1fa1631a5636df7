package controller

import (
	"context"
	"errors"
	"time"

	"github.com/sparecap/sparecap/internal/backoff"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/store"
)

// stepBackoff is the retry schedule of a failed node step: doubling from
// 250 ms to 5 s, each wait drawn between half and all of it, so the steps
// of many nodes on one cluster whose API went away do not come back in
// lockstep.
var stepBackoff = backoff.Policy{First: 250 * time.Millisecond, Max: 5 * time.Second, Low: 50, High: 100}

// noteError keeps a failed step's error on the node (Node.LastError) and,
// for machine provider failures, records a lifecycle event, so operators
// and tenants see why a node is stuck. Nothing is written while the error
// stays the same.
func (c *Controller) noteError(ctx context.Context, n domain.Node, stepErr error) {
	var reason domain.EventReason
	if pe := (*reclaim.ProviderError)(nil); errors.As(stepErr, &pe) {
		reason = pe.Reason
	}
	c.setLastError(ctx, n, stepErr.Error(), reason)
}

// clearError forgets the node's last error once a step succeeded.
func (c *Controller) clearError(ctx context.Context, n domain.Node) {
	if n.LastError != "" {
		c.setLastError(ctx, n, "", "")
	}
}

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
		obs = append(obs, reclaim.EventObservation(e))
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
