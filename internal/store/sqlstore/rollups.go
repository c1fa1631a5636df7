package sqlstore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

const rollupCols = `month, cluster_id, row_no, project_id, kind, namespace, account, label_set_id, cluster_name, node_id, node_name,
	class, region, gpu_type, gpus, rate, od_rate, priced, start_at, end_at, billed_seconds, gpu_seconds, unpriced_seconds,
	amount, on_demand, units, has_line`

// rollupChunk rows a statement: 27 columns each, under SQLite's 32,766
// parameters and PostgreSQL's 65,535.
const rollupChunk = 500

func (t *tx) PutRollups(ctx context.Context, cm domain.ClusterMonth, rows []domain.Rollup) error {
	m, clusterID := t.s.timeArg(store.MonthOf(cm.Month)), cm.ClusterID
	for _, q := range []string{`DELETE FROM rollups WHERE month = ? AND project_id = ? AND cluster_id = ?`,
		`DELETE FROM rollup_dirty WHERE month = ? AND project_id = ? AND cluster_id = ?`} {
		if _, err := t.q.ExecContext(ctx, rebind(t.s.d, q), m, cm.ProjectID, clusterID); err != nil {
			return fmt.Errorf("%s: put rollups of %s/%s: %w", t.s.d.Name, cm.ProjectID, clusterID, err)
		}
	}
	sets := map[string]int64{}
	for first := 0; first < len(rows); first += rollupChunk {
		chunk := rows[first:min(first+rollupChunk, len(rows))]
		args := make([]any, 0, 27*len(chunk))
		for i, r := range chunk {
			id, err := t.labelSet(ctx, r.Labels, sets)
			if err != nil {
				return err
			}
			args = append(args, m, clusterID, first+i, cm.ProjectID, string(r.Kind), text(r.Namespace), text(r.Account), id,
				r.ClusterName, r.NodeID, r.NodeName, r.Class, r.Region, r.GPUType, r.GPUs, r.Rate, r.OnDemandRate, r.Priced,
				t.s.timeArg(r.Start), t.s.timeArg(r.End), r.BilledSeconds, r.GPUSeconds, r.UnpricedGPUSeconds,
				zeroIfEmpty(r.Amount), zeroIfEmpty(r.OnDemand), r.Units, r.HasLine)
		}
		q := `INSERT INTO rollups (` + rollupCols + `) VALUES ` +
			strings.TrimSuffix(strings.Repeat("("+strings.TrimSuffix(strings.Repeat("?, ", 27), ", ")+"), ", len(chunk)), ", ")
		if _, err := t.q.ExecContext(ctx, rebind(t.s.d, q), args...); err != nil {
			return t.writeErr(fmt.Sprintf("put %d rollup rows of %s", len(chunk), clusterID), err)
		}
	}
	return nil
}

func zeroIfEmpty(s string) string {
	if s == "" {
		return "0"
	}
	return s
}

// labelSet is the ID of labels' set (0: none), stored once by its hash.
func (t *tx) labelSet(ctx context.Context, labels map[string]string, seen map[string]int64) (int64, error) {
	if len(labels) == 0 {
		return 0, nil
	}
	stored := store.LabelsText(labels)
	if id, ok := seen[stored]; ok {
		return id, nil
	}
	sum := sha256.Sum256([]byte(stored))
	hash := hex.EncodeToString(sum[:])
	if _, err := t.q.ExecContext(ctx, rebind(t.s.d, `INSERT INTO label_sets (hash, labels) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING`), hash, stored); err != nil {
		return 0, fmt.Errorf("%s: store a label set: %w", t.s.d.Name, err)
	}
	var id int64
	if err := t.q.QueryRowContext(ctx, rebind(t.s.d, `SELECT id FROM label_sets WHERE hash = ?`), hash).Scan(&id); err != nil {
		return 0, fmt.Errorf("%s: store a label set: %w", t.s.d.Name, err)
	}
	seen[stored] = id
	return id, nil
}

func (t *tx) MarkRolled(ctx context.Context, until time.Time) error {
	q := `INSERT INTO rollup_mark (id, rolled_until) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET rolled_until = excluded.rolled_until
		WHERE rollup_mark.rolled_until < excluded.rolled_until`
	if _, err := t.q.ExecContext(ctx, rebind(t.s.d, q), t.s.timeArg(until)); err != nil {
		return fmt.Errorf("%s: mark rolled: %w", t.s.d.Name, err)
	}
	return nil
}

// rolledUntil is the stored mark (zero: nothing rolled).
func (r reader) rolledUntil(ctx context.Context) (time.Time, error) {
	var until time.Time
	err := r.q.QueryRowContext(ctx, `SELECT rolled_until FROM rollup_mark WHERE id = 1`).Scan(timeCol{&until})
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return until, fmt.Errorf("%s: read the rollup mark: %w", r.s.d.Name, err)
	}
	return until, nil
}

// lateRow is a row a write changed: of cluster (of project), changing
// what rolled months hold from from on if when is before the rollup mark.
type lateRow struct {
	project, cluster string
	from, when       time.Time
}

// late marks dirty the rolled months the rows change: a row written
// late. One read of the mark when nothing is late.
func (t *tx) late(ctx context.Context, rows []lateRow) error {
	if len(rows) == 0 {
		return nil
	}
	until, err := t.rolledUntil(ctx)
	if err != nil || until.IsZero() {
		return err
	}
	type pc struct{ project, cluster string }
	from := map[pc]time.Time{}
	for _, r := range rows {
		if !r.from.IsZero() && !r.when.IsZero() && r.when.Before(until) {
			k := pc{r.project, r.cluster}
			if old, ok := from[k]; !ok || r.from.Before(old) {
				from[k] = r.from
			}
		}
	}
	var dirty []domain.ClusterMonth
	for k, at := range from {
		dirty = append(dirty, store.DirtyMonths(k.project, k.cluster, at, until)...)
	}
	return t.MarkDirty(ctx, dirty)
}

func (t *tx) MarkDirty(ctx context.Context, cms []domain.ClusterMonth) error {
	q := rebind(t.s.d, `INSERT INTO rollup_dirty (month, project_id, cluster_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`)
	for _, cm := range cms {
		if _, err := t.q.ExecContext(ctx, q, t.s.timeArg(store.MonthOf(cm.Month)), cm.ProjectID, cm.ClusterID); err != nil {
			return fmt.Errorf("%s: mark a rolled month dirty: %w", t.s.d.Name, err)
		}
	}
	return nil
}

func (r reader) RollupState(ctx context.Context) (domain.RollupState, error) {
	var st domain.RollupState
	var err error
	if st.RolledUntil, err = r.rolledUntil(ctx); err != nil {
		return st, err
	}
	rows, err := r.q.QueryContext(ctx, `SELECT month, project_id, cluster_id FROM rollup_dirty ORDER BY month, project_id, cluster_id`)
	if err != nil {
		return st, fmt.Errorf("%s: rollup state: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var cm domain.ClusterMonth
		if err := rows.Scan(timeCol{&cm.Month}, &cm.ProjectID, &cm.ClusterID); err != nil {
			return st, fmt.Errorf("%s: rollup state: %w", r.s.d.Name, err)
		}
		st.Dirty = append(st.Dirty, cm)
	}
	return st, rows.Err()
}

func (s *Store) RollupState(ctx context.Context) (domain.RollupState, error) {
	return s.rd().RollupState(ctx)
}

func (s *Store) ScanRollups(ctx context.Context, f store.RollupFilter, fn func(domain.Rollup) error) error {
	return s.rd().ScanRollups(ctx, f, fn)
}

func (r reader) rollupConds(f store.RollupFilter) conds {
	var c conds
	c.eq("project_id", f.ProjectID)
	c.eq("cluster_id", f.ClusterID)
	if !f.From.IsZero() {
		c.add("month >= ?", r.s.timeArg(store.MonthOf(f.From)))
	}
	if !f.To.IsZero() {
		c.add("month < ?", r.s.timeArg(f.To))
	}
	if f.Merged {
		c.add("cluster_id = ''")
	} else {
		c.add("cluster_id <> ''")
	}
	if len(f.Kinds) > 0 {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(f.Kinds)), ", ")
		args := make([]any, len(f.Kinds))
		for i, k := range f.Kinds {
			args[i] = string(k)
		}
		c.add("kind IN ("+marks+")", args...)
	}
	return c
}

// ScanRollups reads the label sets the rows use first (each decoded
// once), then the rows.
func (r reader) ScanRollups(ctx context.Context, f store.RollupFilter, fn func(domain.Rollup) error) error {
	c := r.rollupConds(f)
	sets, err := r.labelSets(ctx, c)
	if err != nil {
		return err
	}
	rows, err := r.q.QueryContext(ctx, rebind(r.s.d, `SELECT `+rollupCols+` FROM rollups`+c.sql()+` ORDER BY month, project_id, cluster_id, row_no`), c.args...)
	if err != nil {
		return fmt.Errorf("%s: scan rollups: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		var x domain.Rollup
		var rowNo, set int64
		var kind string
		if err := rows.Scan(timeCol{&x.Month}, &x.ClusterID, &rowNo, &x.ProjectID, &kind, &x.Namespace, &x.Account, &set,
			&x.ClusterName, &x.NodeID, &x.NodeName, &x.Class, &x.Region, &x.GPUType, &x.GPUs, &x.Rate, &x.OnDemandRate, &x.Priced,
			timeCol{&x.Start}, timeCol{&x.End}, &x.BilledSeconds, &x.GPUSeconds, &x.UnpricedGPUSeconds,
			&x.Amount, &x.OnDemand, &x.Units, &x.HasLine); err != nil {
			return fmt.Errorf("%s: scan rollups: %w", r.s.d.Name, err)
		}
		x.Kind, x.Labels = domain.RollupKind(kind), sets[set]
		if err := fn(x); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: scan rollups: %w", r.s.d.Name, err)
	}
	return nil
}

// labelSets are the label sets the rows of c use, by ID.
func (r reader) labelSets(ctx context.Context, c conds) (map[int64]map[string]string, error) {
	rows, err := r.q.QueryContext(ctx, rebind(r.s.d, `SELECT id, labels FROM label_sets WHERE id IN (SELECT label_set_id FROM rollups`+
		c.sql()+`)`), c.args...)
	if err != nil {
		return nil, fmt.Errorf("%s: scan rollups: label sets: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	sets := map[int64]map[string]string{}
	for rows.Next() {
		var id int64
		var text string
		if err := rows.Scan(&id, &text); err != nil {
			return nil, fmt.Errorf("%s: scan rollups: label sets: %w", r.s.d.Name, err)
		}
		var m map[string]string
		if err := json.Unmarshal([]byte(text), &m); err != nil {
			return nil, fmt.Errorf("%s: scan rollups: label set %d: %w", r.s.d.Name, id, err)
		}
		sets[id] = m
	}
	return sets, rows.Err()
}

// PruneUsage deletes final records that ended before before and by the
// rollup mark (their months rolled).
func (t *tx) PruneUsage(ctx context.Context, before time.Time, limit int) (int, error) {
	return t.pruneRolled(ctx, "usage", `final AND end_at IS NOT NULL AND end_at < ? AND end_at <= ?`, `node_id, start_at`, before, limit)
}

// PruneWorkSpans deletes ended spans as PruneUsage deletes records.
func (t *tx) PruneWorkSpans(ctx context.Context, before time.Time, limit int) (int, error) {
	return t.pruneRolled(ctx, "work_spans", `end_at IS NOT NULL AND end_at < ? AND end_at <= ?`, `id`, before, limit)
}

// PruneClusterWork deletes clusters' work rows of months before before.
func (t *tx) PruneClusterWork(ctx context.Context, before time.Time, limit int) (int, error) {
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	q := rebind(t.s.d, `DELETE FROM rollups WHERE (month, project_id, cluster_id, row_no) IN (SELECT month, project_id, cluster_id, row_no
		FROM rollups WHERE month < ? AND cluster_id <> '' AND kind IN ('work', 'more') LIMIT ?)`)
	res, err := t.q.ExecContext(ctx, q, t.s.timeArg(before), limit)
	if err != nil {
		return 0, fmt.Errorf("%s: prune rollups: %w", t.s.d.Name, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

func (t *tx) PruneLabelSets(ctx context.Context, limit int) (int, error) {
	q := rebind(t.s.d, `DELETE FROM label_sets WHERE id IN (SELECT id FROM label_sets l
		WHERE NOT EXISTS (SELECT 1 FROM rollups r WHERE r.label_set_id = l.id) LIMIT ?)`)
	res, err := t.q.ExecContext(ctx, q, limit)
	if err != nil {
		return 0, fmt.Errorf("%s: prune label sets: %w", t.s.d.Name, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// PruneLostWork deletes the entries noticed first.
func (t *tx) PruneLostWork(ctx context.Context, before time.Time, limit int) (int, error) {
	return t.pruneOldest(ctx, "lost_work", "node_id", "noticed_at", before, limit)
}

// PruneNodeHistory deletes the nodes removed first.
func (t *tx) PruneNodeHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	return t.pruneOldest(ctx, "node_history", "id", "removed_at", before, limit)
}

// pruneOldest deletes up to limit rows of table whose at column is
// before before, oldest first, picked by their key.
func (t *tx) pruneOldest(ctx context.Context, table, key, at string, before time.Time, limit int) (int, error) {
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	q := rebind(t.s.d, `DELETE FROM `+table+` WHERE `+key+` IN (SELECT `+key+` FROM `+table+` WHERE `+at+` < ? ORDER BY `+at+` LIMIT ?)`)
	res, err := t.q.ExecContext(ctx, q, t.s.timeArg(before), limit)
	if err != nil {
		return 0, fmt.Errorf("%s: prune %s: %w", t.s.d.Name, table, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// pruneRolled deletes up to limit rows of table matching where (the cut
// and the mark as its arguments), picked by their key columns.
func (t *tx) pruneRolled(ctx context.Context, table, where, key string, before time.Time, limit int) (int, error) {
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	until, err := t.rolledUntil(ctx)
	if err != nil || until.IsZero() {
		return 0, err
	}
	q := rebind(t.s.d, `DELETE FROM `+table+` WHERE (`+key+`) IN (SELECT `+key+` FROM `+table+` WHERE `+where+` LIMIT ?)`)
	res, err := t.q.ExecContext(ctx, q, t.s.timeArg(before), t.s.timeArg(until), limit)
	if err != nil {
		return 0, fmt.Errorf("%s: prune %s: %w", t.s.d.Name, table, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
