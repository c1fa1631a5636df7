package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
)

// pendingCleanup ends n's drain at its deadline with the cluster refusing
// every notice since T+0 and everything at the deadline: the node is
// removed with its cleanup pending and its pod still running.
func (s *spec) pendingCleanup(n domain.Node) domain.Node {
	s.t.Helper()
	s.api.set("Notify")
	if _, _, err := s.step(n.ID); err == nil {
		s.t.Fatal("a refused notice is not an error")
	}
	s.api.set("ListWork", "Notify", "PostNotice", "Release")
	s.clk.Set(n.Deadline)
	got, _ := s.mustStep(n.ID)
	if !got.CleanupPending || got.State != domain.NodeRemoved {
		s.t.Fatalf("at the deadline: %+v", got)
	}
	return got
}

func TestCleanupIsRetriedUntilTheClusterAnswersThenFinishes(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.pendingCleanup(s.reclaim(s.readyNode(), domain.CausePreempted))
	_, _, err := s.step(CleanupKey(n.ID))
	var ce *ClusterError
	if !errors.As(err, &ce) {
		t.Fatalf("cleanup while the cluster refuses: %v", err)
	}
	s.api.set()
	s.clk.Step(time.Minute)
	s.mustStep(CleanupKey(n.ID))
	got, _ := s.world.Node(s.ctx, n.ID)
	if got.CleanupPending {
		t.Fatal("cleanup still pending")
	}
	if e := s.events(n.ID, domain.ReasonCleanupFinished); len(e) != 1 || !strings.Contains(e[0].Message, "1 pods left on it were deleted from the cluster 1m0s after") {
		t.Errorf("CleanupFinished %+v", e)
	}
	if _, ok := s.sim.Node(cluster, n.Name); ok {
		t.Error("the node is still in its cluster")
	}
}

func TestTheCleanupOfAClusterGoneEndsAtOnce(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.pendingCleanup(s.reclaim(s.readyNode(), domain.CausePreempted))
	s.world.gone[cluster] = true
	s.mustStep(CleanupKey(n.ID))
	if got, _ := s.world.Node(s.ctx, n.ID); got.CleanupPending || len(s.events(n.ID, domain.ReasonCleanupFinished)) != 0 {
		t.Fatalf("%+v", got)
	}
}

func TestCleanupReleasesTheNodeEvenWhenItsWorkCannotBeEnded(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.pendingCleanup(s.reclaim(s.readyNode(), domain.CausePreempted))
	s.api.set("Notify", "PostNotice")
	if _, _, err := s.step(CleanupKey(n.ID)); err == nil {
		t.Fatal("cleanup finished while the pods could not be deleted")
	}
	if _, ok := s.sim.Node(cluster, n.Name); ok {
		t.Fatal("the node was not released: its pods' deletion stood in front of it")
	}
}

func TestTheCleanupsNoticesAreACourtesy(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.pendingCleanup(s.reclaim(s.readyNode(), domain.CausePreempted))
	s.api.set("PostNotice")
	if _, _, err := s.step(CleanupKey(n.ID)); err != nil {
		t.Fatalf("a refused notice kept cleanup pending: %v", err)
	}
}

func TestABackgroundCleanupAndADrainsEndNeverCleanUpAtOnce(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.e.runner.Claim(CleanupKey(n.ID)) // the background cleanup is at it
	s.clk.Set(n.Deadline)
	got, _ := s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || !got.CleanupPending || s.api.calls["Release"] != 0 {
		t.Fatalf("%+v, %d releases", got, s.api.calls["Release"])
	}
}
