package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/postgres"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

// BenchmarkUsageByLabel serves GET /v1/usage?group_by=label:team over a
// month of a fleet of gpus GPUs in 8-GPU nodes and 2,000 clusters (50
// projects of 40), on SQLite and on PostgreSQL: each node has two usage
// records (a reclaim or a conversion splits its month) and runs two 4-GPU
// pods a day, each with a team label of 20: 60 work spans a node. The
// operator's query covers the whole fleet; a project's its 40 clusters;
// first from the raw rows, then (rolled) with the month rolled up, the
// time the roller took reported once.
func BenchmarkUsageByLabel(b *testing.B) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, gpus := range []int{10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/gpus=%d", backend, gpus), func(b *testing.B) {
				s, from, spans := allocationFixture(b, backend, gpus/8, 2000)
				to := from.AddDate(0, 1, 0)
				for _, who := range []struct{ name, query string }{{"fleet", ""}, {"project", "&project_id=p-07"}, {"rolled", ""}, {"rolled/project", "&project_id=p-07"}} {
					if who.name == "rolled" {
						rollBench(b, s, from)
					}
					b.Run(who.name, func(b *testing.B) {
						path := "/v1/usage" + q(from, to, "group_by", "label:team") + who.query
						for i := 0; i < b.N; i++ {
							w := httptest.NewRecorder()
							req := httptest.NewRequest("GET", path, nil)
							req.Header.Set("Authorization", "Bearer "+adminToken)
							s.ServeHTTP(w, req)
							if w.Code != 200 {
								b.Fatalf("%d: %s", w.Code, w.Body)
							}
						}
						b.ReportMetric(float64(spans), "spans")
					})
				}
			})
		}
	}
}

// allocationFixture writes nodes' usage and work spans of November 2026
// into a store of backend through the store's own bulk writes, and
// returns a server on it.
func allocationFixture(b testing.TB, backend string, nodes, clusters int) (*Server, time.Time, int) {
	b.Helper()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	s, st, _ := openFixture(b, backend, from, clusters)
	spans := writeMonth(b, st, from, nodes, clusters)
	return s, from, spans
}

// openFixture is a store of backend with the price book (a price change
// on the 11th of from's month), 50 projects and their clusters, and a
// server on it whose clock reads two months after from; on PostgreSQL,
// the database's DSN.
func openFixture(b testing.TB, backend string, from time.Time, clusters int) (*Server, store.Store, string) {
	b.Helper()
	ctx := context.Background()
	var st store.Store
	var err error
	dsn := ""
	if backend == "postgres" {
		dsn = postgres.TestDSN(b)
		st, err = postgres.Open(ctx, dsn)
	} else {
		st, err = sqlite.Open(ctx, filepath.Join(b.TempDir(), "db"))
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	err = st.Update(ctx, func(tx store.Tx) error {
		for _, p := range []domain.Price{
			{ID: "od", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.49"},
			{ID: "od2", Kind: domain.PriceOnDemand, GPUType: "H100", Value: "2.29", EffectiveFrom: from.AddDate(0, 0, 10)},
			{ID: "disc", Kind: domain.PricePreemptibleDiscount, Value: "50"},
		} {
			if err := tx.CreatePrice(ctx, p); err != nil {
				return err
			}
		}
		for i := range 50 {
			if err := tx.CreateProject(ctx, domain.Project{ID: fmt.Sprintf("p-%02d", i), CreatedAt: from}); err != nil {
				return err
			}
		}
		for c := range clusters {
			cl := domain.Cluster{ID: fmt.Sprintf("c-%04d", c), Name: fmt.Sprintf("c-%04d", c), ProjectID: fmt.Sprintf("p-%02d", c%50),
				Region: "us-east", GPUType: "H100", CreatedAt: from}
			if err := tx.CreateCluster(ctx, cl); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := BootstrapOperator(ctx, st, adminToken, time.Now()); err != nil {
		b.Fatal(err)
	}
	return New(st, nil, clock.NewFake(from.AddDate(0, 2, 0)), clock.Real{}, nil), st, dsn
}

// rollBench rolls the fixture's month up, as the server's roller does.
func rollBench(b *testing.B, s *Server, from time.Time) {
	b.Helper()
	start := time.Now()
	for {
		n, err := s.RollPass(context.Background(), from.AddDate(0, 2, 0), 1000)
		if err != nil {
			b.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	b.Logf("rolled the month up in %s", time.Since(start).Round(time.Millisecond))
}

// writeMonth writes a month from from of nodes nodes in clusters
// clusters through the store's bulk writes: each node two usage records
// (a reclaim or a conversion splits its month) and two 4-GPU pods a day,
// each with a team label of 20. It returns the spans written.
func writeMonth(b testing.TB, st store.Store, from time.Time, nodes, clusters int) int {
	b.Helper()
	ctx := context.Background()
	const day = 24 * time.Hour
	end := from.AddDate(0, 1, 0)
	days := int(end.Sub(from) / day)
	spans := 0
	const batch = 500 // nodes a transaction
	for first := 0; first < nodes; first += batch {
		var us []domain.UsageRecord
		var ws []domain.WorkSpan
		for i := first; i < min(first+batch, nodes); i++ {
			c := i % clusters
			project := fmt.Sprintf("p-%02d", c%50)
			node, cluster := fmt.Sprintf("n-%06d", i), fmt.Sprintf("c-%04d", c)
			cut := from.Add(15*day + time.Duration(i%3600)*time.Second)
			for j, r := range [][2]time.Time{{from, cut}, {cut, end}} {
				class := domain.Standard
				if (i+j)%2 == 1 {
					class = domain.Preemptible
				}
				us = append(us, domain.UsageRecord{NodeID: node, NodeName: node, ClusterID: cluster, ClusterName: cluster, ProjectID: project,
					Region: "us-east", GPUType: "H100", Class: class, BillingType: domain.BillingOnDemand, GPUs: 8, Start: r[0], End: r[1], Final: true})
			}
			for d := range days {
				for k := range 2 {
					s := from.Add(time.Duration(d)*day + time.Duration(k)*time.Hour)
					key := fmt.Sprintf("%s-%s-%d", node, s.Format("0102"), k)
					ws = append(ws, domain.WorkSpan{ProjectID: project, ClusterID: cluster, NodeID: node, End: s.Add(22 * time.Hour),
						Running: domain.Running{Key: key, Namespace: "ml", Name: key, Job: "job/ml/" + key, GPUs: 4, Start: s,
							Labels: map[string]string{"team": fmt.Sprintf("team-%02d", (i+d+k)%20), "app": "trainer"}}})
				}
			}
		}
		spans += len(ws)
		err := st.Update(ctx, func(tx store.Tx) error {
			if err := tx.PutUsages(ctx, us); err != nil {
				return err
			}
			return tx.AddWorkSpans(ctx, ws)
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return spans
}
