package kube_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/sim"
)

// TestRouterPassesNodeChangesOfItsFallback: clusters without a kubeconfig
// run on the fallback (the simulator); its Node changes reach the
// callback set on the router, as the watches' do.
func TestRouterPassesNodeChangesOfItsFallback(t *testing.T) {
	ctx := context.Background()
	fl, err := sim.New(sim.Config{Clock: clock.NewFake(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)), Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	r := kube.NewRouter(func(context.Context, string) ([]byte, error) { return nil, nil }, fl, kube.Options{})
	var changes atomic.Int64
	r.SetHooks(driver.Hooks{Wake: func(c, n string, _ time.Time) {
		if c == "c" && n == "n" {
			changes.Add(1)
		}
	}})
	if err := fl.AddNode(ctx, driver.NodeSpec{ClusterID: "c", NodeName: "n", MachineID: "m", Class: domain.Preemptible, GPUs: 8}); err != nil {
		t.Fatal(err)
	}
	if err := r.Release(ctx, "c", "n"); err != nil {
		t.Fatal(err)
	}
	if changes.Load() != 1 {
		t.Fatalf("deleting a simulated Node woke it %d times, want once", changes.Load())
	}
}
