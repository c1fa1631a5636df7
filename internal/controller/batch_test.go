package controller

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// countingStore counts Updates.
type countingStore struct {
	store.Store
	updates atomic.Int64
}

func (s *countingStore) Update(ctx context.Context, fn func(store.Tx) error) error {
	s.updates.Add(1)
	return s.Store.Update(ctx, fn)
}

// waitQueued waits until n items are queued (behind the plan lock the
// test holds).
func waitQueued(t *testing.T, what string, queued func() int, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); queued() != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d %s queued", queued(), n, what)
		}
	}
}

// TestTransitionsShareCommits: transitions queued while the plan lock is
// held commit together in one transaction; one that fails with a real
// error rolls its batch back, and the others then commit one by one
// with their own outcomes, its own change kept out.
func TestTransitionsShareCommits(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	h.create("a", 64, 0)
	nodes := h.nodes("a", domain.NodeProvisioning)
	if len(nodes) != 8 {
		t.Fatalf("%d provisioning nodes, want 8", len(nodes))
	}
	cs := &countingStore{Store: h.st}
	c := New(cs, h.sim, h.sim, h.clk, h.cfg, nil)
	boom := errors.New("boom")
	run := func(msg string, failing string) map[string]error {
		c.mu.Lock() // every transition queues behind the lock
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := map[string]error{}
		for _, n := range nodes {
			wg.Go(func() {
				_, err := c.transition(h.ctx, n.ID, domain.NodeProvisioning, func(_ func() (store.Tx, error), n *domain.Node, _ time.Time) ([]domain.Event, error) {
					if n.ID == failing {
						return nil, boom
					}
					n.LastError = msg
					return nil, nil
				})
				mu.Lock()
				errs[n.ID] = err
				mu.Unlock()
			})
		}
		waitQueued(t, "transitions", c.tq.len, len(nodes))
		cs.updates.Store(0)
		c.mu.Unlock()
		wg.Wait()
		return errs
	}

	errs := run("first", "")
	if got := cs.updates.Load(); got != 1 {
		t.Errorf("8 queued transitions took %d transactions, want 1", got)
	}
	for _, n := range nodes {
		if errs[n.ID] != nil || h.node(n.ID).LastError != "first" {
			t.Errorf("node %s: err %v, LastError %q", n.Name, errs[n.ID], h.node(n.ID).LastError)
		}
	}

	failing := nodes[3].ID
	errs = run("second", failing)
	if got := cs.updates.Load(); got != 1+8 {
		t.Errorf("a failed batch of 8 took %d transactions, want 1 + 8 one by one", got)
	}
	for _, n := range nodes {
		want, wantErr := "second", error(nil)
		if n.ID == failing {
			want, wantErr = "first", boom
		}
		if !errors.Is(errs[n.ID], wantErr) || h.node(n.ID).LastError != want {
			t.Errorf("node %s: err %v, LastError %q; want %v, %q", n.Name, errs[n.ID], h.node(n.ID).LastError, wantErr, want)
		}
	}
}

// TestCreatesShareCommits: creates queued while the plan lock is held are
// planned and committed together, each with its own answer: a duplicate
// name in the batch is a conflict, a create the fleet cannot hold is
// refused with its shortfall, and one whose own writes fail gets that
// error while the others are created (committed one by one then).
func TestCreatesShareCommits(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	cs := &countingStore{Store: h.st}
	c := New(cs, h.sim, h.sim, h.clk, h.cfg, nil)
	boom := errors.New("boom")
	type req struct {
		name string
		gpus int
		also func(store.Tx, string) error
	}
	run := func(reqs []req) map[string]error {
		c.mu.Lock()
		var wg sync.WaitGroup
		var mu sync.Mutex
		errs := map[string]error{}
		for i, r := range reqs {
			wg.Go(func() {
				cl := domain.Cluster{ID: fmt.Sprintf("c%d-%s", i, r.name), Name: r.name, ProjectID: "p", Region: region, GPUType: gpu,
					Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: r.gpus}
				var also []func(store.Tx, string) error
				if r.also != nil {
					also = append(also, r.also)
				}
				_, err := c.CreateCluster(h.ctx, cl, also...)
				mu.Lock()
				errs[fmt.Sprintf("%d-%s", i, r.name)] = err
				mu.Unlock()
			})
		}
		waitQueued(t, "creates", c.cq.len, len(reqs))
		cs.updates.Store(0)
		c.mu.Unlock()
		wg.Wait()
		return errs
	}

	errs := run([]req{{"a", 8, nil}, {"b", 8, nil}, {"c", 8, nil}, {"a", 8, nil}, {"huge", 800, nil}})
	if got := cs.updates.Load(); got != 1 {
		t.Errorf("5 queued creates took %d transactions, want 1", got)
	}
	var created, conflicts, short int
	for k, err := range errs {
		var sf *ShortfallError
		switch {
		case err == nil:
			created++
		case errors.Is(err, domain.ErrConflict):
			conflicts++
		case errors.As(err, &sf) && strings.HasSuffix(k, "-huge"):
			short++
		default:
			t.Errorf("create %s: %v", k, err)
		}
	}
	if created != 3 || conflicts != 1 || short != 1 {
		t.Errorf("created %d, conflicts %d, refused %d; want 3, 1, 1 (%v)", created, conflicts, short, errs)
	}

	errs = run([]req{{"d", 8, nil}, {"e", 8, func(store.Tx, string) error { return boom }}, {"f", 8, nil}})
	for k, err := range errs {
		if want := strings.HasSuffix(k, "-e"); errors.Is(err, boom) != want || (!want && err != nil) {
			t.Errorf("create %s: %v", k, err)
		}
	}
	for _, name := range []string{"d", "f"} {
		cls, err := h.st.ListClusters(h.ctx, "p")
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, cl := range cls {
			found = found || cl.Name == name
		}
		if !found {
			t.Errorf("cluster %s not created", name)
		}
	}
}

// TestPendingNodeWaitsWithoutTransactions: a node pending on a machine
// that is still being drained costs no transaction per pass; it starts
// when the machine is free.
func TestPendingNodeWaitsWithoutTransactions(t *testing.T) {
	h := newHarness(t, stubbornPods, 2)
	cs := &countingStore{Store: h.st}
	h.c = New(cs, h.sim, h.sim, h.clk, h.cfg, nil)
	h.create("a", 8, 8)
	h.advance(30 * time.Second)
	h.create("b", 8, 0) // reclaims a's preemptible node: b's waits for its machine
	h.advance(5 * time.Second)
	pending := h.onlyNode("b", domain.Standard)
	if pending.State != domain.NodePending {
		t.Fatalf("b's node is %s, want pending behind the drain", pending.State)
	}
	cs.updates.Store(0)
	h.advance(10 * time.Second)
	if n := cs.updates.Load(); n != 0 {
		t.Errorf("10 passes while b's node waited for its machine ran %d transactions, want none", n)
	}
	h.advance(6 * time.Minute) // the drain ends at its deadline; wipe, provision
	if n := h.node(pending.ID); n.State != domain.NodeReady {
		t.Fatalf("after the drain b's node is %s, want ready", n.State)
	}
}

// TestNodesInFlightFromMemory: the pass's list of nodes in flight, read
// from the in-memory copy, is the store's, in its order, through a
// reclaim (pending, provisioning, draining and removing nodes).
func TestNodesInFlightFromMemory(t *testing.T) {
	h := newHarness(t, stubbornPods, 3)
	h.create("a", 8, 16)
	h.advance(30 * time.Second)
	h.create("b", 16, 0)
	cached := h.st.(*store.Cached)
	states := map[domain.NodeState]bool{}
	for range 40 {
		if _, err := h.st.Snapshot(h.ctx); err != nil { // loaded, as the next plan would
			t.Fatal(err)
		}
		got, err := h.c.nodesInFlight(h.ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cached.Store.ListNodes(h.ctx, store.NodeFilter{States: inFlight})
		if err != nil {
			t.Fatal(err)
		}
		if (len(got) > 0 || len(want) > 0) && !reflect.DeepEqual(got, want) {
			t.Fatalf("at %s the in-memory list differs:\n got %+v\nwant %+v", h.clk.Now(), got, want)
		}
		for _, n := range got {
			states[n.State] = true
		}
		h.advance(10 * time.Second)
	}
	if len(states) < 3 {
		t.Fatalf("the scenario showed only %v: too little to compare", states)
	}
}

// TestPrefetchedRereadsWrittenNodes: a batch's transaction reads its nodes
// in one bulk read, and a node it writes (a removal starting the pending
// node of its machine, say) is read again, not served stale to a later
// transition of the same batch.
func TestPrefetchedRereadsWrittenNodes(t *testing.T) {
	h := newHarness(t, quickPods, 3)
	h.create("a", 16, 0)
	ns := h.nodes("a")
	if len(ns) != 2 {
		t.Fatalf("%d nodes, want 2", len(ns))
	}
	a, b := ns[0], ns[1]
	h.update(func(tx store.Tx) error {
		p, err := prefetch(h.ctx, tx, []string{a.ID, b.ID, "n-missing"}, func(id string) string { return id })
		if err != nil {
			return err
		}
		if got, err := p.GetNode(h.ctx, a.ID); err != nil || !reflect.DeepEqual(got, a) {
			t.Fatalf("prefetched %s: %+v, %v", a.ID, got, err)
		}
		if _, err := p.GetNode(h.ctx, "n-missing"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatalf("a node that is not there: %v", err)
		}
		changed := b
		changed.LastError = "written in this transaction"
		if err := p.UpdateNode(h.ctx, changed); err != nil {
			return err
		}
		if got, err := p.GetNode(h.ctx, b.ID); err != nil || got.LastError != changed.LastError {
			t.Fatalf("%s after the transaction wrote it: %+v, %v", b.ID, got, err)
		}
		// Nodes created through it, in bulk, are read from the transaction.
		if _, err := p.GetNode(h.ctx, "n-missing"); !errors.Is(err, domain.ErrNotFound) {
			t.Fatal(err)
		}
		created := domain.Node{ID: "n-missing", ClusterID: "a", MachineID: "m02", Name: "late", Class: domain.Preemptible,
			GPUs: 8, State: domain.NodePending, CreatedAt: h.clk.Now()}
		if err := p.CreateNodes(h.ctx, []domain.Node{created}); err != nil {
			return err
		}
		if got, err := p.GetNode(h.ctx, created.ID); err != nil || got.Name != "late" {
			t.Fatalf("a node created through the prefetched transaction: %+v, %v", got, err)
		}
		return nil
	})
}

// TestBatchedNodeWritesAreSeen: a batch holds its transitions' node
// writes back to write them together, yet every change sees the
// transaction as if each had been written at once: a change that reads
// through the transaction sees the earlier transitions' nodes, and a
// second transition of a node in the same batch starts from the first's
// result.
func TestBatchedNodeWritesAreSeen(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	h.create("a", 64, 0)
	nodes := h.nodes("a", domain.NodeProvisioning)
	if len(nodes) != 8 {
		t.Fatalf("%d provisioning nodes, want 8", len(nodes))
	}
	cs := &countingStore{Store: h.st}
	c := New(cs, h.sim, h.sim, h.clk, h.cfg, nil)
	type step struct {
		id     string
		change changeFunc
	}
	var seen []string // what the reading change found, node by node
	mark := func(s string) changeFunc {
		return func(_ func() (store.Tx, error), n *domain.Node, _ time.Time) ([]domain.Event, error) {
			n.LastError += s
			return nil, nil
		}
	}
	steps := []step{}
	for _, n := range nodes[:7] {
		steps = append(steps, step{n.ID, mark("held")})
	}
	steps = append(steps, step{nodes[0].ID, mark(" again")}, step{nodes[7].ID,
		func(txOf func() (store.Tx, error), n *domain.Node, _ time.Time) ([]domain.Event, error) {
			tx, err := txOf()
			if err != nil {
				return nil, err
			}
			for _, o := range nodes[:7] {
				got, err := tx.GetNode(h.ctx, o.ID)
				if err != nil {
					return nil, err
				}
				seen = append(seen, got.LastError)
			}
			n.LastError = "reader"
			return nil, nil
		}})

	c.mu.Lock() // every transition queues behind the lock, in order
	var wg sync.WaitGroup
	errs := make([]error, len(steps))
	for i, s := range steps {
		wg.Go(func() { _, errs[i] = c.transition(h.ctx, s.id, anyState, s.change) })
		waitQueued(t, "transitions", c.tq.len, i+1)
	}
	cs.updates.Store(0)
	c.mu.Unlock()
	wg.Wait()

	if got := cs.updates.Load(); got != 1 {
		t.Errorf("%d queued transitions took %d transactions, want 1", len(steps), got)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	want := []string{"held again", "held", "held", "held", "held", "held", "held"}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("a change reading through the transaction saw %q, want %q", seen, want)
	}
	for i, n := range nodes {
		want := map[int]string{0: "held again", 7: "reader"}[i]
		if want == "" {
			want = "held"
		}
		if got := h.node(n.ID).LastError; got != want {
			t.Errorf("node %s committed with LastError %q, want %q", n.Name, got, want)
		}
	}
}

// TestAnsweredWaitersLeaveTheLockQueue: a create or a transition whose
// work the lock's holder did returns at once, while the lock is still
// held, rather than waiting for a turn of the lock with nothing left to
// do (on a busy fleet, thousands of such turns queued every create).
func TestAnsweredWaitersLeaveTheLockQueue(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	h.create("a", 16, 0)
	nodes := h.nodes("a", domain.NodeProvisioning)
	if len(nodes) != 2 {
		t.Fatalf("%d provisioning nodes, want 2", len(nodes))
	}
	c := h.c
	c.mu.Lock() // the test is the holder
	created := make(chan error, 1)
	go func() {
		_, err := c.CreateCluster(h.ctx, domain.Cluster{ID: "b", Name: "b", ProjectID: "p", Region: region, GPUType: gpu,
			Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand, NumGPUs: 8})
		created <- err
	}()
	moved := make(chan error, 1)
	go func() {
		_, err := c.transition(h.ctx, nodes[0].ID, domain.NodeProvisioning, func(_ func() (store.Tx, error), n *domain.Node, _ time.Time) ([]domain.Event, error) {
			n.LastError = "moved"
			return nil, nil
		})
		moved <- err
	}()
	waitQueued(t, "creates", c.cq.len, 1)
	waitQueued(t, "transitions", c.tq.len, 1)
	c.flushCreates(h.ctx) // the holder does the queued work
	c.flushTransitions(h.ctx)
	for what, ch := range map[string]chan error{"create": created, "transition": moved} {
		select {
		case err := <-ch:
			if err != nil {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("a %s done by the lock's holder still waits for the lock", what)
		}
	}
	c.mu.Unlock()
	if got := h.node(nodes[0].ID).LastError; got != "moved" {
		t.Errorf("the transition committed LastError %q, want %q", got, "moved")
	}
	if _, err := h.st.GetCluster(h.ctx, "b"); err != nil {
		t.Errorf("the create was not committed: %v", err)
	}
}

// writeLog is a store whose transactions log the clusters they create and
// update (one by one: the log's Tx is no BulkWriter).
type writeLog struct {
	store.Store
	mu               sync.Mutex
	created, updated []string
}

func (s *writeLog) Update(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Update(ctx, func(tx store.Tx) error { return fn(&logTx{Tx: tx, log: s}) })
}

type logTx struct {
	store.Tx
	log *writeLog
}

func (t *logTx) CreateCluster(ctx context.Context, c domain.Cluster) error {
	t.log.mu.Lock()
	t.log.created = append(t.log.created, c.ID)
	t.log.mu.Unlock()
	return t.Tx.CreateCluster(ctx, c)
}

func (t *logTx) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	for _, c := range cs {
		t.log.mu.Lock()
		t.log.created = append(t.log.created, c.ID)
		t.log.mu.Unlock()
	}
	return t.Tx.CreateClusters(ctx, cs)
}

func (t *logTx) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	for _, c := range cs {
		t.log.mu.Lock()
		t.log.updated = append(t.log.updated, c.ID)
		t.log.mu.Unlock()
	}
	return t.Tx.UpdateClusters(ctx, cs)
}

func (t *logTx) UpdateCluster(ctx context.Context, c domain.Cluster) error {
	t.log.mu.Lock()
	t.log.updated = append(t.log.updated, c.ID)
	t.log.mu.Unlock()
	return t.Tx.UpdateCluster(ctx, c)
}

// TestCreatedClustersAreWrittenOnce: a create's commit writes the new
// cluster's row once, with the state and node count its plan gives it,
// not an insert and then an update (on PostgreSQL, each a round trip under
// the plan lock).
func TestCreatedClustersAreWrittenOnce(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	log := &writeLog{Store: h.st}
	c := New(log, h.sim, h.sim, h.clk, h.cfg, nil)
	c.mu.Lock()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = c.CreateCluster(h.ctx, domain.Cluster{ID: fmt.Sprintf("w%d", i), Name: fmt.Sprintf("w%d", i), ProjectID: "p",
				Region: region, GPUType: gpu, Type: domain.ClusterKubernetes, BillingType: domain.BillingOnDemand,
				NumGPUs: 16, DesiredPreemptibleGPUs: 8})
		})
	}
	waitQueued(t, "creates", c.cq.len, len(errs))
	c.mu.Unlock()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("create %d: %v", i, err)
		}
	}
	slices.Sort(log.created)
	if want := []string{"w0", "w1", "w2"}; !slices.Equal(log.created, want) || len(log.updated) > 0 {
		t.Errorf("the creates' commit created %v and updated %v; want created %v, updated none", log.created, log.updated, want)
	}
	for i := range errs {
		cl, err := h.st.GetCluster(h.ctx, fmt.Sprintf("w%d", i))
		if err != nil {
			t.Fatal(err)
		}
		nodes := h.nodes(cl.ID, domain.NodeProvisioning)
		if cl.Status == domain.StatusWaiting && len(nodes) == 0 || cl.NodeSeq != int64(len(nodes)) {
			t.Errorf("cluster %s stored with status %s and node seq %d, with %d nodes", cl.ID, cl.Status, cl.NodeSeq, len(nodes))
		}
	}
}

// TestInlineStepsShareCommits: the steps of nodes due at one instant,
// run inline (Turn, as the simulator does), commit in one transaction,
// not one each.
func TestInlineStepsShareCommits(t *testing.T) {
	h := newHarness(t, quickPods, 8)
	h.create("a", 64, 0)
	h.reconcile()
	if n := len(h.nodes("a", domain.NodeProvisioning)); n != 8 {
		t.Fatalf("%d provisioning nodes, want 8", n)
	}
	h.clk.Step(20 * time.Second) // every machine is prepared now
	cs := &countingStore{Store: h.st}
	h.c.store = cs
	h.reconcile()
	if n := len(h.nodes("a", domain.NodeReady)); n != 8 {
		t.Fatalf("%d ready nodes, want 8", n)
	}
	if got := cs.updates.Load(); got > 3 {
		t.Fatalf("8 nodes became ready in %d transactions, want them to share one (and a replan's)", got)
	}
}
