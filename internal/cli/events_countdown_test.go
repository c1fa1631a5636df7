package cli

import (
	"context"
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
	var out, errb syncBuffer
	root := newRoot(testEnv(map[string]string{"SPARECAP_URL": f.srv.URL, "SPARECAP_CONFIG": t.TempDir() + "/x"}))
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"events", "--cluster", "c1", "--follow"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	until := time.After(10 * time.Second)
	for !strings.Contains(out.String(), "PreemptionNotified") {
		select {
		case err := <-done:
			t.Fatalf("command ended early: %v\n%s", err, errb.String())
		case <-until:
			t.Fatalf("the streamed event never printed:\n%s", out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	<-done
	if !strings.Contains(out.String(), "[deadline 2025-03-04T10:06:00Z (in 5m0s)]") {
		t.Errorf("countdown not from the event's time:\n%s", out.String())
	}
}
