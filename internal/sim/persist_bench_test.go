package sim

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
)

// BenchmarkPersist measures one persisted change — an annotation with a new
// value on one node, a different node each time — on fleets of 100 and
// 12,000 nodes with the default pod profiles, state saved under
// b.TempDir(). The fleet is built in memory and written once before the
// timer starts.
func BenchmarkPersist(b *testing.B) {
	for _, size := range []int{100, 12_000} {
		b.Run(fmt.Sprintf("nodes=%d", size), func(b *testing.B) {
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
			if err := seedState(path, &seed.st); err != nil {
				b.Fatal(err)
			}
			f, err := New(Config{Clock: fc, StatePath: path})
			if err != nil {
				b.Fatal(err)
			}
			for i := 0; b.Loop(); i++ {
				if err := f.Annotate(ctx, cluster, names[i%size], "bench", strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// seedState writes w as the fleet's state at path.
func seedState(path string, w *world) error { return save(path, w) }
