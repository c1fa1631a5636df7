package api

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/stats"
	"github.com/sparecap/sparecap/internal/store"
)

const (
	// defaultStatsWindow is the window of GET /v1/stats/preemptions when
	// from is not given: the last 7 days up to to.
	defaultStatsWindow = 7 * 24 * time.Hour
	// maxStatsWindow bounds the window so one request cannot ask for
	// arbitrarily long history.
	maxStatsWindow = 366 * 24 * time.Hour
)

// preemptionStats serves GET /v1/stats/preemptions: interruption statistics
// of preemptible nodes per region and GPU type over [from, to) (see package
// stats for the definitions).
//
// Any authenticated caller may read them, project tokens included: they are
// fleet-wide aggregates per region and GPU type, like GET /v1/capacity, and
// name no project, cluster or node.
func (s *Server) preemptionStats(w http.ResponseWriter, r *http.Request, p principal) {
	list, err := s.statsOf(r, r.URL.Query().Get("region"), r.URL.Query().Get("gpu_type"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// statsOf works out the preemption statistics of the window ?from=,
// ?to= of r, for region and gpuType ("" for every one).
func (s *Server) statsOf(r *http.Request, region, gpuType string) (apiv1.PreemptionStatsList, error) {
	ctx := r.Context()
	q := r.URL.Query()
	now := s.clock.Now()
	from, to, err := statsWindow(q.Get("from"), q.Get("to"), now, defaultStatsWindow)
	if err != nil {
		return apiv1.PreemptionStatsList{}, err
	}
	machines, err := s.store.ListMachines(ctx)
	if err != nil {
		return apiv1.PreemptionStatsList{}, err
	}
	regions, types := map[string]bool{}, map[string]bool{}
	selected := machines[:0:0]
	for _, m := range machines {
		regions[m.Region], types[m.GPUType] = true, true
		if (region == "" || m.Region == region) && (gpuType == "" || m.GPUType == gpuType) {
			selected = append(selected, m)
		}
	}
	// A name the fleet does not have is more likely a typo than a question
	// whose answer is "nothing"; a known region without that GPU type
	// answers with an empty list.
	if region != "" && !regions[region] {
		return apiv1.PreemptionStatsList{}, invalid("region", "unknown region %q; the fleet has %s", echo(region), list(regions))
	}
	if gpuType != "" && !types[gpuType] {
		return apiv1.PreemptionStatsList{}, invalid("gpu_type", "unknown gpu_type %q; the fleet has %s", echo(gpuType), list(types))
	}
	nodes, err := s.store.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		return apiv1.PreemptionStatsList{}, err
	}
	preemptible := nodes[:0]
	for _, n := range nodes {
		if n.Class == domain.Preemptible {
			preemptible = append(preemptible, n)
		}
	}
	return apiv1.PreemptionStatsList{From: from.UTC(), To: to.UTC(),
		Stats: stats.Preemptions(preemptible, selected, from, to, now)}, nil
}

// weekWindow is the default window of GET /v1/stats/preemptions/week:
// four weeks, so each hour of the week is seen four times.
const weekWindow = 28 * 24 * time.Hour

// preemptionWeek serves GET /v1/stats/preemptions/week: one pool's
// interruption history by hour of the week and a forecast of the next
// hours (?ahead=, 24 by default, at most 168), over ?from= ?to= (the last
// four weeks by default). region and gpu_type name the pool. Like the
// other statistics, any caller may read it: it names no project.
func (s *Server) preemptionWeek(w http.ResponseWriter, r *http.Request, p principal) {
	q := r.URL.Query()
	region, gpuType := q.Get("region"), q.Get("gpu_type")
	ahead := 24
	if v := q.Get("ahead"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > stats.HoursPerWeek {
			s.fail(w, r, invalid("ahead", "ahead must be a whole number of hours from 0 to %d; got %q", stats.HoursPerWeek, bound.Text(v, 32)))
			return
		}
		ahead = n
	}
	now := s.clock.Now()
	from, to, err := statsWindow(q.Get("from"), q.Get("to"), now, weekWindow)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	machines, nodes, err := s.poolHistory(r, region, gpuType, from)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, stats.Week(nodes, machines, region, gpuType, from, to, now, ahead))
}

// poolHistory is the fleet's machines and the preemptible nodes not
// removed before since, after checking that region and gpu_type name a
// pool of the fleet.
func (s *Server) poolHistory(r *http.Request, region, gpuType string, since time.Time) ([]domain.Machine, []domain.Node, error) {
	ctx := r.Context()
	if region == "" || gpuType == "" {
		return nil, nil, invalid("region", "region and gpu_type name the pool: both are required")
	}
	machines, err := s.store.ListMachines(ctx)
	if err != nil {
		return nil, nil, err
	}
	pools := map[string]bool{}
	for _, m := range machines {
		pools[m.Region+" "+m.GPUType] = true
	}
	if !pools[region+" "+gpuType] {
		return nil, nil, invalid("gpu_type", "the fleet has no pool of %q in %q; it has %s", bound.Text(gpuType, 64), bound.Text(region, 64), list(pools))
	}
	nodes, err := s.store.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true, Class: domain.Preemptible, RemovedSince: since})
	if err != nil {
		return nil, nil, err
	}
	return machines, nodes, nil
}

// statsWindow parses ?from= and ?to= (RFC 3339). to defaults to now and
// from to def before to. The window must not be empty or reversed, nor
// longer than 366 days.
func statsWindow(fromText, toText string, now time.Time, def time.Duration) (from, to time.Time, err error) {
	to = now
	if toText != "" {
		if to, err = time.Parse(time.RFC3339, toText); err != nil {
			return from, to, invalid("to", "to must be an RFC 3339 time such as 2026-11-30T12:00:00Z; got %q", echo(toText))
		}
	}
	from = to.Add(-def)
	if fromText != "" {
		if from, err = time.Parse(time.RFC3339, fromText); err != nil {
			return from, to, invalid("from", "from must be an RFC 3339 time such as 2026-11-23T12:00:00Z; got %q", echo(fromText))
		}
	}
	// Name the parameter the caller gave: with only from given, to is now.
	field := "to"
	if toText == "" {
		field = "from"
	}
	switch {
	case !from.Before(to):
		return from, to, invalid(field, "the window is empty or reversed: from (%s) must be before to (%s)", from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	case to.Sub(from) > maxStatsWindow:
		return from, to, invalid(field, "the window from %s to %s is longer than 366 days; ask for a shorter one", from.UTC().Format(time.RFC3339Nano), to.UTC().Format(time.RFC3339Nano))
	}
	return from, to, nil
}
