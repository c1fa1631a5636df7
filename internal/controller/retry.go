package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/store"
)

// Retry delays after a failed node step: doubling from retryBase to
// retryMax, each drawn at random between half and all of it, so the steps
// of many nodes on one cluster whose API went away do not come back in
// lockstep.
const (
	retryBase = 250 * time.Millisecond
	retryMax  = 5 * time.Second
)

// backoff remembers failed node steps (in memory: after a restart every
// node is tried at once).
type backoff struct {
	random *random.Source // the jitter
	mu     sync.Mutex
	nodes  map[string]retry
}

type retry struct {
	fails    int
	failedAt time.Time
	at       time.Time
	err      error
}

// retry is the backoff of key's last failed run (none: it may run now).
func (b *backoff) retry(key string) reclaim.Retry {
	b.mu.Lock()
	defer b.mu.Unlock()
	r, ok := b.nodes[key]
	if !ok {
		return reclaim.Retry{}
	}
	return reclaim.Retry{FailedAt: r.failedAt, At: r.at}
}

// lastErr is the error of key's last failed run, nil if it has not failed
// since it last succeeded.
func (b *backoff) lastErr(key string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nodes[key].err
}

func (b *backoff) fail(id string, now time.Time, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.nodes == nil {
		b.nodes = map[string]retry{}
	}
	r := b.nodes[id]
	r.fails++
	d := retryBase << min(r.fails-1, 10)
	d = min(d, retryMax)
	d = d/2 + b.random.Duration(d/2)
	r.failedAt, r.at, r.err = now, now.Add(d), err
	b.nodes[id] = r
}

func (b *backoff) ok(id string) {
	b.mu.Lock()
	delete(b.nodes, id)
	b.mu.Unlock()
}

// claim marks node id as being stepped; false if a step already runs.
func (c *Controller) claim(id string) bool {
	c.runningMu.Lock()
	defer c.runningMu.Unlock()
	if c.running[id] {
		return false
	}
	c.running[id] = true
	return true
}

func (c *Controller) release(id string) {
	c.runningMu.Lock()
	delete(c.running, id)
	c.runningMu.Unlock()
}

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
