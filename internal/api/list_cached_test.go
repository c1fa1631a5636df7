package api

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestListsFromMemoryMatchTheStore: on the leader, cluster lists are
// served from the in-memory copy; they must be the store's lists, byte
// for byte, for every caller and filter.
func TestListsFromMemoryMatchTheStore(t *testing.T) {
	e := newEnv(t)
	a := e.create("p", createBody)
	e.create("p", strings.Replace(createBody, `"train"`, `"second"`, 1))
	e.create("q", strings.Replace(createBody, `"num_preemptible_gpus":16`, `"num_preemptible_gpus":0`, 1))
	e.create("p", `{"cluster_name":"eu","region":"eu-west-1","gpu_type":"L40S","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8}`)
	e.settle()
	e.do("p", "DELETE", "/v1/clusters/"+a.ClusterID, "", 202, nil)
	e.settle()

	cached := store.NewCached(e.st)
	cached.Enable()
	if _, err := cached.Snapshot(e.ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := cached.Loaded(); !ok {
		t.Fatal("the copy is not loaded")
	}
	mem := New(cached, e.ctrl, e.clk, clock.Real{}, nil)
	memSrv := httptest.NewServer(mem)
	defer memSrv.Close()
	compare := func() {
		t.Helper()
		compareLists(t, e, memSrv.URL)
	}
	compare()
	// A write through the copy: the next lists show it (what a list
	// works out from a version of the copy is not kept past it).
	now := e.clk.Now()
	err := cached.Update(e.ctx, func(tx store.Tx) error {
		if err := tx.CreateCluster(e.ctx, domain.Cluster{ID: "c-late", Name: "late", ProjectID: "q", Region: "us-central-2",
			GPUType: "RTX_6000_PCI", NumGPUs: 8, Weight: 1, CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateMachine(e.ctx, domain.Machine{ID: "m-late", Region: "us-central-2", GPUType: "RTX_6000_PCI", GPUs: 8, CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateNode(e.ctx, domain.Node{ID: "n-late", ClusterID: "c-late", MachineID: "m-late", Name: "gpu-dp-1",
			Class: domain.Standard, GPUs: 8, State: domain.NodeProvisioning, CreatedAt: now, ProvisioningAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.do("q", "GET", "/v1/clusters", "", 200, nil)); !strings.Contains(got, "n-late") {
		t.Fatalf("the store's list lacks the late cluster's node: %s", got)
	}
	compare()
}

// compareLists compares every caller's and filter's cluster list from the
// server at memURL with the store's.
func compareLists(t *testing.T, e *env, memURL string) {
	t.Helper()
	for _, tc := range []struct{ who, path string }{
		{"admin", "/v1/clusters"}, {"admin", "/v1/clusters?project_id=q"}, {"p", "/v1/clusters"},
		{"q", "/v1/clusters"}, {"p", "/v1/clusters?project_id=q"},
	} {
		want := e.do(tc.who, "GET", tc.path, "", 200, nil)
		orig := e.srv.URL
		e.srv.URL = memURL
		got := e.do(tc.who, "GET", tc.path, "", 200, nil)
		e.srv.URL = orig
		if !bytes.Equal(got, want) {
			t.Errorf("%s GET %s from memory:\n%s\nfrom the store:\n%s", tc.who, tc.path, got, want)
		}
		if tc.path == "/v1/clusters" && tc.who == "admin" && bytes.Count(want, []byte(`"cluster_id"`)) < 3 {
			t.Fatalf("the admin list shows too little to compare: %s", want)
		}
	}
}

// TestOfferingsFollowTheMachines: a create checks its region and GPU type
// against what the leader worked out once per version of the in-memory
// machine table; a machine in a new region is offered from the next
// create on, and nothing is worked out again while the table is the same.
func TestOfferingsFollowTheMachines(t *testing.T) {
	e := newEnv(t)
	cached := store.NewCached(e.st)
	cached.Enable()
	s := New(cached, e.ctrl, e.clk, clock.Real{}, nil)
	var invalid *badRequest
	if err := s.checkOffering(e.ctx, "mars-1", "L40S"); !errors.As(err, &invalid) || invalid.field != "region" {
		t.Fatalf("mars-1 before it has machines: %v", err)
	}
	first := s.offers.Load()
	if err := s.checkOffering(e.ctx, "eu-west-1", "L40S"); err != nil {
		t.Fatal(err)
	}
	if s.offers.Load() != first {
		t.Fatal("the offerings were worked out again from the same machine table")
	}
	err := cached.Update(e.ctx, func(tx store.Tx) error {
		return tx.CreateMachine(e.ctx, domain.Machine{ID: "m-mars", Region: "mars-1", GPUType: "L40S", GPUs: 8, CreatedAt: e.clk.Now()})
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.checkOffering(e.ctx, "mars-1", "L40S"); err != nil {
		t.Fatalf("mars-1 once it has a machine: %v", err)
	}
	if err := s.checkOffering(e.ctx, "mars-1", "RTX_6000_PCI"); !errors.As(err, &invalid) || invalid.field != "gpu_type" ||
		!strings.Contains(err.Error(), "region mars-1 has no RTX_6000_PCI machines; it has L40S") {
		t.Fatalf("a GPU type mars-1 does not have: %v", err)
	}
}
