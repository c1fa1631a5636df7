package simulate

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/plan"
)

// TestPlannerAgainstTheSimulator: the planner's formula, given the
// preemption rate the simulator measured, predicts within 10% the
// overhead the simulator's job model counted, at the seed's rates (0.8,
// 2.3 and 4.1 %/h). The demand: a tenant fills a pool of 24 machines with
// preemptible nodes, and short on-demand clusters of one node arrive as a
// Poisson process of the rate times the nodes, each reclaiming one node
// through the real control plane. The planner, like the formula it uses,
// takes an interruption to come at any point of a job's checkpoint cycle:
// the simulator is run with victims chosen youngest first, which knows
// nothing of the cycle. (Choosing by least harm, the control plane loses
// less than that: TestLeastHarmLosesLessWork.)
func TestPlannerAgainstTheSimulator(t *testing.T) {
	for _, rate := range []float64{0.8, 2.3, 4.1} {
		t.Run(fmt.Sprintf("%.1f%%/h", rate), func(t *testing.T) {
			const machines = 24
			// About 500 reclaims at each rate.
			horizon := time.Duration(500 / (rate / 100 * machines) * float64(time.Hour)).Round(time.Hour)
			s := Scenario{Seed: 1, Horizon: Duration{horizon},
				Fleet: fleet.File{Pools: []fleet.Pool{{Region: "r1", GPUType: "G", Machines: machines}}, Prices: map[string]string{"G": "2.00"}},
				Jobs: Jobs{CheckpointInterval: Duration{30 * time.Minute}, CheckpointCost: Duration{90 * time.Second},
					RestartCost: Duration{10 * time.Minute}, ExitAfterNotice: Duration{20 * time.Second}}}
			s.Policy.Victims = VictimsYoungest
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(uint64(rate*10), 7))
			evs := []Event{{Cluster: "train", Region: "r1", GPUType: "G", Class: domain.Preemptible, GPUs: 8 * machines}}
			perHour := rate / 100 * machines
			for at, k := time.Duration(0), 0; ; k++ {
				at += time.Duration(r.ExpFloat64() / perHour * float64(time.Hour)).Round(time.Second)
				if at > s.Horizon.D-time.Hour {
					break
				}
				name := fmt.Sprintf("burst-%d", k)
				evs = append(evs, Event{At: at, Cluster: name, Region: "r1", GPUType: "G", Class: domain.Standard, GPUs: 8},
					Event{At: at + 10*time.Minute, Cluster: name, Region: "r1", GPUType: "G", Class: domain.Standard})
			}
			sortEvents(evs)
			res, err := Run(context.Background(), s, evs, s.Policy, nil)
			if err != nil {
				t.Fatal(err)
			}
			tn := res.Tenants[0]
			measured := 100 * float64(tn.Reclaims) / (tn.DeliveredGPUh / 8)
			simulated := (tn.LostGPUh + tn.RestartGPUh + tn.CheckpointGPUh) / tn.UsefulGPUh
			e := plan.Expect(plan.Job{GPUHours: 1000, GPUs: 8, CheckpointCost: 90 * time.Second, RestartCost: 10 * time.Minute, Interval: 30 * time.Minute},
				plan.Market{RatePercentPerHour: measured, OnDemand: 2, Discount: 0.5, Window: 5 * time.Minute})
			t.Logf("%d reclaims in %.0f node-hours: %.3f %%/h measured; overhead simulated %.4f, planned %.4f (%+.1f%%)",
				tn.Reclaims, tn.DeliveredGPUh/8, measured, simulated, e.Overhead, 100*(e.Overhead/simulated-1))
			if math.Abs(measured/rate-1) > 0.25 {
				t.Errorf("the demand reclaimed at %.3f %%/h, not about %.1f", measured, rate)
			}
			if math.Abs(e.Overhead/simulated-1) > 0.10 {
				t.Errorf("planned overhead %.4f, simulated %.4f: more than 10%% apart", e.Overhead, simulated)
			}

		})
	}
}
