package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// spanTables are the work spans by ID (an AUTOINCREMENT key), by their
// unique key (node, work key, start), the open ones by node then ID, and
// by project and by cluster then start then ID. A scan walks the one
// SQLite's plan walks, so spans come in its order: by project and start
// when a project is asked for, by cluster and start when a cluster is,
// else the open ones by node when only those are, else by ID.
type spanTables struct {
	spans          tree[int64, *domain.WorkSpan]
	spanKeys       tree[ssi, int64]
	spansOpen      tree[ssi, *domain.WorkSpan]
	spansByProject tree[sttid, *domain.WorkSpan]
	spansByCluster tree[sttid, *domain.WorkSpan]
}

func newSpanTables() spanTables {
	return spanTables{spans: newTree[int64, *domain.WorkSpan](cmp.Compare[int64]), spanKeys: newTree[ssi, int64](cmpSSI),
		spansOpen: newTree[ssi, *domain.WorkSpan](cmpSSI), spansByProject: newTree[sttid, *domain.WorkSpan](cmpSTTID),
		spansByCluster: newTree[sttid, *domain.WorkSpan](cmpSTTID)}
}

// AddWorkSpans writes the spans in statements of 64; one of a node, key
// and start already written is left as it was (its row took an ID,
// though, as with any AUTOINCREMENT key).
func (t *tx) AddWorkSpans(ctx context.Context, ws []domain.WorkSpan) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return eachChunk(ws, fixedChunk, func(chunk []domain.WorkSpan) error {
		for _, w := range chunk {
			if w.Start.IsZero() {
				return notNull(fmt.Sprintf("add %d work spans", len(chunk)), "work_spans.start_at")
			}
		}
		stored := make([]*domain.WorkSpan, len(chunk))
		for i, w := range chunk {
			s, err := storedSpan(w)
			if err != nil {
				return fmt.Errorf("add %d work spans: %w", len(chunk), err)
			}
			stored[i] = s
		}
		for _, s := range stored {
			t.st.spanSeq++
			key := ssi{s.NodeID, s.Key, tkey(s.Start)}
			if t.st.spanKeys.has(key) {
				continue
			}
			s.ID = t.st.spanSeq
			t.st.spanKeys.set(t.w, key, s.ID)
			t.putSpan(nil, s)
			t.late(s.ProjectID, s.ClusterID, s.Start, s.Start)
		}
		return nil
	})
}

// storedSpan is w as work_spans keeps it: the text a tenant wrote cut,
// its labels bounded (labelsText) and read back from their JSON.
func storedSpan(w domain.WorkSpan) (*domain.WorkSpan, error) {
	w.Key, w.Namespace, w.Name, w.Job, w.Account = text(w.Key), text(w.Namespace), text(w.Name), text(w.Job), text(w.Account)
	w.Start, w.End = dbTime(w.Start), dbTime(w.End)
	labels := w.Labels
	w.Labels = nil
	if l := store.LabelsText(labels); l != "" {
		if err := json.Unmarshal([]byte(l), &w.Labels); err != nil {
			return nil, err
		}
	}
	return &w, nil
}

// putSpan writes span s over old (nil: a new span); only its end and
// progress ever change.
func (t *tx) putSpan(old, s *domain.WorkSpan) {
	g := t.w
	t.st.spans.set(g, s.ID, s)
	t.st.spansByProject.set(g, sttid{s.ProjectID, tkey(s.Start), s.ID, ""}, s)
	t.st.spansByCluster.set(g, sttid{s.ClusterID, tkey(s.Start), s.ID, ""}, s)
	reindex(&t.st.spansOpen, g, old != nil && old.End.IsZero(), ssi{a: s.NodeID, n: s.ID},
		s.End.IsZero(), ssi{a: s.NodeID, n: s.ID}, s)
}

// openSpans returns the open spans of node and (stored) key.
func (t *tx) openSpans(node, key string) []*domain.WorkSpan {
	var out []*domain.WorkSpan
	t.st.spansOpen.ascend(&ssi{a: node}, func(k ssi, s *domain.WorkSpan) bool {
		if k.a != node {
			return false
		}
		if s.Key == key {
			out = append(out, s)
		}
		return true
	})
	return out
}

// EndWorkSpans sets the end of each open span of its node and key.
func (t *tx) EndWorkSpans(ctx context.Context, ws []domain.WorkSpan) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for _, w := range ws {
		if w.End.IsZero() {
			continue // ending at NULL leaves it open
		}
		for _, s := range t.openSpans(w.NodeID, text(w.Key)) {
			next := *s
			next.End = dbTime(w.End)
			t.putSpan(s, &next)
		}
		t.late(w.ProjectID, w.ClusterID, w.End, w.End) // as sqlstore: by what was asked
	}
	return nil
}

// SetWorkProgress sets the progress of each open span of its node and key.
func (t *tx) SetWorkProgress(ctx context.Context, ws []domain.WorkSpan) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for _, w := range ws {
		for _, s := range t.openSpans(w.NodeID, text(w.Key)) {
			next := *s
			next.Progress = w.Progress
			t.putSpan(s, &next)
		}
	}
	return nil
}

func (v view) ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	only, err := newSpanScan(f.Only)
	if err != nil {
		return err
	}
	from, to := tkey(dbTime(f.From)), tkey(dbTime(f.To))
	var ferr error
	visit := func(s *domain.WorkSpan) bool {
		if (f.ProjectID != "" && s.ProjectID != f.ProjectID) || (f.ClusterID != "" && s.ClusterID != f.ClusterID) ||
			(!f.To.IsZero() && tkey(s.Start) >= to) || (!f.From.IsZero() && !s.End.IsZero() && tkey(s.End) <= from) ||
			(f.Open && !s.End.IsZero()) {
			return true
		}
		ferr = fn(only.of(s))
		return ferr == nil
	}
	switch {
	case f.ProjectID != "":
		v.st.spansByProject.ascend(&sttid{s: f.ProjectID, t: minKey, u: minKey}, func(k sttid, s *domain.WorkSpan) bool {
			return k.s == f.ProjectID && (f.To.IsZero() || k.t < to) && visit(s)
		})
	case f.ClusterID != "":
		v.st.spansByCluster.ascend(&sttid{s: f.ClusterID, t: minKey, u: minKey}, func(k sttid, s *domain.WorkSpan) bool {
			return k.s == f.ClusterID && (f.To.IsZero() || k.t < to) && visit(s)
		})
	case f.Open:
		v.st.spansOpen.each(func(_ ssi, s *domain.WorkSpan) bool { return visit(s) })
	default:
		v.st.spans.each(func(_ int64, s *domain.WorkSpan) bool { return visit(s) })
	}
	return ferr
}

// spanScan is what a scan reads of each span (WorkSpanFilter.Only).
type spanScan struct {
	// field is "" (every field), "namespace", "job", "account" or
	// "labels" (one label: key's).
	field, key string
}

func newSpanScan(only string) (spanScan, error) {
	switch only {
	case "", "namespace", "job", "account":
		return spanScan{field: only}, nil
	}
	key, ok := strings.CutPrefix(only, "label:")
	if !ok || !utf8.ValidString(key) {
		return spanScan{}, fmt.Errorf("scan work spans: cannot read only %q", only)
	}
	return spanScan{field: "labels", key: key}, nil
}

// of returns what the scan reads of s, the caller's to keep.
func (sc spanScan) of(s *domain.WorkSpan) domain.WorkSpan {
	if sc.field == "" {
		w := *s
		w.Labels = maps.Clone(s.Labels)
		return w
	}
	w := domain.WorkSpan{ClusterID: s.ClusterID, NodeID: s.NodeID, Running: domain.Running{Key: s.Key, GPUs: s.GPUs,
		Start: s.Start, Progress: s.Progress}, End: s.End}
	switch sc.field {
	case "namespace":
		w.Namespace = s.Namespace
	case "job":
		w.Job = s.Job
	case "account":
		w.Account = s.Account
	default:
		if l, ok := s.Labels[sc.key]; ok {
			w.Labels = map[string]string{sc.key: l}
		}
	}
	return w
}
