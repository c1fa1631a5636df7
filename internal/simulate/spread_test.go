package simulate

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"text/tabwriter"

	"github.com/sparecap/sparecap/docs"
)

// spreadSums are the tenants' sums of a run.
type spreadSums struct {
	tenants                              int
	delivered, lost, useful, cost, saved float64
	reclaims                             int
}

func sumTenants(t *testing.T, r *Result) spreadSums {
	t.Helper()
	var s spreadSums
	for _, tn := range r.Tenants {
		cost, err := strconv.ParseFloat(tn.Cost, 64)
		if err != nil {
			t.Fatal(err)
		}
		od, err := strconv.ParseFloat(tn.OnDemandCost, 64)
		if err != nil {
			t.Fatal(err)
		}
		s.tenants++
		s.delivered += tn.DeliveredGPUh
		s.lost += tn.LostGPUh
		s.useful += tn.UsefulGPUh
		s.cost += cost
		s.saved += od - cost
		s.reclaims += tn.Reclaims
	}
	return s
}

// TestSpreadOverThreeTypes: docs/planning.md's month of three GPU types
// run with every tenant on its own type and with its target spread over
// the three; the table there is what this prints. Spread, the tenants
// get more GPU-hours.
func TestSpreadOverThreeTypes(t *testing.T) {
	if testing.Short() {
		t.Skip("a simulated month, twice")
	}
	spread := scenarioSnippet(t, "spread-scenario")
	one := spread
	one.Tenants.PreemptibleGPUTypes = nil
	var sums []spreadSums
	for _, s := range []Scenario{one, spread} {
		r, err := Run(context.Background(), s, Generate(s), s.Policy, nil)
		if err != nil {
			t.Fatal(err)
		}
		sums = append(sums, sumTenants(t, r))
	}
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%d TENANTS, 32 GPUS EACH\tONE TYPE\tTHREE TYPES\n", sums[0].tenants)
	row := func(name string, f func(s spreadSums) string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", name, f(sums[0]), f(sums[1]))
	}
	f2 := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }
	row("Delivered GPU-hours", func(s spreadSums) string { return f2(s.delivered) })
	row("Reclaims", func(s spreadSums) string { return strconv.Itoa(s.reclaims) })
	row("Lost GPU-hours", func(s spreadSums) string { return f2(s.lost) })
	row("Useful GPU-hours", func(s spreadSums) string { return f2(s.useful) })
	row("Cost", func(s spreadSums) string { return f2(s.cost) })
	row("Cost per useful GPU-hour", func(s spreadSums) string { return strconv.FormatFloat(s.cost/s.useful, 'f', 3, 64) })
	row("Saved against on demand", func(s spreadSums) string { return f2(s.saved) })
	tw.Flush()
	want, err := docs.Snippet("planning.md", "spread-table")
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != want {
		t.Errorf("docs/planning.md's spread-table shows\n%s\nthe runs print\n%s", want, b.String())
	}
	if sums[1].delivered <= sums[0].delivered {
		t.Errorf("spread over three types the tenants got %.2f GPU-hours, on one %.2f", sums[1].delivered, sums[0].delivered)
	}
}
