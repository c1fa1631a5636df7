package manager

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// The manager lists clusters at every commit with events: the list must
// not index the fleet's nodes and machines, which only View needs.
func TestClustersDoesNotIndexTheFleet(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: now}); err != nil {
			return err
		}
		if err := tx.CreateMachine(ctx, domain.Machine{ID: "m", Region: "r", GPUType: "g", GPUs: 8, CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateCluster(ctx, domain.Cluster{ID: "a", Name: "a", ProjectID: "p", Region: "r", GPUType: "g",
			Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, CreatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	f := &StoreFleet{Store: st}
	cs, err := f.Clusters(ctx)
	if err != nil || len(cs) != 1 || cs[0].ID != "a" {
		t.Fatalf("clusters %+v, %v", cs, err)
	}
	if f.idx != nil {
		t.Fatal("listing the clusters indexed the fleet")
	}
	v, err := f.View(ctx, "a")
	if err != nil || v.Cluster.ID != "a" || v.GPUsPerNode != 8 {
		t.Fatalf("view %+v, %v", v, err)
	}
}
