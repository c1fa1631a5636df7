package controller

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
)

// TestReclaimRecordsLostWork: a drain records, with its T+0, the work its
// node's driver saw at risk then: a busy node's GPUs since its work
// started, with the cause; an idle node puts nothing at risk and has no
// entry.
func TestReclaimRecordsLostWork(t *testing.T) {
	h := newHarness(t, []sim.PodTemplate{{Name: "node-exporter", DaemonSet: true}}, 2)
	h.create("a", 8, 8)
	h.reconcile()
	h.advance(20 * time.Second)
	pre := h.onlyNode("a", domain.Preemptible)
	if err := h.sim.AddPod("a", pre.Name, sim.PodTemplate{Name: "trainer", TerminationGracePeriod: time.Minute, ExitAfter: time.Second}); err != nil {
		t.Fatal(err)
	}
	h.advance(time.Hour)
	notice := h.clk.Now()
	v, _ := h.sim.Node("a", pre.Name)
	want := int64(8) * int64(notice.Sub(v.AddedAt)/time.Second)
	h.create("b", 8, 0) // standard demand takes the preemptible node
	h.reconcile()
	got, err := h.st.ListLostWork(h.ctx, store.LostWorkFilter{ProjectID: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].NodeID != pre.ID || got[0].GPUSeconds != want || got[0].Cause != domain.CausePreempted ||
		!got[0].At.Equal(notice) || got[0].ClusterName != "a" || got[0].Class != domain.Preemptible {
		t.Fatalf("ledger %+v, want the busy node's %d GPU-seconds at %s", got, want, notice)
	}
	// An idle node's drain records nothing.
	std := h.onlyNode("a", domain.Standard)
	h.clk.Step(time.Minute)
	if _, err := h.c.DeleteCluster(h.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	h.reconcile()
	if got, _ := h.st.ListLostWork(h.ctx, store.LostWorkFilter{ClusterID: "a"}); len(got) != 1 {
		t.Fatalf("the idle standard node %s got an entry: %+v", std.Name, got)
	}
}
