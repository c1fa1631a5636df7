package cli

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// Booking from the CLI: --starts-at on create and on update (a move),
// --maintenance-at on machines set; a bad time sends nothing; a booked
// cluster and a claimed node show their times.
func TestBookingsFromTheCLI(t *testing.T) {
	f := newFakeAPI(t)
	booked := cluster("Scheduled", 0)
	start, active := t0.Add(48*time.Hour), t0.Add(48*time.Hour-6*time.Minute)
	booked.StartsAt, booked.ActiveAt = &start, &active
	f.handle("POST /v1/clusters", 201, booked)
	r := f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "16", "--starts-at", "2026-12-14T08:00:00Z")
	if r.err != nil {
		t.Fatalf("err %v\n%s", r.err, r.stderr)
	}
	if b := f.only("POST", "/v1/clusters")[0].Body; b["starts_at"] != "2026-12-14T08:00:00Z" {
		t.Errorf("create body %v", b)
	}
	mustContain(t, "stdout", r.stdout, "Scheduled", "Booked from:", "Nodes planned from:")

	if r = f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "16", "--starts-at", "monday"); r.err == nil || !strings.Contains(r.err.Error(), "--starts-at") {
		t.Errorf("a bad --starts-at: %v", r.err)
	}
	if n := len(f.only("POST", "/v1/clusters")); n != 1 {
		t.Errorf("%d creates sent, want the first alone", n)
	}

	f.handle("PATCH /v1/clusters/c1", 200, booked)
	if r = f.run("clusters", "update", "c1", "--starts-at", "2026-12-15T08:00:00Z"); r.err != nil {
		t.Fatalf("err %v\n%s", r.err, r.stderr)
	}
	if b := f.only("PATCH", "/v1/clusters/c1")[0].Body; !reflect.DeepEqual(b, map[string]any{"starts_at": "2026-12-15T08:00:00Z"}) {
		t.Errorf("update body %v", b)
	}

	f.handle("PATCH /v1/admin/machines/m1", 200, apiv1.Machine{MachineID: "m1"})
	for _, v := range []string{"2026-12-14T02:00:00Z", ""} {
		if r = f.run("machines", "set", "m1", "--maintenance-at="+v); r.err != nil {
			t.Fatal(r.err)
		}
		reqs := f.only("PATCH", "/v1/admin/machines/m1")
		if b := reqs[len(reqs)-1].Body; !reflect.DeepEqual(b, map[string]any{"maintenance_at": v}) {
			t.Errorf("machines set body %v", b)
		}
	}

	claimed := node("gpu-preemptible-dp-2", "preemptible", "ready", nil)
	claimed.PreemptAt = &active
	f.handle("GET /v1/clusters/c2", 200, cluster("Ready", 8, node("gpu-dp-1", "standard", "ready", nil), claimed))
	r = f.run("clusters", "get", "c2")
	mustContain(t, "stdout", r.stdout, "NOTICE AT")
}

// --starts-at as a duration counts from the server's clock, which runs
// ahead of the CLI's when the server runs with --speed.
func TestStartsAtFromTheServersClock(t *testing.T) {
	f := newFakeAPI(t)
	f.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sparecap-Time", "2030-05-17T10:00:00Z")
		w.WriteHeader(200)
	})
	f.handle("POST /v1/clusters", 201, cluster("Scheduled", 0))
	if r := f.run("clusters", "create", "--name", "a", "--region", "r", "--gpu-type", "H100", "--num-gpus", "8", "--starts-at", "2h"); r.err != nil {
		t.Fatalf("err %v\n%s", r.err, r.stderr)
	}
	if got, _ := f.only("POST", "/v1/clusters")[0].Body["starts_at"].(string); !strings.HasPrefix(got, "2030-05-17T12:00:0") {
		t.Errorf("starts_at %q, want two hours after the server's clock (2030-05-17T10:00:00Z)", got)
	}
}
