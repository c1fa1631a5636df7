package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/quota"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/worklog"
)

// churn is the worst tenant's cluster: every node runs a new pod at
// every look, with as many and as long labels as a span keeps.
type churn struct {
	nodes  []*domain.Node
	n      int
	labels map[string]string
}

func (c *churn) Snapshot(context.Context) (store.Snapshot, error) {
	return store.Snapshot{Clusters: []domain.Cluster{{ID: "c-0000", ProjectID: "p-00"}}, Nodes: c.nodes}, nil
}

func (c *churn) Running(_, node string) ([]domain.Running, bool) {
	c.n++
	return []domain.Running{{Key: fmt.Sprint("pod-", c.n), Namespace: "spam", Name: fmt.Sprint("pod-", c.n), GPUs: 8, Labels: c.labels}}, true
}

// BenchmarkWorstTenant measures another tenant's budget creates and
// usage reads (p99, through the API on SQLite with a month of 10,000
// GPUs) while the worst tenant's 100 nodes run a new pod with maximal
// labels at every pass of the work recorder, a pass every 10 ms (3,000
// times faster than the server's 30 seconds): alone, with the worst
// tenant held
// to a 16 MiB quota, and with no quota.
func BenchmarkWorstTenant(b *testing.B) {
	for _, mode := range []string{"alone", "quota", "no-quota"} {
		b.Run(mode, func(b *testing.B) {
			from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
			s, st, _ := openFixture(b, "sqlite", from, 200)
			fl, err := sim.New(sim.Config{Clock: clock.NewFake(from), Pods: []sim.PodTemplate{}})
			if err != nil {
				b.Fatal(err)
			}
			s.ctrl = controller.New(st, fl, fl, s.clock, controller.Config{Cooldown: -1}, nil) // IDs for the budgets
			writeMonth(b, st, from, 1250, 200)
			ctx, stop := context.WithCancel(context.Background())
			done := make(chan int)
			go func() { done <- worstTenant(ctx, st, from, mode) }()
			time.Sleep(2 * time.Second) // the worst tenant at its quota (or 16 MiB past it), then measure
			creates, reads := otherTenant(b, s, from)
			stop()
			passes := <-done
			b.ReportMetric(p99(creates), "create-p99-ms")
			b.ReportMetric(p99(reads), "usage-p99-ms")
			b.ReportMetric(float64(passes), "worst-passes")
			if use, err := st.ProjectStorage(context.Background()); err == nil {
				for _, u := range use {
					if u.ProjectID == "p-00" && u.Table == "work_spans" {
						b.ReportMetric(float64(u.Bytes)/(1<<20), "worst-MB")
					}
				}
			}
		})
	}
}

// worstTenant runs the recorder's passes back to back until ctx ends,
// and returns how many it made.
func worstTenant(ctx context.Context, st store.Store, from time.Time, mode string) int {
	if mode == "alone" {
		<-ctx.Done()
		return 0
	}
	labels := map[string]string{}
	for i := range domain.MaxWorkLabels {
		labels[fmt.Sprintf("example.com/l%02d", i)] = strings.Repeat("v", 600)
	}
	c := &churn{labels: labels}
	for i := range 100 {
		c.nodes = append(c.nodes, &domain.Node{ID: fmt.Sprint("w", i), ClusterID: "c-0000", Name: fmt.Sprint("w-", i), GPUs: 8, ReadyAt: from})
	}
	clk := clock.NewFake(from.AddDate(0, 1, 5))
	r := worklog.New(st, c, c, clk, nil)
	k := &quota.Keeper{Store: st, Default: 16 << 20}
	if mode == "quota" {
		r.Admit, r.Refused = k.Admit, k.Tell
	}
	passes := 0
	for ctx.Err() == nil {
		if passes%200 == 0 {
			k.Count(ctx, clk.Now())
		}
		clk.Step(30 * time.Second)
		r.Pass(ctx)
		passes++
		time.Sleep(10 * time.Millisecond)
	}
	return passes
}

// otherTenant creates (and deletes) budgets and reads its usage by
// cluster, 600 times each, and returns their latencies in milliseconds.
func otherTenant(b *testing.B, s *Server, from time.Time) (creates, reads []float64) {
	do := func(method, path, body string, want int) float64 {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+adminToken)
		start := time.Now()
		s.ServeHTTP(w, req)
		took := float64(time.Since(start).Microseconds()) / 1000
		if w.Code != want {
			b.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		return took
	}
	b.ResetTimer()
	for i := range 600 {
		creates = append(creates, do("POST", "/v1/budgets?project_id=p-01", fmt.Sprintf(`{"name":"b%d","amount":"100"}`, i), 201))
		reads = append(reads, do("GET", "/v1/usage"+q(from, from.AddDate(0, 1, 0), "group_by", "cluster", "project_id", "p-01"), "", 200))
		if i%15 == 14 {
			s.store.Update(context.Background(), func(tx store.Tx) error {
				bs, err := tx.ListBudgets(context.Background(), "p-01")
				for _, bg := range bs {
					tx.DeleteBudget(context.Background(), bg.ID)
				}
				return err
			})
		}
	}
	return creates, reads
}

func p99(ms []float64) float64 {
	s := slices.Sorted(slices.Values(ms))
	return s[len(s)*99/100]
}
