package scalebench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"
)

var flagWebhooks = flag.Int("webhooks", 0, "webhook endpoints per project, wanting every event, on a receiver in this process that answers 204 at once (0: none)")

// receiver is the webhook endpoints' other side: it counts what arrives,
// by type, with when the last of each type came.
type receiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	n    map[string]int
	last map[string]time.Time
	// seen holds each delivery's endpoint and webhook-id: one seen again
	// is a duplicate (at least once: an attempt whose outcome was not
	// recorded, or that timed out after the receiver got it, is made
	// again).
	seen map[string]bool
	dups int
}

func newReceiver() *receiver {
	rc := &receiver{n: map[string]int{}, last: map[string]time.Time{}, seen: map[string]bool{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var ev struct {
			Type string `json:"type"`
		}
		body, _ := io.ReadAll(req.Body)
		typ := "unreadable"
		if json.Unmarshal(body, &ev) == nil {
			typ = strings.TrimPrefix(ev.Type, "dev.sparecap.")
		}
		id := req.URL.Path + " " + req.Header.Get("webhook-id")
		rc.mu.Lock()
		if rc.seen[id] {
			rc.dups++
		}
		rc.seen[id] = true
		rc.n[typ]++
		rc.last[typ] = time.Now()
		rc.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	return rc
}

func (rc *receiver) duplicates() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.dups
}

func (rc *receiver) counts() (map[string]int, map[string]time.Time, int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	n, last, total := map[string]int{}, map[string]time.Time{}, 0
	for k, v := range rc.n {
		n[k], last[k] = v, rc.last[k]
		total += v
	}
	return n, last, total
}

// webhookArgs are the server flags the receiver needs: it listens on
// loopback, which the address policy refuses unless allowed.
func webhookArgs() []string {
	if *flagWebhooks <= 0 {
		return nil
	}
	return []string{"--webhook-allow-cidr", "127.0.0.0/8"}
}

// registerWebhooks registers -webhooks endpoints in every project, all
// pointing at the receiver (each at a path of its own), before the clusters are created: every
// lifecycle event of the run is then delivered that many times.
func (r *run) registerWebhooks(ctx context.Context) error {
	if *flagWebhooks <= 0 {
		return nil
	}
	r.hooks = newReceiver()
	start := time.Now()
	for p, token := range r.tokens {
		for i := range *flagWebhooks {
			rctx, cancel := context.WithTimeout(ctx, *flagRequestTimeout)
			err := r.admin.do(rctx, "POST", "/v1/webhooks", token,
				map[string]string{"name": fmt.Sprintf("bench-%d", i), "url": fmt.Sprintf("%s/%s/%d", r.hooks.srv.URL, p, i)}, nil)
			cancel()
			if err != nil {
				return fmt.Errorf("project %s: endpoint %d: %w", p, i, err)
			}
		}
	}
	r.rep.Meta["webhooks_per_project"] = *flagWebhooks
	r.logf("%d webhook endpoints in each of %d projects in %s", *flagWebhooks, len(r.tokens), time.Since(start).Round(time.Millisecond))
	return nil
}

// webhookFigures waits (up to a minute) until deliveries stop arriving,
// then records how many of each type came, and when the burst's last
// PreemptionNotified came after the burst began.
func (r *run) webhookFigures(ctx context.Context) {
	if r.hooks == nil {
		return
	}
	defer r.hooks.srv.Close()
	_, _, prev := r.hooks.counts()
	for end := time.Now().Add(time.Minute); time.Now().Before(end); {
		if !sleep(ctx, 3*time.Second) {
			break
		}
		_, _, total := r.hooks.counts()
		if total == prev {
			break
		}
		prev = total
	}
	n, last, total := r.hooks.counts()
	r.add("webhooks", "webhook-deliveries", "deliveries received, all types", float64(total), "deliveries")
	r.add("webhooks", "webhook-duplicates", "deliveries received again (same endpoint and webhook-id)", float64(r.hooks.duplicates()), "deliveries")
	for _, typ := range []string{"NodeAdded", "PreemptionNotified", "NodeRemoved", "TargetUnfulfilled"} {
		r.add("webhooks", "webhook-"+typ, "deliveries received: "+typ, float64(n[typ]), "deliveries")
	}
	if !r.burstStart.IsZero() && last["PreemptionNotified"].After(r.burstStart) {
		r.add("webhooks", "webhook-burst-last-notice-s", "burst start to the last PreemptionNotified delivery received",
			last["PreemptionNotified"].Sub(r.burstStart).Seconds(), "s")
	}
	r.logf("webhooks: %d deliveries received: %v", total, n)
}
