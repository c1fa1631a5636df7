package api

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// scanPriced prices the records of f over [from, to) grouped by key, in
// memory proportional to the groups, not the records; whole rolled months
// come from their rollups.
func (s *Server) scanPriced(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time, key func(*domain.UsageRecord) string) (priced, error) {
	pr := newPricer(b, from, to, key)
	err := s.eachPart(ctx, f, from, to, false, func(part store.UsageFilter) error {
		pr.from, pr.to = part.From, part.To
		return s.store.ScanUsage(ctx, part, pr.add)
	}, func(rf store.RollupFilter) error {
		rf.Kinds = []domain.RollupKind{domain.RollupUsage}
		return s.store.ScanRollups(ctx, rf, pr.addRow)
	})
	if err != nil {
		return priced{}, err
	}
	return pr.result(), nil
}

// priced is the result of pricing a period, grouped.
type priced struct {
	lines   []apiv1.UsageLine
	total   billing.Totals
	byClass map[string]*billing.Totals
}

// pricer prices records one at a time over [from, to), grouping lines by
// key (nil: one line per node and price stretch). Grouped, it holds one
// line per group; ungrouped with emit set, it hands each line to emit and
// holds none.
type pricer struct {
	b        *billing.Book
	from, to time.Time
	key      func(*domain.UsageRecord) string
	// emit, if set, receives the lines of an ungrouped pricing; its first
	// error stops the pricing and is returned by add.
	emit   func(apiv1.UsageLine) error
	err    error
	out    priced
	groups map[string]int
	sums   []groupSum
	one    [1]domain.UsageRecord
}

type groupSum struct{ amount, onDemand billing.Money }

func newPricer(b *billing.Book, from, to time.Time, key func(*domain.UsageRecord) string) *pricer {
	return &pricer{b: b, from: from, to: to, key: key, out: priced{byClass: map[string]*billing.Totals{}}, groups: map[string]int{}}
}

// add prices one record; records must come in the order of ListUsage for
// the groups to come out in the same order.
func (p *pricer) add(r domain.UsageRecord) error {
	if p.err != nil {
		return p.err
	}
	p.one[0] = r
	p.b.Price(p.one[:], p.from, p.to, p.line)
	return p.err
}

func (p *pricer) line(l billing.Line) {
	if p.err != nil {
		return
	}
	b, out := p.b, &p.out
	out.total.Add(l)
	class := string(l.Record.Class)
	if out.byClass[class] == nil {
		out.byClass[class] = &billing.Totals{}
	}
	out.byClass[class].Add(l)
	r := l.Record
	line := lineView(b, l)
	if p.key == nil {
		line.Amount, line.OnDemandAmount = l.Amount.Round(6), l.OnDemand.Round(6)
		if p.emit != nil {
			p.err = p.emit(line)
			return
		}
		out.lines = append(out.lines, line)
		return
	}
	p.merge(p.key(r), line, groupSum{l.Amount, l.OnDemand})
}

// merge adds line, whose exact sums are sum, to the group k.
func (p *pricer) merge(k string, line apiv1.UsageLine, sum groupSum) {
	out := &p.out
	i, ok := p.groups[k]
	if !ok {
		p.groups[k] = len(out.lines)
		out.lines = append(out.lines, line)
		p.sums = append(p.sums, sum)
		return
	}
	p.sums[i].amount, p.sums[i].onDemand = p.sums[i].amount.Add(sum.amount), p.sums[i].onDemand.Add(sum.onDemand)
	mergeLine(&out.lines[i], line)
}

// lineView is l as a usage line, its amounts left out.
func lineView(b *billing.Book, l billing.Line) apiv1.UsageLine {
	r := l.Record
	line := apiv1.UsageLine{
		ProjectID: r.ProjectID, ClusterID: r.ClusterID, ClusterName: r.ClusterName, NodeID: r.NodeID, NodeName: r.NodeName,
		ComputeClass: string(r.Class), Region: r.Region, GPUType: r.GPUType, GPUs: r.GPUs, Start: l.Start, End: l.End,
		BilledSeconds: l.Seconds, GPUSeconds: l.Seconds * int64(r.GPUs), Priced: l.Priced,
	}
	if l.Priced {
		line.RatePerGPUHour = l.EffectiveRate()
		if od, ok := b.OnDemandRate(r.Region, r.GPUType, l.Start.Unix()); ok {
			line.OnDemandRatePerGPUHour = billing.FormatRate(od)
		}
	}
	return line
}

// mergeLine adds line to the group g: seconds summed, the period widened,
// and every field on which they differ blanked.
func mergeLine(g *apiv1.UsageLine, line apiv1.UsageLine) {
	g.BilledSeconds += line.BilledSeconds
	g.GPUSeconds += line.GPUSeconds
	g.Priced = g.Priced && line.Priced
	if line.Start.Before(g.Start) {
		g.Start = line.Start
	}
	if line.End.After(g.End) {
		g.End = line.End
	}
	for _, f := range []struct {
		dst *string
		v   string
	}{
		{&g.NodeID, line.NodeID}, {&g.NodeName, line.NodeName}, {&g.ClusterID, line.ClusterID},
		{&g.ClusterName, line.ClusterName}, {&g.ComputeClass, line.ComputeClass}, {&g.Region, line.Region},
		{&g.GPUType, line.GPUType}, {&g.RatePerGPUHour, line.RatePerGPUHour},
		{&g.OnDemandRatePerGPUHour, line.OnDemandRatePerGPUHour}, {&g.ProjectID, line.ProjectID},
	} {
		if *f.dst != f.v {
			*f.dst = ""
		}
	}
	if g.GPUs != line.GPUs {
		g.GPUs = 0
	}
}

// result finishes the pricing: group amounts rounded, groups sorted.
func (p *pricer) result() priced {
	out := p.out
	for i := range p.sums {
		out.lines[i].Amount, out.lines[i].OnDemandAmount = p.sums[i].amount.Round(6), p.sums[i].onDemand.Round(6)
	}
	if p.key != nil {
		slices.SortStableFunc(out.lines, func(a, b apiv1.UsageLine) int {
			return strings.Compare(a.ClusterName+"\x00"+a.ClusterID+"\x00"+a.ComputeClass, b.ClusterName+"\x00"+b.ClusterID+"\x00"+b.ComputeClass)
		})
	}
	return out
}

func totalsView(t billing.Totals) apiv1.UsageTotals {
	return apiv1.UsageTotals{
		GPUSeconds: t.GPUSeconds, Amount: t.Amount.Round(2), AmountExact: t.Amount.Exact(),
		OnDemandEquivalent: t.OnDemand.Round(2), Savings: t.Savings().Round(2), UnpricedGPUSeconds: t.UnpricedGPUSeconds,
	}
}

func byClassView(m map[string]*billing.Totals) map[string]apiv1.UsageTotals {
	out := map[string]apiv1.UsageTotals{}
	for _, c := range []domain.ComputeClass{domain.Standard, domain.Preemptible} {
		t := m[string(c)]
		if t == nil {
			t = &billing.Totals{}
		}
		out[string(c)] = totalsView(*t)
	}
	return out
}
