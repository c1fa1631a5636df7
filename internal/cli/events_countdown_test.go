package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// TestFollowedDeadlineCountsFromTheEvent: a server run with --speed keeps
// a clock that runs ahead of the CLI's idea of it between responses, so a
// notice streamed a simulated minute after the stream began must not show
// a minute too much left: the countdown starts no earlier than the
// event's own time (here "in 5m0s", not "in 6m0s").
func TestFollowedDeadlineCountsFromTheEvent(t *testing.T) {
	f := newFakeAPI(t)
	f.mux.HandleFunc("GET /v1/clusters/c1/events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			writeJSON(w, 200, apiv1.EventList{NextCursor: "1", Events: []apiv1.Event{}})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		at := t0.Add(time.Minute)
		deadline := at.Add(5 * time.Minute)
		b, _ := json.Marshal(eventAt("2", "PreemptionNotified", "gpu-preemptible-dp-1", "reclaimed", at, &deadline))
		fmt.Fprintf(w, "id: 2\nevent: node_lifecycle_event\ndata: %s\n\n", b)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	out := f.follow(t, "PreemptionNotified", "events", "--cluster", "c1", "--follow")
	if !strings.Contains(out, "[deadline 2025-03-04T10:06:00Z (in 5m0s)]") {
		t.Errorf("countdown not from the event's time:\n%s", out)
	}
}
