package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
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
	secs, err := strconv.ParseFloat(q.Get("checkpoint_seconds"), 64)
	if err != nil || !(secs > 0 && secs <= 86400) {
		s.fail(w, r, invalid("checkpoint_seconds", "checkpoint_seconds must be the seconds one checkpoint takes, above 0 and at most 86400; got %q", q.Get("checkpoint_seconds")))
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

// measuredRate reads the preemption rate of a region and GPU type over
// the statistics' window (the request's from and to, else the last 7
// days).
func (s *Server) measuredRate(r *http.Request, region, gpuType string) (rateOf, error) {
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
