package api

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestCapacityForecast: every pool's lendable GPUs hour by hour from the
// next hour, from the weeks of history it has (here one: five samples an
// hour, too few for a 90% interval, which the note says); any token may
// ask; bad questions are refused with the field named.
func TestCapacityForecast(t *testing.T) {
	e := newEnv(t)
	e.do("admin", "POST", "/v1/clusters", `{"project_id":"p","cluster_name":"std","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8}`, 201, nil)
	e.settle()
	e.clk.Step(8 * 24 * time.Hour)
	now := e.clk.Now()
	var f apiv1.CapacityForecast
	e.do("p", "GET", "/v1/capacity/forecast?hours=24", "", 200, &f)
	if len(f.Pools) != 2 || f.Pools[0].Region != "eu-west-1" || f.Pools[1].GPUType != "RTX_6000_PCI" {
		t.Fatalf("pools %+v", f.Pools)
	}
	rtx := f.Pools[1]
	if rtx.CapacityGPUs != 40 || len(rtx.Hours) != 24 || rtx.EnoughHistory || !strings.Contains(rtx.Note, "8.0 days of history") {
		t.Fatalf("pool %+v", rtx)
	}
	if h := rtx.Hours[0]; !h.Start.Equal(now.Truncate(time.Hour).Add(time.Hour)) || h.Samples != 5 {
		t.Fatalf("first hour %+v, now %s", h, now)
	}
	// The standard node has held 8 of the 40 GPUs all along.
	for _, h := range rtx.Hours {
		if h.ExpectedGPUs != 32 || h.LowGPUs != 32 || h.HighGPUs != 32 {
			t.Fatalf("hour %+v, want 32 GPUs for certain", h)
		}
	}
	e.do("p", "GET", "/v1/capacity/forecast?region=eu-west-1&gpu_type=L40S", "", 200, &f)
	if len(f.Pools) != 1 || len(f.Pools[0].Hours) != 48 || f.Pools[0].Hours[0].ExpectedGPUs != 8 {
		t.Fatalf("one pool, 48 hours by default: %+v", f.Pools)
	}
	for _, tc := range []struct{ query, field string }{
		{"?hours=0", "hours"}, {"?hours=169", "hours"}, {"?hours=a", "hours"},
		{"?region=mars", "region"}, {"?gpu_type=H100", "gpu_type"},
	} {
		if got := e.apiErr("p", "GET", "/v1/capacity/forecast"+tc.query, "", 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.query, got, tc.field)
		}
	}
}
