package metering

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
)

// readSpy counts the node reads a meter makes.
type readSpy struct {
	store.Store
	gets, lists atomic.Int64
}

func (s *readSpy) GetNode(ctx context.Context, id string) (domain.Node, error) {
	s.gets.Add(1)
	return s.Store.GetNode(ctx, id)
}

func (s *readSpy) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	s.lists.Add(1)
	return s.Store.ListNodes(ctx, f)
}

// TestAPassMetersWhatChanged: a meter that follows the leader's copy and
// never rewrites running records (a simulation's) looks, at each pass,
// only at the nodes written since the last: a pass after nothing changed
// reads no node, and the records it writes are the ones a full cut
// writes.
func TestAPassMetersWhatChanged(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	cached := store.NewCached(memstore.New())
	cached.Enable()
	f, _ := fleet.Parse([]byte("pools: [{region: r, gpu_type: H100, machines: 2}]"))
	if _, err := fleet.Register(ctx, cached, f, t0); err != nil {
		t.Fatal(err)
	}
	cached.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "a", CreatedAt: t0}) })
	fl, _ := sim.New(sim.Config{Clock: clk, Pods: []sim.PodTemplate{{Name: "w", TerminationGracePeriod: time.Minute, ExitAfter: 10 * time.Second}}})
	ctrl := controller.New(cached, fl, fl, clk, controller.Config{Cooldown: -1, Instant: true}, nil)
	spy := &readSpy{Store: cached}
	m := New(spy, clk, nil)
	m.Reads, m.Refresh = cached, NoRefresh
	turn := func(d time.Duration) {
		t.Helper()
		for end := clk.Now().Add(d); clk.Now().Before(end); clk.Step(time.Second) {
			if _, err := ctrl.Turn(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	pass := func() {
		t.Helper()
		if err := m.Pass(ctx); err != nil {
			t.Fatal(err)
		}
	}
	pass() // the first pass lists everything, and follows from then on
	if _, err := ctrl.CreateCluster(ctx, domain.Cluster{ID: "c", Name: "c", ProjectID: "a", Region: "r", GPUType: "H100",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 16}); err != nil {
		t.Fatal(err)
	}
	turn(30 * time.Second)
	pass()
	recs, _ := cached.ListUsage(ctx, store.UsageFilter{})
	if len(recs) != 2 {
		t.Fatalf("%d records after two nodes became ready, want 2", len(recs))
	}
	spy.gets.Store(0)
	spy.lists.Store(0)
	turn(time.Minute)
	pass()
	if g, l := spy.gets.Load(), spy.lists.Load(); g != 0 || l != 0 {
		t.Fatalf("a pass after nothing changed read %d nodes and listed %d times", g, l)
	}
	// Deleted: both nodes stop, and the pass writes their final records,
	// those a full cut writes.
	if _, err := ctrl.DeleteCluster(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	turn(time.Minute)
	pass()
	got, _ := cached.ListUsage(ctx, store.UsageFilter{})
	if err := m.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	want, _ := cached.ListUsage(ctx, store.UsageFilter{})
	if len(got) != 2 || !got[0].Final || !got[1].Final || !reflect.DeepEqual(got, want) {
		t.Fatalf("after the nodes stopped: the pass wrote %+v, a cut %+v", got, want)
	}
}
