// Package billing prices metered usage. It is pure: the price book and the
// usage records come in, priced lines and totals go out.
//
// # Rules
//
//   - A node is billable from the moment it is Ready in a cluster until it
//     stops being usable (Stop): a preemptible node that sparecap reclaims
//     stops at the preemption notice (T+0) — the tenant does not pay for
//     the drain window sparecap imposed; a standard node, or a preemptible
//     node the tenant scaled down or deleted, stops when it is removed.
//   - Time is billed in whole seconds: an interval [start, end) bills
//     floor(end) − floor(start) seconds, so a node held 12 minutes costs
//     exactly 720 seconds, and splitting a period at whole seconds never
//     changes a total.
//   - Standard nodes of ON_DEMAND clusters pay the on-demand price of their
//     GPU type (and region, if it has its own price); standard nodes of
//     RESERVED clusters pay their reservation's price (the on-demand price
//     if the reservation has none); preemptible nodes pay the on-demand
//     price less the preemptible discount (50% unless configured), wherever
//     their machine comes from.
//   - A preemptible node of a cluster with a price cap
//     (max_preemptible_per_gpu_hour) is never billed above the cap: a
//     stretch whose discounted rate is above it is billed at the cap.
//     The cap is the cluster's when the node's record was last metered.
//   - Every price takes effect from a time and is never changed: a new price
//     is a new entry. An interval that spans a change is split there, so
//     past usage keeps the price it had.
//   - Amounts are exact (see Money) and rounded only when shown: line
//     amounts to the micro-dollar, totals to the cent, half to even.
package billing

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// DefaultDiscountBP is the preemptible discount when the book has none:
// 50%.
const DefaultDiscountBP = 5_000

// Stop returns the node's billing stop point, if it is known yet. A node
// that never became ready is never billable (ok is false and so is
// billable).
func Stop(n domain.Node) (stop time.Time, known, billable bool) {
	if n.ReadyAt.IsZero() {
		return time.Time{}, false, false
	}
	if n.Class == domain.Preemptible && !n.DrainStartedAt.IsZero() && !n.DrainCause.TenantInitiated() {
		return n.DrainStartedAt, true, true
	}
	if !n.RemovedAt.IsZero() {
		return n.RemovedAt, true, true
	}
	return time.Time{}, false, true
}

// Record builds the usage record of a node as of now: from ready to its
// stop point, or to now (to the second) while it runs.
func Record(n *domain.Node, c *domain.Cluster, m *domain.Machine, now time.Time) (domain.UsageRecord, bool) {
	stop, known, billable := Stop(*n)
	if !billable {
		return domain.UsageRecord{}, false
	}
	end := stop
	if !known {
		end = now.Truncate(time.Second)
	}
	start := n.PeriodStart()
	if end.Before(start) {
		end = start
	}
	// A node is billed at its own GPU type's price (a cluster's
	// preemptible nodes may be of several); one of before has its
	// cluster's.
	typ := n.GPUType
	if typ == "" {
		typ = c.GPUType
	}
	r := domain.UsageRecord{
		NodeID: n.ID, NodeName: n.Name, ClusterID: c.ID, ClusterName: c.Name, ProjectID: c.ProjectID,
		Region: c.Region, GPUType: typ, Class: n.Class, BillingType: c.BillingType,
		ReservationID: m.ReservationID, GPUs: n.GPUs, Start: start, End: end, Final: known,
	}
	if n.Class == domain.Preemptible && c.MaxPreemptiblePrice != "" {
		// A cap that does not parse (never stored: the API checks it) is
		// no cap.
		r.MaxRateMicros, _ = ParseRate(c.MaxPreemptiblePrice)
	}
	return r, true
}

// Closed is the final record of the node's period in its current class,
// ended at at (to the second): what converting it in place writes, as its
// next period starts there.
func Closed(n *domain.Node, c *domain.Cluster, m *domain.Machine, at time.Time) domain.UsageRecord {
	r, _ := Record(n, c, m, at)
	r.Final = true
	return r
}

type step struct {
	from    int64 // unix seconds
	value   uint64
	created int64 // unix nanoseconds: of two entries from the same second the later one wins
}

type odKey struct{ region, gpu string }

// Book is a compiled price book.
type Book struct {
	onDemand map[odKey][]step
	reserved map[string][]step
	discount []step
}

// NewBook compiles price book entries. Entries with bad values are errors:
// the book is validated when entries are added, so this only fails on a
// corrupted store.
func NewBook(prices []domain.Price) (*Book, error) {
	b := &Book{onDemand: map[odKey][]step{}, reserved: map[string][]step{}}
	for _, p := range prices {
		created := p.CreatedAt.UnixNano()
		from := p.EffectiveFrom.Unix()
		if p.EffectiveFrom.IsZero() {
			from = minSec
		}
		switch p.Kind {
		case domain.PriceOnDemand:
			v, err := ParseRate(p.Value)
			if err != nil {
				return nil, fmt.Errorf("price %s: %w", p.ID, err)
			}
			k := odKey{p.Region, p.GPUType}
			b.onDemand[k] = append(b.onDemand[k], step{from, v, created})
		case domain.PriceReserved:
			v, err := ParseRate(p.Value)
			if err != nil {
				return nil, fmt.Errorf("price %s: %w", p.ID, err)
			}
			b.reserved[p.ReservationID] = append(b.reserved[p.ReservationID], step{from, v, created})
		case domain.PricePreemptibleDiscount:
			v, err := ParsePercent(p.Value)
			if err != nil {
				return nil, fmt.Errorf("price %s: %w", p.ID, err)
			}
			b.discount = append(b.discount, step{from, v, created})
		default:
			return nil, fmt.Errorf("price %s: unknown kind %q", p.ID, p.Kind)
		}
	}
	sortSteps := func(s []step) {
		sort.SliceStable(s, func(i, j int) bool {
			if s[i].from != s[j].from {
				return s[i].from < s[j].from
			}
			return s[i].created < s[j].created
		})
	}
	for _, s := range b.onDemand {
		sortSteps(s)
	}
	for _, s := range b.reserved {
		sortSteps(s)
	}
	sortSteps(b.discount)
	return b, nil
}

const minSec = -1 << 62

// at returns the value in force at second t, if any.
func at(s []step, t int64) (uint64, bool) {
	i := sort.Search(len(s), func(i int) bool { return s[i].from > t })
	if i == 0 {
		return 0, false
	}
	return s[i-1].value, true
}

// OnDemandRate is the on-demand price per GPU-hour (micro-dollars) in
// force at second t: the region's own price if it has one by then, else
// the GPU type's.
func (b *Book) OnDemandRate(region, gpu string, t int64) (uint64, bool) {
	if v, ok := at(b.onDemand[odKey{region, gpu}], t); ok {
		return v, true
	}
	return at(b.onDemand[odKey{"", gpu}], t)
}

// DiscountBP is the preemptible discount in force at second t.
func (b *Book) DiscountBP(t int64) uint64 {
	if v, ok := at(b.discount, t); ok {
		return v
	}
	return DefaultDiscountBP
}

// Line is the priced usage of one node over one stretch of constant
// prices.
type Line struct {
	Record *domain.UsageRecord
	// Start and End are clipped to the period, whole seconds.
	Start, End time.Time
	Seconds    int64
	// RateMicros is the price per GPU-hour before FactorBP; the effective
	// rate is RateMicros × FactorBP / 10000.
	RateMicros uint64
	FactorBP   uint64
	// ODMicros is the on-demand rate OnDemand is priced at (0: none, and
	// OnDemand is Amount).
	ODMicros uint64
	// Priced is false when the book has no price for this usage; Amount
	// and OnDemand are then zero.
	Priced   bool
	Amount   Money
	OnDemand Money
}

// EffectiveRate is the rate actually charged per GPU-hour, exact.
func (l Line) EffectiveRate() string {
	s := Money{lo: l.RateMicros * l.FactorBP * 3600}.Exact()
	// Like FormatRate: at least two decimals ("1.90", "3.00", "0.445").
	switch i := strings.IndexByte(s, '.'); {
	case i < 0:
		s += ".00"
	case len(s)-i == 2:
		s += "0"
	}
	return s
}

// Price prices the records over [from, to) and calls emit for each line,
// in record order then time order. Records are read, not kept.
func (b *Book) Price(recs []domain.UsageRecord, from, to time.Time, emit func(Line)) {
	f, t := from.Unix(), to.Unix()
	var cuts []int64
	for i := range recs {
		r := &recs[i]
		s, e := max(r.Start.Unix(), f), min(r.End.Unix(), t)
		if s >= e {
			continue
		}
		cuts = b.changes(cuts[:0], r, s, e)
		for j := 0; j+1 < len(cuts); j++ {
			emit(b.line(r, cuts[j], cuts[j+1]))
		}
	}
}

// changes returns s, every price change inside (s, e) that matters to r,
// and e, in order.
func (b *Book) changes(out []int64, r *domain.UsageRecord, s, e int64) []int64 {
	out = append(out, s)
	add := func(steps []step) {
		for _, st := range steps {
			if st.from > s && st.from < e {
				out = append(out, st.from)
			}
		}
	}
	add(b.onDemand[odKey{r.Region, r.GPUType}])
	add(b.onDemand[odKey{"", r.GPUType}])
	switch {
	case r.Class == domain.Preemptible:
		add(b.discount)
	case r.BillingType == domain.BillingReserved:
		add(b.reserved[r.ReservationID])
	}
	if len(out) > 1 {
		slices.Sort(out[1:])
		out = slices.Compact(out)
	}
	return append(out, e)
}

func (b *Book) line(r *domain.UsageRecord, s, e int64) Line {
	l := Line{Record: r, Start: time.Unix(s, 0).UTC(), End: time.Unix(e, 0).UTC(), Seconds: e - s, FactorBP: FullBP}
	od, ok := b.OnDemandRate(r.Region, r.GPUType, s)
	rate := od
	switch {
	case r.Class == domain.Preemptible:
		l.FactorBP = FullBP - b.DiscountBP(s)
	case r.BillingType == domain.BillingReserved:
		if v, found := at(b.reserved[r.ReservationID], s); found {
			rate, ok = v, true
		}
	}
	if !ok {
		return l
	}
	if capped := r.MaxRateMicros; capped > 0 && r.Class == domain.Preemptible && rate*l.FactorBP > capped*FullBP {
		// Never above its cluster's cap (the rate per second too).
		rate, l.FactorBP = capped, FullBP
	}
	l.Priced, l.RateMicros, l.ODMicros = true, rate, od
	l.Amount, l.OnDemand = l.Part(l.Seconds * int64(r.GPUs))
	return l
}

// Part is what gpuSeconds of the line cost, and would have on demand:
// parts of a line add up to it exactly (amounts are linear in
// GPU-seconds, with no rounding). Zero for an unpriced line.
func (l Line) Part(gpuSeconds int64) (amt, onDemand Money) {
	if !l.Priced || gpuSeconds <= 0 {
		return Money{}, Money{}
	}
	amt = amount(l.RateMicros, l.FactorBP, uint64(gpuSeconds))
	if l.ODMicros == 0 && l.RateMicros != 0 {
		// A reserved price with no on-demand price to compare with: the
		// usage saved nothing.
		return amt, amt
	}
	return amt, amount(l.ODMicros, FullBP, uint64(gpuSeconds))
}

// Totals add up lines.
type Totals struct {
	Seconds    int64
	GPUSeconds int64
	Amount     Money
	OnDemand   Money
	// UnpricedGPUSeconds is usage the book had no price for.
	UnpricedGPUSeconds int64
}

// Add adds a line.
func (t *Totals) Add(l Line) {
	gs := l.Seconds * int64(l.Record.GPUs)
	t.Seconds += l.Seconds
	t.GPUSeconds += gs
	if !l.Priced {
		t.UnpricedGPUSeconds += gs
		return
	}
	t.Amount = t.Amount.Add(l.Amount)
	t.OnDemand = t.OnDemand.Add(l.OnDemand)
}

// Savings is what the usage would have cost on demand, less what it cost.
func (t Totals) Savings() Money {
	if t.OnDemand.Less(t.Amount) {
		return Money{}
	}
	return t.OnDemand.Sub(t.Amount)
}

// WorkValue is what gpuSeconds of class cost at t in region and GPU type:
// the on-demand rate, less the preemptible discount for preemptible work.
// It is how the lost-work ledger values the work a reclaim put at risk.
// ok is false without an on-demand price there.
func (b *Book) WorkValue(region, gpu string, class domain.ComputeClass, t time.Time, gpuSeconds int64) (Money, bool) {
	od, ok := b.OnDemandRate(region, gpu, t.Unix())
	if !ok || gpuSeconds <= 0 {
		return Money{}, ok
	}
	factor := uint64(FullBP)
	if class == domain.Preemptible {
		factor -= b.DiscountBP(t.Unix())
	}
	return amount(od, factor, uint64(gpuSeconds)), true
}
