package simulate

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/fleet"
)

// benchScenario is a fleet of gpus GPUs in four pools (two regions, two
// GPU types), with one preemptible tenant cluster per 50 GPUs (16 GPUs
// each: 2,000 clusters at 100,000 GPUs) and on-demand clusters (8 to 64
// GPUs, 8 hours on average) arriving so that they hold about half of
// each pool.
func benchScenario(gpus int, horizon time.Duration) Scenario {
	per := gpus / 4 / 8
	s := Scenario{Seed: 1, Horizon: Duration{horizon},
		Fleet: fleet.File{Pools: []fleet.Pool{
			{Region: "us-east-1", GPUType: "H100_SXM", Machines: per}, {Region: "us-east-1", GPUType: "L40S", Machines: per},
			{Region: "eu-west-1", GPUType: "H100_SXM", Machines: per}, {Region: "eu-west-1", GPUType: "L40S", Machines: per},
		}, Prices: map[string]string{"H100_SXM": "2.99", "L40S": "1.10"}},
		OnDemand: OnDemand{ArrivalsPerHour: float64(per*8) / (2 * 8 * 30), MeanLifetime: Duration{8 * time.Hour}, GPUs: []int{8, 16, 32, 64}},
		Tenants:  Tenants{Count: gpus / 50 / 4, TargetGPUs: 16},
		Jobs:     Jobs{CheckpointInterval: Duration{30 * time.Minute}, CheckpointCost: Duration{90 * time.Second}, RestartCost: Duration{10 * time.Minute}, ExitAfterNotice: Duration{20 * time.Second}},
	}
	if err := s.Check(); err != nil {
		panic(err)
	}
	return s
}

// BenchmarkSimulate runs a fleet for a horizon under one policy; it
// reports the demand events, the ticks, the nodes made and the speed
// against real time. How the time grows with fleet size and horizon:
// docs/perf.md, "Simulating a fleet".
func BenchmarkSimulate(b *testing.B) {
	for _, c := range []struct {
		gpus    int
		horizon time.Duration
	}{
		{1000, 24 * time.Hour}, {1000, 7 * 24 * time.Hour}, {1000, 30 * 24 * time.Hour},
		{4000, 24 * time.Hour}, {16000, 24 * time.Hour},
	} {
		b.Run(fmt.Sprintf("gpus=%d/days=%d", c.gpus, int(c.horizon.Hours()/24)), func(b *testing.B) {
			s := benchScenario(c.gpus, c.horizon)
			evs := Generate(s)
			b.ReportAllocs()
			var r *Result
			for b.Loop() {
				var err error
				if r, err = Run(context.Background(), s, evs, s.Policy, nil); err != nil {
					b.Fatal(err)
				}
			}
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(len(evs)), "events")
			b.ReportMetric(float64(r.Run.Ticks), "ticks")
			b.ReportMetric(float64(r.Run.Nodes), "nodes")
			b.ReportMetric(c.horizon.Seconds()/per.Seconds(), "x-realtime")
		})
	}
}
