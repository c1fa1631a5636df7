package reclaim

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

func TestADrainWhoseNoticeIsNotOutRunsInTheNoticesPoolUntilItsDeadline(t *testing.T) {
	n := domain.Node{State: domain.NodeDraining, Deadline: t0.Add(window)}
	if d := When(n, time.Time{}, Retry{}); d.Pool != Notices || !d.Wake.Equal(n.Deadline) || !d.NotBefore.IsZero() {
		t.Fatalf("%+v", d)
	}
	n.Notified = true
	if d := When(n, time.Time{}, Retry{}); d.Pool != Workers || !d.Wake.Equal(n.Deadline) {
		t.Fatalf("notified: %+v", d)
	}
}

func TestARetryOfADrainNeverWaitsPastItsDeadline(t *testing.T) {
	n := domain.Node{State: domain.NodeDraining, Deadline: t0.Add(window)}
	r := Retry{FailedAt: t0.Add(window - time.Second), At: t0.Add(window + 4*time.Second)}
	if d := When(n, time.Time{}, r); !d.NotBefore.Equal(n.Deadline) {
		t.Fatalf("a retry planned past the deadline: not before %s, want the deadline", d.NotBefore)
	}
	r = Retry{FailedAt: t0, At: t0.Add(time.Second)}
	if d := When(n, time.Time{}, r); !d.NotBefore.Equal(r.At) {
		t.Fatalf("a retry before the deadline: not before %s, want %s", d.NotBefore, r.At)
	}
	// One that failed after the deadline waits its backoff.
	r = Retry{FailedAt: t0.Add(window + time.Second), At: t0.Add(window + 3*time.Second)}
	if d := When(n, time.Time{}, r); !d.NotBefore.Equal(r.At) {
		t.Fatalf("a retry after the deadline: not before %s", d.NotBefore)
	}
}

func TestAProvisioningNodeIsDueByItsRegistrationTimeoutAndCleanupByItsBackoff(t *testing.T) {
	reg := t0.Add(15 * time.Minute)
	if d := When(domain.Node{State: domain.NodeProvisioning}, reg, Retry{}); !d.Wake.Equal(reg) || d.Pool != Workers {
		t.Fatalf("%+v", d)
	}
	for _, s := range []domain.NodeState{domain.NodePending, domain.NodeRemoving} {
		if d := When(domain.Node{State: s}, reg, Retry{}); !d.Wake.IsZero() {
			t.Fatalf("%s: %+v", s, d)
		}
	}
	if d := WhenCleanup(Retry{At: t0}); !d.NotBefore.Equal(t0) || !d.Wake.IsZero() {
		t.Fatalf("cleanup: %+v", d)
	}
}
