package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/webhook"
	"github.com/sparecap/sparecap/pkg/webhooks"
)

// TestReclaimNoticeReachesAWebhook: the whole process, on the simulated
// driver: a project registers an endpoint (loopback is allowed with
// --webhook-allow-cidr), one of its preemptible nodes is reclaimed, and
// the endpoint gets a signed PreemptionNotified CloudEvent with the
// node's deadline and the pods on it; a test message arrives too.
func TestReclaimNoticeReachesAWebhook(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(fleetFile, []byte("pools: [{region: r1, gpu_type: H100, machines: 2}]\nprices: {H100: \"2\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
	}))
	defer recv.Close()
	allow, _ := webhook.ParseAllow([]string{"127.0.0.0/8"})
	const adm = "adm-0123456789abcdef0123456789abcdef"
	srv, err := Start(ctx, Options{Addr: "127.0.0.1:0", DataDir: dir, AdminToken: adm, Speed: 100, FleetFile: fleetFile,
		SimPods:      []sim.PodTemplate{{Namespace: "ml", Name: "trainer", TerminationGracePeriod: time.Minute, ExitAfter: 30 * time.Second}},
		WebhookAllow: allow})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p, err := client.New(srv.URL, adm).CreateProject(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	tc := client.New(srv.URL, p.Token)
	ep, err := tc.CreateWebhook(ctx, client.WebhookScope{}, apiv1.CreateWebhookRequest{Name: "ray", URL: recv.URL + "/hook",
		EventTypes: []string{"PreemptionNotified"}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := tc.CreateCluster(ctx, apiv1.CreateClusterRequest{ClusterName: "a", Region: "r1", GPUType: "H100", NumGPUs: 8, NumPreemptibleGPUs: 8})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the preemptible node", func() bool {
		c, err := tc.GetCluster(ctx, cl.ClusterID)
		return err == nil && c.AllocatedPreemptibleGPUs == 8
	})
	std := 16 // the standard node needs the preemptible node's machine back
	if _, err := tc.UpdateCluster(ctx, cl.ClusterID, apiv1.UpdateClusterRequest{NumGPUs: &std}); err != nil {
		t.Fatal(err)
	}
	if _, err := tc.TestWebhook(ctx, client.WebhookScope{}, ep.EndpointID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the notice and the test at the endpoint", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) >= 2
	})
	mu.Lock()
	defer mu.Unlock()
	types := map[string]bool{}
	for i, r := range got {
		if err := webhooks.Verify(ep.Secret, r.Header, bodies[i], time.Now()); err != nil {
			t.Errorf("delivery %d does not verify: %v", i, err)
		}
		var ce struct {
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(bodies[i], &ce); err != nil {
			t.Fatal(err)
		}
		types[ce.Type] = true
		if ce.Type != "dev.sparecap.PreemptionNotified" {
			continue
		}
		var d webhook.EventData
		if err := json.Unmarshal(ce.Data, &d); err != nil {
			t.Fatal(err)
		}
		if d.Deadline == nil || d.ClusterID != cl.ClusterID || d.ProjectID != "team" || d.NodeName == "" {
			t.Errorf("notice data %s", ce.Data)
		}
		if d.Work == nil || !d.Work.Listed || d.Work.Pods == nil || len(*d.Work.Pods) != 1 || (*d.Work.Pods)[0].Name != "trainer" {
			t.Errorf("the notice's work: %s; want the node's trainer pod", ce.Data)
		}
		// Simulated time runs 100× here; the deadline is the drain window
		// after the notice on the server's clock.
		if left := d.Deadline.Sub(srv.Clock.Now()); left <= 0 || left > 5*time.Minute {
			t.Errorf("deadline %s is %s from the server's now", d.Deadline, left)
		}
	}
	if !types["dev.sparecap.PreemptionNotified"] || !types["dev.sparecap.Test"] || len(types) != 2 {
		t.Errorf("types delivered: %v", types)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
