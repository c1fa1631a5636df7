package simulate

import (
	"cmp"
	"context"
	"flag"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// monthScenario is the month of docs/planning.md, the very text users copy.
func monthScenario(t testing.TB) Scenario {
	t.Helper()
	return scenarioSnippet(t, "month-scenario")
}

// TestMonthOfTheDocs: the month of docs/planning.md is what its text says
// (96,000 GPUs, 2,000 tenants, a month), and its first hours run as it
// says the month does: no on-demand request refused or kept waiting for
// a drain, nothing reclaimed, every tenant at its target. The whole month
// is BenchmarkMonth.
func TestMonthOfTheDocs(t *testing.T) {
	s := monthScenario(t)
	gpus := 0
	for _, p := range s.Fleet.Pools {
		gpus += p.Machines * cmp.Or(p.GPUsPerMachine, domain.DefaultGPUsPerMachine)
	}
	if gpus != 96000 || s.Horizon.D != 720*time.Hour || s.Tenants.Count != 125 {
		t.Fatalf("%d GPUs, horizon %s, %d tenants per pool: not the month the docs describe", gpus, s.Horizon.D, s.Tenants.Count)
	}
	s.Horizon.D = 4 * time.Hour
	r, err := Run(context.Background(), s, Generate(s), s.Policy, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Tenants) != 2000 {
		t.Fatalf("%d tenants, want 2,000", len(r.Tenants))
	}
	op := r.Operator
	if op.Reclaims != 0 || op.Refused != 0 || op.WaitedForDrain != 0 {
		t.Fatalf("reclaims %d, refused %d, waited for a drain %d: the docs say none", op.Reclaims, op.Refused, op.WaitedForDrain)
	}
	for _, tn := range r.Tenants {
		if tn.TargetGPUs != 16 || tn.DeliveredGPUh < 16*3 {
			t.Fatalf("tenant %s got %.1f GPU-hours in 4 hours, target %d", tn.Cluster, tn.DeliveredGPUh, tn.TargetGPUs)
		}
	}
}

// monthHours shortens BenchmarkMonth and BenchmarkMonthBooked alike.
var monthHours = flag.Int("month.hours", 720, "hours of the month benchmarks (BenchmarkMonth, BenchmarkMonthBooked)")

// BenchmarkMonth runs the month of docs/planning.md.
func BenchmarkMonth(b *testing.B) {
	s := monthScenario(b)
	s.Horizon.D = time.Duration(*monthHours) * time.Hour
	runBench(b, s)
}
