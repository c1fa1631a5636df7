package api

import (
	"math"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/pkg/preempt"
)

func advicePath(params ...string) string { return withQuery("/v1/advice/checkpoint", params...) }

// withQuery is path with the query of name, value pairs.
func withQuery(path string, params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	return path + "?" + q.Encode()
}

// TestCheckpointAdvice: the advice works from the rate the statistics
// measure in the partition (here both preemptible nodes reclaimed after an
// hour), with the formula named, Daly's interval, Young's, the overhead and
// the work a preemption loses; with no preemption seen it assumes at most
// one in the hours observed; with no node-hours at all it says so.
func TestCheckpointAdvice(t *testing.T) {
	e := newEnv(t)
	// Nothing ran yet.
	var none apiv1.CheckpointAdvice
	e.do("p", "GET", advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "", 200, &none)
	if none.RateBasis != "none" || none.RecommendedIntervalSeconds != 0 || !strings.Contains(none.Note, "no preemptible node ran") {
		t.Fatalf("no data: %+v", none)
	}
	e.create("p", createBody)
	e.settle()
	e.clk.Step(time.Hour)
	var quiet apiv1.CheckpointAdvice
	e.do("p", "GET", advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "", 200, &quiet)
	if quiet.RateBasis != "upper_bound" || quiet.Preemptions != 0 || quiet.PreemptibleNodeHours < 1.9 ||
		!near(quiet.PreemptionRatePercentPerHour, 100/quiet.PreemptibleNodeHours) || quiet.RecommendedIntervalSeconds <= 0 {
		t.Fatalf("no preemption seen: %+v", quiet)
	}
	e.create("admin", acmeBody) // reclaims both preemptible nodes
	e.settle()
	st := row(t, e.stats("p", "region", "us-central-2", "gpu_type", "RTX_6000_PCI"), "us-central-2", "RTX_6000_PCI")
	var a apiv1.CheckpointAdvice
	e.do("p", "GET", advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "", 200, &a)
	rate := 100 * st.PreemptionsPerNodeHour
	mtbf := preempt.MTBF(rate)
	tau := preempt.Daly(90*time.Second, mtbf)
	if a.RateBasis != "measured" || a.Formula != "daly" || a.Preemptions != st.Preemptions || st.Preemptions != 2 ||
		!near(a.PreemptionRatePercentPerHour, rate) || !near(a.MTBFSeconds, mtbf.Seconds()) ||
		math.Abs(a.RecommendedIntervalSeconds-tau.Seconds()) > 1e-6 ||
		math.Abs(a.YoungIntervalSeconds-preempt.Young(90*time.Second, mtbf).Seconds()) > 1e-6 {
		t.Fatalf("measured: %+v (stats %+v)", a, st)
	}
	ex := preempt.Expect(tau, 90*time.Second, mtbf)
	if math.Abs(a.ExpectedOverheadPercent-100*ex.Overhead) > 1e-9 || math.Abs(a.ExpectedLostSecondsPerPreemption-ex.LostPerPreemption.Seconds()) > 1e-6 {
		t.Fatalf("expectations: %+v, want %+v", a, ex)
	}
	// A project token reads it like the statistics; refusals name the field.
	for _, tc := range []struct{ path, field string }{
		{advicePath("gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "region"},
		{advicePath("region", "us-central-2", "checkpoint_seconds", "90"), "gpu_type"},
		{advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI"), "checkpoint_seconds"},
		{advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "-5"), "checkpoint_seconds"},
		{advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "NaN"), "checkpoint_seconds"},
		{advicePath("region", "mars-1", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "region"},
		{advicePath("region", "us-central-2", "gpu_type", "TPU", "checkpoint_seconds", "90"), "gpu_type"},
		{advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90", "from", "yesterday"), "from"},
	} {
		if got := e.apiErr("p", "GET", tc.path, "", 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.path, got, tc.field)
		}
	}
	e.apiErr("", "GET", advicePath("region", "us-central-2", "gpu_type", "RTX_6000_PCI", "checkpoint_seconds", "90"), "", 401)
}
