package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The conformance tests of several servers on one database: the leader
// lease, fenced commits, and a schema that cannot put two live nodes on
// one machine.

func testLease(t *testing.T, s store.Store) {
	ctx := t.Context()
	l, err := s.GetLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if l.Held() {
		t.Fatalf("a new database has a held lease: %+v", l)
	}
	a, ok, err := s.AcquireLease(ctx, "a", "http://a", time.Minute)
	if err != nil || !ok {
		t.Fatalf("acquire a free lease: ok %v, %v", ok, err)
	}
	if a.Epoch <= l.Epoch || a.Holder != "a" || a.Address != "http://a" || !a.Held() {
		t.Fatalf("acquired lease %+v after %+v", a, l)
	}
	if _, ok, err := s.AcquireLease(ctx, "b", "http://b", time.Minute); err != nil || ok {
		t.Fatalf("b acquired a's running lease: ok %v, %v", ok, err)
	}
	got, err := s.GetLease(ctx)
	if err != nil || got.Holder != "a" || got.Epoch != a.Epoch || !got.Held() {
		t.Fatalf("lease after b's attempt: %+v, %v", got, err)
	}
	if ok, err := s.RenewLease(ctx, "a", a.Epoch, time.Minute); err != nil || !ok {
		t.Fatalf("a renews its term: ok %v, %v", ok, err)
	}
	// a restarted (its name is its data directory's): it takes its own
	// running lease at once, in a new term.
	a2, ok, err := s.AcquireLease(ctx, "a", "http://a", time.Minute)
	if err != nil || !ok || a2.Epoch != a.Epoch+1 {
		t.Fatalf("a re-acquires its own lease: %+v ok %v, %v", a2, ok, err)
	}
	a = a2
	if ok, err := s.RenewLease(ctx, "b", a.Epoch, time.Minute); err != nil || ok {
		t.Fatalf("b renewed a's term: ok %v, %v", ok, err)
	}
	// Release hands over at once.
	if err := s.ReleaseLease(ctx, "b", a.Epoch); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetLease(ctx); got.Holder != "a" {
		t.Fatalf("b released a's lease: %+v", got)
	}
	if err := s.ReleaseLease(ctx, "a", a.Epoch); err != nil {
		t.Fatal(err)
	}
	b, ok, err := s.AcquireLease(ctx, "b", "http://b", 50*time.Millisecond)
	if err != nil || !ok || b.Epoch != a.Epoch+1 {
		t.Fatalf("b acquires the released lease: %+v ok %v, %v", b, ok, err)
	}
	if ok, err := s.RenewLease(ctx, "a", a.Epoch, time.Minute); err != nil || ok {
		t.Fatalf("a renewed its finished term: ok %v, %v", ok, err)
	}
	// An expired lease goes to whoever asks next.
	time.Sleep(100 * time.Millisecond)
	if got, _ := s.GetLease(ctx); got.Held() {
		t.Fatalf("lease held past its expiry: %+v", got)
	}
	c, ok, err := s.AcquireLease(ctx, "a", "http://a2", time.Minute)
	if err != nil || !ok || c.Epoch != b.Epoch+1 || c.Address != "http://a2" {
		t.Fatalf("a acquires the expired lease: %+v ok %v, %v", c, ok, err)
	}
	if _, _, err := s.AcquireLease(ctx, "", "", time.Minute); err == nil {
		t.Fatal("acquired a lease with no holder")
	}
}

// testLeaseRace: of servers asking at once for a free lease, exactly one
// gets it.
func testLeaseRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for _, h := range []string{"a", "b", "c", "d", "e", "f"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, ok, err := s.AcquireLease(ctx, h, "", time.Minute)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d servers acquired one lease", won)
	}
}

func testFencing(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	write := func(ctx context.Context, name string) error {
		return s.Update(ctx, func(tx store.Tx) error {
			c, err := tx.GetCluster(ctx, "c1")
			if err != nil {
				return err
			}
			c.Name = name
			return tx.UpdateCluster(ctx, c)
		})
	}
	a, _, err := s.AcquireLease(ctx, "a", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := write(store.WithEpoch(ctx, a.Epoch), "by-a"); err != nil {
		t.Fatalf("the leader's commit: %v", err)
	}
	if err := s.ReleaseLease(ctx, "a", a.Epoch); err != nil {
		t.Fatal(err)
	}
	b, ok, err := s.AcquireLease(ctx, "b", "", time.Minute)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	err = write(store.WithEpoch(ctx, a.Epoch), "late-a")
	wantErr(t, "a commit of a finished term", err, store.ErrFenced)
	err = write(store.WithEpoch(ctx, -1), "follower")
	wantErr(t, "a commit of no term", err, store.ErrFenced)
	if err := write(store.WithEpoch(ctx, b.Epoch), "by-b"); err != nil {
		t.Fatalf("the new leader's commit: %v", err)
	}
	if err := write(ctx, "unfenced"); err != nil {
		t.Fatalf("an unfenced commit: %v", err)
	}
	c, _ := s.GetCluster(ctx, "c1")
	if c.Name != "unfenced" {
		t.Fatalf("cluster name %q: a fenced commit changed it", c.Name)
	}
}

// testOneLiveNodePerMachine: the schema refuses a second live node on a
// machine (one may wait, pending, for a node that is leaving), however
// it is written.
func testOneLiveNodePerMachine(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, node("a", "c1", "m1", domain.NodeReady, at(1))) })
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateNode(ctx, node("b", "c1", "m1", domain.NodeProvisioning, at(2)))
	})
	wantErr(t, "a second live node", err, domain.ErrConflict)
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, node("p", "c1", "m1", domain.NodePending, at(2))) })
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateNode(ctx, node("q", "c1", "m1", domain.NodePending, at(2))) })
	wantErr(t, "a second pending node", err, domain.ErrConflict)
	// The pending node cannot start while a is live.
	err = s.Update(ctx, func(tx store.Tx) error {
		p, err := tx.GetNode(ctx, "p")
		if err != nil {
			return err
		}
		p.State = domain.NodeProvisioning
		return tx.UpdateNode(ctx, p)
	})
	wantErr(t, "starting a pending node on a busy machine", err, domain.ErrConflict)
	// Removing a and then starting p in one transaction is the hand-over.
	update(t, s, func(tx store.Tx) error {
		a, err := tx.GetNode(ctx, "a")
		if err != nil {
			return err
		}
		a.State = domain.NodeRemoved
		if err := tx.UpdateNode(ctx, a); err != nil {
			return err
		}
		p, err := tx.GetNode(ctx, "p")
		if err != nil {
			return err
		}
		p.State = domain.NodeProvisioning
		return tx.UpdateNode(ctx, p)
	})
	// Removed nodes do not count.
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, node("r", "c1", "m1", domain.NodeRemoved, at(3))) })
	for _, id := range []string{"a", "b", "q"} {
		n, err := s.GetNode(ctx, id)
		if id == "a" && (err != nil || n.State != domain.NodeRemoved) {
			t.Fatalf("node a: %+v, %v", n, err)
		}
		if id != "a" && !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("refused node %s exists: %+v, %v", id, n, err)
		}
	}
}

// testNodeFilterClusters: a listing of several clusters' nodes (a page of
// clusters) reads only theirs.
func testNodeFilterClusters(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.CreateCluster(ctx, cluster("c2", "p1", at(0))), tx.CreateCluster(ctx, cluster("c3", "p1", at(0))),
			tx.CreateMachine(ctx, machine("m2", at(0))), tx.CreateMachine(ctx, machine("m3", at(0))),
			tx.CreateNode(ctx, node("a", "c1", "m1", domain.NodeReady, at(1))),
			tx.CreateNode(ctx, node("b", "c2", "m2", domain.NodeReady, at(2))),
			tx.CreateNode(ctx, node("c", "c3", "m3", domain.NodeReady, at(3))),
			tx.CreateNode(ctx, node("d", "c3", "m3", domain.NodeRemoved, at(4))))
	})
	got, err := s.ListNodes(ctx, store.NodeFilter{ClusterIDs: []string{"c1", "c3"}})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "nodes of c1 and c3", nodeIDs(got), []string{"a", "c"})
}
