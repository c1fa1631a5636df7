package storetest

import (
	"errors"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testTextIsBounded: the text columns an outsider fills (an endpoint's
// answer in a delivery's error, a cluster API's error in a node's, a
// driver's report in an event's message) are stored cut to
// store.MaxText bytes, however they are written: one row or a batch, a
// create or an update, a delivery's expiry. A tenant cannot grow the
// store by more than that per row.
func testTextIsBounded(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	huge := strings.Repeat("é", 5<<20/2)
	check := func(what, got string) {
		t.Helper()
		if len(got) > store.MaxText || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
			t.Errorf("%s: %d bytes stored (%.20q…); want at most %d, cut and marked", what, len(got), got, store.MaxText)
		}
	}
	a, b := node("a", "c1", "m1", domain.NodeProvisioning, at(1)), node("b", "c1", "m1", domain.NodePending, at(1))
	a.LastError = huge
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, a) })
	got, err := s.GetNode(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	check("a created node's error", got.LastError)
	b.LastError = "short"
	update(t, s, func(tx store.Tx) error { return tx.CreateNodes(ctx, []domain.Node{b}) })
	a.LastError, b.LastError = huge, huge
	update(t, s, func(tx store.Tx) error { return tx.UpdateNodes(ctx, []domain.Node{a, b}) })
	for _, id := range []string{"a", "b"} {
		if got, err = s.GetNode(ctx, id); err != nil {
			t.Fatal(err)
		}
		check("an updated node's error", got.LastError)
	}

	update(t, s, func(tx store.Tx) error {
		_, err := tx.AddEvent(ctx, domain.Event{ID: "ev-1", ClusterID: "c1", NodeName: "a", Reason: domain.ReasonNodeLost,
			Message: huge, Timestamp: at(2)})
		if err != nil {
			return err
		}
		return tx.AddEvents(ctx, []domain.Event{
			{ID: "ev-2", ClusterID: "c1", NodeID: "n-x", Reason: domain.ReasonNodeLost, Message: huge, Timestamp: at(3)},
			{ID: "ev-3", ClusterID: "c1", NodeID: "n-y", Reason: domain.ReasonNodeLost, Message: huge, Timestamp: at(3)}})
	})
	evs, err := s.ListEvents(ctx, store.EventFilter{ClusterID: "c1"})
	if err != nil || len(evs) != 3 {
		t.Fatalf("events: %d, %v", len(evs), err)
	}
	for _, e := range evs {
		check("event "+e.ID+"'s message", e.Message)
	}

	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateWebhookEndpoint(ctx, endpoint("wh-1", "p1", "a", at(0))); err != nil {
			return err
		}
		ms := []domain.WebhookMessage{message("m1", at(0)), message("m2", at(0))}
		d1, d2 := delivery("wh-1", "m1", at(0)), delivery("wh-1", "m2", at(0))
		d1.LastError = huge
		return errors.Join(tx.AddWebhookMessages(ctx, ms), tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{d1, d2}))
	})
	d2 := delivery("wh-1", "m2", at(0))
	d2.Attempts, d2.LastError, d2.LastAt = 1, huge, at(1)
	update(t, s, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(ctx, d2) })
	ds, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-1"})
	if err != nil || len(ds) != 2 {
		t.Fatalf("deliveries: %d, %v", len(ds), err)
	}
	for _, d := range ds {
		check("delivery "+d.MessageID+"'s error", d.LastError)
	}
	// Expiry puts its reason before the error: still bounded.
	update(t, s, func(tx store.Tx) error { _, err := tx.ExpireWebhookDeliveries(ctx, at(10), at(5)); return err })
	ds, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-1"})
	for _, d := range ds {
		if d.State != domain.DeliveryFailed || len(d.LastError) > store.MaxText+200 {
			t.Errorf("expired delivery %s: %s, %d bytes of error", d.MessageID, d.State, len(d.LastError))
		}
	}
}
