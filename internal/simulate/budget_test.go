package simulate_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/store"
)

// monthScenario is January on a fleet whose on-demand demand comes and
// goes around a steady level, with a tenant's preemptible target filling
// what is left: a steady tenant, reclaims and all.
const monthScenario = `
seed: 5
horizon: 744h
fleet:
  pools:
    - {region: us-east-1, gpu_type: H100_SXM, machines: 12}
  prices:
    H100_SXM: "2.99"
on_demand:
  arrivals_per_hour: 0.5
  mean_lifetime: 8h
  gpus: [8, 16]
tenants:
  count: 1
  target_gpus: 48
policy:
  name: server
`

// TestForecastOfASimulatedMonth: on the simulator's January, the forecast
// made on day 10 from the days so far is within 10% of what the month
// cost.
func TestForecastOfASimulatedMonth(t *testing.T) {
	t.Parallel()
	sc, err := simulate.Parse([]byte(monthScenario))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := simulate.Epoch
	end := start.AddDate(0, 1, 0)
	var hours []billing.Money
	_, err = simulate.RunInspect(ctx, sc, simulate.Generate(sc), sc.Policy, func(st store.Store) error {
		prices, err := st.ListPrices(ctx)
		if err != nil {
			return err
		}
		book, err := billing.NewBook(prices)
		if err != nil {
			return err
		}
		hours, err = budget.Hourly(ctx, st, book, "", "", start, end)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	f := make([]float64, len(hours))
	var month float64
	for i, h := range hours {
		f[i], _ = h.Rat().Float64()
		month += f[i]
	}
	for _, day := range []int{10, 15, 20} {
		p := budget.Project(f[:day*24], start, end, start.Add(time.Duration(day)*24*time.Hour))
		if miss := math.Abs(p.Forecast-month) / month; miss > 0.10 || (day == 10 && !p.Interval) {
			t.Errorf("day %d: forecast $%.2f (%.2f to %.2f), the month cost $%.2f: %.1f%% off", day, p.Forecast, p.Low, p.High, month, 100*miss)
		}
		t.Logf("day %d: forecast $%.2f [%.2f, %.2f], month $%.2f", day, p.Forecast, p.Low, p.High, month)
	}
}
