package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestScaleThePreemptibleStrategyAndCap: the scale form shows and
// changes a cluster's preemptible types, strategy and price cap; a bad
// cap is shown next to its field and changes nothing; the cluster page
// shows what was set.
func TestScaleThePreemptibleStrategyAndCap(t *testing.T) {
	e := newEnv(t)
	id := e.readyCluster()
	b := e.browser()
	csrf := b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/clusters/" + id + "/scale")
	if status != 200 || !strings.Contains(page, `id="preemptible_strategy"`) || !strings.Contains(page, `<option value="in-order" selected>`) ||
		!strings.Contains(page, `name="preemptible_gpu_types" value="RTX_6000_PCI"`) {
		t.Fatalf("scale page %d:\n%s", status, page)
	}
	form := func(strategy, cap string) url.Values {
		return url.Values{"csrf": {csrf}, "num_gpus": {"8"}, "num_preemptible_gpus": {"8"}, "preemptible_gpu_types": {"RTX_6000_PCI"},
			"preemptible_strategy": {strategy}, "max_preemptible_per_gpu_hour": {cap}}
	}
	status, page, _ = b.post("/console/clusters/"+id+"/scale", form("lowest-price", "cheap"))
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-max_preemptible_per_gpu_hour"`) {
		t.Fatalf("a bad cap: %d", status)
	}
	if got := e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200); !strings.Contains(got, `"preemptible_strategy":"in-order"`) {
		t.Fatalf("a refused form changed the cluster: %s", got)
	}
	if status, _, _ := b.post("/console/clusters/"+id+"/scale", form("lowest-price", "0.40")); status != http.StatusSeeOther {
		t.Fatalf("scale %d", status)
	}
	got := e.apiAs(e.tokens["p"], "GET", "/v1/clusters/"+id, "", 200)
	if !strings.Contains(got, `"preemptible_strategy":"lowest-price"`) || !strings.Contains(got, `"max_preemptible_per_gpu_hour":"0.40"`) {
		t.Fatalf("not applied: %s", got)
	}
	if _, page, _ = b.get("/console/clusters/" + id); !strings.Contains(page, "(lowest-price), at most $0.40 per GPU-hour") {
		t.Fatalf("cluster page:\n%s", page)
	}
}
