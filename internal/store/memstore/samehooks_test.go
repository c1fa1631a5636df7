package memstore_test

import (
	"context"
	"fmt"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

var deliveryStates = []domain.DeliveryState{domain.DeliveryPending, domain.DeliveryPending, domain.DeliveryDelivered,
	domain.DeliveryFailed, "odd"}

func (g *gen) endpoint() domain.WebhookEndpoint {
	e := domain.WebhookEndpoint{ID: g.id("wh", 4), ProjectID: g.id("p", 4), Name: g.id("name", 3), URL: g.text(),
		Enabled: g.pick(4) != 0, PreviousUntil: g.when(), CreatedAt: g.when(), UpdatedAt: g.when()}
	if g.bit() {
		e.EventTypes, e.ClusterIDs = []domain.EventReason{domain.ReasonNodeAdded}, []string{g.text()}
		e.Secret, e.PreviousSecret = []byte{0, 1, 255}, []byte{}
	}
	return e
}

func (g *gen) message() domain.WebhookMessage {
	m := domain.WebhookMessage{ID: g.id("msg", 9), Type: "t", EventID: g.text(), Body: []byte(g.text()), CreatedAt: g.when()}
	if g.pick(10) == 0 {
		m.Body = nil
	}
	return m
}

func (g *gen) delivery() domain.WebhookDelivery {
	return domain.WebhookDelivery{EndpointID: g.id("wh", 3), MessageID: g.id("msg", 9), Type: g.id("type", 2), EventID: g.text(),
		State: deliveryStates[g.pick(len(deliveryStates))], Attempts: g.pick(4), NextAt: g.when(), LastAt: g.when(),
		LastStatus: 200 * g.pick(3), LastError: g.text(), Latency: 1234567, CreatedAt: g.when()}
}

// webhookWrites are the writes of endpoints, messages and deliveries.
func (g *gen) webhookWrites() []func() op {
	return []func() op{
		func() op {
			return one("CreateWebhookEndpoint", g.endpoint,
				func(tx store.Tx) func(context.Context, domain.WebhookEndpoint) error { return tx.CreateWebhookEndpoint })
		},
		func() op {
			return each("AddWebhookMessages", 1+g.pick(3), g.message,
				func(tx store.Tx) func(context.Context, []domain.WebhookMessage) error { return tx.AddWebhookMessages })
		},
		func() op {
			return each("AddWebhookDeliveries", 1+g.pick(2), g.delivery,
				func(tx store.Tx) func(context.Context, []domain.WebhookDelivery) error {
					return tx.AddWebhookDeliveries
				})
		},
		func() op {
			return one("UpdateWebhookDelivery", g.delivery,
				func(tx store.Tx) func(context.Context, domain.WebhookDelivery) error { return tx.UpdateWebhookDelivery })
		},
	}
}

func (g *gen) webhookOps() []func() op {
	return []func() op{
		func() op {
			return one("UpdateWebhookEndpoint", g.endpoint,
				func(tx store.Tx) func(context.Context, domain.WebhookEndpoint) error { return tx.UpdateWebhookEndpoint })
		},
		func() op {
			id := g.id("wh", 4)
			return op{"DeleteWebhookEndpoint", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.DeleteWebhookEndpoint(ctx, id)) }}
		},
		func() op {
			seq := int64(g.pick(9))
			return op{"SetWebhookCursor", func(ctx context.Context, tx store.Tx) any { return res(nil, tx.SetWebhookCursor(ctx, seq)) }}
		},
		func() op {
			before, keep := g.when(), g.pick(4)-1
			return op{"PruneWebhookDeliveries", func(ctx context.Context, tx store.Tx) any {
				return res(tx.PruneWebhookDeliveries(ctx, before, keep))
			}}
		},
		func() op {
			before, at := g.when(), g.when()
			return op{"ExpireWebhookDeliveries", func(ctx context.Context, tx store.Tx) any {
				return res(tx.ExpireWebhookDeliveries(ctx, before, at))
			}}
		},
	}
}

func (g *gen) webhookReads() []read {
	df := store.DeliveryFilter{EndpointID: g.id("wh", 4), Limit: g.pick(4)}
	if g.bit() {
		df.State = deliveryStates[g.pick(len(deliveryStates))]
	}
	if g.bit() {
		df.Type = g.id("type", 2)
	}
	now, per, limit := g.when(), g.pick(4)-1, g.pick(5)-1
	eid, mid := g.id("wh", 4), g.id("msg", 9)
	return []read{
		{fmt.Sprintf("ListWebhookDeliveries(%+v)", df), func(ctx context.Context, s store.Store) any {
			return res(s.ListWebhookDeliveries(ctx, df))
		}},
		{fmt.Sprintf("DueWebhookDeliveries(%v, %d, %d)", now, per, limit), func(ctx context.Context, s store.Store) any {
			return res(s.DueWebhookDeliveries(ctx, now, per, limit))
		}},
		{"webhooks", func(ctx context.Context, s store.Store) any {
			cur, err := s.WebhookCursor(ctx)
			return []any{res(s.CountWebhookDeliveries(ctx, "")), res(s.CountWebhookDeliveries(ctx, "p1")),
				res(s.ListWebhookEndpoints(ctx, "")), res(s.ListWebhookEndpoints(ctx, "p2")), res(cur, err),
				res(s.GetWebhookEndpoint(ctx, eid)), res(s.GetWebhookMessage(ctx, mid))}
		}},
	}
}
