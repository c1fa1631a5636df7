package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/secret"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// fixture is a Service on a SQLite store with project p (cluster c-k,
// Kubernetes, and c-s, Slurm) and project q (cluster c-q), a fake
// driver, a fake wall clock, and loopback allowed (the test receivers
// listen there).
type fixture struct {
	t      *testing.T
	ctx    context.Context
	st     store.Store
	clk    *clock.Fake
	drv    *fakeDriver
	sealer *secret.Sealer
	svc    *Service
	seq    int
}

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func newFixture(t *testing.T, tune func(*Config)) *fixture {
	t.Helper()
	ctx := t.Context()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sealer, err := secret.NewSealer(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []string{"p", "q"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: t0}); err != nil {
				return err
			}
		}
		for _, c := range []domain.Cluster{{ID: "c-k", ProjectID: "p", Type: domain.ClusterKubernetes},
			{ID: "c-s", ProjectID: "p", Type: domain.ClusterSlurm}, {ID: "c-q", ProjectID: "q", Type: domain.ClusterKubernetes}} {
			c.Name, c.Weight, c.CreatedAt = c.ID, 1, t0
			if err := tx.CreateCluster(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	allow, _ := ParseAllow([]string{"127.0.0.0/8"})
	f := &fixture{t: t, ctx: ctx, st: st, clk: clock.NewFake(t0), drv: &fakeDriver{work: map[string][]driver.Work{}}, sealer: sealer}
	cfg := Config{Store: st, Driver: f.drv, Sealer: sealer, Policy: Policy{Allow: allow}, Clock: f.clk,
		Random: random.New(1), Timeout: 2 * time.Second, Poll: 10 * time.Millisecond}
	if tune != nil {
		tune(&cfg)
	}
	f.svc = New(cfg)
	return f
}

// endpoint registers an endpoint of project (its secret returned) the
// way the API does.
func (f *fixture) endpoint(project, url string, edit func(*domain.WebhookEndpoint)) (domain.WebhookEndpoint, string) {
	f.t.Helper()
	f.seq++
	id := fmt.Sprintf("wh-%03d", f.seq)
	plain, sealed, err := NewSecret(f.sealer, id)
	if err != nil {
		f.t.Fatal(err)
	}
	ep := domain.WebhookEndpoint{ID: id, ProjectID: project, Name: id, URL: url, Enabled: true, Secret: sealed,
		CreatedAt: f.clk.Now(), UpdatedAt: f.clk.Now()}
	if edit != nil {
		edit(&ep)
	}
	f.update(func(tx store.Tx) error { return tx.CreateWebhookEndpoint(f.ctx, ep) })
	return ep, plain
}

func (f *fixture) update(fn func(tx store.Tx) error) {
	f.t.Helper()
	if err := f.st.Update(f.ctx, fn); err != nil {
		f.t.Fatal(err)
	}
}

// event commits a lifecycle event, as the controller does.
func (f *fixture) event(cluster, node string, r domain.EventReason, deadline time.Time) domain.Event {
	f.t.Helper()
	f.seq++
	e := domain.Event{ID: fmt.Sprintf("ev-%03d", f.seq), ClusterID: cluster, NodeID: "n-" + node, NodeName: node,
		Reason: r, Message: string(r) + " of " + node, Timestamp: f.clk.Now(), Deadline: deadline}
	f.update(func(tx store.Tx) (err error) {
		e, err = tx.AddEvent(f.ctx, e)
		return err
	})
	return e
}

// step dispatches what is new and makes the attempts due now, waiting
// for them.
func (f *fixture) step() {
	f.t.Helper()
	for {
		more, err := f.svc.dispatch(f.ctx)
		if err != nil {
			f.t.Fatal(err)
		}
		if !more {
			break
		}
	}
	// Every attempt of one fill fits in rec (at most Workers), so they
	// all end before their outcomes are recorded, in one batch.
	var wg sync.WaitGroup
	rec := make(chan ended, f.svc.cfg.Workers)
	f.svc.fill(f.ctx, &wg, rec)
	wg.Wait()
	close(rec)
	f.svc.recordLoop(f.ctx, rec)
}

func (f *fixture) deliveries(ep string) []domain.WebhookDelivery {
	f.t.Helper()
	ds, err := f.st.ListWebhookDeliveries(f.ctx, store.DeliveryFilter{EndpointID: ep})
	if err != nil {
		f.t.Fatal(err)
	}
	return ds
}

// receiver is a test endpoint: it records each request and answers with
// what answer says.
type receiver struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	answer func(n int) (status int, delay time.Duration)
}

type received struct {
	header http.Header
	body   []byte
	at     time.Time
}

func newReceiver(t *testing.T, answer func(n int) (int, time.Duration)) *receiver {
	r := &receiver{answer: answer}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{req.Header.Clone(), body, time.Now()})
		n := len(r.got)
		r.mu.Unlock()
		status, delay := http.StatusNoContent, time.Duration(0)
		if r.answer != nil {
			status, delay = r.answer(n)
		}
		if delay > 0 {
			select {
			case <-time.After(delay):
			case <-req.Context().Done():
				return
			}
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, http.StatusText(status))
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

// cloudEvent decodes a delivery's body.
func decode(t *testing.T, body []byte) (ev cloudEvent, data EventData) {
	t.Helper()
	var raw struct {
		cloudEvent
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if err := json.Unmarshal(raw.Data, &data); err != nil {
		t.Fatalf("decode data %s: %v", raw.Data, err)
	}
	return raw.cloudEvent, data
}

// fakeDriver lists the work it was given; block makes ListWork wait for
// its context to end (a cluster that does not answer).
type fakeDriver struct {
	driver.NoLoad
	mu    sync.Mutex
	work  map[string][]driver.Work
	block bool
	calls int
}

func (d *fakeDriver) ListWork(ctx context.Context, clusterID, nodeName string) ([]driver.Work, error) {
	d.mu.Lock()
	d.calls++
	block, ws := d.block, d.work[clusterID+"/"+nodeName]
	d.mu.Unlock()
	if block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return ws, nil
}

func (d *fakeDriver) AddNode(context.Context, driver.NodeSpec) error { return nil }
func (d *fakeDriver) MarkDraining(context.Context, string, string, driver.Marks) error {
	return nil
}
func (d *fakeDriver) Notify(context.Context, string, string, driver.Work, time.Time) error {
	return nil
}
func (d *fakeDriver) PostNotice(context.Context, string, string, *driver.Work, driver.Notice) error {
	return nil
}
func (d *fakeDriver) Release(context.Context, string, string) error   { return nil }
func (d *fakeDriver) SetClass(context.Context, driver.NodeSpec) error { return nil }
func (d *fakeDriver) Health(context.Context, string, string) (driver.NodeHealth, error) {
	return driver.NodeHealth{}, nil
}
func (d *fakeDriver) SetHooks(driver.Hooks) {}
