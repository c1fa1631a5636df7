package api

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestUsageByLabel: a cluster's three 8-GPU nodes over an hour, two of
// them running work of teams: each team is charged its GPUs' share of its
// node's price, the rest is idle, and the lines add up to the nodes.
func TestUsageByLabel(t *testing.T) {
	e, c, start := usageWorld(t)
	end := e.clk.Now()
	nodes, err := e.st.ListNodes(e.ctx, store.NodeFilter{ClusterID: c.ClusterID})
	if err != nil || len(nodes) != 3 {
		t.Fatal(nodes, err)
	}
	var std, pre []domain.Node
	for _, n := range nodes {
		if n.Class == domain.Standard {
			std = append(std, n)
		} else {
			pre = append(pre, n)
		}
	}
	ready := std[0].ReadyAt
	half := ready.Add(end.Sub(ready) / 2).Truncate(time.Second)
	span := func(n domain.Node, key, team string, gpus int, from, to time.Time) domain.WorkSpan {
		return domain.WorkSpan{ProjectID: "p", ClusterID: c.ClusterID, NodeID: n.ID, End: to, Running: domain.Running{
			Key: key, Namespace: "ml", Name: "pod-" + key, Job: "job/ml/" + team, GPUs: gpus, Start: from,
			Labels: map[string]string{"team": team}}}
	}
	ws := []domain.WorkSpan{
		span(std[0], "a", "vision", 4, ready, time.Time{}), // half the node, all along
		span(std[0], "b", "nlp", 8, ready, half),           // the other half, then gone
		span(pre[0], "c", "vision", 0, half, time.Time{}),  // the whole node, half the time
		{ProjectID: "other", ClusterID: "elsewhere", NodeID: "n-x", Running: domain.Running{Key: "x", GPUs: 8, Start: ready,
			Labels: map[string]string{"team": "vision"}}},
	}
	if err := e.st.Update(e.ctx, func(tx store.Tx) error { return tx.AddWorkSpans(e.ctx, ws) }); err != nil {
		t.Fatal(err)
	}
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "label:team"), "", 200, &u)
	secs := int64(end.Sub(ready) / time.Second)
	first := int64(half.Sub(ready) / time.Second)
	got := map[string]apiv1.UsageLine{}
	var sum int64
	for _, l := range u.LineItems {
		k := l.Group
		if l.Idle {
			k = "(idle)"
		}
		got[k] = l
		sum += l.GPUSeconds
	}
	want := map[string]int64{"vision": 4*secs + 8*(secs-first), "nlp": 4 * first, "(idle)": 4*(secs-first) + 8*first + 8*secs}
	for k, gs := range want {
		if got[k].GPUSeconds != gs {
			t.Errorf("%s: %d GPU-seconds, want %d (%+v)", k, got[k].GPUSeconds, gs, got[k])
		}
	}
	if len(u.LineItems) != 3 || sum != u.Totals.GPUSeconds {
		t.Fatalf("%d lines adding to %d GPU-seconds of %d: %+v", len(u.LineItems), sum, u.Totals.GPUSeconds, u.LineItems)
	}
	// nlp: 4 standard GPUs for `first` seconds at $0.89 an hour.
	if want := billing.AtFullRate(890_000, uint64(4*first)).Round(6); got["nlp"].Amount != want {
		t.Errorf("nlp costs %s, want %s", got["nlp"].Amount, want)
	}
	if l := got["vision"]; l.ClusterID != c.ClusterID || l.ComputeClass != "" || l.NodeID != "" {
		t.Errorf("vision ran on two nodes of two classes: %+v", l)
	}
	assertSum(t, u)

	// Jobs are a cluster's; CSV carries the group.
	e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "job"), "", 200, &u)
	if len(u.LineItems) != 3 || u.LineItems[0].Group != "job/ml/nlp" || u.LineItems[1].Group != "job/ml/vision" {
		t.Fatalf("by job: %+v", u.LineItems)
	}
	csv := string(e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "namespace", "format", "csv"), "", 200, nil))
	if !strings.Contains(csv, ",group,idle\n") || !strings.Contains(csv, ",ml,\n") || !strings.Contains(csv, ",,true\n") {
		t.Fatalf("CSV by namespace:\n%s", csv)
	}
}

// assertSum: the lines' amounts add up to the total to within their
// rounding (each is rounded to $0.000001).
func assertSum(t *testing.T, u apiv1.Usage) {
	t.Helper()
	sum := new(big.Rat)
	for _, l := range u.LineItems {
		r, ok := new(big.Rat).SetString(l.Amount)
		if !ok {
			t.Fatalf("amount %q", l.Amount)
		}
		sum.Add(sum, r)
	}
	// An expansion that does not end is cut at 12 decimals ("…").
	total, ok := new(big.Rat).SetString(strings.TrimSuffix(u.Totals.AmountExact, "…"))
	if !ok {
		t.Fatalf("total %q", u.Totals.AmountExact)
	}
	diff := new(big.Rat).Sub(sum, total)
	if diff.Abs(diff).Cmp(big.NewRat(int64(len(u.LineItems))+1, 2_000_000)) > 0 {
		t.Fatalf("lines add up to %s, total %s", sum.FloatString(8), u.Totals.AmountExact)
	}
}

func TestUsageByWorkBadInput(t *testing.T) {
	e, _, start := usageWorld(t)
	end := e.clk.Now()
	for _, g := range []string{"label:", "label:a b", "label:" + strings.Repeat("k", 70), "label:-x", "labels:team", "pod"} {
		b := e.apiErr("p", "GET", "/v1/usage"+q(start, end, "group_by", g), "", 400)
		if b.Field != "group_by" || len(b.Message) > 300 {
			t.Errorf("group_by %q: %+v", g, b)
		}
	}
}

func FuzzWorkGroup(f *testing.F) {
	for _, s := range []string{"label:team", "label:example.com/team", "namespace", "label:", "label:a/b/c", "job"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, g string) {
		key, _, ok, err := workGroup(g)
		switch {
		case err != nil && (key != nil || !strings.HasPrefix(g, "label:")):
			t.Fatalf("%q: an error with a key, or not a label: %v", g, err)
		case err != nil && len(err.Error()) > 400:
			t.Fatalf("%q: an unbounded error", g)
		case err == nil && ok && key == nil:
			t.Fatalf("%q: no key", g)
		case err == nil && ok:
			key(&domain.WorkSpan{Running: domain.Running{Labels: map[string]string{"team": "x"}}})
		}
	})
}

// TestSplitAddsUpExactly: whatever the records (conversions: one node's
// records of both classes), prices (changes inside records) and work
// (overlapping, over-claiming, open), the groups' exact amounts add up to
// the nodes' to the last unit, and so do GPU-seconds.
func TestSplitAddsUpExactly(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		at := func(label string) time.Time {
			return t0.Add(time.Duration(rapid.IntRange(0, 20_000).Draw(t, label)) * time.Second)
		}
		prices := []domain.Price{{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.5", EffectiveFrom: t0.Add(-time.Hour)},
			{ID: "d", Kind: domain.PricePreemptibleDiscount, Value: "50", EffectiveFrom: t0.Add(-time.Hour)}}
		for i := range rapid.IntRange(0, 3).Draw(t, "changes") {
			prices = append(prices, domain.Price{ID: fmt.Sprint("od", i), Kind: domain.PriceOnDemand, GPUType: "H100",
				Value:         fmt.Sprintf("%d.%06d", rapid.IntRange(0, 9).Draw(t, "$"), rapid.IntRange(0, 999_999).Draw(t, "µ$")),
				EffectiveFrom: at("price-from")})
		}
		b, err := billing.NewBook(prices)
		if err != nil {
			t.Fatal(err)
		}
		groups := []string{"a", "b", "c"}
		sp := newSplitter(b, t0, t0.Add(20_000*time.Second), workGroups["namespace"], rapid.Bool().Draw(t, "perCluster"))
		var recs []domain.UsageRecord
		for n := range rapid.IntRange(1, 3).Draw(t, "nodes") {
			id := fmt.Sprint("n", n)
			s := at("ready")
			for range rapid.IntRange(1, 3).Draw(t, "records") { // conversions: a record per class period
				e := s.Add(time.Duration(rapid.IntRange(1, 8000).Draw(t, "len")) * time.Second)
				class := domain.Standard
				if rapid.Bool().Draw(t, "preemptible") {
					class = domain.Preemptible
				}
				recs = append(recs, domain.UsageRecord{NodeID: id, ClusterID: "c", ProjectID: "p", Class: class, GPUType: "H100",
					GPUs: rapid.SampledFrom([]int{1, 8}).Draw(t, "gpus"), Start: s, End: e})
				s = e
			}
			for range rapid.IntRange(0, 5).Draw(t, "spans") {
				w := domain.WorkSpan{NodeID: id, Running: domain.Running{Namespace: rapid.SampledFrom(groups).Draw(t, "ns"),
					GPUs: rapid.IntRange(0, 10).Draw(t, "span-gpus"), Start: at("span-start")}}
				if rapid.Bool().Draw(t, "ended") {
					w.End = w.Start.Add(time.Duration(rapid.IntRange(0, 9000).Draw(t, "span-len")) * time.Second)
				}
				sp.span(w)
			}
		}
		for _, r := range recs {
			sp.add(r)
		}
		var amt, od billing.Money
		var gs int64
		for i, l := range sp.lines {
			amt, od, gs = amt.Add(sp.sums[i].amount), od.Add(sp.sums[i].onDemand), gs+l.GPUSeconds
		}
		if amt != sp.total.Amount || od != sp.total.OnDemand || gs != sp.total.GPUSeconds {
			t.Fatalf("groups add up to %s (on demand %s, %d GPU-s), nodes to %s (%s, %d)", amt.Exact(), od.Exact(), gs,
				sp.total.Amount.Exact(), sp.total.OnDemand.Exact(), sp.total.GPUSeconds)
		}
	})
}

// TestCostPerUnitOfWork: a training run reclaimed at epoch 6 and rerun
// from its epoch-4 checkpoint to epoch 10 is one job line of 10 units:
// its cost per epoch counts the two epochs it did twice.
func TestCostPerUnitOfWork(t *testing.T) {
	e, c, start := usageWorld(t)
	end := e.clk.Now()
	nodes, err := e.st.ListNodes(e.ctx, store.NodeFilter{ClusterID: c.ClusterID})
	if err != nil || len(nodes) != 3 {
		t.Fatal(nodes, err)
	}
	ready := nodes[0].ReadyAt
	half := ready.Add(end.Sub(ready) / 2).Truncate(time.Second)
	run := func(n domain.Node, key string, from, to time.Time, epochs int64) domain.WorkSpan {
		return domain.WorkSpan{ProjectID: "p", ClusterID: c.ClusterID, NodeID: n.ID, End: to, Running: domain.Running{
			Key: key, Namespace: "ml", Name: "train-" + key, Job: "jobset/ml/train", GPUs: 8, Start: from, Progress: epochs}}
	}
	ws := []domain.WorkSpan{run(nodes[1], "first", ready, half, 6), run(nodes[2], "rerun", half, time.Time{}, 10)}
	if err := e.st.Update(e.ctx, func(tx store.Tx) error { return tx.AddWorkSpans(e.ctx, ws) }); err != nil {
		t.Fatal(err)
	}
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "job"), "", 200, &u)
	var job apiv1.UsageLine
	for _, l := range u.LineItems {
		if l.Group == "jobset/ml/train" {
			job = l
		}
	}
	amount, _ := strconv.ParseFloat(job.Amount, 64)
	per, _ := strconv.ParseFloat(job.CostPerUnit, 64)
	if job.Units != 10 || amount == 0 || math.Abs(per-amount/10) > 1e-6 {
		t.Fatalf("the run's line %+v: want 10 units at a tenth of its amount", job)
	}
	for _, l := range u.LineItems {
		if l.Idle && (l.Units != 0 || l.CostPerUnit != "") {
			t.Fatalf("the idle line has units: %+v", l)
		}
	}
}
