package controller

import (
	"errors"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// TestNobodyWaitsForever runs 30 simulated days in which spare capacity is
// fewer nodes than the clusters that want it: three clusters want one
// preemptible node each and two machines are spare. Every day a standard
// burst takes one of them for a few hours, so a node is freed twice a day.
// Each freed node must go to the cluster that has waited longest, so the
// late cluster gets its turn instead of waiting behind the early ones.
func TestNobodyWaitsForever(t *testing.T) {
	// Standard nodes of a, b, c and burst, plus two spare machines.
	h := newHarness(t, quickPods, 6)
	h.create("a", 8, 8)
	h.create("b", 8, 8)
	h.create("c", 8, 8)
	h.create("burst", 8, 0)
	h.advance(time.Minute)

	c, err := h.st.GetCluster(h.ctx, "c")
	if err != nil {
		t.Fatal(err)
	}
	if c.UnmetSince.IsZero() || c.UnmetSince.After(t0) {
		t.Fatalf("c waits from its creation (%v), UnmetSince is %v", t0, c.UnmetSince)
	}
	if a, _ := h.st.GetCluster(h.ctx, "a"); !a.UnmetSince.IsZero() {
		t.Fatalf("a's target is met, UnmetSince is %v", a.UnmetSince)
	}

	held := map[string]time.Duration{} // GPU-time of ready preemptible nodes
	waited := map[string]time.Duration{}
	longest := map[string]time.Duration{}
	// step advances the clock in steps of d up to the end, reconciling
	// after each, and accounts what each cluster held.
	step := func(total, d time.Duration) {
		for end := h.clk.Now().Add(total); h.clk.Now().Before(end); {
			h.clk.Step(d)
			h.reconcile()
			for _, id := range []string{"a", "b", "c"} {
				ready := len(h.preemptibleReady(id))
				held[id] += time.Duration(ready*8) * d
				if ready == 0 {
					waited[id] += d
					longest[id] = max(longest[id], waited[id])
				} else {
					waited[id] = 0
				}
			}
		}
	}
	sixteen, eight := 16, 8
	for day := 0; day < 30; day++ {
		if _, err := h.c.UpdateCluster(h.ctx, "burst", Change{NumGPUs: &sixteen}); err != nil {
			t.Fatalf("day %d: burst: %v", day, err)
		}
		step(3*time.Minute, 10*time.Second) // preemption, drain, provisioning
		step(4*time.Hour-3*time.Minute, 30*time.Minute)
		if _, err := h.c.UpdateCluster(h.ctx, "burst", Change{NumGPUs: &eight}); err != nil {
			t.Fatalf("day %d: burst ends: %v", day, err)
		}
		step(3*time.Minute, 10*time.Second)
		step(20*time.Hour-3*time.Minute, 30*time.Minute)
	}

	var total time.Duration
	for _, id := range []string{"a", "b", "c"} {
		total += held[id]
		t.Logf("%s: %.0f GPU-hours, longest wait %v", id, held[id].Hours(), longest[id])
	}
	for _, id := range []string{"a", "b", "c"} {
		// An even split is a third each; a cluster that is skipped for
		// days on end falls far below it.
		if held[id] < total/6 {
			t.Errorf("%s held %.0f of %.0f GPU-hours: it waits behind the others", id, held[id].Hours(), total.Hours())
		}
		if longest[id] > 3*24*time.Hour {
			t.Errorf("%s waited %v in a row with no preemptible GPU", id, longest[id])
		}
	}
}

func (h *harness) preemptibleReady(clusterID string) []domain.Node {
	h.t.Helper()
	var out []domain.Node
	for _, n := range h.nodes(clusterID, domain.NodeReady) {
		if n.Class == domain.Preemptible {
			out = append(out, n)
		}
	}
	return out
}

func TestSetWeightMovesShares(t *testing.T) {
	// Standard nodes of a and b, plus four spare machines.
	h := newHarness(t, quickPods, 6)
	h.create("a", 8, 32)
	h.create("b", 8, 32)
	h.advance(time.Minute)
	if a, b := len(h.preemptibleReady("a")), len(h.preemptibleReady("b")); a != 2 || b != 2 {
		t.Fatalf("equal weights: a=%d b=%d nodes, want 2/2", a, b)
	}
	for _, w := range []int{0, -1, domain.MaxWeight + 1} {
		if _, err := h.c.SetWeight(h.ctx, "b", w); err == nil {
			t.Fatalf("weight %d accepted", w)
		}
	}
	if _, err := h.c.SetWeight(h.ctx, "nope", 2); !errors.Is(err, domain.ErrNotFound) {
		t.Fatalf("unknown cluster: %v", err)
	}
	b, err := h.c.SetWeight(h.ctx, "b", 3)
	if err != nil {
		t.Fatal(err)
	}
	if b.Weight != 3 {
		t.Fatalf("weight %d after SetWeight", b.Weight)
	}
	// The plan with the new weight is committed with it: a's surplus node
	// is already draining.
	draining := h.nodes("a", domain.NodeDraining)
	if len(draining) != 1 || draining[0].DrainCause != domain.CauseFairShare {
		t.Fatalf("a's draining nodes: %+v", draining)
	}
	h.advance(2 * time.Minute)
	if a, b := len(h.preemptibleReady("a")), len(h.preemptibleReady("b")); a != 1 || b != 3 {
		t.Fatalf("weights 1:3: a=%d b=%d nodes, want 1/3", a, b)
	}
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.SetWeight(h.ctx, "a", 2); !errors.Is(err, ErrDeleting) {
		t.Fatalf("deleting cluster: %v", err)
	}
}
