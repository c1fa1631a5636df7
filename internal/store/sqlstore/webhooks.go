package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// Webhook endpoints, messages and deliveries (migration 00010). The
// dispatcher writes a batch of events' messages and deliveries together
// with the cursor, so the bulk inserts go up to 64 rows a statement.

const (
	webhookEndpointCols = `id, project_id, name, url, event_types, cluster_ids, enabled, secret, previous_secret,
		previous_until, created_at, updated_at`
	webhookMessageCols  = `id, type, event_id, body, created_at`
	webhookDeliveryCols = `endpoint_id, message_id, type, event_id, state, attempts, next_at, last_at, last_status,
		last_error, latency_us, created_at`
	webhookDeliveryRow = `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	webhookMessageRow  = `(?, ?, ?, ?, ?)`
	// webhookSizes: AddWebhookMessages and AddWebhookDeliveries write 1,
	// 2, 4, … 64 rows per statement.
	webhookSizes = 7
)

// webhookQueries are the webhook statements, rebound once.
type webhookQueries struct {
	getEndpoint, listEndpoints, listEndpointsOf string
	createEndpoint, updateEndpoint              string
	deleteEndpointDeliveries, deleteEndpoint    string
	getMessage, updateDelivery                  string
	countDeliveries, countDeliveriesOf          string
	due, getCursor, setCursor                   string
	pruneEnded, pruneBeyond, pruneMessages      string
	expire                                      string
	addMessages, addDeliveries                  [webhookSizes]string
	// listDeliveries are indexed by the filter's parts (listByState,
	// listByType, listLimited).
	listDeliveries [8]string
}

// The parts of a DeliveryFilter, as bits of an index of listDeliveries.
const (
	listByState = 1 << iota
	listByType
	listLimited
)

// dueQuery reads the due deliveries, at most perEndpoint (the second
// argument) of each enabled endpoint, so a backlog at one endpoint
// cannot fill the answer. Each endpoint's are found with a search of the
// webhook_deliveries_pending index ("state = 'pending'" is its
// predicate), so the read costs what it returns, not the backlog.
func dueQuery(d Dialect) string {
	const order = ` ORDER BY next_at, created_at, message_id`
	if d.Lateral {
		return `SELECT ` + prefixed("d.", webhookDeliveryCols) + ` FROM webhook_endpoints e CROSS JOIN LATERAL (
				SELECT * FROM webhook_deliveries WHERE endpoint_id = e.id AND state = 'pending' AND next_at <= ?` + order + ` LIMIT ?) d
			WHERE e.enabled ORDER BY d.next_at, d.created_at, d.message_id, d.endpoint_id LIMIT ?`
	}
	return `SELECT ` + prefixed("d.", webhookDeliveryCols) + ` FROM webhook_endpoints e, webhook_deliveries d
		WHERE e.enabled AND (d.endpoint_id, d.message_id) IN (
			SELECT endpoint_id, message_id FROM webhook_deliveries
			WHERE endpoint_id = e.id AND state = 'pending' AND next_at <= ?` + order + ` LIMIT ?)
		ORDER BY d.next_at, d.created_at, d.message_id, d.endpoint_id LIMIT ?`
}

// prefixed qualifies each of the comma-separated columns cols.
func prefixed(p, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		parts[i] = p + strings.TrimSpace(c)
	}
	return strings.Join(parts, ", ")
}

func buildWebhookQueries(d Dialect) webhookQueries {
	r := func(q string) string { return rebind(d, q) }
	list := `SELECT ` + webhookDeliveryCols + ` FROM webhook_deliveries WHERE endpoint_id = ?`
	order := ` ORDER BY created_at DESC NULLS LAST, message_id DESC`
	q := webhookQueries{
		getEndpoint:     r(`SELECT ` + webhookEndpointCols + ` FROM webhook_endpoints WHERE id = ?`),
		listEndpoints:   r(`SELECT ` + webhookEndpointCols + ` FROM webhook_endpoints` + oldestFirst),
		listEndpointsOf: r(`SELECT ` + webhookEndpointCols + ` FROM webhook_endpoints WHERE project_id = ?` + oldestFirst),
		createEndpoint: r(`INSERT INTO webhook_endpoints (` + webhookEndpointCols + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`),
		updateEndpoint: r(`UPDATE webhook_endpoints SET name = ?, url = ?, event_types = ?, cluster_ids = ?, enabled = ?,
			secret = ?, previous_secret = ?, previous_until = ?, updated_at = ? WHERE id = ?`),
		deleteEndpointDeliveries: r(`DELETE FROM webhook_deliveries WHERE endpoint_id = ?`),
		deleteEndpoint:           r(`DELETE FROM webhook_endpoints WHERE id = ?`),
		getMessage:               r(`SELECT ` + webhookMessageCols + ` FROM webhook_messages WHERE id = ?`),
		updateDelivery: r(`UPDATE webhook_deliveries SET state = ?, attempts = ?, next_at = ?, last_at = ?, last_status = ?,
			last_error = ?, latency_us = ? WHERE endpoint_id = ? AND message_id = ? AND state = 'pending'`),
		countDeliveries: r(`SELECT endpoint_id, state, COUNT(*) FROM webhook_deliveries GROUP BY endpoint_id, state`),
		countDeliveriesOf: r(`SELECT d.endpoint_id, d.state, COUNT(*) FROM webhook_deliveries d
			JOIN webhook_endpoints e ON e.id = d.endpoint_id WHERE e.project_id = ? GROUP BY d.endpoint_id, d.state`),
		due:        r(dueQuery(d)),
		getCursor:  r(`SELECT seq FROM webhook_cursor WHERE name = 'events'`),
		setCursor:  r(`INSERT INTO webhook_cursor (name, seq) VALUES ('events', ?) ON CONFLICT (name) DO UPDATE SET seq = excluded.seq`),
		pruneEnded: r(`DELETE FROM webhook_deliveries WHERE state <> 'pending' AND (last_at IS NULL OR last_at < ?)`),
		pruneBeyond: r(`DELETE FROM webhook_deliveries WHERE state <> 'pending' AND (endpoint_id, message_id) IN (
				SELECT endpoint_id, message_id FROM (
					SELECT endpoint_id, message_id, ROW_NUMBER() OVER (PARTITION BY endpoint_id ORDER BY created_at DESC, message_id DESC) AS rn
					FROM webhook_deliveries WHERE state <> 'pending') ranked
				WHERE rn > ?)`),
		pruneMessages: r(`DELETE FROM webhook_messages WHERE NOT EXISTS (
				SELECT 1 FROM webhook_deliveries d WHERE d.message_id = webhook_messages.id)`),
		expire: r(`UPDATE webhook_deliveries SET state = 'failed', next_at = NULL, last_at = ?,
			last_error = CASE WHEN last_error = '' THEN ? ELSE ? || last_error END
			WHERE state = 'pending' AND created_at < ?`),
	}
	for i := range q.listDeliveries {
		query := list
		if i&listByState != 0 {
			query += ` AND state = ?`
		}
		if i&listByType != 0 {
			query += ` AND type = ?`
		}
		query += order
		if i&listLimited != 0 {
			query += ` LIMIT ?`
		}
		q.listDeliveries[i] = r(query)
	}
	for i := range webhookSizes {
		rows := strings.TrimSuffix(strings.Repeat(webhookMessageRow+", ", 1<<i), ", ")
		q.addMessages[i] = r(`INSERT INTO webhook_messages (` + webhookMessageCols + `) VALUES ` + rows + ` ON CONFLICT DO NOTHING`)
		rows = strings.TrimSuffix(strings.Repeat(webhookDeliveryRow+", ", 1<<i), ", ")
		q.addDeliveries[i] = r(`INSERT INTO webhook_deliveries (` + webhookDeliveryCols + `) VALUES ` + rows + ` ON CONFLICT DO NOTHING`)
	}
	return q
}

// The Store reads outside any transaction, through the read pool.

func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	return s.rd().GetWebhookEndpoint(ctx, id)
}
func (s *Store) ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error) {
	return s.rd().ListWebhookEndpoints(ctx, projectID)
}
func (s *Store) ListWebhookDeliveries(ctx context.Context, f store.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	return s.rd().ListWebhookDeliveries(ctx, f)
}
func (s *Store) CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]store.DeliveryCounts, error) {
	return s.rd().CountWebhookDeliveries(ctx, projectID)
}
func (s *Store) GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error) {
	return s.rd().GetWebhookMessage(ctx, id)
}
func (s *Store) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	return s.rd().DueWebhookDeliveries(ctx, now, perEndpoint, limit)
}
func (s *Store) WebhookCursor(ctx context.Context) (int64, error) { return s.rd().WebhookCursor(ctx) }

// stringsCol scans a JSON array of strings written by encodeStrings: ”
// is none (nil).
type stringsCol struct{ v *[]string }

func (c stringsCol) Scan(v any) error {
	text, err := columnText(v, "string list")
	if err != nil {
		return err
	}
	*c.v = nil
	if len(text) == 0 {
		return nil
	}
	return json.Unmarshal(text, c.v)
}

func encodeStrings[T ~string](v []T) string {
	if len(v) == 0 {
		return ""
	}
	b, _ := json.Marshal(v) // strings always encode
	return string(b)
}

// bytesCol scans a nullable BLOB or BYTEA: NULL and empty are nil.
type bytesCol struct{ b *[]byte }

func (c bytesCol) Scan(v any) error {
	switch v := v.(type) {
	case nil:
		*c.b = nil
	case []byte:
		*c.b = nil
		if len(v) > 0 {
			*c.b = append([]byte(nil), v...)
		}
	default:
		return fmt.Errorf("scan bytes: unsupported column type %T", v)
	}
	return nil
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

func scanWebhookEndpoint(sc scanner) (e domain.WebhookEndpoint, err error) {
	var types []string
	err = sc.Scan(&e.ID, &e.ProjectID, &e.Name, &e.URL, stringsCol{&types}, stringsCol{&e.ClusterIDs}, &e.Enabled,
		bytesCol{&e.Secret}, bytesCol{&e.PreviousSecret}, timeCol{&e.PreviousUntil}, timeCol{&e.CreatedAt}, timeCol{&e.UpdatedAt})
	for _, t := range types {
		e.EventTypes = append(e.EventTypes, domain.EventReason(t))
	}
	return e, err
}

func scanWebhookMessage(sc scanner) (m domain.WebhookMessage, err error) {
	err = sc.Scan(&m.ID, &m.Type, &m.EventID, bytesCol{&m.Body}, timeCol{&m.CreatedAt})
	return m, err
}

func scanWebhookDelivery(sc scanner) (d domain.WebhookDelivery, err error) {
	var latency int64
	err = sc.Scan(&d.EndpointID, &d.MessageID, &d.Type, &d.EventID, &d.State, &d.Attempts, timeCol{&d.NextAt},
		timeCol{&d.LastAt}, &d.LastStatus, &d.LastError, &latency, timeCol{&d.CreatedAt})
	d.Latency = time.Duration(latency) * time.Microsecond
	return d, err
}

func (r reader) GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	return get(ctx, r, scanWebhookEndpoint, "webhook endpoint "+id, r.s.wq.getEndpoint, id)
}

func (r reader) ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error) {
	if projectID == "" {
		return list(ctx, r, scanWebhookEndpoint, "webhook endpoints", r.s.wq.listEndpoints)
	}
	return list(ctx, r, scanWebhookEndpoint, "webhook endpoints of project "+projectID, r.s.wq.listEndpointsOf, projectID)
}

func (r reader) ListWebhookDeliveries(ctx context.Context, f store.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	which, args := 0, []any{f.EndpointID}
	if f.State != "" {
		which, args = which|listByState, append(args, string(f.State))
	}
	if f.Type != "" {
		which, args = which|listByType, append(args, f.Type)
	}
	if f.Limit > 0 {
		which, args = which|listLimited, append(args, f.Limit)
	}
	return list(ctx, r, scanWebhookDelivery, "deliveries of webhook endpoint "+f.EndpointID, r.s.wq.listDeliveries[which], args...)
}

func (r reader) CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]store.DeliveryCounts, error) {
	q, args := r.s.wq.countDeliveries, []any(nil)
	if projectID != "" {
		q, args = r.s.wq.countDeliveriesOf, []any{projectID}
	}
	type count struct {
		endpoint string
		state    domain.DeliveryState
		n        int
	}
	rows, err := list(ctx, r, func(sc scanner) (c count, err error) {
		return c, sc.Scan(&c.endpoint, &c.state, &c.n)
	}, "webhook delivery counts", q, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]store.DeliveryCounts{}
	for _, c := range rows {
		dc := out[c.endpoint]
		switch c.state {
		case domain.DeliveryPending:
			dc.Pending = c.n
		case domain.DeliveryDelivered:
			dc.Delivered = c.n
		case domain.DeliveryFailed:
			dc.Failed = c.n
		}
		out[c.endpoint] = dc
	}
	return out, nil
}

func (r reader) GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error) {
	return get(ctx, r, scanWebhookMessage, "webhook message "+id, r.s.wq.getMessage, id)
}

func (r reader) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	return list(ctx, r, scanWebhookDelivery, "due webhook deliveries", r.s.wq.due, r.s.timeArg(now), perEndpoint, limit)
}

func (r reader) WebhookCursor(ctx context.Context) (int64, error) {
	var seq int64
	err := r.q.QueryRowContext(ctx, r.s.wq.getCursor).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%s: get webhook cursor: %w", r.s.d.Name, err)
	}
	return seq, nil
}

func (t *tx) CreateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error {
	// The secrets are credentials: the ID names the endpoint in errors.
	return t.create(ctx, "webhook endpoint "+e.ID, t.s.wq.createEndpoint, e.ID, e.ProjectID, e.Name, e.URL,
		encodeStrings(e.EventTypes), encodeStrings(e.ClusterIDs), e.Enabled, nullBytes(e.Secret), nullBytes(e.PreviousSecret),
		t.s.timeArg(e.PreviousUntil), t.s.timeArg(e.CreatedAt), t.s.timeArg(e.UpdatedAt))
}

func (t *tx) UpdateWebhookEndpoint(ctx context.Context, e domain.WebhookEndpoint) error {
	err := t.update(ctx, "webhook endpoint "+e.ID, t.s.wq.updateEndpoint, e.Name, e.URL, encodeStrings(e.EventTypes),
		encodeStrings(e.ClusterIDs), e.Enabled, nullBytes(e.Secret), nullBytes(e.PreviousSecret),
		t.s.timeArg(e.PreviousUntil), t.s.timeArg(e.UpdatedAt), e.ID)
	// The update writes no machine's node: a unique index that refuses it
	// is the one of names in a project.
	if errors.Is(err, domain.ErrConflict) {
		return fmt.Errorf("update webhook endpoint %s: the name %q is taken in its project: %w", e.ID, e.Name, domain.ErrConflict)
	}
	return err
}

func (t *tx) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	if _, err := t.q.ExecContext(ctx, t.s.wq.deleteEndpointDeliveries, id); err != nil {
		return fmt.Errorf("%s: delete deliveries of webhook endpoint %s: %w", t.s.d.Name, id, err)
	}
	return t.update(ctx, "webhook endpoint "+id, t.s.wq.deleteEndpoint, id)
}

func (t *tx) AddWebhookMessages(ctx context.Context, ms []domain.WebhookMessage) error {
	return execChunks(ctx, t, ms, t.s.wq.addMessages[:], func(m domain.WebhookMessage) []any {
		return []any{m.ID, m.Type, m.EventID, m.Body, t.s.timeArg(m.CreatedAt)}
	}, "add %d webhook messages", nil)
}

func (t *tx) AddWebhookDeliveries(ctx context.Context, ds []domain.WebhookDelivery) error {
	return execChunks(ctx, t, ds, t.s.wq.addDeliveries[:], t.deliveryArgs, "add %d webhook deliveries", nil)
}

// deliveryArgs are d's values in the order of webhookDeliveryCols.
func (t *tx) deliveryArgs(d domain.WebhookDelivery) []any {
	return []any{d.EndpointID, d.MessageID, d.Type, d.EventID, string(d.State), d.Attempts, t.s.timeArg(d.NextAt),
		t.s.timeArg(d.LastAt), d.LastStatus, text(d.LastError), d.Latency.Microseconds(), t.s.timeArg(d.CreatedAt)}
}

func (t *tx) UpdateWebhookDelivery(ctx context.Context, d domain.WebhookDelivery) error {
	return t.update(ctx, "pending delivery of "+d.MessageID+" to webhook endpoint "+d.EndpointID, t.s.wq.updateDelivery,
		string(d.State), d.Attempts, t.s.timeArg(d.NextAt), t.s.timeArg(d.LastAt), d.LastStatus, text(d.LastError),
		d.Latency.Microseconds(), d.EndpointID, d.MessageID)
}

func (t *tx) SetWebhookCursor(ctx context.Context, seq int64) error {
	if _, err := t.q.ExecContext(ctx, t.s.wq.setCursor, seq); err != nil {
		return fmt.Errorf("%s: set webhook cursor: %w", t.s.d.Name, err)
	}
	return nil
}

func (t *tx) PruneWebhookDeliveries(ctx context.Context, endedBefore time.Time, keep int) (int, error) {
	n := int64(0)
	for _, st := range []struct {
		q    string
		args []any
	}{{t.s.wq.pruneEnded, []any{t.s.timeArg(endedBefore)}}, {t.s.wq.pruneBeyond, []any{keep}}} {
		res, err := t.q.ExecContext(ctx, st.q, st.args...)
		if err != nil {
			return 0, fmt.Errorf("%s: prune webhook deliveries: %w", t.s.d.Name, err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("%s: prune webhook deliveries: %w", t.s.d.Name, err)
		}
		n += m
	}
	if _, err := t.q.ExecContext(ctx, t.s.wq.pruneMessages); err != nil {
		return 0, fmt.Errorf("%s: prune webhook messages: %w", t.s.d.Name, err)
	}
	return int(n), nil
}

// expiredWhy starts the last error of a delivery that ran out of time.
const expiredWhy = "not delivered within its retry window"

func (t *tx) ExpireWebhookDeliveries(ctx context.Context, madeBefore, at time.Time) (int, error) {
	res, err := t.q.ExecContext(ctx, t.s.wq.expire, t.s.timeArg(at), expiredWhy, expiredWhy+"; last error: ", t.s.timeArg(madeBefore))
	if err != nil {
		return 0, fmt.Errorf("%s: expire webhook deliveries: %w", t.s.d.Name, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: expire webhook deliveries: %w", t.s.d.Name, err)
	}
	return int(n), nil
}
