package memstore

import (
	"context"
	"fmt"
	"math/bits"
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The bulk reads and writes answer as the SQL backends' statements do
// (sqlstore's bulk.go): the same lists, in statements of the same sizes,
// each written whole or not at all, so a refusal leaves what theirs
// leaves.
const (
	// listSize is the longest IN list of a bulk read.
	listSize = 512
	// usageSizes, nodeSizes, updateSizes and webhookSizes: statements of
	// 1, 2, 4, … up to 1<<(sizes-1) rows.
	usageSizes   = 7
	nodeSizes    = 6
	updateSizes  = 6
	webhookSizes = 7
	// fixedChunk is the statement size of the lost-work ledger and the
	// work spans.
	fixedChunk = 64
)

// distinct returns the keys of rows, and false if two share one.
func distinct[T any](rows []T, key func(T) string) ([]string, bool) {
	keys := make([]string, len(rows))
	seen := make(map[string]bool, len(rows))
	for i, r := range rows {
		k := key(r)
		if seen[k] {
			return nil, false
		}
		seen[k], keys[i] = true, k
	}
	return keys, true
}

// eachStatement calls do with rows split as sqlstore splits them, the
// largest statement that fits first, and stops at the first error.
func eachStatement[T any](rows []T, sizes int, do func([]T) error) error {
	for len(rows) > 0 {
		size := min(bits.Len(uint(len(rows)))-1, sizes-1)
		if err := do(rows[:1<<size]); err != nil {
			return err
		}
		rows = rows[1<<size:]
	}
	return nil
}

// eachChunk calls do with rows in chunks of n, stopping at the first
// error.
func eachChunk[T any](rows []T, n int, do func([]T) error) error {
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), n)]
		if err := do(chunk); err != nil {
			return err
		}
		rows = rows[len(chunk):]
	}
	return nil
}

// inLists calls fn with the IN lists of a bulk read of ids: up to
// listSize IDs each, sorted, an ID once (the order SQLite answers in).
func inLists(ids []string, fn func([]string)) {
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), listSize)]
		ids = ids[len(chunk):]
		fn(distinctStrings(chunk))
	}
}

func (v view) NodesByID(ctx context.Context, ids []string) ([]domain.Node, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	return v.nodesByID(ids), nil
}

func (v view) ClustersByID(ctx context.Context, ids []string) ([]domain.Cluster, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := make([]domain.Cluster, 0, len(ids))
	inLists(ids, func(list []string) {
		for _, id := range list {
			if r, ok := v.liveCluster(id); ok {
				out = append(out, r.cluster())
			}
		}
	})
	return out, nil
}

func (v view) MachinesByID(ctx context.Context, ids []string) ([]domain.Machine, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := make([]domain.Machine, 0, len(ids))
	inLists(ids, func(list []string) {
		for _, id := range list {
			if m, ok := v.st.machines.get(id); ok {
				out = append(out, *m)
			}
		}
	})
	return out, nil
}

// CreateNodes creates nodes as CreateNode does, after one check of their
// IDs, in statements of up to 32 rows: in each, a row whose machine is
// taken is skipped (ON CONFLICT DO NOTHING), and a missing parent refuses
// the whole statement.
func (t *tx) CreateNodes(ctx context.Context, ns []domain.Node) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	ids, ok := distinct(ns, func(n domain.Node) string { return n.ID })
	if !ok {
		return store.Each(ctx, ns, t.CreateNode) // CreateNode's answers
	}
	// An ID of a live or an archived node stays taken.
	if taken := t.nodesByID(ids); len(taken) > 0 {
		return conflict("node " + taken[0].ID)
	}
	return eachStatement(ns, nodeSizes, func(chunk []domain.Node) error {
		c := claims{}
		insert := make([]bool, len(chunk))
		orphan := false
		for i := range chunk {
			n := &chunk[i]
			if t.clashIn(c, n) {
				continue
			}
			insert[i] = true
			c.move(nil, n)
			orphan = orphan || !t.parents(n)
		}
		if orphan {
			return missingParent(fmt.Sprintf("create %d nodes", len(chunk)))
		}
		for i, n := range chunk {
			if insert[i] {
				t.insertNode(n)
			}
		}
		if i := slices.Index(insert, false); i >= 0 {
			return conflict("node " + chunk[i].ID)
		}
		return nil
	})
}

// UpdateNodes updates nodes as UpdateNode does, in statements of up to 32
// rows. A statement writes the rows it finds in the order of their row
// numbers (as SQLite's UPDATE … FROM does), so whether a hand-over of a
// machine between two of them is refused does not depend on the order
// they are named in; a second live node on a machine or a missing parent
// refuses the whole statement. A node named twice is written one by one.
func (t *tx) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if _, ok := distinct(ns, func(n domain.Node) string { return n.ID }); !ok || len(ns) < 2 {
		return store.Each(ctx, ns, t.UpdateNode)
	}
	return eachStatement(ns, updateSizes, t.updateNodes)
}

// updateNodes is one statement of UpdateNodes.
func (t *tx) updateNodes(chunk []domain.Node) error {
	type row struct {
		rowid  int64
		old, n *domain.Node
	}
	var rows []row
	absent := ""
	for i := range chunk {
		old, ok := t.node(chunk[i].ID)
		if !ok {
			absent = cmpOr(absent, chunk[i].ID)
			continue
		}
		rowid, _ := t.st.rowidOf.get(old.ID)
		rows = append(rows, row{rowid, old, &chunk[i]})
	}
	slices.SortFunc(rows, func(a, b row) int { return int(min(max(a.rowid-b.rowid, -1), 1)) })
	c := claims{}
	orphan := false
	for _, r := range rows {
		if t.clashIn(c, r.n) {
			return fmt.Errorf("update %d nodes: %w: the machine already has a live node (UNIQUE constraint failed: nodes.machine_id)",
				len(chunk), domain.ErrConflict)
		}
		c.move(r.old, r.n)
		orphan = orphan || !t.parents(r.n)
	}
	if orphan {
		return missingParent(fmt.Sprintf("update %d nodes", len(chunk)))
	}
	for _, r := range rows {
		t.putNode(r.old, storedNode(*r.n), t.st.metered.has(r.n.ID))
		t.d.notes.nodes = append(t.d.notes.nodes, r.n.ID)
	}
	if absent != "" {
		// The rows are written; sqlstore writes them again one by one for
		// the error of the first missing one.
		return missing("update node " + absent)
	}
	return nil
}

// cmpOr returns a unless it is empty, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// CreateClusters creates clusters as CreateCluster does, in statements of
// up to 32 rows: a taken ID skips its row, a missing project refuses the
// whole statement.
func (t *tx) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if _, ok := distinct(cs, func(c domain.Cluster) string { return c.ID }); !ok {
		return store.Each(ctx, cs, t.CreateCluster) // CreateCluster's answers
	}
	return eachStatement(cs, nodeSizes, func(chunk []domain.Cluster) error {
		skipped := ""
		for _, c := range chunk {
			switch {
			case t.st.clusters.has(c.ID):
				skipped = cmpOr(skipped, c.ID)
			case !t.st.projects.has(c.ProjectID):
				return missingParent(fmt.Sprintf("create %d clusters", len(chunk)))
			}
		}
		for _, c := range chunk {
			if !t.st.clusters.has(c.ID) {
				t.insertCluster(c)
			}
		}
		if skipped != "" {
			return conflict("cluster " + skipped)
		}
		return nil
	})
}

// UpdateClusters updates clusters as UpdateCluster does, in statements of
// up to 32 rows; a missing project refuses the whole statement. When a
// named cluster is missing, the others of its statement are written but
// only those before it lose their kubeconfig to a full deletion, as in
// sqlstore (which writes those again one by one for the error).
func (t *tx) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if _, ok := distinct(cs, func(c domain.Cluster) string { return c.ID }); !ok || len(cs) < 2 {
		return store.Each(ctx, cs, t.UpdateCluster)
	}
	return eachStatement(cs, updateSizes, func(chunk []domain.Cluster) error {
		absent := -1
		for i, c := range chunk {
			switch {
			case !t.st.clusters.has(c.ID):
				if absent < 0 {
					absent = i
				}
			case !t.st.projects.has(c.ProjectID):
				return missingParent(fmt.Sprintf("update %d clusters", len(chunk)))
			}
		}
		for i, c := range chunk {
			if old, ok := t.st.clusters.get(c.ID); ok {
				t.setCluster(old, c, absent < 0 || i < absent)
			}
		}
		if absent >= 0 {
			return missing("update cluster " + chunk[absent].ID)
		}
		return nil
	})
}

// claims are the machines a statement's rows took and freed so far, over
// the activeOn and pendingOn indexes: a node's claim, by its kind (active
// or pending) and machine, and "" for a claim freed.
type claims map[claim]string

type claim struct {
	pending bool
	machine string
}

// claimOf is the claim a node in its state holds.
func claimOf(n *domain.Node) (claim, bool) {
	switch {
	case n.State.Active():
		return claim{false, n.MachineID}, true
	case n.State == domain.NodePending:
		return claim{true, n.MachineID}, true
	}
	return claim{}, false
}

// move frees old's claim (nil: none) and takes n's.
func (c claims) move(old, n *domain.Node) {
	if old != nil {
		if k, ok := claimOf(old); ok {
			c[k] = ""
		}
	}
	if k, ok := claimOf(n); ok {
		c[k] = n.ID
	}
}

// clashIn reports whether n's claim is another node's, in the indexes as
// c changes them (nil: as they are).
func (t *tx) clashIn(c claims, n *domain.Node) bool {
	k, ok := claimOf(n)
	if !ok {
		return false
	}
	id, moved := c[k]
	held := id != ""
	if !moved {
		on := &t.st.activeOn
		if k.pending {
			on = &t.st.pendingOn
		}
		id, held = on.get(k.machine)
	}
	return held && id != n.ID
}

// parents reports whether n's cluster and machine exist.
func (t *tx) parents(n *domain.Node) bool {
	return t.st.clusters.has(n.ClusterID) && t.st.machines.has(n.MachineID)
}
