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
// first, to's last (so the current hour is the last when to is now): a
// label's share is the GPUs and time its work held of each node
// (costsplit), the rest of the nodes' cost is not its. A record not final
// (a running node, which the meter rewrites only every so often) counts
// up to to: what a cut at to would write.
func Hourly(ctx context.Context, r Reader, b *billing.Book, project, label string, from, to time.Time) ([]billing.Money, error) {
	key, _, byLabel := strings.Cut(label, "=")
	if !byLabel {
		key = ""
	}
	sp, err := spendOf(ctx, r, b, project, key, from, to)
	if err != nil {
		return nil, err
	}
	return sp.of(label), nil
}

// spend is a project's cost by hour from one read of its usage: the
// whole project's, and each value's of one label key.
type spend struct {
	key     string
	total   []billing.Money
	byValue map[string][]billing.Money
}

// of is the hours of label ("" or "key=value" of the spend's key).
func (sp *spend) of(label string) []billing.Money {
	if label == "" {
		return sp.total
	}
	_, v, _ := strings.Cut(label, "=")
	if h := sp.byValue[v]; h != nil {
		return h
	}
	return make([]billing.Money, len(sp.total))
}

// spendOf reads the project's usage over [from, to) once, and its work
// spans' key label when key is set, into a spend.
func spendOf(ctx context.Context, r Reader, b *billing.Book, project, key string, from, to time.Time) (*spend, error) {
	day0 := from.UTC().Truncate(time.Hour)
	n := int(to.Sub(day0)/time.Hour) + 1 // to's own hour too
	sp := &spend{key: key, total: make([]billing.Money, n), byValue: map[string][]billing.Money{}}
	nodes, err := sp.labelWork(ctx, r, project, from, to)
	if err != nil {
		return nil, err
	}
	var scratch costsplit.Scratch
	hour0 := day0.Unix()
	add := func(l billing.Line) {
		ls, le := l.Start.Unix(), l.End.Unix()
		spread(sp.total, l, l.Seconds*int64(l.Record.GPUs), ls, le, hour0)
		nd := nodes[l.Record.NodeID]
		if nd == nil {
			return
		}
		claims, values := nd.Ordered()
		parts, _ := scratch.GPUSeconds(l.Record.GPUs, ls, le, claims)
		for j, gs := range parts {
			if gs <= 0 {
				continue
			}
			c := claims[j]
			end := le
			if c.End != 0 {
				end = min(c.End, le)
			}
			spread(sp.byValue[values[j]], l, gs, max(c.Start, ls), end, hour0)
		}
	}
	var one [1]domain.UsageRecord
	err = r.ScanUsage(ctx, store.UsageFilter{ProjectID: project, From: from, To: to}, func(u domain.UsageRecord) error {
		if !u.Final && u.End.Before(to) {
			u.End = to
		}
		one[0] = u
		b.Price(one[:], from, to, add)
		return nil
	})
	return sp, err
}

// labelWork reads the project's work spans over [from, to) that carry the
// spend's label key, into each node's claims and their values of the key
// (none without a key); each value seen gets its hours.
func (sp *spend) labelWork(ctx context.Context, r Reader, project string, from, to time.Time) (map[string]*costsplit.Work[string], error) {
	nodes := map[string]*costsplit.Work[string]{}
	if sp.key == "" {
		return nodes, nil
	}
	f := store.WorkSpanFilter{ProjectID: project, From: from, To: to, Only: "label:" + sp.key}
	err := r.ScanWorkSpans(ctx, f, func(w domain.WorkSpan) error {
		v, ok := w.Labels[sp.key]
		if !ok {
			return nil
		}
		nd := nodes[w.NodeID]
		if nd == nil {
			nd = &costsplit.Work[string]{}
			nodes[w.NodeID] = nd
		}
		nd.Add(costsplit.ClaimOf(&w), w.Key, v)
		if sp.byValue[v] == nil {
			sp.byValue[v] = make([]billing.Money, len(sp.total))
		}
		return nil
	})
	return nodes, err
}

// spread adds gpuSeconds of line l, held evenly over [from, to), to the
// hours of into (from hour0 on) they fall in, in whole GPU-seconds (the
// last hour takes what division leaves), priced as l is.
func spread(into []billing.Money, l billing.Line, gpuSeconds, from, to, hour0 int64) {
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
		i := int((t - hour0) / 3600)
		into[i] = into[i].Add(amt)
		t = next
	}
}
