package api

import (
	"math"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/sim"
)

const acmeBody = `{"cluster_name":"acme-prod","project_id":"acme","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"RESERVED","num_gpus":16}`

func statsPath(params ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	if len(q) == 0 {
		return "/v1/stats/preemptions"
	}
	return "/v1/stats/preemptions?" + q.Encode()
}

func (e *env) stats(who string, params ...string) apiv1.PreemptionStatsList {
	e.t.Helper()
	var out apiv1.PreemptionStatsList
	e.do(who, "GET", statsPath(params...), "", 200, &out)
	return out
}

// row returns the entry of region and GPU type, failing if there is none.
func row(t *testing.T, l apiv1.PreemptionStatsList, region, gpuType string) apiv1.PreemptionStats {
	t.Helper()
	for _, s := range l.Stats {
		if s.Region == region && s.GPUType == gpuType {
			return s
		}
	}
	t.Fatalf("no %s/%s entry in %+v", region, gpuType, l)
	return apiv1.PreemptionStats{}
}

// preemptibleReady returns the ready time of each preemptible node of the
// cluster, by node ID.
func (e *env) preemptibleReady(clusterID string) map[string]time.Time {
	e.t.Helper()
	var c apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+clusterID, "", 200, &c)
	out := map[string]time.Time{}
	for _, n := range c.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" && n.ReadyAt != nil && n.Status == "ready" {
			out[n.NodeID] = *n.ReadyAt
		}
	}
	return out
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

// reclaim runs the scenario both tests share: p's cluster fills its
// preemptible target on acme's idle reserved machines, then acme claims its
// reservation, which reclaims both preemptible nodes at once. It returns the
// cluster, the reclaimed nodes' ready times and the reclaim time.
func (e *env) reclaim() (apiv1.Cluster, map[string]time.Time, time.Time) {
	e.t.Helper()
	c := e.create("p", createBody)
	e.settle()
	first := e.preemptibleReady(c.ClusterID)
	if len(first) != 2 {
		e.t.Fatalf("want two ready preemptible nodes, got %v", first)
	}
	t1 := e.clk.Now()
	e.create("admin", acmeBody)
	return c, first, t1
}

func TestPreemptionStatsReclaim(t *testing.T) {
	e := newEnv(t)
	c, first, t1 := e.reclaim()
	e.settle()
	now := e.clk.Now()
	refills := e.preemptibleReady(c.ClusterID)
	if len(refills) != 2 {
		t.Fatalf("the target was not refilled: %v", refills)
	}

	got := e.stats("p")
	if !got.To.Equal(now) || !got.From.Equal(now.Add(-7*24*time.Hour)) || got.To.Location() != time.UTC {
		t.Fatalf("default window %v – %v, want the 7 days up to %v", got.From, got.To, now)
	}
	if len(got.Stats) != 2 || got.Stats[0].Region != "eu-west-1" || got.Stats[1].Region != "us-central-2" {
		t.Fatalf("want one entry per region and GPU type, sorted: %+v", got.Stats)
	}
	if eu := got.Stats[0]; eu != (apiv1.PreemptionStats{Region: "eu-west-1", GPUType: "L40S"}) {
		t.Fatalf("eu-west-1 saw nothing, got %+v", eu)
	}
	us := row(t, got, "us-central-2", "RTX_6000_PCI")
	var hours float64
	var lifetimes []float64
	for _, ready := range first {
		hours += t1.Sub(ready).Hours()
		lifetimes = append(lifetimes, t1.Sub(ready).Seconds())
	}
	for _, ready := range refills {
		hours += now.Sub(ready).Hours()
	}
	if us.Preemptions != 2 || us.DrainsEndedEarly != 2 || us.DrainsEndedAtDeadline != 0 || us.EarlyShare != 1 || us.NodesObserved != 4 {
		t.Fatalf("counts: %+v", us)
	}
	if !near(us.PreemptibleNodeHours, hours) || !near(us.PreemptionsPerNodeHour, 2/hours) {
		t.Fatalf("node-hours %v rate %v, want %v and %v", us.PreemptibleNodeHours, us.PreemptionsPerNodeHour, hours, 2/hours)
	}
	lo, hi := math.Min(lifetimes[0], lifetimes[1]), math.Max(lifetimes[0], lifetimes[1])
	if !near(us.MedianLifetimeSeconds, lo) || !near(us.P90LifetimeSeconds, hi) {
		t.Fatalf("lifetimes median %v p90 %v, want %v (nearest rank: the lower of two) and %v", us.MedianLifetimeSeconds, us.P90LifetimeSeconds, lo, hi)
	}

	// Fleet-wide: every caller gets the same answer.
	for _, who := range []string{"q", "admin"} {
		if other := e.stats(who); !equalStats(other, got) {
			t.Fatalf("%s sees %+v, p sees %+v", who, other, got)
		}
	}

	// A window ending just before the reclaim: no preemptions yet.
	before := row(t, e.stats("p", "from", rfc(t1.Add(-time.Hour)), "to", rfc(t1)), "us-central-2", "RTX_6000_PCI")
	if before.Preemptions != 0 || before.DrainsEndedEarly != 0 || before.PreemptibleNodeHours <= 0 || before.PreemptionsPerNodeHour != 0 {
		t.Fatalf("before the reclaim: %+v", before)
	}
	// A one-microsecond window at the reclaim: two preemptions, no
	// node-hours, so the rate is 0 rather than infinite.
	at := row(t, e.stats("p", "from", rfc(t1), "to", rfc(t1.Add(time.Microsecond))), "us-central-2", "RTX_6000_PCI")
	if at.Preemptions != 2 || at.PreemptibleNodeHours != 0 || at.PreemptionsPerNodeHour != 0 {
		t.Fatalf("at the reclaim: %+v", at)
	}

	// Filters.
	f := e.stats("p", "region", "us-central-2")
	if len(f.Stats) != 1 || f.Stats[0] != us {
		t.Fatalf("region filter: %+v", f)
	}
	if f := e.stats("p", "gpu_type", "L40S"); len(f.Stats) != 1 || f.Stats[0].Region != "eu-west-1" {
		t.Fatalf("gpu_type filter: %+v", f)
	}
	if f := e.stats("p", "region", "eu-west-1", "gpu_type", "RTX_6000_PCI"); f.Stats == nil || len(f.Stats) != 0 {
		t.Fatalf("a region without that GPU type: %+v", f)
	}
	if !strings.Contains(string(e.do("p", "GET", statsPath("region", "eu-west-1", "gpu_type", "RTX_6000_PCI"), "", 200, nil)), `"stats":[]`) {
		t.Fatal("an empty result is not an empty JSON array")
	}
}

func equalStats(a, b apiv1.PreemptionStatsList) bool {
	if !a.From.Equal(b.From) || !a.To.Equal(b.To) || len(a.Stats) != len(b.Stats) {
		return false
	}
	for i := range a.Stats {
		if a.Stats[i] != b.Stats[i] {
			return false
		}
	}
	return true
}

// TestPreemptionStatsDeadline runs the reclaim with pods that ignore
// SIGTERM and have a grace period longer than the notice, so every drain
// reaches its deadline.
func TestPreemptionStatsDeadline(t *testing.T) {
	e := newEnv(t)
	fl, err := sim.New(sim.Config{Clock: e.clk, Pods: []sim.PodTemplate{{Name: "trainer", TerminationGracePeriod: time.Hour, ExitAfter: -1}}})
	if err != nil {
		t.Fatal(err)
	}
	// Same store and clock, a simulated fleet whose pods never exit. No
	// cluster exists yet, so nothing lives in the first simulator.
	e.ctrl = controller.New(e.st, fl, fl, e.clk, controller.Config{Cooldown: -1}, nil)
	srv := httptest.NewServer(New(e.st, e.ctrl, e.clk, clock.Real{}, nil))
	t.Cleanup(srv.Close)
	e.srv = srv

	_, _, t1 := e.reclaim()
	e.settle() // 200 s: the drains are still running
	mid := row(t, e.stats("p"), "us-central-2", "RTX_6000_PCI")
	if mid.Preemptions != 2 || mid.DrainsEndedEarly != 0 || mid.DrainsEndedAtDeadline != 0 || mid.EarlyShare != 0 {
		t.Fatalf("mid-drain: %+v", mid)
	}
	e.settle() // past the 5-minute deadline
	end := row(t, e.stats("p"), "us-central-2", "RTX_6000_PCI")
	if end.Preemptions != 2 || end.DrainsEndedEarly != 0 || end.DrainsEndedAtDeadline != 2 || end.EarlyShare != 0 {
		t.Fatalf("after the deadline: %+v", end)
	}
	// The drains ended after the notice: a window of just the notice
	// counts the preemptions but not the drains.
	notice := row(t, e.stats("p", "from", rfc(t1), "to", rfc(t1.Add(time.Minute))), "us-central-2", "RTX_6000_PCI")
	if notice.Preemptions != 2 || notice.DrainsEndedAtDeadline != 0 {
		t.Fatalf("notice window: %+v", notice)
	}
	later := row(t, e.stats("p", "from", rfc(t1.Add(time.Minute)), "to", rfc(e.clk.Now())), "us-central-2", "RTX_6000_PCI")
	if later.Preemptions != 0 || later.DrainsEndedAtDeadline != 2 {
		t.Fatalf("after the notice: %+v", later)
	}
}

func TestPreemptionStatsValidation(t *testing.T) {
	e := newEnv(t)
	now := e.clk.Now()
	day := 24 * time.Hour
	cases := []struct {
		name     string
		params   []string
		field    string
		contains string
	}{
		{"from not a time", []string{"from", "yesterday"}, "from", "RFC 3339"},
		{"to not a time", []string{"to", "1700000000"}, "to", "RFC 3339"},
		{"date without time", []string{"from", "2026-11-01"}, "from", "RFC 3339"},
		{"reversed", []string{"from", rfc(now), "to", rfc(now.Add(-time.Hour))}, "to", "must be before"},
		{"empty", []string{"from", rfc(now), "to", rfc(now)}, "to", "empty or reversed"},
		{"from in the future, to defaulted to now", []string{"from", rfc(now.Add(time.Hour))}, "from", "must be before"},
		{"too long", []string{"from", rfc(now.Add(-367 * day)), "to", rfc(now)}, "to", "366 days"},
		{"too long, to defaulted", []string{"from", rfc(now.Add(-400 * day))}, "from", "366 days"},
		{"unknown region", []string{"region", "mars-1"}, "region", "eu-west-1, us-central-2"},
		{"unknown gpu type", []string{"gpu_type", "TPU"}, "gpu_type", "L40S, RTX_6000_PCI"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := e.apiErr("p", "GET", statsPath(tc.params...), "", 400)
			if got.Code != apiv1.CodeInvalid || got.Field != tc.field || !strings.Contains(got.Message, tc.contains) {
				t.Fatalf("got %+v, want field %q and message containing %q", got, tc.field, tc.contains)
			}
		})
	}
	// Limits and formats that are fine.
	l := e.stats("p", "from", rfc(now.Add(-366*day)), "to", rfc(now))
	if !l.From.Equal(now.Add(-366 * day)) {
		t.Fatalf("366 days: %+v", l)
	}
	l = e.stats("p", "from", "2026-11-30T12:00:00.25+01:00")
	if want := time.Date(2026, 11, 30, 11, 0, 0, 250e6, time.UTC); !l.From.Equal(want) || l.From.Location() != time.UTC {
		t.Fatalf("offset and fraction: from %v, want %v in UTC", l.From, want)
	}
	l = e.stats("p", "to", rfc(now.Add(-day)))
	if !l.From.Equal(now.Add(-8 * day)) {
		t.Fatalf("from defaults to 7 days before to: %+v", l)
	}
	e.apiErr("", "GET", statsPath(), "", 401)
}
