package metering

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// world is a server's worth of parts over files in one directory, so a
// crash is: drop every part, open them again.
type world struct {
	t     *testing.T
	dir   string
	clk   *clock.Fake
	st    store.Store
	ctrl  *controller.Controller
	meter *Meter
	ids   *int
}

func open(t *testing.T, dir string, clk *clock.Fake, ids *int) *world {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	fl, err := sim.New(sim.Config{Clock: clk, StatePath: filepath.Join(dir, "sim.json"), Pods: []sim.PodTemplate{
		{Name: "w", TerminationGracePeriod: 10 * time.Minute, ExitAfter: 90 * time.Second},
	}})
	if err != nil {
		t.Fatal(err)
	}
	w := &world{t: t, dir: dir, clk: clk, st: st, ids: ids}
	w.ctrl = controller.New(st, fl, fl, clk, controller.Config{Cooldown: -1, Workers: 1}, nil) // one worker: steps in order, so runs repeat exactly
	w.ctrl.NewID = func(p string) string { *ids++; return fmt.Sprintf("%s%04d", p, *ids) }
	w.meter = New(st, clk, nil)
	// As on a server: clusters and machines from a snapshot, and the
	// background pass's lag short enough to matter in a 20-minute run.
	w.meter.Reads = st
	w.meter.Refresh = 2 * time.Minute
	return w
}

func (w *world) close() { w.st.Close() }

// scenario plays fill, reclaim, burst end over 20 minutes, crashing at
// the given steps (5-second steps). It returns the final usage records.
func scenario(t *testing.T, crashAt map[int]bool) []domain.UsageRecord {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	ids := 0
	w := open(t, dir, clk, &ids)
	f, _ := fleet.Parse([]byte("pools: [{region: r, gpu_type: H100, machines: 3}]\nprices: {H100: \"2.99\"}"))
	if _, err := fleet.Register(ctx, w.st, f, t0); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a", "b"} {
		w.st.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: t0}) })
	}
	create := func(id, project string, std, pre int) {
		_, err := w.ctrl.CreateCluster(ctx, domain.Cluster{ID: id, Name: id, ProjectID: project, Region: "r", GPUType: "H100",
			Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: std, DesiredPreemptibleGPUs: pre})
		if err != nil {
			t.Fatal(err)
		}
	}
	for step := 0; step < 240; step++ {
		switch step {
		case 0:
			create("train", "a", 8, 16)
		case 60:
			create("burst", "b", 16, 0)
		case 150:
			if _, err := w.ctrl.DeleteCluster(ctx, "burst"); err != nil {
				t.Fatal(err)
			}
		}
		if crashAt[step] {
			w.close()
			w = open(t, dir, clk, &ids)
		}
		if _, err := w.ctrl.Turn(ctx); err != nil {
			t.Fatal(err)
		}
		if step%12 == 0 || crashAt[step-1] { // every minute, and right after a restart
			// The background loop's pass: running records are left to lag.
			if err := w.meter.cut(ctx, false); err != nil {
				t.Fatal(err)
			}
		}
		clk.Step(5 * time.Second)
	}
	if err := w.meter.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := w.st.ListUsage(ctx, store.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	w.close()
	return recs
}

func invoice(t *testing.T, recs []domain.UsageRecord) billing.Totals {
	b, err := billing.NewBook([]domain.Price{{ID: "p", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.99"}})
	if err != nil {
		t.Fatal(err)
	}
	var tot billing.Totals
	b.Price(recs, t0, t0.Add(time.Hour), tot.Add)
	return tot
}

// TestCrashesNeitherLoseNorDoubleCount kills every part of the server at
// random moments of a run with reclaims; the invoice afterwards must equal
// that of the uninterrupted run, to the exact amount.
func TestCrashesNeitherLoseNorDoubleCount(t *testing.T) {
	clean := scenario(t, nil)
	want := invoice(t, clean)
	if want.Amount.IsZero() || len(clean) < 5 {
		t.Fatalf("the scenario billed nothing: %+v", clean)
	}
	var pre, std int
	for _, r := range clean {
		if !r.Final {
			continue
		}
		if r.Class == domain.Preemptible {
			pre++
		} else {
			std++
		}
	}
	if pre < 2 || std < 2 {
		t.Fatalf("scenario should end preemptible and standard nodes: %d %d", pre, std)
	}
	rnd := rand.New(rand.NewPCG(7, 11))
	for run := 0; run < 4; run++ {
		crashes := map[int]bool{}
		for i := 0; i < 6; i++ {
			crashes[1+rnd.IntN(238)] = true
		}
		got := invoice(t, scenario(t, crashes))
		if got != want {
			t.Fatalf("crashes at %v: invoice %+v, uninterrupted %+v", crashes, got, want)
		}
	}
}

// TestReclaimedNodeStopsAtNotice checks the stop points on a real run:
// train's preemptible nodes reclaimed by the burst stop billing at T+0,
// the burst's standard nodes when they are removed.
func TestReclaimedNodeStopsAtNotice(t *testing.T) {
	recs := scenario(t, nil)
	burstAt := t0.Add(60 * 5 * time.Second)
	for _, r := range recs {
		switch {
		case r.ClusterID == "train" && r.Class == domain.Preemptible && r.Final && r.Start.Before(burstAt):
			if !r.End.Equal(burstAt) {
				t.Errorf("reclaimed preemptible %s billed until %v, want the notice at %v", r.NodeName, r.End, burstAt)
			}
		case r.ClusterID == "burst":
			if !r.Final || !r.End.After(t0.Add(150*5*time.Second)) {
				t.Errorf("burst node %s billed until %v, want its removal after the delete", r.NodeName, r.End)
			}
		}
	}
}

func TestRunningNodeShowsWhileItRuns(t *testing.T) {
	ctx := context.Background()
	w, clk := oneNode(t)
	var billed float64
	w.meter.OnBilled = func(class string, s float64) { billed += s }
	for i := 0; i < 5; i++ {
		w.ctrl.Turn(ctx)
		clk.Step(30 * time.Second)
		w.meter.Cut(ctx)
	}
	recs, _ := w.st.ListUsage(ctx, store.UsageFilter{ProjectID: "a"})
	if len(recs) != 1 || recs[0].Final || recs[0].End.Sub(recs[0].Start) < time.Minute {
		t.Fatalf("running node's record: %+v", recs)
	}
	// Every metered GPU-second is reported once, from the node's start.
	if want := recs[0].End.Sub(recs[0].Start).Seconds() * 8; billed != want {
		t.Fatalf("reported %v GPU-seconds, metered %v", billed, want)
	}
	// A restarted meter picks up where the record ends: nothing again.
	m2 := New(w.st, clk, nil)
	var again float64
	m2.OnBilled = func(class string, s float64) { again += s }
	clk.Step(10 * time.Second)
	m2.Cut(ctx)
	if again != 80 {
		t.Fatalf("after a restart, reported %v GPU-seconds for 10 s of 8 GPUs", again)
	}
}

// TestConcurrentCuts: the background loop and usage queries cut at the
// same time; run with -race.
func TestConcurrentCuts(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	ids := 0
	w := open(t, t.TempDir(), clk, &ids)
	defer w.close()
	f, _ := fleet.Parse([]byte("pools: [{region: r, gpu_type: H100, machines: 2}]"))
	fleet.Register(ctx, w.st, f, t0)
	w.st.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "a", CreatedAt: t0}) })
	w.ctrl.CreateCluster(ctx, domain.Cluster{ID: "c", Name: "c", ProjectID: "a", Region: "r", GPUType: "H100",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 16})
	for i := 0; i < 6; i++ {
		w.ctrl.Turn(ctx)
		clk.Step(10 * time.Second)
	}
	w.meter.OnBilled = func(string, float64) {}
	done := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { done <- w.meter.Cut(ctx) }()
	}
	for i := 0; i < 4; i++ {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestBackgroundPassWritesWhatChanged: the loop's pass writes a record when
// its node becomes ready or stops, a running one only once it lags by
// Refresh; metrics hear of every second anyway, and Cut is exact.
func TestBackgroundPassWritesWhatChanged(t *testing.T) {
	ctx := context.Background()
	w, clk := oneNode(t)
	w.meter.Refresh = 5 * time.Minute
	var billed float64
	w.meter.OnBilled = func(class string, s float64) { billed += s }
	stored := func() domain.UsageRecord {
		t.Helper()
		recs, err := w.st.ListUsage(ctx, store.UsageFilter{ProjectID: "a"})
		if err != nil || len(recs) != 1 {
			t.Fatalf("usage records: %+v, %v; want one", recs, err)
		}
		return recs[0]
	}
	pass := func() {
		t.Helper()
		if err := w.meter.cut(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 10; i++ { // provisioning takes the simulated 20s
		w.ctrl.Turn(ctx)
		clk.Step(5 * time.Second)
	}
	pass()
	first := stored()
	if first.Final || !first.End.Equal(clk.Now().Truncate(time.Second)) {
		t.Fatalf("a node that just became ready: stored %+v at %v; want its record written at once", first, clk.Now())
	}
	clk.Step(4 * time.Minute)
	pass()
	if got := stored(); !got.End.Equal(first.End) {
		t.Errorf("4 minutes on, the pass rewrote the running record (end %v -> %v); Refresh is 5 minutes", first.End, got.End)
	}
	if want := 4 * 60 * 8.0; billed != want+first.End.Sub(first.Start).Seconds()*8 {
		t.Errorf("metrics heard of %v GPU-seconds; want every second metered, written or not", billed)
	}
	clk.Step(time.Minute)
	pass()
	if got := stored(); !got.End.Equal(clk.Now().Truncate(time.Second)) {
		t.Errorf("5 minutes on, the stored record ends %v; want it rewritten to %v", got.End, clk.Now())
	}
	clk.Step(30 * time.Second)
	if err := w.meter.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored(); !got.End.Equal(clk.Now().Truncate(time.Second)) {
		t.Errorf("after Cut the record ends %v; want now, %v", got.End, clk.Now())
	}
	// The node stops: the very next pass writes the final record.
	if _, err := w.ctrl.DeleteCluster(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 200; i++ { // its pod exits 90s after SIGTERM
		w.ctrl.Turn(ctx)
		if n, err := w.st.ListNodes(ctx, store.NodeFilter{ClusterID: "c"}); err == nil && len(n) == 0 {
			break
		}
		clk.Step(time.Second)
	}
	pass()
	if got := stored(); !got.Final {
		t.Errorf("the cluster's node was removed, yet the pass left its record open: %+v", got)
	}
}

// oneNode is a world of one machine and one cluster, c of project a, with
// one standard node to come; it closes with the test.
func oneNode(t *testing.T) (*world, *clock.Fake) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	ids := 0
	w := open(t, t.TempDir(), clk, &ids)
	t.Cleanup(w.close)
	f, _ := fleet.Parse([]byte("pools: [{region: r, gpu_type: H100, machines: 1}]"))
	fleet.Register(ctx, w.st, f, t0)
	w.st.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "a", CreatedAt: t0}) })
	if _, err := w.ctrl.CreateCluster(ctx, domain.Cluster{ID: "c", Name: "c", ProjectID: "a", Region: "r", GPUType: "H100",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 8}); err != nil {
		t.Fatal(err)
	}
	return w, clk
}

// TestLookupFollowsTheSnapshot: with the leader's in-memory copy as Reads,
// cuts reuse their lookup of clusters and machines while the copy is
// unchanged, and a machine written in between is seen at the next cut.
func TestLookupFollowsTheSnapshot(t *testing.T) {
	ctx := context.Background()
	w, clk := oneNode(t)
	cached := store.NewCached(w.st)
	cached.Enable()
	w.meter.Reads = cached
	w.ctrl.Turn(ctx)
	clk.Step(30 * time.Second)
	w.ctrl.Turn(ctx)
	reservation := func() string {
		t.Helper()
		if err := w.meter.Cut(ctx); err != nil {
			t.Fatal(err)
		}
		recs, _ := w.st.ListUsage(ctx, store.UsageFilter{ProjectID: "a"})
		if len(recs) != 1 {
			t.Fatalf("records: %+v", recs)
		}
		return recs[0].ReservationID
	}
	if got := reservation(); got != "" {
		t.Fatalf("reservation %q before the machine joined one", got)
	}
	before := w.meter.lookup.mByID
	clk.Step(time.Minute)
	reservation()
	if !sameMap(before, w.meter.lookup.mByID) {
		t.Fatal("the lookup was worked out again for an unchanged copy")
	}
	err := cached.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateReservation(ctx, domain.Reservation{ID: "r-1", ProjectID: "a", Region: "r", GPUType: "H100", CreatedAt: t0}); err != nil {
			return err
		}
		ms, err := tx.ListMachines(ctx)
		if err != nil {
			return err
		}
		ms[0].ReservationID = "r-1"
		return tx.UpdateMachine(ctx, ms[0])
	})
	if err != nil {
		t.Fatal(err)
	}
	clk.Step(time.Minute)
	if got := reservation(); got != "r-1" {
		t.Fatalf("reservation %q after the machine joined r-1", got)
	}
}

// sameMap: a and b are the same map, not equal ones.
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// listSpy records the filters of ListNodes.
type listSpy struct {
	store.Store
	filters []store.NodeFilter
}

func (s *listSpy) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	s.filters = append(s.filters, f)
	return s.Store.ListNodes(ctx, f)
}

// TestPassReadsReadyNodesFromTheCopy: with the leader's copy as Reads, a
// cut reads the ready nodes from it and asks the store only for the
// unmetered nodes no longer ready, so a settled fleet's pass reads
// nothing of the nodes table that grows with the fleet; records are as
// the store's full work list would give them.
func TestPassReadsReadyNodesFromTheCopy(t *testing.T) {
	ctx := context.Background()
	w, clk := oneNode(t)
	cached := store.NewCached(w.st)
	cached.Enable()
	spy := &listSpy{Store: w.st}
	w.meter.store, w.meter.Reads = spy, cached
	w.ctrl.Turn(ctx)
	clk.Step(30 * time.Second)
	w.ctrl.Turn(ctx)
	if err := w.meter.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := w.st.ListUsage(ctx, store.UsageFilter{ProjectID: "a"})
	if err != nil || len(recs) != 1 || recs[0].Final || !recs[0].End.Equal(clk.Now().Truncate(time.Second)) {
		t.Fatalf("the ready node's record: %v %+v", err, recs)
	}
	for _, f := range spy.filters {
		if !reflect.DeepEqual(f, store.NodeFilter{UnmeteredStopped: true}) {
			t.Fatalf("the cut listed nodes with %+v, want only the stopped unmetered ones", f)
		}
	}
	if len(spy.filters) != 1 {
		t.Fatalf("%d node lists in one cut, want 1", len(spy.filters))
	}
}
