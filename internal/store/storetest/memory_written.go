package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// testMemoryWritten: a watcher is handed the world as it is, then, for
// every commit and only for commits, what it wrote as stored, with its
// tag: the rows of one commit that writes a node, a machine, clusters
// (one fully deleted), a reservation and a node it also removes; an
// empty Written for a commit that writes none of the snapshot's tables;
// nothing for an Update rolled back, refused, or fenced, nor for the
// lease's writes.
func testMemoryWritten(t *testing.T, m store.Memory) {
	ctx := t.Context()
	update(t, m, func(tx store.Tx) error { return seedMemory(ctx, tx) })
	l := &watchLog{}
	if err := m.Watch(ctx, l); err != nil {
		t.Fatal(err)
	}
	if len(l.loads) != 1 || len(l.loads[0].Machines) != 2 || len(l.loads[0].Clusters) != 2 || len(l.loads[0].Nodes) != 1 {
		t.Fatalf("the watcher was loaded with %+v, want the seeded world once", l.loads)
	}
	tagged := store.WithTag(ctx, "planner")
	err := m.Update(tagged, func(tx store.Tx) error {
		_, err := tx.AddEvent(ctx, event("e1", "c1", "n1", domain.ReasonNodeAdded, at(4)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "a commit of an event", summary(l.want(t, "a commit of an event")), writtenIDs{By: "planner"})
	testMemoryUnheard(t, m, l)
	err = m.Update(ctx, func(tx store.Tx) error { return writeMemory(ctx, tx) })
	if err != nil {
		t.Fatal(err)
	}
	w := l.want(t, "a commit of the snapshot's tables")
	wantEqual(t, "what the commit wrote", summary(w), writtenIDs{Nodes: []string{"n1"}, GoneNodes: []string{"n2"},
		Machines: []string{"m2"}, Clusters: []string{"c1"}, GoneClusters: []string{"c2"}, Reserved: true})
	n1, err1 := m.GetNode(ctx, "n1")
	m2, err2 := m.GetMachine(ctx, "m2")
	c1, err3 := m.GetCluster(ctx, "c1")
	rs, err4 := m.ListReservations(ctx)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "the node written, as stored", *w.Nodes[0], n1)
	wantEqual(t, "the machine written, as stored", w.Machines[0], m2)
	wantEqual(t, "the cluster written, as stored", w.Clusters[0], c1)
	sameRows(t, "the reservations", w.Reservations, rs)
	if cs, loaded := m.ClustersNamed("p1", "beta"); !loaded || len(cs) != 1 || cs[0].ID != "c1" {
		t.Fatalf("clusters named beta: %+v (loaded %v), want c1", cs, loaded)
	}
	if cs, _ := m.ClustersNamed("p1", "alpha"); len(cs) != 0 {
		t.Fatalf("clusters named alpha: %+v, want none (renamed, fully deleted)", cs)
	}
	if n, ok, _ := m.ActiveOn("m1"); !ok || n.ID != "n1" {
		t.Fatalf("active on m1: %+v %v, want the draining n1", n, ok)
	}
	if n, ok, _ := m.ActiveOn("m2"); ok {
		t.Fatalf("active on m2: %+v, want none (its node removed)", n)
	}
	update(t, m, func(tx store.Tx) error { _, err := tx.ListMachines(ctx); return err })
	wantEqual(t, "a commit that read", summary(l.want(t, "a commit that read")), writtenIDs{})
}

// testMemoryUnheard: an Update rolled back, refused or fenced, and the
// writes of the lease, are not heard of.
func testMemoryUnheard(t *testing.T, m store.Memory, l *watchLog) {
	ctx := t.Context()
	boom := errors.New("rolled back")
	err := m.Update(ctx, func(tx store.Tx) error {
		n := node("n9", "c1", "m2", domain.NodeReady, at(5))
		return errors.Join(tx.CreateNode(ctx, n), tx.CreateMachine(ctx, machine("m9", at(5))), boom)
	})
	wantErr(t, "rollback", err, boom)
	l.quiet(t, "a rolled back Update")
	err = m.Update(ctx, func(tx store.Tx) error { return tx.UpdateMachine(ctx, machine("nope", at(1))) })
	wantErr(t, "update a missing machine", err, domain.ErrNotFound)
	l.quiet(t, "a refused Update")
	old, _, err := m.AcquireLease(ctx, "a", "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.AcquireLease(ctx, "a", "", time.Minute); err != nil {
		t.Fatal(err)
	}
	err = m.Update(store.WithEpoch(ctx, old.Epoch), func(tx store.Tx) error {
		return tx.CreateMachine(ctx, machine("m8", at(5)))
	})
	wantErr(t, "an Update of a term that is over", err, store.ErrFenced)
	l.quiet(t, "a fenced Update, or the lease's writes")
}

// writeMemory drains n1, takes m2 out of service, renames c1 to beta and
// deletes c2 fully, makes a reservation, and creates n2 on m2 and
// removes it.
func writeMemory(ctx context.Context, tx store.Tx) error {
	n1, err1 := tx.GetNode(ctx, "n1")
	m2, err2 := tx.GetMachine(ctx, "m2")
	c1, err3 := tx.GetCluster(ctx, "c1")
	c2, err4 := tx.GetCluster(ctx, "c2")
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return err
	}
	// Times to the nanosecond, in another zone: the watcher gets them as
	// stored.
	drain := at(6).Add(789).In(time.FixedZone("UTC-7", -7*3600))
	n1.State, n1.DrainStartedAt, n1.Deadline = domain.NodeDraining, drain, drain.Add(time.Minute)
	m2.OutOfService, m2.CooldownUntil = true, drain
	c1.Name = "beta"
	c2.Deleting, c2.DeletedAt = true, at(7)
	n2 := node("n2", "c1", "m2", domain.NodeProvisioning, at(6))
	errs := []error{tx.UpdateNode(ctx, n1), tx.UpdateMachine(ctx, m2), tx.UpdateCluster(ctx, c1), tx.UpdateCluster(ctx, c2),
		tx.CreateReservation(ctx, domain.Reservation{ID: "r1", ProjectID: "p1", Region: "eu-1", GPUType: "H100", CreatedAt: drain}),
		tx.CreateNode(ctx, n2)}
	n2.State, n2.RemovedAt = domain.NodeRemoved, drain
	return errors.Join(append(errs, tx.UpdateNode(ctx, n2))...)
}

// writtenIDs is a Written by the IDs of its rows.
type writtenIDs struct {
	By                                                 any
	Nodes, GoneNodes, Machines, Clusters, GoneClusters []string
	Reserved                                           bool
}

func summary(w store.Written) writtenIDs {
	s := writtenIDs{By: w.By, GoneNodes: w.GoneNodes, GoneClusters: w.GoneClusters, Reserved: w.Reserved}
	for _, n := range w.Nodes {
		s.Nodes = append(s.Nodes, n.ID)
	}
	for _, m := range w.Machines {
		s.Machines = append(s.Machines, m.ID)
	}
	for _, c := range w.Clusters {
		s.Clusters = append(s.Clusters, c.ID)
	}
	return s
}

// watchLog records what a watcher hears.
type watchLog struct {
	loads   []store.Snapshot
	applied []store.Written
	resets  int
}

func (l *watchLog) Load(s store.Snapshot) { l.loads = append(l.loads, s) }
func (l *watchLog) Apply(w store.Written) { l.applied = append(l.applied, w) }
func (l *watchLog) Reset()                { l.resets++ }

// take returns what l heard since it was last asked, and forgets it.
func (l *watchLog) take() []store.Written {
	out := l.applied
	l.applied = nil
	return out
}

// want fails t unless w heard of exactly one commit since it was last
// asked, and returns what it heard.
func (l *watchLog) want(t *testing.T, what string) store.Written {
	t.Helper()
	got := l.take()
	if len(got) != 1 || l.resets > 0 {
		t.Fatalf("%s: the watcher heard of %d commits (reset %d times), want 1", what, len(got), l.resets)
	}
	return got[0]
}

// quiet fails t if w heard of a commit since it was last asked.
func (l *watchLog) quiet(t *testing.T, what string) {
	t.Helper()
	if got := l.take(); len(got) > 0 || l.resets > 0 {
		t.Fatalf("%s: the watcher heard of %d commits (reset %d times), want none", what, len(got), l.resets)
	}
}

// seedMemory writes the world of testMemoryWritten: project p1, machines
// m1 and m2, clusters c1 and c2 (named "alpha"), node n1 ready on m1.
func seedMemory(ctx context.Context, tx store.Tx) error {
	c2 := cluster("c2", "p1", at(2))
	c2.Name = "alpha"
	return errors.Join(tx.CreateProject(ctx, domain.Project{ID: "p1", CreatedAt: at(0)}),
		tx.CreateMachine(ctx, machine("m1", at(1))), tx.CreateMachine(ctx, machine("m2", at(1))),
		tx.CreateCluster(ctx, cluster("c1", "p1", at(1))), tx.CreateCluster(ctx, c2),
		tx.CreateNode(ctx, node("n1", "c1", "m1", domain.NodeReady, at(3))))
}
