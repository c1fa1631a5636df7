package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// RunMemory checks a store.Memory that newMemory makes over an empty
// database: after every Update of a random sequence, a watcher that
// followed from the start (and one from the middle) holds what the store
// lists, each heard of every commit once with its tag (Written.By) and of
// nothing else, and NodeNamed, ActiveOn and ClustersNamed answer as the
// listings do; and a watcher hears what each commit wrote, as stored.
func RunMemory(t *testing.T, newMemory func(t *testing.T) store.Memory) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, m store.Memory)
	}{
		{"Follow", testMemoryFollow},
		{"Written", testMemoryWritten},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := newMemory(t)
			t.Cleanup(func() {
				if err := m.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, m)
		})
	}
}

// memorySteps is how many Updates testMemoryFollow makes.
const memorySteps = 300

// testMemoryFollow: see RunMemory.
func testMemoryFollow(t *testing.T, m store.Memory) {
	ctx := t.Context()
	r := &memoryRun{t: t, m: m, rng: rand.New(rand.NewPCG(5, 11))}
	update(t, m, func(tx store.Tx) error {
		return errors.Join(tx.CreateProject(ctx, domain.Project{ID: "p1", CreatedAt: at(0)}),
			tx.CreateProject(ctx, domain.Project{ID: "p2", CreatedAt: at(0)}))
	})
	first, late := &mirror{}, &mirror{}
	if err := m.Watch(ctx, first); err != nil {
		t.Fatal(err)
	}
	lateFrom := 0
	for step := 1; step <= memorySteps; step++ {
		what := r.step(step)
		if step == memorySteps/2 {
			if err := m.Watch(ctx, late); err != nil {
				t.Fatal(err)
			}
			lateFrom = len(r.tags)
		}
		truth := r.truth()
		at := fmt.Sprintf("step %d (%s)", step, what)
		first.equal(t, at+": the watcher's", truth)
		sameRows(t, at+": the tags the watcher heard", first.by, r.tags)
		if lateFrom > 0 {
			late.equal(t, at+": the later watcher's", truth)
			sameRows(t, at+": the tags the later watcher heard", late.by, r.tags[lateFrom:])
		}
		r.checkSnapshot(at, truth)
		r.checkFinds(at, truth)
	}
}

// memoryRun is the state of testMemoryFollow: tags are the tags of the
// committed Updates so far, in commit order.
type memoryRun struct {
	t    *testing.T
	m    store.Memory
	rng  *rand.Rand
	seq  int
	tags []any
}

// Names are drawn from small pools, so that some are shared.
var (
	clusterNamePool = []string{"alpha", "beta", "gamma"}
	nodeNamePool    = []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4"}
)

var errMemoryRollback = errors.New("rolled back on purpose")

// step runs one random Update, tagged with step (but every fifth, which
// carries no tag), rolled back one time in eight, and returns what it did.
func (r *memoryRun) step(step int) string {
	ctx := r.t.Context()
	var tag any
	if step%5 != 0 {
		tag = step
		ctx = store.WithTag(ctx, tag)
	}
	rollback := r.rng.IntN(8) == 0
	w := r.read()
	var did []string
	err := r.m.Update(ctx, func(tx store.Tx) error {
		p := w.plan() // fn may run more than once
		did = did[:0]
		for range 1 + r.rng.IntN(4) {
			what, err := r.op(ctx, tx, p)
			did = append(did, what)
			if err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
		}
		if rollback {
			return errMemoryRollback
		}
		return nil
	})
	what := fmt.Sprint(did)
	switch {
	case rollback:
		wantErr(r.t, fmt.Sprintf("step %d %s: rollback", step, what), err, errMemoryRollback)
		what += ", rolled back"
	case err != nil:
		r.t.Fatalf("step %d %s: %v", step, what, err)
	default:
		r.tags = append(r.tags, tag)
	}
	return what
}

// id is a new ID: random, then a sequence number, so that the order by ID
// is not the order of creation.
func (r *memoryRun) id(prefix string) string {
	r.seq++
	return fmt.Sprintf("%s%03d-%04d", prefix, r.rng.IntN(1000), r.seq)
}

// memoryWorld is the committed world a step draws from.
type memoryWorld struct {
	machines []domain.Machine
	clusters []domain.Cluster // not fully deleted
	nodes    []domain.Node    // live
}

// read reads the committed world.
func (r *memoryRun) read() memoryWorld {
	s := r.truth()
	return memoryWorld{machines: s.Machines, clusters: s.Clusters, nodes: store.Values(s.Nodes)}
}

// truth is the snapshot's tables as the store lists them.
func (r *memoryRun) truth() store.Snapshot {
	ctx := r.t.Context()
	ms, err1 := r.m.ListMachines(ctx)
	rs, err2 := r.m.ListReservations(ctx)
	cs, err3 := r.m.ListClusters(ctx, "")
	ns, err4 := r.m.ListNodes(ctx, store.NodeFilter{})
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		r.t.Fatal(err)
	}
	return store.Snapshot{Machines: ms, Reservations: rs, Clusters: cs, Nodes: store.Pointers(ns)}
}

// memoryPlan is the world as a transaction changes it: the machines'
// claims (active and pending node by machine), the live nodes and the
// clusters not fully deleted.
type memoryPlan struct {
	active, pending          map[string]string
	machines, clusters, live []string
}

func (w memoryWorld) plan() *memoryPlan {
	p := &memoryPlan{active: map[string]string{}, pending: map[string]string{}}
	for _, n := range w.nodes {
		p.claim(n)
		p.live = append(p.live, n.ID)
	}
	for _, m := range w.machines {
		p.machines = append(p.machines, m.ID)
	}
	for _, c := range w.clusters {
		p.clusters = append(p.clusters, c.ID)
	}
	return p
}

// claim takes the claim n holds on its machine.
func (p *memoryPlan) claim(n domain.Node) {
	switch {
	case n.State.Active():
		p.active[n.MachineID] = n.ID
	case n.State == domain.NodePending:
		p.pending[n.MachineID] = n.ID
	}
}

// free drops the claim n held on its machine.
func (p *memoryPlan) free(n domain.Node) {
	switch {
	case n.State.Active():
		delete(p.active, n.MachineID)
	case n.State == domain.NodePending:
		delete(p.pending, n.MachineID)
	}
}

// checkSnapshot: the store's Snapshot is what it lists.
func (r *memoryRun) checkSnapshot(at string, truth store.Snapshot) {
	got, err := r.m.Snapshot(r.t.Context())
	if err != nil {
		r.t.Fatal(err)
	}
	if !slices.Equal(got.Machines, truth.Machines) || !slices.Equal(got.Reservations, truth.Reservations) ||
		!slices.Equal(store.Values(got.Nodes), store.Values(truth.Nodes)) {
		sameRows(r.t, at+": snapshot machines", got.Machines, truth.Machines)
		sameRows(r.t, at+": snapshot reservations", got.Reservations, truth.Reservations)
		sameRows(r.t, at+": snapshot nodes", store.Values(got.Nodes), store.Values(truth.Nodes))
	}
	sameRows(r.t, at+": snapshot clusters", got.Clusters, truth.Clusters)
}

// sameRows fails t unless got and want hold equal rows (nil and empty
// are the same).
func sameRows[T any](t *testing.T, what string, got, want []T) {
	if len(got) == len(want) && (len(got) == 0 || reflect.DeepEqual(got, want)) {
		return
	}
	t.Helper()
	wantEqual(t, what+": how many", len(got), len(want))
	for i := range want {
		wantEqual(t, fmt.Sprintf("%s: row %d", what, i), got[i], want[i])
	}
}

// checkFinds: NodeNamed, ActiveOn and ClustersNamed answer as the
// listings in truth do, for every name of the pools and every machine.
func (r *memoryRun) checkFinds(at string, truth store.Snapshot) {
	named := map[[2]string][]domain.Node{}
	active := map[string]domain.Node{}
	for _, n := range truth.Nodes {
		named[[2]string{n.ClusterID, n.Name}] = append(named[[2]string{n.ClusterID, n.Name}], *n)
		if n.State.Active() {
			active[n.MachineID] = *n
		}
	}
	for _, c := range truth.Clusters {
		for _, name := range nodeNamePool {
			want := named[[2]string{c.ID, name}]
			got, found, loaded := r.m.NodeNamed(c.ID, name)
			if !loaded || found != (len(want) > 0) ||
				(found && !slices.Contains(want, got)) {
				r.t.Fatalf("%s: node %q of cluster %s: %+v (found %v, loaded %v), want one of %+v", at, name, c.ID, got, found, loaded, want)
			}
		}
	}
	for _, m := range truth.Machines {
		want, ok := active[m.ID]
		got, found, loaded := r.m.ActiveOn(m.ID)
		if !loaded || found != ok || got != want {
			r.t.Fatalf("%s: active node of machine %s: %+v (found %v, loaded %v), want %+v (%v)", at, m.ID, got, found, loaded, want, ok)
		}
	}
	byID := func(a, b domain.Cluster) int { return cmp.Compare(a.ID, b.ID) }
	for _, project := range []string{"p1", "p2", "p3"} {
		for _, name := range clusterNamePool {
			var want []domain.Cluster
			for _, c := range truth.Clusters {
				if c.ProjectID == project && c.Name == name {
					want = append(want, c)
				}
			}
			got, loaded := r.m.ClustersNamed(project, name)
			slices.SortFunc(want, byID)
			slices.SortFunc(got, byID)
			if !loaded {
				r.t.Fatalf("%s: clusters %q of project %s: not loaded", at, name, project)
			}
			sameRows(r.t, fmt.Sprintf("%s: clusters %q of project %s", at, name, project), got, want)
		}
	}
}
