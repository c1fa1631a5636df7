package kube_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/kube"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// TestPodsGoneWakesTheirNode: the pod watch wakes a draining node, by
// name, when its last workload pod goes (the early release does not wait
// for a poll) and when a pod is bound to it after its notice, and wakes
// nothing for pods of nodes that are not draining.
func TestPodsGoneWakesTheirNode(t *testing.T) {
	reset(t)
	ctx := context.Background()
	var kicks atomic.Int64
	var mu sync.Mutex
	var woken []string
	wake := func(cluster, node string, at time.Time) {
		kicks.Add(1)
		mu.Lock()
		woken = append(woken, cluster+"/"+node)
		mu.Unlock()
	}
	c, err := kube.NewCluster("c-kick", env.RESTConfig(), kube.Options{Hooks: driver.Hooks{Wake: wake}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, n := range []string{"busy", "draining"} {
		if err := kubelet.RegisterNode(ctx, env.Client(), n, nil); err != nil {
			t.Fatal(err)
		}
		startPod(t, n, "tenant-a", "pod-on-"+n, 30*time.Second, -1, false)
	}
	startPod(t, "draining", "kube-system", "logs", 30*time.Second, -1, true)
	eventually(t, 10*time.Second, func() error {
		pods, err := c.ListWork(ctx, "c-kick", "draining") // the controller lists draining nodes only
		if err != nil || len(pods) != 2 {
			return errors.New("pods not seen yet")
		}
		return nil
	})
	zero := int64(0)
	del := func(ns, name string) {
		t.Helper()
		if err := env.Client().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	// The nodes' registration wakes them (a node seen ready): those
	// wake-ups, late under load, are let through first.
	base := quiet(&kicks)
	del("tenant-a", "pod-on-busy")
	time.Sleep(time.Second) // the watch has delivered it
	if n := kicks.Load() - base; n != 0 {
		t.Fatalf("%d wake-ups for a pod of a node that is not draining", n)
	}
	// Only the DaemonSet pod is left: the controller is woken to stop it.
	del("tenant-a", "pod-on-draining")
	eventually(t, 10*time.Second, func() error {
		if kicks.Load() == base {
			return errors.New("not woken when the last workload pod went")
		}
		return nil
	})
	mu.Lock()
	if woken[base] != "c-kick/draining" {
		t.Errorf("woke %v, want the draining node", woken[base:])
	}
	mu.Unlock()
	// A pod bound to the draining node after its notice wakes it too: the
	// pod gets its own notice.
	before := kicks.Load()
	startPod(t, "draining", "tenant-a", "late", 30*time.Second, -1, false)
	eventually(t, 10*time.Second, func() error {
		if kicks.Load() == before {
			return errors.New("not woken when a pod was bound to the draining node")
		}
		return nil
	})
}

// quiet waits until n has not changed for half a second (at most ten
// seconds) and returns it.
func quiet(n *atomic.Int64) int64 {
	last := n.Load()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		cur := n.Load()
		if cur == last {
			return cur
		}
		last = cur
	}
	return last
}
