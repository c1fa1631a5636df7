package reclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/steprun"
)

// The spec of the reclaim machine: its contract (doc.go) as tests, one
// file per step family, each test named as a sentence of the contract.
// They run the machine on a fake port (nodes in memory), the simulated
// cluster and a fake clock: no database, no real time.

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	cluster = "c-1"
	window  = 5 * time.Minute
)

// fakePort is the controller as the machine sees it, in memory.
type fakePort struct {
	clk *clock.Fake

	mu       sync.Mutex
	nodes    map[string]domain.Node
	machines map[string]domain.Machine
	gone     map[string]bool // clusters fully deleted
	events   []domain.Event
	obs      []Observation
	claims   map[string]bool
	handed   []string // nodes whose machine was handed on
	kicks    int
	saved    map[string]time.Time // checkpoints within a notice (SaveWork)
	saves    int
	// saveFails is how many SaveWork calls fail next; saveHangs makes
	// them wait for their context.
	saveFails int
	saveHangs bool
	// others: machines another node occupies now (Owns fails).
	others map[string]string
}

func newFakePort(clk *clock.Fake) *fakePort {
	return &fakePort{clk: clk, nodes: map[string]domain.Node{}, machines: map[string]domain.Machine{},
		gone: map[string]bool{}, claims: map[string]bool{}, others: map[string]string{}}
}

func (p *fakePort) Node(_ context.Context, id string) (domain.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nodes[id]
	if !ok {
		return domain.Node{}, domain.ErrNotFound
	}
	return n, nil
}

func (p *fakePort) Machine(_ context.Context, id string) (domain.Machine, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.machines[id]
	if !ok {
		return domain.Machine{}, domain.ErrNotFound
	}
	return m, nil
}

func (p *fakePort) ClusterGone(_ context.Context, id string) (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gone[id], nil
}

func (p *fakePort) ReadyNodes(context.Context) ([]*domain.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*domain.Node
	for _, n := range p.nodes {
		if n.State == domain.NodeReady {
			out = append(out, &n)
		}
	}
	slices.SortFunc(out, func(a, b *domain.Node) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

func (p *fakePort) Transition(_ context.Context, id string, from domain.NodeState, change Change) (domain.Node, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n, ok := p.nodes[id]
	if !ok || (from != AnyState && n.State != from) {
		return n, ErrStale
	}
	now := p.clk.Now()
	evs, err := change(&n, now)
	if err != nil {
		return n, err
	}
	p.nodes[id] = n
	for _, e := range evs {
		if e.Timestamp.IsZero() {
			e.Timestamp = now
		}
		e.ClusterID, e.NodeID, e.NodeName = n.ClusterID, n.ID, n.Name
		p.events = append(p.events, e)
	}
	return n, nil
}

func (p *fakePort) HandOver(_ context.Context, n domain.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	cur := p.nodes[n.ID]
	if cur.State != domain.NodeRemoving {
		return ErrStale
	}
	cur.State = domain.NodeRemoved
	p.nodes[n.ID] = cur
	p.handed = append(p.handed, n.ID)
	return nil
}

func (p *fakePort) Owns(_ context.Context, n domain.Node) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.nodes[n.ID].State != domain.NodeRemoving || p.others[n.MachineID] != "" {
		return ErrStale
	}
	return nil
}

func (p *fakePort) Claim(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claims[key] {
		return false
	}
	p.claims[key] = true
	return true
}

func (p *fakePort) Release(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.claims, key)
}

func (p *fakePort) Observe(obs ...Observation) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.obs = append(p.obs, obs...)
}

func (p *fakePort) SaveWork(ctx context.Context, id string, at time.Time) error {
	p.mu.Lock()
	hang := p.saveHangs
	p.mu.Unlock()
	if hang {
		<-ctx.Done() // a store that does not answer
		return ctx.Err()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.saveFails > 0 {
		p.saveFails--
		return errors.New("the database is down")
	}
	if p.saved == nil {
		p.saved = map[string]time.Time{}
	}
	p.saved[id] = at
	p.saves++
	return nil
}

func (p *fakePort) Kick() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.kicks++
}

// cluster is the simulated cluster, whose calls a test can refuse.
type refusing struct {
	*sim.Fleet
	mu     sync.Mutex
	refuse map[string]bool // by method name
	calls  map[string]int
	lost   map[string]string // NodeHealth.Lost by node name
	// checkpoints are the NodeLoad.LastCheckpoint of nodes, by name.
	checkpoints map[string]time.Time
}

// checkpoint has node's work report a checkpoint at at.
func (r *refusing) checkpoint(node string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.checkpoints == nil {
		r.checkpoints = map[string]time.Time{}
	}
	r.checkpoints[node] = at
}

func (r *refusing) Load(c, n string) domain.NodeLoad {
	l := r.Fleet.Load(c, n)
	r.mu.Lock()
	defer r.mu.Unlock()
	l.LastCheckpoint = r.checkpoints[n]
	return l
}

var errRefused = fmt.Errorf("the cluster refused the call: %w", driver.ErrRefused)

func (r *refusing) check(op string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.calls == nil {
		r.calls = map[string]int{}
	}
	r.calls[op]++
	if r.refuse[op] {
		return errRefused
	}
	return nil
}

func (r *refusing) set(ops ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refuse = map[string]bool{}
	for _, op := range ops {
		r.refuse[op] = true
	}
}

func (r *refusing) MarkDraining(ctx context.Context, c, n string, m driver.Marks) error {
	if err := r.check("MarkDraining"); err != nil {
		return err
	}
	return r.Fleet.MarkDraining(ctx, c, n, m)
}

func (r *refusing) ListWork(ctx context.Context, c, n string) ([]driver.Work, error) {
	if err := r.check("ListWork"); err != nil {
		return nil, err
	}
	return r.Fleet.ListWork(ctx, c, n)
}

func (r *refusing) Notify(ctx context.Context, c, n string, w driver.Work, by time.Time) error {
	if err := r.check("Notify"); err != nil {
		return err
	}
	return r.Fleet.Notify(ctx, c, n, w, by)
}

func (r *refusing) PostNotice(ctx context.Context, c, n string, w *driver.Work, e driver.Notice) error {
	if err := r.check("PostNotice"); err != nil {
		return err
	}
	return r.Fleet.PostNotice(ctx, c, n, w, e)
}

func (r *refusing) Release(ctx context.Context, c, n string) error {
	if err := r.check("Release"); err != nil {
		return err
	}
	return r.Fleet.Release(ctx, c, n)
}

func (r *refusing) Health(ctx context.Context, c, n string) (driver.NodeHealth, error) {
	if err := r.check("Health"); err != nil {
		return driver.NodeHealth{}, err
	}
	h, err := r.Fleet.Health(ctx, c, n)
	r.mu.Lock()
	h.Lost = r.lost[n]
	r.mu.Unlock()
	return h, err
}

// spec is one test's world: a machine, its port, the cluster, the clock.
type spec struct {
	t    *testing.T
	ctx  context.Context
	clk  *clock.Fake
	port *fakePort
	sim  *sim.Fleet
	api  *refusing
	m    *Machine
	seq  int
}

// newSpec starts a world whose nodes run pods from pods.
func newSpec(t *testing.T, pods ...sim.PodTemplate) *spec {
	t.Helper()
	clk := clock.NewFake(t0)
	if pods == nil {
		pods = []sim.PodTemplate{}
	}
	fl, err := sim.New(sim.Config{Clock: clk, Pods: pods, ProvisionTime: -1, WipeTime: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := &spec{t: t, ctx: context.Background(), clk: clk, port: newFakePort(clk), sim: fl, api: &refusing{Fleet: fl}}
	s.m = New(s.port, s.api, fl, clk, Config{}, nil)
	return s
}

// readyNode adds a ready preemptible node, in the cluster and the port.
func (s *spec) readyNode() domain.Node {
	s.t.Helper()
	s.seq++
	n := domain.Node{ID: fmt.Sprintf("n-%d", s.seq), ClusterID: cluster, MachineID: fmt.Sprintf("m-%d", s.seq),
		Name: domain.NodeName(domain.Preemptible, int64(s.seq)), Class: domain.Preemptible, GPUs: 8,
		State: domain.NodeReady, CreatedAt: s.clk.Now(), ReadyAt: s.clk.Now()}
	err := s.sim.AddNode(s.ctx, driver.NodeSpec{ClusterID: cluster, NodeName: n.Name, MachineID: n.MachineID, Class: n.Class, GPUs: 8})
	if err != nil {
		s.t.Fatal(err)
	}
	s.port.mu.Lock()
	s.port.nodes[n.ID] = n
	s.port.machines[n.MachineID] = domain.Machine{ID: n.MachineID, GPUs: 8}
	s.port.mu.Unlock()
	return n
}

// reclaim makes n draining now for cause, as the plan commit does.
func (s *spec) reclaim(n domain.Node, cause domain.DrainCause) domain.Node {
	st := Start(n, cause, "", s.clk.Now().Add(window), s.clk.Now())
	s.port.mu.Lock()
	s.port.nodes[n.ID] = st.Node
	s.port.mu.Unlock()
	return st.Node
}

// step runs the machine's step on node id and returns the node after it.
func (s *spec) step(id string) (domain.Node, steprun.Due, error) {
	s.t.Helper()
	n, _ := s.port.Node(s.ctx, id)
	due, err := s.m.Step(s.ctx, n)
	n, _ = s.port.Node(s.ctx, id)
	return n, due, err
}

// mustStep is step failing the test on an error.
func (s *spec) mustStep(id string) (domain.Node, steprun.Due) {
	s.t.Helper()
	n, due, err := s.step(id)
	if err != nil {
		s.t.Fatal(err)
	}
	return n, due
}

// pods are the node's pods as the cluster shows them.
func (s *spec) pods(n domain.Node) []sim.PodView {
	v, _ := s.sim.Node(cluster, n.Name)
	return v.Pods
}

// events of node id with reason, in order.
func (s *spec) events(id string, reason domain.EventReason) []domain.Event {
	s.port.mu.Lock()
	defer s.port.mu.Unlock()
	var out []domain.Event
	for _, e := range s.port.events {
		if e.NodeID == id && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// observed are the kinds observed, in order.
func (s *spec) observed() []ObservationKind {
	s.port.mu.Lock()
	defer s.port.mu.Unlock()
	var out []ObservationKind
	for _, o := range s.port.obs {
		out = append(out, o.Kind)
	}
	return out
}

func worker(grace, exitAfter time.Duration) sim.PodTemplate {
	return sim.PodTemplate{Namespace: "ml", Name: "worker", TerminationGracePeriod: grace, ExitAfter: exitAfter}
}

// mustWork lists the work on n.
func (s *spec) mustWork(n domain.Node) []driver.Work {
	s.t.Helper()
	w, err := s.sim.ListWork(s.ctx, cluster, n.Name)
	if err != nil {
		s.t.Fatal(err)
	}
	return w
}
