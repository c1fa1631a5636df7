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
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		s.fill(ctx, &wg)
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case <-s.freed:
		case <-realClock.After(s.cfg.Poll):
		}
	}
}

// fill starts attempts for the due deliveries there is room for.
func (s *Service) fill(ctx context.Context, wg *sync.WaitGroup) {
	now := s.cfg.Clock.Now()
	// The read must see past what this pass skips: the deliveries in
	// flight (still due in the store until their outcome is written), at
	// most Workers, and those of the endpoints left alone now, at most
	// PerEndpoint each; then Workers more is room enough for every slot.
	s.mu.Lock()
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
	s.mu.Unlock()
	limit := 2*s.cfg.Workers + skipped*s.cfg.PerEndpoint
	due, err := s.cfg.Store.DueWebhookDeliveries(ctx, now, s.cfg.PerEndpoint, limit)
	if err != nil {
		if ctx.Err() == nil {
			s.cfg.Log.Warn("read due webhook deliveries", "err", err)
		}
		return
	}
	var picked []pick
	s.mu.Lock()
	for _, d := range due {
		if s.total >= s.cfg.Workers {
			break
		}
		k := deliveryKey{d.EndpointID, d.MessageID}
		if s.inflight[k] {
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
	if len(picked) == 0 {
		return
	}
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
			ok := s.attempt(ctx, p.d, ep, m)
			s.done(k, p.failing, ok)
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

// done frees an attempt's slot, records how its endpoint fared and wakes
// the sender, for the next due delivery.
func (s *Service) done(k deliveryKey, failing bool, ok *bool) {
	s.mu.Lock()
	s.releaseLocked(k, failing)
	if ok != nil {
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

// attempt sends m, d's message, to ep once and records the outcome. It
// reports whether the endpoint answered 2xx, or nil when nothing was
// recorded (the delivery is gone, the term ended).
func (s *Service) attempt(ctx context.Context, d domain.WebhookDelivery, ep domain.WebhookEndpoint, m domain.WebhookMessage) *bool {
	st := s.cfg.Store
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
		return nil // the term is over: the next leader tries again
	}
	next := outcome(d, r, s.cfg.Clock.Now(), s.cfg.Random)
	err := st.Update(ctx, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(ctx, next) })
	switch {
	case errors.Is(err, domain.ErrNotFound):
		// Deleted with its endpoint meanwhile.
	case err != nil:
		if ctx.Err() == nil {
			s.cfg.Log.Warn("record a webhook delivery", "endpoint", d.EndpointID, "message", d.MessageID, "err", err)
		}
		return nil
	case next.State == domain.DeliveryFailed:
		s.cfg.Log.Info("webhook delivery failed: its retry window is over", "endpoint", d.EndpointID, "message", d.MessageID,
			"attempts", next.Attempts, "last_error", next.LastError)
	}
	ok := r.ok()
	return &ok
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
