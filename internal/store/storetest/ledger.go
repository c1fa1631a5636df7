package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testLostWork: ledger entries are written once per node (a second write
// changes nothing), listed oldest notice first, by project, cluster and
// window [From, To); a rolled-back write leaves none.
func testLostWork(t *testing.T, s store.Store) {
	ctx := t.Context()
	entry := func(node, cluster, project string, minute int, secs int64) domain.LostWork {
		return domain.LostWork{NodeID: node, NodeName: "gpu-preemptible-dp-1", ClusterID: cluster, ClusterName: "name-" + cluster,
			ProjectID: project, Region: "eu-1", GPUType: "H100", Class: domain.Preemptible, Cause: domain.CausePreempted,
			At: at(minute), GPUSeconds: secs, Job: "jobset/ml/train"}
	}
	a, b, c := entry("n1", "c1", "p1", 10, 3600), entry("n2", "c2", "p2", 5, 60), entry("n3", "c1", "p1", 30, 0)
	update(t, s, func(tx store.Tx) error { return tx.AddLostWork(ctx, []domain.LostWork{a, b, c}) })
	again := a
	again.GPUSeconds = 1
	update(t, s, func(tx store.Tx) error { return tx.AddLostWork(ctx, []domain.LostWork{again}) })
	list := func(f store.LostWorkFilter) []domain.LostWork {
		got, err := s.ListLostWork(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := list(store.LostWorkFilter{}); !reflect.DeepEqual(got, []domain.LostWork{b, a, c}) {
		t.Fatalf("all entries: %+v", got)
	}
	if got := list(store.LostWorkFilter{ProjectID: "p1"}); !reflect.DeepEqual(got, []domain.LostWork{a, c}) {
		t.Fatalf("p1's: %+v", got)
	}
	if got := list(store.LostWorkFilter{ClusterID: "c2"}); !reflect.DeepEqual(got, []domain.LostWork{b}) {
		t.Fatalf("c2's: %+v", got)
	}
	if got := list(store.LostWorkFilter{From: at(10), To: at(30)}); !reflect.DeepEqual(got, []domain.LostWork{a}) {
		t.Fatalf("[10, 30): %+v", got)
	}
	// A burst's entries in one call: several statements.
	var burst []domain.LostWork
	for i := range 130 {
		burst = append(burst, entry(fmt.Sprintf("b%03d", i), "c3", "p3", 40, int64(i)))
	}
	update(t, s, func(tx store.Tx) error { return tx.AddLostWork(ctx, burst) })
	if got := list(store.LostWorkFilter{ProjectID: "p3"}); !reflect.DeepEqual(got, burst) {
		t.Fatalf("a burst of %d entries: %d listed", len(burst), len(got))
	}
	// A checkpoint within the notice is recorded once; a node without an
	// entry records nothing.
	update(t, s, func(tx store.Tx) error { return tx.SaveLostWork(ctx, "n1", at(12)) })
	update(t, s, func(tx store.Tx) error { return tx.SaveLostWork(ctx, "n1", at(14)) })
	update(t, s, func(tx store.Tx) error { return tx.SaveLostWork(ctx, "nobody", at(14)) })
	a.SavedAt = at(12)
	if got := list(store.LostWorkFilter{ProjectID: "p1"}); !reflect.DeepEqual(got, []domain.LostWork{a, c}) {
		t.Fatalf("after a checkpoint within n1's notice: %+v", got)
	}
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.AddLostWork(ctx, []domain.LostWork{entry("n9", "c9", "p9", 1, 1)}); err != nil {
			return err
		}
		return errors.New("abort")
	})
	if err == nil || len(list(store.LostWorkFilter{ProjectID: "p9"})) != 0 {
		t.Fatalf("a rolled-back entry: %v", err)
	}
}
