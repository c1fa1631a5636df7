package e2e

import (
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"math/big"
	"math/rand/v2"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/sim"
)

// The crash scenario's price: crashFleet prices H100_SXM at $2.99 per
// GPU-hour, and preemptible capacity is 50% off (the default discount).
var (
	onDemandRate    = big.NewRat(299, 100)
	preemptibleRate = big.NewRat(299, 200)
)

// billingRun is what the billing phase of the crash scenario needs from
// the scenario.
type billingRun struct {
	t         testing.TB
	cfg       serverConfig
	srv       *server // the running server (#2 when the phase starts)
	anchor    *clock.Scaled
	runFrom   time.Time // a simulated time before the first server started
	tenants   []billingTenant
	firstID   string // team-a's cluster: desired_preemptible_gpus 16
	burstID   string // team-b's cluster: 16 standard GPUs
	startedAt time.Time
}

type billingTenant struct {
	project  string
	token    string
	clusters []string
}

func (b *billingRun) client(token string) *client.Client { return apiClient(b.t, b.srv.URL, token) }

// nodeBill is a node's billing as the lifecycle events imply it.
type nodeBill struct {
	id, name, cluster, class string
	gpus                     int
	start                    time.Time // NodeAdded: ready
	stop                     time.Time // zero while it runs
	stopBy                   string    // the event the stop point comes from
	tenantDrain              bool      // a ScaledDown event: the tenant's own drain
}

func (n *nodeBill) String() string {
	s := fmt.Sprintf("%s %s (%s, cluster %s) ready %s", n.class, n.name, n.id, n.cluster, n.start.Format(time.RFC3339Nano))
	if n.stop.IsZero() {
		return s + ", running"
	}
	return s + fmt.Sprintf(", stop %s (%s)", n.stop.Format(time.RFC3339Nano), n.stopBy)
}

var nodeAddedRE = regexp.MustCompile(`^(standard|preemptible) node (\S+) \((\d+) GPUs, (on-demand|reserved) capacity`)

// expectedBills derives each node's billing interval from a cluster's
// lifecycle events (GET /v1/clusters/{id}/events), independently of the
// usage records: ready at NodeAdded; a preemptible node reclaimed by
// sparecap (PreemptionNotified) stops at the notice; a standard node, or a
// node the tenant scaled down (ScaledDown), stops at NodeRemoved; a node
// with neither is running.
func expectedBills(t *testing.T, c *client.Client, clusterID string) map[string]*nodeBill {
	t.Helper()
	evs, _ := allEvents(t, c, clusterID, "")
	out := map[string]*nodeBill{}
	byNode := map[string]map[string]apiv1.Event{}
	for _, e := range evs {
		if e.NodeID == "" {
			continue
		}
		if byNode[e.NodeID] == nil {
			byNode[e.NodeID] = map[string]apiv1.Event{}
		}
		if prev, dup := byNode[e.NodeID][e.Reason]; dup {
			t.Errorf("cluster %s: node %s has two %s events (%s at %s and %s at %s); the store keeps one per node and reason",
				clusterID, e.NodeName, e.Reason, prev.EventID, prev.Timestamp.Format(time.RFC3339Nano), e.EventID, e.Timestamp.Format(time.RFC3339Nano))
		}
		byNode[e.NodeID][e.Reason] = e
	}
	for id, rs := range byNode {
		added, ok := rs["NodeAdded"]
		if !ok {
			continue // never became ready: never billable
		}
		m := nodeAddedRE.FindStringSubmatch(added.Message)
		if m == nil {
			t.Fatalf("cluster %s: NodeAdded event of %s has an unexpected message %q (want \"<class> node <name> (<n> GPUs, <pool kind> capacity ...\")", clusterID, added.NodeName, added.Message)
		}
		gpus, _ := strconv.Atoi(m[3])
		n := &nodeBill{id: id, name: added.NodeName, cluster: clusterID, class: m[1], gpus: gpus, start: added.Timestamp}
		_, n.tenantDrain = rs["ScaledDown"]
		if e, ok := rs["PreemptionNotified"]; ok && n.class == "preemptible" {
			n.stop, n.stopBy = e.Timestamp, "PreemptionNotified"
		} else if e, ok := rs["NodeRemoved"]; ok {
			n.stop, n.stopBy = e.Timestamp, "NodeRemoved"
		}
		out[id] = n
	}
	return out
}

// expectedSeconds is what the node bills in [from, to) when running nodes
// were last cut at cutEnd (Unix seconds): floor(end) − floor(start),
// clipped to the period.
func (n *nodeBill) expectedSeconds(from, to time.Time, cutEnd int64) (start, end int64) {
	start = max(n.start.Unix(), from.Unix())
	end = cutEnd
	if !n.stop.IsZero() {
		end = n.stop.Unix()
	}
	end = min(end, to.Unix())
	if end < start {
		end = start
	}
	return start, end
}

// ---- exact money ----

// lineMoney is the exact amount and on-demand equivalent of gpuSeconds of
// a compute class.
func lineMoney(class string, gpuSeconds int64) (amount, onDemand *big.Rat) {
	gs := new(big.Rat).SetFrac64(gpuSeconds, 3600)
	onDemand = new(big.Rat).Mul(onDemandRate, gs)
	if class == "preemptible" {
		return new(big.Rat).Mul(preemptibleRate, gs), onDemand
	}
	return new(big.Rat).Set(onDemand), onDemand
}

// roundHalfEven rounds r to decimals places, half to even.
func roundHalfEven(r *big.Rat, decimals int) *big.Rat {
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)
	n := new(big.Int).Mul(r.Num(), scale)
	q, rem := new(big.Int).QuoRem(n, r.Denom(), new(big.Int))
	switch new(big.Int).Lsh(rem, 1).Cmp(r.Denom()) {
	case 1:
		q.Add(q, big.NewInt(1))
	case 0:
		if q.Bit(0) == 1 {
			q.Add(q, big.NewInt(1))
		}
	}
	return new(big.Rat).SetFrac(q, scale)
}

// terminates reports whether r has at most decimals decimal places.
func terminates(r *big.Rat, decimals int) bool {
	return roundHalfEven(r, decimals).Cmp(r) == 0
}

// decimal parses a decimal amount string exactly; ok is false when it is
// not one.
func decimal(s string) (*big.Rat, bool) {
	if s == "" || strings.ContainsAny(s, "eE/") {
		return nil, false
	}
	r, ok := new(big.Rat).SetString(s)
	return r, ok
}

func ratString(r *big.Rat) string { return r.FloatString(12) }

// sameAmount reports whether the decimal string got is exactly want.
func sameAmount(got string, want *big.Rat) bool {
	r, ok := decimal(got)
	return ok && r.Cmp(want) == 0
}

// moneyNotes collects rounding observations that are not failures.
type moneyNotes struct {
	mu    sync.Mutex
	notes []string
}

func (m *moneyNotes) add(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.notes = append(m.notes, fmt.Sprintf(format, args...))
}

// checkLineMoney: the line's amounts are its exact price rounded half to
// even to the micro-dollar, its rates are $2.99 (standard) and $1.495
// (preemptible) per GPU-hour, and a preemptible line costs half its
// on-demand equivalent (to the rounding of the two displayed amounts).
func checkLineMoney(t *testing.T, where string, l apiv1.UsageLine, class string, notes *moneyNotes) {
	t.Helper()
	amt, od := lineMoney(class, l.GPUSeconds)
	if !l.Priced {
		t.Errorf("%s: line is not priced; the fleet prices %s at $2.99/GPU-h: %+v", where, gpuType, l)
		return
	}
	if !sameAmount(l.Amount, roundHalfEven(amt, 6)) || !sameAmount(l.OnDemandAmount, roundHalfEven(od, 6)) {
		t.Errorf("%s: %d GPU-seconds of %s: amount %s, on-demand %s; want %s and %s (exact %s and %s rounded half to even to $0.000001)",
			where, l.GPUSeconds, class, l.Amount, l.OnDemandAmount, roundHalfEven(amt, 6).FloatString(6), roundHalfEven(od, 6).FloatString(6), ratString(amt), ratString(od))
	}
	wantRate := onDemandRate
	if class == "preemptible" {
		wantRate = preemptibleRate
	}
	if l.RatePerGPUHour != "" && !sameAmount(l.RatePerGPUHour, wantRate) || l.OnDemandRatePerGPUHour != "" && !sameAmount(l.OnDemandRatePerGPUHour, onDemandRate) {
		t.Errorf("%s: %s line rate %q on-demand rate %q; want %s and 2.99", where, class, l.RatePerGPUHour, l.OnDemandRatePerGPUHour, wantRate.FloatString(3))
	}
	if class != "preemptible" {
		if l.Amount != l.OnDemandAmount {
			t.Errorf("%s: a standard line costs %s but its on-demand equivalent is %s", where, l.Amount, l.OnDemandAmount)
		}
		return
	}
	a, ok1 := decimal(l.Amount)
	o, ok2 := decimal(l.OnDemandAmount)
	if !ok1 || !ok2 {
		t.Errorf("%s: amounts %q and %q are not decimals", where, l.Amount, l.OnDemandAmount)
		return
	}
	half := new(big.Rat).Quo(o, big.NewRat(2, 1))
	if a.Cmp(half) != 0 {
		// amount = round(x/2) and on-demand = round(x), each to the
		// micro-dollar: they can differ from an exact half by 0.75µ$.
		diff := new(big.Rat).Abs(new(big.Rat).Sub(a, half))
		if diff.Cmp(big.NewRat(3, 4_000_000)) > 0 {
			t.Errorf("%s: preemptible amount %s is not half of its on-demand equivalent %s (off by %s, more than rounding allows)", where, l.Amount, l.OnDemandAmount, diff.FloatString(9))
		} else {
			notes.add("preemptible line amount %s vs on-demand %s: half is %s (displayed amounts are each rounded to the micro-dollar)", l.Amount, l.OnDemandAmount, half.FloatString(7))
		}
	}
}

// checkTotals: totals are the exact sums rounded half to even to the
// cent, amount_exact has every decimal (12 and "…" when it does not end),
// savings = on-demand − amount.
func checkTotals(t *testing.T, where string, got apiv1.UsageTotals, amt, od *big.Rat, gpuSeconds int64, notes *moneyNotes) {
	t.Helper()
	sav := new(big.Rat).Sub(od, amt)
	if got.GPUSeconds != gpuSeconds || got.UnpricedGPUSeconds != 0 ||
		!sameAmount(got.Amount, roundHalfEven(amt, 2)) || !sameAmount(got.OnDemandEquivalent, roundHalfEven(od, 2)) || !sameAmount(got.Savings, roundHalfEven(sav, 2)) {
		t.Errorf("%s: totals %+v; want %d GPU-seconds, none unpriced, amount %s, on-demand %s, savings %s (exact %s, %s, %s)",
			where, got, gpuSeconds, roundHalfEven(amt, 2).FloatString(2), roundHalfEven(od, 2).FloatString(2), roundHalfEven(sav, 2).FloatString(2),
			ratString(amt), ratString(od), ratString(sav))
	}
	if exact, cut := strings.CutSuffix(got.AmountExact, "…"); cut {
		if terminates(amt, 12) || !sameAmount(exact, roundHalfEven(amt, 12)) {
			t.Errorf("%s: amount_exact %q; the exact amount is %s", where, got.AmountExact, amt.FloatString(14))
		}
	} else if !sameAmount(got.AmountExact, amt) {
		t.Errorf("%s: amount_exact %q; the exact amount is %s", where, got.AmountExact, amt.FloatString(14))
	}
	a, ok1 := decimal(got.Amount)
	o, ok2 := decimal(got.OnDemandEquivalent)
	s, ok3 := decimal(got.Savings)
	if !ok1 || !ok2 || !ok3 {
		t.Errorf("%s: totals %+v are not decimal strings", where, got)
		return
	}
	if diff := new(big.Rat).Sub(new(big.Rat).Sub(o, a), s); diff.Sign() != 0 {
		// Each total is rounded from its exact value: the displayed
		// savings can differ from displayed on-demand − amount by a cent.
		if new(big.Rat).Abs(diff).Cmp(big.NewRat(1, 100)) > 0 {
			t.Errorf("%s: savings %s != on_demand_equivalent %s - amount %s", where, got.Savings, got.OnDemandEquivalent, got.Amount)
		} else {
			notes.add("%s: savings %s but on_demand_equivalent %s - amount %s = %s (each total rounded from its exact value)",
				where, got.Savings, got.OnDemandEquivalent, got.Amount, new(big.Rat).Sub(o, a).FloatString(2))
		}
	}
}

// ---- usage ----

// usageCheck is one checked usage answer: its per-node lines and the
// simulated second up to which running nodes were cut (0: none ran).
type usageCheck struct {
	usage  *apiv1.Usage
	lines  map[string]apiv1.UsageLine // node ID -> line
	cutEnd int64
}

// checkUsage fetches usage by node over [from, to) with c (one cluster, or
// the whole project when clusterID is empty) and checks it against the
// nodes' lifecycle: every node that was ready is billed exactly once,
// finished nodes exactly from ready to their stop point, running nodes
// from ready to the cut the request made (within a second of the server's
// clock), no other node, and exact amounts and totals.
func checkUsage(t *testing.T, where string, c *client.Client, anchor *clock.Scaled, clusterID string, from, to time.Time, exp map[string]*nodeBill, notes *moneyNotes) usageCheck {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	before := anchor.Now()
	u, err := c.Usage(ctx, client.UsageQuery{ClusterID: clusterID, From: from, To: to, GroupBy: "node"})
	after := anchor.Now()
	if err != nil {
		t.Fatalf("%s: GET /v1/usage?cluster_id=%s&group_by=node from %s to %s: %v", where, clusterID, from.Format(time.RFC3339), to.Format(time.RFC3339), err)
	}
	out := usageCheck{usage: u, lines: map[string]apiv1.UsageLine{}}
	if u.GroupBy != "node" || !u.From.Equal(from) || !u.To.Equal(to) || u.Currency != "USD" {
		t.Errorf("%s: usage answered group_by %q, period %s to %s, currency %q; want node, %s to %s, USD", where, u.GroupBy,
			u.From.Format(time.RFC3339), u.To.Format(time.RFC3339), u.Currency, from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	for _, l := range u.LineItems {
		if prev, dup := out.lines[l.NodeID]; dup {
			t.Errorf("%s: node %s (%s) is billed twice (no price changed): %+v and %+v", where, l.NodeName, l.NodeID, prev, l)
			continue
		}
		out.lines[l.NodeID] = l
		n, ok := exp[l.NodeID]
		if !ok {
			// A node may have become ready after exp was read from the
			// events and before this request cut usage: read them again.
			if n, ok = expectedBills(t, c, l.ClusterID)[l.NodeID]; ok {
				exp[l.NodeID] = n // and the totals checked below count it
			}
		}
		if !ok {
			t.Errorf("%s: node %s (%s, cluster %s) is billed %d s, but the events show no such node ever becoming ready in the tenant's clusters: %+v",
				where, l.NodeName, l.NodeID, l.ClusterID, l.BilledSeconds, l)
			continue
		}
		if n.stop.IsZero() {
			// The request cut running nodes at the server's now, to the
			// second.
			end := l.End.Unix()
			if end < before.Unix()-1 || end > after.Unix()+1 {
				t.Errorf("%s: running node %s billed up to %s; the request was served between %s and %s (simulated): the usage API must cut fresh records",
					where, n.name, l.End.Format(time.RFC3339), before.Format(time.RFC3339Nano), after.Format(time.RFC3339Nano))
			}
			if out.cutEnd != 0 && out.cutEnd != end {
				t.Errorf("%s: running nodes end at different seconds (%d and %d) in one answer", where, out.cutEnd, end)
			}
			out.cutEnd = end
		}
	}
	for id, n := range exp {
		l, ok := out.lines[id]
		cut := out.cutEnd
		if cut == 0 {
			cut = after.Unix()
		}
		s, e := n.expectedSeconds(from, to, cut)
		if !ok {
			if e > s {
				t.Errorf("%s: node %s is missing from the usage; its events say it bills %d s: %s", where, n.name, e-s, n)
			}
			continue
		}
		if l.ClusterID != n.cluster || l.ComputeClass != n.class || l.GPUs != n.gpus {
			t.Errorf("%s: node %s billed as cluster %s, %s, %d GPUs; its NodeAdded event says cluster %s, %s, %d GPUs",
				where, n.name, l.ClusterID, l.ComputeClass, l.GPUs, n.cluster, n.class, n.gpus)
		}
		if l.Start.Unix() != s || l.End.Unix() != e || l.BilledSeconds != e-s || l.GPUSeconds != (e-s)*int64(n.gpus) {
			t.Errorf("%s: node %s billed %s to %s = %d s (%d GPU-s); from its events (%s) want %s to %s = %d s (%d GPU-s) — floor(end) - floor(start)",
				where, n.name, l.Start.Format(time.RFC3339), l.End.Format(time.RFC3339), l.BilledSeconds, l.GPUSeconds, n,
				time.Unix(s, 0).UTC().Format(time.RFC3339), time.Unix(e, 0).UTC().Format(time.RFC3339), e-s, (e-s)*int64(n.gpus))
		}
		checkLineMoney(t, where+": node "+n.name, l, n.class, notes)
	}
	// Totals, overall and by class, from the checked lines.
	amt, od, gs := new(big.Rat), new(big.Rat), int64(0)
	byClass := map[string][3]any{}
	for _, class := range []string{"standard", "preemptible"} {
		ca, co, cg := new(big.Rat), new(big.Rat), int64(0)
		for _, l := range u.LineItems {
			if l.ComputeClass != class {
				continue
			}
			a, o := lineMoney(class, l.GPUSeconds)
			ca.Add(ca, a)
			co.Add(co, o)
			cg += l.GPUSeconds
		}
		byClass[class] = [3]any{ca, co, cg}
		amt.Add(amt, ca)
		od.Add(od, co)
		gs += cg
	}
	checkTotals(t, where+": totals", u.Totals, amt, od, gs, notes)
	for class, v := range byClass {
		got, ok := u.ByClass[class]
		if !ok {
			t.Errorf("%s: no %s totals in totals_by_compute_class %+v", where, class, u.ByClass)
			continue
		}
		checkTotals(t, where+": "+class+" totals", got, v[0].(*big.Rat), v[1].(*big.Rat), v[2].(int64), notes)
	}
	return out
}

// expected is the union of the expected bills of a tenant's clusters.
func (b *billingRun) expected(t *testing.T, tn billingTenant) map[string]*nodeBill {
	t.Helper()
	c := b.client(tn.token)
	all := map[string]*nodeBill{}
	for _, id := range tn.clusters {
		for k, v := range expectedBills(t, c, id) {
			all[k] = v
		}
	}
	return all
}

// checkAll checks the usage of every cluster of both tenants over the
// whole run, and each tenant's usage project-wide; it returns the lines
// per node and the expectations.
func (b *billingRun) checkAll(t *testing.T, label string, notes *moneyNotes) (map[string]apiv1.UsageLine, map[string]*nodeBill) {
	t.Helper()
	lines := map[string]apiv1.UsageLine{}
	exps := map[string]*nodeBill{}
	to := b.anchor.Now().Add(time.Hour).Truncate(time.Second)
	for _, tn := range b.tenants {
		c := b.client(tn.token)
		exp := b.expected(t, tn)
		for _, id := range tn.clusters {
			sub := map[string]*nodeBill{}
			for k, v := range exp {
				if v.cluster == id {
					sub[k] = v
				}
			}
			got := checkUsage(t, fmt.Sprintf("%s: %s's cluster %s", label, tn.project, id), c, b.anchor, id, b.runFrom, to, sub, notes)
			for k, v := range got.lines {
				lines[k] = v
			}
		}
		checkUsage(t, fmt.Sprintf("%s: %s, all clusters", label, tn.project), c, b.anchor, "", b.runFrom, to, exp, notes)
		for k, v := range exp {
			exps[k] = v
		}
	}
	return lines, exps
}

// compareFinished: a node finished at the first check (per its events
// then, exp) bills the same afterwards, to the micro-dollar; a running
// one never bills less.
func compareFinished(t *testing.T, what string, before, after map[string]apiv1.UsageLine, exp map[string]*nodeBill) {
	t.Helper()
	finished, running := 0, 0
	for id, b := range before {
		a, ok := after[id]
		n := exp[id]
		switch {
		case !ok:
			t.Errorf("%s: node %s was billed before (%d s, $%s) and is missing afterwards", what, b.NodeName, b.BilledSeconds, b.Amount)
		case n != nil && !n.stop.IsZero() && (a.BilledSeconds != b.BilledSeconds || !a.Start.Equal(b.Start) || !a.End.Equal(b.End) || a.Amount != b.Amount || a.OnDemandAmount != b.OnDemandAmount):
			t.Errorf("%s: finished node %s changed:\n before %+v\n  after %+v", what, b.NodeName, b, a)
		case n != nil && !n.stop.IsZero():
			finished++
		case a.BilledSeconds < b.BilledSeconds || !a.Start.Equal(b.Start):
			t.Errorf("%s: running node %s billed %d s from %s before, %d s from %s afterwards", what, b.NodeName, b.BilledSeconds, b.Start, a.BilledSeconds, a.Start)
		default:
			running++
		}
	}
	t.Logf("%s: %d finished nodes bill the same, %d running nodes bill no less", what, finished, running)
}

// ---- the invoice ----

// checkInvoice: `sparecap invoice --month <month> -o json` with the
// tenant's token equals the usage of the same month (fetched just before
// and just after), every line and total is what the events imply, and
// `-o csv` ends with the TOTAL and SAVINGS rows.
func (b *billingRun) checkInvoice(t *testing.T, tn billingTenant, month string, notes *moneyNotes) {
	t.Helper()
	mFrom, err := time.Parse("2006-01", month)
	if err != nil {
		t.Fatal(err)
	}
	mTo := mFrom.AddDate(0, 1, 0)
	c := b.client(tn.token)
	exp := b.expected(t, tn)
	where := fmt.Sprintf("invoice of %s for %s", tn.project, month)
	u1 := checkUsage(t, where+": usage before", c, b.anchor, "", mFrom, mTo, exp, notes)

	tBefore := b.anchor.Now()
	var inv apiv1.Invoice
	cliJSON(t, b.srv, tn.token, &inv, "invoice", "--month", month, "-o", "json")
	tAfter := b.anchor.Now()
	rc := cli(t, b.srv, tn.token, "invoice", "--month", month, "-o", "csv")
	u2 := checkUsage(t, where+": usage after", c, b.anchor, "", mFrom, mTo, exp, notes)

	if inv.ProjectID != tn.project || !inv.From.Equal(mFrom) || !inv.To.Equal(mTo) || inv.Currency != "USD" || inv.PreemptibleDiscount != "50" {
		t.Errorf("%s: project %q, period %s to %s, currency %q, discount %q%%; want %s, %s to %s, USD, 50%%", where, inv.ProjectID,
			inv.From.Format(time.RFC3339), inv.To.Format(time.RFC3339), inv.Currency, inv.PreemptibleDiscount, tn.project, mFrom.Format(time.RFC3339), mTo.Format(time.RFC3339))
	}
	// Which groups hold running nodes, and so where the invoice's own cut
	// shows.
	type group struct {
		cluster, class string
		nodes          []*nodeBill
		running        bool
	}
	groups := map[string]*group{}
	for _, n := range exp {
		k := n.cluster + "/" + n.class
		if groups[k] == nil {
			groups[k] = &group{cluster: n.cluster, class: n.class}
		}
		groups[k].nodes = append(groups[k].nodes, n)
		groups[k].running = groups[k].running || n.stop.IsZero()
	}
	var cutEnd int64
	for _, l := range inv.Lines {
		if g := groups[l.ClusterID+"/"+l.ComputeClass]; g != nil && g.running {
			if e := l.End.Unix(); e < tBefore.Unix()-1 || e > tAfter.Unix()+1 {
				t.Errorf("%s: line %s/%s holds running nodes but ends at %s; the invoice was generated between %s and %s (simulated)",
					where, l.ClusterName, l.ComputeClass, l.End.Format(time.RFC3339), tBefore.Format(time.RFC3339Nano), tAfter.Format(time.RFC3339Nano))
			} else if cutEnd != 0 && cutEnd != e {
				t.Errorf("%s: running nodes end at different seconds (%d, %d) in one invoice", where, cutEnd, e)
			} else {
				cutEnd = e
			}
		}
	}
	if cutEnd == 0 {
		cutEnd = tAfter.Unix()
	}
	seen := map[string]bool{}
	amt, od, gs := new(big.Rat), new(big.Rat), int64(0)
	cls := map[string]*[3]any{"standard": {new(big.Rat), new(big.Rat), int64(0)}, "preemptible": {new(big.Rat), new(big.Rat), int64(0)}}
	for _, l := range inv.Lines {
		k := l.ClusterID + "/" + l.ComputeClass
		g := groups[k]
		if g == nil || seen[k] {
			t.Errorf("%s: unexpected or repeated line for cluster %s class %s: %+v", where, l.ClusterID, l.ComputeClass, l)
			continue
		}
		seen[k] = true
		var secs, gsecs int64
		ga, gon := new(big.Rat), new(big.Rat)
		for _, n := range g.nodes {
			s, e := n.expectedSeconds(mFrom, mTo, cutEnd)
			secs += e - s
			gsecs += (e - s) * int64(n.gpus)
			a, o := lineMoney(n.class, (e-s)*int64(n.gpus))
			ga.Add(ga, a)
			gon.Add(gon, o)
		}
		if l.BilledSeconds != secs || l.GPUSeconds != gsecs || !sameAmount(l.Amount, roundHalfEven(ga, 6)) || !sameAmount(l.OnDemandAmount, roundHalfEven(gon, 6)) {
			t.Errorf("%s: line %s/%s bills %d s, %d GPU-s, $%s (on demand $%s); the events imply %d s, %d GPU-s, $%s (on demand $%s) with running nodes cut at %s",
				where, l.ClusterName, l.ComputeClass, l.BilledSeconds, l.GPUSeconds, l.Amount, l.OnDemandAmount, secs, gsecs,
				roundHalfEven(ga, 6).FloatString(6), roundHalfEven(gon, 6).FloatString(6), time.Unix(cutEnd, 0).UTC().Format(time.RFC3339))
		}
		amt.Add(amt, ga)
		od.Add(od, gon)
		gs += gsecs
		c := cls[l.ComputeClass]
		c[0].(*big.Rat).Add(c[0].(*big.Rat), ga)
		c[1].(*big.Rat).Add(c[1].(*big.Rat), gon)
		c[2] = c[2].(int64) + gsecs
	}
	for k, g := range groups {
		if seen[k] {
			continue
		}
		for _, n := range g.nodes {
			if s, e := n.expectedSeconds(mFrom, mTo, cutEnd); e > s {
				t.Errorf("%s: no line for cluster %s class %s, though node %s bills %d s in the month", where, g.cluster, g.class, n.name, e-s)
			}
		}
	}
	checkTotals(t, where+": total", inv.Total, amt, od, gs, notes)
	for class, v := range cls {
		checkTotals(t, where+": "+class+" subtotal", inv.ByClass[class], v[0].(*big.Rat), v[1].(*big.Rat), v[2].(int64), notes)
	}

	// The invoice equals the usage of the month: between the usage read
	// just before and just after it, and equal to both where nothing ran.
	between := func(what string, lo, x, hi string) {
		l, ok1 := decimal(lo)
		v, ok2 := decimal(x)
		h, ok3 := decimal(hi)
		if !ok1 || !ok2 || !ok3 || l.Cmp(v) > 0 || v.Cmp(h) > 0 {
			t.Errorf("%s: %s is %s; the usage of the month read just before and after says %s and %s", where, what, x, lo, hi)
		}
	}
	for _, p := range []struct {
		name      string
		a, inv, b apiv1.UsageTotals
	}{
		{"total", u1.usage.Totals, inv.Total, u2.usage.Totals},
		{"standard", u1.usage.ByClass["standard"], inv.ByClass["standard"], u2.usage.ByClass["standard"]},
		{"preemptible", u1.usage.ByClass["preemptible"], inv.ByClass["preemptible"], u2.usage.ByClass["preemptible"]},
	} {
		between(p.name+" GPU-seconds", strconv.FormatInt(p.a.GPUSeconds, 10), strconv.FormatInt(p.inv.GPUSeconds, 10), strconv.FormatInt(p.b.GPUSeconds, 10))
		between(p.name+" amount", p.a.Amount, p.inv.Amount, p.b.Amount)
		between(p.name+" on-demand equivalent", p.a.OnDemandEquivalent, p.inv.OnDemandEquivalent, p.b.OnDemandEquivalent)
		if p.a == p.b && p.inv != p.a {
			t.Errorf("%s: %s %+v; the usage of the month read just before and after is %+v", where, p.name, p.inv, p.a)
		}
	}
	running := false
	for _, n := range exp {
		running = running || n.stop.IsZero()
	}
	if !running && (inv.Total != u1.usage.Totals || inv.Total != u2.usage.Totals) {
		t.Errorf("%s: nothing runs, yet the invoice total %+v differs from the usage total %+v / %+v", where, inv.Total, u1.usage.Totals, u2.usage.Totals)
	}

	// -o csv: the lines, then TOTAL and SAVINGS.
	if rc.code != 0 {
		t.Errorf("%s: invoice -o csv: want exit 0: %s", where, rc)
		return
	}
	rows, err := csv.NewReader(strings.NewReader(rc.stdout)).ReadAll()
	if err != nil || len(rows) < 3 || rows[0][0] != "project_id" {
		t.Errorf("%s: invoice -o csv is not a CSV with a header, lines, TOTAL and SAVINGS (%v):\n%s", where, err, rc.stdout)
		return
	}
	total, savings := rows[len(rows)-2], rows[len(rows)-1]
	if total[0] != "TOTAL" || savings[0] != "SAVINGS" || len(total) != 17 || len(savings) != 17 {
		t.Errorf("%s: invoice -o csv does not end with the TOTAL and SAVINGS rows:\n%s", where, rc.stdout)
		return
	}
	if n := len(rows) - 3; n != len(inv.Lines) {
		t.Errorf("%s: invoice -o csv has %d lines, -o json %d:\n%s", where, n, len(inv.Lines), rc.stdout)
	}
	between("CSV TOTAL GPU-seconds", strconv.FormatInt(inv.Total.GPUSeconds, 10), total[12], strconv.FormatInt(u2.usage.Totals.GPUSeconds, 10))
	between("CSV TOTAL amount", inv.Total.Amount, total[15], u2.usage.Totals.Amount)
	between("CSV TOTAL on-demand", inv.Total.OnDemandEquivalent, total[16], u2.usage.Totals.OnDemandEquivalent)
	if inv.Total == u2.usage.Totals && (total[15] != inv.Total.Amount || savings[15] != inv.Total.Savings) {
		t.Errorf("%s: CSV TOTAL %v SAVINGS %v; the JSON invoice says %+v", where, total, savings, inv.Total)
	}
	t.Logf("%s: %d lines, total $%s (exact %s), on demand $%s, savings $%s, %d GPU-s; CSV TOTAL $%s",
		where, len(inv.Lines), inv.Total.Amount, inv.Total.AmountExact, inv.Total.OnDemandEquivalent, inv.Total.Savings, inv.Total.GPUSeconds, total[15])
}

// ---- /metrics ----

var (
	sampleRE = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)`)
	labelRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads the server's /metrics (Prometheus text format).
func scrape(t *testing.T, srv *server) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s\n%s", resp.Status, body)
	}
	return string(body)
}

// metricValue is the value of the sample of name whose labels include
// want.
func metricValue(body, name string, want map[string]string) (float64, bool) {
	for _, line := range strings.Split(body, "\n") {
		m := sampleRE.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		labels := map[string]string{}
		for _, l := range labelRE.FindAllStringSubmatch(m[2], -1) {
			labels[l[1]] = l[2]
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			v, err := strconv.ParseFloat(m[3], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// checkMetrics: the reclaim counter of the running process counts at
// least the PreemptionNotified events committed since it started (a
// restart resets counters), and the first cluster's target is 16.
func (b *billingRun) checkMetrics(t *testing.T, since time.Time) {
	t.Helper()
	body := scrape(t, b.srv)
	admin := b.client(adminToken)
	notices := 0
	for _, tn := range b.tenants {
		for _, id := range tn.clusters {
			evs, _ := allEvents(t, admin, id, "")
			for _, e := range evs {
				if e.Reason == "PreemptionNotified" && !e.Timestamp.Before(since) {
					notices++
				}
			}
		}
	}
	started, ok := metricValue(body, "sparecap_reclaims_started_total", map[string]string{"cause": "preempted"})
	if !ok {
		t.Errorf("/metrics has no sparecap_reclaims_started_total{cause=\"preempted\"}:\n%s", grepMetrics(body, "sparecap_reclaims"))
	} else if started < float64(notices) {
		t.Errorf("/metrics: sparecap_reclaims_started_total{cause=\"preempted\"} = %v, but %d PreemptionNotified events were committed since server #%d started (simulated %s)",
			started, notices, b.srv.n, since.Format(time.RFC3339Nano))
	}
	desired, ok := metricValue(body, "sparecap_cluster_desired_preemptible_gpus", map[string]string{"cluster_id": b.firstID})
	if !ok || desired != 16 {
		t.Errorf("/metrics: sparecap_cluster_desired_preemptible_gpus{cluster_id=%q} = %v (present %v), want 16:\n%s", b.firstID, desired, ok,
			grepMetrics(body, "sparecap_cluster_desired_preemptible_gpus"))
	}
	t.Logf("/metrics of server #%d: reclaims_started_total{cause=preempted} %v >= %d PreemptionNotified since its start; desired preemptible GPUs of %s = %v",
		b.srv.n, started, notices, b.firstID, desired)
}

func grepMetrics(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// ---- the phase ----

// run is the billing part of the crash scenario, once the drains have
// settled on server #2. It returns the server left running.
func (b *billingRun) run(t *testing.T) *server {
	t.Helper()
	phaseStart := time.Now()
	notes := &moneyNotes{}
	srv2Since := b.startedAt

	// 1. Invoice consistency across the first crash.
	lines1, exp1 := b.checkAll(t, "after the first restart", notes)
	var finished []string
	for _, n := range exp1 {
		if !n.stop.IsZero() {
			finished = append(finished, fmt.Sprintf("%s(%s,%s)", n.name, n.class, n.stopBy))
		}
	}
	sort.Strings(finished)
	t.Logf("usage matches the lifecycle events for %d nodes (%d billed lines); finished: %s", len(exp1), len(lines1), strings.Join(finished, " "))
	if len(finished) < 2 {
		t.Errorf("only %d finished nodes to check the billing of; want at least the two reclaimed preemptible nodes", len(finished))
	}
	b.checkMetrics(t, srv2Since)

	// 2. SIGKILL while usage is being metered: tenants query usage (each
	// query cuts records in a write transaction) and invoices, and the
	// server is killed 50-400ms after the first of those queries.
	restartCfg := b.cfg
	var queries atomic.Int64
	first := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	var wg sync.WaitGroup
	to := b.anchor.Now().Add(time.Hour).Truncate(time.Second)
	for i, tn := range b.tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := b.client(tn.token)
			for k := 0; ; k++ {
				select {
				case <-done:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				var err error
				if k%3 == 2 {
					_, err = c.Invoice(ctx, "", b.anchor.Now().UTC().Format("2006-01"))
				} else {
					_, err = c.Usage(ctx, client.UsageQuery{ClusterID: tn.clusters[k%len(tn.clusters)], From: b.runFrom, To: to, GroupBy: []string{"node", "cluster"}[(i+k)%2]})
				}
				cancel()
				once.Do(func() { close(first) })
				if err == nil {
					queries.Add(1)
				}
			}
		}()
	}
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatalf("no usage query returned within 10s")
	}
	delay := 50*time.Millisecond + rand.N(350*time.Millisecond)
	time.Sleep(delay)
	b.srv.kill()
	close(done)
	wg.Wait()
	t.Logf("server #%d SIGKILLed %s after the first of %d concurrent usage and invoice queries that succeeded", b.srv.n, delay.Round(time.Millisecond), queries.Load())
	restarted := b.anchor.Now()
	b.srv = startServer(t, restartCfg)
	b.anchor = b.srv.anchor(t)

	lines2, exp2 := b.checkAll(t, "after the SIGKILL during metering", notes)
	compareFinished(t, "across the SIGKILL during metering", lines1, lines2, exp1)
	month := b.anchor.Now().UTC().Format("2006-01")
	for _, tn := range b.tenants {
		b.checkInvoice(t, tn, month, notes)
	}

	// 4. Bad usage input, through the CLI against the real binary.
	a, bb := b.tenants[0], b.tenants[1]
	if r := cli(t, b.srv, a.token, "usage", "--from", "2026-11-10T00:00:00Z", "--to", "2026-11-01T00:00:00Z"); r.code == 0 || !strings.Contains(r.stderr, "reversed") {
		t.Errorf("usage with --to before --from: want a non-zero exit saying the period is reversed: %s", r)
	}
	if r := cli(t, b.srv, bb.token, "usage", "--cluster", b.firstID); r.code == 0 || !strings.Contains(r.stderr, "not found") || strings.Contains(r.stdout, b.firstID) {
		t.Errorf("usage --cluster <another project's cluster>: want a non-zero exit saying not found, and nothing shown: %s", r)
	}

	// 3. A reclaim after the last restart, so the counter has something
	// to count: team-b gives back a machine (a scale-down drain of a
	// standard node), team-a's unmet preemptible target takes it, and
	// team-b asks for it again, which reclaims that preemptible node.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tenantA, tenantB := b.client(a.token), b.client(bb.token)
	preBurst, err := tenantB.GetCluster(ctx, b.burstID)
	if err != nil {
		t.Fatal(err)
	}
	eight, sixteen := 8, 16
	if _, err := tenantB.UpdateCluster(ctx, b.burstID, apiv1.UpdateClusterRequest{NumGPUs: &eight}); err != nil {
		t.Fatalf("team-b scales its cluster down to 8 GPUs: %v", err)
	}
	var profiles []string
	for _, n := range preBurst.GPUWorkerNodes {
		p, _ := sim.DefaultPods(crashSeed, b.burstID, n.NodeName)
		profiles = append(profiles, n.NodeName+"="+p)
	}
	scaleStart := time.Now()
	clA := waitCluster(t, tenantA, b.firstID, 25*time.Second, "a ready preemptible node on the machine team-b gave back", func(c *apiv1.Cluster) bool {
		return countNodes(c, "preemptible", "ready") == 1
	})
	t.Logf("team-b's scale-down (pod profiles %s) freed a machine for team-a's preemptible node in %s", strings.Join(profiles, ", "), time.Since(scaleStart).Round(time.Millisecond))
	var newNode string
	for _, n := range clA.GPUWorkerNodes {
		if n.ComputeClass == "preemptible" && n.Status == "ready" {
			newNode = n.NodeID
		}
	}
	if _, err := tenantB.UpdateCluster(ctx, b.burstID, apiv1.UpdateClusterRequest{NumGPUs: &sixteen}); err != nil {
		t.Fatalf("team-b scales its cluster back up to 16 GPUs: %v", err)
	}
	admin := b.client(adminToken)
	for deadline := time.Now().Add(10 * time.Second); ; {
		evs, _ := allEvents(t, admin, b.firstID, "")
		if slices.ContainsFunc(evs, func(e apiv1.Event) bool { return e.Reason == "PreemptionNotified" && e.NodeID == newNode }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("team-a's preemptible node %s was not reclaimed within 10s of team-b asking for 16 GPUs again; events: %s", newNode, reasons(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.checkMetrics(t, restarted)
	lines3, exp3 := b.checkAll(t, "after a reclaim on the restarted server", notes)
	compareFinished(t, "since the SIGKILL during metering", lines2, lines3, exp2)
	var kinds []string
	for _, n := range exp3 {
		if !n.stop.IsZero() {
			kinds = append(kinds, fmt.Sprintf("%s/%s/tenant=%v", n.class, n.stopBy, n.tenantDrain))
		}
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	t.Logf("finished node kinds checked: %s", strings.Join(kinds, ", "))
	for _, want := range []string{"preemptible/PreemptionNotified/tenant=false", "standard/NodeRemoved/tenant=true"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("no finished node of kind %s was checked", want)
		}
	}
	for _, tn := range b.tenants {
		b.checkInvoice(t, tn, month, notes)
	}

	// Displayed amounts are each rounded from exact values, so the
	// relations between them hold to the rounding only; how often that
	// showed is logged.
	var half, sav []string
	for _, n := range notes.notes {
		if strings.HasPrefix(n, "preemptible line") {
			half = append(half, n)
		} else {
			sav = append(sav, n)
		}
	}
	for _, g := range [][]string{half, sav} {
		if len(g) > 0 {
			t.Logf("NOTE (rounding, not a failure): %d times, e.g. %s", len(g), g[0])
		}
	}
	t.Logf("billing phase took %s", time.Since(phaseStart).Round(time.Millisecond))
	return b.srv
}
