package provision

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/sim"
)

// The spec of the provisioning machine (doc.go) on a port in memory, the
// simulated fleet and a fake clock.

var t0 = time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)

const (
	cluster   = "c-1"
	provision = 20 * time.Second
	timeout   = time.Minute
)

type memPort struct {
	mu       sync.Mutex
	nodes    map[string]domain.Node
	machines map[string]domain.Machine
	busy     map[string]bool // machines serving another node
	events   []domain.Event
}

func (p *memPort) Machine(_ context.Context, id string) (domain.Machine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.machines[id], nil
}

func (p *memPort) ClusterType(context.Context, string) (domain.ClusterType, error) {
	return domain.ClusterKubernetes, nil
}

func (p *memPort) Start(_ context.Context, id string) (domain.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[id]
	if n.State != domain.NodePending || p.busy[n.MachineID] {
		return n, domain.ErrStale
	}
	n.State = domain.NodeProvisioning
	p.nodes[id] = n
	return n, nil
}

func (p *memPort) TransitionWithMachine(_ context.Context, id string, from domain.NodeState, change Change) (domain.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.nodes[id]
	if n.State != from {
		return n, domain.ErrStale
	}
	var m *domain.Machine
	machine := func() (*domain.Machine, error) {
		if m == nil {
			cp := p.machines[n.MachineID]
			m = &cp
		}
		return m, nil
	}
	p.mu.Unlock()
	evs, err := change(&n, machine, t0)
	p.mu.Lock()
	if err != nil {
		return n, err
	}
	if m != nil {
		p.machines[m.ID] = *m
	}
	p.nodes[id] = n
	p.events = append(p.events, evs...)
	return n, nil
}

// removed records the nodes handed to the removing step.
type removed struct{ ids []string }

func (r *removed) Remove(_ context.Context, n domain.Node) (domain.Node, error) {
	r.ids = append(r.ids, n.ID)
	return n, nil
}

type world struct {
	t       *testing.T
	ctx     context.Context
	clk     *clock.Fake
	port    *memPort
	removed *removed
	lastErr error
	p       *Provisioner
}

func newWorld(t *testing.T) *world { return newWorldTaking(t, provision) }

// newWorldTaking is a world whose machines take d to prepare.
func newWorldTaking(t *testing.T, d time.Duration) *world {
	clk := clock.NewFake(t0)
	fl, err := sim.New(sim.Config{Clock: clk, ProvisionTime: d, Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	s := &world{t: t, ctx: context.Background(), clk: clk, removed: &removed{},
		port: &memPort{nodes: map[string]domain.Node{}, machines: map[string]domain.Machine{}, busy: map[string]bool{}}}
	s.p = New(s.port, fl, fl, s.removed, clk, Config{RegisterTimeout: timeout, Poll: time.Second,
		LastErr: func(string) error { return s.lastErr }}, nil)
	return s
}

func (s *world) node(id string, state domain.NodeState) domain.Node {
	n := domain.Node{ID: id, ClusterID: cluster, MachineID: "m-" + id, Name: "gpu-standard-" + id, Class: domain.Standard,
		GPUs: 8, State: state, CreatedAt: s.clk.Now(), ProvisioningAt: s.clk.Now()}
	s.port.nodes[id] = n
	s.port.machines[n.MachineID] = domain.Machine{ID: n.MachineID, GPUs: 8}
	return n
}

func (s *world) step(id string) domain.Node {
	s.t.Helper()
	if _, err := s.p.Step(s.ctx, s.port.nodes[id]); err != nil {
		s.t.Fatal(err)
	}
	return s.port.nodes[id]
}

func TestAPendingNodeStartsOnceItsMachineIsFree(t *testing.T) {
	s := newWorld(t)
	s.node("a", domain.NodePending)
	s.port.busy["m-a"] = true
	due, err := s.p.Step(s.ctx, s.port.nodes["a"])
	if err != nil || !due.At.IsZero() || s.port.nodes["a"].State != domain.NodePending {
		t.Fatalf("on a busy machine: %+v %v %s", due, err, s.port.nodes["a"].State)
	}
	delete(s.port.busy, "m-a")
	due, err = s.p.Step(s.ctx, s.port.nodes["a"])
	if err != nil || s.port.nodes["a"].State != domain.NodeProvisioning || due.At.IsZero() {
		t.Fatalf("on a free machine: %+v %v %s", due, err, s.port.nodes["a"].State)
	}
}

func TestAProvisioningNodePollsUntilReadyByItsRegistrationDeadline(t *testing.T) {
	s := newWorld(t)
	s.node("a", domain.NodeProvisioning)
	due, err := s.p.Step(s.ctx, s.port.nodes["a"])
	if err != nil || !due.At.Equal(t0.Add(time.Second)) || !due.By.Equal(t0.Add(timeout)) || due.Pool != reclaim.Workers {
		t.Fatalf("first step: %+v %v", due, err)
	}
	s.clk.Step(provision)
	if n := s.step("a"); n.State != domain.NodeReady {
		t.Fatalf("after the machine's provisioning time: %s", n.State)
	}
	if len(s.port.events) != 1 || s.port.events[0].Reason != domain.ReasonNodeAdded {
		t.Fatalf("events %+v", s.port.events)
	}
	if !s.p.FirstPrepare("a").IsZero() {
		t.Error("the first Prepare of a ready node is still remembered")
	}
}

func TestARegisteredNodeClearsItsMachinesFailures(t *testing.T) {
	s := newWorld(t)
	s.node("a", domain.NodeProvisioning)
	s.port.machines["m-a"] = domain.Machine{ID: "m-a", GPUs: 8, Failures: 2}
	s.step("a")
	s.clk.Step(provision)
	s.step("a")
	if m := s.port.machines["m-a"]; m.Failures != 0 {
		t.Fatalf("failures %d after a node registered", m.Failures)
	}
}

func TestANodeNotReadyInTimeGoesBackAndItsMachineIsBlamed(t *testing.T) {
	s := newWorldTaking(t, 2*timeout)
	for i, id := range []string{"a", "b", "c"} {
		s.node(id, domain.NodeProvisioning)
		s.port.nodes[id] = func(n domain.Node) domain.Node { n.MachineID = "m-x"; return n }(s.port.nodes[id])
		s.port.machines["m-x"] = func(m domain.Machine) domain.Machine { m.ID = "m-x"; m.Failures = i; return m }(s.port.machines["m-x"])
		// The window runs from the first Prepare; the machine takes longer.
		s.step(id)
		s.clk.Step(timeout)
		n := s.step(id)
		if n.State != domain.NodeRemoving || !n.CleanupPending {
			t.Fatalf("%s after the timeout: %s", id, n.State)
		}
	}
	m := s.port.machines["m-x"]
	if m.Failures != 3 || !m.OutOfService || !strings.Contains(m.OutOfServiceReason, "3 nodes in a row") {
		t.Fatalf("machine %+v", m)
	}
	if len(s.removed.ids) != 3 {
		t.Fatalf("handed to the removing step: %v", s.removed.ids)
	}
}

func TestATimeoutWhileTheClustersAPIFailedDoesNotBlameTheMachine(t *testing.T) {
	s := newWorldTaking(t, 2*timeout)
	s.node("a", domain.NodeProvisioning)
	s.step("a")
	s.lastErr = &reclaim.ClusterError{Err: errors.New("connection refused")}
	s.clk.Step(timeout)
	if n := s.step("a"); n.State != domain.NodeRemoving {
		t.Fatalf("state %s", n.State)
	}
	if m := s.port.machines["m-a"]; m.Failures != 0 {
		t.Fatalf("machine blamed for the cluster's API: %+v", m)
	}
	if len(s.port.events) != 1 || !strings.Contains(s.port.events[0].Message, "the cluster's API kept failing") {
		t.Fatalf("events %+v", s.port.events)
	}
}
