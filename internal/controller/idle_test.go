package controller

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
)

// TestScaleDownDrainsIdleNodesFirst: with three preemptible nodes of
// one age, the youngest of which (the highest ID) the allocator gives up
// first, lowering the target by one node drains the one node the
// simulated cluster says runs no pod, not a busy one, and its event says
// so.
func TestScaleDownDrainsIdleNodesFirst(t *testing.T) {
	// Nodes start with a DaemonSet pod only, which does not count.
	h := newHarness(t, []sim.PodTemplate{{Name: "node-exporter", DaemonSet: true}}, 3)
	h.create("a", 0, 24)
	h.reconcile()
	h.advance(20 * time.Second)
	nodes := h.nodes("a", domain.NodeReady)
	if len(nodes) != 3 {
		t.Fatalf("%d ready nodes, want 3", len(nodes))
	}
	slices.SortFunc(nodes, func(a, b domain.Node) int { return strings.Compare(a.ID, b.ID) })
	idle := nodes[0]
	for _, n := range nodes[1:] {
		if err := h.sim.AddPod("a", n.Name, sim.PodTemplate{Name: "trainer", TerminationGracePeriod: time.Minute, ExitAfter: time.Second}); err != nil {
			t.Fatal(err)
		}
	}

	pre := 16
	if _, err := h.c.UpdateCluster(h.ctx, "a", Change{PreemptibleGPUs: &pre}); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	// The idle node's drain may be over already: no work to wait for.
	var draining []domain.Node
	for _, n := range h.nodes("a") {
		if !n.DrainStartedAt.IsZero() {
			draining = append(draining, n)
		}
	}
	if len(draining) != 1 || draining[0].ID != idle.ID {
		t.Fatalf("draining %+v, want only the idle node %s (the youngest is %s)", draining, idle.ID, nodes[2].ID)
	}
	if draining[0].DrainCause != domain.CauseScaledDown {
		t.Fatalf("drain cause %s, want %s", draining[0].DrainCause, domain.CauseScaledDown)
	}
	// The event (and so the API's events) says why this node.
	if e, ok := h.event("a", idle.ID, domain.ReasonScaledDown); !ok || !strings.HasSuffix(e.Message, "rather than another of the cluster: idle") {
		t.Fatalf("the drain's event %+v does not say the node was chosen as idle", e)
	}
}
