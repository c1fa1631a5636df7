package simulate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/sparecap/sparecap/docs"
)

// warningTable runs the warning scenario of docs/planning.md once per
// checkpoint cost, and counts its tenants' jobs with and without the
// warning (the control plane does the same either way: only what the jobs
// do with preempt_at differs).
func warningTable(t *testing.T) (table string, less map[time.Duration]float64) {
	t.Helper()
	s := scenarioSnippet(t, "warning-scenario")
	less = map[time.Duration]float64{}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECKPOINT\tWARNING\tRECLAIMS\tTOLD AHEAD\tLOST GPU-H\tCHECKPOINT GPU-H\tUSEFUL GPU-H\tLOST")
	for _, cost := range []time.Duration{90 * time.Second, 8 * time.Minute} {
		s.Jobs.CheckpointCost.D = cost
		w, _ := runWorld(t, s)
		var lostWithout float64
		for _, ahead := range []bool{false, true} {
			sc := s
			sc.Jobs.CheckpointAhead = ahead
			r, err := outcome{st: w.st, sc: sc, pol: sc.Policy, evs: w.evs, refused: w.refused, told: w.told}.result(context.Background(), RunStats{})
			if err != nil {
				t.Fatal(err)
			}
			var sum Tenant
			for _, tn := range r.Tenants {
				sum.Reclaims += tn.Reclaims
				sum.ToldAhead += tn.ToldAhead
				sum.LostGPUh += tn.LostGPUh
				sum.CheckpointGPUh += tn.CheckpointGPUh
				sum.UsefulGPUh += tn.UsefulGPUh
			}
			change := "-"
			if ahead && lostWithout > 0 {
				less[cost] = 1 - sum.LostGPUh/lostWithout
				change = fmt.Sprintf("%.0f%% less", 100*less[cost])
			}
			lostWithout = sum.LostGPUh
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", cost, map[bool]string{false: "without", true: "with"}[ahead],
				sum.Reclaims, sum.ToldAhead, num(round(sum.LostGPUh)), num(round(sum.CheckpointGPUh)), num(round(sum.UsefulGPUh)), change)
		}
	}
	tw.Flush()
	return b.String(), less
}

// TestTheWarningInAMonth: the month of docs/planning.md whose on-demand
// clusters are booked ahead prints the table the docs show; with the
// warning, jobs whose checkpoint does not fit the drain window lose at
// least half less work.
func TestTheWarningInAMonth(t *testing.T) {
	got, less := warningTable(t)
	if less[8*time.Minute] < 0.5 {
		t.Errorf("with the warning, jobs whose checkpoint does not fit lose %.0f%% less work; the goal is at least 50%%", 100*less[8*time.Minute])
	}
	want, err := docs.Snippet("planning.md", "warning-table")
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("docs/planning.md's warning-table shows\n%s\nthe scenario prints\n%s", want, got)
	}
}

// BenchmarkMonthBooked is the month of 96,000 GPUs of docs/planning.md
// with every on-demand cluster booked 12 hours ahead: beside
// BenchmarkMonth, what the bookings' admission and claims cost the control
// plane at that size (-month.hours shortens both alike).
func BenchmarkMonthBooked(b *testing.B) {
	s := monthScenario(b)
	s.OnDemand.BookedAhead.D = 12 * time.Hour
	s.Horizon.D = time.Duration(*monthHours) * time.Hour
	runBench(b, s)
}
