package worklog

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)

// fleet is both the snapshot and the source: nodes and what they run.
type fleet struct {
	snap    store.Snapshot
	running map[string][]domain.Running // by node name; missing: unknown
}

func (f *fleet) Snapshot(context.Context) (store.Snapshot, error) { return f.snap, nil }
func (f *fleet) Running(_, node string) ([]domain.Running, bool) {
	r, ok := f.running[node]
	return r, ok
}

// failing fails its next fails Updates.
type failing struct {
	store.Store
	fails int
}

func (f *failing) Update(ctx context.Context, fn func(store.Tx) error) error {
	if f.fails > 0 {
		f.fails--
		return errors.New("database is down")
	}
	return f.Store.Update(ctx, fn)
}

func setup(t *testing.T) (*failing, *fleet, *clock.Fake) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fleet{running: map[string][]domain.Running{}}
	f.snap.Clusters = []domain.Cluster{{ID: "c1", ProjectID: "p1"}}
	for i := range 2 {
		f.snap.Nodes = append(f.snap.Nodes, &domain.Node{ID: fmt.Sprint("n", i), ClusterID: "c1", Name: fmt.Sprint("node-", i),
			GPUs: 8, ReadyAt: t0})
	}
	return &failing{Store: st}, f, clock.NewFake(t0.Add(time.Hour))
}

func spans(t *testing.T, st store.Store) []domain.WorkSpan {
	var out []domain.WorkSpan
	if err := st.ScanWorkSpans(t.Context(), store.WorkSpanFilter{}, func(w domain.WorkSpan) error {
		w.ID = 0
		out = append(out, w)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func pass(t *testing.T, r *Recorder) {
	t.Helper()
	if err := r.Pass(t.Context()); err != nil {
		t.Fatal(err)
	}
}

func TestSpansFollowTheWork(t *testing.T) {
	st, f, clk := setup(t)
	r := New(st, f, f, clk, nil)
	// Started before its node was ready: counted from ready. Unknown
	// start: from when first seen.
	f.running["node-0"] = []domain.Running{{Key: "a", Namespace: "ml", Job: "job/ml/x", GPUs: 4, Start: t0.Add(-time.Minute),
		Labels: map[string]string{"team": "vision"}}, {Key: "b", GPUs: 4}}
	f.running["node-1"] = nil
	pass(t, r)
	clk.Step(30 * time.Second)
	pass(t, r) // nothing new
	got := spans(t, st)
	if len(got) != 2 || !got[0].Start.Equal(t0) || !got[1].Start.Equal(t0.Add(time.Hour)) || !got[0].End.IsZero() ||
		got[0].ProjectID != "p1" || got[0].Labels["team"] != "vision" || got[0].GPUs != 4 {
		t.Fatalf("after two passes: %+v", got)
	}
	// b ends; node-1's driver cannot tell (its spans would stay open).
	f.running["node-0"] = f.running["node-0"][:1]
	delete(f.running, "node-1")
	clk.Step(30 * time.Second)
	pass(t, r)
	got = spans(t, st)
	if !got[0].End.IsZero() || !got[1].End.Equal(t0.Add(time.Hour+time.Minute)) {
		t.Fatalf("b's end: %+v", got)
	}

	// A restart reads the open span back: a pass neither repeats it nor
	// loses it, and its node leaving the fleet before the new process saw
	// it run ends it.
	r2 := New(st, f, f, clk, nil)
	clk.Step(30 * time.Second)
	pass(t, r2)
	if got := spans(t, st); len(got) != 2 || !got[0].End.IsZero() {
		t.Fatalf("after a restart: %+v", got)
	}
	r2 = New(st, f, f, clk, nil)
	f.snap.Nodes = f.snap.Nodes[1:]
	clk.Step(30 * time.Second)
	pass(t, r2)
	if got := spans(t, st); !got[0].End.Equal(clk.Now()) {
		t.Fatalf("a gone node's span: %+v", got)
	}
}

func TestAFailedWriteIsDoneAgain(t *testing.T) {
	st, f, clk := setup(t)
	r := New(st, f, f, clk, nil)
	f.running["node-0"] = []domain.Running{{Key: "a", GPUs: 8, Start: t0}}
	st.fails = 1
	if err := r.Pass(t.Context()); err == nil {
		t.Fatal("a failed write was not reported")
	}
	pass(t, r)
	f.running["node-0"] = nil
	st.fails = 1
	r.Pass(t.Context())
	clk.Step(time.Minute)
	pass(t, r)
	if got := spans(t, st); len(got) != 1 || !got[0].End.Equal(clk.Now()) {
		t.Fatalf("after failed writes: %+v", got)
	}
}

func TestATenantCannotGrowTheStore(t *testing.T) {
	st, f, clk := setup(t)
	r := New(st, f, f, clk, nil)
	var many []domain.Running
	for i := range MaxPerNode + 50 {
		many = append(many, domain.Running{Key: fmt.Sprintf("k%03d", i), GPUs: 1})
	}
	labels := map[string]string{}
	for i := range domain.MaxWorkLabels + 8 {
		labels[fmt.Sprintf("l%02d", i)] = "v"
	}
	many[0].Labels = labels
	f.running["node-0"] = many
	pass(t, r)
	got := spans(t, st)
	if len(got) != MaxPerNode || len(got[0].Labels) != domain.MaxWorkLabels {
		t.Fatalf("%d spans, %d labels kept", len(got), len(got[0].Labels))
	}
}

// TestProgressIsKept: a span keeps the most progress its job reported.
func TestProgressIsKept(t *testing.T) {
	st, f, clk := setup(t)
	r := New(st, f, f, clk, nil)
	report := func(p int64) {
		f.running["node-0"] = []domain.Running{{Key: "a", GPUs: 8, Start: t0, Progress: p}}
		clk.Step(30 * time.Second)
		pass(t, r)
	}
	report(0)
	report(5)
	report(3) // resumed from an older checkpoint: the span keeps 5
	if got := spans(t, st); len(got) != 1 || got[0].Progress != 5 {
		t.Fatalf("%+v", got)
	}
	report(9)
	if got := spans(t, st); got[0].Progress != 9 {
		t.Fatalf("%+v", got)
	}
}
