package lifecycle

import (
	"slices"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/sim"
)

func TestEveryPodGetsItsNoticeAtTZeroWithGraceBoundedByTheDeadline(t *testing.T) {
	long := worker(10*time.Minute, sim.NeverExits)
	short := worker(30*time.Second, sim.NeverExits)
	short.Name = "sidecar"
	s := newSpec(t, long, short)
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	got, due := s.mustStep(n.ID)
	for _, p := range s.pods(n) {
		want := min(p.TerminationGracePeriod, window)
		if p.State != sim.PodTerminating || !p.SIGTERMAt.Equal(t0) || p.Grace != want {
			t.Errorf("pod %s at T+0: %+v, want SIGTERM now with grace %s", p.Name, p, want)
		}
	}
	if !got.Notified || got.State != domain.NodeDraining {
		t.Fatalf("after the first step: %+v", got)
	}
	if !slices.Equal(s.observed(), []ObservationKind{KindNoticeDelivered}) {
		t.Errorf("observed %v", s.observed())
	}
	// Notified: the next steps run in the workers' pool, due by the deadline.
	if due.Pool != Workers || !due.By.Equal(n.Deadline) || due.At.After(n.Deadline) {
		t.Errorf("due %+v", due)
	}
	v, _ := s.sim.Node(cluster, n.Name)
	if !v.Unschedulable || v.Annotations[domain.AnnotationDeadline] != n.Deadline.Format(time.RFC3339) {
		t.Errorf("node not marked: %+v", v)
	}
}

func TestRefusedCourtesiesNeverHoldTheNoticeNorTheEarlyRelease(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, 30*time.Second))
	s.api.set("MarkDraining", "PostNotice")
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	got, _ := s.mustStep(n.ID)
	if p := s.pods(n)[0]; p.State != sim.PodTerminating || !p.SIGTERMAt.Equal(t0) {
		t.Fatalf("pod at T+0: %+v", p)
	}
	if !got.Notified {
		t.Fatal("the notice is not recorded: a refused courtesy held it")
	}
	s.clk.Step(31 * time.Second)
	got, _ = s.mustStep(n.ID)
	if got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeEarly || got.CleanupPending {
		t.Fatalf("after the pod exited: %+v", got)
	}
}

func TestTheNoticeIsRecordedOnlyOnceEveryPodGotIt(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	s.api.set("Notify")
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	got, _, err := s.step(n.ID)
	if err == nil || got.Notified {
		t.Fatalf("a refused notice: %v, notified %v", err, got.Notified)
	}
	if len(s.events(n.ID, domain.ReasonNodeRemoved)) != 0 || got.State != domain.NodeDraining {
		t.Fatalf("the node moved on without its notice: %+v", got)
	}
	s.api.set()
	if got, _ = s.mustStep(n.ID); !got.Notified {
		t.Fatal("not notified once the cluster took the notice")
	}
}

func TestSupportWorkGetsItsNoticeOnceTheWorkloadIsGone(t *testing.T) {
	logs := sim.PodTemplate{Namespace: "kube-system", Name: "logs", TerminationGracePeriod: 10 * time.Second, ExitAfter: 5 * time.Second, DaemonSet: true}
	s := newSpec(t, worker(10*time.Minute, 30*time.Second), logs)
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	byName := func() map[string]sim.PodView {
		m := map[string]sim.PodView{}
		for _, p := range s.pods(n) {
			m[p.Name] = p
		}
		return m
	}
	if p := byName()["logs"]; p.State != sim.PodRunning {
		t.Fatalf("the DaemonSet pod got its notice with the workload: %+v", p)
	}
	s.clk.Step(31 * time.Second) // the worker exits
	got, _ := s.mustStep(n.ID)
	if p := byName()["logs"]; p.State != sim.PodTerminating || !p.SIGTERMAt.Equal(s.clk.Now()) {
		t.Fatalf("the DaemonSet pod once the workload went: %+v", p)
	}
	if got.State != domain.NodeDraining {
		t.Fatalf("the node went before its DaemonSet pod: %+v", got)
	}
	s.clk.Step(6 * time.Second)
	if got, _ = s.mustStep(n.ID); got.State != domain.NodeRemoved || got.Outcome != domain.OutcomeEarly {
		t.Fatalf("after the DaemonSet pod exited: %+v", got)
	}
}

func TestWorkStoppingWithAGraceRunningPastTheDeadlineIsNotifiedAgainWithLess(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n0 := s.readyNode()
	if err := s.sim.Notify(s.ctx, cluster, n0.Name, s.mustWork(n0)[0], t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	n := s.reclaim(n0, domain.CausePreempted)
	s.mustStep(n.ID)
	p := s.pods(n)[0]
	if end := p.SIGTERMAt.Add(p.Grace); end.After(n.Deadline) {
		t.Fatalf("the pod is still to be killed at %s, after the deadline %s", end, n.Deadline)
	}
}

func TestMarksTheTenantRemovedComeBackOnTheNextPass(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	if err := s.sim.Uncordon(cluster, n.Name); err != nil {
		t.Fatal(err)
	}
	s.clk.Step(time.Second)
	s.mustStep(n.ID)
	if v, _ := s.sim.Node(cluster, n.Name); !v.Unschedulable || len(v.Taints) != 1 {
		t.Fatalf("marks not back: %+v", v)
	}
}

func TestAPodBoundAfterTZeroGetsItsOwnNoticeWithGraceToTheDeadline(t *testing.T) {
	s := newSpec(t, worker(10*time.Minute, sim.NeverExits))
	n := s.reclaim(s.readyNode(), domain.CausePreempted)
	s.mustStep(n.ID)
	s.clk.Step(time.Minute)
	if err := s.sim.AddPod(cluster, n.Name, sim.PodTemplate{Namespace: "ml", Name: "late", TerminationGracePeriod: 10 * time.Minute, ExitAfter: sim.NeverExits}); err != nil {
		t.Fatal(err)
	}
	s.mustStep(n.ID)
	for _, p := range s.pods(n) {
		if p.Name == "late" && (p.State != sim.PodTerminating || p.Grace != window-time.Minute) {
			t.Fatalf("late pod: %+v", p)
		}
	}
}
