package memstore

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// deliveryKey is a delivery's place among its endpoint's, oldest first.
func deliveryKey(d *domain.WebhookDelivery) stid {
	return stid{d.EndpointID, tkey(d.CreatedAt), d.MessageID}
}

// dueKey is a pending delivery's place in the sender's read.
func dueKey(d *domain.WebhookDelivery) sttid {
	return sttid{d.EndpointID, tkey(d.NextAt), tkey(d.CreatedAt), d.MessageID}
}

// putDelivery writes d over old (nil: a new delivery; d nil: old goes).
func (t *tx) putDelivery(old, d *domain.WebhookDelivery) {
	g := t.w
	var o, n domain.WebhookDelivery
	had, has := old != nil, d != nil
	if had {
		o = *old
	}
	if has {
		n = *d
		t.st.deliveries.set(g, ss{n.EndpointID, n.MessageID}, d)
		t.st.messageDeliveries.set(g, ss{n.MessageID, n.EndpointID}, struct{}{})
	} else {
		t.st.deliveries.delete(g, ss{o.EndpointID, o.MessageID})
		t.st.messageDeliveries.delete(g, ss{o.MessageID, o.EndpointID})
	}
	reindex(&t.st.endpointDeliveries, g, had, deliveryKey(&o), has, deliveryKey(&n), d)
	reindex(&t.st.pendingDeliveries, g, had && o.State == domain.DeliveryPending, dueKey(&o),
		has && n.State == domain.DeliveryPending, dueKey(&n), d)
}

// deliveriesOf returns an endpoint's deliveries, oldest first.
func (v view) deliveriesOf(endpointID string) []*domain.WebhookDelivery {
	var out []*domain.WebhookDelivery
	v.st.endpointDeliveries.ascend(&stid{s: endpointID, t: minKey}, func(k stid, d *domain.WebhookDelivery) bool {
		if k.s != endpointID {
			return false
		}
		out = append(out, d)
		return true
	})
	return out
}

// AddWebhookDeliveries writes deliveries in statements of up to 64: one
// whose endpoint has its message already is left as it was, and a missing
// endpoint or message refuses the whole statement.
func (t *tx) AddWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return eachStatement(ds, webhookSizes, func(chunk []domain.WebhookDelivery) error {
		add := make([]bool, len(chunk))
		seen := map[ss]bool{}
		for i, d := range chunk {
			k := ss{d.EndpointID, d.MessageID}
			if seen[k] || t.st.deliveries.has(k) {
				continue
			}
			if !t.st.endpoints.has(d.EndpointID) || !t.st.messages.has(d.MessageID) {
				return missingParent(fmt.Sprintf("add %d webhook deliveries", len(chunk)))
			}
			seen[k], add[i] = true, true
		}
		for i, d := range chunk {
			if add[i] {
				t.putDelivery(nil, storedDelivery(d))
			}
		}
		return nil
	})
}

// storedDelivery is d as stored: its error cut, its latency in whole
// microseconds, its times as every time.
func storedDelivery(d domain.WebhookDelivery) *domain.WebhookDelivery {
	d.LastError = text(d.LastError) // the endpoint wrote it
	d.Latency = time.Duration(d.Latency.Microseconds()) * time.Microsecond
	d.NextAt, d.LastAt, d.CreatedAt = dbTime(d.NextAt), dbTime(d.LastAt), dbTime(d.CreatedAt)
	return &d
}

func (t *tx) UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.deliveries.get(ss{d.EndpointID, d.MessageID})
	if !ok || old.State != domain.DeliveryPending {
		return missing("update pending delivery of " + d.MessageID + " to webhook endpoint " + d.EndpointID)
	}
	s := storedDelivery(d)
	next := *old
	next.State, next.Attempts, next.NextAt, next.LastAt = s.State, s.Attempts, s.NextAt, s.LastAt
	next.LastStatus, next.LastError, next.Latency = s.LastStatus, s.LastError, s.Latency
	t.putDelivery(old, &next)
	return nil
}

func (v view) ListWebhookDeliveries(ctx context.Context, f store.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.WebhookDelivery{}
	// Newest first: the endpoint's deliveries backwards, from past its
	// last one (no key of another endpoint sorts between the two).
	past := stid{s: f.EndpointID + "\x00", t: minKey}
	v.st.endpointDeliveries.descend(&past, func(k stid, d *domain.WebhookDelivery) bool {
		switch {
		case k.s > f.EndpointID:
			return true
		case k.s < f.EndpointID || (f.Limit > 0 && len(out) >= f.Limit):
			return false
		}
		if (f.State == "" || d.State == f.State) && (f.Type == "" || d.Type == f.Type) {
			out = append(out, *d)
		}
		return true
	})
	return out, nil
}

func (v view) CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]store.DeliveryCounts, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := map[string]store.DeliveryCounts{}
	count := func(d *domain.WebhookDelivery) {
		dc := out[d.EndpointID]
		switch d.State {
		case domain.DeliveryPending:
			dc.Pending++
		case domain.DeliveryDelivered:
			dc.Delivered++
		case domain.DeliveryFailed:
			dc.Failed++
		}
		out[d.EndpointID] = dc
	}
	if projectID == "" {
		v.st.deliveries.each(func(_ ss, d *domain.WebhookDelivery) bool { count(d); return true })
		return out, nil
	}
	v.st.projectEndpoints.ascend(&stid{s: projectID, t: minKey}, func(k stid, e *domain.WebhookEndpoint) bool {
		if k.s != projectID {
			return false
		}
		for _, d := range v.deliveriesOf(e.ID) {
			count(d)
		}
		return true
	})
	return out, nil
}

func (v view) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.WebhookDelivery{}
	if now.IsZero() {
		return out, nil // nothing is due at NULL
	}
	at := tkey(dbTime(now))
	var due []*domain.WebhookDelivery
	v.st.endpoints.each(func(id string, e *domain.WebhookEndpoint) bool {
		if !e.Enabled {
			return true
		}
		n := 0
		v.st.pendingDeliveries.ascend(&sttid{s: id, t: math.MinInt64 + 1, u: minKey}, func(k sttid, d *domain.WebhookDelivery) bool {
			if k.s != id || k.t > at || limited(n, perEndpoint) {
				return false
			}
			due, n = append(due, d), n+1
			return true
		})
		return true
	})
	slices.SortFunc(due, func(a, b *domain.WebhookDelivery) int {
		return cmp.Or(cmp.Compare(tkey(a.NextAt), tkey(b.NextAt)), cmp.Compare(tkey(a.CreatedAt), tkey(b.CreatedAt)),
			strings.Compare(a.MessageID, b.MessageID), strings.Compare(a.EndpointID, b.EndpointID))
	})
	for _, d := range due {
		if limited(len(out), limit) {
			break
		}
		out = append(out, *d)
	}
	return out, nil
}

// PruneWebhookDeliveries deletes the deliveries no longer pending that
// ended before endedBefore (or have no end), then those beyond the keep
// newest ended ones of their endpoint, then the messages no delivery
// refers to.
func (t *tx) PruneWebhookDeliveries(ctx context.Context, endedBefore time.Time, keep int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	cut := tkey(dbTime(endedBefore))
	var gone []*domain.WebhookDelivery
	t.st.deliveries.each(func(_ ss, d *domain.WebhookDelivery) bool {
		if d.State != domain.DeliveryPending && (d.LastAt.IsZero() || (!endedBefore.IsZero() && tkey(d.LastAt) < cut)) {
			gone = append(gone, d)
		}
		return true
	})
	for _, d := range gone {
		t.putDelivery(d, nil)
	}
	n := len(gone)
	gone = gone[:0]
	t.st.endpoints.each(func(id string, _ *domain.WebhookEndpoint) bool {
		ended := 0
		ds := t.deliveriesOf(id)
		for i := len(ds) - 1; i >= 0; i-- { // newest first
			if ds[i].State == domain.DeliveryPending {
				continue
			}
			if ended++; ended > keep {
				gone = append(gone, ds[i])
			}
		}
		return true
	})
	for _, d := range gone {
		t.putDelivery(d, nil)
	}
	n += len(gone)
	var orphans []string
	t.st.messages.each(func(id string, _ *domain.WebhookMessage) bool {
		if _, used := t.firstDeliveryOf(id); !used {
			orphans = append(orphans, id)
		}
		return true
	})
	for _, id := range orphans {
		t.st.messages.delete(t.w, id)
	}
	return n, nil
}

// firstDeliveryOf returns the endpoint of a delivery of message id.
func (v view) firstDeliveryOf(id string) (endpointID string, ok bool) {
	v.st.messageDeliveries.ascend(&ss{a: id}, func(k ss, _ struct{}) bool {
		endpointID, ok = k.b, k.a == id
		return false
	})
	return endpointID, ok
}

// expiredWhy starts the last error of a delivery that ran out of time.
const expiredWhy = "not delivered within its retry window"

// ExpireWebhookDeliveries fails the pending deliveries made before
// madeBefore, ending them at at; their last error is kept after why.
func (t *tx) ExpireWebhookDeliveries(ctx context.Context, madeBefore, at time.Time) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	if madeBefore.IsZero() {
		return 0, nil // nothing was made before NULL
	}
	cut := tkey(dbTime(madeBefore))
	var expired []*domain.WebhookDelivery
	t.st.pendingDeliveries.each(func(_ sttid, d *domain.WebhookDelivery) bool {
		if !d.CreatedAt.IsZero() && tkey(d.CreatedAt) < cut {
			expired = append(expired, d)
		}
		return true
	})
	for _, d := range expired {
		next := *d
		next.State, next.NextAt, next.LastAt = domain.DeliveryFailed, time.Time{}, dbTime(at)
		next.LastError = expiredWhy
		if d.LastError != "" {
			next.LastError = expiredWhy + "; last error: " + d.LastError
		}
		t.putDelivery(d, &next)
	}
	return len(expired), nil
}
