package console

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

type usagePage struct {
	From, To  time.Time
	Month     string
	Daily     *apiv1.Usage
	ByCluster *apiv1.Usage
	// ByWork is the month split among the work on the nodes, by Split
	// (namespace, job, account, work or label) and Label (its key).
	ByWork       *apiv1.Usage
	Split, Label string
	CSVURL       string
	WorkCSVURL   string
	// Budgets with their month so far, and the alerts of the month.
	Budgets *apiv1.BudgetList
	Alerts  *apiv1.BudgetAlerts
	// Lost is the month's lost-work ledger by job, next to the savings.
	Lost *apiv1.LostWork
}

// createBudget creates a budget from the usage page's form.
func (c *Console) createBudget(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	req := apiv1.CreateBudgetRequest{Name: r.PostFormValue("name"), Amount: r.PostFormValue("amount"), Label: r.PostFormValue("label")}
	if _, err := api.CreateBudget(r.Context(), "", req); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/usage?flash="+url.QueryEscape("Budget "+req.Name+" created"), http.StatusSeeOther)
}

// workSplits are the splits the usage page offers.
var workSplits = []string{"namespace", "job", "account", "work", "label"}

func (c *Console) usage(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	now := c.clock.Now().UTC()
	month := r.URL.Query().Get("month")
	from := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, time.UTC)
	if month != "" {
		t, err := time.Parse("2006-01", month)
		if err != nil {
			c.render(w, http.StatusBadRequest, "error", view{Title: "Bad month", Error: fmt.Sprintf("%q is not a month like 2026-11.", month)}, s)
			return
		}
		from = t
	}
	to := from.AddDate(0, 1, 0)
	q := client.UsageQuery{From: from, To: to, GroupBy: "day"}
	daily, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	q.GroupBy = "cluster"
	byCluster, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	split, label := cmp.Or(r.URL.Query().Get("split"), "namespace"), cmp.Or(r.URL.Query().Get("label"), "team")
	if !slices.Contains(workSplits, split) {
		c.render(w, http.StatusBadRequest, "error", view{Title: "Bad split", Error: "Split usage by namespace, job, account, work or label."}, s)
		return
	}
	q.GroupBy = split
	if split == "label" {
		q.GroupBy = "label:" + label
	}
	byWork, err := api.Usage(ctx, q)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	budgets, err := api.Budgets(ctx, "")
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	alerts, err := api.BudgetAlerts(ctx, "", from.Format("2006-01"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	lost, err := api.LostWork(ctx, client.UsageQuery{From: from, To: to, GroupBy: "job"})
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	csv := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}, "format": {"csv"}}
	workCSV := url.Values{"from": csv["from"], "to": csv["to"], "format": {"csv"}, "group_by": {q.GroupBy}}
	c.render(w, http.StatusOK, "usage", view{Title: "Usage and savings", Nav: "usage", Data: usagePage{From: from, To: to,
		Month: from.Format("2006-01"), Daily: daily, ByCluster: byCluster, ByWork: byWork, Split: split, Label: label,
		Budgets: budgets, Alerts: alerts, Lost: lost, CSVURL: "/v1/usage?" + csv.Encode(), WorkCSVURL: "/v1/usage?" + workCSV.Encode()}}, s)
}
