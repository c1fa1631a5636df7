package sim

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
)

// BenchmarkPersist measures one persisted change — an annotation with a new
// value on one node, a different node each time — on fleets of 100 and
// 12,000 nodes with the default pod profiles, state saved under
// b.TempDir(). The fleet is built in memory and written once before the
// timer starts. cpu-ns/op is the process's CPU time (user + system) per
// change; the rest of ns/op is waiting for the disk.
//
// compact/nodes=12000 measures one compaction of the 12,000-node world: a
// running fleet pays it once per compactRatio times the snapshot's size of
// log.
func BenchmarkPersist(b *testing.B) {
	for _, size := range []int{100, 12_000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
			f, names := benchFleet(b, size)
			cpu := cpuTime()
			for i := 0; b.Loop(); i++ {
				if err := f.Annotate(ctx, cluster, names[i%size], "bench", strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
	// parallel: 16 callers at once, as the controller's node steps call
	// it; their lines share fsyncs (group commit), so ns/op falls well
	// below one fsync.
	b.Run("parallel16/nodes=12000", func(b *testing.B) {
		f, names := benchFleet(b, 12_000)
		var next atomic.Int64
		b.SetParallelism(16 / runtime.GOMAXPROCS(0))
		cpu := cpuTime()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(1))
				if err := f.Annotate(ctx, cluster, names[i%len(names)], "bench", strconv.Itoa(i)); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
	})
	b.Run("compact/nodes=12000", func(b *testing.B) {
		f, _ := benchFleet(b, 12_000)
		cpu := cpuTime()
		for b.Loop() {
			if err := f.store.compact(&f.st); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(f.store.snapSize), "snapshot-bytes")
	})
}

// benchFleet returns a persisted fleet of size nodes and their names.
func benchFleet(b *testing.B, size int) (*Fleet, []string) {
	b.Helper()
	path := filepath.Join(b.TempDir(), "sim-state.json")
	fc := clock.NewFake(t0)
	seed, err := New(Config{Clock: fc})
	if err != nil {
		b.Fatal(err)
	}
	names := make([]string, size)
	for i := range names {
		names[i] = domain.NodeName(domain.Preemptible, int64(i+1))
		if err := seed.AddNode(ctx, spec(names[i])); err != nil {
			b.Fatal(err)
		}
	}
	if err := (&store{path: path, logPath: logPath(path)}).compact(&seed.st); err != nil {
		b.Fatal(err)
	}
	f, err := New(Config{Clock: fc, StatePath: path})
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC() // the setup's garbage is not the change's
	return f, names
}
