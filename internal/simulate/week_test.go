package simulate_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/stats"
	"github.com/sparecap/sparecap/internal/store"
)

// weekScenario is four weeks of one pool, all of it lent to a tenant but
// in weekday working hours, when on-demand clusters take it back an hour
// at a time.
const weekScenario = `
seed: 3
horizon: 672h
fleet:
  pools:
    - {region: us-east-1, gpu_type: H100_SXM, machines: 24}
  prices:
    H100_SXM: "2.99"
policy:
  name: server
`

// working is the known pattern: Monday to Friday, 09:00 to 17:00 UTC.
func working(t time.Time) bool {
	return t.Weekday() != time.Saturday && t.Weekday() != time.Sunday && t.Hour() >= 9 && t.Hour() < 17
}

// TestWeekFromASimulatedMonth: the preemptions per node-hour by hour of
// the week, worked out from four weeks of the simulated control plane's
// nodes, recover the demand's pattern: every working hour reclaims, no
// other hour does.
func TestWeekFromASimulatedMonth(t *testing.T) {
	t.Parallel()
	sc, err := simulate.Parse([]byte(weekScenario))
	if err != nil {
		t.Fatal(err)
	}
	// The tenant wants the whole pool; each working hour an on-demand
	// cluster of 16 GPUs arrives and stays until 17:00.
	evs := []simulate.Event{{At: 0, Cluster: "tenant", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Preemptible, GPUs: 192}}
	for d := range 28 {
		day := simulate.Epoch.AddDate(0, 0, d)
		if !working(day.Add(9 * time.Hour)) {
			continue
		}
		for h := 9; h < 17; h++ {
			evs = append(evs, simulate.Event{At: day.Add(time.Duration(h)*time.Hour + 5*time.Minute).Sub(simulate.Epoch),
				Cluster: fmt.Sprintf("od-%d-%d", d, h), Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard, GPUs: 16})
		}
		for h := 9; h < 17; h++ {
			evs = append(evs, simulate.Event{At: day.Add(17 * time.Hour).Sub(simulate.Epoch),
				Cluster: fmt.Sprintf("od-%d-%d", d, h), Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard})
		}
	}
	ctx := context.Background()
	end := simulate.Epoch.Add(28 * 24 * time.Hour)
	var w apiv1.WeekStats
	_, err = simulate.RunInspect(ctx, sc, evs, sc.Policy, func(st store.Store) error {
		nodes, err := st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
		if err != nil {
			return err
		}
		machines, err := st.ListMachines(ctx)
		if err != nil {
			return err
		}
		w = stats.Week(nodes, machines, "us-east-1", "H100_SXM", simulate.Epoch, end, end, 0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !w.EnoughHistory {
		t.Fatalf("four weeks of a pool: not enough history (%s)", w.Note)
	}
	monday := time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC) // hour of the week 0
	var workingHours, reclaimed int
	for _, h := range w.Hours {
		at := monday.Add(time.Duration(h.HourOfWeek) * time.Hour)
		if working(at) {
			workingHours++
			if h.Preemptions > 0 && h.RateLow > 0 {
				reclaimed++
			}
			continue
		}
		if h.Preemptions != 0 {
			t.Errorf("%s %02d:00, outside working hours: %d preemptions", at.Weekday(), at.Hour(), h.Preemptions)
		}
	}
	t.Logf("%d of the %d working hours of the week show reclaims with an interval above 0", reclaimed, workingHours)
	if reclaimed != workingHours {
		t.Errorf("%d of the %d working hours show reclaims; want all", reclaimed, workingHours)
	}
}
