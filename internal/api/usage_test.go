package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func q(from, to time.Time, extra ...string) string {
	v := url.Values{"from": {from.Format(time.RFC3339)}, "to": {to.Format(time.RFC3339)}}
	for i := 0; i+1 < len(extra); i += 2 {
		v.Set(extra[i], extra[i+1])
	}
	return "?" + v.Encode()
}

// usageWorld: cluster train (8 standard + 16 preemptible) runs an hour.
func usageWorld(t *testing.T) (*env, apiv1.Cluster, time.Time) {
	e := newEnv(t)
	start := e.clk.Now()
	c := e.create("p", createBody)
	e.settle() // 40 × 5s: nodes are ready after 20s
	e.clk.Step(time.Hour - 200*time.Second)
	return e, c, start
}

func TestUsageOfARunningCluster(t *testing.T) {
	e, c, start := usageWorld(t)
	end := e.clk.Now()
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end), "", 200, &u)
	if u.Currency != "USD" || u.GroupBy != "node" || len(u.LineItems) != 3 {
		t.Fatalf("%+v", u)
	}
	var std, pre apiv1.UsageLine
	for _, l := range u.LineItems {
		if l.ClusterID != c.ClusterID || l.BilledSeconds <= 0 || !l.Priced {
			t.Fatalf("line %+v", l)
		}
		if l.ComputeClass == "standard" {
			std = l
		} else {
			pre = l
		}
	}
	if std.RatePerGPUHour != "0.89" || pre.RatePerGPUHour != "0.445" || pre.OnDemandRatePerGPUHour != "0.89" {
		t.Fatalf("rates std %s pre %s/%s", std.RatePerGPUHour, pre.RatePerGPUHour, pre.OnDemandRatePerGPUHour)
	}
	// Billed from ready to now, exactly.
	if std.BilledSeconds != int64(end.Sub(std.Start)/time.Second) || std.End != end {
		t.Fatalf("standard line %+v, want billed to %v", std, end)
	}
	pt := u.ByClass["preemptible"]
	if pt.Savings != pt.Amount || pt.OnDemandEquivalent == pt.Amount {
		t.Fatalf("preemptible at half price saves what it costs: %+v", pt)
	}
	if u.Totals.GPUSeconds != 3*8*std.BilledSeconds {
		t.Fatalf("totals %+v", u.Totals)
	}
	// Grouped views add up to the same totals.
	for _, g := range []string{"cluster", "compute_class"} {
		var gu apiv1.Usage
		e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", g), "", 200, &gu)
		if gu.Totals != u.Totals {
			t.Fatalf("group_by %s totals %+v, want %+v", g, gu.Totals, u.Totals)
		}
	}
	var byClass apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "compute_class"), "", 200, &byClass)
	if len(byClass.LineItems) != 2 || byClass.LineItems[0].ComputeClass != "preemptible" || byClass.LineItems[0].NodeID != "" || byClass.LineItems[0].GPUSeconds != 2*byClass.LineItems[1].GPUSeconds {
		t.Fatalf("%+v", byClass.LineItems)
	}
}

func TestUsageBadInput(t *testing.T) {
	e, c, start := usageWorld(t)
	end := e.clk.Now()
	for _, tc := range []struct {
		who, query, field string
		status            int
	}{
		{"p", "", "from", 400},
		{"p", "?from=" + url.QueryEscape(start.Format(time.RFC3339)), "to", 400},
		{"p", q(end, start), "to", 400},
		{"p", q(start, start), "to", 400},
		{"p", "?from=yesterday&to=today", "from", 400},
		{"p", q(start, start.Add(400*24*time.Hour)), "to", 400},
		{"p", q(time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), start), "from", 400},
		{"p", q(start, end, "group_by", "gpu"), "group_by", 400},
		{"p", q(start, end, "format", "xml"), "format", 400},
		{"q", q(start, end, "cluster_id", c.ClusterID), "", 404},
		{"p", q(start, end, "cluster_id", "c-nope"), "", 404},
		{"q", q(start, end, "project_id", "p"), "", 404},
		{"admin", q(start, end, "project_id", "ghost"), "", 404},
	} {
		resp := e.do(tc.who, "GET", "/v1/usage"+tc.query, "", tc.status, nil)
		var body apiv1.Error
		if err := jsonUnmarshal(resp, &body); err != nil || body.Error.Field != tc.field || body.Error.Message == "" {
			t.Errorf("%s %s: %s", tc.who, tc.query, resp)
		}
	}
	// q sees nothing of p's usage.
	var u apiv1.Usage
	e.do("q", "GET", "/v1/usage"+q(start, end), "", 200, &u)
	if len(u.LineItems) != 0 || u.Totals.Amount != "0.00" {
		t.Fatalf("q sees %+v", u)
	}
	// The admin sees everything.
	e.do("admin", "GET", "/v1/usage"+q(start, end), "", 200, &u)
	if len(u.LineItems) != 3 {
		t.Fatalf("admin sees %d lines", len(u.LineItems))
	}
}

func TestUsageCSVAndInvoice(t *testing.T) {
	e, c, start := usageWorld(t)
	end := e.clk.Now()
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/usage"+q(start, end, "format", "csv"), nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if resp.Header.Get("Content-Type") != "text/csv; charset=utf-8" || len(lines) != 6 ||
		!strings.HasPrefix(lines[0], "project_id,cluster_id") || !strings.HasPrefix(lines[4], "TOTAL") {
		t.Fatalf("csv %q:\n%s", resp.Header.Get("Content-Type"), body)
	}

	month := start.Format("2006-01")
	var inv apiv1.Invoice
	e.do("p", "GET", "/v1/invoices?month="+month, "", 200, &inv)
	if inv.ProjectID != "p" || len(inv.Lines) != 2 || inv.PreemptibleDiscount != "50" || inv.Lines[0].ClusterID != c.ClusterID {
		t.Fatalf("%+v", inv)
	}
	var u apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(inv.From, inv.To), "", 200, &u)
	if u.Totals != inv.Total {
		t.Fatalf("invoice total %+v, usage total %+v", inv.Total, u.Totals)
	}
	e.apiErr("admin", "GET", "/v1/invoices?month="+month, "", 400)
	e.apiErr("p", "GET", "/v1/invoices?month=2026-13", "", 400)
	e.apiErr("p", "GET", "/v1/invoices?month="+month+"&from=2026-11-01T00:00:00Z", "", 400)
	e.do("admin", "GET", "/v1/invoices?month="+month+"&project_id=p", "", 200, nil)
}

func TestPrices(t *testing.T) {
	e := newEnv(t)
	var rates apiv1.Rates
	e.do("p", "GET", "/v1/prices", "", 200, &rates)
	if rates.PreemptibleDiscountPercent != "50" || len(rates.Rates) != 2 {
		t.Fatalf("%+v", rates)
	}
	for _, r := range rates.Rates {
		if r.GPUType == "RTX_6000_PCI" && (r.OnDemand != "0.89" || r.Preemptible != "0.445") {
			t.Fatalf("%+v", r)
		}
	}
	past := e.clk.Now().Add(-time.Hour).Format(time.RFC3339)
	if got := e.apiErr("admin", "POST", "/v1/admin/prices", `{"kind":"on_demand","gpu_type":"L40S","value":"2","effective_from":"`+past+`"}`, 400); got.Field != "effective_from" {
		t.Fatalf("%+v", got)
	}
	for _, bad := range []string{
		`{"kind":"spot","value":"1"}`,
		`{"kind":"on_demand","value":"1"}`,
		`{"kind":"on_demand","gpu_type":"L40S","value":"-1"}`,
		`{"kind":"preemptible_discount","value":"120"}`,
		`{"kind":"reserved","reservation_id":"nope","value":"1"}`,
	} {
		e.apiErr("admin", "POST", "/v1/admin/prices", bad, 400)
	}
	e.apiErr("p", "POST", "/v1/admin/prices", `{"kind":"preemptible_discount","value":"60"}`, 403)
	var p apiv1.PriceEntry
	e.clk.Step(time.Second)
	e.do("admin", "POST", "/v1/admin/prices", `{"kind":"preemptible_discount","value":"60"}`, 201, &p)
	e.do("p", "GET", "/v1/prices", "", 200, &rates)
	if rates.PreemptibleDiscountPercent != "60" {
		t.Fatalf("%+v", rates)
	}
	var book apiv1.PriceBook
	e.do("admin", "GET", "/v1/admin/prices", "", 200, &book)
	if len(book.Prices) != 4 {
		t.Fatalf("%+v", book)
	}
}

func jsonUnmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

func TestUsageByDay(t *testing.T) {
	e, _, start := usageWorld(t)
	e.clk.Step(24 * time.Hour) // the cluster runs into a second day
	end := e.clk.Now()
	var daily, whole apiv1.Usage
	e.do("p", "GET", "/v1/usage"+q(start, end, "group_by", "day"), "", 200, &daily)
	e.do("p", "GET", "/v1/usage"+q(start, end), "", 200, &whole)
	if daily.Totals != whole.Totals {
		t.Fatalf("daily totals %+v, whole %+v", daily.Totals, whole.Totals)
	}
	days := map[string]int64{}
	for _, l := range daily.LineItems {
		if l.NodeID != "" || l.End.Sub(l.Start) > 24*time.Hour {
			t.Fatalf("day line %+v", l)
		}
		days[l.Start.Format("2006-01-02")] += l.GPUSeconds
	}
	if len(days) != 2 {
		t.Fatalf("days %v", days)
	}
	var sum int64
	for _, v := range days {
		sum += v
	}
	if sum != whole.Totals.GPUSeconds {
		t.Fatalf("days add up to %d GPU-seconds, the period has %d", sum, whole.Totals.GPUSeconds)
	}
}
