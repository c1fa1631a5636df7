package webhook

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/store"
)

// The sender starts an attempt for each due delivery, within bounds that
// keep one endpoint from holding up the others: at most PerEndpoint
// attempts in flight to one endpoint, Workers in all. An endpoint whose
// last attempt failed is failing: it gets one attempt at a time, none
// until its hold ends (the retry gap of its failures in a row, at most
// MaxHold), and failing endpoints together get at most half of Workers,
// so healthy ones always have the other half. A slow endpoint costs a
// slot for at most Timeout per attempt, and a failing one rarely.

func (s *Service) sendLoop(ctx context.Context) {
	rec := make(chan ended, s.cfg.Workers)
	recorded := make(chan struct{})
	go func() {
		defer close(recorded)
		s.recordLoop(ctx, rec)
	}()
	var wg sync.WaitGroup
	defer func() {
		wg.Wait()
		close(rec)
		<-recorded
	}()
	for {
		s.fill(ctx, &wg, rec)
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-s.freed:
		case <-s.cfg.Timer.After(s.cfg.Poll):
		}
	}
}

// fill starts attempts for the due deliveries there is room for; their
// outcomes go to rec.
func (s *Service) fill(ctx context.Context, wg *sync.WaitGroup, rec chan<- ended) {
	now := s.cfg.Clock.Now()
	// The read must see past what this pass skips: the deliveries in
	// flight (still due in the store until their outcome is written), at
	// most Workers, and those of the endpoints left alone now, at most
	// PerEndpoint each; then Workers more is room enough for every slot.
	s.mu.Lock()
	s.recorded = map[deliveryKey]bool{}
	skipped := s.skippedLocked(now)
	s.mu.Unlock()
	limit := 2*s.cfg.Workers + skipped*s.cfg.PerEndpoint
	due, err := s.cfg.Store.DueWebhookDeliveries(ctx, now, s.cfg.PerEndpoint, limit)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("read due webhook deliveries", "err", err)
		}
		return
	}
	picked := s.choose(now, due)
	if len(picked) == 0 {
		return
	}
	s.send(ctx, wg, rec, picked)
}

// skippedLocked counts the endpoints this pass leaves alone: failing ones
// (all of them while failing deliveries hold half the workers) held back
// or with an attempt in flight, and healthy ones at PerEndpoint. s.mu is
// held.
func (s *Service) skippedLocked(now time.Time) int {
	skipped := 0
	failingFull := 2*s.failing >= s.cfg.Workers
	for id, h := range s.health {
		if h.failures > 0 && (failingFull || now.Before(h.holdTill) || s.perEP[id] > 0) {
			skipped++
		}
	}
	for id, n := range s.perEP {
		if n >= s.cfg.PerEndpoint && s.health[id] == nil {
			skipped++
		}
	}
	return skipped
}

// choose takes the due deliveries this pass attempts, within the bounds
// the top of this file describes, and counts them in flight.
func (s *Service) choose(now time.Time, due []domain.WebhookDelivery) []pick {
	var picked []pick
	s.mu.Lock()
	for _, d := range due {
		if s.total >= s.cfg.Workers {
			break
		}
		k := deliveryKey{d.EndpointID, d.MessageID}
		if s.inflight[k] || s.recorded[k] {
			continue
		}
		h := s.health[d.EndpointID]
		failing := h != nil && h.failures > 0
		switch {
		case failing && now.Before(h.holdTill):
			continue
		case failing && (s.perEP[d.EndpointID] >= 1 || 2*s.failing >= s.cfg.Workers):
			continue
		case s.perEP[d.EndpointID] >= s.cfg.PerEndpoint:
			continue
		}
		s.inflight[k] = true
		s.perEP[d.EndpointID]++
		s.total++
		if failing {
			s.failing++
		}
		picked = append(picked, pick{d, failing})
	}
	s.mu.Unlock()
	return picked
}

// send starts an attempt of each picked delivery; their outcomes go to
// rec.
func (s *Service) send(ctx context.Context, wg *sync.WaitGroup, rec chan<- ended, picked []pick) {
	// What the attempts send, read once for all of them: a burst is one
	// message to many endpoints, or many messages to few.
	eps, msgs, err := s.read(ctx, picked)
	for _, p := range picked {
		k := deliveryKey{p.d.EndpointID, p.d.MessageID}
		ep, epOK := eps[p.d.EndpointID]
		m, mOK := msgs[p.d.MessageID]
		if err != nil || !epOK || !mOK {
			// Deleted or disabled meanwhile, or not read: nothing is
			// recorded, and it is due again at the next poll (not at once:
			// a store that fails would be asked again in a tight loop).
			s.release(k, p.failing)
			continue
		}
		wg.Go(func() {
			next, ok := s.attempt(ctx, p.d, ep, m)
			if !ok {
				s.done(k, p.failing, nil)
				return
			}
			rec <- ended{next: next, failing: p.failing}
		})
	}
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("read webhook deliveries", "err", err)
	}
}

// read returns the endpoints and messages of the deliveries picked,
// by ID.
func (s *Service) read(ctx context.Context, picked []pick) (map[string]domain.WebhookEndpoint, map[string]domain.WebhookMessage, error) {
	all, err := s.cfg.Store.ListWebhookEndpoints(ctx, "")
	if err != nil {
		return nil, nil, err
	}
	eps := make(map[string]domain.WebhookEndpoint, len(all))
	for _, e := range all {
		if e.Enabled {
			eps[e.ID] = e
		}
	}
	msgs := map[string]domain.WebhookMessage{}
	for _, p := range picked {
		id := p.d.MessageID
		if _, ok := msgs[id]; ok {
			continue
		}
		m, err := s.cfg.Store.GetWebhookMessage(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			continue // pruned with its last delivery
		}
		if err != nil {
			return nil, nil, err
		}
		msgs[id] = m
	}
	return eps, msgs, nil
}

// pick is a delivery fill starts an attempt for; failing: its endpoint's
// last attempt failed.
type pick struct {
	d       domain.WebhookDelivery
	failing bool
}

// release frees an attempt's slot.
func (s *Service) release(k deliveryKey, failing bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releaseLocked(k, failing)
}

func (s *Service) releaseLocked(k deliveryKey, failing bool) {
	delete(s.inflight, k)
	if s.perEP[k.endpoint]--; s.perEP[k.endpoint] <= 0 {
		delete(s.perEP, k.endpoint)
	}
	s.total--
	if failing {
		s.failing--
	}
}

// done frees an attempt's slot, notes that its outcome was written (ok
// not nil) and how its endpoint fared, and wakes the sender, for the next
// due delivery.
func (s *Service) done(k deliveryKey, failing bool, ok *bool) {
	s.mu.Lock()
	s.releaseLocked(k, failing)
	if ok != nil {
		if s.recorded != nil {
			s.recorded[k] = true
		}
		h := s.health[k.endpoint]
		switch {
		case *ok:
			delete(s.health, k.endpoint)
		case h == nil:
			h = &health{}
			s.health[k.endpoint] = h
			fallthrough
		default:
			h.failures++
			h.holdTill = s.cfg.Clock.Now().Add(holdFor(h.failures, s.cfg.Random))
		}
	}
	s.mu.Unlock()
	select {
	case s.freed <- struct{}{}:
	default:
	}
}

// attempt sends m, d's message, to ep once and returns d after it; not
// ok when the term ended meanwhile (the next leader tries again).
func (s *Service) attempt(ctx context.Context, d domain.WebhookDelivery, ep domain.WebhookEndpoint, m domain.WebhookMessage) (domain.WebhookDelivery, bool) {
	now := s.cfg.Clock.Now()
	var r result
	if secrets, err := signingSecrets(s.cfg.Sealer, ep, now); err != nil {
		// The server's key does not open it: an operator's problem, said
		// where the project sees it.
		r = result{err: "cannot sign the delivery: " + err.Error()}
	} else {
		r = s.post(ctx, ep.URL, m, secrets, now)
	}
	if ctx.Err() != nil {
		return d, false
	}
	return outcome(d, r, s.cfg.Clock.Now(), s.cfg.Random), true
}

// ended is an attempt's delivery after it, to be recorded; failing: its
// endpoint was failing when the attempt started.
type ended struct {
	next    domain.WebhookDelivery
	failing bool
}

// recordBatch bounds the outcomes one transaction records.
const recordBatch = 256

// recordLoop records the attempts' outcomes until rec is closed: in one
// transaction all those that ended while the previous one was written,
// so that a burst of quick answers costs the store a few writes rather
// than one each. An attempt keeps its slot until its outcome is written
// (until then the delivery is still due in the store).
func (s *Service) recordLoop(ctx context.Context, rec <-chan ended) {
	for e := range rec {
		batch := []ended{e}
	more:
		for len(batch) < recordBatch {
			select {
			case e, ok := <-rec:
				if !ok {
					break more
				}
				batch = append(batch, e)
			default:
				break more
			}
		}
		s.record(ctx, batch)
	}
}

// record writes batch's outcomes in one transaction, then frees their
// slots with how their endpoints fared; if the write fails nothing is
// recorded and each is due again.
func (s *Service) record(ctx context.Context, batch []ended) {
	err := s.cfg.Store.Update(ctx, func(tx store.Tx) error {
		for _, e := range batch {
			// A delivery deleted with its endpoint meanwhile is skipped.
			if err := tx.UpdateWebhookDelivery(ctx, e.next); err != nil && !errors.Is(err, domain.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.cfg.Log.Warn("record webhook deliveries", "deliveries", len(batch), "err", err)
	}
	for _, e := range batch {
		d := e.next
		k := deliveryKey{d.EndpointID, d.MessageID}
		if err != nil {
			s.done(k, e.failing, nil)
			continue
		}
		if d.State == domain.DeliveryFailed {
			s.cfg.Log.Info("webhook delivery failed: its retry window is over", "endpoint", d.EndpointID, "message", d.MessageID,
				"attempts", d.Attempts, "last_error", d.LastError)
		}
		if d.State != domain.DeliveryPending {
			s.backlog.add(d.EndpointID, -1)
		}
		ok := d.State == domain.DeliveryDelivered
		s.done(k, e.failing, &ok)
	}
}

// outcome is d after an attempt that ended at now with r: delivered on a
// 2xx; otherwise pending until its next try, or failed when that would
// come after its retry window.
func outcome(d domain.WebhookDelivery, r result, now time.Time, rnd *random.Source) domain.WebhookDelivery {
	d.Attempts++
	d.LastAt, d.LastStatus, d.Latency, d.LastError = now, r.status, r.latency, r.err
	if r.ok() {
		d.State, d.NextAt = domain.DeliveryDelivered, time.Time{}
		return d
	}
	next := now.Add(retryGap(d.Attempts, rnd))
	if next.After(d.CreatedAt.Add(RetryWindow)) {
		d.State, d.NextAt = domain.DeliveryFailed, time.Time{}
		return d
	}
	d.NextAt = next
	return d
}
