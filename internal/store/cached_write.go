package store

// What a Cached Update wrote, as read back in its transaction, and how it
// is merged into the copy: the write side of cached.go.

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// written is what one Update wrote of the snapshot's tables, as read back
// in its transaction.
type written struct {
	nodeIDs, clusterIDs, machineIDs []string
	reservations                    bool
	// wroteNode is nodeIDs as a set, for the transaction's node reads.
	wroteNode map[string]bool

	nodes        []*domain.Node
	goneNodes    []string // removed: no longer in the snapshot
	clusters     []domain.Cluster
	goneClusters []string // fully deleted
	machines     []domain.Machine
	allRes       []domain.Reservation
}

// readBack reads the written rows in tx, a few queries per table where
// tx reads in bulk: on a database across a network each query is a
// round trip inside the transaction.
func (w *written) readBack(ctx context.Context, tx Tx) error {
	if ids := dedupe(w.nodeIDs); len(ids) > 0 {
		ns, err := tx.NodesByID(ctx, ids)
		if err != nil {
			return err
		}
		if len(ns) != len(ids) {
			return fmt.Errorf("read back %d written nodes: %d found", len(ids), len(ns))
		}
		for _, n := range ns {
			if n.State == domain.NodeRemoved {
				w.goneNodes = append(w.goneNodes, n.ID)
			} else {
				// A copy each: a pointer into ns would keep all of ns
				// alive for as long as any one of these nodes is current.
				w.nodes = append(w.nodes, &n)
			}
		}
	}
	if ids := dedupe(w.clusterIDs); len(ids) > 0 {
		cs, err := tx.ClustersByID(ctx, ids)
		if err != nil {
			return err
		}
		w.clusters = cs
		found := make(map[string]bool, len(cs))
		for _, c := range cs {
			found[c.ID] = true
		}
		for _, id := range ids {
			if !found[id] {
				w.goneClusters = append(w.goneClusters, id) // fully deleted
			}
		}
	}
	if ids := dedupe(w.machineIDs); len(ids) > 0 {
		ms, err := tx.MachinesByID(ctx, ids)
		if err != nil {
			return err
		}
		if len(ms) != len(ids) {
			return fmt.Errorf("read back %d written machines: %d found", len(ids), len(ms))
		}
		w.machines = ms
	}
	if w.reservations {
		rs, err := tx.ListReservations(ctx)
		if err != nil {
			return err
		}
		w.allRes = rs
	}
	return nil
}

// noteNodes records that the transaction wrote (or may have written)
// nodes ids.
func (w *written) noteNodes(ids ...string) {
	if w.wroteNode == nil {
		w.wroteNode = make(map[string]bool, len(ids))
	}
	for _, id := range ids {
		w.nodeIDs = append(w.nodeIDs, id)
		w.wroteNode[id] = true
	}
}

func dedupe(ids []string) []string {
	slices.Sort(ids)
	return slices.Compact(ids)
}

// apply returns s with w's rows in place, in the backend's order (oldest
// first). The tables it touches are copied: a snapshot already handed out
// never changes.
func (w *written) apply(s Snapshot, idx *index) Snapshot {
	s.Nodes = upsert(s.Nodes, w.nodes, w.goneNodes, idx.nodes, func(n *domain.Node) (time.Time, string) { return n.CreatedAt, n.ID })
	s.Clusters = upsert(s.Clusters, w.clusters, w.goneClusters, idx.clusters, func(c domain.Cluster) (time.Time, string) { return c.CreatedAt, c.ID })
	s.Machines = upsert(s.Machines, w.machines, nil, idx.machines, func(m domain.Machine) (time.Time, string) { return m.CreatedAt, m.ID })
	if w.reservations {
		s.Reservations = w.allRes
	}
	return s
}

// index is, for each table of the copy, the creation time of every row by
// ID: where a row sits (the order is by creation time, then ID). Only
// Updates, one at a time, use it.
type index struct {
	nodes, clusters, machines map[string]time.Time
}

func newIndex(s Snapshot) *index {
	idx := &index{nodes: make(map[string]time.Time, len(s.Nodes)), clusters: make(map[string]time.Time, len(s.Clusters)),
		machines: make(map[string]time.Time, len(s.Machines))}
	for _, n := range s.Nodes {
		idx.nodes[n.ID] = n.CreatedAt
	}
	for _, c := range s.Clusters {
		idx.clusters[c.ID] = c.CreatedAt
	}
	for _, m := range s.Machines {
		idx.machines[m.ID] = m.CreatedAt
	}
	return idx
}

// upsert returns a copy of rows with ups replacing or joining the rows of
// the same ID and the rows of gone IDs left out, keeping the order and
// created (the index of rows) up to date. Each change costs a binary
// search and at most one move of the rows after it.
func upsert[T any](rows, ups []T, gone []string, created map[string]time.Time, key func(T) (time.Time, string)) []T {
	if len(ups) == 0 && len(gone) == 0 {
		return rows
	}
	out := make([]T, len(rows), len(rows)+len(ups))
	copy(out, rows)
	find := func(t time.Time, id string) (int, bool) {
		return slices.BinarySearchFunc(out, id, func(r T, id string) int {
			rt, rid := key(r)
			return domain.ByCreated(rt, rid, t, id)
		})
	}
	remove := func(id string) {
		t, ok := created[id]
		if !ok {
			return
		}
		if i, found := find(t, id); found {
			out = slices.Delete(out, i, i+1)
		}
		delete(created, id)
	}
	for _, id := range gone {
		remove(id)
	}
	for _, u := range ups {
		t, id := key(u)
		if old, ok := created[id]; ok && old.Equal(t) {
			if i, found := find(t, id); found {
				out[i] = u
				continue
			}
		}
		remove(id)
		i, _ := find(t, id)
		out = slices.Insert(out, i, u)
		created[id] = t
	}
	return out
}

// recordingTx notes the IDs of the snapshot rows a transaction writes,
// and reads the nodes it has not written from the copy (c).
type recordingTx struct {
	Tx
	w *written
	c *Cached
}

// copied reads node id from the copy if the transaction has not written
// it and the copy has it (not removed, and loaded).
func (t *recordingTx) copied(id string) (domain.Node, bool) {
	if t.w.wroteNode[id] {
		return domain.Node{}, false
	}
	return fromCopy(t.c, func() map[string]*domain.Node { return t.c.ni.byID }, id)
}

func (t *recordingTx) GetNode(ctx context.Context, id string) (domain.Node, error) {
	if n, ok := t.copied(id); ok {
		return n, nil
	}
	return t.Tx.GetNode(ctx, id)
}

// NodesByID reads what it can from the copy and the rest (removed nodes,
// nodes this transaction wrote) from the backend, in one query.
func (t *recordingTx) NodesByID(ctx context.Context, ids []string) ([]domain.Node, error) {
	out := make([]domain.Node, 0, len(ids))
	seen := make(map[string]bool, len(ids))
	var rest []string
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		if n, ok := t.copied(id); ok {
			out = append(out, n)
		} else {
			rest = append(rest, id)
		}
	}
	if len(rest) == 0 {
		return out, nil
	}
	ns, err := t.Tx.NodesByID(ctx, rest)
	if err != nil {
		return nil, err
	}
	return append(out, ns...), nil
}

func (t *recordingTx) CreateReservation(ctx context.Context, r domain.Reservation) error {
	if err := t.Tx.CreateReservation(ctx, r); err != nil {
		return err
	}
	t.w.reservations = true
	return nil
}

func (t *recordingTx) CreateMachine(ctx context.Context, m domain.Machine) error {
	if err := t.Tx.CreateMachine(ctx, m); err != nil {
		return err
	}
	t.w.machineIDs = append(t.w.machineIDs, m.ID)
	return nil
}

func (t *recordingTx) UpdateMachine(ctx context.Context, m domain.Machine) error {
	if err := t.Tx.UpdateMachine(ctx, m); err != nil {
		return err
	}
	t.w.machineIDs = append(t.w.machineIDs, m.ID)
	return nil
}

func (t *recordingTx) CreateCluster(ctx context.Context, c domain.Cluster) error {
	if err := t.Tx.CreateCluster(ctx, c); err != nil {
		return err
	}
	t.w.clusterIDs = append(t.w.clusterIDs, c.ID)
	return nil
}

func (t *recordingTx) UpdateCluster(ctx context.Context, c domain.Cluster) error {
	if err := t.Tx.UpdateCluster(ctx, c); err != nil {
		return err
	}
	t.w.clusterIDs = append(t.w.clusterIDs, c.ID)
	return nil
}

func (t *recordingTx) SetKubeconfig(ctx context.Context, clusterID string, sealed []byte, at time.Time) error {
	if err := t.Tx.SetKubeconfig(ctx, clusterID, sealed, at); err != nil {
		return err
	}
	t.w.clusterIDs = append(t.w.clusterIDs, clusterID)
	return nil
}

func (t *recordingTx) SetAccess(ctx context.Context, clusterID string, a domain.Access) error {
	if err := t.Tx.SetAccess(ctx, clusterID, a); err != nil {
		return err
	}
	t.w.clusterIDs = append(t.w.clusterIDs, clusterID)
	return nil
}

func (t *recordingTx) CreateNode(ctx context.Context, n domain.Node) error {
	if err := t.Tx.CreateNode(ctx, n); err != nil {
		return err
	}
	t.w.noteNodes(n.ID)
	return nil
}

func (t *recordingTx) UpdateNode(ctx context.Context, n domain.Node) error {
	if err := t.Tx.UpdateNode(ctx, n); err != nil {
		return err
	}
	t.w.noteNodes(n.ID)
	return nil
}
