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

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/csvcell"
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
			return time.Time{}, invalid(name, "%s %q is not an RFC 3339 time like 2026-11-01T00:00:00Z", name, echo(v))
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
		return false, invalid("format", "format must be json or csv; got %q", echo(f))
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
	if !ok && !byWork && groupBy != "day" && groupBy != "gpu_type" {
		s.fail(w, r, invalid("group_by", "group_by must be node, cluster, compute_class, gpu_type, day, namespace, job, account, work or label:<key>; got %q", boundQuery(groupBy)))
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
	if groupBy == "node" || groupBy == "day" || groupBy == "gpu_type" {
		if err := s.checkRaw(ctx, from, false); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var pr priced
	switch groupBy {
	case "node":
		s.streamUsage(w, r, f, b, from, to, csvOut)
		return
	case "day":
		pr, err = s.dailyUsage(ctx, f, b, from, to)
	case "gpu_type":
		pr, err = s.typeUsage(ctx, f, b, from, to)
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
	head := usageColumns
	if work {
		head = append(slices.Clip(head), workColumns...)
	}
	cw.Write(head)
	return cw
}

func writeCSVLine(cw *csv.Writer, l apiv1.UsageLine, work bool) error {
	// Text cells may hold a tenant's text (a job's name, a label's value
	// in group): neutralised as formulas; numbers stay numbers.
	row := append(csvcell.Texts(l.ProjectID, l.ClusterID, l.ClusterName, l.NodeID, l.NodeName, l.ComputeClass, l.Region, l.GPUType),
		strconv.Itoa(l.GPUs), l.Start.Format(time.RFC3339), l.End.Format(time.RFC3339), strconv.FormatInt(l.BilledSeconds, 10),
		strconv.FormatInt(l.GPUSeconds, 10), l.RatePerGPUHour, l.OnDemandRatePerGPUHour, l.Amount, l.OnDemandAmount)
	if work {
		row = append(row, csvcell.Text(l.Group), csvBool(l.Idle))
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
			s.fail(w, r, invalid("month", "month %q is not a month like 2026-11 between 2000 and 2099", echo(m)))
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
