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
	var where []string
	var args []any
	if f.ProjectID != "" {
		where, args = append(where, "project_id = ?"), append(args, f.ProjectID)
	}
	if f.ClusterID != "" {
		where, args = append(where, "cluster_id = ?"), append(args, f.ClusterID)
	}
	if !f.From.IsZero() {
		where, args = append(where, "noticed_at >= ?"), append(args, r.s.timeArg(f.From))
	}
	if !f.To.IsZero() {
		where, args = append(where, "noticed_at < ?"), append(args, r.s.timeArg(f.To))
	}
	q := `SELECT ` + lostWorkCols + ` FROM lost_work`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return list(ctx, r, scanLostWork, "lost work", rebind(r.s.d, q+" ORDER BY noticed_at, node_id"), args...)
}

func scanLostWork(sc scanner) (w domain.LostWork, err error) {
	err = sc.Scan(&w.NodeID, &w.NodeName, &w.ClusterID, &w.ClusterName, &w.ProjectID, &w.Region, &w.GPUType,
		&w.Class, &w.Cause, timeCol{&w.At}, &w.GPUSeconds, &w.Job, timeCol{&w.SavedAt})
	if err != nil {
		err = fmt.Errorf("scan lost work: %w", err)
	}
	return w, err
}
