package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// webhookFleet: two machines, so one standard node more reclaims the
// cluster's preemptible node.
const webhookFleet = `
pools:
  - {region: ` + region + `, gpu_type: ` + gpuType + `, machines: 2}
prices:
  ` + gpuType + `: "2.99"
`

// hookReceiver is a webhook endpoint on loopback: it records every
// request, and answers with status (503 until told otherwise).
type hookReceiver struct {
	*httptest.Server
	status atomic.Int32
	mu     sync.Mutex
	got    []hookRequest
}

type hookRequest struct {
	header http.Header
	body   []byte
	status int
}

func newHookReceiver(t *testing.T, status int) *hookReceiver {
	r := &hookReceiver{}
	r.status.Store(int32(status))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		st := int(r.status.Load())
		r.mu.Lock()
		r.got = append(r.got, hookRequest{req.Header.Clone(), body, st})
		r.mu.Unlock()
		w.WriteHeader(st)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *hookReceiver) requests() []hookRequest {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookRequest(nil), r.got...)
}

// waitRequests waits until ok holds of the requests received.
func (r *hookReceiver) waitRequests(t *testing.T, what string, within time.Duration, ok func([]hookRequest) bool) []hookRequest {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := r.requests()
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; the receiver got %d requests", within, what, len(got))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// reclaimOne makes a cluster with a preemptible node and then reclaims
// it, by asking for a second standard node on the two-machine fleet.
func reclaimOne(t *testing.T, srv *server, token string) *apiv1.Cluster {
	t.Helper()
	ctx := context.Background()
	c := apiClient(t, srv.URL, token)
	cl, err := c.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "hooks", Region: region, GPUType: gpuType, NumGPUs: 8, NumPreemptibleGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.GetCluster(ctx, cl.ClusterID)
		if err == nil && got.AllocatedPreemptibleGPUs == 8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preemptible node did not come up: %+v %v", got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	std := 16
	if _, err := c.UpdateCluster(ctx, cl.ClusterID, apiv1.UpdateClusterRequest{NumGPUs: &std}); err != nil {
		t.Fatal(err)
	}
	return cl
}

func TestWebhooksSurviveARestartSQLite(t *testing.T) {
	t.Parallel()
	testWebhooksSurviveARestart(t, "")
}

func TestWebhooksSurviveARestartPostgres(t *testing.T) {
	t.Parallel()
	testWebhooksSurviveARestart(t, postgres.TestDSN(t))
}

// testWebhooksSurviveARestart: an endpoint registered with the CLI gets a
// reclaim's PreemptionNotified, answers 503, and the server is SIGKILLed
// while the delivery waits for its retry; the restarted server delivers
// it (the same ID and bytes, signed with the endpoint's secret) once the
// endpoint answers 2xx, and the CLI shows it delivered after several
// attempts.
func testWebhooksSurviveARestart(t *testing.T, db string) {
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, webhookFleet)
	cfg := serverConfig{DataDir: filepath.Join(dir, "data"), DB: db, FleetFile: fleetFile, Speed: 60,
		ConfigPath: filepath.Join(dir, "cli.yaml"), Extra: []string{"--webhook-allow-cidr", "127.0.0.0/8"}}
	srv := startServer(t, cfg)
	recv := newHookReceiver(t, http.StatusServiceUnavailable)

	var p apiv1.Project
	cliJSON(t, srv, adminToken, &p, "projects", "create", "hooks", "-o", "json")
	var ep apiv1.WebhookEndpoint
	cliJSON(t, srv, p.Token, &ep, "webhooks", "create", "--name", "ray", "--endpoint-url", recv.URL+"/hook",
		"--event-type", "PreemptionNotified", "-o", "json")
	if !strings.HasPrefix(ep.Secret, "whsec_") {
		t.Fatalf("the CLI printed no secret: %+v", ep)
	}
	cl := reclaimOne(t, srv, p.Token)

	first := recv.waitRequests(t, "the notice", 20*time.Second, func(rs []hookRequest) bool { return len(rs) > 0 })[0]
	var ds apiv1.WebhookDeliveryList
	cliJSON(t, srv, p.Token, &ds, "webhooks", "deliveries", ep.EndpointID, "-o", "json")
	if len(ds.Deliveries) != 1 || ds.Deliveries[0].State != "pending" || ds.Deliveries[0].LastStatusCode != 503 ||
		ds.Deliveries[0].NextAttemptAt == nil || ds.Deliveries[0].WebhookID != first.header.Get("webhook-id") {
		t.Fatalf("after a 503: %+v", ds)
	}
	// Mid-retry: the next attempt is seconds away.
	srv.kill()
	killed := len(recv.requests())
	recv.status.Store(http.StatusNoContent)
	srv = startServer(t, cfg)

	got := recv.waitRequests(t, "the delivery after the restart", 60*time.Second, func(rs []hookRequest) bool {
		return len(rs) > killed && rs[len(rs)-1].status == http.StatusNoContent
	})
	last := got[len(got)-1]
	if last.header.Get("webhook-id") != first.header.Get("webhook-id") || !bytes.Equal(last.body, first.body) {
		t.Errorf("the retry after the restart sent another delivery:\n %s %s\nwas\n %s %s",
			last.header.Get("webhook-id"), last.body, first.header.Get("webhook-id"), first.body)
	}
	if err := webhooks.Verify(ep.Secret, last.header, last.body, time.Now()); err != nil {
		t.Errorf("the delivery does not verify with the secret the CLI printed: %v", err)
	}
	if !bytes.Contains(last.body, []byte(`"cluster_id":"`+cl.ClusterID+`"`)) || !bytes.Contains(last.body, []byte(`"deadline":`)) {
		t.Errorf("the notice: %s", last.body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ds = apiv1.WebhookDeliveryList{} // decoding into the old one would keep its fields
		cliJSON(t, srv, p.Token, &ds, "webhooks", "deliveries", ep.EndpointID, "-o", "json")
		if len(ds.Deliveries) == 1 && ds.Deliveries[0].State == "delivered" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the delivery is not recorded delivered: %+v", ds)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if d := ds.Deliveries[0]; d.Attempts < 2 || d.LastStatusCode != 204 || d.LastError != "" {
		t.Errorf("the delivery after the restart: %+v; want delivered on a later attempt", d)
	}
	// One notice, one delivery ID, however many attempts.
	ids := map[string]bool{}
	for _, r := range recv.requests() {
		ids[r.header.Get("webhook-id")] = true
	}
	if len(ids) != 1 {
		t.Errorf("the receiver got %d delivery IDs; want one", len(ids))
	}
	r := cli(t, srv, p.Token, "webhooks", "test", ep.EndpointID, "--wait")
	if r.code != 0 || !strings.Contains(r.stdout, "delivered") {
		t.Errorf("webhooks test --wait: %s", r)
	}
}

// TestConsoleWebhooks registers an endpoint in the console in headless
// Chromium against the real binary, reads its secret off the page, sends
// a test event and watches it arrive, delivered, in the deliveries table;
// the receiver verifies it with the secret the page showed. Any error in
// the browser console fails it.
func TestConsoleWebhooks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	writeFile(t, fleetFile, webhookFleet)
	srv := startServer(t, serverConfig{DataDir: filepath.Join(dir, "data"), FleetFile: fleetFile, Speed: 60,
		ConfigPath: filepath.Join(dir, "cli.yaml"), Extra: []string{"--webhook-allow-cidr", "127.0.0.0/8"}})
	recv := newHookReceiver(t, http.StatusNoContent)
	var p apiv1.Project
	cliJSON(t, srv, adminToken, &p, "projects", "create", "hooks", "-o", "json")

	b := startBrowser(t, srv.URL)
	signIn(t, b, p.Token)
	if st := b.clickAndLoad("open Webhooks", `nav a[href="/console/webhooks"]`); st != 200 {
		t.Fatalf("webhooks page: status %d", st)
	}
	// A refused URL first: the API's message next to the field.
	b.do("fill the form with a private address",
		chromedp.SendKeys(chromedp.ID("name"), "ray"),
		chromedp.SendKeys(chromedp.ID("url"), "http://169.254.169.254/latest"),
		chromedp.Click(`input[name="event_types"][value="PreemptionNotified"]`, chromedp.NodeVisible))
	b.expect("/console/webhooks", 400)
	if st := b.clickAndLoad("create with a refused URL", `#webhook-form button[type="submit"]`); st != 400 {
		t.Fatalf("a refused URL: status %d", st)
	}
	if got := b.text("#err-url"); !strings.Contains(got, "link-local") {
		t.Errorf("#err-url = %q", got)
	}
	if !evalJS[bool](b, `document.querySelector('input[name="event_types"][value="PreemptionNotified"]').checked`) {
		t.Error("the ticked event type was not kept")
	}
	b.do("set a URL on loopback", chromedp.SetValue(chromedp.ID("url"), recv.URL+"/hook"))
	if st := b.clickAndLoad("create", `#webhook-form button[type="submit"]`); st != 201 {
		t.Fatalf("create: status %d (%s)", st, b.text("main"))
	}
	secret := b.text("#new-secret-value")
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the page shows no secret: %q", secret)
	}
	if got := b.text("#endpoint-events"); got != "PreemptionNotified" {
		t.Errorf("events %q", got)
	}
	if st := b.clickAndLoad("send a test", "#send-test"); st != 200 {
		t.Fatalf("test: status %d", st)
	}
	got := recv.waitRequests(t, "the test delivery", 10*time.Second, func(rs []hookRequest) bool { return len(rs) > 0 })
	if err := webhooks.Verify(secret, got[0].header, got[0].body, time.Now()); err != nil {
		t.Errorf("the test delivery does not verify with the secret the page showed: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.text("#deliveries tbody tr .state") != "delivered" {
		if time.Now().After(deadline) {
			t.Fatalf("the deliveries table does not show the test delivered: %s", b.text("#deliveries"))
		}
		time.Sleep(100 * time.Millisecond)
		b.navigate(b.path())
	}
	if code := b.text("#deliveries tbody tr .code"); code != "204" {
		t.Errorf("status shown %q; want 204", code)
	}
	if strings.Contains(b.text("main"), secret) {
		t.Error("the secret is shown again after a reload")
	}
	b.screenshot("webhook")
	b.checkConsole("webhooks")
}
