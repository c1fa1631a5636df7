package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The Store reads the committed version, holding DB.mu shared while it
// reads: an Update in progress writes the database under it, one write
// at a time, and a reader that comes while it is open reads the version
// it began with (see DB.committed); readers see an Update's writes once
// it commits.

func (s *Store) GetProject(ctx context.Context, id string) (domain.Project, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetProject(ctx, id)
}
func (s *Store) ListProjects(ctx context.Context) ([]domain.Project, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListProjects(ctx)
}
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Token, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.TokenByHash(ctx, hash)
}
func (s *Store) GetToken(ctx context.Context, id string) (domain.Token, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetToken(ctx, id)
}
func (s *Store) ListTokens(ctx context.Context, projectID string) ([]domain.Token, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListTokens(ctx, projectID)
}
func (s *Store) ListReservations(ctx context.Context) ([]domain.Reservation, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListReservations(ctx)
}
func (s *Store) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetMachine(ctx, id)
}
func (s *Store) ListMachines(ctx context.Context) ([]domain.Machine, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListMachines(ctx)
}
func (s *Store) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetCluster(ctx, id)
}
func (s *Store) GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetClusterRecord(ctx, id)
}
func (s *Store) ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListClusters(ctx, projectID)
}
func (s *Store) GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetKubeconfig(ctx, clusterID)
}
func (s *Store) GetNode(ctx context.Context, id string) (domain.Node, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetNode(ctx, id)
}
func (s *Store) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListNodes(ctx, f)
}
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]domain.Event, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListEvents(ctx, f)
}
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]domain.UsageRecord, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListUsage(ctx, f)
}
func (s *Store) ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ScanUsage(ctx, f, fn)
}
func (s *Store) ListPrices(ctx context.Context) ([]domain.Price, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListPrices(ctx)
}
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetWebhookEndpoint(ctx, id)
}
func (s *Store) ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListWebhookEndpoints(ctx, projectID)
}
func (s *Store) ListWebhookDeliveries(ctx context.Context, f store.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListWebhookDeliveries(ctx, f)
}
func (s *Store) CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]store.DeliveryCounts, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.CountWebhookDeliveries(ctx, projectID)
}
func (s *Store) GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.GetWebhookMessage(ctx, id)
}
func (s *Store) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.DueWebhookDeliveries(ctx, now, perEndpoint, limit)
}
func (s *Store) WebhookCursor(ctx context.Context) (int64, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.WebhookCursor(ctx)
}
func (s *Store) ListLostWork(ctx context.Context, f store.LostWorkFilter) ([]domain.LostWork, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListLostWork(ctx, f)
}
func (s *Store) ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ScanWorkSpans(ctx, f, fn)
}
func (s *Store) ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListBudgets(ctx, projectID)
}
func (s *Store) ListBudgetAlerts(ctx context.Context, f store.BudgetAlertFilter) ([]domain.BudgetAlert, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ListBudgetAlerts(ctx, f)
}

// TouchTokens records token uses in an Update of their own, never fenced:
// every server, leader or not, records the uses it saw. A time not after
// the stored one changes nothing; unknown hashes are skipped.
func (s *Store) TouchTokens(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	err := s.update(store.WithoutEpoch(ctx), func(t *tx) error {
		for hash, at := range used {
			tok, ok := t.st.tokenHashes.get(hash)
			if !ok || at.IsZero() {
				continue // a NULL time is after nothing
			}
			if at = dbTime(at); tok.LastUsedAt.IsZero() || tkey(tok.LastUsedAt) < tkey(at) {
				next := *tok
				next.LastUsedAt = at
				t.lock()
				t.putToken(&next)
				t.unlock()
			}
		}
		return nil
	}, false)
	if err != nil {
		return fmt.Errorf("memstore: record token uses: %w", err)
	}
	return nil
}

func (s *Store) ScanRollups(ctx context.Context, f store.RollupFilter, fn func(domain.Rollup) error) error {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.ScanRollups(ctx, f, fn)
}
func (s *Store) RollupState(ctx context.Context) (domain.RollupState, error) {
	v := s.read()
	defer s.d.mu.RUnlock()
	return v.RollupState(ctx)
}
