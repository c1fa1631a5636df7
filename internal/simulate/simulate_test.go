package simulate

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// scenario is the week of docs/planning.md, the very text users copy.
func scenario(t testing.TB) Scenario {
	t.Helper()
	return scenarioSnippet(t, "week-scenario")
}

// scenarioSnippet is the scenario of docs/planning.md's snippet name.
func scenarioSnippet(t testing.TB, name string) Scenario {
	t.Helper()
	data, err := docs.Snippet("planning.md", name)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Parse([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runWorld runs s's first policy and keeps its world for inspection.
func runWorld(t *testing.T, s Scenario) (*world, *Result) {
	t.Helper()
	ctx := context.Background()
	w, err := newWorld(ctx, s, s.Policy)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.st.Close() })
	if err := w.loop(ctx, Generate(s), nil); err != nil {
		t.Fatal(err)
	}
	r, err := w.result(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return w, r
}

// TestSameSeedSameBytes: a seed gives the same answer to the byte, and
// another seed another answer.
func TestSameSeedSameBytes(t *testing.T) {
	s := scenario(t)
	s.Horizon.D = 24 * time.Hour
	out := func(s Scenario) []byte {
		c, err := Compare(context.Background(), s, Generate(s), nil)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := c.WriteJSON(&b); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	a, b := out(s), out(s)
	if !bytes.Equal(a, b) {
		t.Fatalf("two runs of seed %d differ:\n%s\n%s", s.Seed, a, b)
	}
	s.Seed++
	if bytes.Equal(a, out(s)) {
		t.Errorf("seeds %d and %d gave the same answer", s.Seed-1, s.Seed)
	}
}

// TestConservation: no machine holds two nodes at once, so the fleet's
// GPU-hours are exactly standard + preemptible + in transit + idle, at
// every sample too; the bill is the priced usage the meter recorded, and
// that usage is the nodes' billable time (billing.Stop); no tenant got more than its
// target.
func TestConservation(t *testing.T) {
	s := scenario(t)
	w, r := runWorld(t, s)
	ctx := context.Background()
	nodes, err := w.st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		t.Fatal(err)
	}
	end := Epoch.Add(s.Horizon.D)
	byMachine := map[string][]span{}
	readyBy := map[string]int64{}
	for i := range nodes {
		sp := spanOf(&nodes[i], end)
		byMachine[nodes[i].MachineID] = append(byMachine[nodes[i].MachineID], sp)
		readyBy[nodes[i].ClusterID] += billable(nodes[i], end)
	}
	for m, sps := range byMachine {
		slices.SortFunc(sps, func(a, b span) int { return a.from.Compare(b.from) })
		for i := 1; i < len(sps); i++ {
			if sps[i].from.Before(sps[i-1].to) {
				t.Fatalf("machine %s holds %s from %s and %s until %s", m, sps[i].n.Name, sps[i].from, sps[i-1].n.Name, sps[i-1].to)
			}
		}
	}
	op := r.Operator
	if sum := op.StandardGPUh + op.PreemptibleGPUh + op.TransitGPUh + op.IdleGPUh; abs(sum-op.FleetGPUh) > 0.01 || op.IdleGPUh < 0 || op.TransitGPUh < 0 {
		t.Errorf("standard %g + preemptible %g + transit %g + idle %g = %g, fleet %g", op.StandardGPUh, op.PreemptibleGPUh, op.TransitGPUh, op.IdleGPUh, sum, op.FleetGPUh)
	}
	if op.PreemptibleGPUh == 0 || op.StandardGPUh == 0 || op.Reclaims == 0 {
		t.Fatalf("the scenario exercised nothing: %+v", op)
	}
	reclaims := 0
	for _, x := range r.Series {
		if x.Idle < 0 || x.Standard+x.Preemptible+x.Transit+x.Idle != 384 {
			t.Errorf("sample %+v does not add up to the 384 GPUs", x)
		}
		reclaims += x.Reclaims
	}
	if reclaims != op.Reclaims {
		t.Errorf("the series counts %d reclaims, the operator %d", reclaims, op.Reclaims)
	}
	p, err := outcome{st: w.st, sc: w.sc, pol: w.pol}.priced(ctx, end)
	if err != nil {
		t.Fatal(err)
	}
	for id, tot := range p.byCl {
		if tot.GPUSeconds != readyBy[id] {
			t.Errorf("cluster %s billed %d GPU-seconds, ready %d", id, tot.GPUSeconds, readyBy[id])
		}
	}
	for _, tn := range r.Tenants {
		if tn.DeliveredGPUh > float64(tn.TargetGPUs)*s.Horizon.D.Hours() {
			t.Errorf("%s got %g GPU-hours, more than its target's %g", tn.Cluster, tn.DeliveredGPUh, float64(tn.TargetGPUs)*s.Horizon.D.Hours())
		}
		if tn.UsefulGPUh > tn.DeliveredGPUh || tn.Reclaims == 0 {
			t.Errorf("tenant %+v", tn)
		}
	}
	var preCost, stdCost int64
	for _, n := range nodes {
		if n.Class == domain.Preemptible {
			preCost++
		} else {
			stdCost++
		}
	}
	if preCost == 0 || stdCost == 0 {
		t.Errorf("%d preemptible and %d standard nodes", preCost, stdCost)
	}
}

// billable is a node's billable GPU-seconds by billing's rule (Stop),
// whole seconds, within the horizon.
func billable(n domain.Node, end time.Time) int64 {
	stop, known, ok := billing.Stop(n)
	if !ok {
		return 0
	}
	if !known || stop.After(end) {
		stop = end
	}
	return (stop.Unix() - n.ReadyAt.Unix()) * int64(n.GPUs)
}

func abs(f float64) float64 {
	if f < 0 {
		return -f
	}
	return f
}

// TestWholeHorizonWithNoDemand: a fleet with nothing asked of it stays
// idle, and the run still covers the horizon.
func TestWholeHorizonWithNoDemand(t *testing.T) {
	s := scenario(t)
	s.Tenants.Count, s.OnDemand.ArrivalsPerHour = 0, 0
	_, r := runWorld(t, s)
	if r.Operator.IdleGPUh != r.Operator.FleetGPUh || len(r.Tenants) != 0 || r.Run.Nodes != 0 {
		t.Errorf("an idle fleet: %+v, %d tenants, %d nodes", r.Operator, len(r.Tenants), r.Run.Nodes)
	}
}

func TestCancel(t *testing.T) {
	s := scenario(t)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := Run(ctx, s, Generate(s), s.Policy, func(p Progress) {
		if p.Done > 24*time.Hour {
			cancel()
		}
	})
	if err == nil || ctx.Err() == nil {
		t.Fatalf("a cancelled run: %v", err)
	}
}

func TestPolicyErrors(t *testing.T) {
	for _, bad := range []string{
		`horizon: 0s`,
		`horizon: 9000h`,
		`horizon: 1h
bogus: 1`,
		`horizon: 1h
tenants: {count: 2, target_gpus: 7}`,
		`horizon: 1h
on_demand: {arrivals_per_hour: 1, gpus: [8]}`,
		`horizon: 1h
policy: {poll: 1ms}`,
		`horizon: 1h
compare: {drain_window: 48h}`,
		`horizon: 1h
jobs: {checkpoint_cost: -1s}`,
		`horizon: 1h
policy: {victims: random}`,
		`horizon: 1h
compare: {min_lease: 25h}`,
		`horizon: 1h
jobs: {mix: [{gang_gpus: 12, checkpoint_interval: 10m}]}`,
		`horizon: 1h
jobs: {mix: [{gang_gpus: 16, checkpoint_interval: -10m}]}`,
	} {
		data := []byte(bad + "\nfleet: {pools: [{region: r1, gpu_type: G, machines: 1}]}\n")
		if _, err := Parse(data); err == nil {
			t.Errorf("scenario %q accepted", bad)
		} else {
			t.Logf("%q: %v", bad, err)
		}
	}
	many := "horizon: 1h\nfleet: {pools: [" + strings.Repeat("{region: r1, gpu_type: G, machines: 100000},", 3) + "]}\n"
	if _, err := Parse([]byte(many)); err == nil || !strings.Contains(err.Error(), "more than the 250000") {
		t.Errorf("a fleet of 300,000 machines: %v", err)
	}
	var pools []string
	for i := range 51 {
		pools = append(pools, fmt.Sprintf("{region: r%d, gpu_type: G, machines: 1}", i))
	}
	spread := "horizon: 1h\ntenants: {count: 1000, target_gpus: 8}\nfleet: {pools: [" + strings.Join(pools, ", ") + "]}\n"
	if _, err := Parse([]byte(spread)); err == nil || !strings.Contains(err.Error(), "51000 clusters") {
		t.Errorf("51,000 tenant clusters: %v", err)
	}
	// A million GPUs with the month's 125 tenants per pool: 25,000.
	spread = "horizon: 1h\ntenants: {count: 500, target_gpus: 8}\nfleet: {pools: [" + strings.Join(pools[:50], ", ") + "]}\n"
	if _, err := Parse([]byte(spread)); err != nil {
		t.Errorf("25,000 tenant clusters: %v", err)
	}
	if _, err := Parse([]byte("horizon: 1h\n")); err == nil {
		t.Error("a scenario without a fleet was accepted")
	}
	_ = json.Valid
}

// TestPlanningDocsOutput: the table docs/planning.md shows is what its
// scenario prints.
func TestPlanningDocsOutput(t *testing.T) {
	checkDocsTable(t, "week-table", scenario(t))
}

// TestPlanningGangDocsOutput: the gang example of docs/planning.md is
// what the week's scenario prints with gangs of 32 GPUs.
func TestPlanningGangDocsOutput(t *testing.T) {
	s := scenario(t)
	s.Jobs.GangGPUs, s.Compare = 32, nil
	checkDocsTable(t, "gang-table", s)
}

// checkDocsTable: docs/planning.md's snippet is the table s prints.
func checkDocsTable(t *testing.T, snippet string, s Scenario) {
	t.Helper()
	want, err := docs.Snippet("planning.md", snippet)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Compare(context.Background(), s, Generate(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := c.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("docs/planning.md's %s shows\n%s\nthe scenario prints\n%s", snippet, want, b.String())
	}
}

// TestJobCompletions: with jobs of a size, each tenant's useful work runs
// them one after another: as many end as its useful work holds (work lost
// after a job ended is the next job's), none faster than on the target's
// GPUs on demand; with no reclaim each takes that time plus its
// checkpoints' share.
func TestJobCompletions(t *testing.T) {
	s := scenario(t)
	s.Jobs.GPUHours = 512
	s.Compare = nil
	_, r := runWorld(t, s)
	for _, tn := range r.Tenants {
		t.Logf("%s: %d jobs, mean %gh, p90 %gh, on demand %gh; useful %g GPU-h", tn.Cluster, tn.JobsCompleted, tn.JobHoursMean, tn.JobHoursP90, tn.JobHoursOnDemand, tn.UsefulGPUh)
		if float64(tn.JobsCompleted)*512 > tn.DeliveredGPUh-tn.CheckpointGPUh || float64(tn.JobsCompleted+1)*512 < tn.UsefulGPUh {
			t.Errorf("%s: %d jobs of 512 GPU-hours from %g useful GPU-hours", tn.Cluster, tn.JobsCompleted, tn.UsefulGPUh)
		}
		if tn.JobHoursOnDemand != 8 || tn.JobHoursMean < tn.JobHoursOnDemand || tn.JobHoursP90 < tn.JobHoursMean*0.5 {
			t.Errorf("%s: job times %+v", tn.Cluster, tn)
		}
	}
	s.OnDemand.ArrivalsPerHour, s.Horizon.D = 0, 48*time.Hour
	_, r = runWorld(t, s)
	// On the H100 pool each tenant gets its 64 GPUs: with 30-minute
	// checkpoints of 90 s, 512 GPU-hours take 8h24m. On the L40S pool
	// three targets of 64 share 128 GPUs: slower.
	for _, tn := range r.Tenants {
		full := tn.GPUType == "H100_SXM"
		if tn.Reclaims != 0 || full && (tn.JobsCompleted != 5 || math.Abs(tn.JobHoursP90-8.4) > 0.01) || !full && tn.JobHoursMean <= 8.4 {
			t.Errorf("without reclaims: %+v", tn)
		}
	}
}

// TestWeights: tenants' weights set their fair shares of spare capacity:
// two tenants asking for a whole pool, weighted 1 and 3, get a quarter and
// three quarters of what their standard nodes leave.
func TestWeights(t *testing.T) {
	s := scenario(t)
	// eu-west-1 L40S: 18 machines, 144 GPUs, of which the tenants' two
	// standard nodes hold 16: 128 to share.
	s.Fleet.Pools = s.Fleet.Pools[2:]
	s.Fleet.Pools[0].Machines = 18
	s.Tenants = Tenants{Count: 2, TargetGPUs: 128, Weights: []int{1, 3}}
	s.OnDemand.ArrivalsPerHour, s.Horizon.D, s.Compare = 0, 24*time.Hour, nil
	_, r := runWorld(t, s)
	if len(r.Tenants) != 2 || r.Tenants[0].Weight != 1 || r.Tenants[1].Weight != 3 {
		t.Fatalf("tenants %+v", r.Tenants)
	}
	if got := r.Tenants[1].DeliveredGPUh / r.Tenants[0].DeliveredGPUh; math.Abs(got-3) > 0.05 {
		t.Errorf("weights 1 and 3 got %g and %g GPU-hours (%.2fx)", r.Tenants[0].DeliveredGPUh, r.Tenants[1].DeliveredGPUh, got)
	}
	s.Tenants.Weights = []int{0}
	if err := s.Check(); err == nil {
		t.Error("a weight of 0 was accepted")
	}
}

// TestCSVNeutralisesFormulas: the names a scenario gives (a policy's, a
// pool's region) are written after a quote where a spreadsheet would run
// them as formulas.
func TestCSVNeutralisesFormulas(t *testing.T) {
	c := &Comparison{Runs: []*Result{{Policy: Policy{Name: "=cmd|' /C calc'!A0"},
		Tenants: []Tenant{{Cluster: "@tenant"}}, Pools: []PoolReclaims{{Region: "+r1", GPUType: "G"}}}}}
	var buf strings.Builder
	if err := c.WriteCSV(&buf); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(strings.NewReader(buf.String())).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows[1:] {
		for i, cell := range row[:3] {
			if cell != "" && strings.ContainsAny(cell[:1], "=+-@") {
				t.Errorf("row %q: cell %d %q would run as a formula", row, i, cell)
			}
		}
	}
	if !strings.Contains(buf.String(), "'=cmd") || !strings.Contains(buf.String(), "'@tenant") || !strings.Contains(buf.String(), "'+r1/G") {
		t.Errorf("names not kept after a quote:\n%s", buf.String())
	}
}
