package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// workSpanCols are the columns of work_spans, in scan order.
const workSpanCols = `id, project_id, cluster_id, node_id, work_key, namespace, name, job, account, labels, gpus, start_at, end_at`

// workSpanChunk is how many spans one statement inserts.
const workSpanChunk = 64

// AddWorkSpans inserts the spans, up to workSpanChunk per statement.
func (t *tx) AddWorkSpans(ctx context.Context, ws []domain.WorkSpan) error {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for len(ws) > 0 {
		chunk := ws[:min(len(ws), workSpanChunk)]
		ws = ws[len(chunk):]
		q := rebind(t.s.d, `INSERT INTO work_spans (`+strings.TrimPrefix(workSpanCols, "id, ")+`) VALUES `+
			strings.TrimSuffix(strings.Repeat(row+", ", len(chunk)), ", ")+` ON CONFLICT DO NOTHING`)
		args := make([]any, 0, 12*len(chunk))
		for _, w := range chunk {
			labels, err := labelsText(w.Labels)
			if err != nil {
				return err
			}
			args = append(args, w.ProjectID, w.ClusterID, w.NodeID, text(w.Key), text(w.Namespace), text(w.Name),
				text(w.Job), text(w.Account), labels, w.GPUs, t.s.timeArg(w.Start), t.s.timeArg(w.End))
		}
		if _, err := t.q.ExecContext(ctx, q, args...); err != nil {
			return t.writeErr(fmt.Sprintf("add %d work spans", len(chunk)), err)
		}
	}
	return nil
}

// EndWorkSpans closes each open span of its node and key.
func (t *tx) EndWorkSpans(ctx context.Context, ws []domain.WorkSpan) error {
	q := rebind(t.s.d, `UPDATE work_spans SET end_at = ? WHERE node_id = ? AND work_key = ? AND end_at IS NULL`)
	for _, w := range ws {
		if _, err := t.q.ExecContext(ctx, q, t.s.timeArg(w.End), w.NodeID, text(w.Key)); err != nil {
			return t.writeErr("end a work span", err)
		}
	}
	return nil
}

// maxLabelsText bounds a span's labels as stored: domain.MaxWorkLabels of
// a tenant's labels, each cut to store.MaxText.
const maxLabelsText = 16 << 10

// labelsText is labels as stored: JSON, empty for none. Labels that do
// not fit maxLabelsText are refused (the drivers keep fewer).
func labelsText(labels map[string]string) (string, error) {
	if len(labels) == 0 {
		return "", nil
	}
	if len(labels) > domain.MaxWorkLabels {
		return "", fmt.Errorf("a work span has %d labels; at most %d are kept", len(labels), domain.MaxWorkLabels)
	}
	cut := make(map[string]string, len(labels))
	for k, v := range labels {
		cut[text(k)] = text(v)
	}
	b, err := json.Marshal(cut)
	if err != nil || len(b) > maxLabelsText {
		return "", fmt.Errorf("a work span's labels take %d bytes; at most %d are kept", len(b), maxLabelsText)
	}
	return string(b), nil
}

// ScanWorkSpans takes a scan slot like ScanUsage.
func (s *Store) ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error {
	if s.scans != nil {
		select {
		case s.scans <- struct{}{}:
			defer func() { <-s.scans }()
		case <-ctx.Done():
			return fmt.Errorf("%s: scan work spans: %w", s.d.Name, ctx.Err())
		}
	}
	return s.rd().ScanWorkSpans(ctx, f, fn)
}

func (r reader) ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error {
	var where []string
	var args []any
	if f.ProjectID != "" {
		where, args = append(where, "project_id = ?"), append(args, f.ProjectID)
	}
	if f.ClusterID != "" {
		where, args = append(where, "cluster_id = ?"), append(args, f.ClusterID)
	}
	if !f.To.IsZero() {
		where, args = append(where, "start_at < ?"), append(args, r.s.timeArg(f.To))
	}
	if !f.From.IsZero() {
		where, args = append(where, "(end_at IS NULL OR end_at > ?)"), append(args, r.s.timeArg(f.From))
	}
	if f.Open {
		where = append(where, "end_at IS NULL")
	}
	q := `SELECT ` + workSpanCols + ` FROM work_spans`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := r.q.QueryContext(ctx, rebind(r.s.d, q+" ORDER BY node_id, start_at, id"), args...)
	if err != nil {
		return fmt.Errorf("%s: scan work spans: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		w, err := scanWorkSpan(rows)
		if err != nil {
			return fmt.Errorf("%s: scan work spans: %w", r.s.d.Name, err)
		}
		if err := fn(w); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("%s: scan work spans: %w", r.s.d.Name, err)
	}
	return nil
}

func scanWorkSpan(sc scanner) (w domain.WorkSpan, err error) {
	var labels string
	err = sc.Scan(&w.ID, &w.ProjectID, &w.ClusterID, &w.NodeID, &w.Key, &w.Namespace, &w.Name, &w.Job, &w.Account,
		&labels, &w.GPUs, timeCol{&w.Start}, timeCol{&w.End})
	if err == nil && labels != "" {
		err = json.Unmarshal([]byte(labels), &w.Labels)
	}
	return w, err
}
