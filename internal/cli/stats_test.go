package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func statsFixture() apiv1.PreemptionStatsList {
	return apiv1.PreemptionStatsList{
		From: t0.Add(-7 * 24 * time.Hour), To: t0,
		Stats: []apiv1.PreemptionStats{
			{Region: "eu-west-1", GPUType: "L40S"},
			{Region: "us-central-2", GPUType: "H100", NodesObserved: 12, PreemptibleNodeHours: 250.25, Preemptions: 5,
				PreemptionsPerNodeHour: 5 / 250.25, MedianLifetimeSeconds: 5400, P90LifetimeSeconds: 2*86400 + 3*3600,
				DrainsEndedEarly: 3, DrainsEndedAtDeadline: 1, EarlyShare: 0.75},
			{Region: "us-central-8", GPUType: "H100", NodesObserved: 1, Preemptions: 1, MedianLifetimeSeconds: 150, P90LifetimeSeconds: 150},
		},
	}
}

func TestStatsTable(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/stats/preemptions", 200, statsFixture())
	r := f.run("stats")
	if r.err != nil {
		t.Fatal(r.err)
	}
	want := "Window: 2025-02-25T10:00:00Z to 2025-03-04T10:00:00Z (7d0h)\n\n" +
		"REGION         GPU_TYPE   NODE_HOURS   PREEMPTIONS   PER_NODE_HOUR   MEDIAN_LIFETIME   P90_LIFETIME   EARLY   DEADLINE   EARLY_SHARE\n" +
		"eu-west-1      L40S       0.0          0             -               -                 -              0       0          -\n" +
		"us-central-2   H100       250.2        5             0.020           1h30m             2d3h           3       1          75%\n" +
		"us-central-8   H100       0.0          1             -               2m30s             2m30s          0       0          -\n"
	if r.stdout != want {
		t.Fatalf("stdout:\n%s\nwant:\n%s", r.stdout, want)
	}
	if q := f.only("GET", "/v1/stats/preemptions")[0].Query; q != "" {
		t.Fatalf("no flags should send no parameters, sent %q", q)
	}
}

func TestStatsFlagsAndJSON(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/stats/preemptions", 200, statsFixture())
	r := f.run("stats", "--from", "2025-03-01T00:00:00+01:00", "--to", "2025-03-04T00:00:00Z", "--region", "us-central-2", "--gpu-type", "H100", "-o", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	q := f.only("GET", "/v1/stats/preemptions")[0].Query
	if q != "from=2025-02-28T23%3A00%3A00Z&gpu_type=H100&region=us-central-2&to=2025-03-04T00%3A00%3A00Z" {
		t.Fatalf("query %q", q)
	}
	var got apiv1.PreemptionStatsList
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("%v: %s", err, r.stdout)
	}
	if len(got.Stats) != 3 || got.Stats[1].EarlyShare != 0.75 {
		t.Fatalf("%+v", got)
	}
	mustContain(t, "json", r.stdout, `"preemptions_per_node_hour"`, `"median_lifetime_seconds": 5400`, `"drains_ended_at_deadline": 1`)

	r = f.run("stats", "-o", "yaml")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "yaml", r.stdout, "early_share: 0.75", "p90_lifetime_seconds: 183600", "region: eu-west-1")
}

func TestStatsErrors(t *testing.T) {
	f := newFakeAPI(t)
	f.sequence("GET /v1/stats/preemptions", apiErr(400, "invalid_argument", "the window from 2024-01-01T00:00:00Z to 2025-03-04T10:00:00Z is longer than 366 days; ask for a shorter one"))
	r := f.run("stats", "--from", "yesterday")
	if r.err == nil || !strings.Contains(r.err.Error(), `--from "yesterday" is not an RFC 3339 time`) {
		t.Fatalf("err %v", r.err)
	}
	if len(f.requests()) != 0 {
		t.Fatal("a bad --from still called the API")
	}
	r = f.run("stats", "--from", "2024-01-01T00:00:00Z")
	if r.err == nil || !strings.Contains(r.err.Error(), "get preemption statistics: 400 invalid_argument: the window") {
		t.Fatalf("err %v", r.err)
	}
}

func TestAdviseCheckpoint(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/advice/checkpoint", 200, apiv1.CheckpointAdvice{Region: "us-central-2", GPUType: "H100", CheckpointSeconds: 90,
		From: t0.Add(-7 * 24 * time.Hour), To: t0, Preemptions: 12, PreemptibleNodeHours: 521.7, PreemptionRatePercentPerHour: 2.3,
		RateBasis: "measured", MTBFSeconds: 156521.7, Formula: "daly", RecommendedIntervalSeconds: 5248.1, YoungIntervalSeconds: 5307.9,
		ExpectedOverheadPercent: 3.42, ExpectedLostSecondsPerPreemption: 2669})
	r := f.run("advise", "checkpoint", "--region", "us-central-2", "--gpu-type", "H100", "--checkpoint-seconds", "90")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "stdout", r.stdout, "12 preemptions in 521.7", "2.300 %/h (measured)", "1h27m (daly; Young's: 1h28m)", "3.42% of the run", "44m")
	if q := f.only("GET", "/v1/advice/checkpoint")[0].Query; q != "checkpoint_seconds=90&gpu_type=H100&region=us-central-2" {
		t.Errorf("query %q", q)
	}
	for _, args := range [][]string{{"--region", "r"}, {"--region", "r", "--gpu-type", "g"}, {"--region", "r", "--gpu-type", "g", "--checkpoint-seconds", "-1"},
		{"--region", "r", "--gpu-type", "g", "--checkpoint-seconds", "9", "--run-hours", "200"},
		{"--region", "r", "--gpu-type", "g", "--checkpoint-seconds", "9", "--run-start", "2025-03-05T09:00:00Z"}} {
		if r := f.run(append([]string{"advise", "checkpoint"}, args...)...); r.err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if n := len(f.requests()); n != 1 {
		t.Errorf("%d requests: refused flags sent some", n)
	}
	// A run's hours go with the question.
	r = f.run("advise", "checkpoint", "--region", "us-central-2", "--gpu-type", "H100", "--checkpoint-seconds", "90", "--run-hours", "8", "--run-start", "2025-03-05T09:00:00Z")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if q := f.only("GET", "/v1/advice/checkpoint")[1].Query; q != "checkpoint_seconds=90&gpu_type=H100&region=us-central-2&run_hours=8&run_start=2025-03-05T09%3A00%3A00Z" {
		t.Errorf("query with a run %q", q)
	}
}
