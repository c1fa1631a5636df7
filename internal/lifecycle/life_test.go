package lifecycle

import (
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// TestOneNodesLifeAsData walks a node from provisioning to removed through
// Step alone: each round's Input (the node, the time, the facts, the
// answers of the last round's calls) and the Ready it gives (the write,
// the calls, when it is due). No executor, no store, no driver: this is
// the whole of what the executor applies.
func TestOneNodesLifeAsData(t *testing.T) {
	var cfg Config
	n := domain.Node{ID: "n-1", ClusterID: cluster, MachineID: "m-1", Name: "gpu-preemptible-dp-1", Class: domain.Preemptible,
		GPUs: 8, State: domain.NodeProvisioning, CreatedAt: t0, ProvisioningAt: t0}
	facts := Facts{Tells: true, ProviderTells: true}
	step := func(in Input) Ready {
		t.Helper()
		in.Facts = facts
		return Step(cfg, in)
	}

	// Provisioning: prepare the machine; not done yet, so wait to be told,
	// by the registration deadline.
	r := step(Input{Node: n, Now: t0})
	if len(r.Calls) != 1 || r.Calls[0].Kind != CallPrepare || r.Next != PhasePrepared || r.Write != nil {
		t.Fatalf("provisioning: %+v", r)
	}
	r = step(Input{Node: n, Now: t0, Phase: r.Next, Carry: r.Carry, Results: []Result{{Call: r.Calls[0], First: true}}})
	if len(r.Calls) != 0 || !r.Due.At.IsZero() || !r.Due.By.Equal(t0.Add(15*time.Minute)) {
		t.Fatalf("preparing: %+v", r)
	}
	facts.FirstPrepare = t0

	// Woken 20 s later: prepared, so add it to its cluster; Ready: write it
	// ready, with its event.
	t1 := t0.Add(20 * time.Second)
	r = step(Input{Node: n, Now: t1})
	r = step(Input{Node: n, Now: t1, Phase: r.Next, Carry: r.Carry, Results: []Result{{Call: r.Calls[0], Done: true}}})
	if len(r.Calls) != 1 || r.Calls[0].Kind != CallAddNode {
		t.Fatalf("prepared: %+v", r)
	}
	r = step(Input{Node: n, Now: t1, Phase: r.Next, Carry: r.Carry, Results: []Result{{Call: r.Calls[0]}}})
	if r.Write == nil || r.Write.State != domain.NodeReady || !r.Write.ReadyAt.Equal(t1) || r.From != domain.NodeProvisioning ||
		len(r.Events) != 1 || r.Events[0].Reason != domain.ReasonNodeAdded || !r.Moved || !r.Forget {
		t.Fatalf("registered: %+v", r)
	}
	// Its event tells the instant its billing starts, however late the
	// commit that stamps the rest.
	if !r.Events[0].Timestamp.Equal(t1) {
		t.Fatalf("NodeAdded at %s, want its ReadyAt %s", r.Events[0].Timestamp, t1)
	}
	n = *r.Write

	// Reclaimed at T+0 (the plan's commit): mark and list, then notify.
	t2 := t1.Add(time.Hour)
	n = Start(n, domain.CausePreempted, "", t2.Add(window), t2).Node
	r = step(Input{Node: n, Now: t2})
	if len(r.Calls) != 2 || r.Calls[0].Kind != CallMark || r.Calls[0].Within != time.Second || r.Calls[1].Kind != CallList ||
		r.Calls[1].Group == r.Calls[0].Group {
		t.Fatalf("T+0: %+v", r)
	}
	pod := driver.Work{Namespace: "ml", Name: "worker", Grace: 10 * time.Minute}
	r = step(Input{Node: n, Now: t2, Phase: r.Next, Carry: r.Carry,
		Results: []Result{{Call: r.Calls[0]}, {Call: r.Calls[1], Work: []driver.Work{pod}}}})
	if r.Calls[0].Kind != CallNotify || !r.Calls[0].By.Equal(n.Deadline) || !r.Calls[0].Essential {
		t.Fatalf("notices: %+v", r)
	}
	rs := make([]Result, len(r.Calls))
	for i, c := range r.Calls {
		rs[i] = Result{Call: c}
	}
	r = step(Input{Node: n, Now: t2, Phase: r.Next, Carry: r.Carry, Results: rs})
	if r.Write == nil || !r.Write.Notified || r.Due.Pool != Workers || !r.Due.By.Equal(n.Deadline) || !r.Due.At.IsZero() {
		t.Fatalf("notified: %+v", r)
	}
	n = *r.Write

	// Woken when the pod exits: nothing left, so the drain ends early:
	// a bounded cleanup, then removing, then the wipe and the hand-over.
	t3 := t2.Add(30 * time.Second)
	r = step(Input{Node: n, Now: t3})
	r = step(Input{Node: n, Now: t3, Phase: r.Next, Carry: r.Carry, Results: []Result{{Call: r.Calls[0]}, {Call: r.Calls[1]}}})
	if len(r.Calls) != 1 || r.Calls[0].Kind != CallList || !r.Calls[0].Until.Equal(t3.Add(time.Second)) || r.Hold != CleanupKey(n.ID) {
		t.Fatalf("drain's end: %+v", r)
	}
	for r.Write == nil {
		rs := make([]Result, len(r.Calls))
		for i, c := range r.Calls {
			rs[i] = Result{Call: c}
		}
		r = step(Input{Node: n, Now: t3, Phase: r.Next, Carry: r.Carry, Results: rs})
	}
	if w := r.Write; w.State != domain.NodeRemoving || w.Outcome != domain.OutcomeEarly || !w.RemovedAt.Equal(t3) || w.CleanupPending || !r.Again {
		t.Fatalf("drained: %+v", r)
	}
	n = *r.Write
	r = step(Input{Node: n, Now: t3})
	r = step(Input{Node: n, Now: t3, Phase: r.Next, Results: []Result{{Call: r.Calls[0], Done: true}}})
	if r.Write == nil || r.Write.State != domain.NodeRemoved || !r.HandOver || !r.Moved || !r.Due.Zero() {
		t.Fatalf("removed: %+v", r)
	}
}

func TestADrainWhoseNoticeIsNotOutRunsInTheNoticesPoolUntilItsDeadline(t *testing.T) {
	e := NewExecutor(nil, nil, nil, ExecutorConfig{})
	n := domain.Node{State: domain.NodeDraining, Deadline: t0.Add(window)}
	if d := e.DueOf(n); d.Pool != Notices || !d.By.Equal(n.Deadline) {
		t.Fatalf("%+v", d)
	}
	n.Notified = true
	if d := e.DueOf(n); d.Pool != Workers || !d.By.Equal(n.Deadline) {
		t.Fatalf("notified: %+v", d)
	}
	// A drain on a platform that cannot tell polls, never past its
	// deadline.
	in := Input{Node: n, Now: n.Deadline.Add(-time.Millisecond), Phase: PhaseNotified, Carry: Carry{Work: []driver.Work{{Name: "w"}}}}
	if d := Step(Config{Poll: time.Second}, in).Due; !d.At.Equal(n.Deadline) {
		t.Fatalf("a millisecond before the deadline: due %+v, want the deadline", d)
	}
}

func TestOtherStatesAreDueWhenHandedOn(t *testing.T) {
	e := NewExecutor(nil, nil, nil, ExecutorConfig{Steps: Config{RegisterTimeout: time.Minute}})
	if d := e.DueOf(domain.Node{State: domain.NodeProvisioning, ProvisioningAt: t0}); !d.By.Equal(t0.Add(time.Minute)) {
		t.Fatalf("provisioning: %+v", d)
	}
	for _, st := range []domain.NodeState{domain.NodePending, domain.NodeReady, domain.NodeRemoving, domain.NodeRemoved} {
		if d := e.DueOf(domain.Node{State: st}); !d.Zero() {
			t.Errorf("%s: %+v", st, d)
		}
	}
}
