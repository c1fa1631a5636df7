package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

func endpoint(id, project, name string, created time.Time) domain.WebhookEndpoint {
	return domain.WebhookEndpoint{ID: id, ProjectID: project, Name: name, URL: "https://hooks.example.com/" + id,
		Enabled: true, Secret: []byte("sealed-" + id), CreatedAt: created, UpdatedAt: created}
}

func message(id string, created time.Time) domain.WebhookMessage {
	return domain.WebhookMessage{ID: id, Type: "dev.sparecap.NodeAdded", EventID: "ev-" + id, Body: []byte(`{"id":"` + id + `"}`),
		CreatedAt: created}
}

func delivery(endpoint, msg string, created time.Time) domain.WebhookDelivery {
	return domain.WebhookDelivery{EndpointID: endpoint, MessageID: msg, Type: "dev.sparecap.NodeAdded", EventID: "ev-" + msg,
		State: domain.DeliveryPending, NextAt: created, CreatedAt: created}
}

// seedWebhooks makes projects p1 and p2.
func seedWebhooks(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		for _, p := range []string{"p1", "p2"} {
			if err := tx.CreateProject(t.Context(), domain.Project{ID: p, CreatedAt: at(0)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// testWebhookEndpoints: endpoints round-trip every field (the sealed
// secrets as given, microsecond times, empty filters as none), list by
// project oldest first, keep IDs and names in a project unique, and go
// with their deliveries.
func testWebhookEndpoints(t *testing.T, s store.Store) {
	ctx := t.Context()
	seedWebhooks(t, s)
	full := domain.WebhookEndpoint{ID: "wh-1", ProjectID: "p1", Name: "ray", URL: "https://ray.example.com/hook?x=1",
		EventTypes: []domain.EventReason{domain.ReasonPreemptionNotified, domain.ReasonNodeRemoved},
		ClusterIDs: []string{"c-1", "c-2"}, Enabled: true, Secret: []byte{0, 1, 2, 255}, PreviousSecret: []byte("old"),
		PreviousUntil: at(60).Add(123 * time.Microsecond), CreatedAt: at(2), UpdatedAt: at(3)}
	bare := endpoint("wh-0", "p1", "sky", at(1))
	bare.Enabled = false
	other := endpoint("wh-2", "p2", "ray", at(0)) // the same name in another project
	update(t, s, func(tx store.Tx) error {
		for _, e := range []domain.WebhookEndpoint{full, bare, other} {
			if err := tx.CreateWebhookEndpoint(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.GetWebhookEndpoint(ctx, "wh-1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "get endpoint", got, full)
	got, _ = s.GetWebhookEndpoint(ctx, "wh-0")
	wantEqual(t, "an endpoint without filters or a previous secret", got, bare)
	_, err = s.GetWebhookEndpoint(ctx, "wh-9")
	wantErr(t, "get missing endpoint", err, domain.ErrNotFound)
	list, err := s.ListWebhookEndpoints(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "p1's endpoints, oldest first", list, []domain.WebhookEndpoint{bare, full})
	all, _ := s.ListWebhookEndpoints(ctx, "")
	wantEqual(t, "every endpoint", ids(all, func(e domain.WebhookEndpoint) string { return e.ID }), []string{"wh-2", "wh-0", "wh-1"})
	none, _ := s.ListWebhookEndpoints(ctx, "p9")
	wantEqual(t, "a project without endpoints", none, []domain.WebhookEndpoint{})

	for _, c := range []struct {
		what string
		e    domain.WebhookEndpoint
		want error
	}{
		{"a taken ID", endpoint("wh-1", "p2", "new", at(4)), domain.ErrConflict},
		{"a name taken in the project", endpoint("wh-3", "p1", "ray", at(4)), domain.ErrConflict},
		{"a missing project", endpoint("wh-4", "p9", "x", at(4)), domain.ErrNotFound},
	} {
		err := s.Update(ctx, func(tx store.Tx) error { return tx.CreateWebhookEndpoint(ctx, c.e) })
		wantErr(t, "create with "+c.what, err, c.want)
	}

	// Update writes everything but the ID, project and creation time.
	changed := full
	changed.Name, changed.URL, changed.EventTypes, changed.ClusterIDs = "ray2", "http://10.0.0.1:8080/", nil, nil
	changed.Enabled, changed.Secret, changed.PreviousSecret, changed.PreviousUntil = false, []byte("new"), nil, time.Time{}
	changed.UpdatedAt = at(9)
	update(t, s, func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(ctx, changed) })
	got, _ = s.GetWebhookEndpoint(ctx, "wh-1")
	wantEqual(t, "updated endpoint", got, changed)
	err = s.Update(ctx, func(tx store.Tx) error {
		e := changed
		e.Name = "sky"
		return tx.UpdateWebhookEndpoint(ctx, e)
	})
	wantErr(t, "rename to a name taken in the project", err, domain.ErrConflict)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(ctx, endpoint("wh-9", "p1", "z", at(0))) })
	wantErr(t, "update a missing endpoint", err, domain.ErrNotFound)

	// Delete takes the endpoint's deliveries along, not another's.
	update(t, s, func(tx store.Tx) error {
		if err := tx.AddWebhookMessages(ctx, []domain.WebhookMessage{message("m1", at(5))}); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{delivery("wh-1", "m1", at(5)), delivery("wh-2", "m1", at(5))})
	})
	update(t, s, func(tx store.Tx) error { return tx.DeleteWebhookEndpoint(ctx, "wh-1") })
	_, err = s.GetWebhookEndpoint(ctx, "wh-1")
	wantErr(t, "get a deleted endpoint", err, domain.ErrNotFound)
	if ds, _ := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-1"}); len(ds) != 0 {
		t.Fatalf("a deleted endpoint's deliveries are left: %+v", ds)
	}
	if ds, _ := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-2"}); len(ds) != 1 {
		t.Fatalf("another endpoint's deliveries went too: %+v", ds)
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.DeleteWebhookEndpoint(ctx, "wh-1") })
	wantErr(t, "delete again", err, domain.ErrNotFound)
	// The name is free again.
	update(t, s, func(tx store.Tx) error { return tx.CreateWebhookEndpoint(ctx, endpoint("wh-5", "p1", "ray2", at(6))) })
}

// testWebhookDeliveries: messages keep the body they were made with;
// deliveries are added once per endpoint and message, listed newest
// first (by state, up to a limit), counted, and an attempt's outcome is
// written only while the delivery is pending.
func testWebhookDeliveries(t *testing.T, s store.Store) {
	ctx := t.Context()
	seedWebhooks(t, s)
	update(t, s, func(tx store.Tx) error {
		for _, e := range []domain.WebhookEndpoint{endpoint("wh-a", "p1", "a", at(0)), endpoint("wh-b", "p1", "b", at(0)),
			endpoint("wh-c", "p2", "c", at(0))} {
			if err := tx.CreateWebhookEndpoint(ctx, e); err != nil {
				return err
			}
		}
		var ms []domain.WebhookMessage
		var ds []domain.WebhookDelivery
		// 70 messages: more than one bulk statement holds.
		for i := range 70 {
			m := message(fmt.Sprintf("m%02d", i), at(i))
			ms = append(ms, m)
			ds = append(ds, delivery("wh-a", m.ID, at(i)))
		}
		ds = append(ds, delivery("wh-b", "m00", at(0)), delivery("wh-c", "m01", at(1)))
		if err := tx.AddWebhookMessages(ctx, ms); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, ds)
	})
	m, err := s.GetWebhookMessage(ctx, "m05")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "message", m, message("m05", at(5)))
	_, err = s.GetWebhookMessage(ctx, "m99")
	wantErr(t, "a missing message", err, domain.ErrNotFound)

	// Adding again changes nothing: the body is fixed once made, and a
	// delivery keeps its state.
	update(t, s, func(tx store.Tx) error {
		again := message("m05", at(50))
		again.Body = []byte("other")
		if err := tx.AddWebhookMessages(ctx, []domain.WebhookMessage{again}); err != nil {
			return err
		}
		d := delivery("wh-a", "m05", at(50))
		d.State, d.Attempts = domain.DeliveryFailed, 9
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{d})
	})
	m, _ = s.GetWebhookMessage(ctx, "m05")
	wantEqual(t, "message added again", m, message("m05", at(5)))
	ds, err := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "newest 3 deliveries", ids(ds, func(d domain.WebhookDelivery) string { return d.MessageID }), []string{"m69", "m68", "m67"})
	ds, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a"})
	if len(ds) != 70 || ds[64] != delivery("wh-a", "m05", at(5)) {
		t.Fatalf("all of wh-a's: %d, the one added again %+v", len(ds), ds[64])
	}

	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{delivery("wh-9", "m00", at(0))})
	})
	wantErr(t, "a delivery to a missing endpoint", err, domain.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{delivery("wh-a", "m99", at(0))})
	})
	wantErr(t, "a delivery of a missing message", err, domain.ErrNotFound)

	// An attempt's outcome: every field round-trips.
	done := delivery("wh-a", "m10", at(10))
	done.State, done.Attempts, done.NextAt, done.LastAt = domain.DeliveryDelivered, 3, time.Time{}, at(12).Add(7*time.Microsecond)
	done.LastStatus, done.Latency = 204, 1234567*time.Microsecond
	failing := delivery("wh-a", "m11", at(11))
	failing.Attempts, failing.NextAt, failing.LastAt, failing.LastStatus, failing.LastError = 1, at(20), at(11), 500, "500 Internal Server Error"
	failed := delivery("wh-a", "m12", at(12))
	failed.State, failed.Attempts, failed.NextAt, failed.LastError = domain.DeliveryFailed, 30, time.Time{}, "dial tcp: connection refused"
	update(t, s, func(tx store.Tx) error {
		return store.Each(ctx, []domain.WebhookDelivery{done, failing, failed}, tx.UpdateWebhookDelivery)
	})
	got, _ := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a", State: domain.DeliveryDelivered})
	wantEqual(t, "delivered", got, []domain.WebhookDelivery{done})
	got, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a", State: domain.DeliveryFailed, Limit: 5})
	wantEqual(t, "failed", got, []domain.WebhookDelivery{failed})
	got, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a", State: domain.DeliveryPending, Limit: 100})
	if len(got) != 68 || got[57] != failing {
		t.Fatalf("pending: %d, m11 %+v", len(got), got[57])
	}
	// By type: a test delivery to wh-b, beside an event's.
	test := delivery("wh-b", "m13", at(13))
	test.Type = "dev.sparecap.Test"
	update(t, s, func(tx store.Tx) error { return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{test}) })
	got, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a", Type: test.Type})
	wantEqual(t, "wh-a's of type Test", got, []domain.WebhookDelivery{})
	for _, f := range []store.DeliveryFilter{{Type: test.Type}, {Type: test.Type, State: domain.DeliveryPending},
		{Type: test.Type, Limit: 1}, {Type: test.Type, State: domain.DeliveryPending, Limit: 5}} {
		f.EndpointID = "wh-b"
		got, _ = s.ListWebhookDeliveries(ctx, f)
		wantEqual(t, fmt.Sprintf("wh-b's with %+v", f), got, []domain.WebhookDelivery{test})
	}
	got, _ = s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-b", Type: test.Type, State: domain.DeliveryFailed})
	wantEqual(t, "wh-b's failed tests", got, []domain.WebhookDelivery{})

	// Once delivered, a late outcome (another attempt's) is refused.
	late := done
	late.State, late.LastStatus = domain.DeliveryFailed, 500
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(ctx, late) })
	wantErr(t, "an outcome written after the delivery ended", err, domain.ErrNotFound)

	counts, err := s.CountWebhookDeliveries(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "p1's counts", counts, map[string]store.DeliveryCounts{
		"wh-a": {Pending: 68, Delivered: 1, Failed: 1}, "wh-b": {Pending: 2}})
	counts, _ = s.CountWebhookDeliveries(ctx, "")
	if len(counts) != 3 || counts["wh-c"] != (store.DeliveryCounts{Pending: 1}) {
		t.Fatalf("every project's counts: %+v", counts)
	}
}

// testWebhookDue: the due deliveries are the pending ones to enabled
// endpoints whose time has come, the longest due first, at most
// perEndpoint of each endpoint, so a backlog at one endpoint leaves room
// for the others.
func testWebhookDue(t *testing.T, s store.Store) {
	ctx := t.Context()
	seedWebhooks(t, s)
	update(t, s, func(tx store.Tx) error {
		var ms []domain.WebhookMessage
		var ds []domain.WebhookDelivery
		for _, e := range []string{"wh-slow", "wh-ok", "wh-off"} {
			ep := endpoint(e, "p1", e, at(0))
			ep.Enabled = e != "wh-off"
			if err := tx.CreateWebhookEndpoint(ctx, ep); err != nil {
				return err
			}
		}
		for i := range 10 {
			m := message(fmt.Sprintf("m%d", i), at(i))
			ms = append(ms, m)
			ds = append(ds, delivery("wh-slow", m.ID, at(i)))
		}
		ok := delivery("wh-ok", "m9", at(9))
		later := delivery("wh-ok", "m8", at(8))
		later.NextAt = at(100)
		ended := delivery("wh-ok", "m7", at(7))
		ended.State, ended.NextAt = domain.DeliveryDelivered, time.Time{}
		ds = append(ds, ok, later, ended, delivery("wh-off", "m0", at(0)))
		if err := tx.AddWebhookMessages(ctx, ms); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, ds)
	})
	due, err := s.DueWebhookDeliveries(ctx, at(50), 3, 100)
	if err != nil {
		t.Fatal(err)
	}
	key := func(d domain.WebhookDelivery) string { return d.EndpointID + "/" + d.MessageID }
	wantEqual(t, "due, 3 per endpoint", ids(due, key), []string{"wh-slow/m0", "wh-slow/m1", "wh-slow/m2", "wh-ok/m9"})
	due, _ = s.DueWebhookDeliveries(ctx, at(50), 3, 2)
	wantEqual(t, "due, 2 in all", ids(due, key), []string{"wh-slow/m0", "wh-slow/m1"})
	due, _ = s.DueWebhookDeliveries(ctx, at(5), 100, 100)
	wantEqual(t, "due at minute 5", ids(due, key), []string{"wh-slow/m0", "wh-slow/m1", "wh-slow/m2", "wh-slow/m3", "wh-slow/m4", "wh-slow/m5"})
	due, _ = s.DueWebhookDeliveries(ctx, at(100), 100, 100)
	if len(due) != 12 {
		t.Fatalf("due at minute 100: %v (the delivered one is never due, nor one to a disabled endpoint)", ids(due, key))
	}
	// Enabled again, its delivery is due.
	update(t, s, func(tx store.Tx) error {
		ep, err := tx.GetWebhookEndpoint(ctx, "wh-off")
		if err != nil {
			return err
		}
		ep.Enabled = true
		return tx.UpdateWebhookEndpoint(ctx, ep)
	})
	due, _ = s.DueWebhookDeliveries(ctx, at(0), 100, 100)
	wantEqual(t, "due with wh-off enabled", ids(due, key), []string{"wh-off/m0", "wh-slow/m0"})
}

// testWebhookExpire: deliveries still pending when their window ends
// fail, keeping their last error after why; newer ones and ended ones
// are left alone.
func testWebhookExpire(t *testing.T, s store.Store) {
	ctx := t.Context()
	seedWebhooks(t, s)
	old := delivery("wh-a", "m0", at(0))
	erred := delivery("wh-a", "m1", at(1))
	erred.Attempts, erred.LastStatus, erred.LastError = 4, 503, "HTTP 503 Service Unavailable"
	fresh := delivery("wh-a", "m2", at(10))
	done := delivery("wh-a", "m3", at(0))
	done.State, done.NextAt, done.LastAt = domain.DeliveryDelivered, time.Time{}, at(1)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateWebhookEndpoint(ctx, endpoint("wh-a", "p1", "a", at(0))); err != nil {
			return err
		}
		ms := []domain.WebhookMessage{message("m0", at(0)), message("m1", at(1)), message("m2", at(10)), message("m3", at(0))}
		if err := tx.AddWebhookMessages(ctx, ms); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{old, erred, fresh, done})
	})
	var n int
	update(t, s, func(tx store.Tx) (err error) {
		n, err = tx.ExpireWebhookDeliveries(ctx, at(5), at(30))
		return err
	})
	if n != 2 {
		t.Errorf("expired %d; want 2", n)
	}
	got, _ := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a"})
	byID := map[string]domain.WebhookDelivery{}
	for _, d := range got {
		byID[d.MessageID] = d
	}
	old.State, old.NextAt, old.LastAt, old.LastError = domain.DeliveryFailed, time.Time{}, at(30), "not delivered within its retry window"
	erred.State, erred.NextAt, erred.LastAt = domain.DeliveryFailed, time.Time{}, at(30)
	erred.LastError = "not delivered within its retry window; last error: HTTP 503 Service Unavailable"
	wantEqual(t, "expired, never tried", byID["m0"], old)
	wantEqual(t, "expired after errors", byID["m1"], erred)
	wantEqual(t, "still in its window", byID["m2"], fresh)
	wantEqual(t, "delivered", byID["m3"], done)
}

// testWebhookCursor: the dispatch cursor starts at 0, moves only with a
// committed transaction and is read back in one.
func testWebhookCursor(t *testing.T, s store.Store) {
	ctx := t.Context()
	if seq, err := s.WebhookCursor(ctx); err != nil || seq != 0 {
		t.Fatalf("a new store's cursor: %d, %v", seq, err)
	}
	update(t, s, func(tx store.Tx) error { return tx.SetWebhookCursor(ctx, 41) })
	update(t, s, func(tx store.Tx) error {
		if err := tx.SetWebhookCursor(ctx, 42); err != nil {
			return err
		}
		if seq, err := tx.WebhookCursor(ctx); err != nil || seq != 42 {
			return fmt.Errorf("read in the transaction: %d, %v", seq, err)
		}
		return nil
	})
	rollback := errors.New("roll back")
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.SetWebhookCursor(ctx, 99); err != nil {
			return err
		}
		return rollback
	})
	wantErr(t, "a rolled back move", err, rollback)
	if seq, err := s.WebhookCursor(ctx); err != nil || seq != 42 {
		t.Fatalf("cursor: %d, %v; want 42", seq, err)
	}
}

// testWebhookPrune: deliveries that ended before the retention, and
// those beyond the newest kept of their endpoint, are deleted with the
// messages no delivery needs any more; pending ones are never.
func testWebhookPrune(t *testing.T, s store.Store) {
	ctx := t.Context()
	seedWebhooks(t, s)
	update(t, s, func(tx store.Tx) error {
		for _, e := range []string{"wh-a", "wh-b"} {
			if err := tx.CreateWebhookEndpoint(ctx, endpoint(e, "p1", e, at(0))); err != nil {
				return err
			}
		}
		var ms []domain.WebhookMessage
		var ds []domain.WebhookDelivery
		for i := range 8 {
			m := message(fmt.Sprintf("m%d", i), at(i))
			ms = append(ms, m)
			d := delivery("wh-a", m.ID, at(i))
			if i != 0 && i != 6 { // m0 and m6 stay pending
				d.State, d.NextAt, d.LastAt = domain.DeliveryDelivered, time.Time{}, at(i+1)
			}
			ds = append(ds, d)
		}
		shared := delivery("wh-b", "m1", at(1)) // m1 is needed by wh-b still
		ds = append(ds, shared)
		if err := tx.AddWebhookMessages(ctx, ms); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, ds)
	})
	var n int
	update(t, s, func(tx store.Tx) (err error) {
		// Ended before minute 4: m1, m2 (ended at 2, 3). Beyond the newest
		// 3 ended of wh-a (m7, m5, m4): m3 too.
		n, err = tx.PruneWebhookDeliveries(ctx, at(4), 3)
		return err
	})
	if n != 3 {
		t.Errorf("pruned %d deliveries; want 3", n)
	}
	ds, _ := s.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: "wh-a"})
	wantEqual(t, "wh-a's after pruning", ids(ds, func(d domain.WebhookDelivery) string { return d.MessageID }),
		[]string{"m7", "m6", "m5", "m4", "m0"})
	for id, want := range map[string]error{"m0": nil, "m1": nil, "m2": domain.ErrNotFound, "m3": domain.ErrNotFound, "m7": nil} {
		if _, err := s.GetWebhookMessage(ctx, id); !errors.Is(err, want) {
			t.Errorf("message %s after pruning: %v; want %v", id, err, want)
		}
	}
}
