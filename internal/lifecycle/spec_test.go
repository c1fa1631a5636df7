package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/random"
	"github.com/sparecap/sparecap/internal/sim"
)

// The spec of the node's life: its contract (doc.go) as tests, one file
// per step family, each test named as a sentence of the contract. They run
// the executor on a world in memory, the simulated cluster and a fake
// clock: no database, no real time.

var t0 = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

const (
	cluster = "c-1"
	window  = 5 * time.Minute
)

// fakeWorld is the control plane as the executor sees it, in memory.
type fakeWorld struct {
	clk *clock.Fake

	mu       sync.Mutex
	nodes    map[string]domain.Node
	machines map[string]domain.Machine
	gone     map[string]bool // clusters fully deleted
	events   []domain.Event
	obs      []Observation
	handed   []string // nodes whose machine was handed on
	moves    int
	commits  int
	saved    map[string]time.Time // checkpoints within a notice (SaveWork)
	saves    int
	errs     map[string]string // LastError written, by node
	// saveFails is how many SaveWork calls fail next; saveHangs makes
	// them wait for their context.
	saveFails int
	saveHangs bool
	// busy: machines another node occupies now.
	busy map[string]bool
}

func newFakeWorld(clk *clock.Fake) *fakeWorld {
	return &fakeWorld{clk: clk, nodes: map[string]domain.Node{}, machines: map[string]domain.Machine{},
		gone: map[string]bool{}, busy: map[string]bool{}, errs: map[string]string{}}
}

func (w *fakeWorld) Node(_ context.Context, id string) (domain.Node, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, ok := w.nodes[id]
	if !ok {
		return domain.Node{}, domain.ErrNotFound
	}
	return n, nil
}

func (w *fakeWorld) Facts(_ context.Context, n domain.Node, f *Facts) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	f.Machine = w.machines[n.MachineID]
	f.ClusterType = domain.ClusterKubernetes
	f.ClusterGone = w.gone[n.ClusterID]
	f.MachineBusy = w.busy[n.MachineID]
	return nil
}

func (w *fakeWorld) Commit(_ context.Context, n domain.Node, r *Ready) (domain.Node, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur, ok := w.nodes[n.ID]
	if !ok || cur != n || (r.From != AnyState && cur.State != r.From) {
		return cur, ErrStale
	}
	if r.Start && w.busy[n.MachineID] {
		return cur, ErrStale
	}
	w.commits++
	if r.Write != nil {
		cur = *r.Write
	}
	now := w.clk.Now()
	for _, e := range r.Events {
		if e.Timestamp.IsZero() {
			e.Timestamp = now
		}
		e.ClusterID, e.NodeID, e.NodeName = cur.ClusterID, cur.ID, cur.Name
		w.events = append(w.events, e)
	}
	if !r.Machine.Empty() {
		m := w.machines[cur.MachineID]
		if r.Machine.ResetFailures {
			m.Failures = 0
		}
		if r.Machine.Failed {
			m.Failures++
			if m.Failures >= r.Machine.MaxFailures && !m.OutOfService {
				m.OutOfService, m.OutOfServiceReason = true, r.Machine.OutOfServiceReason
			}
		}
		w.machines[m.ID] = m
	}
	if r.HandOver {
		w.handed = append(w.handed, cur.ID)
	}
	w.nodes[cur.ID] = cur
	return cur, nil
}

func (w *fakeWorld) SaveWork(ctx context.Context, id string, at time.Time) error {
	w.mu.Lock()
	hang := w.saveHangs
	w.mu.Unlock()
	if hang {
		<-ctx.Done() // a store that does not answer
		return ctx.Err()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.saveFails > 0 {
		w.saveFails--
		return errors.New("the database is down")
	}
	if w.saved == nil {
		w.saved = map[string]time.Time{}
	}
	w.saved[id] = at
	w.saves++
	return nil
}

func (w *fakeWorld) Failed(_ context.Context, n domain.Node, msg string, reason domain.EventReason) {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.nodes[n.ID]
	cur.LastError = msg
	w.nodes[n.ID] = cur
	w.errs[n.ID] = msg
	if reason != "" {
		w.events = append(w.events, domain.Event{NodeID: n.ID, Reason: reason, Message: msg})
	}
}

func (w *fakeWorld) Observe(obs []Observation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.obs = append(w.obs, obs...)
}

func (w *fakeWorld) Moved() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.moves++
}

// refusing is the simulated cluster, whose calls a test can refuse.
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

func (r *refusing) AddNode(ctx context.Context, s driver.NodeSpec) error {
	if err := r.check("AddNode"); err != nil {
		return err
	}
	return r.Fleet.AddNode(ctx, s)
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

// spec is one test's world: an executor, its world, the cluster, the
// clock.
type spec struct {
	t     *testing.T
	ctx   context.Context
	clk   *clock.Fake
	world *fakeWorld
	sim   *sim.Fleet
	api   *refusing
	e     *Executor
	seq   int
}

// newSpec starts a world whose nodes run pods from pods, on machines
// prepared and wiped at once.
func newSpec(t *testing.T, pods ...sim.PodTemplate) *spec {
	return newSpecTaking(t, -1, pods...)
}

// newSpecTaking is newSpec on machines that take provision to prepare.
func newSpecTaking(t *testing.T, provision time.Duration, pods ...sim.PodTemplate) *spec {
	t.Helper()
	clk := clock.NewFake(t0)
	if pods == nil {
		pods = []sim.PodTemplate{}
	}
	fl, err := sim.New(sim.Config{Clock: clk, Pods: pods, ProvisionTime: provision, WipeTime: -1})
	if err != nil {
		t.Fatal(err)
	}
	s := &spec{t: t, ctx: context.Background(), clk: clk, world: newFakeWorld(clk), sim: fl, api: &refusing{Fleet: fl}}
	s.use(fl)
	return s
}

// use makes the executor prepare and wipe machines through mp.
func (s *spec) use(mp driver.MachineProvider) {
	s.e = NewExecutor(s.world, s.api, mp, ExecutorConfig{Clock: s.clk, Random: random.New(1),
		Steps: Config{RegisterTimeout: time.Minute}})
}

// readyNode adds a ready preemptible node, in the cluster and the world.
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
	s.put(n)
	return n
}

// put stores n (and its machine) in the world.
func (s *spec) put(n domain.Node) {
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	s.world.nodes[n.ID] = n
	if _, ok := s.world.machines[n.MachineID]; !ok {
		s.world.machines[n.MachineID] = domain.Machine{ID: n.MachineID, GPUs: 8}
	}
}

// reclaim makes n draining now for cause, as the plan commit does.
func (s *spec) reclaim(n domain.Node, cause domain.DrainCause) domain.Node {
	st := Start(n, cause, "", s.clk.Now().Add(window), s.clk.Now())
	s.put(st.Node)
	return st.Node
}

// step runs a turn of key and returns its node after it.
func (s *spec) step(key string) (domain.Node, Due, error) {
	s.t.Helper()
	due, err := s.e.turn(s.ctx, key)
	id, ok := CleanupOf(key)
	if !ok {
		id = key
	}
	n, _ := s.world.Node(s.ctx, id)
	return n, due, err
}

// mustStep is step failing the test on an error.
func (s *spec) mustStep(key string) (domain.Node, Due) {
	s.t.Helper()
	n, due, err := s.step(key)
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
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	var out []domain.Event
	for _, e := range s.world.events {
		if e.NodeID == id && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}

// observed are the kinds observed, in order.
func (s *spec) observed() []ObservationKind {
	s.world.mu.Lock()
	defer s.world.mu.Unlock()
	var out []ObservationKind
	for _, o := range s.world.obs {
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
