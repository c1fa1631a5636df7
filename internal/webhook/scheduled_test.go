package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// A PreemptionScheduled message says when the notice comes as preempt_at,
// not as a deadline; a drain notice keeps its deadline.
func TestScheduledMessageSaysPreemptAt(t *testing.T) {
	at := time.Date(2026, 12, 8, 9, 0, 0, 0, time.UTC)
	c := domain.Cluster{ID: "c-1", ProjectID: "p", Type: domain.ClusterKubernetes}
	for _, tc := range []struct {
		reason             domain.EventReason
		preemptAt, deadine bool
	}{
		{domain.ReasonPreemptionScheduled, true, false},
		{domain.ReasonPreemptionNotified, false, true},
	} {
		m, err := eventMessage(domain.Event{ID: "ev-1", ClusterID: "c-1", NodeID: "n-1", NodeName: "x", Reason: tc.reason,
			Timestamp: at.Add(-time.Hour), Deadline: at}, c, nil, at)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Data struct {
				Deadline  *time.Time `json:"deadline"`
				PreemptAt *time.Time `json:"preempt_at"`
			} `json:"data"`
		}
		if err := json.Unmarshal(m.Body, &body); err != nil {
			t.Fatal(err)
		}
		if (body.Data.PreemptAt != nil) != tc.preemptAt || (body.Data.Deadline != nil) != tc.deadine ||
			(tc.preemptAt && !body.Data.PreemptAt.Equal(at)) {
			t.Errorf("%s: %s", tc.reason, m.Body)
		}
	}
}
