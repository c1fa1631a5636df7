package sqlstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// usageQuery is the statement and arguments of ListUsage and ScanUsage.
func (r reader) usageQuery(f store.UsageFilter) (string, []any) {
	var where []string
	var args []any
	if f.ProjectID != "" {
		where = append(where, "project_id = ?")
		args = append(args, f.ProjectID)
	}
	if f.ClusterID != "" {
		where = append(where, "cluster_id = ?")
		args = append(args, f.ClusterID)
	}
	if !f.To.IsZero() {
		where = append(where, "start_at < ?")
		args = append(args, r.s.timeArg(f.To))
	}
	if !f.From.IsZero() {
		where = append(where, "end_at > ?")
		args = append(args, r.s.timeArg(f.From))
	}
	if f.Open {
		// The predicate of the partial index usage_open.
		where = append(where, "NOT final")
	}
	q := r.s.q.listUsage
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return rebind(r.s.d, q+" ORDER BY start_at, node_id"), args
}

func (r reader) ListUsage(ctx context.Context, f store.UsageFilter) ([]domain.UsageRecord, error) {
	q, args := r.usageQuery(f)
	return list(ctx, r, scanUsage, "usage", q, args...)
}

// ScanUsage reads the rows one at a time from the cursor of one statement,
// which sees one consistent state on both backends. Outside a transaction
// it runs on the read pool, never on the writer: on SQLite (WAL) a long
// scan does not hold up Update. A backend may bound how many scans run at
// once (Dialect.MaxScans) so that slow readers of long scans cannot take
// every connection of the read pool from the short reads.
func (r reader) ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error {
	q, args := r.usageQuery(f)
	rows, err := r.q.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("%s: scan usage: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		u, err := scanUsage(rows)
		if err != nil {
			return fmt.Errorf("%s: scan usage: %w", r.s.d.Name, err)
		}
		if err := fn(u); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: scan usage: %w", r.s.d.Name, err)
	}
	return nil
}

func (s *Store) ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error {
	if s.scans != nil {
		select {
		case s.scans <- struct{}{}:
			defer func() { <-s.scans }()
		case <-ctx.Done():
			return fmt.Errorf("%s: scan usage: %w", s.d.Name, ctx.Err())
		}
	}
	return s.rd().ScanUsage(ctx, f, fn)
}
