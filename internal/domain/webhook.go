package domain

import (
	"slices"
	"time"
)

// WebhookEndpoint is a URL a project registered to be told of its
// clusters' lifecycle events, for schedulers that live outside the
// tenant's Kubernetes or Slurm (a Ray autoscaler, a queue's worker pool).
type WebhookEndpoint struct {
	ID        string
	ProjectID string
	// Name is a label its owner chose, unique in the project.
	Name string
	URL  string
	// EventTypes are the reasons delivered; none: every reason.
	EventTypes []EventReason
	// ClusterIDs are the clusters whose events are delivered; none: every
	// cluster of the project.
	ClusterIDs []string
	// Enabled: events are delivered. A disabled endpoint gets no new
	// deliveries, and those pending wait until it is enabled again (or
	// fail at the end of their retry window).
	Enabled bool
	// Secret is the signing secret, sealed by package secret and bound to
	// the endpoint's ID: the store keeps it as given, the API never shows
	// it after the answer that made it. PreviousSecret is the secret a
	// rotation replaced, which signs too until PreviousUntil, so receivers
	// can roll over (nil once none is kept).
	Secret, PreviousSecret []byte
	PreviousUntil          time.Time
	CreatedAt, UpdatedAt   time.Time
}

// Wants reports whether e asks for events of reason r about cluster
// clusterID (of e's project: the caller checks that).
func (e WebhookEndpoint) Wants(r EventReason, clusterID string) bool {
	return (len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, r)) &&
		(len(e.ClusterIDs) == 0 || slices.Contains(e.ClusterIDs, clusterID))
}

// Signs reports whether the previous secret still signs at now.
func (e WebhookEndpoint) Signs(now time.Time) bool {
	return len(e.PreviousSecret) > 0 && now.Before(e.PreviousUntil)
}

// WebhookMessage is what one lifecycle event (or a test) is delivered as:
// its body is made once and every delivery of it, to every endpoint and
// on every retry, sends the same bytes under the same ID.
type WebhookMessage struct {
	// ID is the delivery ID receivers de-duplicate by (the webhook-id
	// header and the CloudEvents id).
	ID string
	// Type is the CloudEvents type (dev.sparecap.PreemptionNotified).
	Type string
	// EventID is the lifecycle event's (empty for a test message).
	EventID   string
	Body      []byte
	CreatedAt time.Time
}

// DeliveryState is where a webhook delivery stands.
type DeliveryState string

const (
	// DeliveryPending: not delivered yet; tried again at NextAt.
	DeliveryPending DeliveryState = "pending"
	// DeliveryDelivered: the endpoint answered 2xx.
	DeliveryDelivered DeliveryState = "delivered"
	// DeliveryFailed: it was retried until its window ended (or its
	// endpoint was disabled that long) and never answered 2xx.
	DeliveryFailed DeliveryState = "failed"
)

// WebhookDelivery is one message on its way to one endpoint (the outbox
// row), with what its last attempt gave.
type WebhookDelivery struct {
	EndpointID string
	MessageID  string
	// Type and EventID are the message's, kept here so a listing needs
	// no other table.
	Type    string
	EventID string
	State   DeliveryState
	// Attempts made so far.
	Attempts int
	// NextAt is when a pending delivery is due (zero once it is not
	// pending); LastAt when the last attempt ended.
	NextAt, LastAt time.Time
	// LastStatus is the HTTP status of the last attempt (0: no answer);
	// LastError what went wrong with it ("" once delivered).
	LastStatus int
	LastError  string
	// Latency of the last attempt, from sending to the answer (or the
	// failure).
	Latency   time.Duration
	CreatedAt time.Time
}
