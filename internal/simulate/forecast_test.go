package simulate_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/forecast"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/store"
)

// busyDemand is a preemptible tenant that wants the whole pool and
// on-demand clusters arriving at random (Poisson, 8 to 32 GPUs, two
// hours on average), three times as often in weekday working hours.
func busyDemand(seed uint64, horizon time.Duration) []simulate.Event {
	rng := rand.New(rand.NewPCG(seed, 7))
	evs := []simulate.Event{{At: 0, Cluster: "tenant", Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Preemptible, GPUs: 192}}
	var ends []simulate.Event
	for at, k := time.Duration(0), 0; at < horizon; k++ {
		rate := 1.0 // per hour
		if working(simulate.Epoch.Add(at)) {
			rate = 3
		}
		at += time.Duration(rng.ExpFloat64() / rate * float64(time.Hour)).Round(time.Second)
		name := fmt.Sprintf("od-%d", k)
		evs = append(evs, simulate.Event{At: at, Cluster: name, Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard, GPUs: 8 * (1 + rng.IntN(4))})
		life := time.Duration(rng.ExpFloat64() * 2 * float64(time.Hour)).Round(time.Second)
		ends = append(ends, simulate.Event{At: at + life, Cluster: name, Region: "us-east-1", GPUType: "H100_SXM", Class: domain.Standard})
	}
	return mergeByTime(evs, ends)
}

// mergeByTime is a and b in time order (each is).
func mergeByTime(a, b []simulate.Event) []simulate.Event {
	out := make([]simulate.Event, 0, len(a)+len(b))
	for len(a) > 0 || len(b) > 0 {
		if len(b) == 0 || (len(a) > 0 && a[0].At <= b[0].At) {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return out
}

// TestForecastFromASimulatedMonth: the capacity forecast made at the end
// of four simulated weeks from their history holds, for the fifth week,
// in at least 85% of the hours (its 90% interval against what the
// simulated control plane then lent out of).
func TestForecastFromASimulatedMonth(t *testing.T) {
	t.Parallel()
	// The week test's pool of 192 GPUs, for five weeks.
	sc, err := simulate.Parse([]byte(weekScenario))
	if err != nil {
		t.Fatal(err)
	}
	sc.Seed, sc.Horizon.D = 5, 5*7*24*time.Hour
	ctx := context.Background()
	cut := simulate.Epoch.Add(4 * 7 * 24 * time.Hour)
	end := simulate.Epoch.Add(sc.Horizon.D)
	var hs []forecast.Hour
	var actual []float64
	_, err = simulate.RunInspect(ctx, sc, busyDemand(5, sc.Horizon.D), sc.Policy, func(st store.Store) error {
		nodes, err := st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
		if err != nil {
			return err
		}
		machines, err := st.ListMachines(ctx)
		if err != nil {
			return err
		}
		// What was known at the cut: nodes created before it, none
		// removed after it.
		var known []domain.Node
		for _, n := range nodes {
			if n.CreatedAt.Before(cut) {
				if n.RemovedAt.After(cut) {
					n.RemovedAt = time.Time{}
				}
				known = append(known, n)
			}
		}
		hist := forecast.Lendable(known, machines, "us-east-1", "H100_SXM", simulate.Epoch, cut)
		hs = forecast.Of(hist, simulate.Epoch, cut, 168)
		actual = forecast.Lendable(nodes, machines, "us-east-1", "H100_SXM", cut, end)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := forecast.Coverage(hs, actual)
	var width float64
	for _, h := range hs {
		width += h.High - h.Low
	}
	t.Logf("the 90%% interval held in %.1f%% of the fifth week's hours; mean width %.0f GPUs of 192", 100*c, width/float64(len(hs)))
	if c < 0.85 {
		t.Errorf("the forecast's 90%% interval held in %.1f%% of the hours; want at least 85%%", 100*c)
	}
}
