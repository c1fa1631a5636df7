package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testWorkSpans: spans are written once per node, key and start, closed
// once, listed by node then start, by project, cluster, period (an open
// span reaches every later time) and openness; labels come back as
// written; a write that fails or rolls back leaves nothing.
func testWorkSpans(t *testing.T, s store.Store) {
	ctx := t.Context()
	span := func(node, key, cluster, project string, start int) domain.WorkSpan {
		return domain.WorkSpan{ProjectID: project, ClusterID: cluster, NodeID: node, Running: domain.Running{
			Key: key, Namespace: "ml", Name: "train-" + key, Job: "jobset/ml/train", Account: "acct",
			Labels: map[string]string{"team": "vision", "app": "x"}, GPUs: 4, Start: at(start)}}
	}
	a, b, c := span("n1", "u1", "c1", "p1", 10), span("n1", "u2", "c1", "p1", 5), span("n2", "u3", "c2", "p2", 20)
	c.Labels = nil
	update(t, s, func(tx store.Tx) error { return tx.AddWorkSpans(ctx, []domain.WorkSpan{a, b, c}) })
	again := a
	again.GPUs = 8
	update(t, s, func(tx store.Tx) error { return tx.AddWorkSpans(ctx, []domain.WorkSpan{again}) })
	b.Progress = 3
	update(t, s, func(tx store.Tx) error { return tx.SetWorkProgress(ctx, []domain.WorkSpan{b}) })
	endA := a
	endA.End = at(40)
	update(t, s, func(tx store.Tx) error { return tx.EndWorkSpans(ctx, []domain.WorkSpan{endA}) })
	later := endA
	later.End = at(50)
	update(t, s, func(tx store.Tx) error { return tx.EndWorkSpans(ctx, []domain.WorkSpan{later}) })

	list := func(f store.WorkSpanFilter) []domain.WorkSpan {
		var got []domain.WorkSpan
		if err := s.ScanWorkSpans(ctx, f, func(w domain.WorkSpan) error {
			if w.ID == 0 && f.Only == "" {
				t.Errorf("span %s has no ID", w.Key)
			}
			w.ID = 0
			got = append(got, w)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// In no particular order: by node then start here.
		slices.SortFunc(got, func(a, b domain.WorkSpan) int {
			return cmp.Or(strings.Compare(a.NodeID, b.NodeID), a.Start.Compare(b.Start))
		})
		return got
	}
	if got := list(store.WorkSpanFilter{}); !reflect.DeepEqual(got, []domain.WorkSpan{b, endA, c}) {
		t.Fatalf("all spans:\n got %+v\nwant %+v", got, []domain.WorkSpan{b, endA, c})
	}
	if got := list(store.WorkSpanFilter{ProjectID: "p2"}); !reflect.DeepEqual(got, []domain.WorkSpan{c}) {
		t.Fatalf("p2's: %+v", got)
	}
	if got := list(store.WorkSpanFilter{ClusterID: "c1", Open: true}); !reflect.DeepEqual(got, []domain.WorkSpan{b}) {
		t.Fatalf("c1's open: %+v", got)
	}
	// [40, 60): a ended at 40 (out), b and c are open (in).
	if got := list(store.WorkSpanFilter{From: at(40), To: at(60)}); !reflect.DeepEqual(got, []domain.WorkSpan{b, c}) {
		t.Fatalf("[40, 60): %+v", got)
	}
	// [0, 10): only b had started.
	if got := list(store.WorkSpanFilter{From: at(0), To: at(10)}); !reflect.DeepEqual(got, []domain.WorkSpan{b}) {
		t.Fatalf("[0, 10): %+v", got)
	}

	// One label read alone, whatever the others hold.
	tricky := span("n7", "u7", "c7", "p7", 1)
	tricky.Labels = map[string]string{"a": `x","team":"fake`, "team": "vi\"sion", "z": "team"}
	update(t, s, func(tx store.Tx) error { return tx.AddWorkSpans(ctx, []domain.WorkSpan{tricky}) })
	if got := list(store.WorkSpanFilter{ProjectID: "p7", Only: "label:team"}); len(got) != 1 ||
		!reflect.DeepEqual(got[0].Labels, map[string]string{"team": "vi\"sion"}) {
		t.Fatalf("the team label alone: %+v", got)
	}
	if got := list(store.WorkSpanFilter{ProjectID: "p7", Only: "label:nope"}); len(got) != 1 || got[0].Labels != nil {
		t.Fatalf("a label the span lacks: %+v", got)
	}
	want := domain.WorkSpan{ClusterID: "c7", NodeID: "n7", Running: domain.Running{Key: "u7", Namespace: "ml", GPUs: 4, Start: at(1)}}
	if got := list(store.WorkSpanFilter{ProjectID: "p7", Only: "namespace"}); len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("the namespace alone: %+v", got)
	}
	if err := s.ScanWorkSpans(ctx, store.WorkSpanFilter{Only: "name"}, func(domain.WorkSpan) error { return nil }); err == nil {
		t.Error("a scan of only a field it cannot read alone went on")
	}

	var burst []domain.WorkSpan
	for i := range 130 {
		burst = append(burst, span(fmt.Sprintf("b%03d", i), "k", "c3", "p3", 1))
	}
	update(t, s, func(tx store.Tx) error { return tx.AddWorkSpans(ctx, burst) })
	if got := list(store.WorkSpanFilter{ProjectID: "p3"}); len(got) != len(burst) {
		t.Fatalf("a burst of %d spans: %d listed", len(burst), len(got))
	}

	// A tenant's labels are bounded as they are stored, never refused: the
	// first domain.MaxWorkLabels by key, each cut to store.MaxText, within
	// the whole's bound.
	tooMany := span("n9", "u9", "c9", "p9", 1)
	tooMany.Labels = map[string]string{}
	for i := range domain.MaxWorkLabels + 1 {
		tooMany.Labels[fmt.Sprintf("k%02d", i)] = strings.Repeat("v", store.MaxText+100)
	}
	update(t, s, func(tx store.Tx) error { return tx.AddWorkSpans(ctx, []domain.WorkSpan{tooMany}) })
	got := list(store.WorkSpanFilter{ProjectID: "p9"})
	if len(got) != 1 || len(got[0].Labels) == 0 || len(got[0].Labels) > domain.MaxWorkLabels || got[0].Labels["k00"] == "" ||
		len(got[0].Labels["k00"]) > store.MaxText {
		t.Fatalf("a span with hostile labels: %d labels kept", len(got[0].Labels))
	}
	ok := span("n8", "u8", "c9", "p8", 1)
	err := s.Update(ctx, func(tx store.Tx) error {
		if err := tx.AddWorkSpans(ctx, []domain.WorkSpan{ok}); err != nil {
			return err
		}
		return errors.New("abort")
	})
	if err == nil {
		t.Fatal("abort was not returned")
	}
	if got := list(store.WorkSpanFilter{ProjectID: "p8"}); len(got) != 0 {
		t.Errorf("a rolled-back write left %+v", got)
	}
}
