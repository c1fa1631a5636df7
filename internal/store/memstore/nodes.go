package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// nodeTables are the nodes table and its indexes, and the archive
// (node_history) that ArchiveNodes moves finished nodes to. The nodes are
// kept in listing order (created_at NULLS FIRST, id), with their listing
// key by ID; the other indexes hold keys only, ending with the listing
// key, so a write that changes none of a node's keys writes one tree. A
// stored node is never changed: a write stores a new one, so the pointers
// a Snapshot hands out keep what they pointed to.
type nodeTables struct {
	nodes    tree[tid, *domain.Node]
	nodeKeys tree[string, int64]
	// byState, byCluster and byMachine: a state, cluster or machine,
	// then the listing key.
	byState, byCluster, byMachine tree[stid, struct{}]
	// unmetered: the nodes that became ready and whose current period
	// has no final usage record yet (the meter's work list); metered
	// holds the IDs of the nodes that have one (PutUsage sets it).
	unmetered tree[tid, struct{}]
	metered   tree[string, struct{}]
	// cleanup: the nodes whose tenant-side objects are still to delete.
	cleanup tree[tid, struct{}]
	// removed: the removed nodes by removal time (NULL first), then ID:
	// the archiver's candidates.
	removed tree[tid, struct{}]
	// byName: the live nodes (not removed) by cluster, name and ID, for
	// NodeNamed.
	byName tree[sss, struct{}]
	// activeOn and pendingOn are, by machine, its one active node and its
	// one pending node: the schema's partial unique indexes.
	activeOn, pendingOn tree[string, string]
	// rowidOf are the nodes' row numbers: a statement that updates many
	// nodes writes them in that order (see UpdateNodes).
	rowidOf tree[string, int64]

	history          tree[string, *domain.Node]
	historyOrder     tree[tid, *domain.Node]
	historyByCluster tree[stid, *domain.Node]
	historyByMachine tree[stid, *domain.Node]
}

func newNodeTables() nodeTables {
	return nodeTables{
		nodes: newTree[tid, *domain.Node](cmpTID), nodeKeys: newTree[string, int64](cmpString),
		byState: newTree[stid, struct{}](cmpSTID), byCluster: newTree[stid, struct{}](cmpSTID),
		byMachine: newTree[stid, struct{}](cmpSTID), byName: newTree[sss, struct{}](cmpSSS), unmetered: newTree[tid, struct{}](cmpTID),
		metered: newTree[string, struct{}](cmpString), cleanup: newTree[tid, struct{}](cmpTID),
		removed: newTree[tid, struct{}](cmpTID), activeOn: newTree[string, string](cmpString),
		pendingOn: newTree[string, string](cmpString), rowidOf: newTree[string, int64](cmpString),
		history: newTree[string, *domain.Node](cmpString), historyOrder: newTree[tid, *domain.Node](cmpTID),
		historyByCluster: newTree[stid, *domain.Node](cmpSTID), historyByMachine: newTree[stid, *domain.Node](cmpSTID),
	}
}

// created is a node's place in the listing order.
func created(n *domain.Node) tid { return tid{tkey(n.CreatedAt), n.ID} }

// node returns the node id of the nodes table.
func (v view) node(id string) (*domain.Node, bool) {
	t, ok := v.st.nodeKeys.get(id)
	if !ok {
		return nil, false
	}
	return v.st.nodes.get(tid{t, id})
}

// at returns the node at listing key k of an index.
func (v view) at(t int64, id string) *domain.Node {
	n, _ := v.st.nodes.get(tid{t, id})
	return n
}

func (v view) GetNode(ctx context.Context, id string) (domain.Node, error) {
	if err := v.check(ctx); err != nil {
		return domain.Node{}, err
	}
	if n, ok := v.node(id); ok {
		return *n, nil
	}
	if n, ok := v.st.history.get(id); ok {
		return *n, nil
	}
	return domain.Node{}, fmt.Errorf("get node %s: %w", id, domain.ErrNotFound)
}

// storedNode is n as the nodes table keeps it.
func storedNode(n domain.Node) *domain.Node {
	n.CreatedAt, n.ReadyAt, n.DrainStartedAt = dbTime(n.CreatedAt), dbTime(n.ReadyAt), dbTime(n.DrainStartedAt)
	n.Deadline, n.DrainedAt, n.RemovedAt = dbTime(n.Deadline), dbTime(n.DrainedAt), dbTime(n.RemovedAt)
	n.ProvisioningAt, n.ClassSince = dbTime(n.ProvisioningAt), dbTime(n.ClassSince)
	n.LastError = text(n.LastError) // a cluster's API wrote it
	n.GPUType = text(n.GPUType)
	return &n
}

func (t *tx) CreateNode(ctx context.Context, n domain.Node) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	// An archived node's ID stays taken (see ArchiveNodes).
	if t.st.history.has(n.ID) {
		return conflict("node " + n.ID)
	}
	return t.createNode(n)
}

// createNode inserts n as the nodes table does: a taken ID or a machine
// already holding a node in its stage is a conflict (ON CONFLICT DO
// NOTHING skips the row), a missing cluster or machine a missing parent.
func (t *tx) createNode(n domain.Node) error {
	if t.st.nodeKeys.has(n.ID) || t.clashIn(nil, &n) {
		return conflict("node " + n.ID)
	}
	if !t.parents(&n) {
		return missingParent("create node " + n.ID)
	}
	t.insertNode(n)
	return nil
}

// insertNode writes a new node, with the next row number.
func (t *tx) insertNode(n domain.Node) {
	// metered starts set if the final record of the node's current
	// period is already there.
	metered := t.finalFrom(n.ID, dbTime(n.PeriodStart()))
	if metered {
		t.st.metered.set(t.w, n.ID, struct{}{})
	}
	t.st.lastRowid++
	t.st.rowidOf.set(t.w, n.ID, t.st.lastRowid)
	t.putNode(nil, storedNode(n), metered)
	t.d.notes.nodes = append(t.d.notes.nodes, n.ID)
}

func (t *tx) UpdateNode(ctx context.Context, n domain.Node) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return t.updateNode(n)
}

// updateNode writes every field of n over the stored node, as UPDATE …
// WHERE id does: an archived node is not there to update.
func (t *tx) updateNode(n domain.Node) error {
	old, ok := t.node(n.ID)
	if !ok {
		return missing("update node " + n.ID)
	}
	if t.clashIn(nil, &n) {
		return fmt.Errorf("update node %s: %w: the machine already has a live node (UNIQUE constraint failed: nodes.machine_id)",
			n.ID, domain.ErrConflict)
	}
	if !t.parents(&n) {
		return missingParent("update node " + n.ID)
	}
	t.putNode(old, storedNode(n), t.st.metered.has(n.ID))
	t.d.notes.nodes = append(t.d.notes.nodes, n.ID)
	return nil
}

// putNode writes n over old (nil: a new node; n nil: old leaves the
// table) and keeps every index of the nodes table to it; metered is
// whether n's current period is metered. An index entry whose key does
// not change is not written.
func (t *tx) putNode(old, n *domain.Node, metered bool) {
	g := t.w
	var o, w domain.Node
	had, has, oldMetered := old != nil, n != nil, false
	if had {
		o = *old
		_, oldMetered = t.st.metered.get(o.ID)
	}
	if has {
		w = *n
	}
	if had && o.State != domain.NodeRemoved {
		t.st.liveNodes--
	}
	if has && w.State != domain.NodeRemoved {
		t.st.liveNodes++
	}
	ok, wk := created(&o), created(&w)
	if had && (!has || ok != wk) {
		t.st.nodes.delete(g, ok)
	}
	switch {
	case has:
		t.st.nodes.set(g, wk, n)
		if !had || ok != wk {
			t.st.nodeKeys.set(g, w.ID, wk.t)
		}
	default:
		t.st.nodeKeys.delete(g, o.ID)
	}
	rekey(&t.st.byState, g, had, stid{string(o.State), ok.t, o.ID}, has, stid{string(w.State), wk.t, w.ID})
	rekey(&t.st.byCluster, g, had, stid{o.ClusterID, ok.t, o.ID}, has, stid{w.ClusterID, wk.t, w.ID})
	rekey(&t.st.byMachine, g, had, stid{o.MachineID, ok.t, o.ID}, has, stid{w.MachineID, wk.t, w.ID})
	rekey(&t.st.byName, g, had && o.State != domain.NodeRemoved, sss{o.ClusterID, o.Name, o.ID},
		has && w.State != domain.NodeRemoved, sss{w.ClusterID, w.Name, w.ID})
	rekey(&t.st.unmetered, g, had && !o.ReadyAt.IsZero() && !oldMetered, ok, has && !w.ReadyAt.IsZero() && !metered, wk)
	rekey(&t.st.cleanup, g, had && o.CleanupPending, ok, has && w.CleanupPending, wk)
	rekey(&t.st.removed, g, had && o.State == domain.NodeRemoved, tid{tkey(o.RemovedAt), o.ID},
		has && w.State == domain.NodeRemoved, tid{tkey(w.RemovedAt), w.ID})
	moveClaim(&t.st.activeOn, g, had && o.State.Active(), o.MachineID, has && w.State.Active(), w.MachineID, w.ID)
	moveClaim(&t.st.pendingOn, g, had && o.State == domain.NodePending, o.MachineID,
		has && w.State == domain.NodePending, w.MachineID, w.ID)
}

// reindex moves an entry of index tr from oldKey (if it was in it) to
// newKey (if it is to be), with value v.
func reindex[K, V any](tr *tree[K, V], w *writer, wasIn bool, oldKey K, isIn bool, newKey K, v V) {
	if wasIn && !(isIn && tr.cmp(oldKey, newKey) == 0) {
		tr.delete(w, oldKey)
	}
	if isIn {
		tr.set(w, newKey, v)
	}
}

// rekey is reindex for an index of keys only: a key that stays is not
// written.
func rekey[K any](tr *tree[K, struct{}], w *writer, wasIn bool, oldKey K, isIn bool, newKey K) {
	if wasIn && isIn && tr.cmp(oldKey, newKey) == 0 {
		return
	}
	reindex(tr, w, wasIn, oldKey, isIn, newKey, struct{}{})
}

// moveClaim is reindex for a machine's claim by node id: a claim that
// stays is not written.
func moveClaim(tr *tree[string, string], w *writer, wasIn bool, oldMachine string, isIn bool, newMachine, id string) {
	if wasIn && isIn && oldMachine == newMachine {
		return
	}
	reindex(tr, w, wasIn, oldMachine, isIn, newMachine, id)
}

// finalFrom reports whether node id has a final usage record starting at
// or after from (never, for a zero from: NULL compares to nothing).
func (v view) finalFrom(id string, from time.Time) bool {
	if from.IsZero() {
		return false
	}
	found := false
	v.st.usage.ascend(&stid{s: id, t: tkey(from)}, func(k stid, u *domain.UsageRecord) bool {
		if k.s != id {
			return false
		}
		found = u.Final
		return !found
	})
	return found
}

// markMetered records on node u.NodeID that the final record u of its
// current period is written, taking it off the meter's work list: a
// final record of a period before the node's last conversion does not
// end its billing.
func (t *tx) markMetered(u *domain.UsageRecord) {
	n, ok := t.node(u.NodeID)
	if !ok || t.st.metered.has(u.NodeID) {
		return
	}
	if !n.ClassSince.IsZero() && tkey(n.ClassSince) > tkey(u.Start) {
		return
	}
	t.st.metered.set(t.w, n.ID, struct{}{})
	t.st.unmetered.delete(t.w, created(n))
}

// nodesByID reads the nodes of ids as the SQL backends' IN lists do: in
// lists of up to 512 IDs, each answered in ID order, live nodes before
// archived ones, an ID named twice in a list read once.
func (v view) nodesByID(ids []string) []domain.Node {
	out := make([]domain.Node, 0, len(ids))
	inLists(ids, func(list []string) {
		for _, id := range list {
			if n, ok := v.node(id); ok {
				out = append(out, *n)
			}
		}
		for _, id := range list {
			if n, ok := v.st.history.get(id); ok {
				out = append(out, *n)
			}
		}
	})
	return out
}
