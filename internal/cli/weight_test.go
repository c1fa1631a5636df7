package cli

import (
	"reflect"
	"strings"
	"testing"
)

func TestClustersSetWeight(t *testing.T) {
	f := newFakeAPI(t)
	c := cluster("Ready", 16)
	c.Weight = 3
	f.handle("PATCH /v1/admin/clusters/{id}", 200, c)

	r := f.run("clusters", "set-weight", "c1", "3")
	if r.err != nil {
		t.Fatalf("set-weight: %v\n%s", r.err, r.stderr)
	}
	reqs := f.only("PATCH", "/v1/admin/clusters/c1")
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, map[string]any{"weight": 3.0}) {
		t.Fatalf("requests %+v", reqs)
	}
	mustContain(t, "set-weight output", r.stdout, "ID:                 c1", "Weight:             3")

	for _, args := range [][]string{{"c1", "0"}, {"c1", "1001"}, {"c1", "two"}, {"c1", "1.5"}} {
		r := f.run(append([]string{"clusters", "set-weight"}, args...)...)
		if r.err == nil || !strings.Contains(r.err.Error(), "weight must be an integer from 1 to 1000") {
			t.Errorf("%v: %v", args, r.err)
		}
	}
	if r := f.run("clusters", "set-weight", "c1"); r.err == nil || !strings.Contains(r.err.Error(), "accepts 2 arg") {
		t.Errorf("one argument: %v", r.err)
	}
	if n := len(f.only("PATCH", "/v1/admin/clusters/c1")); n != 1 {
		t.Fatalf("refused arguments were sent: %d requests", n)
	}

	r = f.run("clusters", "set-weight", "--help")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "help", r.stdout, "set-weight <cluster-id> <weight>", "from 1 to 1000", "admin token")
}
