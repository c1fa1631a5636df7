package simulate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/fleet"
)

// harmScenario is a fleet of two pools of machines each, whose
// preemptible tenants (four per pool, 128 GPUs each) run a mix of gangs
// of 2 to 16 nodes and single-node jobs checkpointing every 10 to 60
// minutes, and on-demand clusters (8 to 64 GPUs, 4 hours on average)
// arriving so that they hold about half of each pool.
func harmScenario(machines int, horizon time.Duration) Scenario {
	s := Scenario{Seed: 3, Horizon: Duration{horizon},
		Fleet: fleet.File{Pools: []fleet.Pool{
			{Region: "us-east-1", GPUType: "H100_SXM", Machines: machines},
			{Region: "eu-west-1", GPUType: "H100_SXM", Machines: machines},
		}, Prices: map[string]string{"H100_SXM": "2.99"}},
		OnDemand: OnDemand{ArrivalsPerHour: float64(2*machines*8) / 2 / 30 / 4, MeanLifetime: Duration{4 * time.Hour}, GPUs: []int{8, 16, 32, 64}},
		Tenants:  Tenants{Count: 4, TargetGPUs: 128},
		Jobs: Jobs{CheckpointCost: Duration{time.Minute}, RestartCost: Duration{5 * time.Minute}, ExitAfterNotice: Duration{20 * time.Second},
			Mix: []JobClass{
				{GangGPUs: 16, CheckpointInterval: Duration{10 * time.Minute}},
				{GangGPUs: 32, CheckpointInterval: Duration{20 * time.Minute}},
				{GangGPUs: 64, CheckpointInterval: Duration{30 * time.Minute}},
				{GangGPUs: 128, CheckpointInterval: Duration{60 * time.Minute}},
				{CheckpointInterval: Duration{10 * time.Minute}},
				{CheckpointInterval: Duration{30 * time.Minute}},
				{CheckpointInterval: Duration{60 * time.Minute}},
			}},
	}
	if err := s.Check(); err != nil {
		panic(err)
	}
	return s
}

// harmFigures are what a policy's victims cost the tenants and the
// on-demand requests.
type harmFigures struct {
	reclaims, stopped        int
	lostGPUh, restartGPUh    float64
	waited, refused          int
	waitP50, waitMax         time.Duration
	lostPerReclaimedGPU      float64
	stoppedPerReclaimed      float64
	deliveredGPUh, usefulGPU float64
}

func figuresOf(r *Result) harmFigures {
	var f harmFigures
	for _, t := range r.Tenants {
		f.reclaims += t.Reclaims
		f.stopped += t.StoppedNodes
		f.lostGPUh += t.LostGPUh
		f.restartGPUh += t.RestartGPUh
		f.deliveredGPUh += t.DeliveredGPUh
		f.usefulGPU += t.UsefulGPUh
	}
	f.waited, f.refused, f.waitP50, f.waitMax = r.Operator.WaitedForDrain, r.Operator.Refused, r.Operator.WaitP50.D, r.Operator.WaitMax.D
	if f.reclaims > 0 {
		f.lostPerReclaimedGPU = f.lostGPUh / float64(8*f.reclaims)
		f.stoppedPerReclaimed = float64(f.stopped) / float64(f.reclaims)
	}
	return f
}

func (f harmFigures) String() string {
	return fmt.Sprintf("%d reclaims stopped %d nodes (%.2f each), lost %.1f GPU-h (%.3f per reclaimed GPU), restarts %.1f GPU-h, useful %.1f of %.1f GPU-h; on demand: %d waited for a drain (p50 %s, max %s), %d refused",
		f.reclaims, f.stopped, f.stoppedPerReclaimed, f.lostGPUh, f.lostPerReclaimedGPU, f.restartGPUh, f.usefulGPU, f.deliveredGPUh, f.waited, f.waitP50, f.waitMax, f.refused)
}

// runVictims runs the demand evs of s under each choice of victims.
func runVictims(tb testing.TB, s Scenario, evs []Event) map[string]harmFigures {
	out := map[string]harmFigures{}
	for _, v := range []string{VictimsLeastHarm, VictimsIdleFirst, VictimsYoungest} {
		pol := s.Policy
		pol.Name, pol.Victims = v, v
		r, err := Run(context.Background(), s, evs, pol, nil)
		if err != nil {
			tb.Fatal(err)
		}
		out[v] = figuresOf(r)
		tb.Logf("%-10s %s", v, out[v])
	}
	return out
}

// TestLeastHarmLosesLessWork: on a day of a mix of gangs and
// single-node jobs, choosing victims by least harm loses less work and
// stops fewer nodes than idle-first alone, which loses less than
// youngest-first; on-demand requests wait no more often nor longer.
// (Every reclaim still takes one node for one needed: the allocator's
// property tests.) The month is BenchmarkLeastHarm's, in docs/perf.md.
func TestLeastHarmLosesLessWork(t *testing.T) {
	s := harmScenario(24, 24*time.Hour)
	got := runVictims(t, s, Generate(s))
	least, idle, young := got[VictimsLeastHarm], got[VictimsIdleFirst], got[VictimsYoungest]
	if least.reclaims == 0 || young.lostGPUh == 0 {
		t.Fatalf("the scenario reclaims nothing worth comparing: %v / %v", least, young)
	}
	if !(least.lostPerReclaimedGPU < idle.lostPerReclaimedGPU && idle.lostPerReclaimedGPU <= young.lostPerReclaimedGPU) {
		t.Errorf("lost GPU-h per reclaimed GPU: least harm %.3f, idle first %.3f, youngest first %.3f; want them in that order",
			least.lostPerReclaimedGPU, idle.lostPerReclaimedGPU, young.lostPerReclaimedGPU)
	}
	if least.stoppedPerReclaimed >= young.stoppedPerReclaimed {
		t.Errorf("least harm stopped %.2f nodes per reclaim, youngest first %.2f", least.stoppedPerReclaimed, young.stoppedPerReclaimed)
	}
	if least.waited > young.waited || least.waitMax > young.waitMax || least.refused > young.refused {
		t.Errorf("on-demand requests waited more under least harm: %v against %v", least, young)
	}
}

// BenchmarkLeastHarm runs a 30-day month of the mix under the three
// choices of victims and reports what each lost (docs/perf.md, "Least
// harm on a month").
func BenchmarkLeastHarm(b *testing.B) {
	s := harmScenario(48, 30*24*time.Hour)
	evs := Generate(s)
	for b.Loop() {
		got := runVictims(b, s, evs)
		for _, v := range []string{VictimsLeastHarm, VictimsIdleFirst, VictimsYoungest} {
			b.ReportMetric(got[v].lostPerReclaimedGPU, v+"-lost-gpuh/reclaimed-gpu")
		}
	}
}

// TestLeaseCostsOnDemandNothing: a minimum lease of 30 minutes on every
// pool keeps young nodes from fair-share moves, but standard demand may
// still take them when nothing else serves: on-demand requests are
// refused and wait as often as without it. The tenants' side is logged
// (docs/perf.md: on this mix they lose more work, the victims being
// older nodes).
func TestLeaseCostsOnDemandNothing(t *testing.T) {
	s := harmScenario(24, 24*time.Hour)
	evs := Generate(s)
	free, err := Run(context.Background(), s, evs, s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	leased := s.Policy
	leased.MinLease = &Duration{30 * time.Minute}
	held, err := Run(context.Background(), s, evs, leased, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := figuresOf(free), figuresOf(held)
	t.Logf("no lease:    %s", a)
	t.Logf("30 min lease: %s", b)
	if b.refused > a.refused || b.waited > a.waited || b.waitMax > a.waitMax {
		t.Errorf("on-demand requests fared worse with the lease: %v against %v", b, a)
	}
}
