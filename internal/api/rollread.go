package api

import (
	"context"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// rolledMonths is the part of [from, to) the rollups serve, [r1, r2):
// the whole months in it before the rollup mark; ok is false when there
// are none, or when one of them is being rolled again (a late row): the
// raw rows answer then, as they did before the month was rolled.
func (s *Server) rolledMonths(ctx context.Context, from, to time.Time) (r1, r2 time.Time, ok bool, err error) {
	st, err := s.store.RollupState(ctx)
	if err != nil || st.RolledUntil.IsZero() {
		return r1, r2, false, err
	}
	if r1 = store.MonthOf(from); r1.Before(from) {
		r1 = r1.AddDate(0, 1, 0)
	}
	r2 = store.MonthOf(to)
	if st.RolledUntil.Before(r2) {
		r2 = st.RolledUntil
	}
	if !r1.Before(r2) {
		return r1, r2, false, nil
	}
	for _, d := range st.Dirty {
		if !d.Month.Before(r1) && d.Month.Before(r2) {
			return r1, r2, false, nil
		}
	}
	return r1, r2, true, nil
}

// eachPart reads f's usage over [from, to): the raw parts through raw
// (f with its From and To), refused when their rows may be gone (their
// work spans too, with spans), the rolled months through rolled.
func (s *Server) eachPart(ctx context.Context, f store.UsageFilter, from, to time.Time, spans bool,
	raw func(store.UsageFilter) error, rolled func(store.RollupFilter) error) error {
	r1, r2, ok, err := s.rolledMonths(ctx, from, to)
	if err != nil {
		return err
	}
	if !ok {
		r1, r2 = to, to
	}
	part := func(a, b time.Time) error {
		if !a.Before(b) {
			return nil
		}
		if err := s.checkRaw(ctx, a, spans); err != nil {
			return err
		}
		g := f
		g.From, g.To = a, b
		return raw(g)
	}
	if err := part(from, r1); err != nil {
		return err
	}
	if ok {
		if err := rolled(store.RollupFilter{ProjectID: f.ProjectID, ClusterID: f.ClusterID, From: r1, To: r2}); err != nil {
			return err
		}
	}
	return part(r2, to)
}

// rowLine is a rollup row as the merged usage line it keeps, with its
// exact sums.
func rowLine(r domain.Rollup) (apiv1.UsageLine, groupSum, error) {
	amt, err := billing.ParseNumerator(r.Amount)
	if err != nil {
		return apiv1.UsageLine{}, groupSum{}, err
	}
	od, err := billing.ParseNumerator(r.OnDemand)
	if err != nil {
		return apiv1.UsageLine{}, groupSum{}, err
	}
	return apiv1.UsageLine{ProjectID: r.ProjectID, ClusterID: r.ClusterID, ClusterName: r.ClusterName, NodeID: r.NodeID,
		NodeName: r.NodeName, ComputeClass: r.Class, Region: r.Region, GPUType: r.GPUType, GPUs: r.GPUs, Start: r.Start, End: r.End,
		BilledSeconds: r.BilledSeconds, GPUSeconds: r.GPUSeconds, Priced: r.Priced, RatePerGPUHour: r.Rate,
		OnDemandRatePerGPUHour: r.OnDemandRate}, groupSum{amt, od}, nil
}

// addTotals adds a usage row to a period's totals and its class's.
func addTotals(total *billing.Totals, byClass map[string]*billing.Totals, r domain.Rollup, sum groupSum) {
	for _, t := range []*billing.Totals{total, classTotals(byClass, r.Class)} {
		t.Seconds += r.BilledSeconds
		t.GPUSeconds += r.GPUSeconds
		t.UnpricedGPUSeconds += r.UnpricedGPUSeconds
		t.Amount, t.OnDemand = t.Amount.Add(sum.amount), t.OnDemand.Add(sum.onDemand)
	}
}

func classTotals(byClass map[string]*billing.Totals, class string) *billing.Totals {
	if byClass[class] == nil {
		byClass[class] = &billing.Totals{}
	}
	return byClass[class]
}

// addRow adds a usage row to the pricing, grouped as its records would be.
func (p *pricer) addRow(r domain.Rollup) error {
	line, sum, err := rowLine(r)
	if err != nil {
		return err
	}
	addTotals(&p.out.total, p.out.byClass, r, sum)
	p.merge(p.key(&domain.UsageRecord{ClusterID: r.ClusterID, Class: domain.ComputeClass(r.Class)}), line, sum)
	return nil
}

// rowGroup is what a work row groups by, for a split by only
// (store.WorkSpanFilter's Only): ok false for a split rollups cannot
// answer (by job or unit of work, which they do not keep).
func rowGroup(only string) (func(domain.Rollup) string, bool) {
	switch only {
	case "namespace":
		return func(r domain.Rollup) string { return r.Namespace }, true
	case "account":
		return func(r domain.Rollup) string { return r.Account }, true
	}
	if k, ok := strings.CutPrefix(only, "label:"); ok {
		return func(r domain.Rollup) string { return r.Labels[k] }, true
	}
	return nil, false
}

// addRow adds a rollup row to the split: a usage row to the totals, a
// work or idle row to its group.
func (s *splitter) addRow(r domain.Rollup, group func(domain.Rollup) string) error {
	line, sum, err := rowLine(r)
	if err != nil {
		return err
	}
	if r.Kind == domain.RollupUsage {
		addTotals(&s.total, s.byClass, r, sum)
		return nil
	}
	idle := r.Kind == domain.RollupIdle
	g := ""
	switch {
	case r.Kind == domain.RollupMore:
		g = domain.MoreGroups
	case !idle:
		g = group(r)
	}
	k := s.groupKey(r.ClusterID, g, idle)
	if r.Units > 0 {
		s.units[k] = max(s.units[k], r.Units)
	}
	if !r.HasLine {
		return nil
	}
	line.Group, line.Idle = g, idle
	s.merge(k, line, sum)
	return nil
}

// splitParts splits f's usage over [from, to) by only: the raw parts
// from their spans and records, the rolled months from their rows.
func (s *Server) splitParts(ctx context.Context, sp *splitter, f store.UsageFilter, from, to time.Time, only string) error {
	group, rolls := rowGroup(only)
	// Month by month, rolled or not: a group's line starts and ends where
	// the usage it shares does within the months the group worked in, so
	// an answer is the same whether its months were rolled.
	raw := func(part store.UsageFilter) error {
		for a := part.From; a.Before(part.To); a = store.MonthOf(a).AddDate(0, 1, 0) {
			piece := part
			piece.From, piece.To = a, minTime(store.MonthOf(a).AddDate(0, 1, 0), part.To)
			sp.from, sp.to = piece.From, piece.To
			clear(sp.nodes)
			wf := store.WorkSpanFilter{ProjectID: f.ProjectID, ClusterID: f.ClusterID, From: piece.From, To: piece.To, Only: only}
			if err := s.store.ScanWorkSpans(ctx, wf, sp.span); err != nil {
				return err
			}
			if err := s.store.ScanUsage(ctx, piece, sp.add); err != nil {
				return err
			}
		}
		return nil
	}
	if !rolls {
		if err := s.checkRaw(ctx, from, true); err != nil {
			return err
		}
		return raw(store.UsageFilter{ProjectID: f.ProjectID, ClusterID: f.ClusterID, From: from, To: to, Open: f.Open})
	}
	add := func(r domain.Rollup) error { return sp.addRow(r, group) }
	return s.eachPart(ctx, f, from, to, true, raw, func(rf store.RollupFilter) error {
		if sp.perCluster || f.ClusterID != "" {
			// A cluster's work rows live as long as raw usage records.
			if s.UsageRetention > 0 && rf.From.Before(store.MonthOf(s.clock.Now().Add(-s.UsageRetention))) {
				return detailGone("work detail of one cluster (or by namespace)", store.MonthOf(s.clock.Now().Add(-s.UsageRetention)))
			}
			return s.store.ScanRollups(ctx, rf, add)
		}
		// Groups across clusters: each project's merged rows, and the
		// clusters' idle rows (an idle line is a cluster's).
		merged, idle := rf, rf
		merged.Merged, idle.Kinds = true, []domain.RollupKind{domain.RollupIdle}
		if err := s.store.ScanRollups(ctx, merged, add); err != nil {
			return err
		}
		return s.store.ScanRollups(ctx, idle, add)
	})
}

// rawHorizon is how far back raw rows kept keep may still all be there:
// the retention prunes rows that ended before both now-keep and the
// rollup mark. Zero: all of them are (keep 0 or less, nothing rolled).
func (s *Server) rawHorizon(ctx context.Context, keep time.Duration) (time.Time, error) {
	if keep <= 0 {
		return time.Time{}, nil
	}
	st, err := s.store.RollupState(ctx)
	if err != nil {
		return time.Time{}, err
	}
	return minTime(s.clock.Now().Add(-keep), st.RolledUntil), nil
}

// checkRaw refuses a raw read from from on when rows it needs may be
// gone: usage records always, work spans for a split (spans).
func (s *Server) checkRaw(ctx context.Context, from time.Time, spans bool) error {
	for _, c := range []struct {
		what string
		keep time.Duration
		need bool
	}{{"usage detail", s.UsageRetention, true}, {"work detail", s.SpanRetention, spans}} {
		if !c.need {
			continue
		}
		h, err := s.rawHorizon(ctx, c.keep)
		if err != nil {
			return err
		}
		if from.Before(h) {
			return detailGone(c.what, h)
		}
	}
	return nil
}

// detailGone refuses a question about raw rows no longer kept.
func detailGone(what string, horizon time.Time) error {
	return invalid("from", "%s before %s is no longer kept (whole past months are, as rollups): ask from %s on, or for whole months by cluster, compute_class, namespace, account or label:<key>, or an invoice",
		what, horizon.Format(time.RFC3339), horizon.Format(time.RFC3339))
}
