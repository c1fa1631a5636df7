package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/stats"
	"github.com/sparecap/sparecap/pkg/preempt"
)

// checkpointAdvice serves GET /v1/advice/checkpoint: the checkpoint
// interval Daly's formula gives for the checkpoint cost the caller
// measured and the preemption rate measured in its region and GPU type.
// Like the statistics it comes from, any token may read it.
func (s *Server) checkpointAdvice(w http.ResponseWriter, r *http.Request, _ principal) {
	q := r.URL.Query()
	region, gpuType := q.Get("region"), q.Get("gpu_type")
	switch {
	case region == "":
		s.fail(w, r, invalid("region", "region is required"))
		return
	case gpuType == "":
		s.fail(w, r, invalid("gpu_type", "gpu_type is required"))
		return
	}
	if err := s.knownPool(r.Context(), region, gpuType); err != nil {
		s.fail(w, r, err)
		return
	}
	secs, err := strconv.ParseFloat(q.Get("checkpoint_seconds"), 64)
	if err != nil || !(secs > 0 && secs <= 86400) {
		s.fail(w, r, invalid("checkpoint_seconds", "checkpoint_seconds must be the seconds one checkpoint takes, above 0 and at most 86400; got %q", echo(q.Get("checkpoint_seconds"))))
		return
	}
	rate, err := s.measuredRate(r, region, gpuType)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.CheckpointAdvice{Region: region, GPUType: gpuType, CheckpointSeconds: secs, From: rate.from, To: rate.to,
		Formula: "daly", RateBasis: rate.basis, Preemptions: rate.preemptions, PreemptibleNodeHours: rate.nodeHours,
		PreemptionRatePercentPerHour: rate.percentPerHour, Note: rate.note}
	if out.RateBasis == "none" {
		writeJSON(w, http.StatusOK, out)
		return
	}
	cost := time.Duration(secs * float64(time.Second))
	mtbf := preempt.MTBF(out.PreemptionRatePercentPerHour)
	tau := preempt.Daly(cost, mtbf)
	e := preempt.Expect(tau, cost, mtbf)
	out.MTBFSeconds = mtbf.Seconds()
	out.RecommendedIntervalSeconds = tau.Seconds()
	out.YoungIntervalSeconds = preempt.Young(cost, mtbf).Seconds()
	out.ExpectedOverheadPercent = 100 * e.Overhead
	out.ExpectedLostSecondsPerPreemption = e.LostPerPreemption.Seconds()
	writeJSON(w, http.StatusOK, out)
}

// rateOf is a pool's preemption rate as the statistics measure it.
type rateOf struct {
	percentPerHour, nodeHours float64
	preemptions               int
	// basis: "measured"; "upper_bound" with no preemption seen (at most
	// one in the node-hours observed, not "never", which would say never
	// to checkpoint); "none" with no preemptible node-hours.
	basis, note string
	from, to    time.Time
}

// runRate is the rate of the hours a run will take (?run_start=, RFC 3339,
// default now; ?run_hours=, 1 to 168, default 24) from the pool's history
// by hour of the week over the last four weeks, when each of those hours
// has enough of it; else rate, saying why it stays.
func (s *Server) runRate(r *http.Request, region, gpuType string, rate rateOf) (rateOf, error) {
	q := r.URL.Query()
	now := s.clock.Now()
	start := now
	if v := q.Get("run_start"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return rate, invalid("run_start", "run_start must be an RFC 3339 time such as 2026-12-07T09:00:00Z; got %q", bound.Text(v, 64))
		}
		start = t
	}
	hours := 24
	if v := q.Get("run_hours"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > stats.HoursPerWeek {
			return rate, invalid("run_hours", "run_hours must be a whole number of hours from 1 to %d; got %q", stats.HoursPerWeek, bound.Text(v, 32))
		}
		hours = n
	}
	machines, nodes, err := s.poolHistory(r, region, gpuType, now.Add(-weekWindow))
	if err != nil {
		return rate, err
	}
	week := stats.Week(nodes, machines, region, gpuType, now.Add(-weekWindow), now, now, 0)
	per, enough := stats.RateOver(week, start, hours)
	if !enough {
		why := week.Note
		if why == "" {
			why = "some of its hours have too little service"
		}
		rate.note = strings.TrimPrefix(rate.note+"; ", "; ") + fmt.Sprintf("the run's hours have too little history by hour of the week (%s): the rate of the whole window is used", why)
		return rate, nil
	}
	// The measurement is the run's hours of the week over the window.
	out := rateOf{basis: "hour_of_week", from: week.From, to: week.To,
		note: fmt.Sprintf("the pool's rate in the %d hours from %s, by hour of the week over the last four weeks", hours, start.UTC().Format(time.RFC3339))}
	for i := range hours {
		h := week.Hours[stats.HourOfWeek(start.Add(time.Duration(i)*time.Hour))]
		out.nodeHours += h.NodeHours
		out.preemptions += h.Preemptions
	}
	if per <= 0 {
		per = 1 / out.nodeHours // none seen: at most one in their node-hours
		out.note += " (no preemption in them: at most one is assumed)"
	}
	out.percentPerHour = 100 * per
	return out, nil
}

// measuredRate reads the preemption rate of a region and GPU type over
// the statistics' window (the request's from and to, else the last 7
// days), or, when the request names the hours a run will take, of those
// hours of the week (runRate).
func (s *Server) measuredRate(r *http.Request, region, gpuType string) (rateOf, error) {
	rate, err := s.windowRate(r, region, gpuType)
	if q := r.URL.Query(); err == nil && (q.Has("run_start") || q.Has("run_hours")) {
		return s.runRate(r, region, gpuType, rate)
	}
	return rate, err
}

// windowRate is the rate over the statistics' window.
func (s *Server) windowRate(r *http.Request, region, gpuType string) (rateOf, error) {
	list, err := s.statsOf(r, region, gpuType)
	if err != nil {
		return rateOf{}, err
	}
	out := rateOf{basis: "none", from: list.From, to: list.To}
	if len(list.Stats) == 1 {
		st := list.Stats[0]
		out.preemptions, out.nodeHours = st.Preemptions, st.PreemptibleNodeHours
		switch {
		case st.Preemptions > 0:
			out.basis, out.percentPerHour = "measured", 100*st.PreemptionsPerNodeHour
		case st.PreemptibleNodeHours > 0:
			out.basis, out.percentPerHour = "upper_bound", 100/st.PreemptibleNodeHours
			out.note = fmt.Sprintf("no preemption in %.1f preemptible node-hours: the rate assumes at most one", st.PreemptibleNodeHours)
		}
	}
	if out.basis == "none" {
		out.note = fmt.Sprintf("no preemptible node ran in %s %s between %s and %s: no rate to work from; choose an interval yourself",
			region, gpuType, list.From.Format(time.RFC3339), list.To.Format(time.RFC3339))
	}
	return out, nil
}
