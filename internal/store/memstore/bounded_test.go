package memstore

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

var t0 = time.Date(2025, 3, 14, 9, 26, 53, 589793000, time.UTC)

// TestBounded: nothing grows but the data. Cycles of nodes made,
// drained, metered and archived, events replaced and pruned, webhook
// deliveries made, ended and pruned, and transactions rolled back leave
// every index with exactly the entries of the rows it indexes; and
// cycles that leave no row behind (nodes written over, events and
// deliveries pruned, transactions rolled back) leave the heap where it
// was: no version, undo or garbage of a transaction is kept.
func TestBounded(t *testing.T) {
	ctx := t.Context()
	s := New()
	update(t, s, func(tx store.Tx) error {
		errs := []error{tx.CreateProject(ctx, domain.Project{ID: "p"}), tx.CreateCluster(ctx, domain.Cluster{ID: "c", ProjectID: "p"}),
			tx.CreateWebhookEndpoint(ctx, domain.WebhookEndpoint{ID: "wh", ProjectID: "p", Enabled: true})}
		for i := range 40 {
			errs = append(errs, tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprint("m", i)}))
		}
		return errors.Join(errs...)
	})
	for c := range 200 {
		cycle(t, s, c, true)
	}
	checkIndexes(t, s.d.st)
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	cycle(t, s, 200, false) // makes the live nodes the next cycles write over
	before := heap()
	for c := 201; c < 700; c++ {
		cycle(t, s, c, false)
	}
	grown := int64(heap()) - int64(before)
	st := s.d.st
	checkIndexes(t, st)
	t.Logf("the heap grew by %d bytes", grown)
	if grown > 64<<10 {
		t.Errorf("the heap grew by %d bytes over 500 cycles that kept no row", grown)
	}
	if st.events.Len() != 0 || st.deliveries.Len() != 0 || st.messages.Len() != 0 {
		t.Errorf("pruned rows left: %d events, %d deliveries, %d messages", st.events.Len(), st.deliveries.Len(), st.messages.Len())
	}
}

func update(t *testing.T, s *Store, fn func(store.Tx) error) {
	t.Helper()
	if err := s.Update(t.Context(), fn); err != nil {
		t.Fatal(err)
	}
}

// cycle writes 20 nodes (made, drained, metered and archived with keep,
// else 20 live ones written over), with events and webhook deliveries,
// prunes the events and deliveries, and rolls a transaction back.
func cycle(t *testing.T, s *Store, c int, keep bool) {
	ctx := t.Context()
	at := t0.Add(time.Duration(c) * time.Hour)
	var ns []domain.Node
	for i := range 20 {
		n := domain.Node{ID: fmt.Sprintf("n%d-%d", c, i), ClusterID: "c", MachineID: fmt.Sprint("m", i),
			State: domain.NodeReady, CreatedAt: at, ReadyAt: at, Class: domain.Preemptible}
		if !keep {
			n.ID, n.MachineID, n.LastError = fmt.Sprint("live", i), fmt.Sprint("m", 20+i), fmt.Sprint("cycle ", c)
		}
		ns = append(ns, n)
	}
	update(t, s, func(tx store.Tx) error {
		write := tx.CreateNodes
		if !keep && c > 200 {
			write = tx.UpdateNodes
		}
		msg := fmt.Sprint("msg", c)
		errs := []error{write(ctx, ns), tx.AddWebhookMessages(ctx, []domain.WebhookMessage{{ID: msg, Body: []byte("{}")}}),
			tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{{EndpointID: "wh", MessageID: msg,
				State: domain.DeliveryDelivered, LastAt: at, CreatedAt: at}})}
		for _, n := range ns {
			_, err := tx.AddEvent(ctx, domain.Event{ID: n.ID, ClusterID: "c", NodeID: n.ID, Reason: domain.ReasonNodeAdded, Timestamp: at})
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	})
	if keep {
		retire(t, s, ns, at)
	}
	update(t, s, func(tx store.Tx) error {
		_, err1 := tx.PruneEvents(ctx, at.Add(time.Hour))
		_, err2 := tx.PruneWebhookDeliveries(ctx, at.Add(time.Hour), 0)
		return errors.Join(err1, err2)
	})
	boom := errors.New("rolled back")
	err := s.Update(ctx, func(tx store.Tx) error {
		_ = tx.CreateNodes(ctx, []domain.Node{{ID: "rolled-back", ClusterID: "c", MachineID: "m0", State: domain.NodeReady}})
		_, _ = tx.AddEvent(ctx, domain.Event{ID: "rolled-back"})
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
}

// retire drains nodes ns, meters them and archives them.
func retire(t *testing.T, s *Store, ns []domain.Node, at time.Time) {
	ctx := t.Context()
	for i := range ns {
		ns[i].State, ns[i].RemovedAt = domain.NodeRemoved, at.Add(time.Minute)
	}
	update(t, s, func(tx store.Tx) error {
		if err := tx.UpdateNodes(ctx, ns); err != nil {
			return err
		}
		for _, n := range ns {
			u := domain.UsageRecord{NodeID: n.ID, ClusterID: "c", ProjectID: "p", Start: at, End: at.Add(time.Minute), Final: true}
			if err := tx.PutUsage(ctx, u); err != nil {
				return err
			}
		}
		_, err := tx.ArchiveNodes(ctx, at.Add(time.Hour), 100)
		return err
	})
}

// checkIndexes checks that every index of the nodes, events and webhook
// tables holds one entry per row it indexes.
func checkIndexes(t *testing.T, st *state) {
	t.Helper()
	n, live, removed, unmetered, cleanup := st.nodes.Len(), 0, 0, 0, 0
	st.nodes.each(func(_ tid, x *domain.Node) bool {
		if x.State == domain.NodeRemoved {
			removed++
		} else {
			live++
		}
		if !x.ReadyAt.IsZero() && !st.metered.has(x.ID) {
			unmetered++
		}
		if x.CleanupPending {
			cleanup++
		}
		return true
	})
	for name, got := range map[string][2]int{
		"node keys": {st.nodeKeys.Len(), n}, "by state": {st.byState.Len(), n}, "by cluster": {st.byCluster.Len(), n},
		"by machine": {st.byMachine.Len(), n}, "by name": {st.byName.Len(), live}, "row numbers": {st.rowidOf.Len(), n}, "live count": {st.liveNodes, live},
		"removed": {st.removed.Len(), removed}, "unmetered": {st.unmetered.Len(), unmetered}, "cleanup": {st.cleanup.Len(), cleanup},
		"metered":       {min(st.metered.Len(), n), st.metered.Len()},
		"history order": {st.historyOrder.Len(), st.history.Len()}, "history by cluster": {st.historyByCluster.Len(), st.history.Len()},
		"history by machine": {st.historyByMachine.Len(), st.history.Len()},
		"event keys":         {st.eventKeys.Len(), st.events.Len()}, "events of": {st.eventsOf.Len(), st.events.Len()},
		"event times":         {st.eventTimes.Len(), st.events.Len()},
		"endpoint deliveries": {st.endpointDeliveries.Len(), st.deliveries.Len()},
		"message deliveries":  {st.messageDeliveries.Len(), st.deliveries.Len()},
	} {
		if got[0] != got[1] {
			t.Errorf("%s: %d entries, want %d", name, got[0], got[1])
		}
	}
	if n := st.activeOn.Len() + st.pendingOn.Len(); n > live {
		t.Errorf("%d machine claims for %d live nodes", n, live)
	}
}
