package api

import (
	"cmp"
	"net/http"
	"slices"
	"strings"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/plan"
)

// planOptions serves GET /v1/plan/options: the job of GET /v1/plan's
// parameters planned in every pool of the fleet that ?regions= and
// ?gpu_types= allow (comma lists, as SkyPilot's any_of; empty: all), at
// each pool's measured rate and price, with the GPUs it is forecast to
// lend next hour, ranked (apiv1.PlanOptions). The Monte Carlo's runs are
// shared among the pools, so the answer costs what one plan does.
func (s *Server) planOptions(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	var base apiv1.Plan
	j, err := planJob(q, &base)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now()
	machines, pools, hist, err := s.poolsHistory(ctx, now, func(ms []domain.Machine) ([][2]string, error) {
		return anyOfPools(ms, q.Get("regions"), q.Get("gpu_types"))
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	release, ok := s.takePlanTurn(w, r, p)
	if !ok {
		return
	}
	defer release()
	out := apiv1.PlanOptions{GPUHours: j.GPUHours, GPUs: j.GPUs, DeadlineHours: j.Deadline.Hours(), Options: []apiv1.PlanOption{}}
	b, err := s.book(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var unpriced []string
	for _, pool := range pools {
		if _, ok := b.OnDemandRate(pool[0], pool[1], now.Unix()); !ok {
			unpriced = append(unpriced, pool[1]+" in "+pool[0])
			continue
		}
		o, err := s.planOption(r, base, j, pool, len(pools))
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if f := poolForecast(hist[pool], machines, pool, now, 1).Hours; len(f) == 1 {
			o.LendableGPUs, o.ForecastSamples = f[0].ExpectedGPUs, f[0].Samples
		}
		o.Fits = o.ForecastSamples == 0 || o.LendableGPUs >= float64(j.GPUs)
		out.Options = append(out.Options, o)
	}
	rankOptions(out.Options, j.Deadline > 0)
	if len(unpriced) > 0 {
		out.Note = "left out, having no on-demand price to plan a cost with: " + strings.Join(unpriced, ", ")
	}
	writeJSON(w, http.StatusOK, out)
}

// planOption is job j, as base says it, planned in pool with its share of
// the runs among n pools.
func (s *Server) planOption(r *http.Request, base apiv1.Plan, j plan.Job, pool [2]string, n int) (apiv1.PlanOption, error) {
	pl := base
	pl.Region, pl.GPUType = pool[0], pool[1]
	m, err := s.planMarket(r.Context(), r, &pl, "")
	if err != nil {
		return apiv1.PlanOption{}, err
	}
	if err := plan.Check(j, m); err != nil {
		return apiv1.PlanOption{}, invalid("plan", "%s in %s: %s", pool[1], pool[0], err.Error())
	}
	runs, err := plan.Runs(j, m)
	if err != nil {
		return apiv1.PlanOption{}, invalid("gpu_hours", "%s", err.Error())
	}
	plan.Make(j, m, max(runs/n, 50), plan.PoissonRuns(j, m, planSeed)).Fill(&pl)
	o := apiv1.PlanOption{Region: pool[0], GPUType: pool[1], OnDemandPerGPUHour: pl.OnDemandPerGPUHour,
		PreemptionRatePercentPerHour: pl.PreemptionRatePercentPerHour, Plan: pl}
	out := pl.Preemptible
	if d := pl.Deadline; d != nil {
		out = d.Plan
		meet := d.Plan.MeetProbability
		o.MeetProbability = &meet
	}
	o.ExpectedCost, o.ExpectedHours, o.P90Hours = out.ExpectedCost, out.ExpectedHours, out.P90Hours
	return o, nil
}

// maxOptions bounds the pools one question plans: each gets at least 50
// Monte Carlo runs, so a plan of heavy jobs over many pools would take
// many plans' time.
const maxOptions = 32

// anyOfPools are the fleet's pools in the regions and of the GPU types
// the comma lists name (empty: any), in order; a name the fleet lacks is
// a 400.
func anyOfPools(machines []domain.Machine, regions, types string) ([][2]string, error) {
	have := map[string]bool{}
	for _, m := range machines {
		have["r:"+m.Region], have["t:"+m.GPUType] = true, true
	}
	pick := func(list, kind, field string) (map[string]bool, error) {
		if list == "" {
			return nil, nil
		}
		names := strings.Split(list, ",")
		if len(names) > 64 {
			return nil, invalid(field, "%s names at most 64", field)
		}
		out := map[string]bool{}
		for _, n := range names {
			n = strings.TrimSpace(n)
			if !have[kind+n] {
				return nil, invalid(field, "the fleet has no %s %q", strings.TrimSuffix(field, "s"), echo(n))
			}
			out[n] = true
		}
		return out, nil
	}
	rs, err := pick(regions, "r:", "regions")
	if err != nil {
		return nil, err
	}
	ts, err := pick(types, "t:", "gpu_types")
	if err != nil {
		return nil, err
	}
	var pools [][2]string
	for _, pl := range mustPools(machines) {
		if (rs == nil || rs[pl[0]]) && (ts == nil || ts[pl[1]]) {
			pools = append(pools, pl)
		}
	}
	if len(pools) == 0 {
		return nil, invalid("gpu_types", "no pool of the fleet is of those GPU types in those regions")
	}
	if len(pools) > maxOptions {
		return nil, invalid("gpu_types", "%d pools match: name at most %d with regions or gpu_types (each is planned, within one plan's time)", len(pools), maxOptions)
	}
	return pools, nil
}

// mustPools are all the fleet's pools, in order.
func mustPools(machines []domain.Machine) [][2]string {
	pools, _ := forecastPools(machines, "", "")
	return pools
}

// rankOptions orders os best first (see apiv1.PlanOptions) and numbers
// them.
func rankOptions(os []apiv1.PlanOption, deadline bool) {
	slices.SortStableFunc(os, func(a, b apiv1.PlanOption) int {
		if a.Fits != b.Fits {
			if a.Fits {
				return -1
			}
			return 1
		}
		if deadline {
			ma, mb := *a.MeetProbability >= 0.99, *b.MeetProbability >= 0.99
			switch {
			case ma != mb && ma:
				return -1
			case ma != mb:
				return 1
			case !ma:
				if c := cmp.Compare(*b.MeetProbability, *a.MeetProbability); c != 0 {
					return c
				}
			}
		}
		if c := cmp.Compare(a.ExpectedCost, b.ExpectedCost); c != 0 {
			return c
		}
		return cmp.Compare(a.ExpectedHours, b.ExpectedHours)
	})
	for i := range os {
		os[i].Rank = i + 1
	}
}
