package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// nodeQuery is a NodeFilter as the SQL backends read it (sqlstore's
// nodesQuery): the same conditions, and the archive read only where they
// read node_history.
type nodeQuery struct {
	f    store.NodeFilter
	mode int
	// history: archived nodes may match.
	history bool
}

// The part of a node listing the filter's switch decides.
const (
	inStates = iota
	unmeteredStopped
	unmeteredAll
	notRemoved
	anyState
)

func newNodeQuery(f store.NodeFilter) nodeQuery {
	q := nodeQuery{f: f}
	switch {
	case len(f.States) > 0:
		q.mode, q.history = inStates, slices.Contains(f.States, domain.NodeRemoved)
	case f.UnmeteredStopped:
		q.mode = unmeteredStopped
	case f.Unmetered:
		q.mode = unmeteredAll
	case !f.IncludeRemoved:
		q.mode = notRemoved
	default:
		q.mode, q.history = anyState, true
	}
	// Archived nodes are cleaned up.
	q.history = q.history && !f.CleanupPending
	return q
}

// match is the filter's WHERE clause; metered says whether a node of the
// nodes table is metered (archived nodes are never asked).
func (q *nodeQuery) match(n *domain.Node, metered func() bool) bool {
	f := &q.f
	if (f.ClusterID != "" && n.ClusterID != f.ClusterID) ||
		(len(f.ClusterIDs) > 0 && !slices.Contains(f.ClusterIDs, n.ClusterID)) ||
		(f.MachineID != "" && n.MachineID != f.MachineID) || (f.CleanupPending && !n.CleanupPending) ||
		(f.Class != "" && n.Class != f.Class) || (!f.RemovedSince.IsZero() && !n.RemovedAt.IsZero() && n.RemovedAt.Before(dbTime(f.RemovedSince))) {
		return false
	}
	switch q.mode {
	case inStates:
		return slices.Contains(f.States, n.State)
	case unmeteredStopped:
		return !n.ReadyAt.IsZero() && n.State != domain.NodeReady && !metered()
	case unmeteredAll:
		return !n.ReadyAt.IsZero() && !metered()
	case notRemoved:
		return n.State != domain.NodeRemoved
	}
	return true
}

func (v view) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	q := newNodeQuery(f)
	live, sorted := v.listLive(&q)
	if !q.history {
		if !sorted {
			slices.SortFunc(live, cmpNodes)
		}
		return live, nil
	}
	past, pastSorted := v.listHistory(&q)
	if sorted && pastSorted {
		return mergeNodes(live, past), nil
	}
	all := append(live, past...)
	slices.SortFunc(all, cmpNodes)
	return all, nil
}

// listLive reads the matching nodes of the nodes table through the index
// that narrows the read most; sorted says they came in listing order.
func (v view) listLive(q *nodeQuery) (out []domain.Node, sorted bool) {
	out = []domain.Node{}
	f := &q.f
	add := func(n *domain.Node) {
		if q.match(n, func() bool { return v.st.metered.has(n.ID) }) {
			out = append(out, *n)
		}
	}
	keys := func(tr *tree[tid, struct{}]) {
		tr.each(func(k tid, _ struct{}) bool { add(v.at(k.t, k.id)); return true })
	}
	switch {
	case f.MachineID != "":
		v.within(&v.st.byMachine, f.MachineID, add)
	case f.ClusterID != "":
		v.within(&v.st.byCluster, f.ClusterID, add)
	case len(f.ClusterIDs) > 0:
		ids := distinctStrings(f.ClusterIDs)
		for _, id := range ids {
			v.within(&v.st.byCluster, id, add)
		}
		return out, len(ids) == 1
	case f.CleanupPending:
		keys(&v.st.cleanup)
	case q.mode == unmeteredStopped || q.mode == unmeteredAll:
		keys(&v.st.unmetered)
	case q.mode == inStates:
		states := distinctStrings(f.States)
		for _, st := range states {
			v.within(&v.st.byState, string(st), add)
		}
		return out, len(states) == 1
	default:
		v.st.nodes.each(func(_ tid, n *domain.Node) bool { add(n); return true })
	}
	return out, true
}

// listHistory reads the matching archived nodes.
func (v view) listHistory(q *nodeQuery) (out []domain.Node, sorted bool) {
	f := &q.f
	add := func(n *domain.Node) {
		if q.match(n, nil) {
			out = append(out, *n)
		}
	}
	switch {
	case f.MachineID != "":
		archived(&v.st.historyByMachine, f.MachineID, add)
	case f.ClusterID != "":
		archived(&v.st.historyByCluster, f.ClusterID, add)
	case len(f.ClusterIDs) > 0:
		ids := distinctStrings(f.ClusterIDs)
		for _, id := range ids {
			archived(&v.st.historyByCluster, id, add)
		}
		return out, len(ids) == 1
	default:
		v.st.historyOrder.each(func(_ tid, n *domain.Node) bool { add(n); return true })
	}
	return out, true
}

// within calls fn with the nodes whose key in index tr starts with s, in
// listing order.
func (v view) within(tr *tree[stid, struct{}], s string, fn func(*domain.Node)) {
	tr.ascend(&stid{s: s, t: minKey}, func(k stid, _ struct{}) bool {
		if k.s != s {
			return false
		}
		fn(v.at(k.t, k.id))
		return true
	})
}

// archived calls fn with the archived nodes whose key in index tr starts
// with s, in listing order.
func archived(tr *tree[stid, *domain.Node], s string, fn func(*domain.Node)) {
	tr.ascend(&stid{s: s, t: minKey}, func(k stid, n *domain.Node) bool {
		if k.s != s {
			return false
		}
		fn(n)
		return true
	})
}

// distinctStrings returns the distinct values of xs, sorted.
func distinctStrings[S ~string](xs []S) []S {
	out := slices.Clone(xs)
	slices.Sort(out)
	return slices.Compact(out)
}

// cmpNodes is the listing order: created_at NULLS FIRST, id.
func cmpNodes(a, b domain.Node) int { return cmpTID(created(&a), created(&b)) }

// mergeNodes merges two lists in listing order.
func mergeNodes(a, b []domain.Node) []domain.Node {
	if len(b) == 0 {
		return a
	}
	out := make([]domain.Node, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if cmpNodes(a[0], b[0]) <= 0 {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

func (t *tx) ArchiveNodes(ctx context.Context, removedBefore time.Time, limit int) (int, error) {
	if removedBefore.IsZero() || limit <= 0 {
		return 0, nil // nothing is before the zero time
	}
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	// The removed nodes removed before the cutoff, oldest removal first,
	// with nothing left to meter and no cleanup pending.
	before := tkey(dbTime(removedBefore))
	var done []*domain.Node
	t.st.removed.each(func(k tid, _ struct{}) bool {
		if k.t >= before {
			return false
		}
		n, _ := t.node(k.id)
		if !n.CleanupPending && (n.ReadyAt.IsZero() || t.st.metered.has(n.ID)) {
			done = append(done, n)
		}
		return len(done) < limit
	})
	for _, n := range done {
		t.putNode(n, nil, false)
		t.st.metered.delete(t.w, n.ID)
		t.st.rowidOf.delete(t.w, n.ID)
		k := created(n)
		t.st.history.set(t.w, n.ID, n)
		t.st.historyOrder.set(t.w, k, n)
		t.st.historyByCluster.set(t.w, stid{n.ClusterID, k.t, n.ID}, n)
		t.st.historyByMachine.set(t.w, stid{n.MachineID, k.t, n.ID}, n)
	}
	return len(done), nil
}
