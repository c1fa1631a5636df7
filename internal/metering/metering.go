// Package metering cuts usage records from the node lifecycle the store
// records. Every Cut recomputes, for each node that became ready and has no
// final record yet, its record from scratch — ready time, stop point (see
// billing.Stop) or now — and writes it over the old one. Nothing is
// accumulated, so a crash at any moment neither loses nor double-counts a
// second: the next Cut writes the same record again, only longer.
package metering

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Meter writes usage records.
type Meter struct {
	store store.Store
	clock clock.Clock
	log   *slog.Logger
	// OnBilled, if set, is told how many GPU-seconds each Cut added per
	// compute class (for metrics). Seconds metered before this process
	// started are not reported again.
	OnBilled func(class string, gpuSeconds float64)
	// last is each running node's End as last written: from the store at
	// the first Cut, then from this process's cuts.
	last   map[string]time.Time
	loaded bool
	// mu serializes cuts: the background loop and usage queries both cut.
	mu sync.Mutex
}

// New returns a meter.
func New(st store.Store, clk clock.Clock, log *slog.Logger) *Meter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Meter{store: st, clock: clk, log: log, last: map[string]time.Time{}}
}

// Cut writes the current usage record of every node not yet final, in one
// transaction.
func (m *Meter) Cut(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	if !m.loaded {
		open, err := m.store.ListUsage(ctx, store.UsageFilter{Open: true})
		if err != nil {
			return fmt.Errorf("meter: read open records: %w", err)
		}
		for _, r := range open {
			m.last[r.NodeID] = r.End
		}
		m.loaded = true
	}
	nodes, err := m.store.ListNodes(ctx, store.NodeFilter{Unmetered: true})
	if err != nil {
		return fmt.Errorf("meter: list nodes: %w", err)
	}
	if len(nodes) == 0 {
		return nil
	}
	clusters := map[string]domain.Cluster{}
	machines := map[string]domain.Machine{}
	var recs []domain.UsageRecord
	for _, n := range nodes {
		c, ok := clusters[n.ClusterID]
		if !ok {
			if c, err = m.store.GetClusterRecord(ctx, n.ClusterID); err != nil {
				return fmt.Errorf("meter: cluster of node %s: %w", n.ID, err)
			}
			clusters[n.ClusterID] = c
		}
		mc, ok := machines[n.MachineID]
		if !ok {
			if mc, err = m.store.GetMachine(ctx, n.MachineID); err != nil {
				return fmt.Errorf("meter: machine of node %s: %w", n.ID, err)
			}
			machines[n.MachineID] = mc
		}
		if r, ok := billing.Record(n, c, mc, now); ok {
			recs = append(recs, r)
		}
	}
	err = m.store.Update(ctx, func(tx store.Tx) error {
		for _, r := range recs {
			if err := tx.PutUsage(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("meter: write usage: %w", err)
	}
	for _, r := range recs {
		prev, ok := m.last[r.NodeID]
		if !ok {
			prev = r.Start // never metered before: all of it is new
		}
		if m.OnBilled != nil && r.End.After(prev) {
			m.OnBilled(string(r.Class), float64(r.End.Unix()-prev.Unix())*float64(r.GPUs))
		}
		if r.Final {
			delete(m.last, r.NodeID)
		} else {
			m.last[r.NodeID] = r.End
		}
	}
	return nil
}

// Run cuts records every interval of clock time (at least every minute,
// so a running node shows on the bill while it runs) until ctx ends.
func (m *Meter) Run(ctx context.Context, every time.Duration) {
	for {
		if err := m.Cut(ctx); err != nil && ctx.Err() == nil {
			m.log.Error("metering", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-m.clock.After(every):
		}
	}
}
