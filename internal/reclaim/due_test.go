package reclaim

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

func TestADrainWhoseNoticeIsNotOutRunsInTheNoticesPoolUntilItsDeadline(t *testing.T) {
	m := New(nil, nil, nil, nil, Config{Poll: time.Second}, nil)
	n := domain.Node{State: domain.NodeDraining, Deadline: t0.Add(window)}
	if d := m.Due(n, t0); d.Pool != Notices || !d.By.Equal(n.Deadline) || !d.At.Equal(t0.Add(time.Second)) || d.Tag != TagDrain {
		t.Fatalf("%+v", d)
	}
	n.Notified = true
	if d := m.Due(n, t0); d.Pool != Workers || !d.By.Equal(n.Deadline) {
		t.Fatalf("notified: %+v", d)
	}
	// The poll never passes the deadline.
	if d := m.Due(n, n.Deadline.Add(-time.Millisecond)); !d.At.Equal(n.Deadline) {
		t.Fatalf("a second before the deadline: due %s, want the deadline", d.At)
	}
}

func TestARemovalPollsItsWipeAndOtherStatesAreNotReclaims(t *testing.T) {
	m := New(nil, nil, nil, nil, Config{Poll: time.Second}, nil)
	if d := m.Due(domain.Node{State: domain.NodeRemoving}, t0); !d.At.Equal(t0.Add(time.Second)) || !d.By.IsZero() || d.Pool != Workers {
		t.Fatalf("removing: %+v", d)
	}
	for _, s := range []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeReady, domain.NodeRemoved} {
		if d := m.Due(domain.Node{State: s}, t0); !d.At.IsZero() {
			t.Fatalf("%s: %+v", s, d)
		}
	}
}
