package api

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/budget"
	"github.com/sparecap/sparecap/internal/guard"
)

func TestBudgets(t *testing.T) {
	e, _, _ := usageWorld(t)
	var b apiv1.Budget
	e.do("p", "POST", "/v1/budgets", `{"name":"ml","amount":"20.5","thresholds":[80,50,80]}`, 201, &b)
	if b.ID == "" || b.ProjectID != "p" || b.Amount != "20.50" || len(b.Thresholds) != 2 || b.Thresholds[0] != 50 ||
		b.Month != e.clk.Now().UTC().Format("2006-01") {
		t.Fatalf("created %+v", b)
	}
	// On the server's clock, which a server with --speed runs ahead of
	// the wall clock (the test's is 2026-11-30).
	if want := e.clk.Now().UTC().Truncate(time.Second); !b.CreatedAt.Equal(want) {
		t.Fatalf("created_at %v, the server's clock reads %v", b.CreatedAt, want)
	}
	// Three 8-GPU nodes for about an hour: $0.89 a GPU-hour standard,
	// half that preemptible.
	spend := b.Spend
	if spend == "0.00" || b.SpentPercent <= 0 {
		t.Fatalf("no spend: %+v", b)
	}
	e.do("p", "POST", "/v1/budgets", `{"name":"vision","amount":"100","label":"team=vision","change_percent":50}`, 201, nil)
	var list apiv1.BudgetList
	e.do("p", "GET", "/v1/budgets", "", 200, &list)
	if len(list.Budgets) != 2 || list.Budgets[0].Name != "ml" || list.Budgets[1].Spend != "0.00" || list.Budgets[0].Spend != spend {
		t.Fatalf("list %+v", list)
	}
	e.do("q", "GET", "/v1/budgets", "", 200, &list)
	if len(list.Budgets) != 0 {
		t.Fatalf("q sees p's budgets: %+v", list)
	}
	for _, c := range []struct{ body, field string }{
		{`{"name":"x","amount":"0"}`, "amount"},
		{`{"name":"x","amount":"1.0000001"}`, "amount"},
		{`{"name":"x","amount":"lots"}`, "amount"},
		{`{"name":"bad name","amount":"1"}`, "name"},
		{`{"name":"x","amount":"1","label":"team"}`, "label"},
		{`{"name":"x","amount":"1","label":"te am=x"}`, "label"},
		{`{"name":"x","amount":"1","thresholds":[0]}`, "thresholds"},
		{`{"name":"x","amount":"1","change_percent":-1}`, "change_percent"},
		{`{"name":"x","amount":"1","extra":1}`, ""},
	} {
		got := e.apiErr("p", "POST", "/v1/budgets", c.body, 400)
		if c.field != "" && got.Field != c.field {
			t.Errorf("%s: %+v", c.body, got)
		}
	}
	if got := e.apiErr("p", "POST", "/v1/budgets", `{"name":"ml","amount":"1"}`, 409); !strings.Contains(got.Message, "ml") {
		t.Errorf("a taken name: %+v", got)
	}
	e.apiErr("admin", "POST", "/v1/budgets", `{"name":"x","amount":"1"}`, 400)
	e.do("admin", "POST", "/v1/budgets?project_id=q", `{"name":"x","amount":"1"}`, 201, nil)
	e.apiErr("q", "DELETE", "/v1/budgets/"+b.ID, "", 404)
	e.do("p", "DELETE", "/v1/budgets/"+b.ID, "", 204, nil)
	e.apiErr("p", "DELETE", "/v1/budgets/"+b.ID, "", 404)

	// An alert the checker raised is listed, by month.
	book, _ := e.api.book(e.ctx)
	c := &budget.Checker{Store: e.st}
	e.do("p", "POST", "/v1/budgets", `{"name":"tiny","amount":"0.01","thresholds":[100]}`, 201, nil)
	if err := c.Check(e.ctx, book, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	var alerts apiv1.BudgetAlerts
	e.do("p", "GET", "/v1/budgets/alerts?month="+e.clk.Now().UTC().Format("2006-01"), "", 200, &alerts)
	if len(alerts.Alerts) != 2 || alerts.Alerts[0].Name != "tiny" || alerts.Alerts[0].Kind != "spend" {
		t.Fatalf("alerts %+v", alerts)
	}
	e.do("q", "GET", "/v1/budgets/alerts", "", 200, &alerts)
	if len(alerts.Alerts) != 0 {
		t.Fatalf("q sees p's alerts: %+v", alerts)
	}
	e.apiErr("p", "GET", "/v1/budgets/alerts?month=2026-13", "", 400)
}

// TestBudgetAlertPages: alerts list oldest first by default, newest first
// with order=newest, a page at a time with limit and next_cursor; bad
// parameters are refused.
func TestBudgetAlertPages(t *testing.T) {
	e, _, _ := usageWorld(t)
	book, _ := e.api.book(e.ctx)
	c := &budget.Checker{Store: e.st}
	e.do("p", "POST", "/v1/budgets", `{"name":"tiny","amount":"0.01","thresholds":[10,20,30,40,50]}`, 201, nil)
	if err := c.Check(e.ctx, book, e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	page := func(query string) apiv1.BudgetAlerts {
		t.Helper()
		var out apiv1.BudgetAlerts
		e.do("p", "GET", "/v1/budgets/alerts"+query, "", 200, &out)
		return out
	}
	all := page("")
	if len(all.Alerts) != 6 || all.NextCursor != "" {
		t.Fatalf("all: %+v", all)
	}
	for _, order := range []string{"oldest", "newest"} {
		var got []int64
		cursor := ""
		for range 4 {
			p := page("?order=" + order + "&limit=4&cursor=" + cursor)
			for _, a := range p.Alerts {
				got = append(got, a.Seq)
			}
			if cursor = p.NextCursor; cursor == "" {
				break
			}
		}
		if len(got) != 6 {
			t.Fatalf("%s: %v", order, got)
		}
		for i := range got {
			want := all.Alerts[i].Seq
			if order == "newest" {
				want = all.Alerts[5-i].Seq
			}
			if got[i] != want {
				t.Errorf("%s: %v, want the alerts %v in that order", order, got, all.Alerts)
				break
			}
		}
	}
	for _, q := range []string{"?order=sideways", "?limit=0", "?limit=1001", "?cursor=x", "?cursor=-1"} {
		e.apiErr("p", "GET", "/v1/budgets/alerts"+q, "", 400)
	}
}

// TestBudgetWritesAreLimited: a project creates or deletes budgets at most
// as fast as BudgetWrites lets it (429 with Retry-After, nothing written);
// an operator is not limited.
func TestBudgetWritesAreLimited(t *testing.T) {
	e, _, _ := usageWorld(t)
	e.api.BudgetWrites = guard.NewLimiter(3.0/60, 3)
	for i := range 3 {
		e.do("p", "POST", "/v1/budgets", fmt.Sprintf(`{"name":"b%d","amount":"1"}`, i), 201, nil)
	}
	got := e.apiErr("p", "POST", "/v1/budgets", `{"name":"b3","amount":"1"}`, 429)
	if !strings.Contains(got.Message, "writing budgets faster") {
		t.Errorf("429: %+v", got)
	}
	req, _ := http.NewRequest("POST", e.srv.URL+"/v1/budgets", strings.NewReader(`{"name":"b3","amount":"1"}`))
	req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a refused budget write: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	var list apiv1.BudgetList
	e.do("p", "GET", "/v1/budgets", "", 200, &list)
	if len(list.Budgets) != 3 {
		t.Fatalf("%d budgets after a refused create", len(list.Budgets))
	}
	e.apiErr("p", "DELETE", "/v1/budgets/"+list.Budgets[0].ID, "", 429)
	e.do("q", "POST", "/v1/budgets", `{"name":"b0","amount":"1"}`, 201, nil)
	for i := range 5 {
		e.do("admin", "POST", "/v1/budgets?project_id=p", fmt.Sprintf(`{"name":"op%d","amount":"1"}`, i), 201, nil)
	}
}
