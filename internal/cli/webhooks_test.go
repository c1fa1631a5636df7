package cli

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestWebhooksCommands: each webhooks command sends what its flags say
// to the caller's project, or with --project-id to that project's, and
// prints what a person needs (the secret once, with the warning).
func TestWebhooksCommands(t *testing.T) {
	until := t0.Add(24 * time.Hour)
	made := apiv1.WebhookEndpoint{EndpointID: "wh-1", ProjectID: "p1", Name: "ray", URL: "https://ray.example.com/h",
		EventTypes: []string{"PreemptionNotified"}, ClusterIDs: []string{}, Enabled: true, CreatedAt: t0, Secret: "whsec_abc"}
	listed := made
	listed.Secret, listed.Deliveries = "", apiv1.DeliveryCounts{Pending: 1, Delivered: 7, Failed: 2}
	f := newFakeAPI(t)
	f.handle("GET /v1/webhooks", 200, apiv1.WebhookEndpointList{Endpoints: []apiv1.WebhookEndpoint{listed}})
	f.handle("POST /v1/webhooks", 201, made)
	f.handle("GET /v1/webhooks/wh-1", 200, listed)
	f.handle("PATCH /v1/webhooks/wh-1", 200, listed)
	f.handle("DELETE /v1/webhooks/wh-1", 200, listed)
	f.handle("POST /v1/webhooks/wh-1/rotate", 200, func() apiv1.WebhookEndpoint {
		r := made
		r.Secret, r.PreviousSecretExpiresAt = "whsec_new", &until
		return r
	}())
	last := t0.Add(time.Minute)
	next := t0.Add(5 * time.Minute)
	f.handle("GET /v1/webhooks/wh-1/deliveries", 200, apiv1.WebhookDeliveryList{Deliveries: []apiv1.WebhookDelivery{
		{WebhookID: "ev-9-12", EventID: "ev-9", Type: "dev.sparecap.PreemptionNotified", State: "pending", Attempts: 2,
			LastStatusCode: 503, LastError: "HTTP 503 Service Unavailable", LatencyMS: 12.4, CreatedAt: t0, LastAttemptAt: &last, NextAttemptAt: &next},
		{WebhookID: "ev-8-11", Type: "dev.sparecap.NodeAdded", State: "delivered", Attempts: 1, LastStatusCode: 204, LatencyMS: 3, CreatedAt: t0, LastAttemptAt: &last}}})
	f.handle("GET /v1/admin/projects/team-ml/webhooks", 200, apiv1.WebhookEndpointList{Endpoints: []apiv1.WebhookEndpoint{}})

	r := f.run("webhooks", "list")
	want := "" +
		"ID     NAME   URL                         EVENTS               CLUSTERS   ENABLED   PENDING   DELIVERED   FAILED\n" +
		"wh-1   ray    https://ray.example.com/h   PreemptionNotified   all        true      1         7           2\n"
	if r.err != nil || r.stdout != want {
		t.Errorf("list:\n%s\nwant:\n%s(%v)", r.stdout, want, r.err)
	}

	r = f.run("webhooks", "create", "--name", "ray", "--endpoint-url", "https://ray.example.com/h", "--event-type", "PreemptionNotified",
		"--event-type", "NodeRemoved", "--cluster", "c-1", "--disabled")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "wh-1", "whsec_abc")
	mustContain(t, "stderr", r.stderr, "shown only once")
	body := f.only("POST", "/v1/webhooks")[0].Body
	if body["name"] != "ray" || body["url"] != "https://ray.example.com/h" || body["enabled"] != false ||
		strings.Join(strs(body["event_types"]), ",") != "PreemptionNotified,NodeRemoved" || strings.Join(strs(body["cluster_ids"]), ",") != "c-1" {
		t.Errorf("create sent %v", body)
	}
	r = f.run("webhooks", "create", "--name", "ray", "--endpoint-url", "https://ray.example.com/h", "-o", "json")
	var got apiv1.WebhookEndpoint
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || got.Secret != "whsec_abc" {
		t.Fatalf("create -o json: %q %v", r.stdout, err)
	}
	if body := f.only("POST", "/v1/webhooks")[1].Body; len(body) != 2 {
		t.Errorf("a create without filters sent %v; want only name and url", body)
	}

	r = f.run("webhooks", "get", "wh-1")
	mustContain(t, "get", r.stdout, "https://ray.example.com/h", "1 pending, 7 delivered, 2 failed", "Clusters:     all")

	for _, c := range []struct {
		args []string
		want map[string]any
	}{
		{[]string{"--enabled=false"}, map[string]any{"enabled": false}},
		{[]string{"--all-events", "--cluster", "c-1", "--cluster", "c-2"}, map[string]any{"event_types": []any{}, "cluster_ids": []any{"c-1", "c-2"}}},
		{[]string{"--endpoint-url", "https://new.example.com", "--name", "ray2", "--all-clusters"}, map[string]any{"url": "https://new.example.com", "name": "ray2", "cluster_ids": []any{}}},
	} {
		n := len(f.only("PATCH", "/v1/webhooks/wh-1"))
		if r := f.run(append([]string{"webhooks", "update", "wh-1"}, c.args...)...); r.err != nil {
			t.Fatalf("update %v: %v", c.args, r.err)
		}
		if got := f.only("PATCH", "/v1/webhooks/wh-1")[n].Body; !jsonEqual(got, c.want) {
			t.Errorf("update %v sent %v; want %v", c.args, got, c.want)
		}
	}
	before := len(f.requests())
	for _, bad := range [][]string{{"--enabled", "maybe"}, {"--all-events", "--event-type", "NodeAdded"}, {"--all-clusters", "--cluster", "c-1"}} {
		if r := f.run(append([]string{"webhooks", "update", "wh-1"}, bad...)...); r.err == nil {
			t.Errorf("update %v: no error", bad)
		}
	}
	if n := len(f.requests()); n != before {
		t.Errorf("bad update flags sent %d requests", n-before)
	}

	r = f.run("webhooks", "rotate", "wh-1", "--previous-expires-in", "1h")
	mustContain(t, "rotate", r.stdout, "whsec_new", "Previous secret:")
	mustContain(t, "rotate stderr", r.stderr, "shown only once")
	if body := f.only("POST", "/v1/webhooks/wh-1/rotate")[0].Body; body["previous_expires_in"] != "1h" {
		t.Errorf("rotate sent %v", body)
	}

	r = f.run("webhooks", "deliveries", "wh-1", "--state", "pending", "--limit", "5")
	want = "" +
		"WEBHOOK_ID   TYPE                 STATE       ATTEMPTS   STATUS   LATENCY   LAST_ATTEMPT          NEXT_ATTEMPT          ERROR\n" +
		"ev-9-12      PreemptionNotified   pending     2          503      12ms      2025-03-04 10:01:00   2025-03-04 10:05:00   HTTP 503 Service Unavailable\n" +
		"ev-8-11      NodeAdded            delivered   1          204      3ms       2025-03-04 10:01:00   -                     -\n"
	if r.err != nil || r.stdout != want {
		t.Errorf("deliveries:\n%s\nwant:\n%s(%v)", r.stdout, want, r.err)
	}
	if q := f.only("GET", "/v1/webhooks/wh-1/deliveries")[0].Query; q != "limit=5&state=pending" {
		t.Errorf("deliveries query %q", q)
	}

	r = f.run("webhooks", "delete", "wh-1")
	mustContain(t, "delete", r.stdout, "Deleted:", "wh-1 (ray)")
	if r := f.run("webhooks", "list", "--project-id", "team-ml"); r.err != nil || len(f.only("GET", "/v1/admin/projects/team-ml/webhooks")) != 1 {
		t.Errorf("list --project-id: %v", r.err)
	}
}

// TestWebhooksTestWaits: test --wait polls the deliveries until the test
// message's first attempt and fails unless it was delivered, saying why.
func TestWebhooksTestWaits(t *testing.T) {
	sent := apiv1.WebhookDelivery{WebhookID: "test-1", Type: "dev.sparecap.Test", State: "pending", CreatedAt: t0}
	tried := sent
	tried.Attempts, tried.LastStatusCode, tried.LastError = 1, 500, "HTTP 500 Internal Server Error: boom"
	done := sent
	done.State, done.Attempts, done.LastStatusCode = "delivered", 1, 204
	for _, c := range []struct {
		name    string
		after   apiv1.WebhookDelivery
		wantErr string
	}{{"delivered", done, ""}, {"refused", tried, "HTTP 500 Internal Server Error: boom"}} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeAPI(t)
			f.handle("POST /v1/webhooks/wh-1/test", 202, sent)
			f.sequence("GET /v1/webhooks/wh-1/deliveries",
				ok(apiv1.WebhookDeliveryList{Deliveries: []apiv1.WebhookDelivery{sent}}),
				ok(apiv1.WebhookDeliveryList{Deliveries: []apiv1.WebhookDelivery{{WebhookID: "other"}, c.after}}))
			r := f.run("webhooks", "test", "wh-1", "--wait")
			if c.wantErr == "" && r.err != nil || c.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), c.wantErr)) {
				t.Fatalf("err %v; want %q", r.err, c.wantErr)
			}
			mustContain(t, "stdout", r.stdout, "test-1", c.after.State)
			if n := len(f.only("GET", "/v1/webhooks/wh-1/deliveries")); n != 2 {
				t.Errorf("polled %d times; want 2", n)
			}
		})
	}
	f := newFakeAPI(t)
	f.handle("POST /v1/webhooks/wh-1/test", 202, sent)
	f.handle("GET /v1/webhooks/wh-1/deliveries", 200, apiv1.WebhookDeliveryList{Deliveries: []apiv1.WebhookDelivery{sent}})
	if r := f.run("webhooks", "test", "wh-1", "--wait", "--timeout", "10s"); r.err == nil || !strings.Contains(r.err.Error(), "no attempt within 10s") {
		t.Errorf("a test never tried: %v", r.err)
	}
	// Without --wait the delivery is printed as sent.
	f.mux.HandleFunc("POST /v1/webhooks/wh-2/test", func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, 202, sent) })
	if r := f.run("webhooks", "test", "wh-2"); r.err != nil || !strings.Contains(r.stdout, "pending") {
		t.Errorf("test without --wait: %v %s", r.err, r.stdout)
	}
}

func strs(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
