package billing

import (
	"fmt"
	"math/big"
	"runtime"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sparecap/sparecap/internal/domain"
)

var t0 = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

func book(t interface{ Fatal(...any) }, prices ...domain.Price) *Book {
	b, err := NewBook(prices)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func od(gpu, value string, from time.Time) domain.Price {
	return domain.Price{ID: fmt.Sprintf("od-%s-%s-%d", gpu, value, from.Unix()), Kind: domain.PriceOnDemand, GPUType: gpu, Value: value, EffectiveFrom: from}
}

func rec(class domain.ComputeClass, start, end time.Time) domain.UsageRecord {
	return domain.UsageRecord{NodeID: "n1", ClusterID: "c1", ProjectID: "p", Region: "us", GPUType: "H100",
		Class: class, BillingType: domain.BillingOnDemand, GPUs: 8, Start: start, End: end, Final: true}
}

func priceAll(b *Book, recs []domain.UsageRecord, from, to time.Time) (Totals, []Line) {
	var tot Totals
	var lines []Line
	b.Price(recs, from, to, func(l Line) {
		tot.Add(l)
		lines = append(lines, l)
	})
	return tot, lines
}

func TestTwelveMinutesCostTwelveMinutes(t *testing.T) {
	b := book(t, od("H100", "2.99", time.Time{}))
	r := rec(domain.Standard, t0, t0.Add(12*time.Minute))
	tot, lines := priceAll(b, []domain.UsageRecord{r}, t0.Add(-time.Hour), t0.Add(time.Hour))
	if len(lines) != 1 || lines[0].Seconds != 720 {
		t.Fatalf("%+v", lines)
	}
	// 8 GPUs × 12 min × $2.99/h = $4.784
	if got := tot.Amount.Exact(); got != "4.784" {
		t.Fatalf("amount %s", got)
	}
	if got := tot.Amount.Round(2); got != "4.78" {
		t.Fatalf("rounded %s", got)
	}
}

func TestPreemptibleIsHalfPrice(t *testing.T) {
	b := book(t, od("H100", "2.99", time.Time{}))
	r := rec(domain.Preemptible, t0, t0.Add(time.Hour))
	tot, lines := priceAll(b, []domain.UsageRecord{r}, t0, t0.Add(time.Hour))
	if tot.Amount.Exact() != "11.96" || tot.OnDemand.Exact() != "23.92" || tot.Savings().Exact() != "11.96" {
		t.Fatalf("amount %s on-demand %s savings %s", tot.Amount.Exact(), tot.OnDemand.Exact(), tot.Savings().Exact())
	}
	if lines[0].EffectiveRate() != "1.495" {
		t.Fatalf("rate %s", lines[0].EffectiveRate())
	}
}

func TestPriceChangeSplitsAndKeepsThePast(t *testing.T) {
	change := t0.Add(30 * time.Minute)
	b := book(t, od("H100", "2.00", time.Time{}), od("H100", "4.00", change))
	r := rec(domain.Standard, t0, t0.Add(time.Hour))
	tot, lines := priceAll(b, []domain.UsageRecord{r}, t0, t0.Add(time.Hour))
	if len(lines) != 2 || lines[0].End != change || lines[1].Start != change {
		t.Fatalf("%+v", lines)
	}
	// 8 GPUs: half an hour at $2 and half at $4.
	if tot.Amount.Exact() != "24" {
		t.Fatalf("amount %s", tot.Amount.Exact())
	}
	// The first half alone is priced as before the change.
	before, _ := priceAll(b, []domain.UsageRecord{r}, t0, change)
	if before.Amount.Exact() != "8" {
		t.Fatalf("past usage repriced: %s", before.Amount.Exact())
	}
}

func TestRegionPriceAndReservedPrice(t *testing.T) {
	b := book(t, od("H100", "2.99", time.Time{}),
		domain.Price{ID: "r", Kind: domain.PriceOnDemand, Region: "eu", GPUType: "H100", Value: "3.50"},
		domain.Price{ID: "res", Kind: domain.PriceReserved, ReservationID: "rsv1", Value: "1.00"},
		domain.Price{ID: "d", Kind: domain.PricePreemptibleDiscount, Value: "60", EffectiveFrom: t0.Add(time.Hour)})
	eu := rec(domain.Standard, t0, t0.Add(time.Hour))
	eu.Region = "eu"
	res := rec(domain.Standard, t0, t0.Add(time.Hour))
	res.BillingType, res.ReservationID = domain.BillingReserved, "rsv1"
	pre := rec(domain.Preemptible, t0.Add(time.Hour), t0.Add(2*time.Hour))
	for _, tc := range []struct {
		r                domain.UsageRecord
		amount, onDemand string
	}{
		{eu, "28", "28"},
		{res, "8", "23.92"},
		{pre, "9.568", "23.92"}, // 40% of 23.92 after the discount went to 60%
	} {
		tot, _ := priceAll(b, []domain.UsageRecord{tc.r}, t0, t0.Add(3*time.Hour))
		if tot.Amount.Exact() != tc.amount || tot.OnDemand.Exact() != tc.onDemand {
			t.Errorf("%s/%s: amount %s on-demand %s, want %s %s", tc.r.Class, tc.r.Region, tot.Amount.Exact(), tot.OnDemand.Exact(), tc.amount, tc.onDemand)
		}
	}
}

func TestUnpricedUsageIsReported(t *testing.T) {
	b := book(t)
	tot, lines := priceAll(b, []domain.UsageRecord{rec(domain.Standard, t0, t0.Add(time.Minute))}, t0, t0.Add(time.Hour))
	if lines[0].Priced || tot.UnpricedGPUSeconds != 480 || !tot.Amount.IsZero() {
		t.Fatalf("%+v %+v", lines, tot)
	}
}

func TestStopPoints(t *testing.T) {
	ready := t0
	notice := t0.Add(10 * time.Minute)
	removed := notice.Add(3 * time.Minute)
	base := domain.Node{ReadyAt: ready, DrainStartedAt: notice, RemovedAt: removed}
	for _, tc := range []struct {
		class domain.ComputeClass
		cause domain.DrainCause
		want  time.Time
	}{
		{domain.Preemptible, domain.CausePreempted, notice},
		{domain.Preemptible, domain.CauseFairShare, notice},
		{domain.Preemptible, domain.CauseOutOfService, notice},
		{domain.Preemptible, domain.CauseScaledDown, removed},
		{domain.Preemptible, domain.CauseClusterDeleted, removed},
		{domain.Standard, domain.CauseScaledDown, removed},
		{domain.Standard, domain.CauseOutOfService, removed},
	} {
		n := base
		n.Class, n.DrainCause = tc.class, tc.cause
		stop, known, billable := Stop(n)
		if !known || !billable || !stop.Equal(tc.want) {
			t.Errorf("%s/%s: stop %v, want %v", tc.class, tc.cause, stop, tc.want)
		}
	}
	if _, _, billable := Stop(domain.Node{DrainStartedAt: notice}); billable {
		t.Error("a node that never became ready is not billable")
	}
	if _, known, billable := Stop(domain.Node{ReadyAt: ready}); known || !billable {
		t.Error("a running node is billable with no stop yet")
	}
}

func TestMoneyRounding(t *testing.T) {
	for _, tc := range []struct {
		num  uint64
		dec  int
		want string
	}{
		{Denom / 200, 2, "0.00"},     // 0.005 → half to even: 0.00
		{3 * Denom / 200, 2, "0.02"}, // 0.015 → 0.02
		{Denom / 3, 6, "0.333333"},
		{2 * Denom, 2, "2.00"},
	} {
		if got := (Money{lo: tc.num}).Round(tc.dec); got != tc.want {
			t.Errorf("%d/%d at %d: %s, want %s", tc.num, Denom, tc.dec, got, tc.want)
		}
	}
	if got := (Money{lo: Denom / 3}).Exact(); got != "0.333333333333…" {
		t.Errorf("exact %s", got)
	}
	big2 := Money{hi: 1}.Add(Money{lo: ^uint64(0)})
	if big2.Rat().Cmp(new(big.Rat).SetFrac(new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 65), big.NewInt(1)), big.NewInt(Denom))) != 0 {
		t.Error("carry lost")
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]uint64{"2.99": 2_990_000, "0.000001": 1, "10": 10_000_000, "1.09": 1_090_000, "08.08": 8_080_000} {
		if got, err := ParseRate(in); err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "1.2345678", "abc", "1e3", "1,5"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
	if bp, err := ParsePercent("08.09"); err != nil || bp != 809 {
		t.Errorf("ParsePercent(08.09) = %d %v", bp, err)
	}
	if bp, err := ParsePercent("12.5"); err != nil || bp != 1250 {
		t.Errorf("ParsePercent = %d %v", bp, err)
	}
	for _, bad := range []string{"101", "-5", "50%", "1.234"} {
		if _, err := ParsePercent(bad); err == nil {
			t.Errorf("ParsePercent(%q) accepted", bad)
		}
	}
	if FormatRate(445_000) != "0.445" || FormatRate(1_000_000) != "1.00" {
		t.Error(FormatRate(445_000), FormatRate(1_000_000))
	}
}

// TestBillingProperties: for random lifecycles and periods, billed seconds
// are the exact overlap of [ready, stop) with the period; preemptible
// amounts are half the on-demand amount of the same seconds; and splitting
// a period into pieces never changes the totals.
func TestBillingProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		changes := rapid.IntRange(0, 3).Draw(rt, "changes")
		prices := []domain.Price{od("H100", "2.99", time.Time{})}
		for i := 0; i < changes; i++ {
			at := t0.Add(time.Duration(rapid.IntRange(0, 7200).Draw(rt, "changeAt")) * time.Second)
			v := fmt.Sprintf("%d.%02d", rapid.IntRange(0, 9).Draw(rt, "dollars"), rapid.IntRange(0, 99).Draw(rt, "cents"))
			prices = append(prices, od("H100", v, at))
		}
		b := book(rt, prices...)
		var recs []domain.UsageRecord
		for i, n := 0, rapid.IntRange(1, 6).Draw(rt, "nodes"); i < n; i++ {
			start := t0.Add(time.Duration(rapid.Int64Range(0, 7_200_000_000).Draw(rt, "startUs")) * time.Microsecond)
			end := start.Add(time.Duration(rapid.Int64Range(0, 3_600_000_000).Draw(rt, "lenUs")) * time.Microsecond)
			r := rec(rapid.SampledFrom([]domain.ComputeClass{domain.Standard, domain.Preemptible}).Draw(rt, "class"), start, end)
			r.NodeID = fmt.Sprintf("n%d", i)
			recs = append(recs, r)
		}
		from := t0.Add(time.Duration(rapid.IntRange(-600, 7200).Draw(rt, "from")) * time.Second)
		to := from.Add(time.Duration(rapid.IntRange(0, 10800).Draw(rt, "len")) * time.Second)
		whole, _ := priceAll(b, recs, from, to)

		// Billed seconds = the exact overlap, counted independently.
		var want int64
		for _, r := range recs {
			for s := r.Start.Unix(); s < r.End.Unix(); s++ {
				if s >= from.Unix() && s < to.Unix() {
					want++
				}
			}
		}
		if whole.Seconds != want {
			rt.Fatalf("billed %d seconds, overlap is %d", whole.Seconds, want)
		}
		// Preemptible pays exactly half of on demand for the same seconds.
		b.Price(recs, from, to, func(l Line) {
			if l.Record.Class != domain.Preemptible {
				return
			}
			if new(big.Rat).Mul(l.Amount.Rat(), big.NewRat(2, 1)).Cmp(l.OnDemand.Rat()) != 0 {
				rt.Fatalf("preemptible %s is not half of %s", l.Amount.Exact(), l.OnDemand.Exact())
			}
		})
		// Splitting the period never changes the totals.
		var parts Totals
		cuts := []time.Time{from}
		for i, n := 0, rapid.IntRange(0, 5).Draw(rt, "cuts"); i < n; i++ {
			cuts = append(cuts, from.Add(time.Duration(rapid.Int64Range(0, max(to.Unix()-from.Unix(), 0)).Draw(rt, "cut"))*time.Second))
		}
		cuts = append(cuts, to)
		for i := range cuts {
			for j := i + 1; j < len(cuts); j++ {
				if cuts[j].Before(cuts[i]) {
					cuts[i], cuts[j] = cuts[j], cuts[i]
				}
			}
		}
		for i := 0; i+1 < len(cuts); i++ {
			b.Price(recs, cuts[i], cuts[i+1], parts.Add)
		}
		if parts != whole {
			rt.Fatalf("split totals %+v differ from whole %+v", parts, whole)
		}
	})
}

// BenchmarkInvoice prices and totals one million node intervals over a
// month with two price changes.
func BenchmarkInvoice(b *testing.B) {
	const n = 1_000_000
	bk := book(b, od("H100", "2.99", time.Time{}), od("H100", "3.19", t0.Add(10*24*time.Hour)),
		domain.Price{ID: "d", Kind: domain.PricePreemptibleDiscount, Value: "50"},
		od("A100", "1.79", time.Time{}))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	recs := make([]domain.UsageRecord, n)
	for i := range recs {
		start := t0.Add(time.Duration(i%(30*24*60)) * time.Minute)
		r := rec(domain.Standard, start, start.Add(time.Duration(1+i%600)*time.Minute))
		if i%2 == 0 {
			r.Class = domain.Preemptible
		}
		if i%3 == 0 {
			r.GPUType = "A100"
		}
		r.NodeID = fmt.Sprint(i)
		recs[i] = r
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var tot Totals
		bk.Price(recs, t0, t0.Add(31*24*time.Hour), tot.Add)
		if tot.Amount.IsZero() {
			b.Fatal("nothing priced")
		}
	}
	// The records themselves, as a usage query holds them in memory.
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/1e6, "input-MB")
}

func TestNumeratorRoundTrips(t *testing.T) {
	for _, m := range []Money{{}, {lo: 42}, {hi: 1, lo: 7}, {hi: ^uint64(0), lo: ^uint64(0)}, amount(2_490_000, 5000, 1<<40)} {
		got, err := ParseNumerator(m.Numerator())
		if err != nil || got != m {
			t.Errorf("%v: round trip gave %v, %v", m, got, err)
		}
	}
	for _, bad := range []string{"", "-1", "x", "340282366920938463463374607431768211456"} {
		if _, err := ParseNumerator(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

// TestANodeIsBilledAtItsOwnType: a cluster's node of another GPU type
// than the cluster's (a preemptible target over several types) is
// billed at its own type's price; a node of before, with none, at its
// cluster's.
func TestANodeIsBilledAtItsOwnType(t *testing.T) {
	c := &domain.Cluster{ID: "c1", ProjectID: "p", Region: "us", GPUType: "H100", BillingType: domain.BillingOnDemand}
	m := &domain.Machine{ID: "m1", Region: "us", GPUType: "H200", GPUs: 8}
	n := &domain.Node{ID: "n1", ClusterID: "c1", MachineID: "m1", GPUType: "H200", Class: domain.Preemptible, GPUs: 8,
		State: domain.NodeRemoved, ReadyAt: t0, DrainStartedAt: t0.Add(time.Hour), RemovedAt: t0.Add(time.Hour)}
	r, ok := Record(n, c, m, t0.Add(2*time.Hour))
	if !ok || r.GPUType != "H200" {
		t.Fatalf("record %+v (%v); want GPU type H200", r, ok)
	}
	b := book(t, od("H100", "2.00", t0), od("H200", "3.00", t0),
		domain.Price{ID: "d", Kind: domain.PricePreemptibleDiscount, Value: "50", EffectiveFrom: t0})
	if tot, _ := priceAll(b, []domain.UsageRecord{r}, t0, t0.Add(2*time.Hour)); tot.Amount.Round(2) != "12.00" {
		t.Errorf("an hour of 8 H200 GPUs at half of 3.00: %s, want 12.00", tot.Amount.Round(2))
	}
	n.GPUType = ""
	if r, _ := Record(n, c, m, t0.Add(2*time.Hour)); r.GPUType != "H100" {
		t.Errorf("a node of before is billed as %q, want its cluster's H100", r.GPUType)
	}
}
