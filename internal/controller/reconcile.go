package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// Run reconciles until ctx ends: after each pass it sleeps until the
// earliest drain deadline, the end of a cooldown or a retry, a Kick, or
// Interval. Node steps run in the background (see pass), so a cluster
// whose API is slow or down never holds up another cluster's drains.
func (c *Controller) Run(ctx context.Context) error {
	defer c.steps.Wait()
	for {
		next, err := c.pass(ctx, false)
		if err != nil && ctx.Err() == nil {
			c.log.Error("reconcile", "err", err)
		}
		wait := nextWait(next, c.clock.Now(), c.cfg.Interval)
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-c.clock.After(wait):
		}
	}
}

// nextWait is how long the loop sleeps: until next, at most interval.
// Overdue work does not shorten the sleep: a node whose step failed waits
// for its backoff (retryAt), one whose step is still running kicks the
// loop when it ends, and nothing else is ever overdue, because the
// deadline step needs no answer from the tenant's cluster.
func nextWait(next, now time.Time, interval time.Duration) time.Duration {
	if next.IsZero() {
		return interval
	}
	d := next.Sub(now)
	if d <= 0 {
		return interval
	}
	return min(d, interval)
}

// inFlight are the node states the step machine moves on.
var inFlight = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}

// Reconcile runs one pass and waits for every node step it started: plan
// and commit what changed, step every node in flight (concurrently, up to
// Config.Workers at a time), clean up what removed nodes left in their
// clusters, check ready nodes for loss, finish deleted clusters, prune
// old events and archive old removed nodes. It returns the earliest time
// something is due (a drain deadline, a registration timeout, a cooldown
// end, a retry), or zero.
func (c *Controller) Reconcile(ctx context.Context) (time.Time, error) {
	return c.pass(ctx, true)
}

// pass is Reconcile; with wait false it returns without waiting for the
// node steps it started. A node whose step is still running from an
// earlier pass is left to it, and a step that finishes kicks the loop, so
// the next pass sees what it changed.
func (c *Controller) pass(ctx context.Context, wait bool) (time.Time, error) {
	if err := c.recordAccess(ctx); err != nil {
		c.log.Warn("cannot record what a cluster's permission check found", "err", err)
	}
	pl, err := c.replan(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := c.clock.Now()
	next := pl.NextWake
	earlier := func(t time.Time) {
		// Only the future counts: see nextWait.
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	moved := c.moved.Load()
	nodes, err := c.nodesInFlight(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("list nodes in flight: %w", err)
	}
	cleanups, err := c.store.ListNodes(ctx, store.NodeFilter{CleanupPending: true, IncludeRemoved: true})
	if err != nil {
		return time.Time{}, fmt.Errorf("list nodes to clean up: %w", err)
	}
	var (
		errMu sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	// start runs f for the work key in the background (or inline, see
	// below), unless its backoff says later or a run for key is going on.
	start := func(key string, n domain.Node, f func(context.Context, domain.Node) error) {
		if at := c.backoff.retryAt(key, n, now); now.Before(at) {
			earlier(at)
			return
		}
		if !c.claim(key) {
			return
		}
		wg.Add(1)
		c.steps.Add(1)
		run := func(f func()) { go f() }
		if wait && c.cfg.Workers == 1 {
			// One worker and a caller that waits: step in order, on this
			// goroutine, so a test's sequence of driver calls repeats.
			run = func(f func()) { f() }
		}
		run(func() {
			defer c.steps.Done()
			defer wg.Done()
			defer c.release(key)
			pool := c.workers
			if n.State == domain.NodeDraining && !n.Notified {
				pool = c.notices
			}
			select {
			case pool <- struct{}{}:
			case <-ctx.Done():
				return
			}
			moved := c.moved.Load()
			err := f(ctx, n)
			<-pool
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				c.backoff.fail(key, c.clock.Now(), err)
				c.noteError(ctx, n, err)
			} else {
				c.backoff.ok(key)
				c.clearError(ctx, n)
			}
			if wait {
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
				return
			}
			// Background step: report through the log and let the loop
			// see what changed (or plan the retry) at once. A step that
			// moved no node (a drain waiting for its pods) does not: the
			// next pass comes at the interval, or when pods go.
			if err != nil {
				c.log.Warn("node step failed; retrying with backoff", "err", err)
			}
			if err != nil || c.moved.Load() != moved {
				c.Kick()
			}
		})
	}
	var busy map[string]bool // built only when a node is pending
	if slices.ContainsFunc(nodes, func(n domain.Node) bool { return n.State == domain.NodePending }) {
		if busy, err = c.busyMachines(ctx); err != nil {
			return time.Time{}, err
		}
	}
	provisioning := 0
	for _, n := range nodes {
		switch n.State {
		case domain.NodeDraining:
			earlier(n.Deadline)
		case domain.NodeProvisioning:
			provisioning++
			earlier(c.registerBy(n))
		case domain.NodePending:
			if busy[n.MachineID] {
				// Its machine is still being vacated: the step would find
				// that in a transaction of its own. The removal that frees
				// the machine starts the node (and kicks the loop).
				continue
			}
		}
		start(n.ID, n, c.step)
	}
	for _, n := range cleanups {
		start(cleanupKey(n.ID), n, c.stepCleanup)
	}
	c.preparing.prune(nodes, provisioning)
	if c.sweepNow.Swap(false) || now.Sub(c.lastSweep) >= c.cfg.SweepEvery || (!c.lostDue.IsZero() && !now.Before(c.lostDue)) {
		if err := c.sweep(ctx); err != nil {
			errs = append(errs, err)
		}
		c.lastSweep = now
	}
	earlier(c.lostDue)
	if wait {
		wg.Wait()
	}
	if err := c.finishDeletions(ctx); err != nil {
		errs = append(errs, err)
	}
	// Nodes that became ready or left change cluster states and may free
	// capacity: plan again rather than wait for the next pass.
	if c.moved.Load() != moved {
		pl, err := c.replan(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			earlier(pl.NextWake)
		}
	}
	if now := c.clock.Now(); now.Sub(c.lastPrune) >= time.Minute {
		err := c.store.Update(ctx, func(tx store.Tx) error {
			_, err := tx.PruneEvents(ctx, now.Add(-c.cfg.EventRetention))
			return err
		})
		if err == nil {
			_, err = c.archive(ctx, now.Add(-c.cfg.EventRetention))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("prune events and archive nodes: %w", err))
		} else {
			c.lastPrune = now
		}
	}
	return next, errors.Join(errs...)
}

// nodesInFlight lists the nodes the step machine moves on: from the
// leader's in-memory copy when it is loaded (it holds the live nodes in
// the store's order), else from the store.
func (c *Controller) nodesInFlight(ctx context.Context) ([]domain.Node, error) {
	if s, ok := store.LoadedSnapshot(c.store); ok {
		// Worked out once per version of the copy: a settled fleet's
		// passes (ten a wall second) do not walk every node.
		if f := c.inFlight.Load(); f != nil && store.Same(f.of, s.Nodes) {
			return f.nodes, nil
		}
		var out []domain.Node
		for _, n := range s.Nodes {
			if slices.Contains(inFlight, n.State) {
				out = append(out, *n)
			}
		}
		c.inFlight.Store(&inFlightNodes{of: s.Nodes, nodes: out})
		return out, nil
	}
	return c.store.ListNodes(ctx, store.NodeFilter{States: inFlight})
}

// inFlightNodes are the nodes in flight of a version of the in-memory
// copy's nodes (of); callers must not modify them.
type inFlightNodes struct {
	of    []*domain.Node
	nodes []domain.Node
}

// busyMachines are the machines a node holds that is provisioning,
// ready, draining or removing (what stepPending waits for), as the
// snapshot (memory on the leader) has them.
var holding = []domain.NodeState{domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining, domain.NodeRemoving}

func (c *Controller) busyMachines(ctx context.Context) (map[string]bool, error) {
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	busy := map[string]bool{}
	for _, n := range s.Nodes {
		if slices.Contains(holding, n.State) {
			busy[n.MachineID] = true
		}
	}
	return busy, nil
}

// replan commits the allocator's plan when it changes anything.
func (c *Controller) replan(ctx context.Context) (allocator.Plan, error) {
	c.lock(ctx)
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, err := c.snapshot(ctx)
	if err != nil {
		return allocator.Plan{}, err
	}
	if p := c.settled; p != nil && p.valid(s, now) {
		c.settledHits.Add(1)
		if c.checkSettled != nil {
			c.checkSettled(p.plan, c.plan(s, now), s, now)
		}
		return p.plan, nil
	}
	pl := c.plan(s, now)
	if !changes(s, pl, now) {
		c.settled = &settledPlan{snap: s, plan: pl}
		return pl, nil
	}
	c.settled = nil
	if err := c.commit(ctx, s, pl, now, commitWrites{}); err != nil {
		return allocator.Plan{}, fmt.Errorf("commit plan: %w", err)
	}
	return pl, nil
}

// settledPlan is a plan that changed nothing. Planned again from the
// same snapshot before its NextWake it would change nothing again: a
// plan depends on time only through cooldowns (NextWake) and through
// what it changes (deadlines, unmet_since), and this one changed
// nothing. The leader's in-memory snapshot keeps its slices while nothing
// is written (store.Cached copies a table on every change), so a settled
// loop plans once, not every pass.
type settledPlan struct {
	snap allocator.Snapshot
	plan allocator.Plan
}

func (p *settledPlan) valid(s allocator.Snapshot, now time.Time) bool {
	return (p.plan.NextWake.IsZero() || now.Before(p.plan.NextWake)) &&
		store.Same(p.snap.Machines, s.Machines) && store.Same(p.snap.Reservations, s.Reservations) &&
		store.Same(p.snap.Clusters, s.Clusters) && store.Same(p.snap.Nodes, s.Nodes)
}

func changes(s allocator.Snapshot, pl allocator.Plan, now time.Time) bool {
	if len(pl.Reclaims) > 0 || len(pl.Provisions) > 0 {
		return true
	}
	for i, cs := range pl.Clusters {
		if statusChanged(s.Clusters[i], cs, now) {
			return true
		}
	}
	return false
}

// statusChanged reports whether the plan changes what cluster c stores of
// its state.
func statusChanged(c domain.Cluster, cs allocator.ClusterState, now time.Time) bool {
	if c.Status != cs.Status || c.Unfulfilled != cs.Unfulfilled || c.UnfulfilledMessage != cs.Message {
		return true
	}
	// A cluster unmet before unmet_since existed starts waiting now.
	return !allocator.UnmetSince(c.UnmetSince, cs, now).Equal(c.UnmetSince)
}

// step moves node n one step on. n may be a stale copy (listed before an
// earlier step of the same node finished): the step starts from the
// stored node.
func (c *Controller) step(ctx context.Context, n domain.Node) error {
	n, err := c.store.GetNode(ctx, n.ID)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	switch n.State {
	case domain.NodePending:
		err = c.stepPending(ctx, n)
	case domain.NodeProvisioning:
		err = c.stepProvision(ctx, n)
	case domain.NodeDraining:
		err = c.stepDrain(ctx, n)
	case domain.NodeRemoving:
		err = c.stepRemove(ctx, n)
	}
	if err != nil {
		return fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
	}
	return nil
}

// anyState makes a transition apply in whatever state the node is.
const anyState domain.NodeState = ""

// errStale: the node moved on since it was read; the step is dropped.
var errStale = errors.New("node state changed")

// transition applies change to the node if it is still in state from
// (anyState: whatever its state), in one transaction under the plan lock,
// with the events change returns (stamped now unless they carry the time
// of what they report).
//
// Transitions are group-committed: each joins a queue, and whoever takes
// the plan lock next commits every queued transition in one transaction,
// so the steps of many nodes share one commit (and one fsync) instead of
// queueing for a commit each. A transition that finds its node moved on
// (errStale, or gone) drops out of the batch alone; any other error rolls
// the batch back, and its transitions are then committed one by one, so
// each gets its own outcome as before.
//
// change gets the transaction through txOf, which commits the batch's
// node writes so far first (they are held back to be written together;
// see batchWrites): a change that reads or writes anything but its own
// node sees the same transaction as if each write had been made at once.
func (c *Controller) transition(ctx context.Context, id string, from domain.NodeState, change changeFunc) (domain.Node, error) {
	t := &pendingTransition{id: id, from: from, change: change, done: make(chan struct{})}
	c.tq.push(t)
	if c.lockUnless(ctx, t.done) {
		c.flushTransitions(ctx)
		c.mu.Unlock()
	}
	<-t.done // committed by this holder or by another
	return t.n, t.err
}

// changeFunc changes n, read in the transaction txOf returns, and
// returns the events the change posts (see transition).
type changeFunc func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error)

// pendingTransition is one queued transition and, once done is closed,
// its outcome.
type pendingTransition struct {
	id     string
	from   domain.NodeState
	change changeFunc
	done   chan struct{}
	n      domain.Node
	obs    []Observation
	err    error
	// dropped: it failed before writing anything (its node moved on or
	// is gone), so the rest of its batch may commit.
	dropped bool
}

// flushTransitions commits the queued transitions; c.mu is held.
func (c *Controller) flushTransitions(ctx context.Context) {
	batch := c.tq.take()
	if len(batch) == 0 {
		return
	}
	defer func() {
		// Observers hear of the transitions in commit order, under the
		// lock, as of every other commit.
		for _, t := range batch {
			if t.err == nil {
				c.moved.Add(1)
				c.observe(t.obs)
				if len(t.obs) > 0 {
					c.notify()
				}
			}
			close(t.done)
		}
	}()
	now := c.clock.Now()
	err := c.store.Update(ctx, func(tx store.Tx) error {
		tx, err := prefetch(ctx, tx, batch, func(t *pendingTransition) string { return t.id })
		if err != nil {
			return err
		}
		b := &batchWrites{tx: tx}
		for _, t := range batch {
			if err := c.applyTransition(ctx, tx, t, now, b); err != nil && !t.dropped {
				return err
			}
		}
		if err := b.flush(ctx); err != nil {
			return err
		}
		return store.AddEvents(ctx, tx, b.events)
	})
	if err == nil || len(batch) == 1 {
		if err != nil {
			batch[0].err = err
		}
		return
	}
	for _, t := range batch {
		t.err = c.store.Update(ctx, func(tx store.Tx) error { return c.applyTransition(ctx, tx, t, now, nil) })
	}
}

// batchWrites are the writes of a batch of transitions held back to be
// written in a few statements: its events, added at its end, and the
// writes of each transition's own node, made before anything else reads
// or writes in the transaction (flush) and at its end. Most steps (a node
// becoming ready) write nothing but their node.
type batchWrites struct {
	tx     store.Tx
	events []domain.Event
	nodes  []domain.Node
	at     map[string]int // index in nodes, by ID
}

// node returns the held-back write of node id, if there is one.
func (b *batchWrites) node(id string) (domain.Node, bool) {
	if i, ok := b.at[id]; ok {
		return b.nodes[i], true
	}
	return domain.Node{}, false
}

func (b *batchWrites) putNode(n domain.Node) {
	if b.at == nil {
		b.at = map[string]int{}
	}
	if i, ok := b.at[n.ID]; ok {
		b.nodes[i] = n
		return
	}
	b.at[n.ID] = len(b.nodes)
	b.nodes = append(b.nodes, n)
}

// flush writes the held-back node writes.
func (b *batchWrites) flush(ctx context.Context) error {
	if len(b.nodes) == 0 {
		return nil
	}
	err := store.UpdateNodes(ctx, b.tx, b.nodes)
	b.nodes, b.at = b.nodes[:0], nil
	return err
}

// prefetched is a transaction whose first read of each of a batch's
// nodes is served from one bulk read made at its start, rather than a
// query (a round trip to a database across a network) per transition. A
// node the transaction writes is read from it again.
type prefetched struct {
	store.Tx
	nodes map[string]domain.Node
}

// prefetch reads the nodes of work (id names each one's node) in tx; for
// less than two there is nothing to save and tx is returned as it is.
func prefetch[T any](ctx context.Context, tx store.Tx, work []T, id func(T) string) (store.Tx, error) {
	if len(work) < 2 {
		return tx, nil
	}
	ids := make([]string, len(work))
	for i, w := range work {
		ids[i] = id(w)
	}
	ns, err := store.NodesByID(ctx, tx, ids)
	if err != nil {
		return nil, err
	}
	p := &prefetched{Tx: tx, nodes: make(map[string]domain.Node, len(ns))}
	for _, n := range ns {
		p.nodes[n.ID] = n
	}
	return p, nil
}

func (p *prefetched) GetNode(ctx context.Context, id string) (domain.Node, error) {
	if n, ok := p.nodes[id]; ok {
		return n, nil
	}
	return p.Tx.GetNode(ctx, id)
}

func (p *prefetched) CreateNode(ctx context.Context, n domain.Node) error {
	delete(p.nodes, n.ID)
	return p.Tx.CreateNode(ctx, n)
}

func (p *prefetched) UpdateNode(ctx context.Context, n domain.Node) error {
	delete(p.nodes, n.ID)
	return p.Tx.UpdateNode(ctx, n)
}

// The bulk reads and writes of the transaction underneath are kept.
var (
	_ store.BulkWriter = (*prefetched)(nil)
	_ store.BulkReader = (*prefetched)(nil)
)

func (p *prefetched) NodesByID(ctx context.Context, ids []string) ([]domain.Node, error) {
	return store.NodesByID(ctx, p.Tx, ids)
}

func (p *prefetched) ClustersByID(ctx context.Context, ids []string) ([]domain.Cluster, error) {
	return store.ClustersByID(ctx, p.Tx, ids)
}

func (p *prefetched) MachinesByID(ctx context.Context, ids []string) ([]domain.Machine, error) {
	return store.MachinesByID(ctx, p.Tx, ids)
}

func (p *prefetched) CreateNodes(ctx context.Context, ns []domain.Node) error {
	p.forget(ns)
	return store.CreateNodes(ctx, p.Tx, ns)
}

// forget drops what the prefetch read of ns, about to be written.
func (p *prefetched) forget(ns []domain.Node) {
	for _, n := range ns {
		delete(p.nodes, n.ID)
	}
}

func (p *prefetched) AddEvents(ctx context.Context, es []domain.Event) error {
	return store.AddEvents(ctx, p.Tx, es)
}

func (p *prefetched) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	p.forget(ns)
	return store.UpdateNodes(ctx, p.Tx, ns)
}

func (p *prefetched) UpdateClusters(ctx context.Context, cs []domain.Cluster) error {
	return store.UpdateClusters(ctx, p.Tx, cs)
}

func (p *prefetched) CreateClusters(ctx context.Context, cs []domain.Cluster) error {
	return store.CreateClusters(ctx, p.Tx, cs)
}

func (p *prefetched) PutUsages(ctx context.Context, us []domain.UsageRecord) error {
	return store.PutUsages(ctx, p.Tx, us)
}

// applyTransition runs t in tx and records its outcome in t. With b set
// (a batch), its node write and its events are held back in b, which the
// caller writes before it commits; else they are written to tx at once.
func (c *Controller) applyTransition(ctx context.Context, tx store.Tx, t *pendingTransition, now time.Time, b *batchWrites) error {
	t.obs, t.err, t.dropped = t.obs[:0], nil, false
	n, held := domain.Node{}, false
	if b != nil {
		n, held = b.node(t.id)
	}
	if !held {
		var err error
		if n, err = tx.GetNode(ctx, t.id); err != nil {
			t.err, t.dropped = err, errors.Is(err, domain.ErrNotFound)
			return err
		}
	}
	if t.from != anyState && n.State != t.from {
		t.n, t.err, t.dropped = n, errStale, true
		return errStale
	}
	txOf := func() (store.Tx, error) {
		if b != nil {
			if err := b.flush(ctx); err != nil {
				return nil, err
			}
		}
		return tx, nil
	}
	// change returns errStale only before it writes anything.
	evs, err := t.change(txOf, &n, now)
	if err != nil {
		t.n, t.err, t.dropped = n, err, errors.Is(err, errStale)
		return err
	}
	if b != nil {
		b.putNode(n)
	} else if err := tx.UpdateNode(ctx, n); err != nil {
		t.err = err
		return err
	}
	for _, e := range evs {
		e.ID = c.NewID("ev-")
		if e.Timestamp.IsZero() {
			e.Timestamp = now
		}
		if e.NodeID == "" && e.Reason != domain.ReasonTargetUnfulfilled {
			e.NodeID, e.NodeName, e.ClusterID = n.ID, n.Name, n.ClusterID
		}
		if b != nil {
			b.events = append(b.events, e)
		} else if _, err := tx.AddEvent(ctx, e); err != nil {
			t.err = err
			return err
		}
		t.obs = append(t.obs, Observation{Time: e.Timestamp, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message})
	}
	t.n = n
	return nil
}

func (c *Controller) spec(n domain.Node) driver.NodeSpec {
	return driver.NodeSpec{
		ClusterID: n.ClusterID, NodeName: n.Name, MachineID: n.MachineID, Class: n.Class, GPUs: n.GPUs,
		Labels: map[string]string{
			domain.LabelComputeClass: string(n.Class),
			domain.LabelMachine:      n.MachineID,
			domain.LabelNodeID:       n.ID,
		},
	}
}

// stepPending starts a pending node whose machine has been vacated. The
// removal step normally does this in the same transaction; this covers a
// node that was planned onto a machine just as it was vacated.
func (c *Controller) stepPending(ctx context.Context, n domain.Node) error {
	_, err := c.transition(ctx, n.ID, domain.NodePending, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		tx, err := txOf()
		if err != nil {
			return nil, err
		}
		busy, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: holding})
		if err != nil {
			return nil, err
		}
		if len(busy) > 0 {
			return nil, errStale
		}
		n.State, n.ProvisioningAt = domain.NodeProvisioning, now
		return nil, nil
	})
	return ignoreStale(err)
}

func ignoreStale(err error) error {
	if errors.Is(err, errStale) {
		return nil
	}
	return err
}

func (c *Controller) stepProvision(ctx context.Context, n domain.Node) error {
	// The node is asked first, the registration deadline checked after: a
	// step that runs late (a busy controller) must not fail a node that
	// did register, nor count it against its machine.
	late := !c.clock.Now().Before(c.registerBy(n))
	m, err := c.store.GetMachine(ctx, n.MachineID)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	spec := c.spec(n)
	done, err := c.machines.Prepare(ctx, m, spec)
	if err != nil {
		if late {
			return c.registrationFailed(ctx, n)
		}
		return &providerError{domain.ReasonProvisionFailed, fmt.Errorf("prepare machine %s: %w", m.ID, err)}
	}
	if c.preparing.started(n.ID, c.clock.Now()) {
		// The machine was first asked just now (the step queued behind
		// others, or a new leader took over): its window starts here.
		late = false
	}
	if !done {
		if late {
			return c.registrationFailed(ctx, n)
		}
		return nil
	}
	if err := c.cluster.AddNode(ctx, spec); err != nil {
		if late {
			return c.registrationFailed(ctx, n)
		}
		if errors.Is(err, driver.ErrNotReady) {
			return nil // not registered or not Ready yet: poll again
		}
		return &clusterError{fmt.Errorf("add node: %w", err)}
	}
	_, err = c.transition(ctx, n.ID, domain.NodeProvisioning, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, n.ReadyAt = domain.NodeReady, now
		// Most machines have no failures to forget: the leader's
		// in-memory copy says so without a query per node.
		if m, err := c.store.GetMachine(ctx, n.MachineID); err == nil && m.Failures == 0 {
			return readyEvents(n), nil
		}
		tx, err := txOf()
		if err != nil {
			return nil, err
		}
		m, err := tx.GetMachine(ctx, n.MachineID)
		if err != nil {
			return nil, err
		}
		if m.Failures > 0 {
			// A node registered: the machine's failures were not in a row.
			m.Failures = 0
			if err := tx.UpdateMachine(ctx, m); err != nil {
				return nil, err
			}
		}
		return readyEvents(n), nil
	})
	if err == nil {
		c.preparing.forget(n.ID)
	}
	return ignoreStale(err)
}

func readyEvents(n *domain.Node) []domain.Event {
	return []domain.Event{{Reason: domain.ReasonNodeAdded,
		Message: fmt.Sprintf("%s node %s (%d GPUs, machine %s) joined the cluster, labelled %s=%s", n.Class, n.Name, n.GPUs, n.MachineID, domain.LabelComputeClass, n.Class)}}
}

// registerBy is when node n, provisioning, must be ready by: the
// registration window counts from the first Prepare of n this process
// made, or, before that, from when n was planned.
func (c *Controller) registerBy(n domain.Node) time.Time {
	start := c.preparing.since(n.ID)
	if start.IsZero() {
		start = n.ProvisioningAt
	}
	if start.IsZero() {
		start = n.CreatedAt // a node stored before provisioning_at existed
	}
	return start.Add(c.cfg.RegisterTimeout)
}

// preparing records when each provisioning node's machine was first asked
// to prepare. It lives in memory: a new leader gives every machine still
// preparing one fresh window, which costs a broken machine one more
// timeout and never fails a node for time it spent queued in sparecap.
type preparing struct {
	mu sync.Mutex
	at map[string]time.Time
}

// started records now as node id's first accepted Prepare, and reports
// whether it was the first.
func (p *preparing) started(id string, now time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.at[id]; ok {
		return false
	}
	if p.at == nil {
		p.at = map[string]time.Time{}
	}
	p.at[id] = now
	return true
}

func (p *preparing) since(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id]
}

func (p *preparing) forget(id string) {
	p.mu.Lock()
	delete(p.at, id)
	p.mu.Unlock()
}

// prune forgets the nodes that are no longer provisioning (removed by a
// reclaim or a cluster's deletion); provisioning is how many of nodes
// are, so a pass that finds nothing to forget costs no more than a count.
func (p *preparing) prune(nodes []domain.Node, provisioning int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.at) <= provisioning {
		return
	}
	keep := make(map[string]time.Time, provisioning)
	for i := range nodes {
		if at, ok := p.at[nodes[i].ID]; ok && nodes[i].State == domain.NodeProvisioning {
			keep[nodes[i].ID] = at
		}
	}
	p.at = keep
}

// finishDeletions marks deleted clusters whose nodes are all removed as
// gone.
func (c *Controller) finishDeletions(ctx context.Context) error {
	// The snapshot (in memory on the leader) lists the same clusters as
	// ListClusters without a query per pass.
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	for i := range s.Clusters {
		cl := &s.Clusters[i] // not a copy of every cluster on every pass
		if !cl.Deleting {
			continue
		}
		c.mu.Lock()
		gone := false
		err := c.store.Update(ctx, func(tx store.Tx) error {
			nodes, err := tx.ListNodes(ctx, store.NodeFilter{ClusterID: cl.ID})
			if err != nil || len(nodes) > 0 {
				return err
			}
			cur, err := tx.GetCluster(ctx, cl.ID)
			if err != nil {
				return err
			}
			cur.DeletedAt, gone = c.clock.Now(), true
			return tx.UpdateCluster(ctx, cur)
		})
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("finish deleting cluster %s: %w", cl.ID, err)
		}
		if gone && c.OnClusterGone != nil {
			c.OnClusterGone(cl.ID)
		}
	}
	return nil
}
