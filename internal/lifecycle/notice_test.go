package lifecycle

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

func TestStartDrainsAReadyNodeWithItsDeadlineItsCauseAndItsNotice(t *testing.T) {
	n := domain.Node{ID: "n-1", ClusterID: cluster, Name: "gpu-preemptible-dp-1", Class: domain.Preemptible, GPUs: 8,
		State: domain.NodeReady, ReadyAt: t0.Add(-time.Hour), Notified: true}
	deadline := t0.Add(window)
	st := Start(n, domain.CausePreempted, "idle", deadline, t0)
	got := st.Node
	if got.State != domain.NodeDraining || !got.Deadline.Equal(deadline) || got.DrainCause != domain.CausePreempted ||
		!got.DrainStartedAt.Equal(t0) || got.Notified {
		t.Fatalf("after T+0: %+v", got)
	}
	e := st.Event
	if e == nil || e.Reason != domain.ReasonPreemptionNotified || !e.Deadline.Equal(deadline) || !e.Timestamp.Equal(t0) ||
		e.NodeID != "n-1" || !strings.Contains(e.Message, "needed for standard nodes") ||
		!strings.HasSuffix(e.Message, "this node rather than another of the cluster: idle") {
		t.Fatalf("notice event %+v", e)
	}
	if o := st.Observation; o == nil || o.Kind != KindDrainStarted || !o.Time.Equal(t0) || !o.Deadline.Equal(deadline) || o.GPUs != 8 {
		t.Fatalf("observation %+v", o)
	}
	if n.State != domain.NodeReady {
		t.Fatal("Start changed the node it was given")
	}
}

func TestStartRemovesAPendingNodeAtOnceWithoutANotice(t *testing.T) {
	st := Start(domain.Node{ID: "n-1", State: domain.NodePending}, domain.CauseScaledDown, "", t0.Add(window), t0)
	if st.Node.State != domain.NodeRemoved || !st.Node.RemovedAt.Equal(t0) || st.Event != nil || st.Observation != nil {
		t.Fatalf("%+v", st)
	}
}

func TestStartGivesAProvisioningNodeTheFullNoticeButNoObservation(t *testing.T) {
	st := Start(domain.Node{ID: "n-1", State: domain.NodeProvisioning}, domain.CauseFairShare, "", t0.Add(window), t0)
	if st.Node.State != domain.NodeDraining || st.Event == nil || !strings.Contains(st.Event.Message, "fair share") || st.Observation != nil {
		t.Fatalf("%+v", st)
	}
}

func TestTheNoticeSaysWhetherTheTenantAskedForTheDrain(t *testing.T) {
	for cause, want := range map[domain.DrainCause]struct {
		reason  domain.EventReason
		warning bool
	}{
		domain.CausePreempted:      {domain.ReasonPreemptionNotified, true},
		domain.CauseFairShare:      {domain.ReasonPreemptionNotified, true},
		domain.CauseOutOfService:   {domain.ReasonPreemptionNotified, true},
		domain.CauseScaledDown:     {domain.ReasonScaledDown, false},
		domain.CauseClusterDeleted: {domain.ReasonScaledDown, false},
	} {
		st := Start(domain.Node{Name: "gpu-preemptible-dp-1", State: domain.NodeReady}, cause, "", t0.Add(window), t0)
		notice := clusterNotice(st.Node)
		if st.Event.Reason != want.reason || notice.Reason != string(want.reason) || notice.Warning != want.warning ||
			!strings.HasSuffix(notice.Message, "; deadline "+t0.Add(window).Format(time.RFC3339)) {
			t.Errorf("%s: event %+v, notice %+v", cause, st.Event, notice)
		}
	}
}
