package controller

import (
	"testing"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
)

// TestReclaimOfANodeSeenPending: a plan that saw a node pending gives its
// reclaim no deadline (a pending node is dropped without a drain). Should
// the node have started by the commit, it still gets the whole drain
// window, never a zero deadline that would take its machine at once
// without a notice.
func TestReclaimOfANodeSeenPending(t *testing.T) {
	h := newHarness(t, quickPods, 2)
	pre := fillPreemptible(h)
	now := h.clk.Now()
	pl := allocator.Plan{Reclaims: []allocator.Reclaim{{NodeID: pre.ID, ClusterID: pre.ClusterID, MachineID: pre.MachineID, Cause: domain.CausePreempted}}}
	h.c.mu.Lock()
	err := h.c.commit(h.ctx, pl, &allocator.Token{}, now, commitWrites{})
	h.c.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	n, err := h.st.GetNode(h.ctx, pre.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := now.Add(domain.DefaultDrainWindow); n.State != domain.NodeDraining || !n.Deadline.Equal(want) {
		t.Fatalf("%s with deadline %v, want draining until %v", n.State, n.Deadline, want)
	}
}
