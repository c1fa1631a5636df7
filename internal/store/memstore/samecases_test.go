package memstore_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/memstore"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// TestSameCases: cases the random test seldom draws answer on this store
// as on SQLite: the transactions' answers, and every read after.
func TestSameCases(t *testing.T) {
	node := func(id, machine string, st domain.NodeState) domain.Node {
		return domain.Node{ID: id, ClusterID: "c0", MachineID: machine, State: st, CreatedAt: t0}
	}
	cases := map[string][]func(context.Context, store.Tx) any{
		// A statement updating many nodes writes them in the order they
		// were created, whatever order they are named in: handing a
		// machine from a to p works when a was created first.
		"hand-over, the leaving node first": {
			creates(node("a", "m0", domain.NodeReady), node("p", "m0", domain.NodePending)),
			updates(node("p", "m0", domain.NodeProvisioning), node("a", "m0", domain.NodeRemoved)),
		},
		"hand-over, the pending node first": {
			creates(node("p", "m0", domain.NodePending), node("a", "m0", domain.NodeReady)),
			updates(node("a", "m0", domain.NodeRemoved), node("p", "m0", domain.NodeProvisioning)),
			updates(node("p", "m0", domain.NodeProvisioning), node("a", "m0", domain.NodeRemoved)),
		},
		"hand-over after an archived node": {
			creates(node("z", "m1", domain.NodeRemoved), node("a", "m0", domain.NodeReady)),
			archives, creates(node("p", "m0", domain.NodePending)),
			updates(node("p", "m0", domain.NodeProvisioning), node("a", "m0", domain.NodeRemoved)),
		},
		// In one statement of CreateNodes, a busy machine skips its row
		// (the others are created) and a missing parent refuses them all.
		"create nodes: a busy machine": {
			creates(node("a", "m0", domain.NodeReady)),
			creates(node("b", "m1", domain.NodeReady), node("c", "m0", domain.NodeReady), node("d", "m2", domain.NodePending)),
		},
		"create nodes: a missing machine": {
			creates(node("b", "m1", domain.NodeReady), node("c", "nope", domain.NodeReady)),
		},
		"nodes by ID in long lists": {
			creates(node("a", "m0", domain.NodeReady), node("b", "m1", domain.NodeRemoved)), archives,
			func(ctx context.Context, tx store.Tx) any {
				ids := []string{"b", "a"}
				for i := range 600 {
					ids = append(ids, fmt.Sprint("x", i))
				}
				return res(tx.NodesByID(ctx, append(ids, "a", "b", "a")))
			},
		},
		"usage of one instant in two zones": {
			func(ctx context.Context, tx store.Tx) any {
				u := domain.UsageRecord{NodeID: "n", Start: t0, End: t0.Add(time.Hour)}
				v := u
				v.Start, v.End, v.Final = t0.In(time.FixedZone("UTC+1", 3600)), t0.Add(2*time.Hour), true
				return res(nil, tx.PutUsages(ctx, []domain.UsageRecord{u, v, u}))
			},
		},
		"update clusters, one missing": {
			func(ctx context.Context, tx store.Tx) any {
				for _, id := range []string{"c1", "c2", "c3"} {
					if err := tx.SetKubeconfig(ctx, id, []byte("k"), t0); err != nil {
						return res(nil, err)
					}
				}
				gone := func(id string) domain.Cluster {
					return domain.Cluster{ID: id, ProjectID: "p0", DeletedAt: t0, CreatedAt: t0}
				}
				// One statement of four: the missing cluster is the second.
				return res(nil, tx.UpdateClusters(ctx, []domain.Cluster{gone("c1"), gone("nope"), gone("c2"), gone("c3")}))
			},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			sameSteps(t, steps)
		})
	}
}

func creates(ns ...domain.Node) func(context.Context, store.Tx) any {
	return func(ctx context.Context, tx store.Tx) any { return res(nil, tx.CreateNodes(ctx, ns)) }
}

func updates(ns ...domain.Node) func(context.Context, store.Tx) any {
	return func(ctx context.Context, tx store.Tx) any { return res(nil, tx.UpdateNodes(ctx, ns)) }
}

func archives(ctx context.Context, tx store.Tx) any {
	return res(tx.ArchiveNodes(ctx, t0.Add(time.Hour), 10))
}

// sameSteps runs each step in a transaction of its own on both stores
// (seeded alike) and compares the answers and what the stores hold.
func sameSteps(t *testing.T, steps []func(context.Context, store.Tx) any) {
	ctx := t.Context()
	q, err := sqlite.Open(ctx, ":memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	m := memstore.New()
	g := &gen{}
	for _, s := range []store.Store{m, q} {
		if err := s.Update(ctx, seedSame); err != nil {
			t.Fatal(err)
		}
	}
	for i, step := range steps {
		var a, b any
		errM := m.Update(ctx, func(tx store.Tx) error { a = step(ctx, tx); return nil })
		errQ := q.Update(ctx, func(tx store.Tx) error { b = step(ctx, tx); return nil })
		if !reflect.DeepEqual(a, b) || class(errM) != class(errQ) {
			t.Fatalf("step %d:\n memstore %+v %v\n   sqlite %+v %v", i, a, errM, b, errQ)
		}
		t.Logf("step %d: %+v", i, a)
	}
	all := []read{{"nodes", func(ctx context.Context, s store.Store) any {
		return res(s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true}))
	}}, {"usage", func(ctx context.Context, s store.Store) any { return res(s.ListUsage(ctx, store.UsageFilter{})) }}}
	for _, r := range append(all, g.fixedReads()...) {
		if a, b := r.run(ctx, m), r.run(ctx, q); !reflect.DeepEqual(a, b) {
			t.Fatalf("read %s:\n memstore %+v\n   sqlite %+v", r.name, a, b)
		}
	}
}
