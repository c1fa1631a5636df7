package memstore_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

// TestSnapshotSame: Snapshot keeps store.Cached's contract. A table none
// of whose rows was written comes back as the same slice; a written one
// as a new slice, in which the written node is a new pointer and every
// other node the pointer it was; what an earlier Snapshot returned never
// changes; and an Update not committed yet, or rolled back, writes
// nothing.
func TestSnapshotSame(t *testing.T) {
	ctx := t.Context()
	s := memstore.New()
	if err := s.Update(ctx, seedSame); err != nil {
		t.Fatal(err)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		var ns []domain.Node
		for i := range 5 {
			ns = append(ns, domain.Node{ID: fmt.Sprint("n", i), ClusterID: "c0", MachineID: fmt.Sprint("m", i),
				State: domain.NodeReady, CreatedAt: t0})
		}
		return tx.CreateNodes(ctx, ns)
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := func() store.Snapshot {
		sn, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return sn
	}
	same := func(a, b store.Snapshot) [4]bool {
		return [4]bool{store.Same(a.Machines, b.Machines), store.Same(a.Reservations, b.Reservations),
			store.Same(a.Clusters, b.Clusters), store.Same(a.Nodes, b.Nodes)}
	}
	first := snap()
	kept := store.Values(first.Nodes)
	if got := same(first, snap()); got != [4]bool{true, true, true, true} {
		t.Fatalf("nothing written: same tables %v", got)
	}
	boom := errors.New("rolled back")
	_ = s.Update(ctx, func(tx store.Tx) error {
		n, _ := tx.GetNode(ctx, "n2")
		n.Notified = true
		_ = tx.UpdateNode(ctx, n)
		// Read while the write is not committed: as before it.
		if got := same(first, snap()); got != [4]bool{true, true, true, true} {
			t.Errorf("an Update not committed: same tables %v", got)
		}
		return boom
	})
	if got := same(first, snap()); got != [4]bool{true, true, true, true} {
		t.Fatalf("a rolled-back Update: same tables %v", got)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		n, err := tx.GetNode(ctx, "n2")
		if err != nil {
			return err
		}
		n.Notified = true
		return tx.UpdateNode(ctx, n)
	})
	if err != nil {
		t.Fatal(err)
	}
	second := snap()
	if got := same(first, second); got != [4]bool{true, true, true, false} {
		t.Fatalf("a node written: same tables %v, want all but the nodes", got)
	}
	for i, n := range second.Nodes {
		if (n == first.Nodes[i]) == (n.ID == "n2") {
			t.Errorf("node %s: the same pointer %v", n.ID, n == first.Nodes[i])
		}
	}
	if !second.Nodes[2].Notified || !reflect.DeepEqual(store.Values(first.Nodes), kept) {
		t.Fatal("the write changed what the first Snapshot returned, or is not in the second")
	}
}
