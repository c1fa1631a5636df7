package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sparecap/sparecap/internal/apiv1"
)

// WebhookScope says whose webhook endpoints a call manages: the calling
// project's (the zero value), or, for an operator, the project
// ProjectID's.
type WebhookScope struct {
	ProjectID string
}

func (s WebhookScope) path(rest ...string) string {
	p := "/v1/webhooks"
	if s.ProjectID != "" {
		p = "/v1/admin/projects/" + url.PathEscape(s.ProjectID) + "/webhooks"
	}
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// ListWebhooks lists the endpoints of scope, oldest first, without
// their secrets.
func (c *Client) ListWebhooks(ctx context.Context, scope WebhookScope) (*apiv1.WebhookEndpointList, error) {
	return call[apiv1.WebhookEndpointList](ctx, c, http.MethodGet, scope.path(), nil, nil)
}

// CreateWebhook registers an endpoint; its signing secret (Secret) is
// shown this once.
func (c *Client) CreateWebhook(ctx context.Context, scope WebhookScope, req apiv1.CreateWebhookRequest) (*apiv1.WebhookEndpoint, error) {
	return call[apiv1.WebhookEndpoint](ctx, c, http.MethodPost, scope.path(), nil, req)
}

// GetWebhook returns one endpoint.
func (c *Client) GetWebhook(ctx context.Context, scope WebhookScope, id string) (*apiv1.WebhookEndpoint, error) {
	return call[apiv1.WebhookEndpoint](ctx, c, http.MethodGet, scope.path(id), nil, nil)
}

// UpdateWebhook changes the fields set in req.
func (c *Client) UpdateWebhook(ctx context.Context, scope WebhookScope, id string, req apiv1.UpdateWebhookRequest) (*apiv1.WebhookEndpoint, error) {
	return call[apiv1.WebhookEndpoint](ctx, c, http.MethodPatch, scope.path(id), nil, req)
}

// DeleteWebhook deletes an endpoint and its deliveries.
func (c *Client) DeleteWebhook(ctx context.Context, scope WebhookScope, id string) (*apiv1.WebhookEndpoint, error) {
	return call[apiv1.WebhookEndpoint](ctx, c, http.MethodDelete, scope.path(id), nil, nil)
}

// RotateWebhookSecret gives an endpoint a new signing secret (Secret,
// shown this once); the previous one signs next to it for the overlap
// req asks for (24 h by default).
func (c *Client) RotateWebhookSecret(ctx context.Context, scope WebhookScope, id string, req apiv1.RotateWebhookSecretRequest) (*apiv1.WebhookEndpoint, error) {
	return call[apiv1.WebhookEndpoint](ctx, c, http.MethodPost, scope.path(id, "rotate"), nil, req)
}

// TestWebhook sends a test message to an endpoint; its outcome is among
// the endpoint's deliveries.
func (c *Client) TestWebhook(ctx context.Context, scope WebhookScope, id string) (*apiv1.WebhookDelivery, error) {
	return call[apiv1.WebhookDelivery](ctx, c, http.MethodPost, scope.path(id, "test"), nil, struct{}{})
}

// DeliveriesQuery filters an endpoint's deliveries.
type DeliveriesQuery struct {
	// State is pending, delivered or failed; empty: all.
	State string
	// Limit caps the answer (the server's default is 100).
	Limit int
}

// WebhookDeliveries lists an endpoint's deliveries, newest first.
func (c *Client) WebhookDeliveries(ctx context.Context, scope WebhookScope, id string, q DeliveriesQuery) (*apiv1.WebhookDeliveryList, error) {
	v := url.Values{}
	if q.State != "" {
		v.Set("state", q.State)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[apiv1.WebhookDeliveryList](ctx, c, http.MethodGet, scope.path(id, "deliveries"), v, nil)
}
