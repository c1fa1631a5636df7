package memstore

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The Store reads the committed version, without a lock: an Update in
// progress writes a version of its own, which readers see once it
// commits.

func (s *Store) GetProject(ctx context.Context, id string) (domain.Project, error) {
	return s.view().GetProject(ctx, id)
}
func (s *Store) ListProjects(ctx context.Context) ([]domain.Project, error) {
	return s.view().ListProjects(ctx)
}
func (s *Store) TokenByHash(ctx context.Context, hash string) (domain.Token, error) {
	return s.view().TokenByHash(ctx, hash)
}
func (s *Store) GetToken(ctx context.Context, id string) (domain.Token, error) {
	return s.view().GetToken(ctx, id)
}
func (s *Store) ListTokens(ctx context.Context, projectID string) ([]domain.Token, error) {
	return s.view().ListTokens(ctx, projectID)
}
func (s *Store) ListReservations(ctx context.Context) ([]domain.Reservation, error) {
	return s.view().ListReservations(ctx)
}
func (s *Store) GetMachine(ctx context.Context, id string) (domain.Machine, error) {
	return s.view().GetMachine(ctx, id)
}
func (s *Store) ListMachines(ctx context.Context) ([]domain.Machine, error) {
	return s.view().ListMachines(ctx)
}
func (s *Store) GetCluster(ctx context.Context, id string) (domain.Cluster, error) {
	return s.view().GetCluster(ctx, id)
}
func (s *Store) GetClusterRecord(ctx context.Context, id string) (domain.Cluster, error) {
	return s.view().GetClusterRecord(ctx, id)
}
func (s *Store) ListClusters(ctx context.Context, projectID string) ([]domain.Cluster, error) {
	return s.view().ListClusters(ctx, projectID)
}
func (s *Store) GetKubeconfig(ctx context.Context, clusterID string) ([]byte, error) {
	return s.view().GetKubeconfig(ctx, clusterID)
}
func (s *Store) GetNode(ctx context.Context, id string) (domain.Node, error) {
	return s.view().GetNode(ctx, id)
}
func (s *Store) ListNodes(ctx context.Context, f store.NodeFilter) ([]domain.Node, error) {
	return s.view().ListNodes(ctx, f)
}
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]domain.Event, error) {
	return s.view().ListEvents(ctx, f)
}
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]domain.UsageRecord, error) {
	return s.view().ListUsage(ctx, f)
}
func (s *Store) ScanUsage(ctx context.Context, f store.UsageFilter, fn func(domain.UsageRecord) error) error {
	return s.view().ScanUsage(ctx, f, fn)
}
func (s *Store) ListPrices(ctx context.Context) ([]domain.Price, error) {
	return s.view().ListPrices(ctx)
}
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (domain.WebhookEndpoint, error) {
	return s.view().GetWebhookEndpoint(ctx, id)
}
func (s *Store) ListWebhookEndpoints(ctx context.Context, projectID string) ([]domain.WebhookEndpoint, error) {
	return s.view().ListWebhookEndpoints(ctx, projectID)
}
func (s *Store) ListWebhookDeliveries(ctx context.Context, f store.DeliveryFilter) ([]domain.WebhookDelivery, error) {
	return s.view().ListWebhookDeliveries(ctx, f)
}
func (s *Store) CountWebhookDeliveries(ctx context.Context, projectID string) (map[string]store.DeliveryCounts, error) {
	return s.view().CountWebhookDeliveries(ctx, projectID)
}
func (s *Store) GetWebhookMessage(ctx context.Context, id string) (domain.WebhookMessage, error) {
	return s.view().GetWebhookMessage(ctx, id)
}
func (s *Store) DueWebhookDeliveries(ctx context.Context, now time.Time, perEndpoint, limit int) ([]domain.WebhookDelivery, error) {
	return s.view().DueWebhookDeliveries(ctx, now, perEndpoint, limit)
}
func (s *Store) WebhookCursor(ctx context.Context) (int64, error) { return s.view().WebhookCursor(ctx) }
func (s *Store) ListLostWork(ctx context.Context, f store.LostWorkFilter) ([]domain.LostWork, error) {
	return s.view().ListLostWork(ctx, f)
}
func (s *Store) ScanWorkSpans(ctx context.Context, f store.WorkSpanFilter, fn func(domain.WorkSpan) error) error {
	return s.view().ScanWorkSpans(ctx, f, fn)
}
func (s *Store) ListBudgets(ctx context.Context, projectID string) ([]domain.Budget, error) {
	return s.view().ListBudgets(ctx, projectID)
}
func (s *Store) ListBudgetAlerts(ctx context.Context, f store.BudgetAlertFilter) ([]domain.BudgetAlert, error) {
	return s.view().ListBudgetAlerts(ctx, f)
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
				t.wrote = true
				t.putToken(&next)
			}
		}
		return nil
	}, false)
	if err != nil {
		return fmt.Errorf("memstore: record token uses: %w", err)
	}
	return nil
}
