package webhook

import (
	"bytes"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// TestPreemptionNoticeIsASignedCloudEvent: a PreemptionNotified event
// reaches an endpoint as a CloudEvent in structured mode, signed the
// Standard Webhooks way, with the node, its deadline and the pods on it
// (the DaemonSet's left out); a Slurm node's message lists its jobs.
func TestPreemptionNoticeIsASignedCloudEvent(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, nil)
	ep, secret := f.endpoint("p", r.URL+"/hook", nil)
	f.drv.work["c-k/gpu-1"] = []driver.Work{
		{Namespace: "ml", Name: "trainer-0", UID: "uid-0"},
		{Namespace: "ml", Name: "trainer-1", UID: "uid-1", Stopping: true},
		{Namespace: "kube-system", Name: "logs-x", UID: "uid-d", Support: true}}
	f.drv.work["c-s/node7"] = []driver.Work{{Namespace: "acme", Name: "train.sh", UID: "4242.1"}}
	deadline := t0.Add(5 * time.Minute).Add(123456 * time.Microsecond)
	e := f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, deadline)
	f.step()

	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests; want 1", len(got))
	}
	h, body := got[0].header, got[0].body
	if ct := h.Get("Content-Type"); ct != "application/cloudevents+json" {
		t.Errorf("Content-Type %q", ct)
	}
	if id := h.Get("webhook-id"); id != e.ID+"-"+strconv.FormatInt(e.Seq, 10) {
		t.Errorf("webhook-id %q; want the event's ID and cursor", id)
	}
	if ts := h.Get("webhook-timestamp"); ts != strconv.FormatInt(t0.Unix(), 10) {
		t.Errorf("webhook-timestamp %q; want the attempt's wall time %d", ts, t0.Unix())
	}
	if err := webhooks.Verify(secret, h, body, t0); err != nil {
		t.Fatalf("the signature does not verify with the endpoint's secret: %v", err)
	}
	ce, data := decode(t, body)
	want := cloudEvent{SpecVersion: "1.0", ID: h.Get("webhook-id"), Source: "/v1/clusters/c-k", Type: "dev.sparecap.PreemptionNotified",
		Subject: "gpu-1", Time: t0, DataContentType: "application/json"}
	ce.Data = nil
	if ce != want {
		t.Errorf("envelope\n %+v\nwant\n %+v", ce, want)
	}
	if data.Deadline == nil || !data.Deadline.Equal(deadline) || data.ProjectID != "p" || data.ClusterID != "c-k" ||
		data.NodeName != "gpu-1" || data.NodeID != "n-gpu-1" || data.Reason != "PreemptionNotified" || data.EventID != e.ID ||
		data.Cursor != strconv.FormatInt(e.Seq, 10) || data.ClusterType != "KUBERNETES" || data.Message == "" {
		t.Errorf("data %+v", data)
	}
	if data.Work == nil || !data.Work.Listed || data.Work.Pods == nil || data.Work.Jobs != nil ||
		len(*data.Work.Pods) != 2 || (*data.Work.Pods)[1] != (Pod{Namespace: "ml", Name: "trainer-1", UID: "uid-1"}) {
		t.Errorf("work %+v", data.Work)
	}
	if !bytes.Contains(body, []byte(`"deadline":"`+deadline.Format(time.RFC3339Nano)+`"`)) {
		t.Errorf("the deadline is not RFC 3339 in the body: %s", body)
	}
	ds := f.deliveries(ep.ID)
	if len(ds) != 1 || ds[0].State != domain.DeliveryDelivered || ds[0].Attempts != 1 || ds[0].LastStatus != 204 ||
		ds[0].LastError != "" || ds[0].Latency <= 0 || !ds[0].LastAt.Equal(t0) || !ds[0].NextAt.IsZero() {
		t.Errorf("the delivery record: %+v", ds)
	}

	f.event("c-s", "node7", domain.ReasonPreemptionNotified, deadline)
	f.step()
	got = r.requests()
	_, data = decode(t, got[len(got)-1].body)
	if data.ClusterType != "SLURM" || data.Work == nil || data.Work.Pods != nil || data.Work.Jobs == nil ||
		len(*data.Work.Jobs) != 1 || (*data.Work.Jobs)[0] != (Job{JobID: "4242", Name: "train.sh", Account: "acme"}) {
		t.Errorf("a Slurm node's notice: %+v", data.Work)
	}
}

// TestWorkNotListedInTimeDoesNotHoldTheNotice: a cluster that does not
// list a node's work within WorkTimeout costs the message its list (it
// says so), not its delivery.
func TestWorkNotListedInTimeDoesNotHoldTheNotice(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.WorkTimeout = 100 * time.Millisecond })
	r := newReceiver(t, nil)
	f.endpoint("p", r.URL, nil)
	f.drv.block = true
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(5*time.Minute))
	start := time.Now()
	f.step()
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the notice took %s", took)
	}
	got := r.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	_, data := decode(t, got[0].body)
	if data.Work == nil || data.Work.Listed || data.Work.Pods != nil || !strings.Contains(data.Work.Unavailable, "within 100ms") {
		t.Errorf("work %+v; want it marked not listed", data.Work)
	}
	if data.Deadline == nil {
		t.Error("no deadline")
	}
}

// TestEndpointsGetWhatTheyAskFor: event types and clusters filter; an
// endpoint of another project never hears of p's clusters; a disabled
// endpoint gets nothing; work is listed only when someone asked.
func TestEndpointsGetWhatTheyAskFor(t *testing.T) {
	f := newFixture(t, nil)
	// Nobody asks yet: no message, no list of work.
	f.event("c-k", "gpu-0", domain.ReasonPreemptionNotified, t0.Add(time.Minute))
	f.step()
	if f.drv.calls != 0 {
		t.Errorf("a notice nobody asked for listed work %d times", f.drv.calls)
	}
	all, notices, onlyS, other, off := newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil), newReceiver(t, nil)
	f.endpoint("p", all.URL, nil)
	f.endpoint("p", notices.URL, func(e *domain.WebhookEndpoint) {
		e.EventTypes = []domain.EventReason{domain.ReasonPreemptionNotified, domain.ReasonNodeRemoved}
	})
	f.endpoint("p", onlyS.URL, func(e *domain.WebhookEndpoint) { e.ClusterIDs = []string{"c-s"} })
	f.endpoint("q", other.URL, nil)
	f.endpoint("p", off.URL, func(e *domain.WebhookEndpoint) { e.Enabled = false })
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(time.Minute))
	f.event("c-s", "n1", domain.ReasonNodeRemoved, time.Time{})
	f.event("c-k", "", domain.ReasonTargetUnfulfilled, time.Time{})
	f.step()
	types := func(r *receiver) string {
		var out []string
		for _, q := range r.requests() {
			ce, _ := decode(t, q.body)
			out = append(out, strings.TrimPrefix(ce.Type, TypePrefix)+"@"+strings.TrimPrefix(ce.Source, "/v1/clusters/"))
		}
		return strings.Join(sortStrings(out), " ")
	}
	for _, c := range []struct {
		name string
		r    *receiver
		want string
	}{
		{"every event of p", all, "NodeAdded@c-k NodeRemoved@c-s PreemptionNotified@c-k TargetUnfulfilled@c-k"},
		{"PreemptionNotified and NodeRemoved", notices, "NodeRemoved@c-s PreemptionNotified@c-k"},
		{"cluster c-s", onlyS, "NodeRemoved@c-s"},
		{"project q", other, ""},
		{"disabled", off, ""},
	} {
		if got := types(c.r); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
	if f.drv.calls != 1 {
		t.Errorf("ListWork called %d times; want once (one drain notice)", f.drv.calls)
	}
	f.event("c-q", "gpu-9", domain.ReasonPreemptionNotified, t0.Add(time.Minute))
	f.step()
	if got := types(other); got != "PreemptionNotified@c-q" {
		t.Errorf("q's endpoint: %q", got)
	}
	if got := types(all); strings.Contains(got, "c-q") || strings.Contains(got, "gpu-0") {
		t.Errorf("p's endpoint heard of q's cluster, or of an event from before it was registered: %q", got)
	}
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// stepUntilDone moves the clock to each next attempt of ep's delivery
// until it ends, and returns the wall times of the attempts (by the
// fake clock, as the receiver saw them in webhook-timestamp).
func (f *fixture) stepUntilDone(ep string, maxAttempts int) []time.Time {
	f.t.Helper()
	var at []time.Time
	for range maxAttempts {
		f.step()
		ds := f.deliveries(ep)
		if len(ds) != 1 {
			f.t.Fatalf("%d deliveries", len(ds))
		}
		d := ds[0]
		if d.Attempts != len(at)+1 {
			f.t.Fatalf("after step %d: %d attempts", len(at)+1, d.Attempts)
		}
		at = append(at, d.LastAt)
		if d.State != domain.DeliveryPending {
			return at
		}
		if !d.NextAt.After(f.clk.Now()) {
			f.t.Fatalf("next attempt %s is not after now %s", d.NextAt, f.clk.Now())
		}
		// The endpoint's hold never outlasts the delivery's own gap here:
		// set the clock to the later of the two.
		f.clk.Set(d.NextAt)
		f.svc.mu.Lock()
		if h := f.svc.health[ep]; h != nil && h.holdTill.After(f.clk.Now()) {
			f.clk.Set(h.holdTill)
		}
		f.svc.mu.Unlock()
	}
	f.t.Fatalf("still pending after %d attempts", maxAttempts)
	return nil
}

// TestFailingEndpointsAreRetriedWithBackoffThenFailed: an endpoint that
// answers 500, one that is down (nothing listens) and one that answers
// after the timeout each get their delivery retried, the same message
// every time, at gaps that grow from about 5 s to about an hour, until a
// day has passed; then it is failed, with the last error kept.
func TestFailingEndpointsAreRetriedWithBackoffThenFailed(t *testing.T) {
	for _, c := range []struct {
		name    string
		answer  func(int) (int, time.Duration)
		down    bool
		wantErr string
	}{
		{"500", func(int) (int, time.Duration) { return 500, 0 }, false, "HTTP 500 Internal Server Error: Internal Server Error"},
		{"down", nil, true, "connection refused"},
		{"slow", func(int) (int, time.Duration) { return 200, 500 * time.Millisecond }, false, "no answer within 50ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, func(cfg *Config) { cfg.Timeout = 50 * time.Millisecond })
			r := newReceiver(t, c.answer)
			url := r.URL
			if c.down {
				r.Close()
			}
			ep, _ := f.endpoint("p", url, nil)
			f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
			at := f.stepUntilDone(ep.ID, 60)
			d := f.deliveries(ep.ID)[0]
			if d.State != domain.DeliveryFailed || !strings.Contains(d.LastError, c.wantErr) || !d.NextAt.IsZero() {
				t.Fatalf("the end: %+v; want failed with %q", d, c.wantErr)
			}
			if n := len(at); n < 25 || n > 40 {
				t.Errorf("%d attempts in the window; want about 30", n)
			}
			last := at[len(at)-1]
			if span := last.Sub(at[0]); span > RetryWindow || span < RetryWindow-2*MaxRetryGap {
				t.Errorf("attempts spanned %s; want a little under %s", span, RetryWindow)
			}
			for i := 1; i < len(at); i++ {
				gap, base := at[i].Sub(at[i-1]), FirstRetry<<(i-1)
				if base > MaxRetryGap || base <= 0 {
					base = MaxRetryGap
				}
				if gap < base*4/5 || gap > base*6/5 {
					t.Errorf("gap %d: %s; want %s ± 20%%", i, gap, base)
				}
			}
			if !c.down {
				reqs := r.requests()
				// A slow endpoint's request may time out before it arrives.
				if len(reqs) != len(at) && (c.name != "slow" || len(reqs) < len(at)/2) {
					t.Fatalf("the receiver got %d requests for %d attempts", len(reqs), len(at))
				}
				for i, q := range reqs {
					if !bytes.Equal(q.body, reqs[0].body) || q.header.Get("webhook-id") != reqs[0].header.Get("webhook-id") {
						t.Fatalf("attempt %d sent another body or ID", i+1)
					}
					if ts := q.header.Get("webhook-timestamp"); c.name != "slow" && ts != strconv.FormatInt(at[i].Unix(), 10) {
						// The timestamp is the attempt's own (at[i] is when it ended,
						// the same fake instant).
						t.Errorf("attempt %d: webhook-timestamp %s, want %d", i+1, ts, at[i].Unix())
					}
				}
			}
		})
	}
}

// TestSlowEndpointsHoldUpNobody: while 100 endpoints hang (all tried at
// once), another endpoint's delivery of the same event arrives well
// before their timeout;
// once the slow ones are failing they get one attempt at a time and half
// the slots between them, so with few slots a healthy endpoint still gets
// through.
func TestSlowEndpointsHoldUpNobody(t *testing.T) {
	release := make(chan struct{})
	slow := newReceiver(t, func(int) (int, time.Duration) {
		<-release
		return 200, 0
	})
	defer close(release)
	f := newFixture(t, func(c *Config) { c.Timeout = 10 * time.Second })
	for range 100 {
		f.endpoint("p", slow.URL+"/slow", nil)
	}
	fast := newReceiver(t, nil)
	ok, _ := f.endpoint("p", fast.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonPreemptionNotified, t0.Add(5*time.Minute))
	ctx, cancel := context.WithCancel(f.ctx)
	done := make(chan struct{})
	go func() { f.svc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	start := time.Now()
	for len(fast.requests()) == 0 || len(slow.requests()) < 100 {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("within 5s (the timeout is 10s): the healthy endpoint got %d requests, the 100 slow ones %d; want 1 and 100, all at once",
				len(fast.requests()), len(slow.requests()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("the healthy endpoint's delivery arrived after %s", fast.requests()[0].at.Sub(start).Round(time.Millisecond))
	for d := f.deliveries(ok.ID); len(d) != 1 || d[0].State != domain.DeliveryDelivered; d = f.deliveries(ok.ID) {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("the healthy endpoint's delivery is not recorded delivered: %+v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFailingEndpointsKeepHalfTheSlots: with 8 slots and 20 endpoints
// that time out, once they are known to fail they hold at most 4 slots,
// one each, and a healthy endpoint's deliveries keep flowing.
func TestFailingEndpointsKeepHalfTheSlots(t *testing.T) {
	release := make(chan struct{})
	slow := newReceiver(t, func(int) (int, time.Duration) {
		<-release
		return 200, 0
	})
	defer close(release)
	f := newFixture(t, func(c *Config) { c.Timeout = 100 * time.Millisecond; c.Workers = 8; c.PerEndpoint = 2 })
	var slowIDs []string
	for range 20 {
		ep, _ := f.endpoint("p", slow.URL, func(e *domain.WebhookEndpoint) { e.ClusterIDs = []string{"c-s"} })
		slowIDs = append(slowIDs, ep.ID)
	}
	fast := newReceiver(t, nil)
	f.endpoint("p", fast.URL, func(e *domain.WebhookEndpoint) { e.ClusterIDs = []string{"c-k"} })
	// Mark the slow ones failing, as a first round of timeouts would.
	f.svc.mu.Lock()
	for _, id := range slowIDs {
		f.svc.health[id] = &health{failures: 1, holdTill: t0}
	}
	f.svc.mu.Unlock()
	for i := range 5 {
		f.event("c-s", "n"+strconv.Itoa(i), domain.ReasonNodeAdded, time.Time{})
	}
	var wg sync.WaitGroup
	rec := make(chan ended, 8)
	recorded := make(chan struct{})
	go func() { f.svc.recordLoop(f.ctx, rec); close(recorded) }()
	if _, err := f.svc.dispatch(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.svc.fill(f.ctx, &wg, rec)
	f.svc.mu.Lock()
	total, failing := f.svc.total, f.svc.failing
	f.svc.mu.Unlock()
	if total != 4 || failing != 4 {
		t.Errorf("in flight: %d, to failing endpoints %d; want 4 and 4 (half of 8, one each)", total, failing)
	}
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	if _, err := f.svc.dispatch(f.ctx); err != nil {
		t.Fatal(err)
	}
	f.svc.fill(f.ctx, &wg, rec)
	start := time.Now()
	for len(fast.requests()) == 0 {
		if time.Since(start) > 50*time.Millisecond {
			t.Fatal("the healthy endpoint waited for the failing ones' slots")
		}
		time.Sleep(time.Millisecond)
	}
	wg.Wait()
	close(rec)
	<-recorded
}

// TestRotationSignsWithBothSecretsDuringTheOverlap: after a rotation the
// deliveries carry two signatures, one per secret, until the previous
// secret's time is up; then only the new one's.
func TestRotationSignsWithBothSecretsDuringTheOverlap(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, nil)
	ep, oldSecret := f.endpoint("p", r.URL, nil)
	newSecret, sealed, err := NewSecret(f.sealer, ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	ep.PreviousSecret, ep.Secret, ep.PreviousUntil = ep.Secret, sealed, t0.Add(RotationOverlap)
	f.update(func(tx store.Tx) error { return tx.UpdateWebhookEndpoint(f.ctx, ep) })
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step()
	q := r.requests()[0]
	if sigs := strings.Fields(q.header.Get("webhook-signature")); len(sigs) != 2 {
		t.Fatalf("during the overlap: %d signatures %v; want 2", len(sigs), sigs)
	}
	for _, s := range []string{oldSecret, newSecret} {
		if err := webhooks.Verify(s, q.header, q.body, f.clk.Now()); err != nil {
			t.Errorf("during the overlap, a secret does not verify: %v", err)
		}
	}
	f.clk.Set(t0.Add(RotationOverlap))
	f.event("c-k", "gpu-2", domain.ReasonNodeAdded, time.Time{})
	f.step()
	q = r.requests()[1]
	if sigs := strings.Fields(q.header.Get("webhook-signature")); len(sigs) != 1 {
		t.Fatalf("after the overlap: %v; want 1 signature", sigs)
	}
	if err := webhooks.Verify(newSecret, q.header, q.body, f.clk.Now()); err != nil {
		t.Errorf("the new secret: %v", err)
	}
	if err := webhooks.Verify(oldSecret, q.header, q.body, f.clk.Now()); err == nil {
		t.Error("the previous secret still verifies after its time")
	}
}

// TestRedirectsAreNotFollowed: a 3xx is a failed attempt; the target of
// the redirect never hears of it.
func TestRedirectsAreNotFollowed(t *testing.T) {
	f := newFixture(t, nil)
	elsewhere := newReceiver(t, nil)
	redirect := newReceiver(t, nil)
	redirect.Config.Handler = http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect)
	ep, _ := f.endpoint("p", redirect.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step()
	d := f.deliveries(ep.ID)[0]
	if d.State != domain.DeliveryPending || d.LastStatus != 307 || !strings.Contains(d.LastError, "redirects are not followed") {
		t.Errorf("after a redirect: %+v", d)
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// TestDialledAddressIsChecked: without loopback allowed, an endpoint on
// it (registered some way the API's check did not see, or a name that
// resolves there: localhost) is never connected to, and the error the
// tenant reads does not say what the name resolved to.
func TestDialledAddressIsChecked(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Policy = Policy{} })
	r := newReceiver(t, nil)
	_, port, _ := strings.Cut(strings.TrimPrefix(r.URL, "http://"), ":")
	byIP, _ := f.endpoint("p", r.URL, nil)
	byName, _ := f.endpoint("p", "http://localhost:"+port+"/", nil)
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	f.step()
	for _, ep := range []string{byIP.ID, byName.ID} {
		d := f.deliveries(ep)[0]
		if d.State != domain.DeliveryPending || !strings.Contains(d.LastError, "refused by the server's address policy") ||
			strings.Contains(d.LastError, "127.0.0.1") || strings.Contains(d.LastError, "loopback") {
			t.Errorf("%s: %+v", ep, d)
		}
	}
	if n := len(r.requests()); n != 0 {
		t.Errorf("the loopback receiver got %d requests", n)
	}
}

// TestOutcomesRecordedTogether: attempts that end together are recorded
// in one transaction; one whose endpoint was deleted during the attempt
// is skipped without costing the others theirs, and every slot is freed.
func TestOutcomesRecordedTogether(t *testing.T) {
	f := newFixture(t, nil)
	release := make(chan struct{})
	held := newReceiver(t, func(int) (int, time.Duration) {
		<-release
		return 200, 0
	})
	gone, _ := f.endpoint("p", held.URL, nil)
	fast := newReceiver(t, nil)
	kept, _ := f.endpoint("p", fast.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	if _, err := f.svc.dispatch(f.ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rec := make(chan ended, f.svc.cfg.Workers)
	f.svc.fill(f.ctx, &wg, rec)
	for len(held.requests()) == 0 || len(fast.requests()) == 0 {
		time.Sleep(time.Millisecond)
	}
	f.update(func(tx store.Tx) error { return tx.DeleteWebhookEndpoint(f.ctx, gone.ID) })
	close(release)
	wg.Wait()
	close(rec)
	if len(rec) != 2 {
		t.Fatalf("%d outcomes to record, want 2", len(rec))
	}
	f.svc.recordLoop(f.ctx, rec)
	if d := f.deliveries(kept.ID); len(d) != 1 || d[0].State != domain.DeliveryDelivered || d[0].Attempts != 1 {
		t.Fatalf("the kept endpoint's delivery: %+v; want it delivered once", d)
	}
	if d := f.deliveries(gone.ID); len(d) != 0 {
		t.Fatalf("the deleted endpoint's deliveries: %+v", d)
	}
	f.svc.mu.Lock()
	defer f.svc.mu.Unlock()
	if f.svc.total != 0 || len(f.svc.inflight) != 0 || len(f.svc.perEP) != 0 {
		t.Fatalf("slots left taken: total %d, in flight %v, per endpoint %v", f.svc.total, f.svc.inflight, f.svc.perEP)
	}
}

// staleDue is a store whose read of due deliveries is taken when the read
// starts and handed back only when let go: a read that began before an
// outcome was written and ends after it.
type staleDue struct {
	store.Store
	started chan struct{}
	letGo   chan struct{}
}

func (s *staleDue) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	due, err := s.Store.DueWebhookDeliveries(ctx, now, perEndpoint, limit)
	if s.started != nil {
		close(s.started)
		s.started = nil
		<-s.letGo
	}
	return due, err
}

// TestNoSecondSendFromAStaleRead: a pass whose read of due deliveries
// began while an attempt was in flight, and ended after that attempt's
// outcome was written and its slot freed, does not send it again.
func TestNoSecondSendFromAStaleRead(t *testing.T) {
	stale := &staleDue{}
	f := newFixture(t, func(c *Config) { stale.Store = c.Store; c.Store = stale })
	release := make(chan struct{})
	r := newReceiver(t, func(int) (int, time.Duration) {
		<-release
		return 200, 0
	})
	ep, _ := f.endpoint("p", r.URL, nil)
	f.event("c-k", "gpu-1", domain.ReasonNodeAdded, time.Time{})
	if _, err := f.svc.dispatch(f.ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	rec := make(chan ended, f.svc.cfg.Workers)
	f.svc.fill(f.ctx, &wg, rec)
	for len(r.requests()) == 0 {
		time.Sleep(time.Millisecond)
	}

	// A second pass reads while the attempt is in flight...
	stale.started, stale.letGo = make(chan struct{}), make(chan struct{})
	started := stale.started
	second := make(chan struct{})
	go func() { f.svc.fill(f.ctx, &wg, rec); close(second) }()
	<-started
	// ...the attempt ends and its outcome is written...
	close(release)
	f.svc.record(f.ctx, []ended{<-rec})
	// ...then the pass goes on with what it read.
	close(stale.letGo)
	<-second
	wg.Wait()
	close(rec)
	f.svc.recordLoop(f.ctx, rec)
	if n := len(r.requests()); n != 1 {
		t.Fatalf("the receiver got the delivery %d times; want once", n)
	}
	if d := f.deliveries(ep.ID); len(d) != 1 || d[0].State != domain.DeliveryDelivered || d[0].Attempts != 1 {
		t.Fatalf("%+v", d)
	}
}
