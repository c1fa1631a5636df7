package slurm_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestABookingAnnouncesOnSlurm, on a real Slurm: a cluster booked an
// hour ahead claims the preemptible node's machine; the Slurm node's
// Extra carries sparecap.dev/preempt-at with the notice's time at once.
// Moved to start in seconds, the Extra follows, and the notice comes at
// that time.
func TestABookingAnnouncesOnSlurm(t *testing.T) {
	const window = 6 * time.Second
	f := newFixture(t, fixtureConfig{machines: 2, window: window})
	f.createCluster("c1", 8, 8)
	f.waitNodes("c1", domain.Standard, domain.NodeReady, 1, 30*time.Second)
	pre := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	b, err := f.ctrl.CreateCluster(f.ctx, domain.Cluster{ID: "booked", Name: "booked", ProjectID: "p", Region: region, GPUType: gpu,
		Type: domain.ClusterSlurm, BillingType: domain.BillingOnDemand, NumGPUs: 8, StartsAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	wantExtra(t, f, pre.Name, b.ActiveAt)
	moved, err := f.ctrl.MoveBooking(f.ctx, "booked", time.Now().Add(window+10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if !moved.ActiveAt.After(time.Now()) {
		t.Fatalf("moved booking active at %s: its notice should still be ahead", moved.ActiveAt)
	}
	wantExtra(t, f, pre.Name, moved.ActiveAt)
	eventually(t, time.Until(moved.ActiveAt)+15*time.Second, func() error {
		if n := f.node(pre.ID); n.DrainStartedAt.IsZero() {
			return fmt.Errorf("node %s %s: no notice yet", n.Name, n.State)
		}
		return nil
	})
	if n := f.node(pre.ID); n.DrainStartedAt.Sub(moved.ActiveAt).Abs() > 2*time.Second {
		t.Errorf("notice at %s, announced for %s", n.DrainStartedAt, moved.ActiveAt)
	}
}

// wantExtra waits until the Slurm node's Extra says at as
// sparecap.dev/preempt-at.
func wantExtra(t *testing.T, f *fixture, node string, at time.Time) {
	t.Helper()
	want := at.UTC().Format(time.RFC3339)
	eventually(t, 20*time.Second, func() error {
		s, ok := nodeOf(t, f.env, node)
		var x map[string]string
		if !ok || json.Unmarshal([]byte(s.Extra), &x) != nil || x[domain.AnnotationPreemptAt] != want {
			return fmt.Errorf("node %s: extra %q, want %s=%s", node, s.Extra, domain.AnnotationPreemptAt, want)
		}
		return nil
	})
}
