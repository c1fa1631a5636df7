// Package budget works out what a budget has spent, forecasts its month,
// and decides the alerts it raises. Spend is priced exactly (billing);
// forecasts and thresholds are in float dollars, shown to the cent.
package budget

import (
	"context"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/costsplit"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Reader is what spend reads.
type Reader interface {
	ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error
	ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error
}

// Hourly is what the project (label "") or the work of one label value
// (label "key=value") cost in each UTC hour of [from, to), from's hour
// first, to's last (so the current hour is the last when to is now): a label's share is the GPUs and time its work held of each node
// (costsplit), the rest of the nodes' cost is not its. A record not final
// (a running node, which the meter rewrites only every so often) counts
// up to to: what a cut at to would write.
func Hourly(ctx context.Context, r Reader, b *billing.Book, project, label string, from, to time.Time) ([]billing.Money, error) {
	day0 := from.UTC().Truncate(time.Hour)
	days := make([]billing.Money, int(to.Sub(day0)/time.Hour)+1) // to's own hour too
	key, value, byLabel := strings.Cut(label, "=")
	nodes := map[string]*costsplit.Work[bool]{} // whether each claim is the label's
	if byLabel {
		f := store.WorkSpanFilter{ProjectID: project, From: from, To: to, Only: "label:" + key}
		err := r.ScanWorkSpans(ctx, f, func(w domain.WorkSpan) error {
			n := nodes[w.NodeID]
			if n == nil {
				n = &costsplit.Work[bool]{}
				nodes[w.NodeID] = n
			}
			n.Add(costsplit.ClaimOf(&w), w.Key, w.Labels[key] == value)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var scratch costsplit.Scratch
	// hour spreads gpuSeconds of line l held evenly over [from, to) into
	// the hours they fall in, in whole GPU-seconds (the last hour takes
	// what division leaves), priced as l is.
	spread := func(l billing.Line, gpuSeconds, from, to int64) {
		span := to - from
		if span <= 0 || gpuSeconds <= 0 {
			return
		}
		var given int64
		for t := from; t < to; {
			next := min((t/3600+1)*3600, to)
			gs := gpuSeconds * (next - t) / span
			if next == to {
				gs = gpuSeconds - given
			}
			given += gs
			amt, _ := l.Part(gs)
			i := int((t - day0.Unix()) / 3600)
			days[i] = days[i].Add(amt)
			t = next
		}
	}
	add := func(l billing.Line) {
		ls, le := l.Start.Unix(), l.End.Unix()
		if !byLabel {
			spread(l, l.Seconds*int64(l.Record.GPUs), ls, le)
			return
		}
		n := nodes[l.Record.NodeID]
		if n == nil {
			return
		}
		claims, match := n.Ordered()
		parts, _ := scratch.GPUSeconds(l.Record.GPUs, ls, le, claims)
		for j, gs := range parts {
			if match[j] && gs > 0 {
				c := claims[j]
				end := le
				if c.End != 0 {
					end = min(c.End, le)
				}
				spread(l, gs, max(c.Start, ls), end)
			}
		}
	}
	var one [1]domain.UsageRecord
	err := r.ScanUsage(ctx, store.UsageFilter{ProjectID: project, From: from, To: to}, func(u domain.UsageRecord) error {
		if !u.Final && u.End.Before(to) {
			u.End = to
		}
		one[0] = u
		b.Price(one[:], from, to, add)
		return nil
	})
	return days, err
}
