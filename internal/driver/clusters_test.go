package driver

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

type fakeCluster struct {
	id     string
	closed atomic.Bool
}

func (f *fakeCluster) Close() { f.closed.Store(true) }

// TestClusters: a cluster's driver is built once and kept, a cluster with
// nothing attached is remembered as such, Known never builds, Reload
// closes and forgets, a failed build is tried again, and two first calls
// at once keep one driver and close the other.
func TestClusters(t *testing.T) {
	var builds atomic.Int32
	fail := true
	var cs Clusters[*fakeCluster]
	var started []string
	cs.Started = func(id string, _ *fakeCluster) { started = append(started, id) }
	cs.Build = func(_ context.Context, id string) (*fakeCluster, error) {
		builds.Add(1)
		switch id {
		case "none":
			return nil, nil
		case "flaky":
			if fail {
				return nil, errors.New("down")
			}
		}
		return &fakeCluster{id: id}, nil
	}
	ctx := context.Background()
	if _, ok := cs.Known("a"); ok {
		t.Fatal("Known before any use")
	}
	a, err := cs.Attached(ctx, "a")
	if err != nil || a == nil || a.id != "a" {
		t.Fatalf("a: %v, %v", a, err)
	}
	if again, _ := cs.Attached(ctx, "a"); again != a || builds.Load() != 1 {
		t.Fatalf("a built again (%d builds)", builds.Load())
	}
	if n, err := cs.Attached(ctx, "none"); n != nil || err != nil {
		t.Fatalf("none: %v, %v", n, err)
	}
	if n, ok := cs.Known("none"); n != nil || !ok {
		t.Fatal("a cluster with nothing attached is not remembered")
	}
	if _, err := cs.Attached(ctx, "flaky"); err == nil {
		t.Fatal("a failed build succeeded")
	}
	fail = false
	if f, err := cs.Attached(ctx, "flaky"); err != nil || f == nil {
		t.Fatalf("a failed build is not tried again: %v", err)
	}
	if got := len(cs.All()); got != 2 {
		t.Fatalf("All: %d drivers, want a and flaky", got)
	}
	if !cs.Reload("a") || !a.closed.Load() {
		t.Fatal("Reload did not close a")
	}
	if cs.Reload("none") {
		t.Fatal("Reload of a cluster without a driver closed one")
	}
	if b, _ := cs.Attached(ctx, "a"); b == a || b.closed.Load() {
		t.Fatal("a not rebuilt after Reload")
	}
	if len(started) != 3 {
		t.Fatalf("Started told of %v, want a, flaky, a", started)
	}

	// Two first calls at once: one driver is kept, the other closed.
	gate := make(chan struct{})
	var built []*fakeCluster
	var mu sync.Mutex
	var race Clusters[*fakeCluster]
	race.Build = func(context.Context, string) (*fakeCluster, error) {
		<-gate
		c := &fakeCluster{id: "r"}
		mu.Lock()
		built = append(built, c)
		mu.Unlock()
		return c, nil
	}
	got := make([]*fakeCluster, 2)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = race.Attached(ctx, "r") }()
	}
	close(gate)
	wg.Wait()
	if got[0] != got[1] || got[0].closed.Load() {
		t.Fatal("two first calls got different drivers, or a closed one")
	}
	if len(built) == 2 && !built[0].closed.Load() && !built[1].closed.Load() {
		t.Fatal("the driver built in vain was not closed")
	}
	race.Close()
	if !got[0].closed.Load() {
		t.Fatal("Close did not close the driver")
	}
}
