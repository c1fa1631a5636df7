package lifecycle

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
)

func TestTheNodeGoesAsSoonAsItsWorkEnded(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, 30*time.Second))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.clk.Step(30 * time.Second)
	got, due := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeEarly || !got.DrainedAt.Equal(s.clk.Now()) ||
		!got.RemovedAt.Equal(s.clk.Now()) || got.CleanupPending {
		t.Fatalf("after the pods exited: %+v", got)
	}
	if e := s.events(n.ID, domain.ReasonNodeDrained); len(e) != 1 || !strings.Contains(e[0].Message, "exited 30s after the notice, 4m30s before the deadline") {
		t.Errorf("NodeDrained %+v", e)
	}
	if e := s.events(n.ID, domain.ReasonNodeRemoved); len(e) != 1 || !strings.Contains(e[0].Message, "before the deadline") {
		t.Errorf("NodeRemoved %+v", e)
	}
	if !slices.Equal(s.world.handed, []string{n.ID}) || s.world.moves == 0 {
		t.Errorf("machine handed on %v, moves %d", s.world.handed, s.world.moves)
	}
	if !slices.Equal(s.observed(), []ObservationKind{KindNoticeDelivered, KindDrainFinished}) {
		t.Errorf("observed %v", s.observed())
	}
	if !due.At.IsZero() {
		t.Errorf("a removed node is due at %s", due.At)
	}
	if _, ok := s.sim.Node(cluster, n.Name); ok {
		t.Error("the node is still in its cluster")
	}
}

func TestAtTheDeadlineTheMachineGoesBackWhateverTheClusterAnswers(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.api.set("MarkDraining", "ListWork", "Notify", "PostNotice", "Release", "Health")
	s.clk.Set(n.Deadline)
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeDeadline || !got.RemovedAt.Equal(n.Deadline) || !got.CleanupPending {
		t.Fatalf("at the deadline with the cluster refusing everything: %+v", got)
	}
	if e := s.events(n.ID, domain.ReasonNodeRemoved); len(e) != 1 || !strings.Contains(e[0].Message, "cleanup pending") {
		t.Errorf("NodeRemoved %+v", e)
	}
}

func TestADrainThatFailsUntilTheDeadlineEndsAtTheDeadline(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.api.set("Notify")
	if _, _, err := s.step(n.ID); err == nil {
		t.Fatal("a refused notice is not an error")
	}
	s.clk.Set(n.Deadline)
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeDeadline {
		t.Fatalf("%+v", got)
	}
}

func TestWorkGoneInTheLastSecondWasEndedByTheDeadline(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, window-500*time.Millisecond))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.clk.Set(n.Deadline.Add(-400 * time.Millisecond))
	got, _ := s.mustStep(n.ID)
	if got.Outcome != domain.OutcomeDeadline || len(s.events(n.ID, domain.ReasonNodeDrained)) != 0 {
		t.Fatalf("work gone in the last second: outcome %s, events %+v", got.Outcome, s.world.events)
	}
}

// TestACheckpointWithinTheNoticeIsRecordedOnce: work that reports a
// checkpoint after its notice saved what the ledger put at risk; one
// before the notice saves nothing; it is recorded once, and a failed
// write is tried again on the next pass.
func TestACheckpointWithinTheNoticeIsRecordedOnce(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.api.checkpoint(n.Name, n.DrainStartedAt.Add(-time.Minute))
	s.mustStep(n.ID)
	if s.world.saves != 0 {
		t.Fatalf("a checkpoint before the notice was recorded: %v", s.world.saved)
	}
	s.clk.Step(10 * time.Second)
	at := s.clk.Now()
	s.api.checkpoint(n.Name, at)
	s.world.saveFails = 1
	for range 3 {
		s.mustStep(n.ID)
		s.clk.Step(time.Second)
	}
	if !s.world.saved[n.ID].Equal(at) || s.world.saves != 1 {
		t.Fatalf("saved %v in %d writes; want %v once", s.world.saved, s.world.saves, at)
	}
}

// TestAStoreThatHangsNeverHoldsTheNodePastItsDeadline: recording a
// checkpoint within the notice is bounded, so at the deadline the node
// goes whatever the store does.
func TestAStoreThatHangsNeverHoldsTheNodePastItsDeadline(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.api.checkpoint(n.Name, s.clk.Now())
	s.world.saveHangs = true
	s.clk.Set(n.Deadline)
	start := time.Now()
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || time.Since(start) > 3*SaveWorkWait {
		t.Fatalf("at the deadline with a hanging store: %s after %s", got.State, time.Since(start))
	}
}
