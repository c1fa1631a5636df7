package memstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// ProjectStorage counts as sqlstore does: the text's length and
// domain.StorageRowBytes a row (lists as the SQL backends join them).
func (v view) ProjectStorage(ctx context.Context) ([]domain.StorageUse, error) {
	if err := v.check(ctx); err != nil {
		return nil, err
	}
	use := map[[2]string]*domain.StorageUse{}
	add := func(project, table string, n int) {
		k := [2]string{project, table}
		if use[k] == nil {
			use[k] = &domain.StorageUse{ProjectID: project, Table: table}
		}
		use[k].Rows++
		use[k].Bytes += int64(domain.StorageRowBytes + n)
	}
	v.st.spans.each(func(_ int64, s *domain.WorkSpan) bool {
		add(s.ProjectID, "work_spans", len(s.Key)+len(s.Namespace)+len(s.Name)+len(s.Job)+len(s.Account)+len(store.LabelsText(s.Labels)))
		return true
	})
	v.st.budgets.each(func(_ string, b *domain.Budget) bool {
		add(b.ProjectID, "budgets", len(b.Name)+len(b.Label)+len(b.Amount)+len(thresholdsText(b.Thresholds)))
		return true
	})
	v.st.alerts.each(func(_ int64, a *domain.BudgetAlert) bool {
		add(a.ProjectID, "budget_alerts", len(a.Name)+len(a.Key)+len(a.Message)+len(a.Spend)+len(a.Forecast))
		return true
	})
	v.st.endpoints.each(func(_ string, e *domain.WebhookEndpoint) bool {
		types := make([]string, len(e.EventTypes))
		for i, t := range e.EventTypes {
			types[i] = string(t)
		}
		add(e.ProjectID, "webhook_endpoints", len(e.Name)+len(e.URL)+len(strings.Join(types, ","))+len(strings.Join(e.ClusterIDs, ",")))
		return true
	})
	v.st.deliveries.each(func(_ ss, d *domain.WebhookDelivery) bool {
		if e, ok := v.st.endpoints.get(d.EndpointID); ok {
			add(e.ProjectID, "webhook_deliveries", len(d.LastError))
		}
		return true
	})
	v.st.tokens.each(func(_ string, t *domain.Token) bool {
		if t.ProjectID != "" {
			add(t.ProjectID, "tokens", len(t.Name))
		}
		return true
	})
	out := make([]domain.StorageUse, 0, len(use))
	for _, u := range use {
		out = append(out, *u)
	}
	slices.SortFunc(out, func(a, b domain.StorageUse) int {
		return strings.Compare(a.ProjectID+"\x00"+a.Table, b.ProjectID+"\x00"+b.Table)
	})
	return out, nil
}

// thresholdsText is a budget's thresholds as the SQL backends store them.
func thresholdsText(xs []int) string {
	b, _ := json.Marshal(xs)
	return string(b)
}

func (s *Store) ProjectStorage(ctx context.Context) ([]domain.StorageUse, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ProjectStorage(ctx)
}

func (t *tx) SetStorageQuota(ctx context.Context, projectID string, bytes int64) error {
	if err := t.write(ctx); err != nil {
		return err
	}
	defer t.unlock()
	p, ok := t.st.projects.get(projectID)
	if !ok {
		return fmt.Errorf("set the storage quota of project %s: %w", projectID, domain.ErrNotFound)
	}
	c := *p
	c.StorageQuota = max(bytes, 0)
	t.st.projects.set(t.w, c.ID, &c)
	t.st.projectOrder.set(t.w, tid{tkey(c.CreatedAt), c.ID}, &c)
	return nil
}

func (t *tx) PruneProjectSpans(ctx context.Context, projectID string, limit int) (int, error) {
	if err := t.write(ctx); err != nil {
		return 0, err
	}
	defer t.unlock()
	until := t.rolledUntil()
	if limit <= 0 || until.IsZero() {
		return 0, nil
	}
	var gone []*domain.WorkSpan
	t.st.spansByProject.ascend(&sttid{s: projectID}, func(k sttid, s *domain.WorkSpan) bool {
		if k.s != projectID {
			return false
		}
		if !s.End.IsZero() && !s.End.After(until) {
			gone = append(gone, s)
		}
		return len(gone) < limit
	})
	t.dropSpans(gone)
	return len(gone), nil
}

var _ store.StorageReader = (*Store)(nil)
