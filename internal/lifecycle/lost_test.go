package lifecycle

import (
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

func TestANodeDeletedBehindOurBackIsLostAtOnce(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	if err := s.sim.Release(s.ctx, cluster, n.Name); err != nil {
		t.Fatal(err)
	}
	got, due := s.mustStep(n.ID)
	// Lost, and its machine taken back in the same turn.
	if got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeLost || !got.RemovedAt.Equal(t0) || !got.CleanupPending {
		t.Fatalf("%+v", got)
	}
	if !due.Zero() {
		t.Errorf("a removed node is due %+v", due)
	}
	if e := s.events(n.ID, domain.ReasonNodeLost); len(e) != 1 || !strings.Contains(e[0].Message, "deleted from the cluster, not by sparecap; billing stopped") {
		t.Errorf("NodeLost %+v", e)
	}
	if s.world.moves == 0 {
		t.Error("the plan was not told, to replace it")
	}
}

func TestANodeItsDriverFoundLostIsLostAtOnceWithTheDriversReason(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	s.api.mu.Lock()
	s.api.lost = map[string]string{n.Name: "its slurmd stopped answering; set DOWN"}
	s.api.mu.Unlock()
	got, _ := s.mustStep(n.ID)
	if got.Outcome != domain.OutcomeLost || !got.RemovedAt.Equal(t0) {
		t.Fatalf("not lost at once: %+v", got)
	}
	if e := s.events(n.ID, domain.ReasonNodeLost); len(e) != 1 || !strings.Contains(e[0].Message, "its slurmd stopped answering") {
		t.Errorf("NodeLost %+v", e)
	}
}

func TestANodeNotReadyLongerThanNodeLostAfterIsLostAndItsStepSaysWhenToLook(t *testing.T) {
	s := newSpec(t)
	n := s.readyNode()
	if err := s.sim.SetReady(cluster, n.Name, false); err != nil {
		t.Fatal(err)
	}
	s.clk.Step(time.Minute)
	got, due := s.mustStep(n.ID)
	if !due.At.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("due %+v; want when it reaches NodeLostAfter", due)
	}
	if got.State != domain.NodeReady {
		t.Fatalf("lost too early: %+v", got)
	}
	s.clk.Set(due.At)
	if got, _ := s.mustStep(n.ID); got.Outcome != domain.OutcomeLost {
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
	if got, _ := s.mustStep(n.ID); got.State != domain.NodeReady {
		t.Fatalf("decided on a cluster that could not tell: %+v", got)
	}
}

// TestTheBackstopHandsOnOnlyTheNodesThatNeedIt: Attention, the sweep's
// question, says yes to a node lost, not Ready or marked with another
// class, and no to a healthy one.
func TestTheBackstopHandsOnOnlyTheNodesThatNeedIt(t *testing.T) {
	n := domain.Node{Class: domain.Preemptible}
	for _, c := range []struct {
		h    driver.NodeHealth
		want bool
	}{
		{driver.NodeHealth{}, false},
		{driver.NodeHealth{Class: domain.Preemptible}, false},
		{driver.NodeHealth{Gone: true}, true},
		{driver.NodeHealth{Lost: "slurmd down"}, true},
		{driver.NodeHealth{NotReadySince: t0}, true},
		{driver.NodeHealth{Class: domain.Standard}, true},
	} {
		if got := Attention(n, c.h); got != c.want {
			t.Errorf("%+v: %v", c.h, got)
		}
	}
}
