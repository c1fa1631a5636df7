package budget

import (
	"context"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Status is a budget's month at an instant.
type Status struct {
	Budget domain.Budget
	Projection
	// Recent is the spend of the nine UTC days up to now's.
	Recent []float64
}

// StatusAt works out b's month at now: one read of its project's usage
// (and work spans, for a label budget) over the month and the nine days
// before now.
func StatusAt(ctx context.Context, r Reader, book *billing.Book, b domain.Budget, now time.Time) (Status, error) {
	w := windowAt(now)
	sp, err := spendOf(ctx, r, book, b.ProjectID, labelKey(b.Label), w.from, w.now)
	if err != nil {
		return Status{}, err
	}
	return w.status(b, sp.of(b.Label)), nil
}

// labelKey is the key of a budget's label ("" for the whole project).
func labelKey(label string) string {
	k, _, _ := strings.Cut(label, "=")
	return k
}

// checkWindow is what a check at now reads: the month, and the nine days
// before now for the change alert.
type checkWindow struct{ start, end, from, now time.Time }

func windowAt(now time.Time) checkWindow {
	now = now.UTC().Truncate(time.Second)
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	w := checkWindow{start: start, end: start.AddDate(0, 1, 0), from: start, now: now}
	if nine := now.Truncate(24*time.Hour).AddDate(0, 0, -8); nine.Before(w.from) {
		w.from = nine
	}
	return w
}

// status is b's month from its spend by hour over the window.
func (w checkWindow) status(b domain.Budget, hours []billing.Money) Status {
	f := make([]float64, len(hours))
	for i, h := range hours {
		v, _ := h.Rat().Float64()
		f[i] = v
	}
	off := int(w.start.Sub(w.from) / time.Hour)
	s := Status{Budget: b, Projection: Project(f[off:], w.start, w.end, w.now)}
	// The nine UTC days up to now's, for the change alert.
	for d := 0; d < 9; d++ {
		lo := len(f) - (w.now.Hour() + 1) - (8-d)*24
		var sum float64
		for i := max(lo, 0); i < min(lo+24, len(f)); i++ {
			sum += f[i]
		}
		s.Recent = append(s.Recent, sum)
	}
	return s
}

// Checker raises the alerts every budget is due, once each.
type Checker struct {
	Store store.Store
	// Queue, if set, queues the alerts' webhook messages in the
	// transaction that records them. It is given no time: the alerts
	// carry theirs (At, the server's clock); deliveries go by the wall
	// clock.
	Queue func(ctx context.Context, tx store.Tx, as []domain.BudgetAlert) error
	// Observe, if set, is told every budget's status after a check
	// (metrics); a budget whose status failed is left out.
	Observe func([]Status)
	// Raised, if set, is told each alert once recorded.
	Raised func(domain.BudgetAlert)
}

// Check checks every budget at now, priced by book. A budget that fails
// does not stop the others; the first error is returned.
func (c *Checker) Check(ctx context.Context, book *billing.Book, now time.Time) error {
	budgets, err := c.Store.ListBudgets(ctx, "")
	if err != nil {
		return err
	}
	// One read of a project's usage (and spans, for a label key) serves
	// all its budgets of that key.
	w := windowAt(now)
	type read struct {
		sp  *spend
		err error
	}
	reads := map[[2]string]read{}
	var first error
	var all []Status
	for _, b := range budgets {
		k := [2]string{b.ProjectID, labelKey(b.Label)}
		rd, ok := reads[k]
		if !ok {
			rd.sp, rd.err = spendOf(ctx, c.Store, book, b.ProjectID, k[1], w.from, w.now)
			reads[k] = rd
		}
		err := rd.err
		if err == nil {
			s := w.status(b, rd.sp.of(b.Label))
			if err = c.raise(ctx, b, s, now); err == nil {
				all = append(all, s)
			}
		}
		if err != nil && first == nil {
			first = err
		}
	}
	if c.Observe != nil {
		c.Observe(all)
	}
	return first
}

// raise records and queues the alerts s is due.
func (c *Checker) raise(ctx context.Context, b domain.Budget, s Status, now time.Time) error {
	month := now.UTC().Format("2006-01")
	// An alert is raised once per budget name, whatever the budget's ID.
	had, err := c.Store.ListBudgetAlerts(ctx, store.BudgetAlertFilter{ProjectID: b.ProjectID, Name: b.Name, Month: month})
	if err != nil {
		return err
	}
	fired := map[string]bool{}
	for _, a := range had {
		fired[a.Key] = true
	}
	due := Due(b, s.Projection, s.Recent, now, fired)
	if len(due) == 0 {
		return nil
	}
	err = c.Store.Update(ctx, func(tx store.Tx) error {
		if err := tx.AddBudgetAlerts(ctx, due); err != nil {
			return err
		}
		if c.Queue != nil {
			return c.Queue(ctx, tx, due)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, a := range due {
		if c.Raised != nil {
			c.Raised(a)
		}
	}
	return nil
}
