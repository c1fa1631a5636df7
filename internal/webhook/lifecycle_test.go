package webhook

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/store"
)

// TestANewLeaderCarriesOn: the deliveries one Service dispatched but did
// not send (its term ended) are sent by the next one, which reads the
// same cursor: every event is dispatched once, and a delivery whose
// outcome was not recorded is sent again (at least once).
func TestANewLeaderCarriesOn(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, nil)
	ep, _ := f.endpoint("p", r.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(5*time.Minute))
	f.event("c-k", "gpu-2", domain.ReasonNodeAdded, time.Time{})
	if _, err := f.svc.dispatch(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The term ends before anything is sent.
	next := New(f.svc.cfg)
	f.svc = next
	f.step()
	if n := len(r.requests()); n != 2 {
		t.Fatalf("the next leader sent %d deliveries; want the 2 dispatched before", n)
	}
	ds := f.deliveries(ep.ID)
	if len(ds) != 2 || ds[0].State != domain.DeliveryDelivered || ds[1].State != domain.DeliveryDelivered {
		t.Fatalf("deliveries %+v", ds)
	}
	// A third leader dispatches nothing again.
	f.svc = New(f.svc.cfg)
	f.step()
	if n := len(r.requests()); n != 2 {
		t.Fatalf("a later leader sent %d; events were dispatched twice", n)
	}

	// A term that ends during an attempt records nothing: the next one
	// sends it again, with the same ID and body.
	hang := make(chan struct{})
	slow := newReceiver(t, func(n int) (int, time.Duration) {
		if n == 1 {
			<-hang
		}
		return 200, 0
	})
	defer close(hang)
	ep2, _ := f.endpoint("p", slow.URL, nil)
	f.event("c-k", "gpu-3", domain.ReasonNodeRemoved, time.Time{})
	ctx, cancel := context.WithCancel(f.ctx)
	if _, err := f.svc.dispatch(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rec := make(chan ended, f.svc.cfg.Workers)
	f.svc.fill(ctx, &wg, rec)
	for len(slow.requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	wg.Wait()
	close(rec)
	for e := range rec {
		if e.next.EndpointID == ep2.ID {
			t.Fatalf("an attempt cut by the term's end gave an outcome to record: %+v", e)
		}
	}
	if d := f.deliveries(ep2.ID); len(d) != 1 || d[0].State != domain.DeliveryPending || d[0].Attempts != 0 {
		t.Fatalf("after a term ended mid-attempt: %+v; want it pending, with no attempt recorded", d)
	}
	f.svc = New(f.svc.cfg)
	f.step()
	got := slow.requests()
	if len(got) != 2 || got[0].header.Get("webhook-id") != got[1].header.Get("webhook-id") || string(got[0].body) != string(got[1].body) {
		t.Fatalf("the receiver got %d requests; want the same delivery twice", len(got))
	}
	if d := f.deliveries(ep2.ID); d[0].State != domain.DeliveryDelivered || d[0].Attempts != 1 {
		t.Fatalf("%+v", d)
	}
}

// TestCursorCheckpoint: events nobody asked for move the cursor in
// memory, and in the store at most every checkpointEvery (not once per
// commit of the controller); a new leader reads from there.
func TestCursorCheckpoint(t *testing.T) {
	f := newFixture(t, nil)
	e1 := f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step()
	if seq, _ := f.st.WebhookCursor(f.ctx); seq != 0 {
		t.Fatalf("stored cursor %d right away; want it left for the checkpoint", seq)
	}
	f.clk.Step(checkpointEvery)
	e2 := f.event("c-k", "gpu-2", domain.ReasonNodeAdded, time.Time{})
	f.step()
	f.step()
	if seq, _ := f.st.WebhookCursor(f.ctx); seq != e2.Seq || e2.Seq <= e1.Seq {
		t.Fatalf("stored cursor %d; want %d", seq, e2.Seq)
	}
}

// TestDisabledEndpointWaits: a disabled endpoint's pending deliveries are
// not sent, nor are new ones made; enabled again, what was pending goes
// out; at the end of the window what is still pending fails.
func TestDisabledEndpointWaits(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, func(int) (int, time.Duration) { return 503, 0 })
	ep, _ := f.endpoint("p", r.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step() // one attempt, 503
	ep.Enabled = false
	f.update(func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(f.ctx, ep) })
	f.clk.Step(time.Hour)
	f.event("c-k", "gpu-2", domain.ReasonNodeAdded, time.Time{})
	f.step()
	if n := len(r.requests()); n != 1 {
		t.Fatalf("a disabled endpoint got %d requests; want only the first", n)
	}
	if ds := f.deliveries(ep.ID); len(ds) != 1 {
		t.Fatalf("a disabled endpoint got a new delivery: %+v", ds)
	}
	ep.Enabled = true
	f.update(func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(f.ctx, ep) })
	f.svc.mu.Lock()
	delete(f.svc.health, ep.ID)
	f.svc.mu.Unlock()
	f.step()
	if n := len(r.requests()); n != 2 {
		t.Fatalf("enabled again: %d requests; want the pending one sent", n)
	}
	// Past the window, the prune pass fails what is left pending.
	ep.Enabled = false
	f.update(func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(f.ctx, ep) })
	f.clk.Step(RetryWindow)
	if err := f.svc.prune(f.ctx); err != nil {
		t.Fatal(err)
	}
	d := f.deliveries(ep.ID)[0]
	if d.State != domain.DeliveryFailed || d.LastError != "not delivered within its retry window; last error: HTTP 503 Service Unavailable: Service Unavailable" {
		t.Fatalf("past the window: %+v", d)
	}
}

// TestRunWakesOnCommits: with a poll of an hour, a committed event is
// delivered at once: the dispatcher wakes on the controller's Changed.
func TestRunWakesOnCommits(t *testing.T) {
	var mu sync.Mutex
	changed := make(chan struct{})
	f := newFixture(t, func(c *Config) {
		c.Poll = time.Hour
		c.Changed = func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return changed }
		c.Random = random.New(2)
	})
	r := newReceiver(t, nil)
	f.endpoint("p", r.URL, nil)
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { f.svc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	time.Sleep(50 * time.Millisecond) // the first read found nothing
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(time.Minute))
	mu.Lock()
	close(changed)
	changed = make(chan struct{})
	mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for len(r.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("not delivered within 5s of the commit")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
