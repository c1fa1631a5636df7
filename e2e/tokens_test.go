package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/store/postgres"
)

// TestRevocationReachesEveryReplica: two servers share PostgreSQL; a
// token revoked (or rotated away) through one fails at once on both, and
// an operator token rotated through one works on both without a restart.
func TestRevocationReachesEveryReplica(t *testing.T) {
	t.Parallel()
	rs := startReplicas(t, t.TempDir(), postgres.TestDSN(t), 2)
	lead, _ := rs.leader(10 * time.Second)
	a, b := rs.servers[0], rs.servers[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p, err := apiClient(t, lead.URL, adminToken).CreateProject(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	scope := client.TokenScope{}
	ci, err := apiClient(t, a.URL, p.Token).NewToken(ctx, scope, apiv1.CreateTokenRequest{Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		if _, err := apiClient(t, s.URL, ci.Token).ListClusters(ctx, client.ListClustersOptions{}); err != nil {
			t.Fatalf("the new token on %s: %v", s.URL, err)
		}
	}
	// Revoked through b: refused on both at once.
	if _, err := apiClient(t, b.URL, p.Token).RevokeToken(ctx, scope, ci.TokenID); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		if _, err := apiClient(t, s.URL, ci.Token).ListClusters(ctx, client.ListClustersOptions{}); !client.IsUnauthorized(err) {
			t.Errorf("the revoked token on %s: %v, want 401", s.URL, err)
		}
	}
	// The operator token, rotated through a, works on b; the old one on
	// neither.
	ops, err := apiClient(t, a.URL, adminToken).ListTokens(ctx, scope)
	if err != nil || len(ops.Tokens) != 1 {
		t.Fatalf("operator tokens: %+v, %v", ops, err)
	}
	next, err := apiClient(t, a.URL, adminToken).RotateToken(ctx, scope, ops.Tokens[0].TokenID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*server{a, b} {
		if _, err := apiClient(t, s.URL, next.Token).ListProjects(ctx); err != nil {
			t.Errorf("the rotated operator token on %s: %v", s.URL, err)
		}
		if _, err := apiClient(t, s.URL, adminToken).ListProjects(ctx); !client.IsUnauthorized(err) {
			t.Errorf("the rotated-away operator token on %s: %v, want 401", s.URL, err)
		}
	}
}
