package api

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Currency of every amount.
const Currency = "USD"

const rounding = "line amounts are rounded half to even to $0.000001; totals are exact sums rounded to $0.01"

// maxPeriod bounds a usage query.
const maxPeriod = 366 * 24 * time.Hour

var (
	earliest = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	latest   = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)
)

// period reads from and to: both required, RFC 3339, from < to, at most
// 366 days, within 2000–2100. Billing is by whole seconds, so fractions
// are dropped.
func period(q url.Values) (from, to time.Time, err error) {
	get := func(name string) (time.Time, error) {
		v := q.Get(name)
		if v == "" {
			return time.Time{}, invalid(name, "%s is required: a usage period has a start and an end (RFC 3339, e.g. 2026-11-01T00:00:00Z)", name)
		}
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return time.Time{}, invalid(name, "%s %q is not an RFC 3339 time like 2026-11-01T00:00:00Z", name, v)
		}
		if t.Before(earliest) || !t.Before(latest) {
			return time.Time{}, invalid(name, "%s %s is outside the years 2000 to 2099", name, v)
		}
		return t.UTC().Truncate(time.Second), nil
	}
	if from, err = get("from"); err != nil {
		return
	}
	if to, err = get("to"); err != nil {
		return
	}
	switch {
	case !from.Before(to):
		err = invalid("to", "the period is empty or reversed: to (%s) must be after from (%s)", to.Format(time.RFC3339), from.Format(time.RFC3339))
	case to.Sub(from) > maxPeriod:
		err = invalid("to", "the period is %d days long; ask for at most 366 days at a time", int(to.Sub(from).Hours()/24))
	}
	return
}

// usageScope resolves which project's usage the caller may read: a project
// token reads its own, the admin any (or all, with no project_id).
func (s *Server) usageScope(ctx context.Context, q url.Values, p principal) (store.UsageFilter, error) {
	f := store.UsageFilter{ProjectID: q.Get("project_id"), ClusterID: q.Get("cluster_id")}
	switch {
	case !p.admin && f.ProjectID != "" && f.ProjectID != p.project:
		return f, notFound("project %q not found", f.ProjectID)
	case !p.admin:
		f.ProjectID = p.project
	case f.ProjectID != "":
		if _, err := s.store.GetProject(ctx, f.ProjectID); errors.Is(err, domain.ErrNotFound) {
			return f, notFound("project %q not found", f.ProjectID)
		} else if err != nil {
			return f, err
		}
	}
	if f.ClusterID != "" {
		c, err := s.store.GetClusterRecord(ctx, f.ClusterID)
		if errors.Is(err, domain.ErrNotFound) || (err == nil && !p.sees(c.ProjectID)) ||
			(err == nil && f.ProjectID != "" && c.ProjectID != f.ProjectID) {
			return f, notFound("cluster %q not found", f.ClusterID)
		} else if err != nil {
			return f, err
		}
	}
	return f, nil
}

// dailyUsage prices each UTC day of the period on its own, one line per
// day and compute class: what charts of cost over time need. One pass over
// the records feeds the period's totals and the pricer of each day the
// record touches.
func (s *Server) dailyUsage(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time) (priced, error) {
	key := groupKeys["compute_class"]
	all := newPricer(b, from, to, key)
	first := from.Truncate(24 * time.Hour)
	const day = 24 * 3600
	var days []*pricer // by day from first; nil: no usage that day
	err := s.store.ScanUsage(ctx, f, func(r domain.UsageRecord) error {
		all.add(r)
		// The days whose [start, end) the record overlaps, as Book.Price
		// sees them (whole seconds); it skips the others.
		rs, re := max(r.Start.Unix(), from.Unix()), min(r.End.Unix(), to.Unix())
		if rs >= re {
			return nil
		}
		for i := (rs - first.Unix()) / day; i <= (re-1-first.Unix())/day; i++ {
			for int64(len(days)) <= i {
				days = append(days, nil)
			}
			if days[i] == nil {
				d := first.Add(time.Duration(i) * 24 * time.Hour)
				days[i] = newPricer(b, maxTime(d, from), minTime(d.Add(24*time.Hour), to), key)
			}
			days[i].add(r)
		}
		return nil
	})
	if err != nil {
		return priced{}, err
	}
	out := all.result()
	out.lines = nil
	for _, d := range days {
		if d == nil {
			continue
		}
		for _, l := range d.result().lines {
			l.Start, l.End = d.from, d.to
			l.ClusterID, l.ClusterName, l.NodeID, l.NodeName = "", "", "", ""
			out.lines = append(out.lines, l)
		}
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// usageInput is what usage and invoices share: it resolves whose usage
// the caller may read, cuts fresh records (when a meter is attached) and
// reads the price book, everything but the records themselves.
func (s *Server) usageInput(ctx context.Context, q url.Values, p principal, from, to time.Time) (store.UsageFilter, *billing.Book, error) {
	f, err := s.usageScope(ctx, q, p)
	if err != nil {
		return f, nil, err
	}
	f.From, f.To = from, to
	if s.Meter != nil {
		if err := s.Meter.Cut(ctx); err != nil {
			return f, nil, err
		}
	}
	b, err := s.book(ctx)
	if err != nil {
		return f, nil, err
	}
	return f, b, nil
}

// scanPriced prices the records of f over [from, to) grouped by key, in
// memory proportional to the groups, not the records.
func (s *Server) scanPriced(ctx context.Context, f store.UsageFilter, b *billing.Book, from, to time.Time, key func(*domain.UsageRecord) string) (priced, error) {
	pr := newPricer(b, from, to, key)
	if err := s.store.ScanUsage(ctx, f, pr.add); err != nil {
		return priced{}, err
	}
	return pr.result(), nil
}

func (s *Server) book(ctx context.Context) (*billing.Book, error) {
	prices, err := s.store.ListPrices(ctx)
	if err != nil {
		return nil, err
	}
	return billing.NewBook(prices)
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
	k := p.key(r)
	i, ok := p.groups[k]
	if !ok {
		p.groups[k] = len(out.lines)
		out.lines = append(out.lines, line)
		p.sums = append(p.sums, groupSum{l.Amount, l.OnDemand})
		return
	}
	p.sums[i].amount, p.sums[i].onDemand = p.sums[i].amount.Add(l.Amount), p.sums[i].onDemand.Add(l.OnDemand)
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

var groupKeys = map[string]func(*domain.UsageRecord) string{
	"node":          nil,
	"cluster":       func(r *domain.UsageRecord) string { return r.ClusterID + "/" + string(r.Class) },
	"compute_class": func(r *domain.UsageRecord) string { return string(r.Class) },
}

func wantCSV(r *http.Request) (bool, error) {
	switch f := r.URL.Query().Get("format"); f {
	case "", "json":
		return strings.Contains(r.Header.Get("Accept"), "text/csv"), nil
	case "csv":
		return true, nil
	default:
		return false, invalid("format", "format must be json or csv; got %q", f)
	}
}

func (s *Server) usage(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	from, to, err := period(q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	groupBy := q.Get("group_by")
	if groupBy == "" {
		groupBy = "node"
	}
	key, ok := groupKeys[groupBy]
	workKey, perCluster, byWork, err := workGroup(groupBy)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if !ok && !byWork && groupBy != "day" {
		s.fail(w, r, invalid("group_by", "group_by must be node, cluster, compute_class, day, namespace, job, account, work or label:<key>; got %q", boundQuery(groupBy)))
		return
	}
	csvOut, err := wantCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, b, err := s.usageInput(ctx, q, p, from, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var pr priced
	switch groupBy {
	case "node":
		s.streamUsage(w, r, f, b, from, to, csvOut)
		return
	case "day":
		pr, err = s.dailyUsage(ctx, f, b, from, to)
	default:
		if byWork {
			only := groupBy
			if only == "work" {
				only = "" // namespace and name
			}
			pr, err = s.splitUsage(ctx, f, b, from, to, workKey, perCluster, only)
			break
		}
		pr, err = s.scanPriced(ctx, f, b, from, to, key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.Usage{Currency: Currency, From: from, To: to, GroupBy: groupBy, LineItems: pr.lines,
		Totals: totalsView(pr.total), ByClass: byClassView(pr.byClass), Rounding: rounding}
	if out.LineItems == nil {
		out.LineItems = []apiv1.UsageLine{}
	}
	if csvOut {
		writeUsageCSV(w, usageCSVName(from, to), out.LineItems, out.Totals, byWork)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func usageCSVName(from, to time.Time) string {
	return fmt.Sprintf("usage-%s-%s.csv", from.Format("20060102T150405Z"), to.Format("20060102T150405Z"))
}

// writeUsageCSV writes a usage CSV; a split among the work on the nodes
// (work) has the columns group and idle last.
func writeUsageCSV(w http.ResponseWriter, name string, lines []apiv1.UsageLine, total apiv1.UsageTotals, work bool) {
	cw := startUsageCSV(w, name, work)
	for _, l := range lines {
		writeCSVLine(cw, l, work)
	}
	endUsageCSV(cw, total, work)
}

// startUsageCSV sends the headers and the header row of a usage CSV.
func startUsageCSV(w http.ResponseWriter, name string, work bool) *csv.Writer {
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	cw := csv.NewWriter(w)
	head := []string{"project_id", "cluster_id", "cluster_name", "node_id", "node_name", "compute_class", "region", "gpu_type",
		"gpus", "start", "end", "billed_seconds", "gpu_seconds", "rate_per_gpu_hour", "on_demand_rate_per_gpu_hour",
		"amount_usd", "on_demand_amount_usd"}
	if work {
		head = append(head, "group", "idle")
	}
	cw.Write(head)
	return cw
}

func writeCSVLine(cw *csv.Writer, l apiv1.UsageLine, work bool) error {
	row := []string{l.ProjectID, l.ClusterID, l.ClusterName, l.NodeID, l.NodeName, l.ComputeClass, l.Region, l.GPUType,
		strconv.Itoa(l.GPUs), l.Start.Format(time.RFC3339), l.End.Format(time.RFC3339), strconv.FormatInt(l.BilledSeconds, 10),
		strconv.FormatInt(l.GPUSeconds, 10), l.RatePerGPUHour, l.OnDemandRatePerGPUHour, l.Amount, l.OnDemandAmount}
	if work {
		row = append(row, l.Group, csvBool(l.Idle))
	}
	return cw.Write(row)
}

func csvBool(b bool) string {
	if b {
		return "true"
	}
	return ""
}

// endUsageCSV writes the total rows and flushes.
func endUsageCSV(cw *csv.Writer, total apiv1.UsageTotals, work bool) {
	totalRow := []string{"TOTAL", "", "", "", "", "", "", "", "", "", "", "", strconv.FormatInt(total.GPUSeconds, 10), "", "",
		total.Amount, total.OnDemandEquivalent}
	savingsRow := []string{"SAVINGS", "", "", "", "", "", "", "", "", "", "", "", "", "", "", total.Savings, ""}
	if work {
		totalRow, savingsRow = append(totalRow, "", ""), append(savingsRow, "", "")
	}
	cw.Write(totalRow)
	cw.Write(savingsRow)
	cw.Flush()
}

// invoice serves GET /v1/invoices: one project's usage for a month (or a
// from/to period) by cluster and compute class.
func (s *Server) invoice(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	var from, to time.Time
	var err error
	if m := q.Get("month"); m != "" {
		if q.Get("from") != "" || q.Get("to") != "" {
			s.fail(w, r, invalid("month", "give either month or from and to, not both"))
			return
		}
		start, perr := time.Parse("2006-01", m)
		if perr != nil || start.Before(earliest) || !start.Before(latest) {
			s.fail(w, r, invalid("month", "month %q is not a month like 2026-11 between 2000 and 2099", m))
			return
		}
		from, to = start, start.AddDate(0, 1, 0)
	} else if from, to, err = period(q); err != nil {
		s.fail(w, r, err)
		return
	}
	if p.admin && q.Get("project_id") == "" {
		s.fail(w, r, invalid("project_id", "project_id is required with the admin token: an invoice is a project's"))
		return
	}
	if q.Get("cluster_id") != "" {
		s.fail(w, r, invalid("cluster_id", "an invoice covers the whole project; use /v1/usage?cluster_id= for one cluster"))
		return
	}
	csvOut, err := wantCSV(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, b, err := s.usageInput(ctx, q, p, from, to)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	pr, err := s.scanPriced(ctx, f, b, from, to, groupKeys["cluster"])
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now()
	inv := apiv1.Invoice{ProjectID: f.ProjectID, Currency: Currency, From: from, To: to, Lines: pr.lines,
		ByClass: byClassView(pr.byClass), Total: totalsView(pr.total), GeneratedAt: now,
		PreemptibleDiscount: percent(b.DiscountBP(now.Unix()))}
	if inv.Lines == nil {
		inv.Lines = []apiv1.UsageLine{}
	}
	if csvOut {
		writeUsageCSV(w, fmt.Sprintf("invoice-%s-%s.csv", f.ProjectID, from.Format("2006-01-02")), inv.Lines, inv.Total, false)
		return
	}
	writeJSON(w, http.StatusOK, inv)
}

func percent(bp uint64) string {
	if bp%100 == 0 {
		return strconv.FormatUint(bp/100, 10)
	}
	return fmt.Sprintf("%d.%02d", bp/100, bp%100)
}

// rates serves GET /v1/prices: what each region and GPU type of the fleet
// costs per GPU-hour now, on demand and preemptible.
func (s *Server) rates(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	b, err := s.book(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now().Unix()
	disc := b.DiscountBP(now)
	out := apiv1.Rates{Currency: Currency, PreemptibleDiscountPercent: percent(disc), Rates: []apiv1.Rate{}}
	for _, a := range allocator.Available(allocator.Snapshot(snap), s.clock.Now(), allocator.Config{}) {
		rate := apiv1.Rate{Region: a.Region, GPUType: a.GPUType}
		if od, ok := b.OnDemandRate(a.Region, a.GPUType, now); ok {
			rate.OnDemand = billing.FormatRate(od)
			rate.Preemptible = billing.Line{RateMicros: od, FactorBP: billing.FullBP - disc}.EffectiveRate()
		}
		out.Rates = append(out.Rates, rate)
	}
	slices.SortFunc(out.Rates, func(a, b apiv1.Rate) int {
		return strings.Compare(a.Region+"/"+a.GPUType, b.Region+"/"+b.GPUType)
	})
	writeJSON(w, http.StatusOK, out)
}

func priceView(p domain.Price) apiv1.PriceEntry {
	return apiv1.PriceEntry{ID: p.ID, Kind: string(p.Kind), Region: p.Region, GPUType: p.GPUType, ReservationID: p.ReservationID,
		Value: p.Value, EffectiveFrom: p.EffectiveFrom, CreatedAt: p.CreatedAt}
}

func (s *Server) listPrices(w http.ResponseWriter, r *http.Request, _ principal) {
	ps, err := s.store.ListPrices(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.PriceBook{Prices: make([]apiv1.PriceEntry, 0, len(ps))}
	for _, p := range ps {
		out.Prices = append(out.Prices, priceView(p))
	}
	writeJSON(w, http.StatusOK, out)
}

// CheckPrice validates a price book entry.
func CheckPrice(p domain.Price) error {
	if err := checkNames(p.Region, p.GPUType); err != nil {
		return err
	}
	switch p.Kind {
	case domain.PriceOnDemand:
		if p.GPUType == "" {
			return invalid("gpu_type", "an on_demand price needs gpu_type")
		}
		if p.ReservationID != "" {
			return invalid("reservation_id", "an on_demand price has no reservation_id")
		}
		if _, err := billing.ParseRate(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	case domain.PriceReserved:
		if p.ReservationID == "" {
			return invalid("reservation_id", "a reserved price needs reservation_id")
		}
		if _, err := billing.ParseRate(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	case domain.PricePreemptibleDiscount:
		if p.Region != "" || p.GPUType != "" || p.ReservationID != "" {
			return invalid("kind", "the preemptible discount is the same for everyone: no region, gpu_type or reservation_id")
		}
		if _, err := billing.ParsePercent(p.Value); err != nil {
			return invalid("value", "%v", err)
		}
	default:
		return invalid("kind", "kind must be on_demand, reserved or preemptible_discount; got %q", p.Kind)
	}
	return nil
}

func (s *Server) createPrice(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	var req apiv1.CreatePriceRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now()
	// Usage is metered to the whole second before now, so the earliest a
	// price may take effect is the next whole second.
	ceil := func(t time.Time) time.Time {
		if u := t.Truncate(time.Second); u.Equal(t) {
			return u
		} else {
			return u.Add(time.Second)
		}
	}
	p := domain.Price{ID: s.ctrl.NewID("price-"), Kind: domain.PriceKind(req.Kind), Region: req.Region, GPUType: req.GPUType,
		ReservationID: req.ReservationID, Value: req.Value, EffectiveFrom: ceil(now), CreatedAt: now}
	if req.EffectiveFrom != nil {
		if req.EffectiveFrom.Before(now) {
			s.fail(w, r, invalid("effective_from", "effective_from %s is in the past: a price change never reprices usage already metered", req.EffectiveFrom.Format(time.RFC3339)))
			return
		}
		p.EffectiveFrom = ceil(req.EffectiveFrom.UTC())
	}
	if err := CheckPrice(p); err != nil {
		s.fail(w, r, err)
		return
	}
	err := s.store.Update(ctx, func(tx store.Tx) error {
		if p.Kind != domain.PriceReserved {
			return tx.CreatePrice(ctx, p)
		}
		rs, err := tx.ListReservations(ctx)
		if err != nil {
			return err
		}
		for _, res := range rs {
			if res.ID == p.ReservationID {
				p.Region, p.GPUType = res.Region, res.GPUType
				return tx.CreatePrice(ctx, p)
			}
		}
		return invalid("reservation_id", "unknown reservation %q", p.ReservationID)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, priceView(p))
}
