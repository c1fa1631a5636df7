package api

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/store"
)

// BenchmarkCapacityForecast serves GET /v1/capacity/forecast (every pool,
// 48 hours): cold, the first request of an hour (it reads the node
// history), and warm, the others of the hour; and, beside it, GET
// /v1/stats/preemptions/week (one pool), which reads the same history,
// over a fleet of gpus GPUs in four pools whose every machine served a
// node a day, standard or preemptible in turn, for the four weeks before
// now (SQLite).
func BenchmarkCapacityForecast(b *testing.B) {
	for _, gpus := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			s, nodes := forecastFixture(b, gpus/8)
			for _, c := range []struct{ name, path string }{
				{"forecast/cold", "/v1/capacity/forecast"},
				{"forecast/warm", "/v1/capacity/forecast"},
				{"week", "/v1/stats/preemptions/week?region=us-east&gpu_type=H100"},
			} {
				b.Run(c.name, func(b *testing.B) {
					for b.Loop() {
						if c.name == "forecast/cold" {
							s.lendables = lendableCache{}
						}
						w := httptest.NewRecorder()
						req := httptest.NewRequest("GET", c.path, nil)
						req.Header.Set("Authorization", "Bearer "+adminToken)
						s.ServeHTTP(w, req)
						if w.Code != 200 {
							b.Fatalf("%d: %s", w.Code, w.Body)
						}
					}
					b.ReportMetric(float64(nodes), "nodes")
				})
			}
		})
	}
}

// forecastFixture is a server whose store holds machines machines in
// four pools and 28 days of their nodes, and the nodes written.
func forecastFixture(b *testing.B, machines int) (*Server, int) {
	b.Helper()
	ctx := context.Background()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	_, st, _ := openFixture(b, "sqlite", from, 1)
	per := machines / 4
	f := fleet.File{Pools: []fleet.Pool{
		{Region: "us-east", GPUType: "H100", Machines: per}, {Region: "us-east", GPUType: "L40S", Machines: per},
		{Region: "eu-west", GPUType: "H100", Machines: per}, {Region: "eu-west", GPUType: "L40S", Machines: per},
	}}
	if _, err := fleet.Register(ctx, st, f, from); err != nil {
		b.Fatal(err)
	}
	ms, err := st.ListMachines(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const days = 28
	var batch []domain.Node
	written := 0
	flush := func() {
		if err := st.Update(ctx, func(tx store.Tx) error { return tx.CreateNodes(ctx, batch) }); err != nil {
			b.Fatal(err)
		}
		written += len(batch)
		batch = batch[:0]
	}
	for i, m := range ms {
		for d := range days {
			start := from.Add(time.Duration(d)*24*time.Hour + time.Duration(i%600)*time.Second)
			n := domain.Node{ID: fmt.Sprintf("n-%06d-%02d", i, d), ClusterID: "c-0000", MachineID: m.ID, Name: fmt.Sprintf("gpu-%d", d),
				Class: domain.Standard, GPUs: 8, GPUType: m.GPUType, State: domain.NodeRemoved, CreatedAt: start, ReadyAt: start.Add(time.Minute),
				DrainStartedAt: start.Add(20 * time.Hour), DrainedAt: start.Add(20 * time.Hour), RemovedAt: start.Add(20*time.Hour + time.Minute)}
			if (i+d)%2 == 1 {
				n.Class, n.DrainCause, n.Outcome = domain.Preemptible, domain.CausePreempted, domain.OutcomeEarly
			}
			batch = append(batch, n)
			if len(batch) == 5000 {
				flush()
			}
		}
	}
	flush()
	return New(st, nil, clock.NewFake(from.Add(days*24*time.Hour)), clock.Real{}, nil), written
}
