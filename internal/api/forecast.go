package api

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/forecast"
)

// maxForecastHours is how far GET /v1/capacity/forecast looks: a week.
const maxForecastHours = 7 * 24

// capacityForecast serves GET /v1/capacity/forecast: for every pool of
// the fleet (?region= and ?gpu_type= narrow them), the lendable GPUs
// expected hour by hour over ?hours= (48 by default, at most 168) from
// the next hour, with a 90% interval, from the pool's last four weeks.
// Like the statistics, any caller may read it: it names no project.
func (s *Server) capacityForecast(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	hours := 48
	if v := q.Get("hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxForecastHours {
			s.fail(w, r, invalid("hours", "hours must be a whole number from 1 to %d; got %q", maxForecastHours, bound.Text(v, 32)))
			return
		}
		hours = n
	}
	now := s.clock.Now()
	machines, pools, hist, err := s.poolsHistory(r.Context(), now, func(ms []domain.Machine) ([][2]string, error) {
		return forecastPools(ms, q.Get("region"), q.Get("gpu_type"))
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bookings, err := s.bookings(r.Context(), now)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.CapacityForecast{At: now.UTC(), Pools: make([]apiv1.PoolForecast, 0, len(pools))}
	for _, pl := range pools {
		pf := poolForecast(hist[pl], machines, pl, now, hours)
		bookHours(&pf, bookings, machines, now)
		out.Pools = append(out.Pools, pf)
	}
	writeJSON(w, http.StatusOK, out)
}

// poolsHistory is the fleet's machines, the pools pick chooses of them,
// and every pool's lendable GPUs in the hours from historyStart(now) to
// now's hour (s.lendable).
func (s *Server) poolsHistory(ctx context.Context, now time.Time, pick func([]domain.Machine) ([][2]string, error)) ([]domain.Machine, [][2]string, map[[2]string][]float64, error) {
	machines, err := s.store.ListMachines(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	pools, err := pick(machines)
	if err != nil {
		return nil, nil, nil, err
	}
	hist, err := s.lendables.of(ctx, s.store, machines, now)
	return machines, pools, hist, err
}

// forecastPools are the fleet's pools (region, GPU type) that region and
// gpuType select (empty: any), in order; a name the fleet lacks is a 400.
func forecastPools(machines []domain.Machine, region, gpuType string) ([][2]string, error) {
	regions, types := map[string]bool{}, map[string]bool{}
	var pools [][2]string
	for _, m := range machines {
		regions[m.Region], types[m.GPUType] = true, true
		k := [2]string{m.Region, m.GPUType}
		if (region == "" || region == m.Region) && (gpuType == "" || gpuType == m.GPUType) && !slices.Contains(pools, k) {
			pools = append(pools, k)
		}
	}
	if region != "" && !regions[region] {
		return nil, invalid("region", "unknown region %q; the fleet has %s", echo(region), list(regions))
	}
	if gpuType != "" && !types[gpuType] {
		return nil, invalid("gpu_type", "unknown gpu_type %q; the fleet has %s", echo(gpuType), list(types))
	}
	slices.SortFunc(pools, func(a, b [2]string) int { return strings.Compare(a[0]+"\x00"+a[1], b[0]+"\x00"+b[1]) })
	return pools, nil
}

// poolForecast is pool's forecast of hours hours from the hour after now,
// from its lendable GPUs in the hours from historyStart(now) (hist).
func poolForecast(hist []float64, machines []domain.Machine, pool [2]string, now time.Time, hours int) apiv1.PoolForecast {
	pf := apiv1.PoolForecast{Region: pool[0], GPUType: pool[1], EnoughHistory: true}
	first := now // the pool's history starts with its first machine
	for _, m := range machines {
		if m.Region == pool[0] && m.GPUType == pool[1] {
			if !m.OutOfService {
				pf.CapacityGPUs += m.GPUs
			}
			first = earlier(first, m.CreatedAt)
		}
	}
	histStart := historyStart(now)
	if f := first.Truncate(time.Hour); f.After(histStart) {
		// Hours before the pool are no sample of it.
		hist = hist[min(int(f.Sub(histStart)/time.Hour), len(hist)):]
		histStart = f
	}
	start := now.Truncate(time.Hour).Add(time.Hour)
	short := 0
	for _, h := range forecast.Of(hist, histStart, start, hours) {
		if h.Samples < forecast.MinSamples {
			short++
		}
		pf.Hours = append(pf.Hours, apiv1.ForecastGPUs{Start: h.Start.UTC(), ExpectedGPUs: tenth(h.Expected),
			LowGPUs: tenth(h.Low), HighGPUs: tenth(h.High), Samples: h.Samples})
	}
	if short > 0 {
		pf.EnoughHistory = false
		pf.Note = "the pool has " + strconv.FormatFloat(max(now.Sub(first), 0).Hours()/24, 'f', 1, 64) +
			" days of history; " + strconv.Itoa(short) + " hours have less than the four weeks a 90% interval needs"
	}
	return pf
}

// historyStart is where the history a forecast made at now reads starts:
// its weeks back and the hours either side.
func historyStart(now time.Time) time.Time {
	back := time.Duration(forecast.Weeks)*7*24*time.Hour + forecast.Spread*time.Hour
	return now.Truncate(time.Hour).Add(-back)
}

func earlier(a, b time.Time) time.Time {
	if !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// tenth rounds to a tenth of a GPU.
func tenth(f float64) float64 { return math.Round(f*10) / 10 }
