package storetest

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testUnmetSince: a cluster's UnmetSince, Weight and the queue's fields
// (MaxPreemptibleGPUs, RequestedPreemptibleGPUs) are written by create and
// update, one at a time and in bulk, read back by every read (the
// snapshot the allocator plans from included), and a zero UnmetSince (the
// target is met) stays zero.
func testUnmetSince(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Nanoseconds are truncated to the microsecond, like every time.
	since := at(10).Add(123456 * time.Nanosecond)
	want := since.Truncate(time.Microsecond)
	a := cluster("a", "p", at(1))
	a.UnmetSince, a.Weight = since, 7
	a.MaxPreemptibleGPUs, a.RequestedPreemptibleGPUs = 64, 24
	b := cluster("b", "p", at(2))
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: at(0)}); err != nil {
			return err
		}
		if err := tx.CreateCluster(ctx, a); err != nil {
			return err
		}
		return tx.CreateCluster(ctx, b)
	})
	a.UnmetSince = want
	got, err := s.GetCluster(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "created cluster", got, a)
	got, err = s.GetCluster(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if !got.UnmetSince.IsZero() {
		t.Fatalf("b was created met, UnmetSince is %v", got.UnmetSince)
	}

	// The controller sets it when a target becomes unmet and clears it
	// when it is met again, in the transaction that writes the status.
	a.UnmetSince, a.Unfulfilled = time.Time{}, domain.UnfulfilledNone
	a.RequestedPreemptibleGPUs = 0
	b.UnmetSince, b.Unfulfilled, b.Weight = at(20), domain.UnfulfilledFairShare, 1000
	b.MaxPreemptibleGPUs, b.RequestedPreemptibleGPUs = 32, 16
	update(t, s, func(tx store.Tx) error {
		if err := tx.UpdateCluster(ctx, a); err != nil {
			return err
		}
		return tx.UpdateCluster(ctx, b)
	})
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot clusters", snap.Clusters, []domain.Cluster{a, b})
	all, err := s.ListClusters(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "listed clusters", all, []domain.Cluster{a, b})

	// Read inside the writing transaction too.
	update(t, s, func(tx store.Tx) error {
		c, err := tx.GetCluster(ctx, "b")
		if err != nil {
			return err
		}
		wantEqual(t, "cluster read in a transaction", c, b)
		return nil
	})

	// The bulk writes of a plan's commit write them too.
	b.RequestedPreemptibleGPUs, a.MaxPreemptibleGPUs = 24, 8
	c := cluster("c", "p", at(3))
	c.MaxPreemptibleGPUs, c.RequestedPreemptibleGPUs = 40, 40
	update(t, s, func(tx store.Tx) error {
		if err := tx.UpdateClusters(ctx, []domain.Cluster{a, b}); err != nil {
			return err
		}
		return tx.CreateClusters(ctx, []domain.Cluster{c})
	})
	all, err = s.ListClusters(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "clusters written in bulk", all, []domain.Cluster{a, b, c})
}
