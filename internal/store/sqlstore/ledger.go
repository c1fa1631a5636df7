package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// lostWorkCols are the columns of the lost-work ledger, in scan order.
const lostWorkCols = `node_id, node_name, cluster_id, cluster_name, project_id, region, gpu_type, class, cause, noticed_at,
	gpu_seconds, job, saved_at`

// lostWorkChunk is how many entries one statement inserts: a burst's
// drains are committed with their ledger in the transaction that stands
// before their notices, so it is written in a few statements.
const lostWorkChunk = 64

// AddLostWork inserts the entries, up to lostWorkChunk per statement.
func (t *tx) AddLostWork(ctx context.Context, ws []domain.LostWork) error {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for len(ws) > 0 {
		chunk := ws[:min(len(ws), lostWorkChunk)]
		ws = ws[len(chunk):]
		q := rebind(t.s.d, `INSERT INTO lost_work (`+lostWorkCols+`) VALUES `+
			strings.TrimSuffix(strings.Repeat(row+", ", len(chunk)), ", ")+` ON CONFLICT DO NOTHING`)
		args := make([]any, 0, 13*len(chunk))
		for _, w := range chunk {
			args = append(args, w.NodeID, text(w.NodeName), w.ClusterID, text(w.ClusterName), w.ProjectID,
				w.Region, w.GPUType, string(w.Class), string(w.Cause), t.s.timeArg(w.At), w.GPUSeconds, text(w.Job), t.s.timeArg(w.SavedAt))
		}
		if _, err := t.q.ExecContext(ctx, q, args...); err != nil {
			return t.writeErr(fmt.Sprintf("add the lost work of %d nodes", len(chunk)), err)
		}
	}
	return nil
}

// SaveLostWork records that node nodeID's work saved, at at, the work at
// risk at its notice; an entry saved already, or none, is left as it was.
func (t *tx) SaveLostWork(ctx context.Context, nodeID string, at time.Time) error {
	q := rebind(t.s.d, `UPDATE lost_work SET saved_at = ? WHERE node_id = ? AND saved_at IS NULL`)
	if _, err := t.q.ExecContext(ctx, q, t.s.timeArg(at), nodeID); err != nil {
		return t.writeErr("record a checkpoint within a notice", err)
	}
	return nil
}

func (s *Store) ListLostWork(ctx context.Context, f store.LostWorkFilter) ([]domain.LostWork, error) {
	return s.rd().ListLostWork(ctx, f)
}

func (r reader) ListLostWork(ctx context.Context, f store.LostWorkFilter) ([]domain.LostWork, error) {
	var c conds
	c.eq("project_id", f.ProjectID)
	c.eq("cluster_id", f.ClusterID)
	if !f.From.IsZero() {
		c.add("noticed_at >= ?", r.s.timeArg(f.From))
	}
	if !f.To.IsZero() {
		c.add("noticed_at < ?", r.s.timeArg(f.To))
	}
	q := `SELECT ` + lostWorkCols + ` FROM lost_work` + c.sql()
	return list(ctx, r, scanLostWork, "lost work", rebind(r.s.d, q+" ORDER BY noticed_at, node_id"), c.args...)
}

func scanLostWork(sc scanner) (w domain.LostWork, err error) {
	err = sc.Scan(&w.NodeID, &w.NodeName, &w.ClusterID, &w.ClusterName, &w.ProjectID, &w.Region, &w.GPUType,
		&w.Class, &w.Cause, timeCol{&w.At}, &w.GPUSeconds, &w.Job, timeCol{&w.SavedAt})
	if err != nil {
		err = fmt.Errorf("scan lost work: %w", err)
	}
	return w, err
}

// conds is a WHERE clause built from the conditions that apply.
type conds struct {
	where []string
	args  []any
}

// add adds a condition and its arguments.
func (c *conds) add(cond string, args ...any) {
	c.where, c.args = append(c.where, cond), append(c.args, args...)
}

// eq adds col = v, when v is set.
func (c *conds) eq(col, v string) {
	if v != "" {
		c.add(col+" = ?", v)
	}
}

// sql is " WHERE a AND b", or "" without conditions.
func (c *conds) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}
