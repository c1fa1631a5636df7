package api

import (
	"bytes"
	"net/http/httptest"
	"strings"
	"testing"

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
	mem := New(cached, e.ctrl, e.clk, adminToken, nil)
	memSrv := httptest.NewServer(mem)
	defer memSrv.Close()
	for _, tc := range []struct{ who, path string }{
		{"admin", "/v1/clusters"}, {"admin", "/v1/clusters?project_id=q"}, {"p", "/v1/clusters"},
		{"q", "/v1/clusters"}, {"p", "/v1/clusters?project_id=q"},
	} {
		want := e.do(tc.who, "GET", tc.path, "", 200, nil)
		orig := e.srv.URL
		e.srv.URL = memSrv.URL
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
