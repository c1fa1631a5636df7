package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func projectQuery(projectID string) url.Values {
	if projectID == "" {
		return nil
	}
	return url.Values{"project_id": {projectID}}
}

// Budgets lists a project's budgets with their month so far (projectID
// only with the admin token; empty: the caller's, or every project's).
func (c *Client) Budgets(ctx context.Context, projectID string) (*apiv1.BudgetList, error) {
	return call[apiv1.BudgetList](ctx, c, http.MethodGet, "/v1/budgets", projectQuery(projectID), nil)
}

// CreateBudget creates a budget.
func (c *Client) CreateBudget(ctx context.Context, projectID string, req apiv1.CreateBudgetRequest) (*apiv1.Budget, error) {
	return call[apiv1.Budget](ctx, c, http.MethodPost, "/v1/budgets", projectQuery(projectID), req)
}

// DeleteBudget deletes a budget.
func (c *Client) DeleteBudget(ctx context.Context, projectID, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/budgets/"+url.PathEscape(id), projectQuery(projectID), nil, nil)
}

// BudgetAlerts lists the alerts budgets raised, of a month ("2026-11") or
// all, oldest first.
func (c *Client) BudgetAlerts(ctx context.Context, projectID, month string) (*apiv1.BudgetAlerts, error) {
	return c.BudgetAlertsPage(ctx, projectID, BudgetAlertOptions{Month: month})
}

// BudgetAlertOptions select a page of budget alerts: of Month when set,
// newest first with Newest, after Cursor (a page's NextCursor), at most
// Limit (0: the server's most, 1,000).
type BudgetAlertOptions struct {
	Month, Cursor string
	Newest        bool
	Limit         int
}

// BudgetAlertsPage lists a page of the alerts budgets raised.
func (c *Client) BudgetAlertsPage(ctx context.Context, projectID string, o BudgetAlertOptions) (*apiv1.BudgetAlerts, error) {
	q := projectQuery(projectID)
	if q == nil {
		q = url.Values{}
	}
	if o.Month != "" {
		q.Set("month", o.Month)
	}
	if o.Newest {
		q.Set("order", "newest")
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	return call[apiv1.BudgetAlerts](ctx, c, http.MethodGet, "/v1/budgets/alerts", q, nil)
}

// Lending is the operator's view of [from, to) (admin token): GPU-hours
// lent out of idle and reserved capacity, revenue, reclaims and lost work
// per pool.
func (c *Client) Lending(ctx context.Context, from, to time.Time) (*apiv1.Lending, error) {
	q := url.Values{"from": {from.UTC().Format(time.RFC3339)}, "to": {to.UTC().Format(time.RFC3339)}}
	return call[apiv1.Lending](ctx, c, http.MethodGet, "/v1/admin/lending", q, nil)
}
