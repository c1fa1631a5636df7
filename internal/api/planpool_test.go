package api

import (
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestPlanRefusesAPoolTheFleetLacks: a region and a GPU type the fleet
// has, but no pool of that type in that region, is a 400 naming the
// pools there are (a rate of 0 would say the job is never reclaimed),
// for a plan and for the checkpoint advice; a name the fleet lacks
// altogether names its field. The statistics answer such a pool with an
// empty list, as they always did.
func TestPlanRefusesAPoolTheFleetLacks(t *testing.T) {
	e := newEnv(t)
	for _, path := range []string{
		planPath("region", "us-central-2", "gpu_type", "L40S", "gpu_hours", "80"),
		planPath("region", "us-central-2", "gpu_type", "L40S", "gpu_hours", "80", "rate_percent_per_hour", "2"),
		advicePath("region", "us-central-2", "gpu_type", "L40S", "checkpoint_seconds", "90"),
		advicePath("region", "us-central-2", "gpu_type", "L40S", "checkpoint_seconds", "90", "run_hours", "4"),
	} {
		got := e.apiErr("p", "GET", path, "", 400)
		if got.Field != "gpu_type" || got.Code != apiv1.CodeInvalid ||
			!strings.Contains(got.Message, "no pool of L40S in us-central-2; the pools are: eu-west-1/L40S, us-central-2/RTX_6000_PCI") {
			t.Errorf("%s: %+v", path, got)
		}
	}
	for _, tc := range []struct{ path, field, says string }{
		{planPath("region", "mars-1", "gpu_type", "L40S", "gpu_hours", "80"), "region", `unknown region "mars-1"`},
		{planPath("region", "us-central-2", "gpu_type", "TPU", "gpu_hours", "80"), "gpu_type", `unknown gpu_type "TPU"`},
		{advicePath("region", "mars-1", "gpu_type", "L40S", "checkpoint_seconds", "90"), "region", `unknown region "mars-1"`},
	} {
		if got := e.apiErr("p", "GET", tc.path, "", 400); got.Field != tc.field || !strings.Contains(got.Message, tc.says) {
			t.Errorf("%s: %+v", tc.path, got)
		}
	}
	var st apiv1.PreemptionStatsList
	e.do("p", "GET", "/v1/stats/preemptions?region=us-central-2&gpu_type=L40S", "", 200, &st)
	if len(st.Stats) != 0 {
		t.Errorf("statistics of a pool the fleet lacks: %+v", st)
	}
}

// TestPoolListIsBounded: the pools an error names are at most
// maxPoolsNamed, then how many more there are.
func TestPoolListIsBounded(t *testing.T) {
	pools := map[string]bool{}
	for _, r := range []string{"a", "b", "c", "d", "e"} {
		for _, g := range []string{"G1", "G2", "G3"} {
			pools[r+"/"+g] = true
		}
	}
	got := poolList(pools)
	if !strings.HasPrefix(got, "a/G1, a/G2, a/G3, b/G1") || !strings.HasSuffix(got, "and 3 more") || strings.Count(got, "/") != maxPoolsNamed {
		t.Errorf("%q", got)
	}
}
