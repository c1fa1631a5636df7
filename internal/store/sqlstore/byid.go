package sqlstore

import (
	"context"
	"math/bits"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
)

// The bulk reads (store.BulkReader) send IN lists of a few sizes only,
// powers of two up to 512, padded by repeating the last ID: each size is
// one statement text the database has seen before, not one per count.
const byIDSizes = 10

// byIDQueries are the bulk reads' statements, by table and list size.
type byIDQueries struct {
	nodes, clusters, machines [byIDSizes]string
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
