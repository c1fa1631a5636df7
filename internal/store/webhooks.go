package store

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// WebhookReader are the reads of webhook endpoints and their deliveries.
// Every Reader has them.
type WebhookReader interface {
	// GetWebhookEndpoint returns the endpoint with that ID.
	GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error)
	// ListWebhookEndpoints lists a project's endpoints, or every
	// project's when projectID is "", oldest first.
	ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error)
	// ListWebhookDeliveries lists an endpoint's deliveries, newest first.
	ListWebhookDeliveries(ctx context.Context, f DeliveryFilter) ([]domain.WebhookDelivery, error)
	// CountWebhookDeliveries counts the deliveries kept of each endpoint
	// of a project (every project's when projectID is ""), by state;
	// endpoints with none are left out.
	CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]DeliveryCounts, error)
	// GetWebhookMessage returns the message with that ID.
	GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error)
	// DueWebhookDeliveries returns pending deliveries to enabled
	// endpoints due at now (NextAt at or before it), the longest due
	// first: at most perEndpoint of each endpoint, so a backlog at one
	// endpoint does not hide the others' deliveries, and at most limit in
	// all.
	DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error)
	// WebhookCursor is the Seq of the last lifecycle event dispatched to
	// webhook endpoints (0 before the first).
	WebhookCursor(ctx context.Context) (int64, error)
}

// WebhookWriter are the writes of webhook endpoints and deliveries. Every
// Tx has them.
type WebhookWriter interface {
	// CreateWebhookEndpoint returns domain.ErrConflict when the ID, or
	// the name in the project, is taken, and domain.ErrNotFound when the
	// project does not exist.
	CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error
	// UpdateWebhookEndpoint writes every field but the ID, the project
	// and CreatedAt; domain.ErrNotFound if absent. Check the name is free
	// first: on PostgreSQL a taken name ends the transaction.
	UpdateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error
	// DeleteWebhookEndpoint deletes the endpoint and its deliveries;
	// domain.ErrNotFound if absent.
	DeleteWebhookEndpoint(ctx context.Context, id string) error
	// AddWebhookMessages stores messages; one whose ID is stored already
	// is left as it was (its body is fixed once made).
	AddWebhookMessages(ctx context.Context, ms []domain.WebhookMessage) error
	// AddWebhookDeliveries stores deliveries of stored messages; one whose
	// endpoint already has that message is left as it was.
	// domain.ErrNotFound if an endpoint or a message does not exist.
	AddWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) error
	// UpdateWebhookDelivery writes the outcome of an attempt: the state,
	// attempts, times, status, error and latency of the delivery of
	// d.MessageID to d.EndpointID, if it is still pending;
	// domain.ErrNotFound otherwise (delivered, failed, or deleted with
	// its endpoint).
	UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error
	// SetWebhookCursor records seq as the last event dispatched.
	SetWebhookCursor(ctx context.Context, seq int64) error
	// PruneWebhookDeliveries deletes the deliveries that are no longer
	// pending and either ended (LastAt) before endedBefore or are older
	// than the keep newest of their endpoint, then the messages no
	// delivery refers to; it returns how many deliveries it deleted.
	// Pending deliveries are never pruned.
	PruneWebhookDeliveries(ctx context.Context, endedBefore time.Time, keep int) (int, error)
	// ExpireWebhookDeliveries fails the deliveries still pending that were
	// made before madeBefore (their retry window is over: their endpoint
	// was disabled, or kept failing), ending them at at, and returns how
	// many. Their last error is kept, after why they failed.
	ExpireWebhookDeliveries(ctx context.Context, madeBefore, at time.Time) (int, error)
}

// DeliveryFilter selects an endpoint's deliveries.
type DeliveryFilter struct {
	EndpointID string
	// State, when set, selects deliveries in that state only; Type
	// those of that type (a CloudEvents type: dev.sparecap.Test).
	State domain.DeliveryState
	Type  string
	// Limit caps the result; 0 means no limit.
	Limit int
}

// DeliveryCounts are an endpoint's deliveries by state.
type DeliveryCounts struct {
	Pending, Delivered, Failed int
}
