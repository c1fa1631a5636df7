package controller

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// countingStore counts Updates.
type countingStore struct {
	store.Store
	updates atomic.Int64
}

func (s *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}

// TestTransitionsShareCommits: transitions queued while the plan lock is
// held commit together in one transaction; one that fails with a real
// error rolls its batch back, and the others then commit one by one
// with their own outcomes, its own change kept out.
func TestTransitionsShareCommits(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	h.create("a", 64, 0)
	nodes := h.nodes("a", domain.NodeProvisioning)
	if len(nodes) != 8 {
		t.Fatalf("%d provisioning nodes, want 8", len(nodes))
	}
	cs := &countingStore{Store: h.st}
	c := New(cs, h.sim, h.sim, h.clk, h.cfg, nil)
	boom := errors.New("boom")
	run := func(msg string, failing string) map[string]error {
		c.mu.Lock() // every transition queues behind the lock
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := map[string]error{}
		for _, n := range nodes {
			wg.Go(func() {
				_, err := c.transition(h.ctx, n.ID, domain.NodeProvisioning, func(_ store.Tx, n *domain.Node, _ time.Time) ([]domain.Event, error) {
					if n.ID == failing {
						return nil, boom
					}
					n.LastError = msg
					return nil, nil
				})
				mu.Lock()
				errs[n.ID] = err
				mu.Unlock()
			})
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			c.tqMu.Lock()
			queued := len(c.tq)
			c.tqMu.Unlock()
			if queued == len(nodes) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d transitions queued", queued, len(nodes))
			}
		}
		cs.updates.Store(0)
		c.mu.Unlock()
		wg.Wait()
		return errs
	}

	errs := run("first", "")
	if got := cs.updates.Load(); got != 1 {
		t.Errorf("8 queued transitions took %d transactions, want 1", got)
	}
	for _, n := range nodes {
		if errs[n.ID] != nil || h.node(n.ID).LastError != "first" {
			t.Errorf("node %s: err %v, LastError %q", n.Name, errs[n.ID], h.node(n.ID).LastError)
		}
	}

	failing := nodes[3].ID
	errs = run("second", failing)
	if got := cs.updates.Load(); got != 1+8 {
		t.Errorf("a failed batch of 8 took %d transactions, want 1 + 8 one by one", got)
	}
	for _, n := range nodes {
		want, wantErr := "second", error(nil)
		if n.ID == failing {
			want, wantErr = "first", boom
		}
		if !errors.Is(errs[n.ID], wantErr) || h.node(n.ID).LastError != want {
			t.Errorf("node %s: err %v, LastError %q; want %v, %q", n.Name, errs[n.ID], h.node(n.ID).LastError, wantErr, want)
		}
	}
}
