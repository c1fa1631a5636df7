package quota

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// TestAProjectOverItsQuotaShedsItsRolledDetail: a project found over its
// quota by a count loses its raw spans of rolled months (its rollups keep
// them) and is counted again; its own quota overrides the default;
// writes are admitted while they fit, and counted; a project refused a
// write is told once.
func TestAProjectOverItsQuotaShedsItsRolledDetail(t *testing.T) {
	ctx := context.Background()
	st := memstore.New()
	err := st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []domain.Project{{ID: "big", CreatedAt: t0}, {ID: "small", CreatedAt: t0, StorageQuota: 100}} {
			if err := tx.CreateProject(ctx, p); err != nil {
				return err
			}
		}
		var ws []domain.WorkSpan
		for i := range 20 { // October's, then November's
			s := t0.AddDate(0, -1, 0).Add(time.Duration(i) * 24 * time.Hour)
			if i >= 10 {
				s = t0.Add(time.Duration(i) * time.Hour)
			}
			ws = append(ws, domain.WorkSpan{ProjectID: "big", ClusterID: "c", NodeID: fmt.Sprint("n", i), End: s.Add(time.Hour),
				Running: domain.Running{Key: "k", Start: s, Labels: map[string]string{"team": "vision"}}})
		}
		if err := tx.AddWorkSpans(ctx, ws); err != nil {
			return err
		}
		return tx.MarkRolled(ctx, t0) // October is rolled
	})
	if err != nil {
		t.Fatal(err)
	}
	one := SpanBytes(domain.WorkSpan{Running: domain.Running{Key: "k", Labels: map[string]string{"team": "vision"}}})
	var told []string
	k := &Keeper{Store: st, Default: 15 * one, Reached: func(_ context.Context, p string, _, _ int64) { told = append(told, p) }}
	if !k.Admit("big", 1<<40) {
		t.Fatal("a write before the first count was refused")
	}
	if err := k.Count(ctx, t0); err != nil {
		t.Fatal(err)
	}
	uses := k.Uses()
	if len(uses) != 2 || uses[0].Used != 10*one || uses[0].Quota != 15*one || uses[1].Quota != 100 {
		t.Fatalf("after the count: %+v (a span is %d bytes)", uses, one)
	}
	if len(told) != 0 {
		t.Errorf("told %v: shedding brought big under its quota", told)
	}
	n := 0
	st.ScanWorkSpans(ctx, store.WorkSpanFilter{}, func(domain.WorkSpan) error { n++; return nil })
	if n != 10 {
		t.Errorf("%d spans left, want November's 10", n)
	}
	for i, want := range []bool{true, true, true, true, true, false} {
		if got := k.Admit("big", one); got != want {
			t.Errorf("write %d: admitted %v, want %v", i, got, want)
		}
	}
	if k.Admit("small", 101) || !k.Admit("small", 100) {
		t.Error("the small project's own quota of 100 bytes does not bound it")
	}
	k.Tell(ctx)
	k.Tell(ctx)
	if len(told) != 2 || told[0] != "big" || told[1] != "small" {
		t.Errorf("told %v, want big and small once each (refused)", told)
	}
}
