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
	list, err := s.statsOf(r, region, gpuType)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.CheckpointAdvice{Region: region, GPUType: gpuType, CheckpointSeconds: secs, From: list.From, To: list.To,
		Formula: "daly", RateBasis: "none"}
	if len(list.Stats) == 1 {
		st := list.Stats[0]
		out.Preemptions, out.PreemptibleNodeHours = st.Preemptions, st.PreemptibleNodeHours
		switch {
		case st.Preemptions > 0:
			out.RateBasis, out.PreemptionRatePercentPerHour = "measured", 100*st.PreemptionsPerNodeHour
		case st.PreemptibleNodeHours > 0:
			// None seen: assume at most one in the hours observed, not
			// "never", which would say never to checkpoint.
			out.RateBasis, out.PreemptionRatePercentPerHour = "upper_bound", 100/st.PreemptibleNodeHours
			out.Note = fmt.Sprintf("no preemption in %.1f preemptible node-hours: the rate assumes at most one", st.PreemptibleNodeHours)
		}
	}
	if out.RateBasis == "none" {
		out.Note = fmt.Sprintf("no preemptible node ran in %s %s between %s and %s: no rate to work from; choose an interval yourself",
			region, gpuType, list.From.Format(time.RFC3339), list.To.Format(time.RFC3339))
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
