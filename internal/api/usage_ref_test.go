package api

import (
	"net/http/httptest"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
)

// refPrice is the pricing of the in-memory implementation the streaming one
// replaced, kept to check that the responses did not change. It prices records over [from, to), grouping lines by key (nil: one
// line per node and price stretch).
func refPrice(b *billing.Book, recs []domain.UsageRecord, from, to time.Time, key func(*domain.UsageRecord) string) priced {
	out := priced{byClass: map[string]*billing.Totals{}}
	groups := map[string]int{}
	type acc struct{ amount, onDemand billing.Money }
	var sums []acc
	b.Price(recs, from, to, func(l billing.Line) {
		out.total.Add(l)
		class := string(l.Record.Class)
		if out.byClass[class] == nil {
			out.byClass[class] = &billing.Totals{}
		}
		out.byClass[class].Add(l)
		r := l.Record
		line := apiv1.UsageLine{
			ProjectID: r.ProjectID, ClusterID: r.ClusterID, ClusterName: r.ClusterName, NodeID: r.NodeID, NodeName: r.NodeName,
			ComputeClass: class, Region: r.Region, GPUType: r.GPUType, GPUs: r.GPUs, Start: l.Start, End: l.End,
			BilledSeconds: l.Seconds, GPUSeconds: l.Seconds * int64(r.GPUs), Priced: l.Priced,
		}
		if l.Priced {
			line.RatePerGPUHour = l.EffectiveRate()
			if od, ok := b.OnDemandRate(r.Region, r.GPUType, l.Start.Unix()); ok {
				line.OnDemandRatePerGPUHour = billing.FormatRate(od)
			}
		}
		if key == nil {
			line.Amount, line.OnDemandAmount = l.Amount.Round(6), l.OnDemand.Round(6)
			out.lines = append(out.lines, line)
			return
		}
		k := key(r)
		i, ok := groups[k]
		if !ok {
			groups[k] = len(out.lines)
			out.lines = append(out.lines, line)
			sums = append(sums, acc{l.Amount, l.OnDemand})
			return
		}
		g := &out.lines[i]
		sums[i].amount, sums[i].onDemand = sums[i].amount.Add(l.Amount), sums[i].onDemand.Add(l.OnDemand)
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
	})
	for i := range sums {
		out.lines[i].Amount, out.lines[i].OnDemandAmount = sums[i].amount.Round(6), sums[i].onDemand.Round(6)
	}
	if key != nil {
		slices.SortStableFunc(out.lines, func(a, b apiv1.UsageLine) int {
			return strings.Compare(a.ClusterName+"\x00"+a.ClusterID+"\x00"+a.ComputeClass, b.ClusterName+"\x00"+b.ClusterID+"\x00"+b.ComputeClass)
		})
	}
	return out
}

// refUsage is the body the in-memory implementation served for
// /v1/usage over recs.
func refUsage(b *billing.Book, recs []domain.UsageRecord, from, to time.Time, groupBy string, csvOut bool) []byte {
	var pr priced
	if groupBy == "day" {
		pr = refPrice(b, recs, from, to, groupKeys["compute_class"])
		var lines []apiv1.UsageLine
		for day := from.Truncate(24 * time.Hour); day.Before(to); day = day.Add(24 * time.Hour) {
			start, end := maxTime(day, from), minTime(day.Add(24*time.Hour), to)
			d := refPrice(b, recs, start, end, groupKeys["compute_class"])
			for _, l := range d.lines {
				l.Start, l.End = start, end
				l.ClusterID, l.ClusterName, l.NodeID, l.NodeName = "", "", "", ""
				lines = append(lines, l)
			}
		}
		pr.lines = lines
	} else {
		pr = refPrice(b, recs, from, to, groupKeys[groupBy])
	}
	out := apiv1.Usage{Currency: Currency, From: from, To: to, GroupBy: groupBy, LineItems: pr.lines,
		Totals: totalsView(pr.total), ByClass: byClassView(pr.byClass), Rounding: rounding}
	if out.LineItems == nil {
		out.LineItems = []apiv1.UsageLine{}
	}
	w := httptest.NewRecorder()
	if csvOut {
		writeUsageCSV(w, usageCSVName(from, to), out.LineItems, out.Totals, false)
	} else {
		writeJSON(w, 200, out)
	}
	return w.Body.Bytes()
}
