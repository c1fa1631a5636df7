package kube_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/kube/kubelet"
)

// TestAPIServerDown stops the cluster's API server for 30 s in the middle
// of two drains. Node Y was notified before the outage; node X is reclaimed
// during it, so its notice cannot be delivered. Both deadlines pass while
// the server is down. Meanwhile a simulated cluster's drain completes: one
// cluster's outage holds up nobody else. Once the server is back, both
// drains end at once (pods force-deleted, Node objects deleted, machines
// handed on), and X's Events are posted late rather than never.
func TestAPIServerDown(t *testing.T) {
	const window = 15 * time.Second
	f := newFixture(t, fixtureConfig{machines: 3, window: window, attached: []string{"c-k"}})
	ctx := context.Background()
	kl, err := kubelet.Start(ctx, env.Client(), kubelet.Config{ExitAfter: exitAfter})
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Stop()

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
		if n := node(t, y.Name); n == nil || !n.Spec.Unschedulable {
			return fmt.Errorf("Y not cordoned yet")
		}
		return nil
	})
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
	if time.Since(down) > 25*time.Second {
		t.Fatalf("the simulated cluster's drain took %s during the outage", time.Since(down))
	}

	time.Sleep(30*time.Second - time.Since(down))
	if n, _ := f.st.GetNode(ctx, x.ID); n.State != domain.NodeDraining || n.Notified {
		t.Fatalf("X during the outage: %s notified=%v", n.State, n.Notified)
	}
	if err := env.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	// Both drains end once the server answers: nodes removed, no Node
	// object or pod left behind.
	f.waitNodes("c-k", domain.Preemptible, domain.NodeRemoved, 2, 30*time.Second)
	t.Logf("drains ended %s after the API server came back", time.Since(back).Round(100*time.Millisecond))
	for _, n := range []domain.Node{x, y} {
		got, _ := f.st.GetNode(ctx, n.ID)
		if got.Outcome != domain.OutcomeDeadline {
			t.Errorf("%s outcome %s", n.Name, got.Outcome)
		}
		if node(t, n.Name) != nil {
			t.Errorf("Node %s leaked", n.Name)
		}
		if _, err := env.Client().CoreV1().Pods("tenant-a").Get(ctx, "trainer-"+n.Name, metav1.GetOptions{}); err == nil {
			t.Errorf("pod on %s left behind", n.Name)
		}
	}
	// X's Events were posted once the server answered.
	evs, err := env.Client().CoreV1().Events("").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, e := range evs.Items {
		if e.Reason == string(domain.ReasonScaledDown) {
			seen[e.InvolvedObject.Kind+"/"+e.InvolvedObject.Name] = true
		}
	}
	for _, want := range []string{"Node/" + x.Name, "Pod/trainer-" + x.Name, "Node/" + y.Name, "Pod/trainer-" + y.Name} {
		if !seen[want] {
			t.Errorf("no Event on %s: %v", want, seen)
		}
	}
	// The lifecycle record has the whole story.
	removed := 0
	for _, e := range f.events("c-k") {
		if e.Reason == domain.ReasonNodeRemoved {
			removed++
		}
	}
	if removed != 2 {
		t.Errorf("%d NodeRemoved events, want 2", removed)
	}
}

func only(t testing.TB, nodes []domain.Node) domain.Node {
	t.Helper()
	if len(nodes) != 1 {
		t.Fatalf("want one node, got %+v", nodes)
	}
	return nodes[0]
}
