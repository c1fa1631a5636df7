package api

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// RollGrace is how long after a month ends the roller waits before it
// rolls it: the meter's last cuts of the month land first.
const RollGrace = time.Hour

// RollWait is how long after a month ends the roller waits for an open
// record that stops short of the month's end (a node the meter cannot
// cut) before it rolls the month anyway: its cut, when it comes, is a
// late row.
const RollWait = 7 * 24 * time.Hour

// RollPass rolls what is due at now, in bounded slices: the next closed
// month is marked rolled with every cluster that used it dirty, then up
// to limit dirty cluster months are computed again from their raw rows,
// each in a transaction of its own (a late row written meanwhile waits
// or marks it again). It returns how many cluster months it rolled.
func (s *Server) RollPass(ctx context.Context, now time.Time, limit int) (int, error) {
	st, err := s.store.RollupState(ctx)
	if err != nil {
		return 0, err
	}
	if err := s.closeMonth(ctx, st.RolledUntil, now); err != nil {
		return 0, err
	}
	if st, err = s.store.RollupState(ctx); err != nil {
		return 0, err
	}
	b, err := s.book(ctx)
	if err != nil {
		return 0, err
	}
	gone, err := s.goneBefore(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, g := range projectMonths(st.Dirty) {
		for len(g) > 0 && n < limit {
			slice := g[:min(len(g), limit-n)]
			g = g[len(slice):]
			last := len(g) == 0
			err := s.store.Update(ctx, func(tx store.Tx) error {
				for _, cm := range slice {
					if err := rollOne(ctx, tx, b, cm, gone); err != nil {
						return err
					}
				}
				if last && !slice[0].Month.Before(gone) {
					return mergeProject(ctx, tx, slice[0]) // (before gone, its clusters' rows may be gone too)
				}
				return nil
			})
			if err != nil {
				return n, fmt.Errorf("roll up %s of project %s: %w", slice[0].Month.Format("2006-01"), slice[0].ProjectID, err)
			}
			n += len(slice)
		}
	}
	return n, nil
}

// projectMonths groups dirty cluster months by month and project (they
// come in that order).
func projectMonths(dirty []domain.ClusterMonth) [][]domain.ClusterMonth {
	var out [][]domain.ClusterMonth
	for i, cm := range dirty {
		if i == 0 || !cm.Month.Equal(dirty[i-1].Month) || cm.ProjectID != dirty[i-1].ProjectID {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], cm)
	}
	return out
}

// rollOne rolls one cluster month up again from its raw rows, or keeps
// its rows when they may be gone (before gone).
func rollOne(ctx context.Context, tx store.Tx, b *billing.Book, cm domain.ClusterMonth, gone time.Time) error {
	roll := rollClusterMonth
	if cm.Month.Before(gone) {
		roll = keptRollups // its raw rows may be gone: what was rolled stands
	}
	rows, err := roll(ctx, tx, b, cm)
	if err != nil {
		return err
	}
	if cm.ClusterID == "" {
		return tx.PutRollups(ctx, cm, nil) // a mark with no cluster: the merge below answers it
	}
	c, err := tx.GetClusterRecord(ctx, cm.ClusterID)
	if err != nil {
		return err
	}
	if c.ProjectID != cm.ProjectID { // marked under another project: clear that mark
		if err := tx.PutRollups(ctx, cm, nil); err != nil {
			return err
		}
		cm.ProjectID = c.ProjectID
	}
	return tx.PutRollups(ctx, cm, rows)
}

// closeMonth marks the month at until rolled, with its clusters dirty,
// once it has ended RollGrace ago and no open usage record stops short
// of its end (or RollWait has passed). With nothing rolled yet, the mark starts at the month of
// the first usage record (or stays unset without one).
func (s *Server) closeMonth(ctx context.Context, until, now time.Time) error {
	if until.IsZero() {
		first, err := s.firstUsage(ctx)
		if err != nil || first.IsZero() {
			return err
		}
		until = store.MonthOf(first)
		if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.MarkRolled(ctx, until) }); err != nil {
			return err
		}
	}
	end := until.AddDate(0, 1, 0)
	if now.Before(end.Add(RollGrace)) {
		return nil
	}
	clusters := map[domain.ClusterMonth]bool{}
	open := false
	err := s.store.ScanUsage(ctx, store.UsageFilter{From: until, To: end}, func(r domain.UsageRecord) error {
		clusters[domain.ClusterMonth{Month: until, ProjectID: r.ProjectID, ClusterID: r.ClusterID}] = true
		open = open || (!r.Final && r.End.Before(end))
		return nil
	})
	if err != nil || (open && now.Before(end.Add(RollWait))) {
		return err
	}
	dirty := slices.Collect(maps.Keys(clusters))
	return s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.MarkDirty(ctx, dirty); err != nil {
			return err
		}
		return tx.MarkRolled(ctx, end)
	})
}

// firstUsage is when the first usage record starts (zero: none).
func (s *Server) firstUsage(ctx context.Context) (time.Time, error) {
	var first time.Time
	err := s.store.ScanUsage(ctx, store.UsageFilter{}, func(r domain.UsageRecord) error {
		first = r.Start
		return errStop
	})
	if err == errStop {
		err = nil
	}
	return first, err
}

var errStop = errors.New("stop")

// goneBefore is the time before which raw rows may have been pruned (the
// later of the two retentions' horizons; zero: none pruned).
func (s *Server) goneBefore(ctx context.Context) (time.Time, error) {
	u, err := s.rawHorizon(ctx, s.UsageRetention)
	if err != nil {
		return u, err
	}
	w, err := s.rawHorizon(ctx, s.SpanRetention)
	if u.Before(w) {
		u = w
	}
	return u, err
}

// keptRollups are a cluster month's rows as they stand: a month marked
// again after its raw rows went (a price entered for the past) keeps
// what was rolled while they were there.
func keptRollups(ctx context.Context, tx store.Tx, _ *billing.Book, cm domain.ClusterMonth) ([]domain.Rollup, error) {
	var rows []domain.Rollup
	err := tx.ScanRollups(ctx, store.RollupFilter{ClusterID: cm.ClusterID, From: cm.Month, To: cm.Month.AddDate(0, 1, 0)},
		func(r domain.Rollup) error { rows = append(rows, r); return nil })
	return rows, err
}

// rollClusterMonth computes a cluster month's rows from its raw usage
// records and work spans, read in tx: the usage lines by compute class
// (as invoices group them) and the work's shares by namespace, account
// and label set, with the idle rest (as cost allocation groups them).
func rollClusterMonth(ctx context.Context, tx store.Tx, b *billing.Book, cm domain.ClusterMonth) ([]domain.Rollup, error) {
	from, to := cm.Month, cm.Month.AddDate(0, 1, 0)
	if cm.ClusterID == "" {
		return nil, nil
	}
	c, err := tx.GetClusterRecord(ctx, cm.ClusterID)
	if err != nil {
		return nil, err
	}
	cm.ProjectID = c.ProjectID
	uf := store.UsageFilter{ClusterID: cm.ClusterID, From: from, To: to}
	pr := newPricer(b, from, to, groupKeys["compute_class"])
	if err := tx.ScanUsage(ctx, uf, pr.add); err != nil {
		return nil, err
	}
	var rows []domain.Rollup
	for i, l := range pr.out.lines {
		r := rollupOf(cm, c.ProjectID, domain.RollupUsage, l, pr.sums[i])
		r.UnpricedGPUSeconds = pr.out.byClass[l.ComputeClass].UnpricedGPUSeconds
		rows = append(rows, r)
	}
	groups := map[string]domain.WorkSpan{} // each work group's namespace, account and labels
	sp := newSplitter(b, from, to, func(w *domain.WorkSpan) string {
		k := workSetKey(w)
		if _, ok := groups[k]; !ok {
			groups[k] = domain.WorkSpan{Running: domain.Running{Namespace: w.Namespace, Account: w.Account, Labels: w.Labels}}
		}
		return k
	}, true)
	if err := tx.ScanWorkSpans(ctx, store.WorkSpanFilter{ClusterID: cm.ClusterID, From: from, To: to}, sp.span); err != nil {
		return nil, err
	}
	if err := tx.ScanUsage(ctx, uf, sp.add); err != nil {
		return nil, err
	}
	return append(rows, capGroups(cm, workRollups(cm, c.ProjectID, sp, groups), domain.MaxRollupGroups)...), nil
}

// workRollups are the splitter's groups as rows, and a row of units
// alone for a group that reported progress but held no GPU-second.
func workRollups(cm domain.ClusterMonth, project string, sp *splitter, groups map[string]domain.WorkSpan) []domain.Rollup {
	var rows []domain.Rollup
	lined := map[string]bool{}
	for i, l := range sp.lines {
		kind := domain.RollupWork
		if l.Idle {
			kind = domain.RollupIdle
		}
		r := rollupOf(cm, project, kind, l, sp.sums[i])
		if !l.Idle {
			g := groups[l.Group]
			r.Namespace, r.Account, r.Labels = g.Namespace, g.Account, g.Labels
		}
		r.Units = sp.units[sp.keys[i]]
		lined[sp.keys[i]] = true
		rows = append(rows, r)
	}
	for _, k := range slices.Sorted(maps.Keys(sp.units)) {
		if lined[k] {
			continue
		}
		g := groups[strings.TrimPrefix(k, cm.ClusterID+"\x00")]
		rows = append(rows, domain.Rollup{Month: cm.Month, ProjectID: project, ClusterID: cm.ClusterID, Kind: domain.RollupWork,
			Namespace: g.Namespace, Account: g.Account, Labels: g.Labels, Start: cm.Month, End: cm.Month, Units: sp.units[k]})
	}
	return rows
}

// workSetKey tells work groups apart by namespace, account and labels.
func workSetKey(w *domain.WorkSpan) string {
	var b strings.Builder
	b.WriteString(w.Namespace + "\x00" + w.Account)
	for _, k := range slices.Sorted(maps.Keys(w.Labels)) {
		b.WriteString("\x00" + k + "\x00" + w.Labels[k])
	}
	return b.String()
}

// rollupOf is a merged usage line and its exact sums as a row.
func rollupOf(cm domain.ClusterMonth, project string, kind domain.RollupKind, l apiv1.UsageLine, sum groupSum) domain.Rollup {
	return domain.Rollup{Month: cm.Month, ProjectID: project, ClusterID: cm.ClusterID, Kind: kind,
		ClusterName: l.ClusterName, NodeID: l.NodeID, NodeName: l.NodeName, Class: l.ComputeClass, Region: l.Region, GPUType: l.GPUType,
		GPUs: l.GPUs, Rate: l.RatePerGPUHour, OnDemandRate: l.OnDemandRatePerGPUHour, Priced: l.Priced, Start: l.Start, End: l.End,
		BilledSeconds: l.BilledSeconds, GPUSeconds: l.GPUSeconds, Amount: sum.amount.Numerator(), OnDemand: sum.onDemand.Numerator(),
		HasLine: true}
}
