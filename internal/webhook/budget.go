package webhook

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// BudgetData is the data of a budget alert's message.
type BudgetData struct {
	AlertID   string `json:"alert_id"`
	ProjectID string `json:"project_id"`
	BudgetID  string `json:"budget_id"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Threshold int    `json:"threshold"`
	Month     string `json:"month"`
	Spend     string `json:"spend"`
	Forecast  string `json:"forecast"`
	Message   string `json:"message"`
}

// budgetMessageID is a budget alert's delivery ID: its budget and key,
// unique as the alert is.
func budgetMessageID(a domain.BudgetAlert) string { return "budget-" + a.BudgetID + "-" + a.Key }

// BudgetMessage is the message of a budget alert (a CloudEvent of type
// TypeOf(ReasonBudgetAlert), from /v1/budgets/<id>).
func BudgetMessage(a domain.BudgetAlert, now time.Time) (domain.WebhookMessage, error) {
	id := budgetMessageID(a)
	d := BudgetData{AlertID: id, ProjectID: a.ProjectID, BudgetID: a.BudgetID, Name: a.Name, Kind: a.Kind,
		Threshold: a.Threshold, Month: a.Month, Spend: a.Spend, Forecast: a.Forecast, Message: a.Message}
	typ := TypeOf(domain.ReasonBudgetAlert)
	body, err := json.Marshal(cloudEvent{SpecVersion: "1.0", ID: id, Source: "/v1/budgets/" + a.BudgetID, Type: typ,
		Subject: a.Name, Time: a.At.UTC(), DataContentType: "application/json", Data: d})
	if err != nil {
		return domain.WebhookMessage{}, err
	}
	return domain.WebhookMessage{ID: id, Type: typ, EventID: id, Body: body, CreatedAt: now}, nil
}

// QueueBudgetAlerts queues, within tx, the message of each alert to the
// enabled endpoints of its project that ask for BudgetAlert and filter no
// cluster (an alert is about none); an endpoint at its most pending gets
// it as failed, like an event's. The deliveries are on the wall clock
// (Config.Clock) like every delivery; the CloudEvent's time is the
// alert's, on the server's clock, which --speed runs ahead.
func (s *Service) QueueBudgetAlerts(ctx context.Context, tx store.Tx, as []domain.BudgetAlert) error {
	now := s.cfg.Clock.Now()
	var ms []domain.WebhookMessage
	var ds []domain.WebhookDelivery
	eps := map[string][]domain.WebhookEndpoint{}
	backlog := s.backlog.snapshot()
	for _, a := range as {
		if _, ok := eps[a.ProjectID]; !ok {
			list, err := tx.ListWebhookEndpoints(ctx, a.ProjectID)
			if err != nil {
				return err
			}
			eps[a.ProjectID] = list
		}
		m, err := BudgetMessage(a, now)
		if err != nil {
			return err
		}
		made := false
		for _, ep := range eps[a.ProjectID] {
			if !ep.Enabled || len(ep.ClusterIDs) > 0 || !ep.Wants(domain.ReasonBudgetAlert, "") {
				continue
			}
			if !made {
				ms, made = append(ms, m), true
			}
			d := domain.WebhookDelivery{EndpointID: ep.ID, MessageID: m.ID, Type: m.Type, EventID: m.EventID,
				State: domain.DeliveryPending, NextAt: now, CreatedAt: now}
			if n := backlog[ep.ID]; n >= s.cfg.MaxPending {
				d.State, d.NextAt, d.LastAt = domain.DeliveryFailed, time.Time{}, now
				d.LastError = "not sent: the endpoint has " + strconv.Itoa(n) + " deliveries pending, the most it may"
			}
			ds = append(ds, d)
		}
	}
	if err := tx.AddWebhookMessages(ctx, ms); err != nil {
		return err
	}
	return tx.AddWebhookDeliveries(ctx, ds)
}
