package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func TestBudgetsCommands(t *testing.T) {
	f := newFakeAPI(t)
	b := apiv1.Budget{ID: "bg-1", ProjectID: "p", Name: "vision", Label: "team=vision", Amount: "5000.00", Thresholds: []int{80, 100},
		Month: "2026-11", Spend: "4100.25", Forecast: "5200.00", ForecastLow: "5000.00", ForecastHigh: "5400.00", SpentPercent: 82}
	f.handle("POST /v1/budgets", 201, b)
	f.handle("GET /v1/budgets", 200, apiv1.BudgetList{Budgets: []apiv1.Budget{b}})
	f.handle("DELETE /v1/budgets/bg-1", 204, nil)
	f.handle("GET /v1/budgets/alerts", 200, apiv1.BudgetAlerts{Alerts: []apiv1.BudgetAlert{{Name: "vision", Kind: "spend",
		Threshold: 80, At: t0, Spend: "4000.10", Forecast: "5100.00", Message: "budget vision: $4000.10 spent this month, 80% of $5000.00"}}})
	r := f.run("budgets", "create", "vision", "--amount", "5000", "--label", "team=vision", "--threshold", "80", "--threshold", "100",
		"--change-percent", "50")
	if r.err != nil {
		t.Fatal(r.err)
	}
	body := fmt.Sprint(f.only("POST", "/v1/budgets")[0].Body)
	if body != "map[amount:5000 change_percent:50 label:team=vision name:vision thresholds:[80 100]]" {
		t.Errorf("request %s", body)
	}
	mustContain(t, "created", r.stdout, "bg-1", "$4100.25", "82.0", "$5000.00 to $5400.00", "80% 100%")
	r = f.run("budgets", "list")
	mustContain(t, "list", r.stdout, "vision", "team=vision", "$5200.00")
	r = f.run("budgets", "alerts", "--month", "2026-11")
	mustContain(t, "alerts", r.stdout, "spend", "$4000.10", "80% of $5000.00")
	if q := f.only("GET", "/v1/budgets/alerts")[0].Query; q != "month=2026-11" {
		t.Errorf("alerts query %q", q)
	}
	if r = f.run("budgets", "alerts", "--newest", "--limit", "20"); r.err != nil {
		t.Fatal(r.err)
	}
	if q := f.only("GET", "/v1/budgets/alerts")[1].Query; q != "limit=20&order=newest" {
		t.Errorf("newest alerts query %q", q)
	}
	if r = f.run("budgets", "delete", "bg-1"); r.err != nil || !strings.Contains(r.stdout, "deleted") {
		t.Fatalf("delete: %v %s", r.err, r.stdout)
	}
	for _, bad := range [][]string{{"budgets", "create", "x"}, {"budgets", "alerts", "--month", "november"},
		{"budgets", "alerts", "--limit", "1001"}, {"budgets", "delete"}} {
		if r := f.run(bad...); r.err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestStatsLendingCommand(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/admin/lending", 200, apiv1.Lending{Currency: "USD", From: t0, To: t0.AddDate(0, 1, 0),
		Pools:  []apiv1.LendingPool{{Region: "us-east-1", GPUType: "H100", LentIdleGPUHours: 120.5, LentReservedGPUHours: 40, PreemptibleRevenue: "240.10", StandardRevenue: "900.00", Revenue: "1140.10", Reclaims: 7, LostGPUHours: 3.5, LostValue: "5.23"}},
		Totals: apiv1.LendingPool{LentIdleGPUHours: 120.5, Revenue: "1140.10", Reclaims: 7}})
	r := f.run("stats", "lending", "--month", "2026-11")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "lending", r.stdout, "us-east-1", "120.5", "40.0", "240.10", "900.00", "7", "5.23", "total")
	if q := f.only("GET", "/v1/admin/lending")[0].Query; !strings.Contains(q, "from=2026-11-01") {
		t.Errorf("query %q", q)
	}
}
