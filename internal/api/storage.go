package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/store"
)

// admitStorage refuses an optional write of bytes by project when its
// storage quota is reached (and tells, once, that it is).
func (s *Server) admitStorage(ctx context.Context, project string, bytes int64) error {
	if s.Quota == nil || s.Quota.Admit(project, bytes) {
		return nil
	}
	s.Quota.Tell(ctx)
	used, limit := int64(0), int64(0)
	for _, u := range s.Quota.Uses() {
		if u.ProjectID == project {
			used, limit = u.Used, u.Quota
		}
	}
	return &clientError{http.StatusForbidden, apiv1.CodeQuotaExceeded, echof(
		"project %s keeps %d bytes of its storage quota of %d: new budgets, webhook endpoints and work spans are refused until it is under (delete budgets or endpoints, or ask the operator for a larger quota; GET /v1/storage shows what counts)",
		project, used, limit)}
}

// storage serves GET /v1/storage: a project token its own project, the
// admin every project (or one, with project_id).
func (s *Server) storage(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project := r.URL.Query().Get("project_id")
	if !p.admin {
		if project != "" && project != p.project {
			s.fail(w, r, notFound("project %q not found", project))
			return
		}
		project = p.project
	}
	k := s.Quota
	if k == nil || k.Counted().IsZero() {
		// A follower (or a leader before its first count) counts now.
		def := int64(domain.DefaultStorageQuota)
		if k != nil {
			def = k.Default
		}
		k = &quota.Keeper{Store: s.store, Default: def}
		if err := k.Measure(ctx, s.clock.Now()); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	out := apiv1.Storage{CountedAt: k.Counted(), Projects: []apiv1.ProjectStorage{}}
	for _, u := range k.Uses() {
		if project != "" && u.ProjectID != project {
			continue
		}
		ps := apiv1.ProjectStorage{ProjectID: u.ProjectID, QuotaBytes: u.Quota, UsedBytes: u.Used, Over: u.Used >= u.Quota,
			Tables: []apiv1.StorageTable{}}
		for _, t := range u.Tables {
			ps.Tables = append(ps.Tables, apiv1.StorageTable{Table: t.Table, Rows: t.Rows, Bytes: t.Bytes})
		}
		out.Projects = append(out.Projects, ps)
	}
	if project != "" && len(out.Projects) == 0 {
		s.fail(w, r, notFound("project %q not found", project))
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// setStorageQuota serves PUT /v1/admin/projects/{project}/storage-quota.
func (s *Server) setStorageQuota(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	project := r.PathValue("project")
	var req apiv1.SetStorageQuotaRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Bytes < 0 || (req.Bytes > 0 && req.Bytes < minStorageQuota) {
		s.fail(w, r, invalid("bytes", "bytes must be 0 (the server's default) or at least %d (1 MiB); got %d", minStorageQuota, req.Bytes))
		return
	}
	err := s.store.Update(ctx, func(tx store.Tx) error { return tx.SetStorageQuota(ctx, project, req.Bytes) })
	if errors.Is(err, domain.ErrNotFound) {
		err = notFound("project %q not found", project)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if s.Quota != nil {
		s.Quota.SetQuota(project, req.Bytes)
	}
	w.WriteHeader(http.StatusNoContent)
}

// minStorageQuota is the least quota a project may be given: its
// budgets and endpoints fit many times.
const minStorageQuota = 1 << 20

// budgetBytes is what a new budget costs in the count, as the store
// counts it.
func budgetBytes(b domain.Budget) int64 {
	th, _ := json.Marshal(b.Thresholds)
	return int64(domain.StorageRowBytes + len(b.Name) + len(b.Label) + len(b.Amount) + len(th))
}

// QuotaReached writes a StorageQuotaReached event on each of the
// project's clusters (quota.Keeper's Reached): a courtesy, never a gate.
func (s *Server) QuotaReached(ctx context.Context, project string, used, limit int64) {
	cs, err := s.store.ListClusters(ctx, project)
	if err != nil || len(cs) == 0 {
		return
	}
	now := s.clock.Now()
	msg := fmt.Sprintf("project %s keeps %d bytes of its storage quota of %d: new work spans, budgets and webhook endpoints are refused until it is under; usage, billing, events and notices are not", project, used, limit)
	es := make([]domain.Event, len(cs))
	for i, c := range cs {
		es[i] = domain.Event{ID: s.ctrl.NewID("ev-"), ClusterID: c.ID, Reason: domain.ReasonStorageQuotaReached, Message: msg, Timestamp: now}
	}
	if err := s.store.Update(ctx, func(tx store.Tx) error { return tx.AddEvents(ctx, es) }); err != nil {
		s.log.Warn("could not record that a project reached its storage quota", "project", project, "err", err)
	}
}
