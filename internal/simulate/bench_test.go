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
			runBench(b, benchScenario(c.gpus, c.horizon))
		})
	}
}

// poolsScenario is a fleet of n pools of 625 machines (5,000 GPUs; n/2
// regions of two GPU types) with the same demand per pool whatever n:
// busy, 45 tenants of 128 GPUs keep each pool full of preemptible nodes
// and 6 on-demand clusters an hour (8-64 GPUs, 8 hours on average) take
// machines back from them, about 500 reclaims a day per pool; quiet, 125
// tenants of 16 GPUs fit beside 2 on-demand clusters an hour (the month
// of docs/planning.md's examples, per pool) and nothing is reclaimed.
func poolsScenario(n int, busy bool, horizon time.Duration) Scenario {
	s := Scenario{Seed: 1, Horizon: Duration{horizon},
		Fleet:    fleet.File{Prices: map[string]string{"H100_SXM": "2.99", "L40S": "1.10"}},
		OnDemand: OnDemand{ArrivalsPerHour: 2, MeanLifetime: Duration{8 * time.Hour}, GPUs: []int{8, 16, 32, 64}},
		Tenants:  Tenants{Count: 125, TargetGPUs: 16},
		Jobs:     Jobs{CheckpointInterval: Duration{30 * time.Minute}, CheckpointCost: Duration{90 * time.Second}, RestartCost: Duration{10 * time.Minute}, ExitAfterNotice: Duration{20 * time.Second}},
	}
	if busy {
		s.OnDemand.ArrivalsPerHour, s.Tenants = 6, Tenants{Count: 45, TargetGPUs: 128}
	}
	for i := range n {
		gpu := []string{"H100_SXM", "L40S"}[i%2]
		s.Fleet.Pools = append(s.Fleet.Pools, fleet.Pool{Region: fmt.Sprintf("region-%02d", i/2), GPUType: gpu, Machines: 625})
	}
	if err := s.Check(); err != nil {
		panic(err)
	}
	return s
}

// BenchmarkGrowth runs a day of 2 pools and of 20 (10× the fleet and 10×
// the demand), busy and quiet: a control plane whose work follows what
// changed takes 10× the time for the 20 pools. It reports the time per
// demand event. docs/perf.md, "Work in proportion to what changed".
func BenchmarkGrowth(b *testing.B) {
	for _, busy := range []bool{true, false} {
		for _, pools := range []int{2, 20} {
			name := map[bool]string{true: "busy", false: "quiet"}[busy]
			b.Run(fmt.Sprintf("%s/pools=%d", name, pools), func(b *testing.B) {
				runBench(b, poolsScenario(pools, busy, 24*time.Hour))
			})
		}
	}
}

// BenchmarkDemandEvent reports the time per demand event of a day of
// the month's pools (quiet) from 1,000 to 1,000,000 GPUs: the same
// per-pool demand on more pools of 5,000 GPUs (1,000 GPUs: one pool of
// 125 machines with a fifth of a pool's demand).
func BenchmarkDemandEvent(b *testing.B) {
	for _, gpus := range []int{1000, 10000, 100000, 1000000} {
		b.Run(fmt.Sprintf("gpus=%d", gpus), func(b *testing.B) {
			pools := max(gpus/5000, 1)
			s := poolsScenario(pools, false, 24*time.Hour)
			if gpus < 5000 {
				s.Fleet.Pools[0].Machines = gpus / 8
				s.Tenants.Count = s.Tenants.Count * gpus / 5000
				s.OnDemand.ArrivalsPerHour = s.OnDemand.ArrivalsPerHour * float64(gpus) / 5000
			}
			runBench(b, s)
		})
	}
}

// runBench runs s under its policy, reporting its demand events, ticks,
// nodes, the time per demand event and the speed against real time.
func runBench(b *testing.B, s Scenario) {
	b.Helper()
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
	b.ReportMetric(float64(per.Microseconds())/float64(len(evs)), "µs/event")
	b.ReportMetric(s.Horizon.D.Seconds()/per.Seconds(), "x-realtime")
}
