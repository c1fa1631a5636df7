package webhook

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// TestBudgetAlertsAreDelivered: a budget alert queued with its record
// reaches the project's endpoints that ask for BudgetAlert and filter no
// cluster, once, signed like an event; no other endpoint gets it.
func TestBudgetAlertsAreDelivered(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, func(int) (int, time.Duration) { return 200, 0 })
	all, _ := f.endpoint("p", r.URL+"/all", nil)
	budgets, _ := f.endpoint("p", r.URL+"/budgets", func(e *domain.WebhookEndpoint) {
		e.EventTypes = []domain.EventReason{domain.ReasonBudgetAlert}
	})
	nodes, _ := f.endpoint("p", r.URL+"/nodes", func(e *domain.WebhookEndpoint) {
		e.EventTypes = []domain.EventReason{domain.ReasonNodeAdded}
	})
	oneCluster, _ := f.endpoint("p", r.URL+"/c-k", func(e *domain.WebhookEndpoint) { e.ClusterIDs = []string{"c-k"} })
	other, _ := f.endpoint("q", r.URL+"/q", nil)
	a := domain.BudgetAlert{BudgetID: "b1", ProjectID: "p", Name: "ml", Kind: domain.AlertSpend, Threshold: 80, Key: "spend:80",
		Month: "2026-12", At: f.clk.Now(), Spend: "812.00", Forecast: "2400.00", Message: "budget ml: $812.00 spent"}
	for range 2 { // queued twice (a retried transaction): delivered once
		f.update(func(tx store.Tx) error {
			return f.svc.QueueBudgetAlerts(f.ctx, tx, []domain.BudgetAlert{a})
		})
	}
	f.step()
	for _, ep := range []domain.WebhookEndpoint{all, budgets} {
		if ds := f.deliveries(ep.ID); len(ds) != 1 || ds[0].State != domain.DeliveryDelivered {
			t.Errorf("%s: %+v", ep.Name, ds)
		}
	}
	for _, ep := range []domain.WebhookEndpoint{nodes, oneCluster, other} {
		if ds := f.deliveries(ep.ID); len(ds) != 0 {
			t.Errorf("%s got %+v", ep.Name, ds)
		}
	}
	got := r.requests()
	if len(got) != 2 {
		t.Fatalf("%d requests", len(got))
	}
	var ev struct {
		cloudEvent
		Data BudgetData `json:"data"`
	}
	if err := json.Unmarshal(got[0].body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != TypeOf(domain.ReasonBudgetAlert) || ev.Source != "/v1/budgets/b1" || ev.Data.Spend != "812.00" ||
		ev.Data.Kind != "spend" || ev.Data.Threshold != 80 || got[0].header.Get("webhook-signature") == "" {
		t.Fatalf("message %+v, headers %v", ev, got[0].header)
	}
}

// TestBudgetAlertOnAFastClock: a budget alert is raised on the server's
// clock, which --speed runs ahead, but its deliveries are on the wall
// clock like every delivery: due now, not when the wall clock catches up.
func TestBudgetAlertOnAFastClock(t *testing.T) {
	f := newFixture(t, nil)
	r := newReceiver(t, func(int) (int, time.Duration) { return 200, 0 })
	ep, _ := f.endpoint("p", r.URL+"/all", nil)
	ahead := f.clk.Now().AddDate(0, 1, 0)
	a := domain.BudgetAlert{BudgetID: "b1", ProjectID: "p", Name: "ml", Kind: domain.AlertSpend, Threshold: 80, Key: "spend:80",
		Month: ahead.Format("2006-01"), At: ahead, Spend: "812.00", Forecast: "2400.00", Message: "budget ml: $812.00 spent"}
	f.update(func(tx store.Tx) error { return f.svc.QueueBudgetAlerts(f.ctx, tx, []domain.BudgetAlert{a}) })
	f.step()
	ds := f.deliveries(ep.ID)
	if len(ds) != 1 || ds[0].State != domain.DeliveryDelivered || !ds[0].CreatedAt.Equal(f.clk.Now()) {
		t.Fatalf("deliveries %+v, the wall clock reads %v", ds, f.clk.Now())
	}
	var ev cloudEvent
	if err := json.Unmarshal(r.requests()[0].body, &ev); err != nil || !ev.Time.Equal(ahead) {
		t.Fatalf("the event's time is the alert's, on the server's clock: %+v (%v)", ev, err)
	}
}
