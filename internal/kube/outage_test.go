package kube_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// TestAPIServerDown stops the cluster's API server for 30 s in the middle
// of two drains. Node Y was notified before the outage; node X is
// reclaimed during it, so its notice cannot be delivered. Both deadlines
// pass while the server is down: each machine is taken back within 2 s of
// its deadline all the same, with the cleanup (pods left, the Node object)
// pending. Meanwhile a simulated cluster's drain completes: one cluster's
// outage holds up nobody else. Once the server is back, the cleanup
// finishes: no Node object or pod is left behind.
func TestAPIServerDown(t *testing.T) {
	const window = 15 * time.Second
	f := newFixture(t, fixtureConfig{machines: 3, window: window, attached: []string{"c-k"}})
	ctx := context.Background()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()
	// Whatever happens, the next test gets its API server back.
	t.Cleanup(func() { env.StartAPIServer() })

	f.createCluster("c-k", 0, 16)
	f.createCluster("c-sim", 0, 8)
	nodes := f.waitNodes("c-k", domain.Preemptible, domain.NodeReady, 2, 20*time.Second)
	f.waitNodes("c-sim", domain.Preemptible, domain.NodeReady, 1, 20*time.Second)
	for _, n := range nodes {
		// Ignore SIGTERM for longer than the window.
		startPod(t, n.Name, "tenant-a", "trainer-"+n.Name, 600*time.Second, -1, false)
	}
	time.Sleep(time.Second)

	// Y: scaled down (the youngest node goes), notified while the server is up.
	eight, zero := 8, 0
	f.update("c-k", nil, &eight)
	y := only(t, f.nodes("c-k", domain.NodeDraining))
	eventually(t, 10*time.Second, func() error {
		if n, _ := f.st.GetNode(ctx, y.ID); !n.Notified {
			return fmt.Errorf("Y's notice not recorded yet")
		}
		return nil
	})

	if err := env.StopAPIServer(); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	// X: reclaimed while the server is down.
	f.update("c-k", nil, &zero)
	var x domain.Node
	for _, n := range f.nodes("c-k", domain.NodeDraining) {
		if n.ID != y.ID {
			x = n
		}
	}
	if x.ID == "" {
		t.Fatal("X is not draining")
	}
	// The simulated cluster is not held up by the outage.
	f.update("c-sim", nil, &zero)
	f.waitNodes("c-sim", domain.Preemptible, domain.NodeRemoved, 1, 10*time.Second)

	// Each machine goes back within 2 s of its deadline, the API down.
	for _, n := range []domain.Node{y, x} {
		for {
			got, err := f.st.GetNode(ctx, n.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != domain.NodeDraining {
				if late := time.Since(got.Deadline); late > 2*time.Second {
					t.Errorf("%s left draining %s after its deadline", n.Name, late)
				}
				if !got.CleanupPending || got.Outcome != domain.OutcomeDeadline {
					t.Errorf("%s at its deadline: %+v", n.Name, got)
				}
				break
			}
			if time.Since(got.Deadline) > 2*time.Second {
				t.Fatalf("%s still draining %s after its deadline", n.Name, time.Since(got.Deadline))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	f.waitNodes("c-k", domain.Preemptible, domain.NodeRemoved, 2, 5*time.Second)
	if n, _ := f.st.GetNode(ctx, x.ID); n.Notified {
		t.Errorf("X notified during the outage?")
	}
	for _, e := range f.events("c-k") {
		if e.Reason == domain.ReasonNodeRemoved && !strings.Contains(e.Message, "cleanup pending") {
			t.Errorf("NodeRemoved does not say cleanup is pending: %s", e.Message)
		}
	}

	time.Sleep(30*time.Second - time.Since(down))
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	// The cleanup finishes once the server answers: no Node object or pod
	// left behind.
	eventually(t, 30*time.Second, func() error {
		for _, n := range []domain.Node{x, y} {
			if got, _ := f.st.GetNode(ctx, n.ID); got.CleanupPending {
				return fmt.Errorf("%s: cleanup still pending (%s)", n.Name, got.LastError)
			}
		}
		return nil
	})
	t.Logf("cleanup finished %s after the API server came back", time.Since(back).Round(100*time.Millisecond))
	for _, n := range []domain.Node{x, y} {
		if node(t, n.Name) != nil {
			t.Errorf("Node %s leaked", n.Name)
		}
		if _, err := env.Client().CoreV1().Pods("tenant-a").Get(ctx, "trainer-"+n.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("pod on %s left behind", n.Name)
		}
	}
	// The Kubernetes Events say how the nodes went.
	evs, err := env.Client().CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		seen[e.Reason+" "+e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = true
	}
	for _, want := range []string{"ScaledDown Node/" + y.Name, "ScaledDown Pod/trainer-" + y.Name,
		"NodeRemoved Node/" + x.Name, "NodeRemoved Node/" + y.Name, "DeadlineReached Node/" + x.Name} {
		if !seen[want] {
			t.Errorf("no Event %s: %v", want, seen)
		}
	}
	finished := 0
	for _, e := range f.events("c-k") {
		if e.Reason == domain.ReasonCleanupFinished {
			finished++
		}
	}
	if finished != 2 {
		t.Errorf("%d CleanupFinished events, want 2", finished)
	}
}

func only(t testing.TB, nodes []domain.Node) domain.Node {
	t.Helper()
	if len(nodes) != 1 {
		t.Fatalf("want one node, got %+v", nodes)
	}
	return nodes[0]
}
