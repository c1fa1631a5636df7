package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/webhook"
)

// Webhook endpoints belong to a project. As with tokens, /v1/webhooks is
// the calling project's, and an operator manages a project's at
// /v1/admin/projects/{project}/webhooks; another project's endpoint is
// not found. A signing secret is shown once, in the answer that made it
// (create, rotate), and kept sealed.

// Caps that keep one project from weighing on the server.
const (
	// MaxWebhookEndpoints is how many endpoints a project may have.
	MaxWebhookEndpoints = 20
	// maxWebhookClusters bounds an endpoint's list of clusters.
	maxWebhookClusters = 100
	// maxDeliveriesListed bounds one page of deliveries.
	maxDeliveriesListed = 1000
	// MaxPendingTests is how many test deliveries an endpoint may have
	// pending: each is retried for a day while the endpoint fails.
	MaxPendingTests = 5
)

// WebhookOptions are the API's part of webhooks.
type WebhookOptions struct {
	// Policy refuses endpoint URLs whose host is an address deliveries
	// may not reach.
	Policy webhook.Policy
	// OnMessage, if set, is called after a test message was stored, so
	// the sender looks for it at once.
	OnMessage func()
}

// webhookScope is the project whose endpoints a request manages: the
// named one on the admin routes, the caller's own otherwise. An operator
// has no endpoints of its own.
func webhookScope(r *http.Request, p principal) (string, error) {
	if id := r.PathValue("project"); id != "" {
		return id, nil
	}
	if p.admin {
		return "", invalid("project_id", "webhook endpoints belong to a project: an operator manages a project's at /v1/admin/projects/{project}/webhooks (sparecap webhooks … --project-id PROJECT)")
	}
	return p.project, nil
}

// projectExists refuses a project that does not exist (on the admin
// routes) with 404.
func projectExists(ctx context.Context, r store.Reader, project string) error {
	_, err := r.GetProject(ctx, project)
	if errors.Is(err, domain.ErrNotFound) {
		return notFound("project %q not found", project)
	}
	return err
}

// endpointIn reads endpoint id of project in r: 404 for another
// project's, as for one that does not exist.
func endpointIn(ctx context.Context, r store.Reader, project, id string) (domain.WebhookEndpoint, error) {
	e, err := r.GetWebhookEndpoint(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && e.ProjectID != project) {
		return domain.WebhookEndpoint{}, notFound("webhook endpoint %q not found", id)
	}
	return e, err
}

func endpointView(e domain.WebhookEndpoint, counts store.DeliveryCounts, now time.Time, secret string) apiv1.WebhookEndpoint {
	v := apiv1.WebhookEndpoint{EndpointID: e.ID, ProjectID: e.ProjectID, Name: e.Name, URL: e.URL, EventTypes: []string{},
		ClusterIDs: []string{}, Enabled: e.Enabled, CreatedAt: e.CreatedAt, UpdatedAt: e.UpdatedAt, Secret: secret,
		Deliveries: apiv1.DeliveryCounts{Pending: counts.Pending, Delivered: counts.Delivered, Failed: counts.Failed}}
	for _, t := range e.EventTypes {
		v.EventTypes = append(v.EventTypes, string(t))
	}
	v.ClusterIDs = append(v.ClusterIDs, e.ClusterIDs...)
	if e.Signs(now) {
		v.PreviousSecretExpiresAt = timePtr(e.PreviousUntil)
	}
	return v
}

func deliveryView(d domain.WebhookDelivery) apiv1.WebhookDelivery {
	return apiv1.WebhookDelivery{WebhookID: d.MessageID, EventID: d.EventID, Type: d.Type, State: string(d.State),
		Attempts: d.Attempts, LastStatusCode: d.LastStatus, LastError: d.LastError,
		LatencyMS: float64(d.Latency.Microseconds()) / 1000, CreatedAt: d.CreatedAt,
		LastAttemptAt: timePtr(d.LastAt), NextAttemptAt: timePtr(d.NextAt)}
}

// eventTypes checks and normalises a list of event types: reasons, or
// CloudEvents types of them, each once.
func eventTypes(in []string) ([]domain.EventReason, error) {
	var out []domain.EventReason
	for _, t := range in {
		r := domain.EventReason(strings.TrimPrefix(t, webhook.TypePrefix))
		if !domain.KnownReason(r) {
			known := make([]string, len(domain.EventReasons))
			for i, k := range domain.EventReasons {
				known[i] = string(k)
			}
			return nil, invalid("event_types", "unknown event type %s; the types are %s (or the same with the prefix %s)",
				quoteShort(t), strings.Join(known, ", "), webhook.TypePrefix)
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// clusterIDs checks that each of ids is a cluster of project, each once.
func clusterIDs(ctx context.Context, r store.Reader, project string, ids []string) ([]string, error) {
	if len(ids) > maxWebhookClusters {
		return nil, invalid("cluster_ids", "at most %d clusters per endpoint; leave cluster_ids out for every cluster of the project", maxWebhookClusters)
	}
	var out []string
	for _, id := range ids {
		c, err := r.GetCluster(ctx, id)
		if errors.Is(err, domain.ErrNotFound) || (err == nil && c.ProjectID != project) {
			return nil, invalid("cluster_ids", "cluster %s not found in project %s", quoteShort(id), project)
		}
		if err != nil {
			return nil, err
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

func checkEndpointName(name string) error {
	if !domain.ValidName(name) {
		return invalid("name", "name %s is not valid: 1-63 letters, digits, '_', '.' or '-', starting with a letter or digit", quoteShort(name))
	}
	return nil
}

// nameFree refuses a name another endpoint of the project has.
func nameFree(ctx context.Context, tx store.Tx, e domain.WebhookEndpoint) error {
	eps, err := tx.ListWebhookEndpoints(ctx, e.ProjectID)
	if err != nil {
		return err
	}
	for _, o := range eps {
		if o.ID != e.ID && o.Name == e.Name {
			return &clientError{http.StatusConflict, apiv1.CodeConflict,
				fmt.Sprintf("project %s already has a webhook endpoint named %s (%s)", e.ProjectID, quoteShort(e.Name), o.ID)}
		}
	}
	return nil
}

func (s *Server) needSealer() error {
	if s.Sealer == nil {
		return &clientError{http.StatusServiceUnavailable, apiv1.CodeUnavailable,
			"this server has no secret key to seal webhook signing secrets with"}
	}
	return nil
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err == nil {
		err = projectExists(ctx, s.store, project)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	eps, err := s.store.ListWebhookEndpoints(ctx, project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	counts, err := s.store.CountWebhookDeliveries(ctx, project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	out := apiv1.WebhookEndpointList{Endpoints: make([]apiv1.WebhookEndpoint, 0, len(eps))}
	for _, e := range eps {
		out.Endpoints = append(out.Endpoints, endpointView(e, counts[e.ID], now, ""))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	var e domain.WebhookEndpoint
	if err == nil {
		e, err = endpointIn(ctx, s.store, project, r.PathValue("webhook"))
	}
	var counts map[string]store.DeliveryCounts
	if err == nil {
		counts, err = s.store.CountWebhookDeliveries(ctx, project)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, endpointView(e, counts[e.ID], s.wall.Now(), ""))
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req apiv1.CreateWebhookRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	e := domain.WebhookEndpoint{ID: s.ctrl.NewID("wh-"), ProjectID: project, Name: req.Name, URL: req.URL, Enabled: true,
		CreatedAt: now, UpdatedAt: now}
	if req.Enabled != nil {
		e.Enabled = *req.Enabled
	}
	switch {
	case req.Name == "":
		err = invalid("name", "name is required: what the endpoint is for (ray-autoscaler, sky)")
	case req.URL == "":
		err = invalid("url", "url is required: where deliveries are POSTed (https://…)")
	default:
		err = checkEndpointName(req.Name)
	}
	if err == nil {
		err = s.checkWebhookURL(req.URL)
	}
	if err == nil {
		e.EventTypes, err = eventTypes(req.EventTypes)
	}
	if err == nil {
		err = s.needSealer()
	}
	if err == nil {
		err = s.admitStorage(ctx, project, int64(domain.StorageRowBytes+len(e.Name)+len(e.URL)+len(strings.Join(req.ClusterIDs, ","))+20*len(e.EventTypes)))
	}
	var secret string
	if err == nil {
		secret, e.Secret, err = webhook.NewSecret(s.Sealer, e.ID)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if err := projectExists(ctx, tx, project); err != nil {
			return err
		}
		eps, err := tx.ListWebhookEndpoints(ctx, project)
		if err != nil {
			return err
		}
		if len(eps) >= MaxWebhookEndpoints {
			return conflict("project %s has %d webhook endpoints, the most a project may have; delete one first", project, len(eps))
		}
		if e.ClusterIDs, err = clusterIDs(ctx, tx, project, req.ClusterIDs); err != nil {
			return err
		}
		if err := nameFree(ctx, tx, e); err != nil {
			return err
		}
		return tx.CreateWebhookEndpoint(ctx, e)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("webhook endpoint created", "endpoint", e.ID, "name", e.Name, "project", project, "by", p.tokenID)
	writeJSON(w, http.StatusCreated, endpointView(e, store.DeliveryCounts{}, now, secret))
}

// checkWebhookURL checks a URL against the address policy, for the url
// field.
func (s *Server) checkWebhookURL(raw string) error {
	if _, err := s.Webhooks.Policy.CheckURL(raw); err != nil {
		return invalid("url", "%s", err.Error())
	}
	return nil
}

func (s *Server) updateWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req apiv1.UpdateWebhookRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	var types []domain.EventReason
	switch {
	case req.Name == nil && req.URL == nil && req.EventTypes == nil && req.ClusterIDs == nil && req.Enabled == nil:
		err = invalid("", "nothing to update; set name, url, event_types, cluster_ids and/or enabled")
	case req.Name != nil:
		err = checkEndpointName(*req.Name)
	}
	if err == nil && req.URL != nil {
		err = s.checkWebhookURL(*req.URL)
	}
	if err == nil && req.EventTypes != nil {
		types, err = eventTypes(*req.EventTypes)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	var e domain.WebhookEndpoint
	err = s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if e, err = endpointIn(ctx, tx, project, r.PathValue("webhook")); err != nil {
			return err
		}
		if req.Name != nil {
			e.Name = *req.Name
		}
		if req.URL != nil {
			e.URL = *req.URL
		}
		if req.EventTypes != nil {
			e.EventTypes = types
		}
		if req.ClusterIDs != nil {
			if e.ClusterIDs, err = clusterIDs(ctx, tx, project, *req.ClusterIDs); err != nil {
				return err
			}
		}
		if req.Enabled != nil {
			e.Enabled = *req.Enabled
		}
		if err := nameFree(ctx, tx, e); err != nil {
			return err
		}
		e.UpdatedAt = now
		return tx.UpdateWebhookEndpoint(ctx, e)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeEndpoint(w, r, http.StatusOK, e, "")
}

// writeEndpoint answers with e and its delivery counts.
func (s *Server) writeEndpoint(w http.ResponseWriter, r *http.Request, status int, e domain.WebhookEndpoint, secret string) {
	counts, err := s.store.CountWebhookDeliveries(r.Context(), e.ProjectID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, status, endpointView(e, counts[e.ID], s.wall.Now(), secret))
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err == nil {
		err = decodeEmpty(r.Body)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var e domain.WebhookEndpoint
	err = s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if e, err = endpointIn(ctx, tx, project, r.PathValue("webhook")); err != nil {
			return err
		}
		return tx.DeleteWebhookEndpoint(ctx, e.ID)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("webhook endpoint deleted", "endpoint", e.ID, "name", e.Name, "project", project, "by", p.tokenID)
	writeJSON(w, http.StatusOK, endpointView(e, store.DeliveryCounts{}, s.wall.Now(), ""))
}

// rotateWebhook gives the endpoint a new secret, answered this once; the
// one it replaces keeps signing next to it for the overlap asked for
// (24 h unless told otherwise), so receivers can switch without losing
// a delivery.
func (s *Server) rotateWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, err := readBody(r.Body)
	var req apiv1.RotateWebhookSecretRequest
	if err == nil && len(strings.TrimSpace(string(data))) > 0 {
		err = decodeStrict(bytesReader(data), &req)
	}
	overlap := webhook.RotationOverlap
	if err == nil && req.PreviousExpiresIn != "" {
		overlap, err = time.ParseDuration(req.PreviousExpiresIn)
		if err != nil || overlap < 0 || overlap > webhook.RotationOverlap {
			err = invalid("previous_expires_in", "previous_expires_in %s must be a duration from 0s (the old secret stops at once) to 24h (the default)", quoteShort(req.PreviousExpiresIn))
		}
	}
	if err == nil {
		err = s.needSealer()
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	var e domain.WebhookEndpoint
	var secret string
	err = s.store.Update(ctx, func(tx store.Tx) error {
		var err error
		if e, err = endpointIn(ctx, tx, project, r.PathValue("webhook")); err != nil {
			return err
		}
		var sealed []byte
		if secret, sealed, err = webhook.NewSecret(s.Sealer, e.ID); err != nil {
			return err
		}
		e.PreviousSecret, e.PreviousUntil = nil, time.Time{}
		if overlap > 0 {
			e.PreviousSecret, e.PreviousUntil = e.Secret, now.Add(overlap)
		}
		e.Secret, e.UpdatedAt = sealed, now
		return tx.UpdateWebhookEndpoint(ctx, e)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("webhook secret rotated", "endpoint", e.ID, "name", e.Name, "project", project, "previous_signs_for", overlap, "by", p.tokenID)
	s.writeEndpoint(w, r, http.StatusOK, e, secret)
}

// testWebhook makes a test message and its delivery to the endpoint, due
// at once (enabled or not, whatever its event types), and answers with
// the delivery: its outcome is in the endpoint's deliveries.
func (s *Server) testWebhook(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err == nil {
		err = decodeEmpty(r.Body)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.wall.Now()
	var d domain.WebhookDelivery
	err = s.store.Update(ctx, func(tx store.Tx) error {
		e, err := endpointIn(ctx, tx, project, r.PathValue("webhook"))
		if err != nil {
			return err
		}
		if !e.Enabled {
			return conflict("webhook endpoint %s is disabled: enable it first (a test goes the way deliveries go)", e.ID)
		}
		pending, err := tx.ListWebhookDeliveries(ctx, store.DeliveryFilter{EndpointID: e.ID, State: domain.DeliveryPending,
			Type: webhook.TestType, Limit: MaxPendingTests})
		if err != nil {
			return err
		}
		if len(pending) >= MaxPendingTests {
			return conflict("webhook endpoint %s has %d test deliveries pending, the most it may (each is retried while the endpoint fails, for up to a day); "+
				"see why with GET /v1/webhooks/%s/deliveries?state=pending, and test again once one is delivered or failed", e.ID, len(pending), e.ID)
		}
		m, err := webhook.NewTestMessage(e, testMessageID(), now)
		if err != nil {
			return err
		}
		d = domain.WebhookDelivery{EndpointID: e.ID, MessageID: m.ID, Type: m.Type, State: domain.DeliveryPending,
			NextAt: now, CreatedAt: now}
		if err := tx.AddWebhookMessages(ctx, []domain.WebhookMessage{m}); err != nil {
			return err
		}
		return tx.AddWebhookDeliveries(ctx, []domain.WebhookDelivery{d})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.Webhooks.OnMessage != nil {
		s.Webhooks.OnMessage()
	}
	writeJSON(w, http.StatusAccepted, deliveryView(d))
}

// testMessageID is a test message's ID: random, as no event names it.
func testMessageID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return "test-" + hex.EncodeToString(b[:])
}

func (s *Server) webhookDeliveries(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project, err := webhookScope(r, p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	f := store.DeliveryFilter{EndpointID: r.PathValue("webhook"), State: domain.DeliveryState(q.Get("state")), Limit: 100}
	switch f.State {
	case "", domain.DeliveryPending, domain.DeliveryDelivered, domain.DeliveryFailed:
	default:
		s.fail(w, r, invalid("state", "state must be pending, delivered or failed; got %s", quoteShort(string(f.State))))
		return
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 1 || f.Limit > maxDeliveriesListed {
			s.fail(w, r, invalid("limit", "limit must be between 1 and %d; got %s", maxDeliveriesListed, quoteShort(v)))
			return
		}
	}
	if _, err := endpointIn(ctx, s.store, project, f.EndpointID); err != nil {
		s.fail(w, r, err)
		return
	}
	ds, err := s.store.ListWebhookDeliveries(ctx, f)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.WebhookDeliveryList{Deliveries: make([]apiv1.WebhookDelivery, 0, len(ds))}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, deliveryView(d))
	}
	writeJSON(w, http.StatusOK, out)
}
