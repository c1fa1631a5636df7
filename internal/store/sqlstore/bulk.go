package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"math/bits"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The bulk reads (store.BulkReader) send IN lists of a few sizes only,
// powers of two up to 512, padded by repeating the last ID: each size is
// one statement text the database has seen before, not one per count.
const byIDSizes = 10

// usageSizes: PutUsages writes 1, 2, 4, … 64 records per statement;
// nodeSizes: CreateNodes and CreateClusters 1, 2, … 32 rows; eventSizes:
// AddEvents 1, 2, … 32 events; updateSizes: UpdateNodes and
// UpdateClusters 1, 2, … 32 rows.
const (
	usageSizes  = 7
	nodeSizes   = 6
	eventSizes  = 6
	updateSizes = 6
)

var (
	_ store.Tx = (*tx)(nil)
)

// byIDQueries are the bulk statements, by table and size.
type byIDQueries struct {
	nodes, clusters, machines   [byIDSizes]string
	usage                       [usageSizes]string
	createNodes, createClusters [nodeSizes]string
	// addEvents is empty where the dialect cannot replace an event in
	// one statement (see replaceEvents).
	addEvents [eventSizes]string
	// updateNodes and updateClusters are empty without Dialect.BulkUpdate.
	updateNodes, updateClusters [updateSizes]string
}

func buildByIDQueries(d Dialect) byIDQueries {
	var q byIDQueries
	for i := range byIDSizes {
		in := strings.TrimSuffix(strings.Repeat("?, ", 1<<i), ", ")
		q.nodes[i] = rebind(d, `SELECT `+nodeCols+` FROM nodes WHERE id IN (`+in+`)
			UNION ALL SELECT `+nodeCols+` FROM node_history WHERE id IN (`+in+`)`)
		q.clusters[i] = rebind(d, `SELECT `+clusterCols+` FROM clusters WHERE id IN (`+in+`) AND deleted_at IS NULL`)
		q.machines[i] = rebind(d, `SELECT `+machineCols+` FROM machines WHERE id IN (`+in+`)`)
	}
	for i := range usageSizes {
		rows := strings.TrimSuffix(strings.Repeat(usageRow+", ", 1<<i), ", ")
		q.usage[i] = rebind(d, `INSERT INTO usage (`+usageCols+`) VALUES `+rows+usageUpsert)
	}
	for i := range nodeSizes {
		rows := strings.TrimSuffix(strings.Repeat(nodeRow+", ", 1<<i), ", ")
		q.createNodes[i] = rebind(d, `INSERT INTO nodes (`+nodeCols+`, metered) VALUES `+rows+` ON CONFLICT DO NOTHING RETURNING id`)
		rows = strings.TrimSuffix(strings.Repeat(clusterRow+", ", 1<<i), ", ")
		q.createClusters[i] = rebind(d, `INSERT INTO clusters (`+clusterWriteCols+`) VALUES `+rows+` ON CONFLICT DO NOTHING RETURNING id`)
	}
	for i := range eventSizes {
		q.addEvents[i] = replaceEvents(d, 1<<i)
	}
	if d.BulkUpdate {
		for i := range updateSizes {
			q.updateNodes[i] = rebind(d, bulkUpdateSet("nodes", nodeSet, 1<<i))
			q.updateClusters[i] = rebind(d, bulkUpdateSet("clusters", clusterSet, 1<<i))
		}
	}
	return q
}

// byIDs reads the rows of ids with queries (one per list size); uses is
// how many times a statement holds the list.
func byIDs[T any](ctx context.Context, r reader, scan func(scanner) (T, error), what string, queries *[byIDSizes]string, uses int, ids []string) ([]T, error) {
	out := make([]T, 0, len(ids))
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 1<<(byIDSizes-1))]
		ids = ids[len(chunk):]
		i := bits.Len(uint(len(chunk) - 1))
		size := 1 << i
		args := make([]any, 0, uses*size)
		for range uses {
			for j := range size {
				args = append(args, chunk[min(j, len(chunk)-1)])
			}
		}
		rows, err := list(ctx, r, scan, what, queries[i], args...)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
	}
	return out, nil
}

func (r reader) NodesByID(ctx context.Context, ids []string) ([]domain.Node, error) {
	return byIDs(ctx, r, scanNode, "nodes", &r.s.bq.nodes, 2, ids)
}

func (r reader) ClustersByID(ctx context.Context, ids []string) ([]domain.Cluster, error) {
	return byIDs(ctx, r, scanCluster, "clusters", &r.s.bq.clusters, 1, ids)
}

func (r reader) MachinesByID(ctx context.Context, ids []string) ([]domain.Machine, error) {
	return byIDs(ctx, r, scanMachine, "machines", &r.s.bq.machines, 1, ids)
}

// distinct returns the keys of rows, and false if two share one: one
// statement cannot write a row twice (an upsert fails, an insert skips the
// second silently), so such rows are written one by one.
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

// nextChunk splits off the first rows for the largest statement of sizes
// (1, 2, 4, …) that fits, and says which size it is.
func nextChunk[T any](rows []T, sizes int) (size int, chunk, rest []T) {
	size = min(bits.Len(uint(len(rows)))-1, sizes-1)
	return size, rows[:1<<size], rows[1<<size:]
}

// PutUsages writes records as PutUsage does, up to 64 per statement: a
// cut of the meter writes a record for every running node.
func (t *tx) PutUsages(ctx context.Context, us []domain.UsageRecord) error {
	if _, ok := distinct(us, func(u domain.UsageRecord) string { return u.NodeID + "@" + u.Start.String() }); !ok {
		return store.Each(ctx, us, t.PutUsage)
	}
	var late []lateRow
	err := execChunks(ctx, t, us, t.s.bq.usage[:], t.usageArgs, "put usage of %d nodes", func(chunk []domain.UsageRecord, _ sql.Result) error {
		for _, u := range chunk {
			late = lateUsage(late, u)
			if u.Final {
				if err := t.markMetered(ctx, u); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return t.late(ctx, late)
}

// CreateNodes creates nodes as CreateNode does, up to 32 per statement
// after one check of their IDs: a plan's commit creates a node for every
// provision. On ErrConflict, which of ns were created is not said; the
// transaction stays usable.
func (t *tx) CreateNodes(ctx context.Context, ns []domain.Node) error {
	ids, ok := distinct(ns, func(n domain.Node) string { return n.ID })
	if !ok {
		return store.Each(ctx, ns, t.CreateNode) // CreateNode's answers
	}
	// An ID of a live or an archived node stays taken (see ArchiveNodes).
	taken, err := t.NodesByID(ctx, ids)
	if err != nil {
		return err
	}
	if len(taken) > 0 {
		return fmt.Errorf("create node %s: %w", taken[0].ID, domain.ErrConflict)
	}
	return insertChunks(ctx, t, ns, t.s.bq.createNodes[:], t.newNodeArgs, "node",
		func(n domain.Node) string { return n.ID })
}

// CreateClusters creates clusters as CreateCluster does, up to 32 per
// statement: a batch of concurrent creates is committed together. On
// ErrConflict, which of cs were created is not said; the transaction
// stays usable.
func (t *tx) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	if _, ok := distinct(cs, func(c domain.Cluster) string { return c.ID }); !ok {
		return store.Each(ctx, cs, t.CreateCluster) // CreateCluster's answers
	}
	return insertChunks(ctx, t, cs, t.s.bq.createClusters[:], t.newClusterArgs, "cluster",
		func(c domain.Cluster) string { return c.ID })
}

// insertChunks inserts rows with queries[i], the INSERT … ON CONFLICT DO
// NOTHING RETURNING id of 1<<i rows, and refuses with ErrConflict naming
// the first row that was not inserted (what, e.g. "node", names its
// kind).
func insertChunks[T any](ctx context.Context, t *tx, rows []T, queries []string, argsOf func(T) []any, what string, idOf func(T) string) error {
	return eachChunk(rows, len(queries), argsOf, func(query int, chunk []T, args []any) error {
		created, err := list(ctx, t.reader, func(sc scanner) (id string, err error) { return id, sc.Scan(&id) },
			"created "+what+"s", queries[query], args...)
		if err != nil {
			return t.writeErr(fmt.Sprintf("create %d %ss", len(chunk), what), err)
		}
		if len(created) == len(chunk) {
			return nil
		}
		done := make(map[string]bool, len(created))
		for _, id := range created {
			done[id] = true
		}
		for _, r := range chunk {
			if !done[idOf(r)] {
				// A row with its ID (or, for a node, a live node on its
				// machine in the same statement) is already there.
				return fmt.Errorf("create %s %s: %w", what, idOf(r), domain.ErrConflict)
			}
		}
		return nil
	})
}

// eachChunk splits rows into chunks of the statement sizes 1, 2, 4, … of
// queries sizes, the largest that fits first, and calls do with each
// chunk, the index of its statement and its arguments (argsOf of each
// row, in order).
func eachChunk[T any](rows []T, sizes int, argsOf func(T) []any, do func(query int, chunk []T, args []any) error) error {
	for len(rows) > 0 {
		i, chunk, rest := nextChunk(rows, sizes)
		rows = rest
		var args []any
		for _, r := range chunk {
			args = append(args, argsOf(r)...)
		}
		if err := do(i, chunk, args); err != nil {
			return err
		}
	}
	return nil
}

// AddEvents adds events as AddEvent does, up to 32 per statement where
// the dialect replaces an event in one: a burst's plan posts a notice for
// every node it reclaims. Events with the same key in one call are added
// one by one, as one statement cannot write a row twice.
func (t *tx) AddEvents(ctx context.Context, es []domain.Event) error {
	one := func(ctx context.Context, e domain.Event) error {
		_, err := t.AddEvent(ctx, e)
		return err
	}
	_, ok := distinct(es, func(e domain.Event) string { return e.ClusterID + "\x00" + e.NodeID + "\x00" + string(e.Reason) })
	if t.s.bq.addEvents[0] == "" || !ok || len(es) < 2 {
		return store.Each(ctx, es, one)
	}
	if err := t.lockEvents(ctx); err != nil {
		return err
	}
	return execChunks(ctx, t, es, t.s.bq.addEvents[:], t.eventArgs, "add %d events", nil)
}

// UpdateNodes updates nodes as UpdateNode does, up to 32 per statement
// where the dialect can (Dialect.BulkUpdate): a batch of node steps
// writes a node for each. A node named twice is written one by one, in
// order, as one statement cannot write a row twice.
func (t *tx) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	_, ok := distinct(ns, func(n domain.Node) string { return n.ID })
	if t.s.bq.updateNodes[0] == "" || !ok || len(ns) < 2 {
		return store.Each(ctx, ns, t.UpdateNode)
	}
	return execChunks(ctx, t, ns, t.s.bq.updateNodes[:], t.nodeSetArgs, "update %d nodes", func(chunk []domain.Node, res sql.Result) error {
		return allUpdated(ctx, t, chunk, res, t.UpdateNode)
	})
}

// UpdateClusters is UpdateNodes for clusters: a plan's commit writes the
// state of every cluster it changed.
func (t *tx) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	_, ok := distinct(cs, func(c domain.Cluster) string { return c.ID })
	if t.s.bq.updateClusters[0] == "" || !ok || len(cs) < 2 {
		return store.Each(ctx, cs, t.UpdateCluster)
	}
	return execChunks(ctx, t, cs, t.s.bq.updateClusters[:], t.clusterSetArgs, "update %d clusters", func(chunk []domain.Cluster, res sql.Result) error {
		if err := allUpdated(ctx, t, chunk, res, t.UpdateCluster); err != nil {
			return err
		}
		return store.Each(ctx, chunk, t.dropKubeconfig)
	})
}

// allUpdated checks that a bulk update (res) wrote every row of chunk. If
// it did not, the rows are written again one by one (the same values, so
// no harm), for the error of the first missing one.
func allUpdated[T any](ctx context.Context, t *tx, chunk []T, res sql.Result, one func(context.Context, T) error) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: bulk update: %w", t.s.d.Name, err)
	}
	if int(n) == len(chunk) {
		return nil
	}
	if err := store.Each(ctx, chunk, one); err != nil {
		return err
	}
	return fmt.Errorf("%s: bulk update wrote %d of %d rows, each of which is there", t.s.d.Name, n, len(chunk))
}

// execChunks writes rows with queries[i], the statement of 1<<i rows,
// the largest that fits first; after, if set, runs after each statement
// with the rows it wrote and its result. doing names the write, with the
// row count.
func execChunks[T any](ctx context.Context, t *tx, rows []T, queries []string, argsOf func(T) []any, doing string, after func([]T, sql.Result) error) error {
	return eachChunk(rows, len(queries), argsOf, func(query int, chunk []T, args []any) error {
		res, err := t.q.ExecContext(ctx, queries[query], args...)
		if err != nil {
			return t.writeErr(fmt.Sprintf(doing, len(chunk)), err)
		}
		if after != nil {
			return after(chunk, res)
		}
		return nil
	})
}
