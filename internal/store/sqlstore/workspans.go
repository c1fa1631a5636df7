package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// workSpanCols are the columns of work_spans, in scan order.
const workSpanCols = `id, project_id, cluster_id, node_id, work_key, namespace, name, job, account, labels, gpus, start_at, end_at, progress`

// workSpanChunk is how many spans one statement inserts.
const workSpanChunk = 64

// AddWorkSpans inserts the spans, up to workSpanChunk per statement.
func (t *tx) AddWorkSpans(ctx context.Context, ws []domain.WorkSpan) error {
	const row = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	for len(ws) > 0 {
		chunk := ws[:min(len(ws), workSpanChunk)]
		ws = ws[len(chunk):]
		q := rebind(t.s.d, `INSERT INTO work_spans (`+strings.TrimPrefix(workSpanCols, "id, ")+`) VALUES `+
			strings.TrimSuffix(strings.Repeat(row+", ", len(chunk)), ", ")+` ON CONFLICT DO NOTHING`)
		args := make([]any, 0, 13*len(chunk))
		for _, w := range chunk {
			labels := store.LabelsText(w.Labels)
			args = append(args, w.ProjectID, w.ClusterID, w.NodeID, text(w.Key), text(w.Namespace), text(w.Name),
				text(w.Job), text(w.Account), labels, w.GPUs, t.s.timeArg(w.Start), t.s.timeArg(w.End), w.Progress)
		}
		res, err := t.q.ExecContext(ctx, q, args...)
		if err != nil {
			return t.writeErr(fmt.Sprintf("add %d work spans", len(chunk)), err)
		}
		// A span that starts before the rollup mark is a late row (one
		// already written, left as it was, is not).
		if n, err := res.RowsAffected(); err == nil && n > 0 {
			late := make([]lateRow, len(chunk))
			for i, w := range chunk {
				late[i] = lateRow{w.ProjectID, w.ClusterID, w.Start, w.Start}
			}
			if err := t.late(ctx, late); err != nil {
				return err
			}
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
	late := make([]lateRow, len(ws))
	for i, w := range ws {
		late[i] = lateRow{w.ProjectID, w.ClusterID, w.End, w.End}
	}
	return t.late(ctx, late)
}

// SetWorkProgress sets the Progress of each open span of its node and key.
func (t *tx) SetWorkProgress(ctx context.Context, ws []domain.WorkSpan) error {
	q := rebind(t.s.d, `UPDATE work_spans SET progress = ? WHERE node_id = ? AND work_key = ? AND end_at IS NULL`)
	for _, w := range ws {
		if _, err := t.q.ExecContext(ctx, q, w.Progress, w.NodeID, text(w.Key)); err != nil {
			return t.writeErr("set a work span's progress", err)
		}
	}
	return nil
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
	var c conds
	c.eq("project_id", f.ProjectID)
	c.eq("cluster_id", f.ClusterID)
	if !f.To.IsZero() {
		c.add("start_at < ?", r.s.timeArg(f.To))
	}
	if !f.From.IsZero() {
		c.add("(end_at IS NULL OR end_at > ?)", r.s.timeArg(f.From))
	}
	if f.Open {
		c.add("end_at IS NULL")
	}
	sc, err := newSpanScan(f.Only)
	if err != nil {
		return err
	}
	rows, err := r.q.QueryContext(ctx, rebind(r.s.d, `SELECT `+sc.cols+` FROM work_spans`+c.sql()), c.args...)
	if err != nil {
		return fmt.Errorf("%s: scan work spans: %w", r.s.d.Name, err)
	}
	defer rows.Close()
	for rows.Next() {
		w, err := sc.scan(rows)
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

// spanScan reads the columns of a work span a scan asks for.
type spanScan struct {
	cols string
	// field is the one column read beside the span's node, key, GPUs,
	// start and end ("": all of them); label its label's key, quoted as
	// stored, for a label.
	field, key, quoted string
}

func newSpanScan(only string) (spanScan, error) {
	const lean = `cluster_id, node_id, work_key, gpus, start_at, end_at, progress`
	switch only {
	case "":
		return spanScan{cols: workSpanCols}, nil
	case "namespace", "job", "account":
		return spanScan{cols: lean + ", " + only, field: only}, nil
	}
	key, ok := strings.CutPrefix(only, "label:")
	if !ok || !utf8.ValidString(key) {
		return spanScan{}, fmt.Errorf("scan work spans: cannot read only %q", only)
	}
	q, _ := json.Marshal(key)
	return spanScan{cols: lean + ", labels", field: "labels", key: key, quoted: string(q)}, nil
}

func (sc spanScan) scan(rows scanner) (w domain.WorkSpan, err error) {
	if sc.field == "" {
		return scanWorkSpan(rows)
	}
	var v string
	if err := rows.Scan(&w.ClusterID, &w.NodeID, &w.Key, &w.GPUs, timeCol{&w.Start}, timeCol{&w.End}, &w.Progress, &v); err != nil {
		return w, err
	}
	switch sc.field {
	case "namespace":
		w.Namespace = v
	case "job":
		w.Job = v
	case "account":
		w.Account = v
	default:
		if l, ok, err := labelOf(v, sc.key, sc.quoted); err != nil {
			return w, err
		} else if ok {
			w.Labels = map[string]string{sc.key: l}
		}
	}
	return w, nil
}

func scanWorkSpan(sc scanner) (w domain.WorkSpan, err error) {
	var labels string
	err = sc.Scan(&w.ID, &w.ProjectID, &w.ClusterID, &w.NodeID, &w.Key, &w.Namespace, &w.Name, &w.Job, &w.Account,
		&labels, &w.GPUs, timeCol{&w.Start}, timeCol{&w.End}, &w.Progress)
	if err == nil && labels != "" {
		err = json.Unmarshal([]byte(labels), &w.Labels)
	}
	return w, err
}

// labelOf finds key's value in labels as stored (a JSON object of strings
// that json.Marshal wrote) without decoding the rest: a key is a quoted
// string right after '{' or ',' and before ':', which no string's escaped
// text can hold, since it never has an unescaped quote.
// quoted is key as json.Marshal writes it.
func labelOf(labels, key, quoted string) (string, bool, error) {
	for _, lead := range []byte{'{', ','} {
		i := indexKey(labels, lead, quoted)
		if i < 0 {
			continue
		}
		rest := labels[i+1+len(quoted)+1:]
		end := 1
		for end < len(rest) && rest[end] != '"' {
			if rest[end] == '\\' {
				end++
			}
			end++
		}
		var v string
		if end >= len(rest) {
			return "", false, fmt.Errorf("labels %.40q: unterminated value of %q", labels, key)
		}
		if raw := rest[1:end]; !strings.ContainsRune(raw, '\\') {
			return raw, true, nil // nothing escaped: the text is the value
		}
		if err := json.Unmarshal([]byte(rest[:end+1]), &v); err != nil {
			return "", false, fmt.Errorf("labels %.40q: value of %q: %w", labels, key, err)
		}
		return v, true, nil
	}
	return "", false, nil
}

// indexKey is where lead, then quoted, then ':' are in labels; -1 if not.
func indexKey(labels string, lead byte, quoted string) int {
	for from := 0; ; {
		i := strings.Index(labels[from:], quoted)
		if i < 0 {
			return -1
		}
		i += from
		if i > 0 && labels[i-1] == lead && i+len(quoted) < len(labels) && labels[i+len(quoted)] == ':' {
			return i - 1
		}
		from = i + 1
	}
}
