package sqlstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Removed nodes leave the live table in two steps. While they may still
// change (metering, cleanup) they stay in nodes, where partial indexes keep
// the live-state reads off them: nodes_live for the Snapshot, and
// nodes_unmetered (over the metered column PutUsage maintains) for the
// meter's work list. ArchiveNodes then moves the finished ones to
// node_history, which only the reads of the past (GetNode, ListNodes with
// removed nodes) look at.
//
// The predicates below are literals, not parameters, and are written
// exactly as the indexes are: both planners only use a partial index when
// they can prove the query's WHERE implies the index's, and a bound
// parameter proves nothing.
const (
	// notRemoved is the predicate of nodes_live.
	notRemoved = `state <> '` + string(domain.NodeRemoved) + `'`
	// unmetered is the predicate of nodes_unmetered: the meter's work
	// list, ready nodes without a final usage record.
	unmetered = `ready_at IS NOT NULL AND metered = FALSE`
	// unmeteredStopped is the predicate of the partial index
	// nodes_unmetered_stopped (migration 00013), written as it is.
	unmeteredStopped = `ready_at IS NOT NULL AND metered = FALSE AND state <> 'ready'`
	// archivable selects, among removed nodes (nodes_removed), those done
	// with: removed before the parameter, nothing left to meter, no
	// cleanup pending. The first ? is the cutoff, the second the limit.
	archivable = `SELECT id FROM nodes WHERE state = '` + string(domain.NodeRemoved) + `'
		AND (removed_at IS NULL OR removed_at < ?) AND cleanup_pending = FALSE
		AND (ready_at IS NULL OR metered = TRUE)
		ORDER BY removed_at NULLS FIRST, id LIMIT ?`
)

// historyQueries are the statements of this file, rebound once.
type historyQueries struct {
	getNode, nodeArchived, markMetered string
	archiveCopy, archiveDelete         string
}

func buildHistoryQueries(d Dialect) historyQueries {
	r := func(q string) string { return rebind(d, q) }
	return historyQueries{
		getNode: r(`SELECT ` + nodeCols + ` FROM nodes WHERE id = ?
			UNION ALL SELECT ` + nodeCols + ` FROM node_history WHERE id = ?`),
		nodeArchived: r(`SELECT COUNT(*) FROM node_history WHERE id = ?`),
		// A final record of a period before the node's last conversion
		// does not end its billing.
		markMetered: r(`UPDATE nodes SET metered = TRUE WHERE id = ? AND metered = FALSE
			AND (class_since IS NULL OR class_since <= ?)`),
		// Both statements select the same rows: they run in one
		// transaction, in a deterministic order, and the copy changes
		// nothing in nodes.
		archiveCopy:   r(`INSERT INTO node_history (` + nodeCols + `) SELECT ` + nodeCols + ` FROM nodes WHERE id IN (` + archivable + `)`),
		archiveDelete: r(`DELETE FROM nodes WHERE id IN (` + archivable + `)`),
	}
}

func (r reader) GetNode(ctx context.Context, id string) (domain.Node, error) {
	return get(ctx, r, scanNode, "node "+id, r.s.hq.getNode, id, id)
}

func (r reader) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	q, args := r.nodesQuery(f)
	return list(ctx, r, scanNode, "nodes", q, args...)
}

// nodesQuery is the statement and arguments of ListNodes.
func (r reader) nodesQuery(f store.NodeFilter) (string, []any) {
	var where []string
	var args []any
	if f.ClusterID != "" {
		where = append(where, "cluster_id = ?")
		args = append(args, f.ClusterID)
	}
	if len(f.ClusterIDs) > 0 {
		where = append(where, "cluster_id IN (?"+strings.Repeat(", ?", len(f.ClusterIDs)-1)+")")
		for _, id := range f.ClusterIDs {
			args = append(args, id)
		}
	}
	if f.MachineID != "" {
		where = append(where, "machine_id = ?")
		args = append(args, f.MachineID)
	}
	if f.Class != "" {
		where = append(where, "class = ?")
		args = append(args, string(f.Class))
	}
	if !f.RemovedSince.IsZero() {
		where = append(where, "(removed_at IS NULL OR removed_at >= ?)")
		args = append(args, r.s.timeArg(f.RemovedSince))
	}
	if f.CleanupPending {
		// The same expression as the partial index nodes_cleanup, so both
		// backends use it.
		where = append(where, "cleanup_pending = TRUE")
	}
	// Archived nodes are removed, metered and cleaned up: only a listing
	// that can include removed nodes and does not ask for unfinished work
	// reads node_history.
	var history bool
	switch {
	case len(f.States) > 0:
		where = append(where, "state IN (?"+strings.Repeat(", ?", len(f.States)-1)+")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
		history = slices.Contains(f.States, domain.NodeRemoved)
	case f.UnmeteredStopped:
		where = append(where, unmeteredStopped)
	case f.Unmetered:
		where = append(where, unmetered)
	case !f.IncludeRemoved:
		where = append(where, notRemoved)
	default:
		history = true
	}
	history = history && !f.CleanupPending
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	q := r.s.q.listNodes + cond
	if history {
		// Node IDs are unique across both tables (ArchiveNodes moves a
		// row, CreateNode refuses an archived ID), so UNION ALL.
		q = `SELECT ` + nodeCols + ` FROM (` + q + ` UNION ALL SELECT ` + nodeCols + ` FROM node_history` + cond + `) AS n`
		args = append(args, args...)
	}
	return rebind(r.s.d, q+oldestFirst), args
}

// LiveQueries returns the statements that must never scan history, with
// example arguments, by name: for tests that check the backend's plan
// for them (EXPLAIN) uses the indexes of migration 00007.
func LiveQueries(d Dialect) map[string]struct {
	Query string
	Args  []any
} {
	r := reader{s: New(d, nil, nil, Options{})}
	out := map[string]struct {
		Query string
		Args  []any
	}{}
	add := func(name, q string, args ...any) {
		out[name] = struct {
			Query string
			Args  []any
		}{q, args}
	}
	q, args := r.nodesQuery(store.NodeFilter{})
	add("snapshot nodes", q, args...)
	q, args = r.nodesQuery(store.NodeFilter{Unmetered: true})
	add("meter work list", q, args...)
	q, args = r.nodesQuery(store.NodeFilter{UnmeteredStopped: true})
	add("meter stopped work list", q, args...)
	q, args = r.usageQuery(store.UsageFilter{Open: true})
	add("open usage", q, args...)
	add("archive candidates", rebind(d, archivable), r.s.timeArg(time.Unix(1e9, 0)), 1000)
	add("due deliveries", r.s.wq.due, r.s.timeArg(time.Unix(1e9, 0)), 4, 512)
	if q := r.s.bq.updateNodes[updateSizes-1]; q != "" {
		// A bulk update finds each row by its key, whatever the table's size.
		var tx tx
		tx.s = r.s
		var args []any
		for i := range 1 << (updateSizes - 1) {
			args = append(args, tx.nodeSetArgs(domain.Node{ID: fmt.Sprintf("n%d", i)})...)
		}
		add("bulk node update", q, args...)
	}
	return out
}

// nodeArchived reports whether id belongs to an archived node.
func (t *tx) nodeArchived(ctx context.Context, id string) (bool, error) {
	var n int
	if err := t.q.QueryRowContext(ctx, t.s.hq.nodeArchived, id).Scan(&n); err != nil {
		return false, fmt.Errorf("%s: create node %s: %w", t.s.d.Name, id, err)
	}
	return n > 0, nil
}

// markMetered records on the node that the final usage record u of its
// current class period is written, taking it off the meter's work list.
func (t *tx) markMetered(ctx context.Context, u domain.UsageRecord) error {
	if _, err := t.q.ExecContext(ctx, t.s.hq.markMetered, u.NodeID, t.s.timeArg(u.Start)); err != nil {
		return fmt.Errorf("%s: put usage of node %s: mark metered: %w", t.s.d.Name, u.NodeID, err)
	}
	return nil
}

func (t *tx) ArchiveNodes(ctx context.Context, removedBefore time.Time, limit int) (int, error) {
	if removedBefore.IsZero() || limit <= 0 {
		return 0, nil // nothing is before the zero time
	}
	before := t.s.timeArg(removedBefore)
	res, err := t.q.ExecContext(ctx, t.s.hq.archiveCopy, before, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: archive nodes: copy: %w", t.s.d.Name, err)
	}
	copied, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: archive nodes: copy: %w", t.s.d.Name, err)
	}
	if copied == 0 {
		return 0, nil
	}
	res, err = t.q.ExecContext(ctx, t.s.hq.archiveDelete, before, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: archive nodes: delete: %w", t.s.d.Name, err)
	}
	deleted, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: archive nodes: delete: %w", t.s.d.Name, err)
	}
	if deleted != copied {
		// Never expected; the caller's transaction rolls back.
		return 0, fmt.Errorf("%s: archive nodes: copied %d rows but deleted %d", t.s.d.Name, copied, deleted)
	}
	return int(copied), nil
}
