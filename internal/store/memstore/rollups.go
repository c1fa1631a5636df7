package memstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// rollupTables are the rollup rows by month, project, cluster and row,
// the dirty cluster months (row -1 keys), and the mark (one row, key 1:
// tkey of rolled_until).
type rollupTables struct {
	rollups    tree[rkey, *domain.Rollup]
	dirty      tree[rkey, bool]
	rollupMark tree[int, int64]
}

type rkey struct {
	month            int64
	project, cluster string
	row              int
}

func cmpRKey(a, b rkey) int {
	return cmp.Or(cmp.Compare(a.month, b.month), strings.Compare(a.project, b.project), strings.Compare(a.cluster, b.cluster),
		cmp.Compare(a.row, b.row))
}

// dkey is cm's key in dirty.
func dkey(cm domain.ClusterMonth) rkey {
	return rkey{tkey(store.MonthOf(cm.Month)), cm.ProjectID, cm.ClusterID, -1}
}

func newRollupTables() rollupTables {
	return rollupTables{rollups: newTree[rkey, *domain.Rollup](cmpRKey), dirty: newTree[rkey, bool](cmpRKey),
		rollupMark: newTree[int, int64](cmp.Compare[int])}
}

func (t *tx) PutRollups(ctx context.Context, cm domain.ClusterMonth, rows []domain.Rollup) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	m, clusterID := tkey(store.MonthOf(cm.Month)), cm.ClusterID
	var old []rkey
	t.st.rollups.ascend(&rkey{month: m, project: cm.ProjectID, cluster: clusterID}, func(k rkey, _ *domain.Rollup) bool {
		if k.month != m || k.project != cm.ProjectID || k.cluster != clusterID {
			return false
		}
		old = append(old, k)
		return true
	})
	for _, k := range old {
		t.st.rollups.delete(t.w, k)
	}
	t.st.dirty.delete(t.w, dkey(cm))
	for i, r := range rows {
		r.Month, r.ProjectID, r.ClusterID = store.MonthOf(cm.Month), cm.ProjectID, clusterID
		r.Start, r.End = dbTime(r.Start), dbTime(r.End)
		r.Namespace, r.Account = text(r.Namespace), text(r.Account)
		r.Amount, r.OnDemand = cmp.Or(r.Amount, "0"), cmp.Or(r.OnDemand, "0")
		if l := store.LabelsText(r.Labels); l != "" {
			s, _ := storedSpan(domain.WorkSpan{Running: domain.Running{Labels: r.Labels}})
			r.Labels = s.Labels
		} else {
			r.Labels = nil
		}
		t.st.rollups.set(t.w, rkey{m, cm.ProjectID, clusterID, i}, &r)
	}
	return nil
}

func (t *tx) MarkRolled(ctx context.Context, until time.Time) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if old, ok := t.st.rollupMark.get(1); !ok || old < tkey(until) {
		t.st.rollupMark.set(t.w, 1, tkey(until))
	}
	return nil
}

// rolledUntil is the mark (zero: nothing rolled).
func (v view) rolledUntil() time.Time {
	if m, ok := v.st.rollupMark.get(1); ok {
		return time.UnixMicro(m).UTC()
	}
	return time.Time{}
}

// late marks dirty the rolled months a row of cluster (of project)
// changes from from on, when when is before the mark (as sqlstore's
// late).
func (t *tx) late(project, cluster string, from, when time.Time) {
	until := t.rolledUntil()
	if until.IsZero() || from.IsZero() || when.IsZero() || !when.Before(until) {
		return
	}
	for _, cm := range store.DirtyMonths(project, cluster, from, until) {
		t.st.dirty.set(t.w, dkey(cm), true)
	}
}

func (t *tx) MarkDirty(ctx context.Context, cms []domain.ClusterMonth) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for _, cm := range cms {
		t.st.dirty.set(t.w, dkey(cm), true)
	}
	return nil
}

func (v view) RollupState(ctx context.Context) (domain.RollupState, error) {
	if err := v.check(ctx); err != nil {
		return domain.RollupState{}, err
	}
	st := domain.RollupState{RolledUntil: v.rolledUntil()}
	v.st.dirty.each(func(k rkey, _ bool) bool {
		st.Dirty = append(st.Dirty, domain.ClusterMonth{Month: time.UnixMicro(k.month).UTC(), ProjectID: k.project, ClusterID: k.cluster})
		return true
	})
	return st, nil
}

func (v view) ScanRollups(ctx context.Context, f store.RollupFilter, fn func(domain.Rollup) error) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	var lo *rkey
	if !f.From.IsZero() {
		lo = &rkey{month: tkey(store.MonthOf(f.From))}
	}
	var out []domain.Rollup
	v.st.rollups.ascend(lo, func(k rkey, r *domain.Rollup) bool {
		if !f.To.IsZero() && k.month >= tkey(f.To) {
			return false
		}
		if (f.ProjectID == "" || r.ProjectID == f.ProjectID) && (f.ClusterID == "" || r.ClusterID == f.ClusterID) &&
			(len(f.Kinds) == 0 || slices.Contains(f.Kinds, r.Kind)) && f.Merged == (r.ClusterID == "") {
			c := *r
			c.Labels = maps.Clone(r.Labels)
			out = append(out, c)
		}
		return true
	})
	for _, r := range out {
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// PruneClusterWork deletes clusters' work rows of months before before,
// in key order.
func (t *tx) PruneClusterWork(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	var gone []rkey
	t.st.rollups.ascend(nil, func(k rkey, r *domain.Rollup) bool {
		if k.month >= tkey(before) {
			return false
		}
		if k.cluster != "" && (r.Kind == domain.RollupWork || r.Kind == domain.RollupMore) {
			gone = append(gone, k)
		}
		return len(gone) < limit
	})
	for _, k := range gone {
		t.st.rollups.delete(t.w, k)
	}
	return len(gone), nil
}

// PruneLabelSets deletes nothing: the memory store keeps each row's
// labels with it, not as a set of their own.
func (t *tx) PruneLabelSets(ctx context.Context, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	t.unlock()
	return 0, nil
}

// PruneLostWork deletes the entries noticed first.
func (t *tx) PruneLostWork(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	cut := tkey(dbTime(before))
	var gone []*domain.LostWork
	t.st.lostWorkOrder.each(func(k tid, w *domain.LostWork) bool {
		if k.t >= cut {
			return false
		}
		gone = append(gone, w)
		return len(gone) < limit
	})
	for _, w := range gone {
		t.st.lostWork.delete(t.w, w.NodeID)
		t.st.lostWorkOrder.delete(t.w, tid{tkey(w.At), w.NodeID})
		t.st.lostWorkByProject.delete(t.w, stid{w.ProjectID, tkey(w.At), w.NodeID})
	}
	return len(gone), nil
}

// PruneNodeHistory deletes the archived nodes removed first.
func (t *tx) PruneNodeHistory(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	if before.IsZero() || limit <= 0 {
		return 0, nil
	}
	cut := dbTime(before)
	var old []*domain.Node
	t.st.history.each(func(_ string, n *domain.Node) bool {
		if !n.RemovedAt.IsZero() && n.RemovedAt.Before(cut) {
			old = append(old, n)
		}
		return true
	})
	slices.SortStableFunc(old, func(a, b *domain.Node) int { return a.RemovedAt.Compare(b.RemovedAt) })
	for _, n := range old[:min(len(old), limit)] {
		k := created(n)
		t.st.history.delete(t.w, n.ID)
		t.st.historyOrder.delete(t.w, k)
		t.st.historyByCluster.delete(t.w, stid{n.ClusterID, k.t, n.ID})
		t.st.historyByMachine.delete(t.w, stid{n.MachineID, k.t, n.ID})
	}
	return min(len(old), limit), nil
}

// behindMark says of an end whether a row ending then goes: before
// before and by the rollup mark; ok is false when nothing goes.
func (t *tx) behindMark(before time.Time, limit int) (goes func(end time.Time) bool, ok bool) {
	until := t.rolledUntil()
	if before.IsZero() || limit <= 0 || until.IsZero() {
		return nil, false
	}
	cut := dbTime(before)
	return func(end time.Time) bool { return !end.IsZero() && end.Before(cut) && !end.After(until) }, true
}

// PruneUsage deletes final records that ended before before and by the
// mark, in key order.
func (t *tx) PruneUsage(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	goes, ok := t.behindMark(before, limit)
	if !ok {
		return 0, nil
	}
	gone := firstOf(&t.st.usage, limit, func(r *domain.UsageRecord) bool { return r.Final && goes(r.End) })
	for _, r := range gone {
		start := tkey(r.Start)
		t.st.usage.delete(t.w, stid{s: r.NodeID, t: start})
		t.st.usageByStart.delete(t.w, tid{start, r.NodeID})
		t.st.usageByProject.delete(t.w, stid{r.ProjectID, start, r.NodeID})
		t.st.usageByCluster.delete(t.w, stid{r.ClusterID, start, r.NodeID})
	}
	return len(gone), nil
}

// PruneWorkSpans deletes ended spans as PruneUsage deletes records, by
// ID.
func (t *tx) PruneWorkSpans(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	goes, ok := t.behindMark(before, limit)
	if !ok {
		return 0, nil
	}
	gone := firstOf(&t.st.spans, limit, func(s *domain.WorkSpan) bool { return goes(s.End) })
	t.dropSpans(gone)
	return len(gone), nil
}

// firstOf are the first limit rows of tr, in its order, that goes says
// go.
func firstOf[K, V any](tr *tree[K, *V], limit int, goes func(*V) bool) []*V {
	var out []*V
	tr.each(func(_ K, v *V) bool {
		if goes(v) {
			out = append(out, v)
		}
		return len(out) < limit
	})
	return out
}

// dropSpans deletes ended spans from their tables.
func (t *tx) dropSpans(gone []*domain.WorkSpan) {
	for _, s := range gone {
		t.st.spans.delete(t.w, s.ID)
		t.st.spanKeys.delete(t.w, ssi{s.NodeID, s.Key, tkey(s.Start)})
		t.st.spansByProject.delete(t.w, sttid{s.ProjectID, tkey(s.Start), s.ID, ""})
		t.st.spansByCluster.delete(t.w, sttid{s.ClusterID, tkey(s.Start), s.ID, ""})
	}
}
