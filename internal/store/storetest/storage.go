package storetest

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testProjectStorage: a project's storage counts its spans' text (and
// StorageRowBytes a row), budgets and tokens, by table; a quota is kept
// and set; a project's spans of rolled months go on demand, and only
// those.
func testProjectStorage(t *testing.T, s store.Store) {
	ctx := t.Context()
	update(t, s, func(tx store.Tx) error {
		for _, p := range []domain.Project{{ID: "p1", CreatedAt: at(0)}, {ID: "p2", CreatedAt: at(1), StorageQuota: 5000}} {
			if err := tx.CreateProject(ctx, p); err != nil {
				return err
			}
		}
		w1 := domain.WorkSpan{ProjectID: "p1", ClusterID: "c1", NodeID: "n1", End: at(30), Running: domain.Running{Key: "k1", Namespace: "ml",
			Name: "train", Job: "job/ml/train", Account: "a", Labels: map[string]string{"team": "x"}, Start: at(10)}}
		w2 := domain.WorkSpan{ProjectID: "p1", ClusterID: "c1", NodeID: "n1", Running: domain.Running{Key: "k2", Start: at(20)}}
		if err := tx.AddWorkSpans(ctx, []domain.WorkSpan{w1, w2}); err != nil {
			return err
		}
		if err := tx.CreateBudget(ctx, domain.Budget{ID: "b1", ProjectID: "p2", Name: "all", Amount: "100", Thresholds: []int{50, 100}, CreatedAt: at(2)}); err != nil {
			return err
		}
		return tx.CreateToken(ctx, domain.Token{ID: "t1", Hash: "h1", ProjectID: "p1", Name: "ci", CreatedAt: at(3)})
	})
	row := int64(domain.StorageRowBytes)
	want := []domain.StorageUse{
		{ProjectID: "p1", Table: "tokens", Rows: 1, Bytes: row + 2},
		{ProjectID: "p1", Table: "work_spans", Rows: 2, Bytes: 2*row + int64(2+2+5+12+1+len(`{"team":"x"}`)) + 2},
		{ProjectID: "p2", Table: "budgets", Rows: 1, Bytes: row + int64(3+3+len("[50,100]"))},
	}
	got, err := s.ProjectStorage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("storage\n got %+v\nwant %+v", got, want)
	}
	update(t, s, func(tx store.Tx) error { return tx.SetStorageQuota(ctx, "p1", 1234) })
	for id, q := range map[string]int64{"p1": 1234, "p2": 5000} {
		if p, err := s.GetProject(ctx, id); err != nil || p.StorageQuota != q {
			t.Errorf("project %s: quota %d (%v), want %d", id, p.StorageQuota, err, q)
		}
	}
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SetStorageQuota(ctx, "nope", 1) }); !errors.Is(err, domain.ErrNotFound) {
		t.Errorf("quota of a project that is not: %v", err)
	}
	prune := func() (n int) {
		update(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneProjectSpans(ctx, "p1", 10); return err })
		return n
	}
	if n := prune(); n != 0 {
		t.Errorf("pruned %d spans with nothing rolled", n)
	}
	update(t, s, func(tx store.Tx) error { return tx.MarkRolled(ctx, at(0).Add(time.Hour)) })
	if n := prune(); n != 1 {
		t.Errorf("pruned %d spans, want the ended one", n)
	}
}
