package api

import (
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestPreemptibleStrategyAndCap: a cluster's preemptible strategy and
// price cap are set at creation and by PATCH, shown in its view (in-order
// and no cap unless set; the cap written as prices are), and bad values
// are refused with the field named and nothing changed.
func TestPreemptibleStrategyAndCap(t *testing.T) {
	e := newEnv(t)
	body := func(extra string) string {
		return `{"cluster_name":"c","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8` + extra + `}`
	}
	for _, bad := range []struct{ extra, field string }{
		{`,"preemptible_strategy":"cheapest"`, "preemptible_strategy"},
		{`,"max_preemptible_per_gpu_hour":"abc"`, "max_preemptible_per_gpu_hour"},
		{`,"max_preemptible_per_gpu_hour":"-1.00"`, "max_preemptible_per_gpu_hour"},
		{`,"max_preemptible_per_gpu_hour":"0"`, "max_preemptible_per_gpu_hour"},
		{`,"max_preemptible_per_gpu_hour":1.6`, "max_preemptible_per_gpu_hour"},
	} {
		if got := e.apiErr("p", "POST", "/v1/clusters", body(bad.extra), 400); got.Field != bad.field {
			t.Errorf("%s: %+v", bad.extra, got)
		}
	}
	plain := e.create("p", body(""))
	if plain.PreemptibleStrategy != "in-order" || plain.MaxPreemptiblePerGPUHour != "" {
		t.Fatalf("defaults: %q %q", plain.PreemptibleStrategy, plain.MaxPreemptiblePerGPUHour)
	}
	c := e.create("p", `{"cluster_name":"capped","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","num_gpus":8,"preemptible_strategy":"lowest-price","max_preemptible_per_gpu_hour":"1.6"}`)
	if c.PreemptibleStrategy != "lowest-price" || c.MaxPreemptiblePerGPUHour != "1.60" {
		t.Fatalf("created: %q %q", c.PreemptibleStrategy, c.MaxPreemptiblePerGPUHour)
	}
	path := "/v1/clusters/" + c.ClusterID
	for _, bad := range []struct{ body, field string }{
		{`{"preemptible_strategy":"fastest"}`, "preemptible_strategy"},
		{`{"max_preemptible_per_gpu_hour":"1.2345678"}`, "max_preemptible_per_gpu_hour"},
		{`{"preemptible_strategy":"capacity-optimized","max_preemptible_per_gpu_hour":"x"}`, "max_preemptible_per_gpu_hour"},
		{`{}`, ""},
	} {
		if got := e.apiErr("p", "PATCH", path, bad.body, 400); got.Field != bad.field {
			t.Errorf("PATCH %s: %+v", bad.body, got)
		}
	}
	var got apiv1.Cluster
	e.do("p", "GET", path, "", 200, &got)
	if got.PreemptibleStrategy != "lowest-price" || got.MaxPreemptiblePerGPUHour != "1.60" {
		t.Fatalf("a refused PATCH changed them: %q %q", got.PreemptibleStrategy, got.MaxPreemptiblePerGPUHour)
	}
	e.do("p", "PATCH", path, `{"preemptible_strategy":"price-capacity-optimized"}`, 200, &got)
	if got.PreemptibleStrategy != "price-capacity-optimized" || got.MaxPreemptiblePerGPUHour != "1.60" {
		t.Fatalf("PATCH strategy: %q %q", got.PreemptibleStrategy, got.MaxPreemptiblePerGPUHour)
	}
	e.do("p", "PATCH", path, `{"max_preemptible_per_gpu_hour":"0.995"}`, 200, &got)
	if got.MaxPreemptiblePerGPUHour != "0.995" {
		t.Fatalf("PATCH cap: %q", got.MaxPreemptiblePerGPUHour)
	}
	e.do("p", "PATCH", path, `{"max_preemptible_per_gpu_hour":""}`, 200, &got)
	if got.MaxPreemptiblePerGPUHour != "" || got.PreemptibleStrategy != "price-capacity-optimized" {
		t.Fatalf("PATCH no cap: %q %q", got.MaxPreemptiblePerGPUHour, got.PreemptibleStrategy)
	}
}

// TestACapBelowThePriceReleasesTheNodes: lowering a cluster's cap below
// its type's preemptible price ($0.445: half of $0.89) drains its
// preemptible nodes and says why its target is unmet; removing the cap
// fills it again.
func TestACapBelowThePriceReleasesTheNodes(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", `{"cluster_name":"capped","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8,"num_preemptible_gpus":8,"max_preemptible_per_gpu_hour":"0.50"}`)
	e.settle()
	path := "/v1/clusters/" + c.ClusterID
	var got apiv1.Cluster
	e.do("p", "GET", path, "", 200, &got)
	if got.AllocatedPreemptibleGPUs != 8 {
		t.Fatalf("under the cap: %d allocated", got.AllocatedPreemptibleGPUs)
	}
	e.do("p", "PATCH", path, `{"max_preemptible_per_gpu_hour":"0.40"}`, 200, &got)
	e.settle()
	e.do("p", "GET", path, "", 200, &got)
	u := got.TargetUnfulfilled
	if got.AllocatedPreemptibleGPUs != 0 || u == nil || u.Reason != "NoSpareCapacity" || !strings.Contains(u.Message, "$0.40") {
		t.Fatalf("above the cap: %d allocated, %+v", got.AllocatedPreemptibleGPUs, u)
	}
	e.do("p", "PATCH", path, `{"max_preemptible_per_gpu_hour":""}`, 200, &got)
	e.settle()
	got = apiv1.Cluster{}
	e.do("p", "GET", path, "", 200, &got)
	if got.AllocatedPreemptibleGPUs != 8 || got.TargetUnfulfilled != nil {
		t.Fatalf("no cap: %d allocated, %+v", got.AllocatedPreemptibleGPUs, got.TargetUnfulfilled)
	}
}
