package reclaim

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

func TestANodeDeletedBehindOurBackIsLostAtOnce(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	if err := s.sim.Release(s.ctx, cluster, n.Name); err != nil {
		t.Fatal(err)
	}
	due, err := s.m.Sweep(s.ctx)
	if err != nil || !due.IsZero() {
		t.Fatal(due, err)
	}
	got, _ := s.port.Node(s.ctx, n.ID)
	if got.State != domain.NodeRemoving || got.Outcome != domain.OutcomeLost || !got.RemovedAt.Equal(t0) || !got.CleanupPending {
		t.Fatalf("%+v", got)
	}
	if e := s.events(n.ID, domain.ReasonNodeLost); len(e) != 1 || !strings.Contains(e[0].Message, "deleted from the cluster, not by sparecap; billing stopped") {
		t.Errorf("NodeLost %+v", e)
	}
	if s.port.kicks == 0 {
		t.Error("the loop was not kicked to replace it")
	}
	// The removing step takes its machine back.
	if got, _ := s.mustStep(n.ID); got.State != domain.NodeRemoved {
		t.Fatalf("%+v", got)
	}
}

func TestANodeItsDriverFoundLostIsLostAtOnceWithTheDriversReason(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	s.api.mu.Lock()
	s.api.lost = map[string]string{n.Name: "its slurmd stopped answering; set DOWN"}
	s.api.mu.Unlock()
	if _, err := s.m.Sweep(s.ctx); err != nil {
		t.Fatal(err)
	}
	got, _ := s.port.Node(s.ctx, n.ID)
	if got.Outcome != domain.OutcomeLost || !got.RemovedAt.Equal(t0) {
		t.Fatalf("not lost at once: %+v", got)
	}
	if e := s.events(n.ID, domain.ReasonNodeLost); len(e) != 1 || !strings.Contains(e[0].Message, "its slurmd stopped answering") {
		t.Errorf("NodeLost %+v", e)
	}
}

func TestANodeNotReadyLongerThanNodeLostAfterIsLostAndTheSweepSaysWhenToLook(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	if err := s.sim.SetReady(cluster, n.Name, false); err != nil {
		t.Fatal(err)
	}
	s.clk.Step(time.Minute)
	due, err := s.m.Sweep(s.ctx)
	if err != nil || !due.Equal(t0.Add(5*time.Minute)) {
		t.Fatalf("due %s, %v; want when it reaches NodeLostAfter", due, err)
	}
	if got, _ := s.port.Node(s.ctx, n.ID); got.State != domain.NodeReady {
		t.Fatalf("lost too early: %+v", got)
	}
	s.clk.Set(due)
	if _, err := s.m.Sweep(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.port.Node(s.ctx, n.ID); got.Outcome != domain.OutcomeLost {
		t.Fatalf("not lost after NodeLostAfter: %+v", got)
	}
}

func TestAClusterThatCannotTellDecidesNothing(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	if err := s.sim.Release(s.ctx, cluster, n.Name); err != nil {
		t.Fatal(err)
	}
	s.api.set("Health")
	if _, err := s.m.Sweep(s.ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.port.Node(s.ctx, n.ID); got.State != domain.NodeReady {
		t.Fatalf("decided on a cluster that could not tell: %+v", got)
	}
}
