package storetest

import (
	"maps"
	"reflect"
	"slices"
	"testing"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// mirror is a store.Watcher that keeps the copy's tables by ID from what
// it is handed: the world a planner fed by the copy holds.
type mirror struct {
	machines     map[string]domain.Machine
	clusters     map[string]domain.Cluster
	nodes        map[string]domain.Node
	reservations []domain.Reservation
	resets       int
	// by are the tags of the commits applied (Written.By), in order.
	by []any
}

func (m *mirror) Load(s store.Snapshot) {
	m.machines, m.clusters, m.nodes = map[string]domain.Machine{}, map[string]domain.Cluster{}, map[string]domain.Node{}
	m.reservations = s.Reservations
	for _, x := range s.Machines {
		m.machines[x.ID] = x
	}
	for _, x := range s.Clusters {
		m.clusters[x.ID] = x
	}
	for _, x := range s.Nodes {
		m.nodes[x.ID] = *x
	}
}

func (m *mirror) Apply(w store.Written) {
	m.by = append(m.by, w.By)
	for _, x := range w.Machines {
		m.machines[x.ID] = x
	}
	for _, x := range w.Clusters {
		m.clusters[x.ID] = x
	}
	for _, id := range w.GoneClusters {
		delete(m.clusters, id)
	}
	for _, x := range w.Nodes {
		m.nodes[x.ID] = *x
	}
	for _, id := range w.GoneNodes {
		delete(m.nodes, id)
	}
	if w.Reserved {
		m.reservations = w.Reservations
	}
}

func (m *mirror) Reset() { m.resets++ }

// equal fails t unless the mirror holds want's rows.
func (m *mirror) equal(t *testing.T, what string, want store.Snapshot) {
	t.Helper()
	if m.resets > 0 {
		t.Fatalf("%s: the watcher was reset", what)
	}
	if !m.holds(want) {
		m.explain(t, what, want)
	}
}

// holds reports whether the mirror holds want's rows (a check run after
// every step: it says no more than whether).
func (m *mirror) holds(want store.Snapshot) bool {
	if len(m.machines) != len(want.Machines) || len(m.clusters) != len(want.Clusters) ||
		len(m.nodes) != len(want.Nodes) || len(m.reservations) != len(want.Reservations) {
		return false
	}
	for _, x := range want.Machines {
		if y, ok := m.machines[x.ID]; !ok || y != x {
			return false
		}
	}
	for _, x := range want.Clusters {
		if y, ok := m.clusters[x.ID]; !ok || !reflect.DeepEqual(y, x) {
			return false
		}
	}
	for _, x := range want.Nodes {
		if y, ok := m.nodes[x.ID]; !ok || y != *x {
			return false
		}
	}
	return true
}

// explain fails t with the first difference between the mirror and want.
func (m *mirror) explain(t *testing.T, what string, want store.Snapshot) {
	t.Helper()
	byID := func(ids []string) []string { slices.Sort(ids); return ids }
	var mids, cids, nids []string
	for _, x := range want.Machines {
		mids = append(mids, x.ID)
		wantEqual(t, what+" machine "+x.ID, m.machines[x.ID], x)
	}
	for _, x := range want.Clusters {
		cids = append(cids, x.ID)
		wantEqual(t, what+" cluster "+x.ID, m.clusters[x.ID], x)
	}
	for _, x := range want.Nodes {
		nids = append(nids, x.ID)
		wantEqual(t, what+" node "+x.ID, m.nodes[x.ID], *x)
	}
	wantEqual(t, what+" machines", byID(slices.Collect(maps.Keys(m.machines))), byID(mids))
	wantEqual(t, what+" clusters", byID(slices.Collect(maps.Keys(m.clusters))), byID(cids))
	wantEqual(t, what+" nodes", byID(slices.Collect(maps.Keys(m.nodes))), byID(nids))
	wantEqual(t, what+" reservations", len(m.reservations), len(want.Reservations))
}
