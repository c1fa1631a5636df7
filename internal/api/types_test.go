package api

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestPreemptibleGPUTypes: a cluster created with several preemptible
// GPU types of its region shows them, and its preemptible nodes come
// from the second when the first has nothing to lend; a type its region
// lacks, a type named twice or too many are refused with the field
// named; a PATCH changes the list, or is refused with nothing changed.
func TestPreemptibleGPUTypes(t *testing.T) {
	e := newEnv(t)
	start := e.clk.Now()
	err := e.st.Update(context.Background(), func(tx store.Tx) error {
		for i := range 3 {
			if err := tx.CreateMachine(context.Background(), domain.Machine{ID: fmt.Sprintf("h200-%d", i), Region: "us-central-2", GPUType: "H200", GPUs: 8, CreatedAt: e.clk.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Standard nodes take every RTX_6000_PCI machine (the reserved ones
	// too, for acme's reserved cluster).
	e.create("p", `{"cluster_name":"std","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":24}`)
	e.create("admin", acmeBody)
	e.settle()
	// Its standard node is an H200; its preemptible target prefers
	// RTX_6000_PCI, which has none to lend.
	c := e.create("p", `{"cluster_name":"spread","region":"us-central-2","gpu_type":"H200","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8,"num_preemptible_gpus":16,"preemptible_gpu_types":["RTX_6000_PCI","H200"]}`)
	if fmt.Sprint(c.PreemptibleGPUTypes) != "[RTX_6000_PCI H200]" {
		t.Fatalf("types %v", c.PreemptibleGPUTypes)
	}
	e.settle()
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	h200 := 0
	for _, n := range got.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" && n.Status == "ready" && n.GPUType == "H200" {
			h200 += n.NumGPUs
		}
	}
	if h200 != 16 || got.AllocatedPreemptibleGPUs != 16 || got.TargetUnfulfilled != nil {
		t.Fatalf("the target is not met from H200: %d H200 GPUs ready, allocated %d, %+v; nodes %+v", h200, got.AllocatedPreemptibleGPUs, got.TargetUnfulfilled, got.GPUWorkerNodes)
	}
	if fmt.Sprint(got.AllocatedPreemptibleByType) != "map[H200:16]" {
		t.Fatalf("allocated by type %v", got.AllocatedPreemptibleByType)
	}
	// Its usage by GPU type and class, beside the other cluster's.
	e.clk.Step(time.Hour)
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, e.clk.Now(), "group_by", "gpu_type"), "", 200, &u)
	var keys []string
	for _, l := range u.LineItems {
		keys = append(keys, l.GPUType+"/"+l.ComputeClass)
	}
	if fmt.Sprint(keys) != "[H200/preemptible H200/standard RTX_6000_PCI/standard]" || u.GroupBy != "gpu_type" ||
		u.LineItems[0].GPUSeconds != 2*u.LineItems[1].GPUSeconds {
		t.Fatalf("usage by GPU type: %v (%+v)", keys, u.LineItems)
	}
	var list apiv1.ClusterList
	e.do("p", "GET", "/v1/clusters", "", 200, &list)
	for _, x := range list.Clusters {
		if x.ClusterName == "std" && fmt.Sprint(x.PreemptibleGPUTypes) != "[RTX_6000_PCI]" {
			t.Errorf("a cluster of one type: %v", x.PreemptibleGPUTypes)
		}
	}
	body := func(types string) string {
		return `{"cluster_name":"bad","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8,"preemptible_gpu_types":` + types + `}`
	}
	for _, types := range []string{`["L40S"]`, `["H200","H200"]`, `["a","b","c","d","e","f","g","h","i"]`, `["bad name"]`} {
		if got := e.apiErr("p", "POST", "/v1/clusters", body(types), 400); got.Field != "preemptible_gpu_types" {
			t.Errorf("%s: %+v", types, got)
		}
	}
	for _, types := range []string{`["L40S"]`, `["H200","H200"]`, `"H200"`, `["bad name"]`} {
		if got := e.apiErr("p", "PATCH", "/v1/clusters/"+c.ClusterID, `{"preemptible_gpu_types":`+types+`}`, 400); got.Field != "preemptible_gpu_types" {
			t.Errorf("PATCH %s: %+v", types, got)
		}
	}
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if fmt.Sprint(got.PreemptibleGPUTypes) != "[RTX_6000_PCI H200]" {
		t.Fatalf("a refused PATCH changed the types: %v", got.PreemptibleGPUTypes)
	}
	e.do("p", "PATCH", "/v1/clusters/"+c.ClusterID, `{"preemptible_gpu_types":["H200"]}`, 200, &got)
	if fmt.Sprint(got.PreemptibleGPUTypes) != "[H200]" || got.DesiredPreemptibleGPUs != 16 {
		t.Fatalf("PATCH: types %v, target %d", got.PreemptibleGPUTypes, got.DesiredPreemptibleGPUs)
	}
	e.settle()
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if got.AllocatedPreemptibleGPUs != 16 {
		t.Fatalf("its own type alone keeps its nodes: %d allocated", got.AllocatedPreemptibleGPUs)
	}
}
