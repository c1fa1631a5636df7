package cli

import (
	"reflect"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestClustersConvert runs the command docs/reclaim.md shows: one POST
// naming the node and the class, and the cluster printed with the node's
// new class. Bad arguments send nothing.
func TestClustersConvert(t *testing.T) {
	text, args := commandSnippet(t, "reclaim.md", "convert")
	f := newFakeAPI(t)
	c := cluster("Ready", 8, apiv1.Node{NodeID: "n-3", NodeName: "gpu-preemptible-dp-3", ComputeClass: "standard", Status: "ready", NumGPUs: 8})
	c.NumGPUs, c.DesiredPreemptibleGPUs = 16, 8
	f.handle("POST /v1/clusters/{id}/nodes/{node}/convert", 200, c)
	r := f.run(args...)
	if r.err != nil {
		t.Fatalf("%s: %v\n%s", text, r.err, r.stderr)
	}
	reqs := f.only("POST", "/v1/clusters/c1/nodes/gpu-preemptible-dp-3/convert")
	if len(reqs) != 1 || !reflect.DeepEqual(reqs[0].Body, map[string]any{"compute_class": "standard"}) {
		t.Fatalf("requests %+v", reqs)
	}
	mustContain(t, "convert output", r.stdout, "gpu-preemptible-dp-3", "standard")

	for _, bad := range [][]string{{"c1", "gpu-dp-1"}, {"c1", "gpu-dp-1", "--to", "spot"}, {"c1", "--to", "standard"}} {
		if r := f.run(append([]string{"clusters", "convert"}, bad...)...); r.err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
	if n := len(f.only("POST", "/v1/clusters/c1/nodes/gpu-dp-1/convert")); n != 0 {
		t.Fatalf("refused arguments were sent: %d requests", n)
	}
	r = f.run("clusters", "convert", "--help")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "help", r.stdout, "nothing is drained", "--to", "reservation")
}
