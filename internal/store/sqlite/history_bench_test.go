package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// Live state of the history benchmark: liveNodes ready nodes, one per
// machine, spread over historyClusters clusters.
const (
	liveNodes       = 200
	historyClusters = 10
)

// BenchmarkHistory measures the live-state reads — Snapshot, the meter's
// work list (ListNodes Unmetered) and a meter cut — on a store whose
// nodes table holds nothing but the live nodes, on one that also holds
// 1,000,000 removed, fully metered nodes (the partial indexes keep the
// reads off them), and on the same store once ArchiveNodes has moved them
// to node_history.
func BenchmarkHistory(b *testing.B) {
	const removed = 1_000_000
	b.Run("removed=0", func(b *testing.B) {
		st, clk := historyFixture(b, 0)
		benchLive(b, st, clk)
	})
	st, clk := historyFixture(b, removed)
	b.Run(fmt.Sprintf("removed=%d/hot", removed), func(b *testing.B) { benchLive(b, st, clk) })
	moved := 0
	for {
		var n int
		err := st.Update(context.Background(), func(tx store.Tx) (err error) {
			n, err = tx.ArchiveNodes(context.Background(), clk.Now(), 50_000)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		if moved += n; n == 0 {
			break
		}
	}
	if moved != removed {
		b.Fatalf("archived %d of %d", moved, removed)
	}
	b.Run(fmt.Sprintf("removed=%d/archived", removed), func(b *testing.B) { benchLive(b, st, clk) })
}

func benchLive(b *testing.B, st store.Store, clk *clock.Fake) {
	ctx := context.Background()
	b.Run("Snapshot", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			snap, err := st.Snapshot(ctx)
			if err != nil || len(snap.Nodes) != liveNodes {
				b.Fatalf("%d nodes, %v", len(snap.Nodes), err)
			}
		}
	})
	b.Run("Unmetered", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ns, err := st.ListNodes(ctx, store.NodeFilter{Unmetered: true})
			if err != nil || len(ns) != liveNodes {
				b.Fatalf("%d nodes, %v", len(ns), err)
			}
		}
	})
	b.Run("Cut", func(b *testing.B) {
		m := metering.New(st, clk, nil)
		if err := m.Cut(ctx); err != nil { // the first cut also loads the open records
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			clk.Step(time.Second)
			if err := m.Cut(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// historyFixture makes a store with the live nodes and removed removed
// nodes (each with its final usage record, so metered as PutUsage would
// mark it), inserted with prepared statements in one transaction.
func historyFixture(b *testing.B, removed int) (store.Store, *clock.Fake) {
	b.Helper()
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "db")
	st, err := sqlite.Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0.AddDate(0, 6, 0))
	err = st.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: "p", CreatedAt: t0}); err != nil {
			return err
		}
		for c := 0; c < historyClusters; c++ {
			err := tx.CreateCluster(ctx, domain.Cluster{ID: fmt.Sprintf("c-%d", c), Name: fmt.Sprintf("c%d", c),
				ProjectID: "p", Region: "r", GPUType: "H100", Type: domain.ClusterKubernetes,
				BillingType: domain.BillingOnDemand, Status: domain.StatusReady, CreatedAt: t0})
			if err != nil {
				return err
			}
		}
		for m := 0; m < liveNodes; m++ {
			if err := tx.CreateMachine(ctx, domain.Machine{ID: fmt.Sprintf("m-%03d", m), Region: "r", GPUType: "H100", GPUs: 8, CreatedAt: t0}); err != nil {
				return err
			}
		}
		for i := 0; i < liveNodes; i++ {
			at := t0.AddDate(0, 5, 0).Add(time.Duration(i) * time.Second)
			err := tx.CreateNode(ctx, domain.Node{ID: fmt.Sprintf("live-%03d", i), ClusterID: fmt.Sprintf("c-%d", i%historyClusters),
				MachineID: fmt.Sprintf("m-%03d", i), Name: fmt.Sprintf("gpu-%d", i), Class: domain.Preemptible, GPUs: 8,
				State: domain.NodeReady, CreatedAt: at, ProvisioningAt: at, ReadyAt: at.Add(time.Minute)})
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if removed > 0 {
		insertRemoved(b, path, t0, removed)
	}
	return st, clk
}

func insertRemoved(b *testing.B, path string, t0 time.Time, n int) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", path+"?_pragma=foreign_keys(1)")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	nodes, err := tx.PrepareContext(ctx, `INSERT INTO nodes (id, cluster_id, machine_id, name, class, gpus, state,
		created_at, provisioning_at, ready_at, removed_at, outcome, metered)
		VALUES (?, ?, ?, ?, 'preemptible', 8, 'removed', ?, ?, ?, ?, 'deadline', 1)`)
	if err != nil {
		b.Fatal(err)
	}
	usage, err := tx.PrepareContext(ctx, `INSERT INTO usage (node_id, node_name, cluster_id, cluster_name, project_id,
		region, gpu_type, class, billing_type, gpus, start_at, end_at, final)
		VALUES (?, ?, ?, ?, 'p', 'r', 'H100', 'preemptible', 'ON_DEMAND', 8, ?, ?, 1)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		id, name, c := fmt.Sprintf("old-%07d", i), fmt.Sprintf("gpu-old-%d", i), i%historyClusters
		created := t0.Add(time.Duration(i) * 10 * time.Second).UnixMicro()
		ready, gone := created+60_000_000, created+3_600_000_000
		if _, err := nodes.ExecContext(ctx, id, fmt.Sprintf("c-%d", c), fmt.Sprintf("m-%03d", i%liveNodes), name,
			created, created, ready, gone); err != nil {
			b.Fatal(err)
		}
		if _, err := usage.ExecContext(ctx, id, name, fmt.Sprintf("c-%d", c), fmt.Sprintf("c%d", c), ready, gone); err != nil {
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
