package api

import (
	"context"
	"errors"

	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// MaxBudgets bounds a project's budgets: each is checked after every
// metering pass.
const MaxBudgets = 20

// defaultThresholds are a budget's alert thresholds unless it names some.
var defaultThresholds = []int{50, 80, 100}

// labelValue is a Kubernetes label value.
var labelValue = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$`)

// budgetWrite runs h, a write of a project's budgets, once the project's
// budget writes (BudgetWrites) allow one more; else 429 with Retry-After.
// A budget deleted and created again is a new budget: without a limit a
// project could write them, and have them checked, as fast as it asks.
// An operator's writes are not limited.
func (s *Server) budgetWrite(h handler) handler {
	return func(w http.ResponseWriter, r *http.Request, p principal) {
		if !p.admin {
			if err := allowOne(w, s.BudgetWrites, p.project, "writing budgets faster than it may (creating or deleting one)"); err != nil {
				s.fail(w, r, err)
				return
			}
		}
		h(w, r, p)
	}
}

// budgetProject is whose budgets the caller means: a project token's own;
// the admin names one with ?project_id= (required to create).
func (s *Server) budgetProject(ctx context.Context, r *http.Request, p principal, required bool) (string, error) {
	q := r.URL.Query().Get("project_id")
	switch {
	case !p.admin && q != "" && q != p.project:
		return "", notFound("project %q not found", boundQuery(q))
	case !p.admin:
		return p.project, nil
	case q == "" && required:
		return "", invalid("project_id", "project_id is required with the admin token: a budget is a project's")
	case q != "":
		return q, projectExists(ctx, s.store, q)
	}
	return "", nil
}

// checkBudget checks a request and returns the budget it makes.
func checkBudget(req apiv1.CreateBudgetRequest) (domain.Budget, error) {
	b := domain.Budget{Name: req.Name, Amount: req.Amount, Label: req.Label, Thresholds: req.Thresholds, ChangePercent: req.ChangePercent}
	if err := checkEndpointName(req.Name); err != nil {
		return b, err
	}
	micros, err := billing.ParseRate(req.Amount)
	if err != nil || micros == 0 || micros > 1e9*billing.MicrosPerDollar {
		return b, invalid("amount", "amount %s is not a monthly budget in dollars between 0.000001 and 1000000000, like 5000 or 1250.50", quoteShort(req.Amount))
	}
	b.Amount = billing.FormatRate(micros)
	if req.Label != "" {
		k, v, ok := strings.Cut(req.Label, "=")
		if !ok || !labelKey.MatchString(k) || !labelValue.MatchString(v) {
			return b, invalid("label", "label %s is not key=value of a label, like team=vision", quoteShort(req.Label))
		}
	}
	if len(b.Thresholds) == 0 {
		b.Thresholds = defaultThresholds
	}
	if len(b.Thresholds) > 10 {
		return b, invalid("thresholds", "give at most 10 thresholds; got %d", len(b.Thresholds))
	}
	for _, t := range b.Thresholds {
		if t < 1 || t > 1000 {
			return b, invalid("thresholds", "a threshold is a percentage of the budget from 1 to 1000; got %d", t)
		}
	}
	b.Thresholds = slices.Compact(slices.Sorted(slices.Values(b.Thresholds)))
	if b.ChangePercent < 0 || b.ChangePercent > 10000 {
		return b, invalid("change_percent", "change_percent is from 0 (no change alert) to 10000; got %d", b.ChangePercent)
	}
	return b, nil
}

func (s *Server) createBudget(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := s.budgetProject(ctx, r, p, true)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req apiv1.CreateBudgetRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := checkBudget(req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	b.ID, b.ProjectID, b.CreatedAt = s.ctrl.NewID("bg-"), project, s.clock.Now().UTC().Truncate(1e9)
	if err := s.admitStorage(ctx, project, budgetBytes(b)); err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		have, err := tx.ListBudgets(ctx, project)
		if err != nil {
			return err
		}
		if len(have) >= MaxBudgets {
			return conflict("project %s has %d budgets, the most a project may have; delete one first", project, len(have))
		}
		for _, o := range have {
			if o.Name == b.Name {
				return conflict("project %s has a budget named %s already", project, b.Name)
			}
		}
		return tx.CreateBudget(ctx, b)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	views, err := s.budgetViews(ctx, []domain.Budget{b})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, views[0])
}

func (s *Server) listBudgets(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := s.budgetProject(ctx, r, p, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	bs, err := s.store.ListBudgets(ctx, project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	views, err := s.budgetViews(ctx, bs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.BudgetList{Budgets: views}
	writeJSON(w, http.StatusOK, out)
}

// budgetViews are the budgets with their month so far: after a cut of
// fresh usage records, as usage queries make, priced by the book.
func (s *Server) budgetViews(ctx context.Context, bs []domain.Budget) ([]apiv1.Budget, error) {
	if s.Meter != nil {
		if err := s.Meter.Cut(ctx); err != nil {
			return nil, err
		}
	}
	book, err := s.book(ctx)
	if err != nil {
		return nil, err
	}
	out := []apiv1.Budget{}
	for _, b := range bs {
		v, err := s.budgetView(ctx, book, b)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// budgetView is b with its month so far, as the checker sees it.
func (s *Server) budgetView(ctx context.Context, book *billing.Book, b domain.Budget) (apiv1.Budget, error) {
	now := s.clock.Now().UTC()
	st, err := budget.StatusAt(ctx, s.store, book, b, now)
	if err != nil {
		return apiv1.Budget{}, err
	}
	amount, _ := strconv.ParseFloat(b.Amount, 64)
	v := apiv1.Budget{ID: b.ID, ProjectID: b.ProjectID, Name: b.Name, Label: b.Label, Amount: b.Amount, Thresholds: b.Thresholds,
		ChangePercent: b.ChangePercent, CreatedAt: b.CreatedAt, Month: now.Format("2006-01"), Spend: cents(st.Spend),
		Forecast: cents(st.Forecast), Note: st.Note}
	if amount > 0 {
		v.SpentPercent = float64(int(st.Spend/amount*1000+0.5)) / 10
	}
	if st.Interval {
		v.ForecastLow, v.ForecastHigh = cents(st.Low), cents(st.High)
	}
	return v, nil
}

func cents(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func (s *Server) deleteBudget(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := s.budgetProject(ctx, r, p, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	id := r.PathValue("id")
	err = s.store.Update(ctx, func(tx store.Tx) error {
		bs, err := tx.ListBudgets(ctx, project)
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(bs, func(b domain.Budget) bool { return b.ID == id }) {
			return notFound("budget %q not found", boundQuery(id))
		}
		return tx.DeleteBudget(ctx, id)
	})
	if errors.Is(err, domain.ErrNotFound) {
		err = notFound("budget %q not found", boundQuery(id))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// budgetAlerts serves GET /v1/budgets/alerts: the alerts raised, oldest
// first, of a month (?month=2026-11) or all, at most 1000.
func (s *Server) budgetAlerts(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := s.budgetProject(ctx, r, p, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f, err := alertFilter(r.URL.Query())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	f.ProjectID = project
	as, err := s.store.ListBudgetAlerts(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.BudgetAlerts{Alerts: []apiv1.BudgetAlert{}}
	for _, a := range as {
		out.Alerts = append(out.Alerts, apiv1.BudgetAlert{Seq: a.Seq, BudgetID: a.BudgetID, ProjectID: a.ProjectID, Name: a.Name,
			Kind: a.Kind, Threshold: a.Threshold, Month: a.Month, At: a.At, Spend: a.Spend, Forecast: a.Forecast, Message: a.Message})
	}
	if len(as) == f.Limit {
		out.NextCursor = strconv.FormatInt(as[len(as)-1].Seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// maxAlerts is the most alerts one listing returns.
const maxAlerts = 1000

// alertFilter reads GET /v1/budgets/alerts' query: month, order (oldest,
// the default, or newest first), cursor (the next_cursor of the page
// before: alerts after it in that order) and limit (1 to maxAlerts).
func alertFilter(q url.Values) (store.BudgetAlertFilter, error) {
	f := store.BudgetAlertFilter{Month: q.Get("month"), Limit: maxAlerts}
	if f.Month != "" {
		if err := checkMonth(f.Month); err != nil {
			return f, err
		}
	}
	switch o := q.Get("order"); o {
	case "", "oldest":
	case "newest":
		f.Newest = true
	default:
		return f, invalid("order", "order must be oldest or newest; got %q", echo(o))
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAlerts {
			return f, invalid("limit", "limit must be between 1 and %d; got %q", maxAlerts, echo(v))
		}
		f.Limit = n
	}
	if v := q.Get("cursor"); v != "" {
		seq, err := strconv.ParseInt(v, 10, 64)
		if err != nil || seq < 1 {
			return f, invalid("cursor", "cursor %q is not one this API returned", echo(v))
		}
		if f.Newest {
			f.BeforeSeq = seq
		} else {
			f.AfterSeq = seq
		}
	}
	return f, nil
}

var monthRE = regexp.MustCompile(`^(20[0-9]{2})-(0[1-9]|1[0-2])$`)

// checkMonth checks a month like 2026-11.
func checkMonth(m string) error {
	if !monthRE.MatchString(m) {
		return invalid("month", "month %s is not a month like 2026-11", quoteShort(m))
	}
	return nil
}
