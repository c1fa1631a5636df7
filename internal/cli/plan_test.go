package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPlanCommand: the flags become the query (durations in seconds, the
// rate only when given), the table reads the answer, and bad flags send
// nothing.
func TestPlanCommand(t *testing.T) {
	f := newFakeAPI(t)
	be := 38.5
	f.handle("GET /v1/plan", 200, map[string]any{"region": "us-central-2", "gpu_type": "H100", "gpu_hours": 384, "gpus": 8,
		"preemption_rate_percent_per_hour": 4.1, "rate_basis": "asked", "interval_seconds": 3916, "overhead_percent": 5.26,
		"standard_hours": 48, "standard_cost": 1148.16, "break_even_rate_percent_per_hour": be,
		"preemptible": map[string]any{"expected_hours": 50.5, "p10_hours": 49.1, "p50_hours": 50.3, "p90_hours": 52, "expected_cost": 604},
		"deadline": map[string]any{"deadline_hours": 52, "plan": map[string]any{"meet_probability": 1, "expected_cost": 677.19, "expected_hours": 50.27, "moved_share": 0.42},
			"greedy":         map[string]any{"meet_probability": 0.9, "expected_cost": 624.14, "expected_hours": 50.49, "moved_share": 0.15},
			"standard_hours": 48, "standard_cost": 1148.16, "standard_meets": true},
		"advice": "Run on preemptible nodes and move to standard nodes when the slack runs out"})
	r := f.run("plan", "--region", "us-central-2", "--gpu-type", "H100", "--gpu-hours", "384", "--checkpoint", "90s", "--restart", "12m",
		"--deadline", "52h", "--rate", "4.1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "384 GPU-hours on 8 GPUs in us-central-2 H100", "4.1 %/h (asked)", "1h5m", "48.0h, 1148.16",
		"overhead 5.3% by formula", "p90 52.0h", "38.5 %/h", "met in 100.0%, 677.19", "met in 90.0%, 624.14", "move to standard nodes when the slack runs out")
	want := "checkpoint_seconds=90&deadline_hours=52&gpu_hours=384&gpu_type=H100&gpus=8&rate_percent_per_hour=4.1&region=us-central-2&restart_seconds=720"
	if q := f.only("GET", "/v1/plan")[0].Query; q != want {
		t.Errorf("query %q, want %q", q, want)
	}
	f.run("plan", "--region", "r", "--gpu-type", "g", "--gpu-hours", "8")
	if q := f.only("GET", "/v1/plan")[1].Query; q != "gpu_hours=8&gpu_type=g&gpus=8&region=r" {
		t.Errorf("without a rate: query %q", q)
	}
	for _, args := range [][]string{{"--region", "r"}, {"--region", "r", "--gpu-type", "g"}, {"--region", "r", "--gpu-type", "g", "--gpu-hours", "8", "--rate", "-2"}} {
		if r := f.run(append([]string{"plan"}, args...)...); r.err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if n := len(f.requests()); n != 2 {
		t.Errorf("%d requests: refused flags sent some", n)
	}
}

// TestPlanSaysAlwaysPays: a break-even rate past any real pool's is said
// in words, not printed as a rate a pool could have.
func TestPlanSaysAlwaysPays(t *testing.T) {
	f := newFakeAPI(t)
	be := 290.0
	f.handle("GET /v1/plan", 200, map[string]any{"region": "r", "gpu_type": "g", "gpu_hours": 384, "gpus": 8,
		"preemption_rate_percent_per_hour": 24.5, "rate_basis": "asked", "standard_hours": 48, "standard_cost": 1175.04,
		"break_even_rate_percent_per_hour": be, "preemptible_always_pays": true, "advice": "Preemptible pays"})
	r := f.run("plan", "--region", "r", "--gpu-type", "g", "--gpu-hours", "384")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "preemptible always pays: it would break even only at 290 %/h, past any pool's rate (100 %/h is a node lasting an hour)")
	f = newFakeAPI(t)
	f.handle("GET /v1/plan", 200, map[string]any{"region": "r", "gpu_type": "g", "gpu_hours": 384, "gpus": 8,
		"standard_hours": 48, "standard_cost": 1175.04, "preemptible_always_pays": true, "advice": "Preemptible pays"})
	r = f.run("plan", "--region", "r", "--gpu-type", "g", "--gpu-hours", "384")
	mustContain(t, "stdout", r.stdout, "preemptible always pays: no rate up to 1000 %/h makes it cost what standard does")
}

// TestPlanOnATrace: --availability-trace plans locally (no request) on a
// trace in SkyPilot's format, and refuses a trace it cannot read or a
// missing price.
func TestPlanOnATrace(t *testing.T) {
	f := newFakeAPI(t)
	dir := t.TempDir()
	trace := filepath.Join(dir, "trace.json")
	var data []string
	for i := range 2000 {
		n := 1
		if i%40 >= 30 {
			n = 0 // 7.5 of every 10 hours available
		}
		data = append(data, strconv.Itoa(n))
	}
	os.WriteFile(trace, []byte(`{"metadata": {"gap_seconds": 900}, "data": [`+strings.Join(data, ",")+`]}`), 0o600)
	r := f.run("plan", "--availability-trace", trace, "--on-demand-price", "3.06", "--gpu-hours", "384", "--checkpoint", "90s",
		"--restart", "12m", "--deadline", "70h")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "(trace)", "48.0h, 1175.04, meets it", "(for the deadline; Daly's ", "plan (move when the slack runs out):   met in 100.0%",
		"available 75% of the time")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"data": [1]}`), 0o600)
	for _, args := range [][]string{
		{"--availability-trace", trace, "--gpu-hours", "8"},
		{"--availability-trace", bad, "--gpu-hours", "8", "--on-demand-price", "1"},
		{"--availability-trace", filepath.Join(dir, "none.json"), "--gpu-hours", "8", "--on-demand-price", "1"},
	} {
		if r := f.run(append([]string{"plan"}, args...)...); r.err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("a plan on a trace sent %d requests", n)
	}
}
