package api

import "net/http"

// preemptionStats serves GET /v1/stats/preemptions.
func (s *Server) preemptionStats(w http.ResponseWriter, r *http.Request, p principal) {
	writeError(w, http.StatusNotImplemented, "unimplemented", "", "preemption statistics are not built yet")
}
