package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/webhook"
)

// The notice must never wait for webhooks: the same fan-out with a
// hundred endpoints that never answer (each attempt runs into the 10 s
// timeout) registered for the reclaimed cluster's project, against none.

// slowHooks counts what the slow endpoints received; st is the store the
// deliveries are recorded in.
type slowHooks struct {
	requests atomic.Int64
	st       store.Store
}

// notices counts the PreemptionNotified deliveries recorded so far.
func (h *slowHooks) notices(tb testing.TB) int {
	tb.Helper()
	eps, err := h.st.ListWebhookEndpoints(context.Background(), "p")
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for _, e := range eps {
		ds, err := h.st.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{EndpointID: e.ID})
		if err != nil {
			tb.Fatal(err)
		}
		for _, d := range ds {
			if d.Type == webhook.TypeOf(domain.ReasonPreemptionNotified) {
				n++
			}
		}
	}
	return n
}

// withSlowWebhooks registers n endpoints of project p at a receiver that
// holds every request until the test ends, and runs the webhook service
// (as the leader does) on the fixture's store and driver, woken by its
// controller's commits. With n 0 the service runs with nothing to send.
func withSlowWebhooks(n int, hooks *slowHooks) func(testing.TB, *fixture) {
	return func(tb testing.TB, f *fixture) {
		hooks.st = f.st
		release := make(chan struct{})
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hooks.requests.Add(1)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		tb.Cleanup(func() { close(release); recv.Close() })
		sealer, err := secret.NewSealer(make([]byte, secret.KeySize))
		if err != nil {
			tb.Fatal(err)
		}
		err = f.st.Update(f.ctx, func(tx store.Tx) error {
			for i := range n {
				id := fmt.Sprintf("wh-%03d", i)
				_, sealed, err := webhook.NewSecret(sealer, id)
				if err != nil {
					return err
				}
				if err := tx.CreateWebhookEndpoint(f.ctx, domain.WebhookEndpoint{ID: id, ProjectID: "p", Name: id,
					URL: recv.URL + "/" + id, Enabled: true, Secret: sealed, CreatedAt: time.Now()}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			tb.Fatal(err)
		}
		allow, _ := webhook.ParseAllow([]string{"127.0.0.0/8"})
		svc := webhook.New(webhook.Config{Store: f.st, Driver: f.router, Sealer: sealer, Policy: webhook.Policy{Allow: allow},
			Changed: f.ctrl.Changed})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { svc.Run(ctx); close(done) }()
		tb.Cleanup(func() { cancel(); <-done })
	}
}

// TestNoticeFanOutWithSlowWebhooks runs the benchmark's scenario small,
// for correctness: every pod gets its SIGTERM and every node its cordon
// while five endpoints hang, and the endpoints are sent the notices.
func TestNoticeFanOutWithSlowWebhooks(t *testing.T) {
	var hooks slowHooks
	s := fanOut{nodes: 3, pods: 3, checkpoint: 500 * time.Millisecond, qps: kube.DefaultQPS, burst: kube.DefaultBurst,
		setup: withSlowWebhooks(5, &hooks)}
	n := s.sparecap(t)
	if len(n.pods) != s.nodes*s.pods || len(n.nodes) != s.nodes {
		t.Fatalf("%d pods, %d nodes noticed", len(n.pods), len(n.nodes))
	}
	eventually(t, 10*time.Second, func() error {
		// A notice per node to each of the 5 endpoints, up to 4 at once each.
		if got := hooks.requests.Load(); got < 5 {
			return fmt.Errorf("the slow endpoints got %d requests", got)
		}
		if got := hooks.notices(t); got != 3*5 {
			return fmt.Errorf("%d notice deliveries recorded; want 3 nodes × 5 endpoints", got)
		}
		return nil
	})
	// Each notice's message lists its node's pods as the real API server
	// has them (with their UIDs), and its deadline.
	ds, err := hooks.st.ListWebhookDeliveries(context.Background(), store.DeliveryFilter{EndpointID: "wh-000"})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, d := range ds {
		if d.Type != webhook.TypeOf(domain.ReasonPreemptionNotified) {
			continue
		}
		m, err := hooks.st.GetWebhookMessage(context.Background(), d.MessageID)
		if err != nil {
			t.Fatal(err)
		}
		var ce struct{ Data webhook.EventData }
		if err := json.Unmarshal(m.Body, &ce); err != nil {
			t.Fatal(err)
		}
		w := ce.Data.Work
		if ce.Data.Deadline == nil || w == nil || !w.Listed || w.Pods == nil || len(*w.Pods) != s.pods {
			t.Fatalf("a notice's message: %s", m.Body)
		}
		for _, p := range *w.Pods {
			if p.UID == "" || p.Namespace != "bench-sparecap" {
				t.Errorf("pod %+v in %s's notice", p, ce.Data.NodeName)
			}
		}
		checked++
	}
	if checked != s.nodes {
		t.Errorf("checked %d notices; want %d", checked, s.nodes)
	}
}

// BenchmarkNoticeFanOutWebhooks: the notice fan-out of
// BenchmarkNoticeFanOut (50 nodes × 20 pods reclaimed at once, sparecap's
// driver at QPS 500, burst 1000), with the webhook service running and
// no endpoint registered, and with 100 endpoints of the tenant's project
// that never answer and want every event: the fill's NodeAdded events
// already keep the sender's slots full of attempts hanging on their
// timeout when the reclaim starts, and its 50 notices × 100 endpoints
// are dispatched while the SIGTERMs go out (notice-deliveries: how many
// were recorded by the time the last SIGTERM was out). Run it with:
//
//	go test -run '^$' -bench NoticeFanOutWebhooks -benchtime 1x -count 3 ./internal/kube/
func BenchmarkNoticeFanOutWebhooks(b *testing.B) {
	got := map[string]notices{}
	sent := map[string]int64{}
	for _, w := range []struct {
		name      string
		endpoints int
	}{{"none", 0}, {"100-slow-endpoints", 100}} {
		b.Run(w.name, func(b *testing.B) {
			for range b.N {
				var hooks slowHooks
				s := fanOut{nodes: 50, pods: 20, checkpoint: 10 * time.Second, qps: kube.DefaultQPS, burst: kube.DefaultBurst,
					setup: withSlowWebhooks(w.endpoints, &hooks)}
				n := s.sparecap(b)
				got[w.name], sent[w.name] = n, hooks.requests.Load()
				b.ReportMetric(n.all().Seconds(), "all-s")
				b.ReportMetric(n.quantile(0.5).Seconds(), "p50-s")
				b.ReportMetric(n.quantile(0.99).Seconds(), "p99-s")
				b.ReportMetric(float64(hooks.requests.Load()), "hook-requests")
				b.ReportMetric(float64(hooks.notices(b)), "notice-deliveries")
			}
		})
	}
	none, slow := got["none"], got["100-slow-endpoints"]
	if len(none.pods) == 0 || len(slow.pods) == 0 {
		return // a way was filtered out with -bench
	}
	ms := func(d time.Duration) time.Duration { return d.Round(time.Millisecond) }
	fmt.Printf("50 nodes × 20 pods: every SIGTERM out in %s (p50 %s, p99 %s) with no webhook endpoint; %s (p50 %s, p99 %s) with 100 endpoints that never answer, which had %d requests hanging by then: %.2f×\n",
		ms(none.all()), ms(none.quantile(0.5)), ms(none.quantile(0.99)),
		ms(slow.all()), ms(slow.quantile(0.5)), ms(slow.quantile(0.99)), sent["100-slow-endpoints"],
		slow.all().Seconds()/none.all().Seconds())
}
