package lifecycle

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// The spec of the provisioning machine (doc.go) on the world in memory,
// the simulated fleet and a fake clock: its machines take provision to
// prepare, and a node must be ready within timeout.
const (
	provision = 20 * time.Second
	timeout   = time.Minute
)

// node stores a node of id in state on machine m-<id>.
func (s *spec) node(id string, state domain.NodeState) domain.Node {
	n := domain.Node{ID: id, ClusterID: cluster, MachineID: "m-" + id, Name: "gpu-dp-" + id, Class: domain.Standard,
		GPUs: 8, State: state, CreatedAt: s.clk.Now(), ProvisioningAt: s.clk.Now()}
	s.put(n)
	return n
}

func (s *spec) machine(id string) domain.Machine {
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	return s.world.machines[id]
}

func (s *spec) setMachine(m domain.Machine) {
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	s.world.machines[m.ID] = m
}

func TestAPendingNodeStartsOnceItsMachineIsFree(t *testing.T) {
	s := newSpecTaking(t, provision)
	s.node("a", domain.NodePending)
	s.world.busy["m-a"] = true
	got, due := s.mustStep("a")
	if !due.Zero() || got.State != domain.NodePending {
		t.Fatalf("on a busy machine: %+v %s", due, got.State)
	}
	delete(s.world.busy, "m-a")
	got, due = s.mustStep("a")
	if got.State != domain.NodeProvisioning || due.By.IsZero() {
		t.Fatalf("on a free machine: %+v %s", due, got.State)
	}
}

func TestAProvisioningNodeWaitsToBeWokenByItsRegistrationDeadline(t *testing.T) {
	s := newSpecTaking(t, provision)
	s.node("a", domain.NodeProvisioning)
	_, due := s.mustStep("a")
	// The simulated fleet tells when the machine is ready: no poll.
	if !due.At.IsZero() || !due.By.Equal(t0.Add(timeout)) || due.Pool != Workers {
		t.Fatalf("first turn: %+v", due)
	}
	s.clk.Step(provision)
	if n, _ := s.mustStep("a"); n.State != domain.NodeReady {
		t.Fatalf("after the machine's provisioning time: %s", n.State)
	}
	if e := s.events("a", domain.ReasonNodeAdded); len(e) != 1 {
		t.Fatalf("events %+v", s.world.events)
	}
	if !s.e.FirstPrepare("a").IsZero() {
		t.Error("the first Prepare of a ready node is still remembered")
	}
}

func TestARegisteredNodeClearsItsMachinesFailures(t *testing.T) {
	s := newSpecTaking(t, provision)
	s.node("a", domain.NodeProvisioning)
	s.setMachine(domain.Machine{ID: "m-a", GPUs: 8, Failures: 2})
	s.mustStep("a")
	s.clk.Step(provision)
	s.mustStep("a")
	if m := s.machine("m-a"); m.Failures != 0 {
		t.Fatalf("failures %d after a node registered", m.Failures)
	}
}

func TestANodeNotReadyInTimeGoesBackAndItsMachineIsBlamed(t *testing.T) {
	s := newSpecTaking(t, 2*timeout)
	for i, id := range []string{"a", "b", "c"} {
		n := s.node(id, domain.NodeProvisioning)
		n.MachineID = "m-x"
		s.put(n)
		s.setMachine(domain.Machine{ID: "m-x", GPUs: 8, Failures: i})
		// The window runs from the first Prepare; the machine takes longer.
		s.mustStep(id)
		s.clk.Step(timeout)
		got, _ := s.mustStep(id)
		// Given back, its machine wiped and handed on in the same turn.
		if got.State != domain.NodeRemoved || !got.CleanupPending {
			t.Fatalf("%s after the timeout: %+v", id, got)
		}
	}
	m := s.machine("m-x")
	if m.Failures != 3 || !m.OutOfService || !strings.Contains(m.OutOfServiceReason, "3 nodes in a row") {
		t.Fatalf("machine %+v", m)
	}
	if e := s.events("c", domain.ReasonRegistrationFailed); len(e) != 1 || !strings.Contains(e[0].Message, "taken out of service after 3") {
		t.Fatalf("RegistrationFailed %+v", e)
	}
	if len(s.world.handed) != 3 {
		t.Fatalf("handed on: %v", s.world.handed)
	}
}

func TestATimeoutWhileTheClustersAPIFailedDoesNotBlameTheMachine(t *testing.T) {
	s := newSpecTaking(t, 2*timeout)
	s.node("a", domain.NodeProvisioning)
	s.mustStep("a")
	// The last turn failed on the cluster's API.
	s.e.runner.backoff.Fail("a", s.clk.Now(), &ClusterError{Err: errors.New("connection refused")})
	s.clk.Step(timeout)
	if n, _ := s.mustStep("a"); n.State != domain.NodeRemoved {
		t.Fatalf("state %s", n.State)
	}
	if m := s.machine("m-a"); m.Failures != 0 {
		t.Fatalf("machine blamed for the cluster's API: %+v", m)
	}
	if e := s.events("a", domain.ReasonRegistrationFailed); len(e) != 1 || !strings.Contains(e[0].Message, "the cluster's API kept failing") {
		t.Fatalf("events %+v", s.world.events)
	}
}

// TestAFirstPrepareLateIsNotLate: a turn that first reaches a node after
// its registration deadline (queued behind others, or a new leader) gives
// its machine a fresh window rather than failing it.
func TestAFirstPrepareLateIsNotLate(t *testing.T) {
	s := newSpecTaking(t, provision)
	s.node("a", domain.NodeProvisioning)
	s.clk.Step(2 * timeout)
	got, due := s.mustStep("a")
	if got.State != domain.NodeProvisioning || !due.By.Equal(s.clk.Now().Add(timeout)) {
		t.Fatalf("first reached late: %+v, due %+v", got, due)
	}
}

// TestAClusterThatRefusesTheNodeIsTheClustersFailure: AddNode refused is
// the cluster's error (not the machine's), retried.
func TestAClusterThatRefusesTheNodeIsTheClustersFailure(t *testing.T) {
	s := newSpec(t)
	s.api.set("AddNode")
	s.node("a", domain.NodeProvisioning)
	_, _, err := s.step("a")
	var ce *ClusterError
	if !errors.As(err, &ce) || s.world.errs["a"] == "" {
		t.Fatalf("AddNode refused: %v, last error %q", err, s.world.errs["a"])
	}
	s.api.set()
	if got, _ := s.mustStep("a"); got.State != domain.NodeReady || s.world.errs["a"] != "" {
		t.Fatalf("once the cluster takes it: %+v, last error %q", got, s.world.errs["a"])
	}
}
