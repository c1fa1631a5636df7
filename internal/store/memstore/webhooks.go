package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

// webhookTables are the webhook endpoints (by ID, by project and name,
// which are unique, and in listing order: all and by project), the
// messages by ID, and the deliveries: by endpoint and message, by
// endpoint then creation (newest first is this read backwards), by
// message (for pruning), and the pending ones by endpoint, then when they
// are due (the sender's read).
type webhookTables struct {
	endpoints          tree[string, *domain.WebhookEndpoint]
	endpointNames      tree[ss, string]
	endpointOrder      tree[tid, *domain.WebhookEndpoint]
	projectEndpoints   tree[stid, *domain.WebhookEndpoint]
	messages           tree[string, *domain.WebhookMessage]
	deliveries         tree[ss, *domain.WebhookDelivery]
	endpointDeliveries tree[stid, *domain.WebhookDelivery]
	messageDeliveries  tree[ss, struct{}]
	pendingDeliveries  tree[sttid, *domain.WebhookDelivery]
}

func newWebhookTables() webhookTables {
	return webhookTables{
		endpoints: newTree[string, *domain.WebhookEndpoint](cmpString), endpointNames: newTree[ss, string](cmpSS),
		endpointOrder:    newTree[tid, *domain.WebhookEndpoint](cmpTID),
		projectEndpoints: newTree[stid, *domain.WebhookEndpoint](cmpSTID),
		messages:         newTree[string, *domain.WebhookMessage](cmpString),
		deliveries:       newTree[ss, *domain.WebhookDelivery](cmpSS), endpointDeliveries: newTree[stid, *domain.WebhookDelivery](cmpSTID),
		messageDeliveries: newTree[ss, struct{}](cmpSS), pendingDeliveries: newTree[sttid, *domain.WebhookDelivery](cmpSTTID),
	}
}

// endpoint returns a copy of e the caller owns.
func endpoint(e *domain.WebhookEndpoint) domain.WebhookEndpoint {
	c := *e
	c.EventTypes, c.ClusterIDs = slices.Clone(e.EventTypes), slices.Clone(e.ClusterIDs)
	c.Secret, c.PreviousSecret = slices.Clone(e.Secret), slices.Clone(e.PreviousSecret)
	return c
}

func (v view) GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	if err := v.check(ctx); err != nil {
		return domain.WebhookEndpoint{}, err
	}
	e, ok := v.st.endpoints.get(id)
	if !ok {
		return domain.WebhookEndpoint{}, fmt.Errorf("get webhook endpoint %s: %w", id, domain.ErrNotFound)
	}
	return endpoint(e), nil
}

func (v view) ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	out := []domain.WebhookEndpoint{}
	if projectID == "" {
		v.st.endpointOrder.each(func(_ tid, e *domain.WebhookEndpoint) bool {
			out = append(out, endpoint(e))
			return true
		})
		return out, nil
	}
	v.st.projectEndpoints.ascend(&stid{s: projectID, t: minKey}, func(k stid, e *domain.WebhookEndpoint) bool {
		if k.s != projectID {
			return false
		}
		out = append(out, endpoint(e))
		return true
	})
	return out, nil
}

// storedEndpoint is e as stored: its filters as their JSON columns give
// them back (none is nil), its sealed secrets as their BLOB columns do
// (empty is none), its times as every time.
func storedEndpoint(e domain.WebhookEndpoint) (*domain.WebhookEndpoint, error) {
	var err error
	if e.EventTypes, err = storedStrings(e.EventTypes); err != nil {
		return nil, err
	}
	if e.ClusterIDs, err = storedStrings(e.ClusterIDs); err != nil {
		return nil, err
	}
	e.Secret, e.PreviousSecret = storedBytes(e.Secret), storedBytes(e.PreviousSecret)
	e.PreviousUntil, e.CreatedAt, e.UpdatedAt = dbTime(e.PreviousUntil), dbTime(e.CreatedAt), dbTime(e.UpdatedAt)
	return &e, nil
}

// storedStrings is a list through a JSON column: ” (nil) for none.
func storedStrings[T ~string](v []T) ([]T, error) {
	if len(v) == 0 {
		return nil, nil
	}
	b, _ := json.Marshal(v) // strings always encode
	var out []T
	err := json.Unmarshal(b, &out)
	return out, err
}

// storedBytes is b through a nullable BLOB column: empty is NULL, nil.
func storedBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return slices.Clone(b)
}

func (t *tx) CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	// The secrets are credentials: the ID names the endpoint in errors.
	if t.st.endpoints.has(e.ID) || t.st.endpointNames.has(ss{e.ProjectID, e.Name}) {
		return conflict("webhook endpoint " + e.ID)
	}
	if !t.st.projects.has(e.ProjectID) {
		return missingParent("create webhook endpoint " + e.ID)
	}
	s, err := storedEndpoint(e)
	if err != nil {
		return fmt.Errorf("create webhook endpoint %s: %w", e.ID, err)
	}
	t.putEndpoint(nil, s)
	return nil
}

func (t *tx) UpdateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	old, ok := t.st.endpoints.get(e.ID)
	if !ok {
		return missing("update webhook endpoint " + e.ID)
	}
	if id, taken := t.st.endpointNames.get(ss{old.ProjectID, e.Name}); taken && id != e.ID {
		return fmt.Errorf("update webhook endpoint %s: the name %q is taken in its project: %w", e.ID, e.Name, domain.ErrConflict)
	}
	// The ID, the project and the creation time stay.
	e.ProjectID, e.CreatedAt = old.ProjectID, old.CreatedAt
	s, err := storedEndpoint(e)
	if err != nil {
		return fmt.Errorf("update webhook endpoint %s: %w", e.ID, err)
	}
	t.putEndpoint(old, s)
	return nil
}

// putEndpoint writes e over old (nil: a new endpoint; e nil: old goes).
func (t *tx) putEndpoint(old, e *domain.WebhookEndpoint) {
	g := t.w
	if old != nil {
		t.st.endpointNames.delete(g, ss{old.ProjectID, old.Name})
		t.st.endpointOrder.delete(g, tid{tkey(old.CreatedAt), old.ID})
		t.st.projectEndpoints.delete(g, stid{old.ProjectID, tkey(old.CreatedAt), old.ID})
	}
	if e == nil {
		t.st.endpoints.delete(g, old.ID)
		return
	}
	t.st.endpoints.set(g, e.ID, e)
	t.st.endpointNames.set(g, ss{e.ProjectID, e.Name}, e.ID)
	t.st.endpointOrder.set(g, tid{tkey(e.CreatedAt), e.ID}, e)
	t.st.projectEndpoints.set(g, stid{e.ProjectID, tkey(e.CreatedAt), e.ID}, e)
}

func (t *tx) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	for _, d := range t.deliveriesOf(id) {
		t.putDelivery(d, nil)
	}
	old, ok := t.st.endpoints.get(id)
	if !ok {
		return missing("update webhook endpoint " + id)
	}
	t.putEndpoint(old, nil)
	return nil
}

func (v view) GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error) {
	if err := v.check(ctx); err != nil {
		return domain.WebhookMessage{}, err
	}
	m, ok := v.st.messages.get(id)
	if !ok {
		return domain.WebhookMessage{}, fmt.Errorf("get webhook message %s: %w", id, domain.ErrNotFound)
	}
	c := *m
	c.Body = slices.Clone(m.Body)
	return c, nil
}

// AddWebhookMessages writes messages in statements of up to 64; one whose
// ID is stored is left as it was.
func (t *tx) AddWebhookMessages(ctx context.Context, ms []domain.WebhookMessage) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	return eachStatement(ms, webhookSizes, func(chunk []domain.WebhookMessage) error {
		for _, m := range chunk {
			if m.Body == nil {
				return notNull(fmt.Sprintf("add %d webhook messages", len(chunk)), "webhook_messages.body")
			}
		}
		for _, m := range chunk {
			if t.st.messages.has(m.ID) {
				continue
			}
			m.Body, m.CreatedAt = storedBytes(m.Body), dbTime(m.CreatedAt)
			t.st.messages.set(t.w, m.ID, &m)
		}
		return nil
	})
}

func (v view) WebhookCursor(ctx context.Context) (int64, error) {
	if err := v.check(ctx); err != nil {
		return 0, err
	}
	return v.st.cursor, nil
}

func (t *tx) SetWebhookCursor(ctx context.Context, seq int64) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	t.st.cursor = seq
	return nil
}
