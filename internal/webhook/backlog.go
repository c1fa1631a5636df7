package webhook

import (
	"context"
	"maps"
	"sync"
	"time"
)

// backlogs counts each endpoint's pending deliveries, so the dispatcher
// can hold an endpoint that stopped answering to Config.MaxPending of
// them without counting the store per event: a count of the store every
// countEvery, added to as the dispatcher writes deliveries and taken from
// as the sender records them ended. The count corrects what a race
// between the two got wrong.
type backlogs struct {
	mu        sync.Mutex
	n         map[string]int
	countedAt time.Time
}

// snapshot is a copy of the counts.
func (b *backlogs) snapshot() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.n)
}

// add adds n (negative: takes) to endpoint ep's count.
func (b *backlogs) add(ep string, n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n == nil {
		b.n = map[string]int{}
	}
	b.n[ep] = max(b.n[ep]+n, 0)
}

// forget makes the next count come from the store.
func (b *backlogs) forget() {
	b.mu.Lock()
	b.countedAt = time.Time{}
	b.mu.Unlock()
}

// countBacklog counts each endpoint's pending deliveries in the store,
// if that was not done within countEvery.
func (s *Service) countBacklog(ctx context.Context, now time.Time) error {
	b := &s.backlog
	b.mu.Lock()
	fresh := !b.countedAt.IsZero() && now.Sub(b.countedAt) < countEvery
	b.mu.Unlock()
	if fresh {
		return nil
	}
	counts, err := s.cfg.Store.CountWebhookDeliveries(ctx, "")
	if err != nil {
		return err
	}
	n := make(map[string]int, len(counts))
	for ep, c := range counts {
		n[ep] = c.Pending
	}
	b.mu.Lock()
	b.n, b.countedAt = n, now
	b.mu.Unlock()
	return nil
}
