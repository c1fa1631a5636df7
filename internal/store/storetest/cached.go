package storetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// RunCached runs the suite on store.Cached (enabled) over newDB's stores:
// the leader's in-memory snapshot passes it as the backend does.
func RunCached(t *testing.T, newDB NewDB) {
	Run(t, func(t *testing.T) Opener {
		o := newDB(t)
		return func(t *testing.T) store.Store {
			c := store.NewCached(o(t))
			c.Enable()
			return c
		}
	})
}

// testCached: the leader's in-memory snapshot (store.Cached) equals the
// backend's after every Update of a random sequence that creates, changes,
// removes and deletes machines, reservations, clusters and nodes, attaches
// and detaches kubeconfigs, and rolls some transactions back.
func testCached(t *testing.T, s store.Store) {
	ctx := t.Context()
	backend := &countingGets{Store: s}
	c := store.NewCached(backend)
	c.Enable()
	rng := rand.New(rand.NewPCG(9, 9))
	update(t, s, func(tx store.Tx) error {
		return tx.CreateProject(ctx, domain.Project{ID: "p1", CreatedAt: at(0)})
	})
	var (
		machines []string
		clusters []string              // not fully deleted
		live     = map[string]string{} // node ID -> machine, nodes not removed
		busy     = map[string]bool{}   // machines with a live node
		created  []string              // every node ID committed, removed ones too
		seq      int
	)
	const steps = 400
	// Times often tie, so the order by ID is exercised too; some are zero.
	when := func() time.Time {
		if rng.IntN(10) == 0 {
			return time.Time{}
		}
		return at(rng.IntN(20)).Add(time.Duration(rng.IntN(1000)) * time.Nanosecond)
	}
	id := func(prefix string) string { seq++; return fmt.Sprintf("%s%03d-%04d", prefix, rng.IntN(1000), seq) }
	check := func(step int, what string) {
		t.Helper()
		want, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// The copy's tables are rebuilt when read: reading them after
		// one, two or three Updates merges that many Updates' writes.
		if step%3 == 0 || step == steps {
			got, err := c.Snapshot(ctx)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, fmt.Sprintf("step %d (%s): machines", step, what), len(got.Machines), len(want.Machines))
			for i := range want.Machines {
				wantEqual(t, fmt.Sprintf("step %d (%s): machine %d", step, what, i), got.Machines[i], want.Machines[i])
			}
			wantEqual(t, fmt.Sprintf("step %d (%s): reservations", step, what), got.Reservations, want.Reservations)
			wantEqual(t, fmt.Sprintf("step %d (%s): clusters", step, what), got.Clusters, want.Clusters)
			wantEqual(t, fmt.Sprintf("step %d (%s): nodes", step, what), got.Nodes, want.Nodes)
		}
		// GetNode answers live nodes from memory, removed ones from the
		// backend: both as the backend has them.
		for _, id := range created {
			asked := backend.nodes.Load()
			gn, err := c.GetNode(ctx, id)
			if err != nil {
				t.Fatalf("step %d (%s): get node %s: %v", step, what, id, err)
			}
			if _, isLive := live[id]; isLive && backend.nodes.Load() != asked {
				t.Fatalf("step %d (%s): live node %s was read from the backend, not from the copy", step, what, id)
			}
			wn, err := s.GetNode(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, fmt.Sprintf("step %d (%s): node %s", step, what, id), gn, wn)
		}
		// GetMachine answers from memory too, as the backend has it.
		for _, id := range machines {
			asked := backend.machines.Load()
			gm, err := c.GetMachine(ctx, id)
			if err != nil {
				t.Fatalf("step %d (%s): get machine %s: %v", step, what, id, err)
			}
			if backend.machines.Load() != asked {
				t.Fatalf("step %d (%s): machine %s was read from the backend, not from the copy", step, what, id)
			}
			wm, err := s.GetMachine(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, fmt.Sprintf("step %d (%s): machine %s", step, what, id), gm, wm)
		}
		// And GetCluster, for every cluster the snapshot lists.
		for _, cl := range want.Clusters {
			asked := backend.clusters.Load()
			gc, err := c.GetCluster(ctx, cl.ID)
			if err != nil {
				t.Fatalf("step %d (%s): get cluster %s: %v", step, what, cl.ID, err)
			}
			if backend.clusters.Load() != asked {
				t.Fatalf("step %d (%s): cluster %s was read from the backend, not from the copy", step, what, cl.ID)
			}
			wc, err := s.GetCluster(ctx, cl.ID)
			if err != nil {
				t.Fatal(err)
			}
			wantEqual(t, fmt.Sprintf("step %d (%s): cluster %s", step, what, cl.ID), gc, wc)
		}
	}
	// A watcher follows every commit from the start: its tables, built
	// from the copy it was handed and the writes since, are the backend's.
	w := &mirror{}
	if err := c.Watch(ctx, w); err != nil {
		t.Fatal(err)
	}
	mirrored := func(step int, what string) {
		t.Helper()
		want, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		w.equal(t, fmt.Sprintf("step %d (%s): the watcher's", step, what), want)
	}
	boom := errors.New("rolled back on purpose")
	check(0, "empty")
	for step := 1; step <= steps; step++ {
		if step > 1 {
			mirrored(step-1, "after it")
		}
		var what string
		rollback := rng.IntN(8) == 0
		// The bookkeeping of this step, kept only if it commits.
		var after []func()
		before := slices.Clone(clusters)
		// Some nodes as committed, to check the transaction's reads of
		// them (served from the copy unless it wrote them).
		sample := sampleNodes(rng, created)
		committed := map[string]domain.Node{}
		for _, nid := range sample {
			n, err := s.GetNode(ctx, nid)
			if err != nil {
				t.Fatal(err)
			}
			committed[nid] = n
		}
		err := c.Update(ctx, func(tx store.Tx) error {
			after = after[:0]
			clusters = slices.Clone(before) // fn may run more than once
			touched := map[string]bool{}    // nodes this transaction changed
			wrote := map[string]domain.NodeState{}
			defer func() { txReadsMatch(t, ctx, tx, step, committed, wrote) }()
			for range 1 + rng.IntN(3) {
				switch op := rng.IntN(9); {
				case op == 0 || len(machines) < 3:
					what = "create machine"
					m := machine(id("m-"), when())
					if err := tx.CreateMachine(ctx, m); err != nil {
						return err
					}
					after = append(after, func() { machines = append(machines, m.ID) })
				case op == 1:
					what = "update machine"
					m, err := tx.GetMachine(ctx, machines[rng.IntN(len(machines))])
					if err != nil {
						return err
					}
					m.OutOfService = !m.OutOfService
					m.CooldownUntil = when()
					if err := tx.UpdateMachine(ctx, m); err != nil {
						return err
					}
				case op == 2:
					what = "create reservation"
					if err := tx.CreateReservation(ctx, domain.Reservation{ID: id("r-"), ProjectID: "p1", Region: "eu-1", GPUType: "H100", CreatedAt: when()}); err != nil {
						return err
					}
				case op == 3 || len(clusters) == 0:
					what = "create cluster"
					cl := cluster(id("c-"), "p1", when())
					if err := tx.CreateCluster(ctx, cl); err != nil {
						return err
					}
					after = append(after, func() { clusters = append(clusters, cl.ID) })
				case op == 4:
					what = "update cluster"
					i := rng.IntN(len(clusters))
					cl, err := tx.GetCluster(ctx, clusters[i])
					if err != nil {
						return err
					}
					cl.Status, cl.NodeSeq, cl.UnmetSince = domain.StatusReady, cl.NodeSeq+1, when()
					cl.MaxPreemptibleGPUs, cl.RequestedPreemptibleGPUs = 8*rng.IntN(4), 8*rng.IntN(4)
					if rng.IntN(4) == 0 {
						// Fully deleted: it leaves the snapshot.
						cl.Deleting, cl.DeletedAt = true, at(30)
						clusters = slices.Delete(clusters, i, i+1)
					}
					if err := tx.UpdateCluster(ctx, cl); err != nil {
						return err
					}
				case op == 5:
					what = "attach or detach a kubeconfig"
					var sealed []byte
					if rng.IntN(2) == 0 {
						sealed = []byte("sealed")
					}
					if err := tx.SetKubeconfig(ctx, clusters[rng.IntN(len(clusters))], sealed, at(rng.IntN(20)+1)); err != nil {
						return err
					}
				case op == 6:
					what = "create node"
					var ns []domain.Node
					for range 1 + rng.IntN(3) {
						m := machines[rng.IntN(len(machines))]
						if busy[m] {
							continue
						}
						ns = append(ns, node(id("n-"), clusters[rng.IntN(len(clusters))], m, domain.NodeProvisioning, when()))
						busy[m] = true // within this transaction too
						wrote[ns[len(ns)-1].ID] = domain.NodeProvisioning
					}
					if len(ns) > 1 || rng.IntN(2) == 0 {
						what = "create nodes" // in bulk (store.BulkWriter)
						if err := tx.CreateNodes(ctx, ns); err != nil {
							return err
						}
					} else {
						for _, n := range ns {
							if err := tx.CreateNode(ctx, n); err != nil {
								return err
							}
						}
					}
					after = append(after, func() {
						for _, n := range ns {
							live[n.ID] = n.MachineID
							created = append(created, n.ID)
						}
					})
				default:
					what = "update node"
					var nid string
					for k := range live {
						if !touched[k] {
							nid = k
							break
						}
					}
					if nid == "" {
						continue
					}
					touched[nid] = true
					n, err := tx.GetNode(ctx, nid)
					if err != nil {
						return err
					}
					switch rng.IntN(3) {
					case 0:
						n.State, n.ReadyAt = domain.NodeReady, when()
					case 1:
						n.State, n.Deadline = domain.NodeDraining, at(25)
					default:
						n.State, n.RemovedAt = domain.NodeRemoved, at(26)
						m := live[nid]
						after = append(after, func() { delete(live, nid); delete(busy, m) })
					}
					if err := tx.UpdateNode(ctx, n); err != nil {
						return err
					}
					wrote[n.ID] = n.State
				}
			}
			if rollback {
				return boom
			}
			return nil
		})
		switch {
		case rollback:
			wantErr(t, fmt.Sprintf("step %d: rollback", step), err, boom)
			clusters = before
			// busy was marked inside the transaction: recompute it.
			clear(busy)
			for _, m := range live {
				busy[m] = true
			}
			what += ", rolled back"
		case err != nil:
			t.Fatalf("step %d (%s): %v", step, what, err)
		default:
			for _, f := range after {
				f()
			}
		}
		check(step, what)
	}
	if n := c.Loads(); n != 1 {
		t.Errorf("the copy was loaded %d times, want once", n)
	}
}

// sampleNodes picks up to 4 of ids.
func sampleNodes(rng *rand.Rand, ids []string) []string {
	var out []string
	for range min(4, len(ids)) {
		out = append(out, ids[rng.IntN(len(ids))])
	}
	return out
}

// txReadsMatch: inside a Cached Update, a node the transaction did not
// write reads as committed, whether served from the copy or from the
// backend (a removed node), one by one or in bulk; a node it wrote reads
// as written.
func txReadsMatch(t *testing.T, ctx context.Context, tx store.Tx, step int, committed map[string]domain.Node, wrote map[string]domain.NodeState) {
	t.Helper()
	ids := slices.Collect(maps.Keys(committed))
	for id := range wrote {
		ids = append(ids, id)
	}
	bulk, err := tx.NodesByID(ctx, append(ids, ids...)) // each named twice: read once
	if err != nil {
		t.Fatalf("step %d: nodes by ID in the transaction: %v", step, err)
	}
	byID := map[string]domain.Node{}
	for _, n := range bulk {
		if _, dup := byID[n.ID]; dup {
			t.Fatalf("step %d: nodes by ID in the transaction returned %s twice", step, n.ID)
		}
		byID[n.ID] = n
	}
	for _, id := range ids {
		one, err := tx.GetNode(ctx, id)
		if err != nil {
			t.Fatalf("step %d: get node %s in the transaction: %v", step, id, err)
		}
		wantEqual(t, fmt.Sprintf("step %d: node %s in bulk and one by one", step, id), byID[id], one)
		if st, ok := wrote[id]; ok {
			wantEqual(t, fmt.Sprintf("step %d: state of node %s, written in the transaction", step, id), one.State, st)
		} else {
			wantEqual(t, fmt.Sprintf("step %d: node %s, not written in the transaction", step, id), one, committed[id])
		}
	}
}

// countingGets counts the GetNode, GetMachine and GetCluster calls that
// reach the backend.
type countingGets struct {
	store.Store
	nodes, machines, clusters atomic.Int64
}

func (c *countingGets) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	c.clusters.Add(1)
	return c.Store.GetCluster(ctx, id)
}

func (c *countingGets) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	c.machines.Add(1)
	return c.Store.GetMachine(ctx, id)
}

func (c *countingGets) GetNode(ctx context.Context, id string) (domain.Node, error) {
	c.nodes.Add(1)
	return c.Store.GetNode(ctx, id)
}
