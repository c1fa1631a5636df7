package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// The benchmark fleet: benchMachines machines, each with a ready node,
// and benchRemoved removed nodes (not yet archived) spread over them, in
// benchClusters clusters: about 20,000 nodes.
const (
	benchMachines = 12_000
	benchRemoved  = 8_000
	benchClusters = 400
)

// benchStore is a store the benchmarks compare.
type benchStore struct {
	name string
	st   store.Store
}

// benchStores are the stores the benchmarks compare, each filled with
// the benchmark fleet.
func benchStores(b *testing.B) []benchStore {
	b.Helper()
	q, err := sqlite.Open(context.Background(), ":memory:")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { q.Close() })
	out := []benchStore{{"memstore", memstore.New()}, {"sqlite", q}}
	for _, s := range out {
		fill(b, s.st)
	}
	return out
}

// watchedStores are the stores of the simulator's commits, filled with
// the benchmark fleet and followed by a watcher: the leader's copy
// (store.Cached) over memstore, and memstore itself where it is a
// store.Memory.
func watchedStores(b *testing.B) []benchStore {
	b.Helper()
	ctx := context.Background()
	m := memstore.New()
	fill(b, m)
	c := store.NewCached(m)
	c.Enable()
	out := []benchStore{{"cached+watcher", c}}
	var st store.Store = memstore.New()
	if mem, ok := st.(store.Memory); ok {
		fill(b, mem)
		out = append(out, benchStore{"memstore+watcher", mem})
	}
	for _, s := range out {
		if err := s.st.(interface {
			Watch(context.Context, store.Watcher) error
		}).Watch(ctx, &counter{}); err != nil {
			b.Fatal(err)
		}
	}
	return out
}

// counter is a watcher that counts what it is told.
type counter struct{ loads, applied, resets int }

func (c *counter) Load(store.Snapshot) { c.loads++ }
func (c *counter) Apply(store.Written) { c.applied++ }
func (c *counter) Reset()              { c.resets++ }

func fill(b *testing.B, st store.Store) {
	ctx := context.Background()
	err := st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: t0}); err != nil {
			return err
		}
		for i := range benchClusters {
			if err := tx.CreateCluster(ctx, domain.Cluster{ID: fmt.Sprintf("c%03d", i), ProjectID: "p", CreatedAt: t0}); err != nil {
				return err
			}
		}
		var ns []domain.Node
		for i := range benchMachines {
			m := domain.Machine{ID: fmt.Sprintf("m%05d", i), Region: "eu-1", GPUType: "H100", GPUs: 8, CreatedAt: t0}
			if err := tx.CreateMachine(ctx, m); err != nil {
				return err
			}
			ns = append(ns, benchNode(i, m.ID, domain.NodeReady))
		}
		for i := range benchRemoved {
			ns = append(ns, benchNode(benchMachines+i, fmt.Sprintf("m%05d", i%benchMachines), domain.NodeRemoved))
		}
		if err := tx.CreateNodes(ctx, ns); err != nil {
			return err
		}
		es := make([]domain.Event, len(ns))
		for i, n := range ns {
			es[i] = domain.Event{ID: "e-" + n.ID, ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name,
				Reason: domain.ReasonNodeAdded, Timestamp: n.ReadyAt}
		}
		return tx.AddEvents(ctx, es)
	})
	if err != nil {
		b.Fatal(err)
	}
}

func benchNode(i int, machine string, st domain.NodeState) domain.Node {
	at := t0.Add(time.Duration(i) * time.Second)
	n := domain.Node{ID: fmt.Sprintf("n%05d", i), ClusterID: fmt.Sprintf("c%03d", i%benchClusters), MachineID: machine,
		Name: fmt.Sprintf("gpu-preemptible-%d", i), Class: domain.Preemptible, GPUs: 8, State: st, CreatedAt: at,
		ReadyAt: at.Add(time.Minute), ProvisioningAt: at}
	if st == domain.NodeRemoved {
		n.RemovedAt = at.Add(time.Hour)
	}
	return n
}

// BenchmarkUpdateNode: an Update that reads a node, changes its state
// (ready to draining and back) and adds the event of that change, as a
// node step does. The event replaces the node's event of that reason
// from two steps before. The watched stores tell a watcher of each
// commit, as the simulator's does.
func BenchmarkUpdateNode(b *testing.B) {
	ctx := context.Background()
	for _, s := range append(benchStores(b), watchedStores(b)...) {
		b.Run("store="+s.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("n%05d", i%benchMachines)
				i++
				if err := s.st.Update(ctx, func(tx store.Tx) error { return step(ctx, tx, id) }); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// step drains ready node id or makes a draining one ready again, with
// the event that says so.
func step(ctx context.Context, tx store.Tx, id string) error {
	n, err := tx.GetNode(ctx, id)
	if err != nil {
		return err
	}
	at := n.CreatedAt.Add(2 * time.Hour)
	e := domain.Event{ID: "e-" + id, ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name, Timestamp: at}
	if n.State == domain.NodeReady {
		n.State, n.DrainStartedAt, n.Deadline = domain.NodeDraining, at, at.Add(2*time.Minute)
		e.Reason, e.Deadline = domain.ReasonPreemptionNotified, n.Deadline
	} else {
		n.State, n.DrainStartedAt, n.Deadline = domain.NodeReady, time.Time{}, time.Time{}
		e.Reason = domain.ReasonNodeAdded
	}
	if err := tx.UpdateNode(ctx, n); err != nil {
		return err
	}
	_, err = tx.AddEvent(ctx, e)
	return err
}

// BenchmarkSnapshot: the planning state, unchanged since the last
// Snapshot, and after an Update that wrote one node.
func BenchmarkSnapshot(b *testing.B) {
	ctx := context.Background()
	for _, s := range benchStores(b) {
		for _, written := range []bool{false, true} {
			b.Run(fmt.Sprintf("store=%s/written=%v", s.name, written), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if written {
						b.StopTimer()
						toggle(b, s.st, fmt.Sprintf("n%05d", i%benchMachines))
						i++
						b.StartTimer()
					}
					snap, err := s.st.Snapshot(ctx)
					if err != nil || len(snap.Nodes) != benchMachines {
						b.Fatalf("%d nodes, %v", len(snap.Nodes), err)
					}
				}
			})
		}
	}
}

// toggle writes node id with Notified flipped.
func toggle(b *testing.B, st store.Store, id string) {
	ctx := context.Background()
	err := st.Update(ctx, func(tx store.Tx) error {
		n, err := tx.GetNode(ctx, id)
		if err != nil {
			return err
		}
		n.Notified = !n.Notified
		return tx.UpdateNode(ctx, n)
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReads: the reads the controller and the meter make often.
func BenchmarkReads(b *testing.B) {
	ctx := context.Background()
	for _, s := range benchStores(b) {
		for _, r := range []struct {
			name string
			read func(i int) error
		}{
			{"GetNode", func(i int) error { _, err := s.st.GetNode(ctx, fmt.Sprintf("n%05d", i%benchMachines)); return err }},
			{"ListNodes/cluster", func(i int) error {
				_, err := s.st.ListNodes(ctx, store.NodeFilter{ClusterID: fmt.Sprintf("c%03d", i%benchClusters), IncludeRemoved: true})
				return err
			}},
			{"ListNodes/machine", func(i int) error {
				_, err := s.st.ListNodes(ctx, store.NodeFilter{MachineID: fmt.Sprintf("m%05d", i%benchMachines), States: domain.ActiveStates})
				return err
			}},
		} {
			b.Run(fmt.Sprintf("store=%s/%s", s.name, r.name), func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					if err := r.read(i); err != nil {
						b.Fatal(err)
					}
					i++
				}
			})
		}
	}
}
