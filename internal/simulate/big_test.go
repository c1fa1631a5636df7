package simulate

import (
	"context"
	"testing"
	"time"
)

func BenchmarkSimulateBig(b *testing.B) {
	s := benchScenario(100000, 24*time.Hour)
	evs := Generate(s)
	for b.Loop() {
		r, err := Run(context.Background(), s, evs, s.Policy, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(len(evs)), "events")
		b.ReportMetric(float64(r.Run.Ticks), "ticks")
		b.ReportMetric(float64(r.Run.Nodes), "nodes")
	}
}
