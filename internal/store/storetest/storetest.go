// Package storetest is the conformance suite every store.Store backend
// passes. A backend's test calls Run with a way to make fresh databases.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Opener opens one database; every call opens it anew, so that what one
// store wrote and closed another can read.
type Opener func(t *testing.T) store.Store

// NewDB makes a fresh, empty database for one test and returns its Opener.
type NewDB func(t *testing.T) Opener

// Run runs the conformance suite, each test on a database of its own. The
// suite closes every store it opens (Close must tolerate a second call).
func Run(t *testing.T, newDB NewDB) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Projects", testProjects},
		{"Tokens", testTokens},
		{"Reservations", testReservations},
		{"Machines", testMachines},
		{"Clusters", testClusters},
		{"ClusterOrder", testClusterOrder},
		{"ClusterDeleted", testClusterDeleted},
		{"Nodes", testNodes},
		{"NodeFilter", testNodeFilter},
		{"MissingParent", testMissingParent},
		{"Events", testEvents},
		{"EventReplaceNewest", testEventReplaceNewest},
		{"ListEventsPaging", testListEventsPaging},
		{"PruneEvents", testPruneEvents},
		{"Snapshot", testSnapshot},
		{"Rollback", testRollback},
		{"ConflictKeepsTxUsable", testConflictKeepsTxUsable},
		{"ReadOwnWrites", testReadOwnWrites},
		{"RoundTrip", testRoundTrip},
		{"ZeroTimes", testZeroTimes},
		{"TimeEncoding", testTimeEncoding},
		{"NoLostUpdates", testNoLostUpdates},
		{"EventCursorMissesNothing", testEventCursorMissesNothing},
		{"Usage", testUsage},
		{"UnmeteredNodes", testUnmeteredNodes},
		{"UsagePeriods", testUsagePeriods},
		{"LostWork", testLostWork},
		{"WorkSpans", testWorkSpans},
		{"Rollups", testRollups},
		{"RollupLateRows", testRollupLateRows},
		{"ProjectStorage", testProjectStorage},
		{"Budgets", testBudgets},
		{"Prices", testPrices},
		{"Kubeconfig", testKubeconfig},
		{"KubeconfigDroppedWithCluster", testKubeconfigDroppedWithCluster},
		{"Access", testAccess},
		{"NodeLastError", testNodeLastError},
		{"TextIsBounded", testTextIsBounded},
		{"NodeCleanup", testNodeCleanup},
		{"Lease", testLease},
		{"LeaseRace", testLeaseRace},
		{"Fencing", testFencing},
		{"OneLiveNodePerMachine", testOneLiveNodePerMachine},
		{"NodeFilterClusters", testNodeFilterClusters},
		{"UnmetSince", testUnmetSince},
		{"Cached", testCached},
		{"WebhookEndpoints", testWebhookEndpoints},
		{"WebhookDeliveries", testWebhookDeliveries},
		{"WebhookDue", testWebhookDue},
		{"WebhookCursor", testWebhookCursor},
		{"WebhookPrune", testWebhookPrune},
		{"WebhookExpire", testWebhookExpire},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open(t, newDB(t)))
		})
	}
	t.Run("Reopen", func(t *testing.T) {
		t.Parallel()
		testReopen(t, newDB(t))
	})
	runHistory(t, newDB)
}

func open(t *testing.T, o Opener) store.Store {
	t.Helper()
	s := o(t)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return s
}

// t0 has microseconds, which every backend must keep.
var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

func at(minutes int) time.Time { return t0.Add(time.Duration(minutes) * time.Minute) }

func update(t *testing.T, s store.Store, fn func(tx store.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatalf("update: %v", err)
	}
}

// seed creates a project p1, a machine m1 and a cluster c1, the parents
// most rows need.
func seed(t *testing.T, s store.Store) {
	t.Helper()
	update(t, s, func(tx store.Tx) error {
		ctx := t.Context()
		if err := tx.CreateProject(ctx, domain.Project{ID: "p1", CreatedAt: at(0)}); err != nil {
			return err
		}
		if err := tx.CreateMachine(ctx, machine("m1", at(0))); err != nil {
			return err
		}
		return tx.CreateCluster(ctx, cluster("c1", "p1", at(0)))
	})
}

func machine(id string, created time.Time) domain.Machine {
	return domain.Machine{ID: id, Region: "eu-1", GPUType: "H100", GPUs: 8, CreatedAt: created}
}

func cluster(id, project string, created time.Time) domain.Cluster {
	return domain.Cluster{
		ID: id, Name: "name-" + id, ProjectID: project, Region: "eu-1", GPUType: "H100",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, Weight: 1,
		Status: domain.StatusWaiting, CreatedAt: created,
	}
}

func node(id, clusterID, machineID string, state domain.NodeState, created time.Time) domain.Node {
	return domain.Node{
		ID: id, ClusterID: clusterID, MachineID: machineID, Name: "n-" + id,
		Class: domain.Preemptible, GPUs: 8, State: state, CreatedAt: created,
	}
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

func wantEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func ids[T any](xs []T, id func(T) string) []string {
	out := []string{}
	for _, x := range xs {
		out = append(out, id(x))
	}
	return out
}

func clusterIDs(cs []domain.Cluster) []string {
	return ids(cs, func(c domain.Cluster) string { return c.ID })
}
func nodeIDs(ns []domain.Node) []string { return ids(ns, func(n domain.Node) string { return n.ID }) }
func eventIDs(es []domain.Event) []string {
	return ids(es, func(e domain.Event) string { return e.ID })
}

func testProjects(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetProject(ctx, "p1")
	wantErr(t, "get missing project", err, domain.ErrNotFound)
	p1 := domain.Project{ID: "p1", CreatedAt: at(2)}
	p2 := domain.Project{ID: "p2", CreatedAt: at(1)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, p1); err != nil {
			return err
		}
		return tx.CreateProject(ctx, p2)
	})
	got, err := s.GetProject(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "get project", got, p1)
	list, err := s.ListProjects(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "list projects (oldest first)", list, []domain.Project{p2, p1})

	err = s.Update(ctx, func(tx store.Tx) error {
		return tx.CreateProject(ctx, domain.Project{ID: "p1", CreatedAt: at(9)})
	})
	wantErr(t, "create duplicate project", err, domain.ErrConflict)
	got, _ = s.GetProject(ctx, "p1")
	wantEqual(t, "project after duplicate create", got, p1)
}

func testTokens(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	tok := domain.Token{ID: "tok-1", Hash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", ProjectID: "p1",
		Name: "ci — ünïcode", CreatedAt: at(1), ExpiresAt: at(100)}
	op := domain.Token{ID: "tok-op", Hash: "op-hash", Name: "operator", CreatedAt: at(2)}
	_, err := s.TokenByHash(ctx, tok.Hash)
	wantErr(t, "missing token", err, domain.ErrNotFound)
	_, err = s.GetToken(ctx, tok.ID)
	wantErr(t, "missing token", err, domain.ErrNotFound)
	update(t, s, func(tx store.Tx) error { return errors.Join(tx.CreateToken(ctx, tok), tx.CreateToken(ctx, op)) })
	for _, want := range []domain.Token{tok, op} {
		got, err := s.TokenByHash(ctx, want.Hash)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "token by hash", got, want)
		if got, err = s.GetToken(ctx, want.ID); err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "token by ID", got, want)
	}
	if !op.Operator() || tok.Operator() {
		t.Fatal("Operator() is wrong")
	}
	for _, dup := range []domain.Token{tok, {ID: "tok-2", Hash: tok.Hash, ProjectID: "p1"}, {ID: tok.ID, Hash: "other", ProjectID: "p1"}} {
		err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateToken(ctx, dup) })
		wantErr(t, "duplicate token "+dup.ID, err, domain.ErrConflict)
	}
	second := domain.Token{ID: "tok-3", Hash: "h3", ProjectID: "p1", Name: "laptop", CreatedAt: at(3)}
	update(t, s, func(tx store.Tx) error { return tx.CreateToken(ctx, second) })
	list, err := s.ListTokens(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "project's tokens", list, []domain.Token{tok, second})
	ops, err := s.ListTokens(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "operator tokens", ops, []domain.Token{op})
	if none, err := s.ListTokens(ctx, "nope"); err != nil || len(none) != 0 {
		t.Fatalf("tokens of an unknown project: %v, %v", none, err)
	}

	// Revoking (and renaming, changing the expiry) writes those alone.
	tok.Name, tok.RevokedAt, tok.ExpiresAt = "ci-old", at(50), time.Time{}
	update(t, s, func(tx store.Tx) error { return tx.UpdateToken(ctx, tok) })
	got, err := s.TokenByHash(ctx, tok.Hash)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "revoked token", got, tok)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateToken(ctx, domain.Token{ID: "nope"}) })
	wantErr(t, "update a missing token", err, domain.ErrNotFound)

	// Uses: the latest time wins, unknown hashes are skipped, and no
	// epoch is needed.
	if err := s.TouchTokens(ctx, map[string]time.Time{tok.Hash: at(60), op.Hash: at(61), "unknown": at(62)}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchTokens(ctx, map[string]time.Time{tok.Hash: at(55)}); err != nil {
		t.Fatal(err)
	}
	if err := s.TouchTokens(store.WithEpoch(ctx, 1<<40), map[string]time.Time{op.Hash: at(70)}); err != nil {
		t.Fatalf("recording uses with a stale epoch: %v", err)
	}
	for hash, want := range map[string]time.Time{tok.Hash: at(60), op.Hash: at(70)} {
		got, err := s.TokenByHash(ctx, hash)
		if err != nil {
			t.Fatal(err)
		}
		if !got.LastUsedAt.Equal(want) {
			t.Errorf("token %s last used %v, want %v", got.ID, got.LastUsedAt, want)
		}
	}

	// A deleted token is gone by ID and by hash, and from its list.
	update(t, s, func(tx store.Tx) error { return tx.DeleteToken(ctx, tok.ID) })
	_, err = s.TokenByHash(ctx, tok.Hash)
	wantErr(t, "a deleted token by hash", err, domain.ErrNotFound)
	_, err = s.GetToken(ctx, tok.ID)
	wantErr(t, "a deleted token by ID", err, domain.ErrNotFound)
	list, _ = s.ListTokens(ctx, "p1")
	wantEqual(t, "tokens after a delete", list, []domain.Token{second})
	err = s.Update(ctx, func(tx store.Tx) error { return tx.DeleteToken(ctx, tok.ID) })
	wantErr(t, "delete a missing token", err, domain.ErrNotFound)
}

func testReservations(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	r1 := domain.Reservation{ID: "r1", ProjectID: "p1", Region: "eu-1", GPUType: "H100", CreatedAt: at(5)}
	r2 := domain.Reservation{ID: "r2", ProjectID: "p1", Region: "us-2", GPUType: "B200", CreatedAt: at(3)}
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateReservation(ctx, r1); err != nil {
			return err
		}
		return tx.CreateReservation(ctx, r2)
	})
	list, err := s.ListReservations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "reservations", list, []domain.Reservation{r2, r1})
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateReservation(ctx, r1) })
	wantErr(t, "duplicate reservation", err, domain.ErrConflict)
}

func testMachines(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetMachine(ctx, "m1")
	wantErr(t, "missing machine", err, domain.ErrNotFound)
	m1, m2 := machine("m1", at(1)), machine("m2", at(1))
	m2.ReservationID = "r1"
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateMachine(ctx, m2); err != nil {
			return err
		}
		return tx.CreateMachine(ctx, m1)
	})
	list, err := s.ListMachines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "machines (same time: by id)", list, []domain.Machine{m1, m2})

	m1.OutOfService = true
	m1.CooldownUntil = at(30)
	m1.GPUs = 4
	update(t, s, func(tx store.Tx) error { return tx.UpdateMachine(ctx, m1) })
	got, err := s.GetMachine(ctx, "m1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "updated machine", got, m1)

	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateMachine(ctx, machine("nope", at(0))) })
	wantErr(t, "update missing machine", err, domain.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateMachine(ctx, m2) })
	wantErr(t, "duplicate machine", err, domain.ErrConflict)
}

func testClusters(t *testing.T, s store.Store) {
	ctx := t.Context()
	_, err := s.GetCluster(ctx, "c1")
	wantErr(t, "missing cluster", err, domain.ErrNotFound)
	update(t, s, func(tx store.Tx) error {
		for _, p := range []string{"p1", "p2"} {
			if err := tx.CreateProject(ctx, domain.Project{ID: p, CreatedAt: at(0)}); err != nil {
				return err
			}
		}
		return nil
	})
	a := cluster("a", "p1", at(1))
	b := cluster("b", "p2", at(2))
	c := cluster("c", "p1", at(3))
	update(t, s, func(tx store.Tx) error {
		for _, cl := range []domain.Cluster{c, a, b} {
			if err := tx.CreateCluster(ctx, cl); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.GetCluster(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "get cluster", got, a)
	all, err := s.ListClusters(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "all clusters", all, []domain.Cluster{a, b, c})
	p1, err := s.ListClusters(ctx, "p1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "clusters of p1", p1, []domain.Cluster{a, c})
	none, err := s.ListClusters(ctx, "p-none")
	if err != nil {
		t.Fatal(err)
	}
	if len(none) != 0 {
		t.Fatalf("clusters of unknown project: %v", clusterIDs(none))
	}

	a.DesiredPreemptibleGPUs = 64
	a.Status = domain.StatusReady
	a.Unfulfilled = domain.UnfulfilledFairShare
	a.UnfulfilledMessage = "fair share is 32 GPUs"
	a.NodeSeq = 7
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, a) })
	got, _ = s.GetCluster(ctx, "a")
	wantEqual(t, "updated cluster", got, a)

	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateCluster(ctx, cluster("nope", "p1", at(0))) })
	wantErr(t, "update missing cluster", err, domain.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateCluster(ctx, cluster("a", "p1", at(0))) })
	wantErr(t, "duplicate cluster", err, domain.ErrConflict)
}

func testClusterOrder(t *testing.T, s store.Store) {
	ctx := t.Context()
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p1"}); err != nil {
			return err
		}
		// Created in an order that is neither time nor id order.
		for _, c := range []domain.Cluster{
			cluster("y", "p1", at(5)),
			cluster("b", "p1", at(5)),
			cluster("z", "p1", time.Time{}), // zero: before any time
			cluster("a", "p1", at(6)),
			cluster("x", "p1", at(-5)),
		} {
			if err := tx.CreateCluster(ctx, c); err != nil {
				return err
			}
		}
		return nil
	})
	for _, project := range []string{"", "p1"} {
		list, err := s.ListClusters(ctx, project)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, fmt.Sprintf("order of clusters (project %q)", project), clusterIDs(list), []string{"z", "x", "b", "y", "a"})
	}
}

func testClusterDeleted(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	c2 := cluster("c2", "p1", at(1))
	update(t, s, func(tx store.Tx) error { return tx.CreateCluster(ctx, c2) })

	c1, err := s.GetCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	c1.Deleting = true
	c1.Status = domain.StatusDeleting
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, c1) })
	if got, err := s.GetCluster(ctx, "c1"); err != nil || !got.Deleting {
		t.Fatalf("deleting (not yet deleted) cluster: %+v, %v", got, err)
	}

	c1.DeletedAt = at(10)
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, c1) })
	_, err = s.GetCluster(ctx, "c1")
	wantErr(t, "get deleted cluster", err, domain.ErrNotFound)
	update(t, s, func(tx store.Tx) error {
		_, err := tx.GetCluster(ctx, "c1")
		wantErr(t, "get deleted cluster in tx", err, domain.ErrNotFound)
		return nil
	})
	for _, project := range []string{"", "p1"} {
		list, err := s.ListClusters(ctx, project)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, "clusters after delete", clusterIDs(list), []string{"c2"})
	}
	// Its record stays readable for what outlives it.
	if got, err := s.GetClusterRecord(ctx, "c1"); err != nil || !got.DeletedAt.Equal(at(10)) || got.Name != c1.Name {
		t.Fatalf("record of deleted cluster: %+v, %v", got, err)
	}
	_, err = s.GetClusterRecord(ctx, "nope")
	wantErr(t, "record of missing cluster", err, domain.ErrNotFound)
	// A deleted cluster's ID stays taken.
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateCluster(ctx, cluster("c1", "p1", at(20))) })
	wantErr(t, "re-create deleted cluster ID", err, domain.ErrConflict)
}

func testNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	_, err := s.GetNode(ctx, "n1")
	wantErr(t, "missing node", err, domain.ErrNotFound)
	n := node("n1", "c1", "m1", domain.NodeProvisioning, at(1))
	update(t, s, func(tx store.Tx) error { return tx.CreateNode(ctx, n) })
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "node", got, n)

	n.State = domain.NodeDraining
	n.ReadyAt = at(2)
	n.DrainStartedAt = at(3)
	n.Deadline = at(8)
	n.DrainCause = domain.CausePreempted
	n.Notified = true
	update(t, s, func(tx store.Tx) error { return tx.UpdateNode(ctx, n) })
	got, _ = s.GetNode(ctx, "n1")
	wantEqual(t, "updated node", got, n)

	err = s.Update(ctx, func(tx store.Tx) error { return tx.UpdateNode(ctx, node("nope", "c1", "m1", domain.NodeReady, at(0))) })
	wantErr(t, "update missing node", err, domain.ErrNotFound)
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreateNode(ctx, n) })
	wantErr(t, "duplicate node", err, domain.ErrConflict)
}

func testNodeFilter(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateMachine(ctx, machine("m2", at(0))); err != nil {
			return err
		}
		if err := tx.CreateCluster(ctx, cluster("c2", "p1", at(0))); err != nil {
			return err
		}
		for _, n := range []domain.Node{
			node("a", "c1", "m1", domain.NodeRemoved, at(1)),
			node("b", "c1", "m1", domain.NodeReady, at(2)),
			node("c", "c2", "m2", domain.NodeDraining, at(3)),
			node("d", "c2", "m1", domain.NodePending, at(4)),
			node("e", "c1", "m2", domain.NodeRemoved, at(5)),
		} {
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
		}
		return nil
	})
	for _, tc := range []struct {
		f    store.NodeFilter
		want []string
	}{
		{store.NodeFilter{}, []string{"b", "c", "d"}},
		{store.NodeFilter{IncludeRemoved: true}, []string{"a", "b", "c", "d", "e"}},
		{store.NodeFilter{ClusterID: "c1"}, []string{"b"}},
		{store.NodeFilter{ClusterID: "c1", IncludeRemoved: true}, []string{"a", "b", "e"}},
		{store.NodeFilter{MachineID: "m1"}, []string{"b", "d"}},
		{store.NodeFilter{MachineID: "m2", IncludeRemoved: true}, []string{"c", "e"}},
		{store.NodeFilter{ClusterID: "c2", MachineID: "m1"}, []string{"d"}},
		{store.NodeFilter{States: []domain.NodeState{domain.NodeDraining, domain.NodePending}}, []string{"c", "d"}},
		{store.NodeFilter{States: []domain.NodeState{domain.NodeRemoved}}, []string{"a", "e"}},
		{store.NodeFilter{States: []domain.NodeState{domain.NodeReady, domain.NodeRemoved}, ClusterID: "c1"}, []string{"a", "b", "e"}},
		{store.NodeFilter{ClusterID: "nope"}, []string{}},
	} {
		got, err := s.ListNodes(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		wantEqual(t, fmt.Sprintf("ListNodes(%+v)", tc.f), nodeIDs(got), tc.want)
	}
}

// testMissingParent: rows referring to a row that does not exist are
// refused with ErrNotFound.
func testMissingParent(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	for name, fn := range map[string]func(tx store.Tx) error{
		"token of missing project": func(tx store.Tx) error {
			return tx.CreateToken(ctx, domain.Token{ID: "t-h", Hash: "h", ProjectID: "nope"})
		},
		"reservation of missing project": func(tx store.Tx) error {
			return tx.CreateReservation(ctx, domain.Reservation{ID: "r", ProjectID: "nope"})
		},
		"cluster of missing project": func(tx store.Tx) error {
			return tx.CreateCluster(ctx, cluster("c9", "nope", at(0)))
		},
		"node of missing cluster": func(tx store.Tx) error {
			return tx.CreateNode(ctx, node("n9", "nope", "m1", domain.NodeReady, at(0)))
		},
		"node on missing machine": func(tx store.Tx) error {
			return tx.CreateNode(ctx, node("n9", "c1", "nope", domain.NodeReady, at(0)))
		},
	} {
		wantErr(t, name, s.Update(ctx, fn), domain.ErrNotFound)
	}
}

func event(id, clusterID, nodeID string, reason domain.EventReason, ts time.Time) domain.Event {
	return domain.Event{
		ID: id, ClusterID: clusterID, NodeID: nodeID, NodeName: "name-" + nodeID,
		Reason: reason, Message: "message " + id, Timestamp: ts,
	}
}

func addEvents(t *testing.T, s store.Store, es ...domain.Event) []domain.Event {
	t.Helper()
	var out []domain.Event
	update(t, s, func(tx store.Tx) error {
		out = out[:0]
		for _, e := range es {
			got, err := tx.AddEvent(t.Context(), e)
			if err != nil {
				return err
			}
			out = append(out, got)
		}
		return nil
	})
	return out
}

func testEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	added := addEvents(t, s,
		event("e1", "c1", "n1", domain.ReasonNodeAdded, at(1)),
		event("e2", "c1", "n2", domain.ReasonNodeAdded, at(2)),
		event("e3", "c1", "", domain.ReasonTargetUnfulfilled, at(3)),
		event("e4", "c2", "n1", domain.ReasonNodeAdded, at(4)), // other cluster: its own key
	)
	for i, e := range added {
		if e.Seq <= 0 || (i > 0 && e.Seq <= added[i-1].Seq) {
			t.Fatalf("seqs not increasing: %v", added)
		}
	}
	all, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events", all, added)

	// Same key: the new event replaces e1 and sorts after everything.
	re := addEvents(t, s, event("e5", "c1", "n1", domain.ReasonNodeAdded, at(5)))[0]
	if re.Seq <= added[3].Seq {
		t.Fatalf("replacement seq %d not above %d", re.Seq, added[3].Seq)
	}
	// Same key for a cluster-level event.
	re2 := addEvents(t, s, event("e6", "c1", "", domain.ReasonTargetUnfulfilled, at(6)))[0]
	c1, err := s.ListEvents(ctx, store.EventFilter{ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events of c1 after replacement", c1, []domain.Event{added[1], re, re2})
	c2, err := s.ListEvents(ctx, store.EventFilter{ClusterID: "c2"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events of c2", c2, []domain.Event{added[3]})
}

func testEventReplaceNewest(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := addEvents(t, s, event("e1", "c1", "n1", domain.ReasonNodeDrained, at(1)))[0]
	// Replace the newest event, in a transaction of its own each time.
	second := addEvents(t, s, event("e2", "c1", "n1", domain.ReasonNodeDrained, at(2)))[0]
	third := addEvents(t, s, event("e3", "c1", "n1", domain.ReasonNodeDrained, at(3)))[0]
	if !(first.Seq < second.Seq && second.Seq < third.Seq) {
		t.Fatalf("replacing the newest event reused a seq: %d, %d, %d", first.Seq, second.Seq, third.Seq)
	}
	// A reader holding the cursor of the replaced event sees the new one.
	got, err := s.ListEvents(ctx, store.EventFilter{AfterSeq: second.Seq})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events after cursor", got, []domain.Event{third})
	// Twice in one transaction: one row remains, the last.
	both := addEvents(t, s,
		event("e4", "c1", "n1", domain.ReasonNodeDrained, at(4)),
		event("e5", "c1", "n1", domain.ReasonNodeDrained, at(5)))
	got, err = s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events after double replace", got, both[1:])
}

func testListEventsPaging(t *testing.T, s store.Store) {
	ctx := t.Context()
	var es []domain.Event
	for i := range 10 {
		cl := "c1"
		if i%3 == 2 {
			cl = "c2"
		}
		es = append(es, event(fmt.Sprintf("e%d", i), cl, fmt.Sprintf("n%d", i), domain.ReasonNodeAdded, at(i)))
	}
	added := addEvents(t, s, es...)

	// Page through c1 three at a time.
	var paged []domain.Event
	after := int64(0)
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := s.ListEvents(ctx, store.EventFilter{ClusterID: "c1", AfterSeq: after, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d events, limit 3", len(page))
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1].Seq
	}
	wantEqual(t, "paged events of c1", eventIDs(paged), []string{"e0", "e1", "e3", "e4", "e6", "e7", "e9"})

	got, err := s.ListEvents(ctx, store.EventFilter{AfterSeq: added[4].Seq, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events after e4, limit 2", got, added[5:7])
	got, err = s.ListEvents(ctx, store.EventFilter{AfterSeq: added[9].Seq})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("events after the last: %v", eventIDs(got))
	}
}

func testPruneEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	added := addEvents(t, s,
		event("e0", "c1", "n0", domain.ReasonNodeAdded, at(0)),
		event("e1", "c1", "n1", domain.ReasonNodeAdded, at(1)),
		event("e2", "c2", "n2", domain.ReasonNodeAdded, at(2)),
		event("e3", "c1", "n3", domain.ReasonNodeAdded, at(3)),
	)
	prune := func(before time.Time) int {
		var n int
		update(t, s, func(tx store.Tx) (err error) {
			n, err = tx.PruneEvents(ctx, before)
			return err
		})
		return n
	}
	if n := prune(time.Time{}); n != 0 {
		t.Fatalf("prune before zero time: %d", n)
	}
	if n := prune(at(2)); n != 2 {
		t.Fatalf("prune before %v: %d deleted, want 2", at(2), n)
	}
	got, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events after prune (the boundary is kept)", got, added[2:])
	if n := prune(at(2)); n != 0 {
		t.Fatalf("second prune: %d deleted", n)
	}
	// An event without a timestamp is older than any time.
	addEvents(t, s, event("ez", "c1", "nz", domain.ReasonNodeAdded, time.Time{}))
	if n := prune(at(3)); n != 2 {
		t.Fatalf("prune with a zero-time event: %d deleted, want 2", n)
	}
	got, _ = s.ListEvents(ctx, store.EventFilter{})
	wantEqual(t, "events after second prune", got, added[3:])
}

func testSnapshot(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	r := domain.Reservation{ID: "r1", ProjectID: "p1", Region: "eu-1", GPUType: "H100", CreatedAt: at(1)}
	m2 := machine("m2", at(1))
	m2.ReservationID = "r1"
	var c1, gone domain.Cluster
	update(t, s, func(tx store.Tx) error {
		var err error
		if c1, err = tx.GetCluster(ctx, "c1"); err != nil {
			return err
		}
		gone = cluster("gone", "p1", at(1))
		gone.DeletedAt = at(2)
		for _, err := range []error{
			tx.CreateReservation(ctx, r),
			tx.CreateMachine(ctx, m2),
			tx.CreateCluster(ctx, gone),
			tx.CreateNode(ctx, node("live", "c1", "m1", domain.NodeReady, at(1))),
			tx.CreateNode(ctx, node("draining", "c1", "m2", domain.NodeDraining, at(2))),
			tx.CreateNode(ctx, node("removed", "c1", "m2", domain.NodeRemoved, at(3))),
		} {
			if err != nil {
				return err
			}
		}
		return nil
	})
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m1, _ := s.GetMachine(ctx, "m1")
	wantEqual(t, "snapshot machines", snap.Machines, []domain.Machine{m1, m2})
	wantEqual(t, "snapshot reservations", snap.Reservations, []domain.Reservation{r})
	wantEqual(t, "snapshot clusters (deleted excluded)", snap.Clusters, []domain.Cluster{c1})
	wantEqual(t, "snapshot nodes (removed excluded)", nodeIDs(store.Values(snap.Nodes)), []string{"live", "draining"})
	live, _ := s.GetNode(ctx, "live")
	wantEqual(t, "snapshot node", *snap.Nodes[0], live)
}

func testRollback(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	before, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err = s.Update(ctx, func(tx store.Tx) error {
		c, err := tx.GetCluster(ctx, "c1")
		if err != nil {
			return err
		}
		c.NodeSeq = 99
		m, _ := tx.GetMachine(ctx, "m1")
		m.OutOfService = true
		for _, err := range []error{
			tx.CreateProject(ctx, domain.Project{ID: "p2"}),
			tx.CreateToken(ctx, domain.Token{ID: "t-h", Hash: "h", ProjectID: "p1"}),
			tx.CreateReservation(ctx, domain.Reservation{ID: "r", ProjectID: "p1"}),
			tx.CreateMachine(ctx, machine("m2", at(1))),
			tx.CreateCluster(ctx, cluster("c2", "p1", at(1))),
			tx.CreateNode(ctx, node("n", "c1", "m1", domain.NodeReady, at(1))),
			tx.UpdateCluster(ctx, c),
			tx.UpdateMachine(ctx, m),
		} {
			if err != nil {
				return err
			}
		}
		if _, err := tx.AddEvent(ctx, event("e", "c1", "n", domain.ReasonNodeAdded, at(1))); err != nil {
			return err
		}
		return fmt.Errorf("apply plan: %w", boom)
	})
	wantErr(t, "update returns fn's error", err, boom)

	after, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "state after rollback", after, before)
	if ps, _ := s.ListProjects(ctx); len(ps) != 1 {
		t.Fatalf("projects after rollback: %v", ps)
	}
	if _, err := s.TokenByHash(ctx, "h"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("token after rollback: %v", err)
	}
	if es, _ := s.ListEvents(ctx, store.EventFilter{}); len(es) != 0 {
		t.Fatalf("events after rollback: %v", es)
	}
	if ns, _ := s.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true}); len(ns) != 0 {
		t.Fatalf("nodes after rollback: %v", ns)
	}

	// A panic rolls back too, and the store stays usable.
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("panic in fn was swallowed")
			}
		}()
		_ = s.Update(ctx, func(tx store.Tx) error {
			if err := tx.CreateProject(ctx, domain.Project{ID: "p3"}); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if _, err := s.GetProject(ctx, "p3"); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("project written by a panicking update: %v", err)
	}
	update(t, s, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "p4"}) })
}

// testConflictKeepsTxUsable: a caller may branch on ErrConflict and go on
// writing in the same transaction.
func testConflictKeepsTxUsable(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		for _, err := range []error{
			tx.CreateProject(ctx, domain.Project{ID: "p1"}),
			tx.CreateMachine(ctx, machine("m1", at(0))),
			tx.CreateCluster(ctx, cluster("c1", "p1", at(0))),
		} {
			if !errors.Is(err, domain.ErrConflict) {
				return fmt.Errorf("want conflict, got %v", err)
			}
		}
		if err := tx.UpdateMachine(ctx, machine("nope", at(0))); !errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("want not found, got %v", err)
		}
		if _, err := tx.GetNode(ctx, "nope"); !errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("want not found, got %v", err)
		}
		return tx.CreateProject(ctx, domain.Project{ID: "p2"})
	})
	if _, err := s.GetProject(ctx, "p2"); err != nil {
		t.Fatalf("write after conflict lost: %v", err)
	}
}

func testReadOwnWrites(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p2", CreatedAt: at(1)}); err != nil {
			return err
		}
		if _, err := tx.GetProject(ctx, "p2"); err != nil {
			return fmt.Errorf("own project: %w", err)
		}
		if ps, err := tx.ListProjects(ctx); err != nil || len(ps) != 2 {
			return fmt.Errorf("own projects: %v, %v", ps, err)
		}
		if err := tx.CreateToken(ctx, domain.Token{ID: "t-h", Hash: "h", ProjectID: "p2"}); err != nil {
			return err
		}
		if _, err := tx.TokenByHash(ctx, "h"); err != nil {
			return fmt.Errorf("own token: %w", err)
		}
		if err := tx.CreateReservation(ctx, domain.Reservation{ID: "r", ProjectID: "p2"}); err != nil {
			return err
		}
		if rs, err := tx.ListReservations(ctx); err != nil || len(rs) != 1 {
			return fmt.Errorf("own reservations: %v, %v", rs, err)
		}
		m := machine("m2", at(1))
		if err := tx.CreateMachine(ctx, m); err != nil {
			return err
		}
		m.OutOfService = true
		if err := tx.UpdateMachine(ctx, m); err != nil {
			return err
		}
		if got, err := tx.GetMachine(ctx, "m2"); err != nil || !got.OutOfService {
			return fmt.Errorf("own machine update: %+v, %v", got, err)
		}
		if ms, err := tx.ListMachines(ctx); err != nil || len(ms) != 2 {
			return fmt.Errorf("own machines: %v, %v", ms, err)
		}
		c := cluster("c2", "p2", at(1))
		if err := tx.CreateCluster(ctx, c); err != nil {
			return err
		}
		if cs, err := tx.ListClusters(ctx, "p2"); err != nil || len(cs) != 1 {
			return fmt.Errorf("own clusters: %v, %v", cs, err)
		}
		c.DeletedAt = at(2)
		if err := tx.UpdateCluster(ctx, c); err != nil {
			return err
		}
		if _, err := tx.GetCluster(ctx, "c2"); !errors.Is(err, domain.ErrNotFound) {
			return fmt.Errorf("own cluster deletion not seen: %v", err)
		}
		n := node("n", "c1", "m2", domain.NodeReady, at(1))
		if err := tx.CreateNode(ctx, n); err != nil {
			return err
		}
		n.State = domain.NodeRemoved
		if err := tx.UpdateNode(ctx, n); err != nil {
			return err
		}
		if got, err := tx.GetNode(ctx, "n"); err != nil || got.State != domain.NodeRemoved {
			return fmt.Errorf("own node update: %+v, %v", got, err)
		}
		if ns, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: "m2"}); err != nil || len(ns) != 0 {
			return fmt.Errorf("own removed node listed: %v, %v", ns, err)
		}
		e, err := tx.AddEvent(ctx, event("e", "c1", "n", domain.ReasonNodeRemoved, at(1)))
		if err != nil {
			return err
		}
		if es, err := tx.ListEvents(ctx, store.EventFilter{}); err != nil || !reflect.DeepEqual(es, []domain.Event{e}) {
			return fmt.Errorf("own events: %v, %v", es, err)
		}
		if n, err := tx.PruneEvents(ctx, at(2)); err != nil || n != 1 {
			return fmt.Errorf("prune own event: %d, %v", n, err)
		}
		return nil
	})
}

// full returns values with every field set to something other than its
// zero value, so that a field the store forgets shows up.
func full() (domain.Project, domain.Token, domain.Reservation, domain.Machine, domain.Cluster, domain.Node, domain.Event) {
	p := domain.Project{ID: "proj-1", CreatedAt: at(1)}
	tok := domain.Token{ID: "tok-ab12", Hash: "ab12", ProjectID: p.ID, Name: "deploy — ünïcode ✓", CreatedAt: at(2),
		ExpiresAt: at(20), RevokedAt: at(15), LastUsedAt: at(14)}
	r := domain.Reservation{ID: "res-1", ProjectID: p.ID, Region: "us-east-2", GPUType: "B200", CreatedAt: at(3)}
	m := domain.Machine{
		ID: "mach-1", Region: "us-east-2", GPUType: "B200", GPUs: 8, ReservationID: r.ID,
		OutOfService: true, CooldownUntil: at(4), CreatedAt: at(5),
		Failures: 3, OutOfServiceReason: "its nodes did not register Ready 3 times in a row — ünïcode ✓",
		MaintenanceAt: at(15), ClaimedBy: "clu-0", PreemptAt: at(16),
	}
	c := domain.Cluster{
		ID: "clu-1", Name: "training", ProjectID: p.ID, Region: "us-east-2", GPUType: "B200",
		Type: domain.ClusterKubernetes, BillingType: domain.BillingReserved, NumGPUs: 16,
		DesiredPreemptibleGPUs: 1 << 40, Weight: 3, Status: domain.StatusDegraded,
		Unfulfilled: domain.UnfulfilledCoolingDown, UnfulfilledMessage: "cooling down until 10:00 — ünïcode ✓",
		Deleting: true, NodeSeq: 1<<62 + 1, CreatedAt: at(6), DeletedAt: time.Time{},
		PreemptibleGPUTypes: []string{"B200", "H200"}, PreemptibleStrategy: "price-capacity-optimized", MaxPreemptiblePrice: "1.60",
		StartsAt: at(17), ActiveAt: at(16),
		// KubeAttachedAt is written by SetKubeconfig only: see attachFull.
	}
	n := domain.Node{
		ID: "node-1", ClusterID: c.ID, MachineID: m.ID, Name: domain.NodeName(domain.Preemptible, 42),
		Class: domain.Preemptible, GPUs: 8, State: domain.NodeRemoved, CreatedAt: at(7), ReadyAt: at(8),
		DrainStartedAt: at(9), Deadline: at(14), DrainCause: domain.CauseFairShare, Notified: true,
		DrainedAt: at(12), Outcome: domain.OutcomeEarly, RemovedAt: at(13),
		LastError:      "provision hook: exit status 1: \"no route to host\" — ünïcode ✓",
		CleanupPending: true, ProvisioningAt: at(7).Add(time.Second), ClassSince: at(10), GPUType: "B200",
	}
	e := domain.Event{
		ID: "ev-1", ClusterID: c.ID, NodeID: n.ID, NodeName: n.Name, Reason: domain.ReasonPreemptionNotified,
		Message: "node will be removed at 09:40 'quoted' \"double\"", Timestamp: at(9), Deadline: at(14),
	}
	return p, tok, r, m, c, n, e
}

// fullKubeconfig is the sealed kubeconfig attachFull attaches: any bytes,
// NUL and invalid UTF-8 included.
var fullKubeconfig = append([]byte{1, 0, 0xff, 0xfe}, bytes.Repeat([]byte("sealed\x00"), 1000)...)

// attachFull attaches fullKubeconfig to c in tx, records an access check
// with every field set, and sets c.KubeAttachedAt and c.Access as the
// store will return them.
func attachFull(ctx context.Context, tx store.Tx, c *domain.Cluster) error {
	c.KubeAttachedAt = at(15)
	c.Access = fullAccess()
	if err := tx.SetKubeconfig(ctx, c.ID, fullKubeconfig, c.KubeAttachedAt); err != nil {
		return err
	}
	return tx.SetAccess(ctx, c.ID, c.Access)
}

// fullAccess has every field set, with text JSON must escape.
func fullAccess() domain.Access {
	return domain.Access{CheckedAt: at(16), Missing: []domain.MissingPermission{
		{Permission: "delete pods", Essential: true, Effect: "no \"SIGTERM\"\n\u00e9", Since: at(16)},
		{Permission: "patch pods/status", Effect: "Jobs count it", Since: at(17), Detail: `pods "x" is forbidden: <b>`},
	}}
}

func testRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, tok, r, m, c, n, e := full()
	var got domain.Event
	update(t, s, func(tx store.Tx) error {
		for _, err := range []error{
			tx.CreateProject(ctx, p), tx.CreateToken(ctx, tok), tx.CreateReservation(ctx, r),
			tx.CreateMachine(ctx, m), tx.CreateCluster(ctx, c), tx.CreateNode(ctx, n),
			attachFull(ctx, tx, &c),
		} {
			if err != nil {
				return err
			}
		}
		var err error
		got, err = tx.AddEvent(ctx, e)
		return err
	})
	e.Seq = got.Seq
	wantEqual(t, "AddEvent result", got, e)
	checkFull(t, s, p, tok, r, m, c, n, e)

	// Update writes every field.
	m2 := m
	m2.Region, m2.GPUType, m2.GPUs, m2.ReservationID, m2.OutOfService = "eu-1", "H100", 4, "", false
	m2.CooldownUntil, m2.CreatedAt = time.Time{}, at(50)
	c2 := c
	c2.Name, c2.ProjectID, c2.Region, c2.GPUType = "renamed", p.ID, "eu-1", "H100"
	c2.BillingType, c2.NumGPUs, c2.DesiredPreemptibleGPUs, c2.Weight = domain.BillingOnDemand, 8, 0, 1
	c2.Status, c2.Unfulfilled, c2.UnfulfilledMessage = domain.StatusReady, domain.UnfulfilledNone, ""
	c2.Deleting, c2.NodeSeq, c2.CreatedAt = false, 43, at(51)
	n2 := domain.Node{ID: n.ID, ClusterID: c.ID, MachineID: m.ID}
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.UpdateMachine(ctx, m2), tx.UpdateCluster(ctx, c2), tx.UpdateNode(ctx, n2))
	})
	checkFull(t, s, p, tok, r, m2, c2, n2, e)
	if k, err := s.GetKubeconfig(ctx, c.ID); err != nil || !bytes.Equal(k, fullKubeconfig) {
		t.Fatalf("kubeconfig after UpdateCluster: %d bytes, %v", len(k), err)
	}
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.UpdateMachine(ctx, m), tx.UpdateCluster(ctx, c), tx.UpdateNode(ctx, n))
	})
	checkFull(t, s, p, tok, r, m, c, n, e)
}

func checkFull(t *testing.T, s store.Store, p domain.Project, tok domain.Token, r domain.Reservation,
	m domain.Machine, c domain.Cluster, n domain.Node, e domain.Event) {
	t.Helper()
	ctx := t.Context()
	gp, err := s.GetProject(ctx, p.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "project", gp, p)
	gt, err := s.TokenByHash(ctx, tok.Hash)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "token", gt, tok)
	gr, err := s.ListReservations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "reservations", gr, []domain.Reservation{r})
	gm, err := s.GetMachine(ctx, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "machine", gm, m)
	gc, err := s.GetCluster(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "cluster", gc, c)
	gn, err := s.GetNode(ctx, n.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "node", gn, n)
	ge, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events", ge, []domain.Event{e})
}

func testZeroTimes(t *testing.T, s store.Store) {
	ctx := t.Context()
	p := domain.Project{ID: "p"}
	m := domain.Machine{ID: "m"}
	c := domain.Cluster{ID: "c", ProjectID: "p"}
	n := domain.Node{ID: "n", ClusterID: "c", MachineID: "m"}
	var e domain.Event
	update(t, s, func(tx store.Tx) error {
		if err := errors.Join(tx.CreateProject(ctx, p), tx.CreateToken(ctx, domain.Token{ID: "t-h", Hash: "h", ProjectID: "p"}),
			tx.CreateReservation(ctx, domain.Reservation{ID: "r", ProjectID: "p"}),
			tx.CreateMachine(ctx, m), tx.CreateCluster(ctx, c), tx.CreateNode(ctx, n)); err != nil {
			return err
		}
		var err error
		e, err = tx.AddEvent(ctx, domain.Event{})
		return err
	})
	checkFull(t, s, p, domain.Token{ID: "t-h", Hash: "h", ProjectID: "p"}, domain.Reservation{ID: "r", ProjectID: "p"}, m, c, n, e)
	if e.Seq == 0 || !e.Timestamp.IsZero() || !e.Deadline.IsZero() {
		t.Fatalf("zero event: %+v", e)
	}
}

func testTimeEncoding(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Nanoseconds and a zone other than UTC: read back as the same
	// instant, truncated to the microsecond, in UTC.
	zone := time.FixedZone("UTC-7", -7*3600)
	in := time.Date(2025, 1, 2, 3, 4, 5, 123456789, zone)
	want := time.Date(2025, 1, 2, 10, 4, 5, 123456000, time.UTC)
	pre := time.Date(1969, 12, 31, 23, 59, 59, 999999000, time.UTC) // before the Unix epoch
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	var added []domain.Event
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateMachine(ctx, domain.Machine{ID: "m", CreatedAt: in, CooldownUntil: far}); err != nil {
			return err
		}
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: pre}); err != nil {
			return err
		}
		e, err := tx.AddEvent(ctx, domain.Event{ID: "e", Timestamp: in, Deadline: pre})
		added = append(added, e)
		return err
	})
	m, err := s.GetMachine(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "machine created_at", m.CreatedAt, want)
	wantEqual(t, "machine cooldown (year 9999)", m.CooldownUntil, far)
	p, err := s.GetProject(ctx, "p")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "project created before 1970", p.CreatedAt, pre)
	es, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "event read back as AddEvent returned it", es, added)
	wantEqual(t, "event timestamp", es[0].Timestamp, want)
	wantEqual(t, "event deadline", es[0].Deadline, pre)
}

// testNoLostUpdates: concurrent read-modify-write transactions on one row
// all take effect, each on the value the previous one wrote. This is what
// keeps a node number (or a machine) from being handed out twice.
func testNoLostUpdates(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	assigned := make(chan int64, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var seq int64
			errs <- s.Update(ctx, func(tx store.Tx) error {
				c, err := tx.GetCluster(ctx, "c1")
				if err != nil {
					return err
				}
				c.NodeSeq++
				seq = c.NodeSeq
				if err := tx.UpdateCluster(ctx, c); err != nil {
					return err
				}
				_, err = tx.AddEvent(ctx, event(fmt.Sprintf("e%d", w), "c1", fmt.Sprintf("n%d", seq), domain.ReasonNodeAdded, at(w)))
				return err
			})
			assigned <- seq
		}()
	}
	wg.Wait()
	close(errs)
	close(assigned)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent update: %v", err)
		}
	}
	seen := map[int64]bool{}
	for seq := range assigned {
		if seen[seq] {
			t.Fatalf("node number %d assigned twice", seq)
		}
		seen[seq] = true
	}
	c, err := s.GetCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c.NodeSeq != workers {
		t.Fatalf("NodeSeq = %d after %d increments", c.NodeSeq, workers)
	}
	es, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != workers {
		t.Fatalf("%d events from %d transactions", len(es), workers)
	}
}

// testEventCursorMissesNothing: a reader paging by Seq never skips an
// event, even when transactions adding events overlap. The danger is a
// transaction that draws a Seq, commits after a later transaction's larger
// Seq is already visible, and so lands behind the reader's cursor.
func testEventCursorMissesNothing(t *testing.T, s store.Store) {
	ctx := t.Context()
	drew, release := make(chan struct{}, 1), make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	wg.Add(2)
	go func() { // slow: draws a Seq, then waits before committing
		defer wg.Done()
		errs <- s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.AddEvent(ctx, event("slow", "c1", "n1", domain.ReasonNodeAdded, at(1)))
			select {
			case drew <- struct{}{}:
			default: // a retry: the test already moved on
			}
			<-release
			return err
		})
	}()
	<-drew
	go func() { // fast: starts later, may commit first
		defer wg.Done()
		errs <- s.Update(ctx, func(tx store.Tx) error {
			_, err := tx.AddEvent(ctx, event("fast", "c1", "n2", domain.ReasonNodeAdded, at(2)))
			return err
		})
	}()
	// Read while the slow transaction is open, as a watcher would.
	var seen []domain.Event
	cursor := int64(0)
	for range 20 {
		page, err := s.ListEvents(ctx, store.EventFilter{AfterSeq: cursor})
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 0 {
			seen = append(seen, page...)
			cursor = page[len(page)-1].Seq
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	rest, err := s.ListEvents(ctx, store.EventFilter{AfterSeq: cursor})
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, rest...)
	if len(seen) != 2 {
		all, _ := s.ListEvents(ctx, store.EventFilter{})
		t.Fatalf("reader paging by seq saw %v; events are %v", seen, all)
	}
}

func testReopen(t *testing.T, o Opener) {
	ctx := t.Context()
	s := open(t, o)
	p, tok, r, m, c, n, e := full()
	update(t, s, func(tx store.Tx) error {
		if err := errors.Join(tx.CreateProject(ctx, p), tx.CreateToken(ctx, tok), tx.CreateReservation(ctx, r),
			tx.CreateMachine(ctx, m), tx.CreateCluster(ctx, c), tx.CreateNode(ctx, n)); err != nil {
			return err
		}
		if err := attachFull(ctx, tx, &c); err != nil {
			return err
		}
		var err error
		e, err = tx.AddEvent(ctx, e)
		return err
	})
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s = open(t, o)
	checkFull(t, s, p, tok, r, m, c, n, e)
	if k, err := s.GetKubeconfig(ctx, c.ID); err != nil || !bytes.Equal(k, fullKubeconfig) {
		t.Fatalf("kubeconfig after reopen: %d bytes, %v", len(k), err)
	}
	// Seqs keep increasing across restarts: readers' cursors stay valid.
	e2, e3 := e, e
	e2.ID, e2.Reason = "ev-2", domain.ReasonNodeDrained
	update(t, s, func(tx store.Tx) error {
		var err error
		e2, err = tx.AddEvent(ctx, e2)
		return err
	})
	if e2.Seq <= e.Seq {
		t.Fatalf("seq after reopen %d, before %d", e2.Seq, e.Seq)
	}
	// Opening twice at once (a second process, a CLI) works too.
	s2 := open(t, o)
	update(t, s2, func(tx store.Tx) error {
		var err error
		e3, err = tx.AddEvent(ctx, e3) // replaces e
		return err
	})
	got, err := s.ListEvents(ctx, store.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "events seen by the first store", got, []domain.Event{e2, e3})
}

func usageRecord(node, cluster, project string, start, end time.Time, final bool) domain.UsageRecord {
	return domain.UsageRecord{
		NodeID: node, NodeName: "gpu-preemptible-dp-1", ClusterID: cluster, ClusterName: "name-" + cluster,
		ProjectID: project, Region: "eu-1", GPUType: "H100", Class: domain.Preemptible,
		BillingType: domain.BillingOnDemand, ReservationID: "r1", GPUs: 8, Start: start, End: end, Final: final,
		MaxRateMicros: 1_600_000, // a capped cluster's: kept as written
	}
}

func testUsage(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := usageRecord("n1", "c1", "p1", at(0), at(10), false)
	b := usageRecord("n2", "c2", "p2", at(5), at(20), true)
	c := usageRecord("n3", "c1", "p1", at(30), at(40), true)
	update(t, s, func(tx store.Tx) error {
		for _, u := range []domain.UsageRecord{a, b, c} {
			if err := tx.PutUsage(ctx, u); err != nil {
				return err
			}
		}
		return nil
	})
	all, err := s.ListUsage(ctx, store.UsageFilter{})
	if err != nil || !reflect.DeepEqual(all, []domain.UsageRecord{a, b, c}) {
		t.Fatalf("all usage: %v\n%+v", err, all)
	}
	if open, _ := s.ListUsage(ctx, store.UsageFilter{Open: true}); !reflect.DeepEqual(open, []domain.UsageRecord{a}) {
		t.Fatalf("open usage: %+v", open)
	}
	// Rewriting a record replaces it.
	a.End, a.Final = at(12), true
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, a) })
	got, _ := s.ListUsage(ctx, store.UsageFilter{ProjectID: "p1"})
	if !reflect.DeepEqual(got, []domain.UsageRecord{a, c}) {
		t.Fatalf("p1 usage after rewrite: %+v", got)
	}
	if open, _ := s.ListUsage(ctx, store.UsageFilter{Open: true}); len(open) != 0 {
		t.Fatalf("open records after the rewrite: %+v", open)
	}
	got, _ = s.ListUsage(ctx, store.UsageFilter{ClusterID: "c2"})
	if !reflect.DeepEqual(got, []domain.UsageRecord{b}) {
		t.Fatalf("c2 usage: %+v", got)
	}
	// Overlap with [from, to): touching ends do not overlap.
	got, _ = s.ListUsage(ctx, store.UsageFilter{From: at(12), To: at(30)})
	if !reflect.DeepEqual(got, []domain.UsageRecord{b}) {
		t.Fatalf("usage overlapping [12, 30): %+v", got)
	}
	got, _ = s.ListUsage(ctx, store.UsageFilter{From: at(11), To: at(31)})
	if len(got) != 3 {
		t.Fatalf("usage overlapping [11, 31): %+v", got)
	}
	// A stale cut never shortens a bill: an older, shorter running record
	// does not replace a longer one, and nothing replaces a final record.
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("n4", "c1", "p1", at(0), at(30), false)) })
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("n4", "c1", "p1", at(0), at(20), false)) })
	if got, _ := s.ListUsage(ctx, store.UsageFilter{From: at(25), To: at(26)}); len(got) != 1 || !got[0].End.Equal(at(30)) {
		t.Fatalf("shorter running record replaced a longer one: %+v", got)
	}
	// A final record may end earlier (the stop point is known now).
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("n4", "c1", "p1", at(0), at(25), true)) })
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("n4", "c1", "p1", at(0), at(40), false)) })
	got, _ = s.ListUsage(ctx, store.UsageFilter{From: at(24), To: at(26)})
	if len(got) != 1 || !got[0].End.Equal(at(25)) || !got[0].Final {
		t.Fatalf("final record replaced: %+v", got)
	}
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("n4", "c1", "p1", at(0), at(40), true)) })
	if got, _ = s.ListUsage(ctx, store.UsageFilter{From: at(24), To: at(26)}); !got[0].End.Equal(at(25)) {
		t.Fatalf("final record replaced by another final one: %+v", got)
	}

	// Rolled back writes leave nothing.
	err = s.Update(ctx, func(tx store.Tx) error {
		if err := tx.PutUsage(ctx, usageRecord("n9", "c9", "p9", at(0), at(1), true)); err != nil {
			return err
		}
		return errors.New("abort")
	})
	if err == nil {
		t.Fatal("want the abort")
	}
	if got, _ := s.ListUsage(ctx, store.UsageFilter{ProjectID: "p9"}); len(got) != 0 {
		t.Fatalf("rolled back usage kept: %+v", got)
	}
}

func testUnmeteredNodes(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		if err := tx.CreateMachine(ctx, machine("m2", at(0))); err != nil {
			return err
		}
		if err := tx.CreateMachine(ctx, machine("m3", at(0))); err != nil {
			return err
		}
		if err := tx.CreateMachine(ctx, machine("m4", at(0))); err != nil {
			return err
		}
		never := node("never-ready", "c1", "m1", domain.NodeProvisioning, at(1))
		running := node("running", "c1", "m2", domain.NodeReady, at(2))
		running.ReadyAt = at(3)
		gone := node("gone", "c1", "m3", domain.NodeRemoved, at(4))
		gone.ReadyAt, gone.RemovedAt = at(5), at(9)
		draining := node("draining", "c1", "m4", domain.NodeDraining, at(6))
		draining.ReadyAt, draining.DrainStartedAt = at(7), at(8)
		for _, n := range []domain.Node{never, running, gone, draining} {
			if err := tx.CreateNode(ctx, n); err != nil {
				return err
			}
		}
		return tx.PutUsage(ctx, usageRecord("gone", "c1", "p1", at(5), at(8), false))
	})
	list := func(f store.NodeFilter) []string {
		ns, err := s.ListNodes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, n := range ns {
			out = append(out, n.ID)
		}
		return out
	}
	ids := func() []string { return list(store.NodeFilter{Unmetered: true}) }
	stopped := func() []string { return list(store.NodeFilter{UnmeteredStopped: true}) }
	if got := ids(); !reflect.DeepEqual(got, []string{"running", "gone", "draining"}) {
		t.Fatalf("unmetered %v, want the ready ones, removed included", got)
	}
	if got := stopped(); !reflect.DeepEqual(got, []string{"gone", "draining"}) {
		t.Fatalf("unmetered and stopped %v, want the removed and the draining one", got)
	}
	update(t, s, func(tx store.Tx) error { return tx.PutUsage(ctx, usageRecord("gone", "c1", "p1", at(5), at(9), true)) })
	if got := ids(); !reflect.DeepEqual(got, []string{"running", "draining"}) {
		t.Fatalf("unmetered %v after the final record", got)
	}
	if got := stopped(); !reflect.DeepEqual(got, []string{"draining"}) {
		t.Fatalf("unmetered and stopped %v after the final record", got)
	}
}

func testPrices(t *testing.T, s store.Store) {
	ctx := t.Context()
	p1 := domain.Price{ID: "pr1", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.99", EffectiveFrom: at(0), CreatedAt: at(0)}
	p2 := domain.Price{ID: "pr2", Kind: domain.PriceReserved, Region: "eu-1", GPUType: "H100", ReservationID: "r1", Value: "1.5", EffectiveFrom: at(10), CreatedAt: at(1)}
	p0 := domain.Price{ID: "pr0", Kind: domain.PricePreemptibleDiscount, Value: "50", CreatedAt: at(0)}
	update(t, s, func(tx store.Tx) error {
		for _, p := range []domain.Price{p2, p1, p0} {
			if err := tx.CreatePrice(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	got, err := s.ListPrices(ctx)
	if err != nil || !reflect.DeepEqual(got, []domain.Price{p0, p1, p2}) {
		t.Fatalf("prices: %v %+v", err, got)
	}
	err = s.Update(ctx, func(tx store.Tx) error { return tx.CreatePrice(ctx, p1) })
	wantErr(t, "duplicate price", err, domain.ErrConflict)
}

// kubeconfigOf returns the cluster's sealed kubeconfig and KubeAttachedAt,
// failing the test on an error.
func kubeconfigOf(t *testing.T, r store.Reader, id string) ([]byte, time.Time) {
	t.Helper()
	k, err := r.GetKubeconfig(t.Context(), id)
	if err != nil {
		t.Fatalf("get kubeconfig of %s: %v", id, err)
	}
	c, err := r.GetCluster(t.Context(), id)
	if err != nil {
		t.Fatalf("get cluster %s: %v", id, err)
	}
	return k, c.KubeAttachedAt
}

func testKubeconfig(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	c1, err := s.GetCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}

	_, err = s.GetKubeconfig(ctx, "nope")
	wantErr(t, "kubeconfig of a missing cluster", err, domain.ErrNotFound)
	wantErr(t, "attach to a missing cluster", s.Update(ctx, func(tx store.Tx) error {
		return tx.SetKubeconfig(ctx, "nope", []byte("k"), at(1))
	}), domain.ErrNotFound)
	wantErr(t, "detach from a missing cluster", s.Update(ctx, func(tx store.Tx) error {
		return tx.SetKubeconfig(ctx, "nope", nil, time.Time{})
	}), domain.ErrNotFound)

	if k, when := kubeconfigOf(t, s, "c1"); k != nil || !when.IsZero() {
		t.Fatalf("new cluster: kubeconfig %q attached at %v, want none", k, when)
	}

	// Attach: the bytes come back as given; the time as every time does
	// (UTC, microseconds).
	sealed := append([]byte{0, 1, 0xff}, bytes.Repeat([]byte{0x80, 'k'}, 40000)...)
	when := at(5).Add(789 * time.Nanosecond).In(time.FixedZone("UTC+5", 5*3600))
	update(t, s, func(tx store.Tx) error {
		if err := tx.SetKubeconfig(ctx, "c1", sealed, when); err != nil {
			return err
		}
		// The transaction reads its own write.
		if k, err := tx.GetKubeconfig(ctx, "c1"); err != nil || !bytes.Equal(k, sealed) {
			return fmt.Errorf("own kubeconfig: %d bytes, %v", len(k), err)
		}
		if c, err := tx.GetCluster(ctx, "c1"); err != nil || !c.KubeAttachedAt.Equal(at(5)) {
			return fmt.Errorf("own attach time: %+v, %v", c, err)
		}
		return nil
	})
	k, attached := kubeconfigOf(t, s, "c1")
	if !bytes.Equal(k, sealed) {
		t.Fatalf("kubeconfig read back: %d bytes, want the %d written", len(k), len(sealed))
	}
	want := c1
	want.KubeAttachedAt = at(5)
	wantEqual(t, "attach time", attached, at(5))
	got, _ := s.GetCluster(ctx, "c1")
	wantEqual(t, "attached cluster (nothing else changed)", got, want)
	list, _ := s.ListClusters(ctx, "p1")
	wantEqual(t, "listed attached cluster", list, []domain.Cluster{want})
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot of attached cluster", snap.Clusters, []domain.Cluster{want})
	k[0] = 42 // the caller owns what it got
	if again, _ := s.GetKubeconfig(ctx, "c1"); !bytes.Equal(again, sealed) {
		t.Fatal("GetKubeconfig returned the store's own buffer")
	}

	// UpdateCluster neither writes nor clears the attachment, whatever
	// KubeAttachedAt the value carries.
	for _, v := range []time.Time{{}, at(99)} {
		c := want
		c.NodeSeq++
		want.NodeSeq++
		c.KubeAttachedAt = v
		update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, c) })
		got, _ := s.GetCluster(ctx, "c1")
		wantEqual(t, fmt.Sprintf("cluster after UpdateCluster with KubeAttachedAt %v", v), got, want)
		if k, _ := s.GetKubeconfig(ctx, "c1"); !bytes.Equal(k, sealed) {
			t.Fatal("UpdateCluster changed the kubeconfig")
		}
	}
	// Neither does CreateCluster write it.
	c2 := cluster("c2", "p1", at(1))
	c2.KubeAttachedAt = at(3)
	update(t, s, func(tx store.Tx) error { return tx.CreateCluster(ctx, c2) })
	if k, when := kubeconfigOf(t, s, "c2"); k != nil || !when.IsZero() {
		t.Fatalf("CreateCluster with KubeAttachedAt set: kubeconfig %q attached at %v, want none", k, when)
	}

	// A rolled-back attach or detach changes nothing.
	boom := errors.New("boom")
	for _, other := range [][]byte{[]byte("other"), nil} {
		err = s.Update(ctx, func(tx store.Tx) error {
			if err := tx.SetKubeconfig(ctx, "c1", other, at(7)); err != nil {
				return err
			}
			return boom
		})
		wantErr(t, "rolled-back SetKubeconfig", err, boom)
		if k, when := kubeconfigOf(t, s, "c1"); !bytes.Equal(k, sealed) || !when.Equal(at(5)) {
			t.Fatalf("after a rolled-back SetKubeconfig(%q): kubeconfig %d bytes attached at %v", other, len(k), when)
		}
	}

	// Attaching without a time is refused: the time is what says a
	// kubeconfig is attached.
	if err := s.Update(ctx, func(tx store.Tx) error { return tx.SetKubeconfig(ctx, "c1", []byte("x"), time.Time{}) }); err == nil {
		t.Fatal("attach with a zero time succeeded")
	}

	// Replace.
	update(t, s, func(tx store.Tx) error { return tx.SetKubeconfig(ctx, "c1", []byte("second"), at(6)) })
	if k, when := kubeconfigOf(t, s, "c1"); string(k) != "second" || !when.Equal(at(6)) {
		t.Fatalf("replaced: kubeconfig %q attached at %v", k, when)
	}

	// Detach, with nil or empty; detaching again is fine. The time passed
	// with a detach is ignored.
	for _, empty := range [][]byte{nil, {}, nil} {
		update(t, s, func(tx store.Tx) error { return tx.SetKubeconfig(ctx, "c1", empty, at(8)) })
		if k, when := kubeconfigOf(t, s, "c1"); k != nil || !when.IsZero() {
			t.Fatalf("detached (%#v): kubeconfig %q attached at %v, want none", empty, k, when)
		}
	}
	want.KubeAttachedAt = time.Time{}
	got, _ = s.GetCluster(ctx, "c1")
	wantEqual(t, "detached cluster", got, want)

	// A cluster being deleted (not yet gone) can still be attached: its
	// nodes are drained through its Kubernetes API.
	want.Deleting = true
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.UpdateCluster(ctx, want), tx.SetKubeconfig(ctx, "c1", []byte("draining"), at(9)))
	})
	if k, when := kubeconfigOf(t, s, "c1"); string(k) != "draining" || !when.Equal(at(9)) {
		t.Fatalf("deleting cluster: kubeconfig %q attached at %v", k, when)
	}
}

// testKubeconfigDroppedWithCluster: a fully deleted cluster keeps no
// kubeconfig and cannot get one.
func testKubeconfigDroppedWithCluster(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.CreateCluster(ctx, cluster("c2", "p1", at(1))),
			tx.SetKubeconfig(ctx, "c1", []byte("one"), at(2)), tx.SetKubeconfig(ctx, "c2", []byte("two"), at(3)))
	})
	c1, _ := s.GetCluster(ctx, "c1")
	c1.Deleting, c1.DeletedAt = true, at(10)
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, c1) })

	_, err := s.GetKubeconfig(ctx, "c1")
	wantErr(t, "kubeconfig of a deleted cluster", err, domain.ErrNotFound)
	rec, err := s.GetClusterRecord(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if !rec.KubeAttachedAt.IsZero() {
		t.Fatalf("deleted cluster's record still attached at %v", rec.KubeAttachedAt)
	}
	wantErr(t, "attach to a deleted cluster", s.Update(ctx, func(tx store.Tx) error {
		return tx.SetKubeconfig(ctx, "c1", []byte("again"), at(11))
	}), domain.ErrNotFound)
	// Another cluster keeps its own.
	if k, when := kubeconfigOf(t, s, "c2"); string(k) != "two" || !when.Equal(at(3)) {
		t.Fatalf("other cluster: kubeconfig %q attached at %v", k, when)
	}
}

// testAccess: a cluster's access record is written by SetAccess only,
// cleared by SetKubeconfig (attach or detach) and by a full deletion,
// and reads back as written, times as every time does.
func testAccess(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	wantErr(t, "access of a missing cluster", s.Update(ctx, func(tx store.Tx) error {
		return tx.SetAccess(ctx, "nope", fullAccess())
	}), domain.ErrNotFound)
	c1, err := s.GetCluster(ctx, "c1")
	if err != nil {
		t.Fatal(err)
	}
	if c1.Access.CheckedAt.IsZero() != true || len(c1.Access.Missing) != 0 {
		t.Fatalf("new cluster has access %+v", c1.Access)
	}
	a := fullAccess()
	a.CheckedAt = at(3).Add(789 * time.Nanosecond).In(time.FixedZone("UTC+5", 5*3600))
	update(t, s, func(tx store.Tx) error {
		if err := tx.SetKubeconfig(ctx, "c1", []byte("k"), at(2)); err != nil {
			return err
		}
		if err := tx.SetAccess(ctx, "c1", a); err != nil {
			return err
		}
		got, err := tx.GetCluster(ctx, "c1")
		if err != nil || !got.Access.CheckedAt.Equal(at(3)) {
			return fmt.Errorf("own access: %+v, %v", got.Access, err)
		}
		return nil
	})
	want := c1
	want.KubeAttachedAt, want.Access = at(2), fullAccess()
	want.Access.CheckedAt = at(3)
	got, _ := s.GetCluster(ctx, "c1")
	wantEqual(t, "cluster with access", got, want)
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot of cluster with access", snap.Clusters, []domain.Cluster{want})

	// UpdateCluster and CreateCluster neither write nor clear it.
	c := want
	c.NodeSeq++
	want.NodeSeq++
	c.Access = domain.Access{}
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, c) })
	got, _ = s.GetCluster(ctx, "c1")
	wantEqual(t, "cluster after UpdateCluster with no access", got, want)
	c2 := cluster("c2", "p1", at(1))
	c2.Access = fullAccess()
	update(t, s, func(tx store.Tx) error { return tx.CreateCluster(ctx, c2) })
	if got, _ := s.GetCluster(ctx, "c2"); !got.Access.CheckedAt.IsZero() || len(got.Access.Missing) > 0 {
		t.Fatalf("CreateCluster wrote access %+v", got.Access)
	}

	// The zero Access clears it; a new kubeconfig does too, and so does
	// a detach.
	update(t, s, func(tx store.Tx) error { return tx.SetAccess(ctx, "c1", domain.Access{}) })
	if got, _ := s.GetCluster(ctx, "c1"); !got.Access.CheckedAt.IsZero() || len(got.Access.Missing) > 0 {
		t.Fatalf("after SetAccess of nothing: %+v", got.Access)
	}
	for _, k := range [][]byte{[]byte("k2"), nil} {
		update(t, s, func(tx store.Tx) error { return tx.SetAccess(ctx, "c1", fullAccess()) })
		update(t, s, func(tx store.Tx) error { return tx.SetKubeconfig(ctx, "c1", k, at(4)) })
		if got, _ := s.GetCluster(ctx, "c1"); !got.Access.CheckedAt.IsZero() || len(got.Access.Missing) > 0 {
			t.Fatalf("after SetKubeconfig(%q): access %+v", k, got.Access)
		}
	}

	// A fully deleted cluster keeps none and cannot get one.
	update(t, s, func(tx store.Tx) error { return tx.SetAccess(ctx, "c1", fullAccess()) })
	cur, _ := s.GetCluster(ctx, "c1")
	cur.Deleting, cur.DeletedAt = true, at(10)
	update(t, s, func(tx store.Tx) error { return tx.UpdateCluster(ctx, cur) })
	if rec, err := s.GetClusterRecord(ctx, "c1"); err != nil || len(rec.Access.Missing) > 0 || !rec.Access.CheckedAt.IsZero() {
		t.Fatalf("deleted cluster's record: access %+v, %v", rec.Access, err)
	}
	wantErr(t, "access of a deleted cluster", s.Update(ctx, func(tx store.Tx) error {
		return tx.SetAccess(ctx, "c1", fullAccess())
	}), domain.ErrNotFound)
}

func testNodeLastError(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	a := node("a", "c1", "m1", domain.NodeProvisioning, at(1))
	a.LastError = "provision hook exited 1: ssh: connect to host 10.0.0.7 port 22: Connection refused\nretrying"
	b := node("b", "c1", "m1", domain.NodePending, at(2))
	update(t, s, func(tx store.Tx) error { return errors.Join(tx.CreateNode(ctx, a), tx.CreateNode(ctx, b)) })
	got, err := s.GetNode(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "node created with an error", got, a)
	list, err := s.ListNodes(ctx, store.NodeFilter{ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "listed nodes", list, []domain.Node{a, b})

	// The step succeeds: the error is cleared; another node gets one.
	a.LastError, a.State, a.ReadyAt = "", domain.NodeReady, at(3)
	b.LastError = "cluster API https://10.0.0.1:6443 did not answer: context deadline exceeded"
	update(t, s, func(tx store.Tx) error { return errors.Join(tx.UpdateNode(ctx, a), tx.UpdateNode(ctx, b)) })
	list, err = s.ListNodes(ctx, store.NodeFilter{ClusterID: "c1"})
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "listed nodes after update", list, []domain.Node{a, b})
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantEqual(t, "snapshot nodes", store.Values(snap.Nodes), []domain.Node{a, b})
}

// testNodeCleanup: the cleanup work list selects nodes whose tenant-side
// objects are still to be deleted, removed ones included, and a node
// leaves it once the flag is cleared.
func testNodeCleanup(t *testing.T, s store.Store) {
	ctx := t.Context()
	seed(t, s)
	a := node("a", "c1", "m1", domain.NodeRemoved, at(1))
	a.CleanupPending = true
	b := node("b", "c1", "m1", domain.NodeRemoving, at(2))
	b.CleanupPending = true
	c := node("c", "c1", "m1", domain.NodeRemoved, at(3))
	// One live node per machine: d is on another.
	d := node("d", "c1", "m2", domain.NodeReady, at(4))
	update(t, s, func(tx store.Tx) error {
		return errors.Join(tx.CreateMachine(ctx, machine("m2", at(0))),
			tx.CreateNode(ctx, a), tx.CreateNode(ctx, b), tx.CreateNode(ctx, c), tx.CreateNode(ctx, d))
	})
	list := func(f store.NodeFilter) []string {
		t.Helper()
		got, err := s.ListNodes(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		return nodeIDs(got)
	}
	wantEqual(t, "cleanup work list", list(store.NodeFilter{CleanupPending: true, IncludeRemoved: true}), []string{"a", "b"})
	wantEqual(t, "cleanup, not removed", list(store.NodeFilter{CleanupPending: true}), []string{"b"})
	wantEqual(t, "cleanup of removed nodes", list(store.NodeFilter{CleanupPending: true, States: []domain.NodeState{domain.NodeRemoved}}), []string{"a"})
	a.CleanupPending = false
	update(t, s, func(tx store.Tx) error { return tx.UpdateNode(ctx, a) })
	wantEqual(t, "after a's cleanup", list(store.NodeFilter{CleanupPending: true, IncludeRemoved: true}), []string{"b"})
	wantEqual(t, "every node", list(store.NodeFilter{IncludeRemoved: true}), []string{"a", "b", "c", "d"})
}

// CheckUpgradedToken checks the token an upgrade test stored in the
// schema before token lifecycles (hash 0123456789abcdef0123, project p,
// created at): it keeps working, with an ID and a name, no expiry.
func CheckUpgradedToken(t *testing.T, s store.Store, at time.Time) {
	t.Helper()
	got, err := s.TokenByHash(t.Context(), "0123456789abcdef0123")
	want := domain.Token{ID: "tok-0123456789abcdef", Hash: "0123456789abcdef0123", ProjectID: "p", Name: "token", CreatedAt: at}
	if err != nil || got != want {
		t.Fatalf("upgraded token: %+v, %v; want %+v", got, err, want)
	}
}
