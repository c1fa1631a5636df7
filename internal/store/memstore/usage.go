package memstore

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// usageTables are the usage records by their key (node, start), and in
// listing order (start, node): all, by project, by cluster, and the ones
// not final yet.
type usageTables struct {
	usage          tree[stid, *domain.UsageRecord]
	usageByStart   tree[tid, *domain.UsageRecord]
	usageByProject tree[stid, *domain.UsageRecord]
	usageByCluster tree[stid, *domain.UsageRecord]
	usageOpen      tree[tid, *domain.UsageRecord]
}

func newUsageTables() usageTables {
	return usageTables{usage: newTree[stid, *domain.UsageRecord](cmpSTID),
		usageByStart: newTree[tid, *domain.UsageRecord](cmpTID), usageByProject: newTree[stid, *domain.UsageRecord](cmpSTID),
		usageByCluster: newTree[stid, *domain.UsageRecord](cmpSTID), usageOpen: newTree[tid, *domain.UsageRecord](cmpTID)}
}

func (t *tx) PutUsage(ctx context.Context, u domain.UsageRecord) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if u.Start.IsZero() {
		return notNull("put usage of node "+u.NodeID, "usage.start_at")
	}
	r := storedUsage(u)
	t.putUsage(r)
	if r.Final {
		t.markMetered(r)
	}
	t.late(r.ProjectID, r.ClusterID, r.Start, r.End)
	return nil
}

// storedUsage is u as the usage table keeps it.
func storedUsage(u domain.UsageRecord) *domain.UsageRecord {
	u.Start, u.End = dbTime(u.Start), dbTime(u.End)
	return &u
}

// putUsage writes r unless the record of its key must stay: a final
// record is never replaced, and a running one only by a final one or one
// reaching at least as far (an end that is NULL reaches nowhere).
func (t *tx) putUsage(r *domain.UsageRecord) {
	start := tkey(r.Start)
	old, had := t.st.usage.get(stid{s: r.NodeID, t: start})
	if had && (old.Final || !(r.Final || (!r.End.IsZero() && !old.End.IsZero() && !r.End.Before(old.End)))) {
		return
	}
	g := t.w
	t.st.usage.set(g, stid{s: r.NodeID, t: start}, r)
	t.st.usageByStart.set(g, tid{start, r.NodeID}, r)
	var o domain.UsageRecord
	if had {
		o = *old
	}
	reindex(&t.st.usageByProject, g, had, stid{o.ProjectID, start, o.NodeID}, true, stid{r.ProjectID, start, r.NodeID}, r)
	reindex(&t.st.usageByCluster, g, had, stid{o.ClusterID, start, o.NodeID}, true, stid{r.ClusterID, start, r.NodeID}, r)
	reindex(&t.st.usageOpen, g, had && !o.Final, tid{start, o.NodeID}, !r.Final, tid{start, r.NodeID}, r)
}

// PutUsages writes the records as the SQL backends do: one by one when
// two share a node and start (as sqlstore compares them), else in
// statements of 64, 32, … records, each written whole or not at all.
func (t *tx) PutUsages(ctx context.Context, us []domain.UsageRecord) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	if _, ok := distinct(us, func(u domain.UsageRecord) string { return u.NodeID + "@" + u.Start.String() }); !ok {
		return store.Each(ctx, us, t.PutUsage)
	}
	return eachStatement(us, usageSizes, func(chunk []domain.UsageRecord) error {
		for _, u := range chunk {
			if u.Start.IsZero() {
				return notNull(fmt.Sprintf("put usage of %d nodes", len(chunk)), "usage.start_at")
			}
		}
		rs := make([]*domain.UsageRecord, len(chunk))
		for i, u := range chunk {
			rs[i] = storedUsage(u)
			t.putUsage(rs[i])
		}
		for _, r := range rs {
			if r.Final {
				t.markMetered(r)
			}
			t.late(r.ProjectID, r.ClusterID, r.Start, r.End)
		}
		return nil
	})
}

func (v view) ListUsage(ctx context.Context, f store.UsageFilter) ([]domain.UsageRecord, error) {
	out := []domain.UsageRecord{}
	err := v.ScanUsage(ctx, f, func(u domain.UsageRecord) error {
		out = append(out, u)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ScanUsage walks the index that narrows the read most; every one is in
// the listing's order (start, node).
func (v view) ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error {
	if err := v.check(ctx); err != nil {
		return err
	}
	to, from := tkey(dbTime(f.To)), tkey(dbTime(f.From))
	var err error
	visit := func(start int64, u *domain.UsageRecord) bool {
		if !f.To.IsZero() && start >= to {
			return false
		}
		if (f.ProjectID != "" && u.ProjectID != f.ProjectID) || (f.ClusterID != "" && u.ClusterID != f.ClusterID) ||
			(!f.From.IsZero() && (u.End.IsZero() || tkey(u.End) <= from)) || (f.Open && u.Final) {
			return true
		}
		err = fn(*u)
		return err == nil
	}
	by := func(tr *tree[stid, *domain.UsageRecord], s string) {
		tr.ascend(&stid{s: s, t: minKey}, func(k stid, u *domain.UsageRecord) bool { return k.s == s && visit(k.t, u) })
	}
	switch {
	case f.ProjectID != "":
		by(&v.st.usageByProject, f.ProjectID)
	case f.ClusterID != "":
		by(&v.st.usageByCluster, f.ClusterID)
	case f.Open:
		v.st.usageOpen.each(func(k tid, u *domain.UsageRecord) bool { return visit(k.t, u) })
	default:
		v.st.usageByStart.each(func(k tid, u *domain.UsageRecord) bool { return visit(k.t, u) })
	}
	return err
}
