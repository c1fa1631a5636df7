package slurm_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store/storetest"
)

// TestConvertInPlace, on a real Slurm: a preemptible node running a job
// that ends at SIGTERM is converted to standard. Its class feature
// changes (preemptible off, standard on, its other features kept), the
// job runs on (no signal, no requeue), and billing splits at the second.
func TestConvertInPlace(t *testing.T) {
	f := newFixture(t, fixtureConfig{machines: 2, window: time.Minute})
	f.createCluster("c1", 8, 8)
	n := f.waitNodes("c1", domain.Preemptible, domain.NodeReady, 1, 30*time.Second)[0]
	id := submit(t, f.env, job{Name: "keep", Node: n.Name, OnTerm: "exit 0", Extra: []string{"-C", "preemptible"}})
	eventually(t, 20*time.Second, func() error {
		if j := jobByID(t, f.env, id); j.State != "RUNNING" {
			return fmt.Errorf("job %s is %s", id, j.State)
		}
		return nil
	})
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(1100 * time.Millisecond)))
	got, err := f.ctrl.ConvertNode(f.ctx, "c1", n.ID, domain.Standard)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		s, ok := nodeOf(t, f.env, n.Name)
		fs := strings.Split(s.Features, ",")
		if !ok || !slices.Contains(fs, "standard") || slices.Contains(fs, "preemptible") || !slices.Contains(fs, "sparecap") {
			return fmt.Errorf("node %s has features %q", n.Name, s.Features)
		}
		return nil
	})
	// Give a signal time to land: the job ends at SIGTERM.
	time.Sleep(time.Second)
	if j := jobByID(t, f.env, id); j.State != "RUNNING" || j.Restarts != 0 {
		t.Fatalf("the job after the conversion: %s, %d restarts; want it running on", j.State, j.Restarts)
	}
	if s, _ := nodeOf(t, f.env, n.Name); slices.Contains(s.Flags, "DRAIN") {
		t.Fatalf("the converted node is drained: %+v", s)
	}

	recs := storetest.NodeUsage(t, f.st, clock.Real{}, "c1", n.ID)
	if len(recs) != 2 || recs[0].Class != domain.Preemptible || !recs[0].Final || !recs[0].End.Equal(got.ClassSince) ||
		recs[1].Class != domain.Standard || recs[1].Final || !recs[1].Start.Equal(got.ClassSince) || got.ClassSince.Nanosecond() != 0 {
		t.Fatalf("usage of the converted node: %+v; want preemptible to %s, standard from it", recs, got.ClassSince)
	}
}
