package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// runHistory runs the tests of archived nodes and streamed usage, each on
// a database of its own.
func runHistory(t *testing.T, newDB NewDB) {
	for _, tc := range []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"ArchiveNodes", testArchiveNodes},
		{"ArchiveNodesOnlyFinished", testArchiveNodesOnlyFinished},
		{"ArchiveNodesLimit", testArchiveNodesLimit},
		{"PruneNodeHistory", testPruneNodeHistory},
		{"PruneLostWork", testPruneLostWork},
		{"ScanUsage", testScanUsage},
		{"BulkReads", testBulkReads},
		{"PutUsages", testPutUsages},
		{"AddEvents", testAddEvents},
		{"CreateNodes", testCreateNodes},
		{"UpdateNodes", testUpdateNodes},
		{"UpdateClusters", testUpdateClusters},
		{"CreateClusters", testCreateClusters},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t, newDB(t)))
		})
	}
}

// historyWorld: in cluster c1, live (ready), and done, removed at minute 10
// with its final record. Machines m1 and m2.
func historyWorld(t *testing.T, s store.Store) (live, done domain.Node) {
	t.Helper()
	ctx := t.Context()
	seed(t, s)
	live = node("live", "c1", "m1", domain.NodeReady, at(1))
	live.ReadyAt = at(2)
	done = node("done", "c1", "m2", domain.NodeRemoved, at(0))
	done.ReadyAt, done.DrainStartedAt, done.RemovedAt, done.Outcome = at(1), at(8), at(10), domain.OutcomeDeadline
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateMachine(ctx, machine("m2", at(0))); err != nil {
			return err
		}
		for _, n := range []domain.Node{live, done} {
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
		}
		return tx.PutUsage(ctx, usageRecord("done", "c1", "p1", at(1), at(8), true))
	})
	return live, done
}

func archive(t *testing.T, s store.Store, before int, limit int) int {
	t.Helper()
	var n int
	update(t, s, func(tx store.Tx) (err error) {
		n, err = tx.ArchiveNodes(t.Context(), at(before), limit)
		return err
	})
	return n
}

func testArchiveNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	live, done := historyWorld(t, s)
	if n := archive(t, s, 10, 100); n != 0 {
		t.Fatalf("archived %d nodes removed at the cutoff, want none (strictly before)", n)
	}
	if n := archive(t, s, 11, 100); n != 1 {
		t.Fatalf("archived %d nodes, want 1", n)
	}
	if n := archive(t, s, 11, 100); n != 0 {
		t.Fatalf("archived %d nodes again", n)
	}
	// The past is still readable, unchanged, inside and outside a Tx.
	got, err := s.GetNode(ctx, "done")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "archived node", got, done)
	update(t, s, func(tx store.Tx) error {
		got, err := tx.GetNode(ctx, "done")
		wantEqual(t, "archived node in a tx", got, done)
		return err
	})
	all, err := s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "IncludeRemoved", all, []domain.Node{done, live})
	for _, f := range []store.NodeFilter{
		{IncludeRemoved: true, ClusterID: "c1"},
		{IncludeRemoved: true, MachineID: "m2"},
		{States: []domain.NodeState{domain.NodeRemoved}},
		{States: []domain.NodeState{domain.NodeRemoved}, ClusterID: "c1"},
	} {
		ns, err := s.ListNodes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(ns) == 0 || ns[0].ID != "done" {
			t.Fatalf("%+v: %v, want the archived node first", f, nodeIDs(ns))
		}
	}
	// A read of the past from its removal on sees it; from after, or of
	// the other class, does not.
	for _, c := range []struct {
		f    store.NodeFilter
		want []string
	}{
		{store.NodeFilter{IncludeRemoved: true, RemovedSince: at(10)}, []string{"done", "live"}},
		{store.NodeFilter{IncludeRemoved: true, RemovedSince: at(10).Add(time.Microsecond)}, []string{"live"}},
		{store.NodeFilter{IncludeRemoved: true, Class: done.Class}, []string{"done", "live"}},
		{store.NodeFilter{IncludeRemoved: true, Class: domain.Standard}, []string{}},
		{store.NodeFilter{Class: domain.Preemptible, RemovedSince: at(11)}, []string{"live"}},
	} {
		ns, err := s.ListNodes(ctx, c.f)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, fmt.Sprintf("%+v", c.f), append([]string{}, nodeIDs(ns)...), c.want)
	}
	// The live-state reads do not see it.
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot nodes", nodeIDs(store.Values(snap.Nodes)), []string{"live"})
	for _, f := range []store.NodeFilter{
		{},
		{Unmetered: true},
		{ClusterID: "c1"},
		{CleanupPending: true, IncludeRemoved: true},
		{States: []domain.NodeState{domain.NodeReady}},
		{IncludeRemoved: true, MachineID: "m1"},
	} {
		ns, err := s.ListNodes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range ns {
			if n.ID == "done" {
				t.Fatalf("%+v lists the archived node", f)
			}
		}
	}
	// Its usage record stays; its ID stays taken; it is not live any more.
	recs, err := s.ListUsage(ctx, store.UsageFilter{})
	if err != nil || len(recs) != 1 || recs[0].NodeID != "done" {
		t.Fatalf("usage after archiving: %v %+v", err, recs)
	}
	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateNode(ctx, node("done", "c1", "m2", domain.NodePending, at(20)))
	})
	wantErr(t, "create an archived node's ID", err, domain.ErrConflict)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateNode(ctx, done) })
	wantErr(t, "update an archived node", err, domain.ErrNotFound)
	// A zero cutoff or limit archives nothing.
	update(t, s, func(tx store.Tx) error {
		for _, lim := range []int{0, -1} {
			if n, err := tx.ArchiveNodes(ctx, at(100), lim); err != nil || n != 0 {
				return fmt.Errorf("limit %d: %d, %v", lim, n, err)
			}
		}
		return nil
	})
}

// testArchiveNodesOnlyFinished: a node still to be metered, still to be
// cleaned up, or not removed is never archived; one that never became
// ready has nothing to meter.
func testArchiveNodesOnlyFinished(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	removed := func(id string, ready bool) domain.Node {
		n := node(id, "c1", "m1", domain.NodeRemoved, at(0))
		if ready {
			n.ReadyAt = at(1)
		}
		n.RemovedAt = at(5)
		return n
	}
	unmetered := removed("unmetered", true)    // no record at all
	running := removed("running-record", true) // a record, not final
	cleanup := removed("cleanup", true)        // final record, cleanup pending
	cleanup.CleanupPending = true
	never := removed("never-ready", false) // nothing to meter
	draining := node("draining", "c1", "m1", domain.NodeDraining, at(0))
	draining.ReadyAt, draining.RemovedAt = at(1), at(2) // not removed, whatever RemovedAt says
	update(t, s, func(tx store.Tx) error {
		for _, n := range []domain.Node{unmetered, running, cleanup, never, draining} {
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
		}
		if err := tx.PutUsage(ctx, usageRecord("running-record", "c1", "p1", at(1), at(4), false)); err != nil {
			return err
		}
		if err := tx.PutUsage(ctx, usageRecord("cleanup", "c1", "p1", at(1), at(5), true)); err != nil {
			return err
		}
		return tx.PutUsage(ctx, usageRecord("draining", "c1", "p1", at(1), at(2), true))
	})
	if n := archive(t, s, 60, 100); n != 1 {
		t.Fatalf("archived %d, want only the node that never became ready", n)
	}
	if _, err := s.GetNode(ctx, "never-ready"); err != nil {
		t.Fatal(err)
	}
	ns, err := s.ListNodes(ctx, store.NodeFilter{Unmetered: true})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "meter work list", nodeIDs(ns), []string{"running-record", "unmetered"})
	// Once metered and cleaned up they go too.
	cleanup.CleanupPending = false
	update(t, s, func(tx store.Tx) error {
		if err := tx.UpdateNode(ctx, cleanup); err != nil {
			return err
		}
		for _, id := range []string{"unmetered", "running-record"} {
			if err := tx.PutUsage(ctx, usageRecord(id, "c1", "p1", at(1), at(5), true)); err != nil {
				return err
			}
		}
		return nil
	})
	if n := archive(t, s, 60, 100); n != 3 {
		t.Fatalf("archived %d, want 3", n)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot", nodeIDs(store.Values(snap.Nodes)), []string{"draining"})
	all, err := s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "all nodes", nodeIDs(all), []string{"cleanup", "draining", "never-ready", "running-record", "unmetered"})
}

// testArchiveNodesLimit: a batch moves at most limit nodes, oldest removal
// first, and the batches together move everything.
func testArchiveNodesLimit(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	const total = 25
	update(t, s, func(tx store.Tx) error {
		for i := range total {
			id := fmt.Sprintf("n%02d", i)
			n := node(id, "c1", "m1", domain.NodeRemoved, at(i))
			// Removed in the reverse order of creation.
			n.ReadyAt, n.RemovedAt = at(i), at(100-i)
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
			if err := tx.PutUsage(ctx, usageRecord(id, "c1", "p1", at(i), at(100-i), true)); err != nil {
				return err
			}
		}
		return nil
	})
	if n := archive(t, s, 200, 10); n != 10 {
		t.Fatalf("first batch %d, want 10", n)
	}
	ns, err := s.ListNodes(ctx, store.NodeFilter{States: []domain.NodeState{domain.NodeRemoved}})
	if err != nil || len(ns) != total {
		t.Fatalf("removed nodes %d, %v", len(ns), err)
	}
	// The ten removed first (the newest created) are the archived ones.
	for i := total - 10; i < total; i++ {
		err := s.Update(ctx, func(tx store.Tx) error {
			n := node(fmt.Sprintf("n%02d", i), "c1", "m1", domain.NodeRemoved, at(i))
			return tx.UpdateNode(ctx, n)
		})
		if !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("n%02d not archived (update: %v)", i, err)
		}
	}
	if n := archive(t, s, 200, 10); n != 10 {
		t.Fatalf("second batch %d, want 10", n)
	}
	if n := archive(t, s, 200, 10); n != 5 {
		t.Fatalf("last batch %d, want 5", n)
	}
	all, err := s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil || len(all) != total || all[0].ID != "n00" || all[total-1].ID != fmt.Sprintf("n%02d", total-1) {
		t.Fatalf("all nodes after archiving: %v %v", err, nodeIDs(all))
	}
}

// testScanUsage: ScanUsage gives what ListUsage gives, in order, and
// stops at the callback's error.
func testScanUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	update(t, s, func(tx store.Tx) error {
		for i := range 30 {
			r := usageRecord(fmt.Sprintf("n%02d", 29-i), fmt.Sprintf("c%d", i%3), "p1", at(i/2), at(i/2+5+i%4), i%5 == 0)
			if err := tx.PutUsage(ctx, r); err != nil {
				return err
			}
		}
		return nil
	})
	for _, f := range []store.UsageFilter{
		{},
		{ProjectID: "p1"},
		{ProjectID: "nobody"},
		{ClusterID: "c1", From: at(3), To: at(9)},
		{Open: true},
	} {
		want, err := s.ListUsage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		got := []domain.UsageRecord{}
		if err := s.ScanUsage(ctx, f, func(r domain.UsageRecord) error { got = append(got, r); return nil }); err != nil {
			t.Fatal(err)
		}
		wantEqual(t, fmt.Sprintf("scan %+v", f), got, want)
		update(t, s, func(tx store.Tx) error {
			got = got[:0]
			err := tx.ScanUsage(ctx, f, func(r domain.UsageRecord) error { got = append(got, r); return nil })
			wantEqual(t, fmt.Sprintf("scan in a tx %+v", f), got, want)
			return err
		})
	}
	stop := errors.New("stop")
	n := 0
	err := s.ScanUsage(ctx, store.UsageFilter{}, func(domain.UsageRecord) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("scan stopped after %d records with %v", n, err)
	}
	// The store is still usable: the scan let go of its connection.
	if _, err := s.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
}

// testBulkReads: a transaction reads rows by ID in bulk (store.BulkReader)
// as GetNode, GetCluster and GetMachine read them one by one: archived
// nodes included, fully deleted clusters and unknown IDs left out, and
// lists longer than one statement's.
func testBulkReads(t *testing.T, s store.Store) {
	ctx := t.Context()
	live, done := historyWorld(t, s)
	archive(t, s, 11, 100)
	const many = 700
	var manyIDs, machineIDs []string
	update(t, s, func(tx store.Tx) error {
		gone := cluster("c2", "p1", at(1))
		gone.DeletedAt = at(5)
		if err := tx.CreateCluster(ctx, gone); err != nil {
			return err
		}
		for i := range many {
			m := machine(fmt.Sprintf("bulk-m%03d", i), at(2))
			n := node(fmt.Sprintf("bulk-n%03d", i), "c1", m.ID, domain.NodeReady, at(3))
			if err := tx.CreateMachine(ctx, m); err != nil {
				return err
			}
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
			manyIDs, machineIDs = append(manyIDs, n.ID), append(machineIDs, m.ID)
		}
		return nil
	})
	byID := func(ns []domain.Node) map[string]domain.Node {
		out := map[string]domain.Node{}
		for _, n := range ns {
			if _, dup := out[n.ID]; dup {
				t.Fatalf("node %s read twice", n.ID)
			}
			out[n.ID] = n
		}
		return out
	}
	update(t, s, func(tx store.Tx) error {
		b := tx
		ns, err := b.NodesByID(ctx, []string{"live", "done", "nope"})
		if err != nil {
			return err
		}
		got := byID(ns)
		if len(got) != 2 {
			t.Fatalf("NodesByID(live, done, nope): %v", nodeIDs(ns))
		}
		wantEqual(t, "live node", got["live"], live)
		wantEqual(t, "archived node", got["done"], done)
		ns, err = b.NodesByID(ctx, append([]string{"live"}, manyIDs...))
		if err != nil {
			return err
		}
		if got := byID(ns); len(got) != many+1 {
			t.Fatalf("NodesByID of %d: %d read", many+1, len(got))
		}
		one, err := tx.GetNode(ctx, manyIDs[many-1])
		if err != nil {
			return err
		}
		wantEqual(t, "the last of many", byID(ns)[one.ID], one)
		cs, err := b.ClustersByID(ctx, []string{"c2", "c1", "nope"})
		if err != nil {
			return err
		}
		wantEqual(t, "ClustersByID(c2 deleted, c1, nope)", clusterIDs(cs), []string{"c1"})
		c1, err := tx.GetCluster(ctx, "c1")
		if err != nil {
			return err
		}
		wantEqual(t, "cluster", cs[0], c1)
		ms, err := b.MachinesByID(ctx, append(machineIDs, "m1", "nope"))
		if err != nil {
			return err
		}
		if len(ms) != many+1 {
			t.Fatalf("MachinesByID of %d known: %d read", many+1, len(ms))
		}
		if ns, err := b.NodesByID(ctx, nil); err != nil || len(ns) != 0 {
			t.Fatalf("NodesByID(nil): %v, %v", ns, err)
		}
		// The bulk read is the row-by-row read, unknown IDs left out.
		ids := []string{"live", "done", "nope", manyIDs[0]}
		bulk, err := tx.NodesByID(ctx, ids)
		if err != nil {
			return err
		}
		var rows []domain.Node
		for _, id := range ids {
			n, err := tx.GetNode(ctx, id)
			if errors.Is(err, domain.ErrNotFound) {
				continue
			}
			if err != nil {
				return err
			}
			rows = append(rows, n)
		}
		wantEqual(t, "nodes row by row", byID(rows), byID(bulk))
		if cs, err := tx.ClustersByID(ctx, []string{"c2", "c1", "nope"}); err != nil || len(cs) != 1 || cs[0].ID != "c1" {
			t.Fatalf("clusters by ID: %v, %v", cs, err)
		}
		if ms, err := tx.MachinesByID(ctx, []string{"m1", "nope"}); err != nil || len(ms) != 1 || ms[0].ID != "m1" {
			t.Fatalf("machines by ID: %v, %v", ms, err)
		}
		return nil
	})
}

// testPutUsages: writing records in bulk (store.BulkWriter) ends as writing
// them one by one does, rule for rule (a final record stays, a running one
// is replaced only by one reaching further), in batches of every size,
// with a node twice in one batch, and a final record marks its node
// metered.
func testPutUsages(t *testing.T, s store.Store) {
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(3, 4))
	type write struct {
		node  int
		end   int
		final bool
	}
	var rounds [][]write
	for range 6 {
		var round []write
		for range rng.IntN(150) {
			round = append(round, write{rng.IntN(120), 1 + rng.IntN(40), rng.IntN(6) == 0})
		}
		rounds = append(rounds, round)
	}
	rounds = append(rounds, []write{{7, 50, false}, {7, 60, false}}) // twice in one batch
	rec := func(prefix string, w write) domain.UsageRecord {
		return usageRecord(fmt.Sprintf("%s%03d", prefix, w.node), "c1", prefix, at(0), at(w.end), w.final)
	}
	for _, round := range rounds {
		var bulk []domain.UsageRecord
		update(t, s, func(tx store.Tx) error {
			bulk = bulk[:0]
			for _, w := range round {
				if err := tx.PutUsage(ctx, rec("row-", w)); err != nil {
					return err
				}
				bulk = append(bulk, rec("bulk-", w))
			}
			return tx.PutUsages(ctx, bulk)
		})
	}
	list := func(project string) []domain.UsageRecord {
		got, err := s.ListUsage(ctx, store.UsageFilter{ProjectID: project})
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			got[i].NodeID = strings.TrimPrefix(got[i].NodeID, project)
			got[i].ProjectID = ""
		}
		return got
	}
	rows, bulk := list("row-"), list("bulk-")
	if len(rows) == 0 {
		t.Fatal("nothing written")
	}
	wantEqual(t, "usage written in bulk vs row by row", bulk, rows)

	// A final record written in bulk marks its node metered.
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		gone := node("gone", "c1", "m1", domain.NodeRemoved, at(1))
		gone.ReadyAt, gone.RemovedAt = at(2), at(9)
		if err := tx.CreateNode(ctx, gone); err != nil {
			return err
		}
		return tx.PutUsages(ctx, []domain.UsageRecord{
			usageRecord("other", "c1", "p1", at(0), at(3), false),
			usageRecord("gone", "c1", "p1", at(2), at(9), true),
		})
	})
	ns, err := s.ListNodes(ctx, store.NodeFilter{Unmetered: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(ns) != 0 {
		t.Fatalf("unmetered after a final record in bulk: %v", nodeIDs(ns))
	}
}

// testCreateNodes: creating nodes in bulk (store.BulkWriter) stores them as
// CreateNode does, across statements of every size, and refuses what it
// refuses: an archived node's ID, a live node's ID, a machine with a live
// node, an ID twice; the transaction stays usable after a refusal.
func testCreateNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, done := historyWorld(t, s)
	archive(t, s, 11, 100)
	const many = 45 // 32 + 8 + 4 + 1
	var want []domain.Node
	update(t, s, func(tx store.Tx) error {
		want = want[:0]
		for i := range many {
			m := machine(fmt.Sprintf("cn-m%02d", i), at(1))
			if err := tx.CreateMachine(ctx, m); err != nil {
				return err
			}
			n := node(fmt.Sprintf("cn-n%02d", i), "c1", m.ID, domain.NodeProvisioning, at(2))
			n.ProvisioningAt = at(2)
			want = append(want, n)
		}
		for i := range 3 {
			if err := tx.CreateMachine(ctx, machine(fmt.Sprintf("free-%d", i), at(1))); err != nil {
				return err
			}
		}
		return tx.CreateNodes(ctx, want)
	})
	for _, n := range want {
		got, err := s.GetNode(ctx, n.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "node created in bulk", got, n)
	}
	fresh := func(id, machineID string) domain.Node {
		return node(id, "c1", machineID, domain.NodeProvisioning, at(3))
	}
	for _, tc := range []struct {
		name string
		ns   []domain.Node
	}{
		{"an archived node's ID", []domain.Node{fresh("ok-1", "free-0"), fresh(done.ID, "free-1")}},
		{"a live node's ID", []domain.Node{fresh("cn-n03", "free-0")}},
		{"a machine with a live node", []domain.Node{fresh("ok-2", "free-0"), fresh("ok-3", "m1")}},
		{"an ID twice", []domain.Node{fresh("twice", "free-0"), fresh("twice", "free-1")}},
	} {
		update(t, s, func(tx store.Tx) error {
			err := tx.CreateNodes(ctx, tc.ns)
			wantErr(t, tc.name, err, domain.ErrConflict)
			// The transaction is still usable.
			_, err = tx.GetNode(ctx, "cn-n00")
			return err
		})
	}
	if n, err := s.GetNode(ctx, "cn-n03"); err != nil || n.MachineID != "cn-m03" {
		t.Fatalf("the live node whose ID was asked again: %+v, %v", n, err)
	}
}

// testAddEvents: adding events in bulk (store.BulkWriter) ends as adding
// them one by one: the same events, in the same Seq order, a key added
// again replacing its event with a later Seq, also within one call and
// across the statements a long call is split into.
func testAddEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	rng := rand.New(rand.NewPCG(5, 6))
	// Node numbers: distinct within a call (one that repeats a key is
	// added one by one), repeated across calls (replacing stored events).
	var rounds [][]int
	for range 5 {
		rounds = append(rounds, rng.Perm(70)[:1+rng.IntN(69)])
	}
	rounds = append(rounds, []int{3, 4, 3}) // a key twice in one call
	seq := 0
	ev := func(prefix string, node int) domain.Event {
		seq++
		return domain.Event{ID: fmt.Sprintf("%sev%d", prefix, seq), ClusterID: "c1", NodeID: fmt.Sprintf("%sn%02d", prefix, node),
			NodeName: "gpu-dp-1", Reason: domain.ReasonPreemptionNotified, Message: fmt.Sprintf("m%d", seq), Timestamp: at(seq), Deadline: at(seq + 5)}
	}
	for _, round := range rounds {
		update(t, s, func(tx store.Tx) error {
			var bulk []domain.Event
			for _, n := range round {
				if _, err := tx.AddEvent(ctx, ev("row-", n)); err != nil {
					return err
				}
				bulk = append(bulk, ev("bulk-", n))
			}
			return tx.AddEvents(ctx, bulk)
		})
	}
	all, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ node, msg string }
	var rows, bulk []key
	for i, e := range all {
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("events out of Seq order: %d after %d", e.Seq, all[i-1].Seq)
		}
		switch {
		case strings.HasPrefix(e.NodeID, "row-"):
			rows = append(rows, key{strings.TrimPrefix(e.NodeID, "row-"), e.Message})
		case strings.HasPrefix(e.NodeID, "bulk-"):
			// Each bulk event was made right after its row event.
			n, _ := strconv.Atoi(strings.TrimPrefix(e.Message, "m"))
			bulk = append(bulk, key{strings.TrimPrefix(e.NodeID, "bulk-"), fmt.Sprintf("m%d", n-1)})
		}
	}
	if len(rows) < 50 {
		t.Fatalf("only %d events kept", len(rows))
	}
	wantEqual(t, "events added in bulk vs one by one (node, message)", bulk, rows)
}

// testUpdateNodes: updating nodes in bulk (store.BulkWriter) writes every
// field as UpdateNode does (set and zero, across statements of every
// size), a node named twice ends as its last write, and it refuses what
// UpdateNode refuses: a missing node, a second live node on a machine.
func testUpdateNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	const many = 45 // 32 + 8 + 4 + 1
	var nodes []domain.Node
	update(t, s, func(tx store.Tx) error {
		nodes = nodes[:0]
		for i := range many {
			m := machine(fmt.Sprintf("un-m%02d", i), at(1))
			if err := tx.CreateMachine(ctx, m); err != nil {
				return err
			}
			n := node(fmt.Sprintf("un-n%02d", i), "c1", m.ID, domain.NodeProvisioning, at(2))
			n.ProvisioningAt = at(2)
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
			nodes = append(nodes, n)
		}
		return tx.CreateCluster(ctx, cluster("c2", "p1", at(0)))
	})
	_, _, _, _, _, full, _ := full()
	want := make([]domain.Node, many)
	for i, n := range nodes {
		w := full // every field set…
		w.ID, w.MachineID, w.ClusterID, w.Name = n.ID, n.MachineID, "c2", fmt.Sprintf("%s-%d", full.Name, i)
		w.GPUs = i
		if i%3 == 1 { // …or back to its zero value
			w.ReadyAt, w.DrainStartedAt, w.Deadline, w.DrainedAt, w.RemovedAt, w.ProvisioningAt = time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}, time.Time{}
			w.Notified, w.CleanupPending, w.LastError, w.Outcome, w.DrainCause = false, false, "", "", ""
			w.State = domain.NodeReady
		}
		want[i] = w
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.UpdateNodes(ctx, want); err != nil {
			return err
		}
		// Reads in the transaction see the writes.
		got, err := tx.GetNode(ctx, want[7].ID)
		wantEqual(t, "a node updated in bulk, read in its transaction", got, want[7])
		return err
	})
	for _, w := range want {
		got, err := s.GetNode(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "node updated in bulk", got, w)
	}

	// A node twice: written in order.
	first, last := want[0], want[0]
	first.LastError, last.LastError = "first", "last"
	update(t, s, func(tx store.Tx) error { return tx.UpdateNodes(ctx, []domain.Node{first, want[1], last}) })
	if got, err := s.GetNode(ctx, first.ID); err != nil || got.LastError != "last" {
		t.Fatalf("a node updated twice in one call: %+v, %v; want its last write", got, err)
	}

	missing := want[2]
	missing.ID = "no-such-node"
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.UpdateNodes(ctx, []domain.Node{want[3], missing, want[4]})
	})
	wantErr(t, "a missing node among others", err, domain.ErrNotFound)
	if !strings.Contains(err.Error(), "no-such-node") {
		t.Fatalf("the error does not name the missing node: %v", err)
	}

	// Two live nodes on one machine: refused, nothing written.
	live := want[5]
	live.State, live.RemovedAt = domain.NodeReady, time.Time{}
	clash := want[6]
	clash.State, clash.RemovedAt, clash.MachineID = domain.NodeReady, time.Time{}, live.MachineID
	clash.LastError = "must not be written"
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateNodes(ctx, []domain.Node{live, clash}) })
	wantErr(t, "a second live node on a machine", err, domain.ErrConflict)
	if got, err := s.GetNode(ctx, clash.ID); err != nil || got.LastError == clash.LastError {
		t.Fatalf("a refused bulk update was written: %+v, %v", got, err)
	}
}

// testUpdateClusters: updating clusters in bulk writes them as
// UpdateCluster does: every field, a fully deleted cluster's kubeconfig
// dropped, a missing cluster refused.
func testUpdateClusters(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	const many = 37 // 32 + 4 + 1
	var want []domain.Cluster
	update(t, s, func(tx store.Tx) error {
		want = want[:0]
		for i := range many {
			c := cluster(fmt.Sprintf("uc-%02d", i), "p1", at(i))
			if err := tx.CreateCluster(ctx, c); err != nil {
				return err
			}
			if err := attachFull(ctx, tx, &c); err != nil {
				return err
			}
			want = append(want, c)
		}
		return nil
	})
	_, _, _, _, full, _, _ := full()
	for i := range want {
		w := full
		w.ID, w.Name, w.ProjectID, w.KubeAttachedAt = want[i].ID, fmt.Sprintf("%s-%d", full.Name, i), "p1", want[i].KubeAttachedAt
		// The access record stays: only SetAccess writes it.
		w.NodeSeq, w.UnmetSince, w.Access = int64(i), at(20+i), want[i].Access
		if i%4 == 1 {
			w.UnmetSince, w.CreatedAt, w.Deleting, w.Unfulfilled, w.UnfulfilledMessage = time.Time{}, time.Time{}, false, "", ""
		}
		if i == 9 { // fully deleted: its kubeconfig goes
			w.DeletedAt = at(50)
		}
		want[i] = w
	}
	update(t, s, func(tx store.Tx) error {
		return tx.UpdateClusters(ctx, want)
	})
	for i, w := range want {
		if i == 9 {
			if _, err := s.GetCluster(ctx, w.ID); !errors.Is(err, domain.ErrNotFound) {
				t.Fatalf("a cluster deleted in bulk is still found: %v", err)
			}
			if rec, err := s.GetClusterRecord(ctx, w.ID); err != nil || !rec.KubeAttachedAt.IsZero() {
				t.Fatalf("a cluster deleted in bulk kept its kubeconfig (attached at %v), %v", rec.KubeAttachedAt, err)
			}
			continue
		}
		got, err := s.GetCluster(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "cluster updated in bulk", got, w)
		if k, err := s.GetKubeconfig(ctx, w.ID); err != nil || !bytes.Equal(k, fullKubeconfig) {
			t.Fatalf("cluster %s updated in bulk lost its kubeconfig: %d bytes, %v", w.ID, len(k), err)
		}
	}
	missing := want[2]
	missing.ID = "no-such-cluster"
	err := s.Update(ctx, func(tx store.Tx) error {
		return tx.UpdateClusters(ctx, []domain.Cluster{want[3], missing, want[4]})
	})
	wantErr(t, "a missing cluster among others", err, domain.ErrNotFound)
}

// testCreateClusters: creating clusters in bulk (store.BulkWriter) stores
// them as CreateCluster does, every field set or zero, across statements
// of every size; it refuses a taken ID (of a live or a deleted cluster)
// and an ID twice, and the transaction stays usable after a refusal.
func testCreateClusters(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	_, _, _, _, full, _, _ := full()
	const many = 45 // 32 + 8 + 4 + 1
	want := make([]domain.Cluster, many)
	for i := range want {
		w := full
		w.ID, w.Name, w.ProjectID, w.KubeAttachedAt = fmt.Sprintf("cc-%02d", i), fmt.Sprintf("%s-%d", full.Name, i), "p1", time.Time{}
		w.NodeSeq, w.CreatedAt = int64(i), at(i)
		if i%3 == 1 {
			w.UnmetSince, w.Deleting, w.Unfulfilled, w.UnfulfilledMessage, w.DesiredPreemptibleGPUs = time.Time{}, false, "", "", 0
		}
		want[i] = w
	}
	gone := cluster("cc-gone", "p1", at(0))
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateClusters(ctx, want); err != nil {
			return err
		}
		got, err := tx.GetCluster(ctx, want[40].ID)
		wantEqual(t, "a cluster created in bulk, read in its transaction", got, want[40])
		if err != nil {
			return err
		}
		gone.DeletedAt = at(5)
		if err := tx.CreateCluster(ctx, gone); err != nil {
			return err
		}
		return tx.UpdateCluster(ctx, gone)
	})
	for _, w := range want {
		got, err := s.GetCluster(ctx, w.ID)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "cluster created in bulk", got, w)
	}
	fresh := func(id string) domain.Cluster { return cluster(id, "p1", at(9)) }
	for _, tc := range []struct {
		name string
		cs   []domain.Cluster
	}{
		{"a live cluster's ID", []domain.Cluster{fresh("ok-1"), fresh("cc-07")}},
		{"a deleted cluster's ID", []domain.Cluster{fresh("ok-2"), fresh(gone.ID)}},
		{"an ID twice", []domain.Cluster{fresh("twice"), fresh("twice")}},
	} {
		update(t, s, func(tx store.Tx) error {
			err := tx.CreateClusters(ctx, tc.cs)
			wantErr(t, tc.name, err, domain.ErrConflict)
			// The transaction is still usable.
			_, err = tx.GetCluster(ctx, "cc-00")
			return err
		})
	}
	if c, err := s.GetCluster(ctx, "cc-07"); err != nil || c.Name != want[7].Name {
		t.Fatalf("the live cluster whose ID was asked again: %+v, %v", c, err)
	}
}

// testPruneNodeHistory: archived nodes go, those removed first first, a
// slice at a time; GetNode no longer finds them.
func testPruneNodeHistory(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		for i := range 10 {
			id := fmt.Sprintf("n%02d", i)
			n := node(id, "c1", "m1", domain.NodeRemoved, at(i))
			n.ReadyAt, n.RemovedAt = at(i), at(100-i) // removed in the reverse order of creation
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
			if err := tx.PutUsage(ctx, usageRecord(id, "c1", "p1", at(i), at(100-i), true)); err != nil {
				return err
			}
		}
		return nil
	})
	if n := archive(t, s, 200, 100); n != 10 {
		t.Fatalf("archived %d, want 10", n)
	}
	prune := func(before, limit int) (n int) {
		update(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneNodeHistory(ctx, at(before), limit); return err })
		return n
	}
	if n := prune(95, 3); n != 3 {
		t.Fatalf("first slice %d, want 3", n)
	}
	if n := prune(95, 10); n != 1 {
		t.Fatalf("second slice %d, want the one left removed before minute 95", n)
	}
	for i, gone := range map[int]bool{9: true, 6: true, 5: false, 0: false} {
		_, err := s.GetNode(ctx, fmt.Sprintf("n%02d", i))
		if gone != errors.Is(err, domain.ErrNotFound) {
			t.Errorf("n%02d: %v, gone %v", i, err, gone)
		}
	}
	all, err := s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil || len(all) != 6 {
		t.Fatalf("nodes left %v %v", err, nodeIDs(all))
	}
}

// testPruneLostWork: entries go, those noticed first first.
func testPruneLostWork(t *testing.T, s store.Store) {
	ctx := t.Context()
	var ws []domain.LostWork
	for i := range 5 {
		ws = append(ws, domain.LostWork{NodeID: fmt.Sprint("n", i), ClusterID: "c1", ProjectID: "p1", At: at(10 * i), GPUSeconds: 60})
	}
	update(t, s, func(tx store.Tx) error { return tx.AddLostWork(ctx, ws) })
	var n int
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneLostWork(ctx, at(25), 2); return err })
	if n != 2 {
		t.Fatalf("pruned %d, want 2", n)
	}
	update(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneLostWork(ctx, at(25), 10); return err })
	left, err := s.ListLostWork(ctx, store.LostWorkFilter{})
	if err != nil || n != 1 || len(left) != 2 || left[0].NodeID != "n3" {
		t.Fatalf("pruned %d, left %+v (%v)", n, left, err)
	}
}
