package controller

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestDrainObservations: a drain is reported as started at T+0, noticed,
// and finished with its outcome, each with the node's drain details.
func TestDrainObservations(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	h.notes = nil
	zero := 0
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &zero}); err != nil {
		t.Fatal(err)
	}
	t1 := h.clk.Now()
	h.reconcile()
	h.advance(40 * time.Second)

	var steps []Observation
	for _, o := range h.notes {
		switch o.Kind {
		case KindEvent:
			if o.Reason == "" {
				t.Errorf("event observation without a reason: %+v", o)
			}
		case KindDrainStarted, KindNoticeDelivered, KindDrainFinished:
			if o.Reason != "" || o.Node != pre.Name || o.Cluster != "a" || o.Class != domain.Preemptible || o.GPUs != 8 ||
				o.Cause != domain.CauseScaledDown || !o.DrainStartedAt.Equal(t1) || !o.Deadline.Equal(t1.Add(domain.DefaultDrainWindow)) {
				t.Errorf("%s: %+v", o.Kind, o)
			}
			steps = append(steps, o)
		default:
			t.Errorf("observation of unknown kind: %+v", o)
		}
	}
	if len(steps) != 3 || steps[0].Kind != KindDrainStarted || steps[1].Kind != KindNoticeDelivered || steps[2].Kind != KindDrainFinished {
		t.Fatalf("steps %+v", steps)
	}
	if !steps[0].Time.Equal(t1) || !steps[1].Time.Equal(t1) {
		t.Errorf("T+0 steps at %v and %v, want %v", steps[0].Time, steps[1].Time, t1)
	}
	// The pods exit 30s after SIGTERM; the next pass sees them gone.
	if fin := steps[2]; fin.Outcome != domain.OutcomeEarly || fin.Time.Sub(fin.DrainStartedAt) != 30*time.Second {
		t.Errorf("finish %s after %v, want early after 30s", fin.Outcome, fin.Time.Sub(fin.DrainStartedAt))
	}
}

func TestObservers(t *testing.T) {
	var a, b []domain.EventReason
	f := Observers(func(o Observation) { a = append(a, o.Reason) }, nil, func(o Observation) { b = append(b, o.Reason) })
	f(Observation{Kind: KindEvent, Reason: domain.ReasonNodeAdded})
	if len(a) != 1 || len(b) != 1 || a[0] != domain.ReasonNodeAdded || b[0] != domain.ReasonNodeAdded {
		t.Fatalf("a %v, b %v", a, b)
	}
	Observers()(Observation{}) // none: a no-op
}
