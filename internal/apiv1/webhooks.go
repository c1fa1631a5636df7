package apiv1

import "time"

// WebhookEndpoint describes a webhook endpoint. Secret (the signing
// secret, whsec_…) is set only in the answers that made it (create,
// rotate): it is never shown again.
type WebhookEndpoint struct {
	EndpointID string `json:"endpoint_id"`
	ProjectID  string `json:"project_id"`
	Name       string `json:"name"`
	URL        string `json:"url"`
	// EventTypes are the reasons delivered ([]: every reason).
	EventTypes []string `json:"event_types"`
	// ClusterIDs are the clusters whose events are delivered ([]: every
	// cluster of the project).
	ClusterIDs []string  `json:"cluster_ids"`
	Enabled    bool      `json:"enabled"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
	// PreviousSecretExpiresAt is set while the secret a rotation replaced
	// still signs deliveries, next to the new one.
	PreviousSecretExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	// Deliveries counts the deliveries kept, by state.
	Deliveries DeliveryCounts `json:"deliveries"`
	Secret     string         `json:"secret,omitempty"`
}

// DeliveryCounts are an endpoint's deliveries by state.
type DeliveryCounts struct {
	Pending   int `json:"pending"`
	Delivered int `json:"delivered"`
	Failed    int `json:"failed"`
}

// WebhookEndpointList is the body of GET /v1/webhooks, oldest first.
type WebhookEndpointList struct {
	Endpoints []WebhookEndpoint `json:"webhook_endpoints"`
}

// CreateWebhookRequest is the body of POST /v1/webhooks.
type CreateWebhookRequest struct {
	Name string `json:"name"`
	URL  string `json:"url" api:"required"`
	// EventTypes are reasons (PreemptionNotified) or CloudEvents types
	// (dev.sparecap.PreemptionNotified); none: every reason.
	EventTypes []string `json:"event_types,omitempty"`
	// ClusterIDs are clusters of the project; none: all of them.
	ClusterIDs []string `json:"cluster_ids,omitempty"`
	// Enabled defaults to true.
	Enabled *bool `json:"enabled,omitempty"`
}

// UpdateWebhookRequest is the body of PATCH /v1/webhooks/{id}: the
// fields set change, the others keep their value. An empty list of event
// types or clusters means every one.
type UpdateWebhookRequest struct {
	Name       *string   `json:"name,omitempty"`
	URL        *string   `json:"url,omitempty"`
	EventTypes *[]string `json:"event_types,omitempty"`
	ClusterIDs *[]string `json:"cluster_ids,omitempty"`
	Enabled    *bool     `json:"enabled,omitempty"`
}

// RotateWebhookSecretRequest is the body of POST
// /v1/webhooks/{id}/rotate; every field is optional.
type RotateWebhookSecretRequest struct {
	// PreviousExpiresIn is how long the replaced secret still signs next
	// to the new one: a duration from "0s" (it stops at once: it leaked)
	// to "24h", the default.
	PreviousExpiresIn string `json:"previous_expires_in,omitempty"`
}

// WebhookDelivery is one message on its way to an endpoint.
type WebhookDelivery struct {
	// WebhookID is the delivery's ID: its webhook-id header and its
	// CloudEvents id, the same on every retry.
	WebhookID string `json:"webhook_id"`
	// EventID is the lifecycle event's (none for a test).
	EventID string `json:"event_id,omitempty"`
	// Type is the CloudEvents type (dev.sparecap.PreemptionNotified).
	Type string `json:"type"`
	// State is pending, delivered or failed.
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	// LastStatusCode is the HTTP status of the last attempt (absent when
	// it got no answer); LastError what went wrong with it.
	LastStatusCode int    `json:"last_status_code,omitempty"`
	LastError      string `json:"last_error,omitempty"`
	// LatencyMS is how long the last attempt took, in milliseconds.
	LatencyMS     float64    `json:"latency_ms"`
	CreatedAt     time.Time  `json:"created_at"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	// NextAttemptAt is when a pending delivery is due.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// WebhookDeliveryList is the body of GET /v1/webhooks/{id}/deliveries,
// newest first.
type WebhookDeliveryList struct {
	Deliveries []WebhookDelivery `json:"deliveries"`
}
