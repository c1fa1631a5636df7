package sqlstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// storageQuery counts each table of domain.StorageTables by project: the
// length of the text a tenant's input filled, and domain.StorageRowBytes
// a row.
var storageQuery = func() string {
	row := strconv.Itoa(domain.StorageRowBytes)
	return `SELECT project_id, 'work_spans', COUNT(*), SUM(` + row + ` + length(work_key) + length(namespace) + length(name) + length(job) + length(account) + length(labels))
		FROM work_spans GROUP BY project_id
	UNION ALL SELECT project_id, 'budgets', COUNT(*), SUM(` + row + ` + length(name) + length(label) + length(amount) + length(thresholds))
		FROM budgets GROUP BY project_id
	UNION ALL SELECT project_id, 'budget_alerts', COUNT(*), SUM(` + row + ` + length(name) + length(alert_key) + length(message) + length(spend) + length(forecast))
		FROM budget_alerts GROUP BY project_id
	UNION ALL SELECT project_id, 'webhook_endpoints', COUNT(*), SUM(` + row + ` + length(name) + length(url) + length(event_types) + length(cluster_ids))
		FROM webhook_endpoints GROUP BY project_id
	UNION ALL SELECT e.project_id, 'webhook_deliveries', COUNT(*), SUM(` + row + ` + length(d.last_error))
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id GROUP BY e.project_id
	UNION ALL SELECT project_id, 'tokens', COUNT(*), SUM(` + row + ` + length(name))
		FROM tokens WHERE project_id IS NOT NULL GROUP BY project_id
	ORDER BY 1, 2`
}()

func (s *Store) ProjectStorage(ctx context.Context) ([]domain.StorageUse, error) {
	return s.rd().ProjectStorage(ctx)
}

func (r reader) ProjectStorage(ctx context.Context) ([]domain.StorageUse, error) {
	rows, err := r.q.QueryContext(ctx, storageQuery)
	if err != nil {
		return nil, fmt.Errorf("%s: project storage: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	var out []domain.StorageUse
	for rows.Next() {
		var u domain.StorageUse
		if err := rows.Scan(&u.ProjectID, &u.Table, &u.Rows, &u.Bytes); err != nil {
			return nil, fmt.Errorf("%s: project storage: %w", r.s.d.Name, err)
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

func (t *tx) SetStorageQuota(ctx context.Context, projectID string, bytes int64) error {
	res, err := t.q.ExecContext(ctx, rebind(t.s.d, `UPDATE projects SET storage_quota = ? WHERE id = ?`), max(bytes, 0), projectID)
	if err != nil {
		return fmt.Errorf("%s: set the storage quota of %s: %w", t.s.d.Name, projectID, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("set the storage quota of project %s: %w", projectID, domain.ErrNotFound)
	}
	return nil
}

func (t *tx) PruneProjectSpans(ctx context.Context, projectID string, limit int) (int, error) {
	if limit <= 0 {
		return 0, nil
	}
	until, err := t.rolledUntil(ctx)
	if err != nil || until.IsZero() {
		return 0, err
	}
	q := rebind(t.s.d, `DELETE FROM work_spans WHERE id IN (SELECT id FROM work_spans
		WHERE project_id = ? AND end_at IS NOT NULL AND end_at <= ? LIMIT ?)`)
	res, err := t.q.ExecContext(ctx, q, projectID, t.s.timeArg(until), limit)
	if err != nil {
		return 0, fmt.Errorf("%s: prune the spans of %s: %w", t.s.d.Name, projectID, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

var _ store.StorageReader = (*Store)(nil)
