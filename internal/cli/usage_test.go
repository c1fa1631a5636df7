package cli

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
)

func usageFixture() apiv1.Usage {
	return apiv1.Usage{Currency: "USD", From: t0, To: t0.Add(time.Hour), GroupBy: "node",
		LineItems: []apiv1.UsageLine{{ClusterID: "c1", ClusterName: "train", NodeName: "gpu-preemptible-dp-2", ComputeClass: "preemptible",
			GPUs: 8, Start: t0, End: t0.Add(12 * time.Minute), BilledSeconds: 720, GPUSeconds: 5760, RatePerGPUHour: "1.495",
			Amount: "2.392000", OnDemandAmount: "4.784000", Priced: true}},
		Totals:  apiv1.UsageTotals{GPUSeconds: 5760, Amount: "2.39", OnDemandEquivalent: "4.78", Savings: "2.39"},
		ByClass: map[string]apiv1.UsageTotals{"preemptible": {GPUSeconds: 5760, Amount: "2.39", OnDemandEquivalent: "4.78", Savings: "2.39"}},
	}
}

// whoami answers like a server whose (simulated) clock reads at.
func whoami(f *fakeAPI, at string) {
	f.mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Sparecap-Time", at)
		writeJSON(w, 200, apiv1.WhoAmI{ProjectID: "p"})
	})
}

func TestUsageCommand(t *testing.T) {
	f := newFakeAPI(t)
	f.handle("GET /v1/usage", 200, usageFixture())
	whoami(f, "2030-05-17T10:00:00Z")
	r := f.run("usage", "--cluster", "c1", "--group-by", "compute_class")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "usage table", r.stdout, "gpu-preemptible-dp-2", "1.495", "12m", "USD 2.39", "USD 4.78", "preemptible")
	got, _ := url.ParseQuery(f.only("GET", "/v1/usage")[0].Query)
	// The default period is this month up to now, on the server's clock
	// (which runs ahead of the CLI's when the server runs with --speed).
	if got.Get("cluster_id") != "c1" || got.Get("group_by") != "compute_class" ||
		got.Get("from") != "2030-05-01T00:00:00Z" || !strings.HasPrefix(got.Get("to"), "2030-05-17T10:00") {
		t.Fatalf("query %v", got)
	}
	r = f.run("usage", "--month", "2026-10")
	got, _ = url.ParseQuery(f.only("GET", "/v1/usage")[1].Query)
	if r.err != nil || got.Get("from") != "2026-10-01T00:00:00Z" || got.Get("to") != "2026-11-01T00:00:00Z" {
		t.Fatalf("month query %v (%v)", got, r.err)
	}
	for _, bad := range [][]string{
		{"usage", "--month", "2026-10", "--from", "2026-10-01T00:00:00Z"},
		{"usage", "--from", "yesterday"},
		{"usage", "--month", "october"},
		{"usage", "-o", "xml"},
	} {
		if r := f.run(bad...); r.err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestUsageCSV(t *testing.T) {
	f := newFakeAPI(t)
	whoami(f, "2030-05-17T10:00:00Z")
	f.mux.HandleFunc("GET /v1/usage", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("format") != "csv" {
			t.Errorf("format %q", r.URL.Query().Get("format"))
		}
		w.Header().Set("Content-Type", "text/csv")
		w.Write([]byte("project_id,cluster_id\np,c1\n"))
	})
	r := f.run("usage", "-o", "csv")
	if r.err != nil || r.stdout != "project_id,cluster_id\np,c1\n" {
		t.Fatalf("%q %v", r.stdout, r.err)
	}
	// csv is only for usage and invoices.
	if r := f.run("capacity", "-o", "csv"); r.err == nil {
		t.Fatal("capacity -o csv accepted")
	}
}

func TestInvoiceAndPricesCommands(t *testing.T) {
	f := newFakeAPI(t)
	u := usageFixture()
	f.handle("GET /v1/invoices", 200, apiv1.Invoice{ProjectID: "p", Currency: "USD", From: t0, To: t0.AddDate(0, 1, 0),
		Lines: u.LineItems, ByClass: u.ByClass, Total: u.Totals, PreemptibleDiscount: "50"})
	f.handle("GET /v1/prices", 200, apiv1.Rates{Currency: "USD", PreemptibleDiscountPercent: "50",
		Rates: []apiv1.Rate{{Region: "us", GPUType: "H100_SXM", OnDemand: "2.99", Preemptible: "1.495"}}})
	f.handle("POST /v1/admin/prices", 201, apiv1.PriceEntry{ID: "price-1", Kind: "on_demand", Value: "3.19", EffectiveFrom: t0})
	r := f.run("invoice", "--month", "2026-11")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "invoice", r.stdout, "Project:", "p", "50%", "USD 2.39", "SAVINGS")
	if q := f.only("GET", "/v1/invoices")[0].Query; q != "month=2026-11" {
		t.Fatalf("query %q", q)
	}
	r = f.run("prices")
	mustContain(t, "prices", r.stdout, "H100_SXM", "2.99", "1.495", "50% off")
	r = f.run("prices", "set", "--kind", "on_demand", "--gpu-type", "H100_SXM", "--value", "3.19", "--effective-from", "2026-12-01T00:00:00Z")
	if r.err != nil {
		t.Fatal(r.err)
	}
	b := f.only("POST", "/v1/admin/prices")[0].Body
	if b["kind"] != "on_demand" || b["value"] != "3.19" || b["gpu_type"] != "H100_SXM" || b["effective_from"] != "2026-12-01T00:00:00Z" {
		t.Fatalf("body %v", b)
	}
	if r := f.run("prices", "set", "--kind", "on_demand"); r.err == nil {
		t.Fatal("missing --value accepted")
	}
}

func TestUsageByLabelCommand(t *testing.T) {
	f := newFakeAPI(t)
	u := usageFixture()
	u.GroupBy = "label:team"
	u.LineItems = []apiv1.UsageLine{
		{ClusterID: "c1", ClusterName: "train", Group: "vision", GPUSeconds: 7200, Amount: "1.780000", OnDemandAmount: "1.780000", Priced: true},
		{ClusterID: "c1", ClusterName: "train", GPUSeconds: 3600, Amount: "0.890000", OnDemandAmount: "0.890000", Priced: true},
		{ClusterID: "c1", ClusterName: "train", ComputeClass: "preemptible", Idle: true, GPUSeconds: 1800, Amount: "0.222500",
			OnDemandAmount: "0.445000", Priced: true},
	}
	f.handle("GET /v1/usage", 200, u)
	r := f.run("usage", "--month", "2026-10", "--group-by", "label:team")
	if r.err != nil {
		t.Fatal(r.err)
	}
	mustContain(t, "work table", r.stdout, "GROUP", "vision", "(none)", "(idle)", "2.00", "1.780000", "0.222500")
	if strings.Contains(r.stdout, "NODE") || strings.Contains(r.stdout, "UNITS") {
		t.Errorf("a split by work shows the node table, or units none reported:\n%s", r.stdout)
	}
	got, _ := url.ParseQuery(f.only("GET", "/v1/usage")[0].Query)
	if got.Get("group_by") != "label:team" {
		t.Fatalf("query %v", got)
	}
	// A job that reports its epochs: its cost per epoch.
	u.GroupBy = "job"
	u.LineItems[0].Group, u.LineItems[0].Units, u.LineItems[0].CostPerUnit = "jobset/ml/train", 10, "0.178000"
	f = newFakeAPI(t)
	f.handle("GET /v1/usage", 200, u)
	r = f.run("usage", "--month", "2026-10", "--group-by", "job")
	mustContain(t, "work table with units", r.stdout, "UNITS", "PER-UNIT", "jobset/ml/train", "10", "0.178000")
}
