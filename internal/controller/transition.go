package controller

import (
	"context"
	"errors"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// anyState makes a transition apply in whatever state the node is.
const anyState domain.NodeState = ""

// errStale: the node moved on since it was read; the step is dropped.
// One error for the controller, reclaim and provisioning alike.
var errStale = domain.ErrStale

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
	t := &pendingTransition{id: id, from: from, change: change, done: make(chan struct{}),
		self: lifecycle.KeyOf(ctx) == id}
	c.tq.push(t)
	if lifecycle.Park(ctx) {
		// A turn of an inline group: the group's flush committed it
		// with the others' (world.Flush).
		<-t.done
		return t.n, t.err
	}
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
	// self: the node's own step made it, and schedules the node by its
	// answer; any other transition hands the node to the runner.
	self bool
}

// Flush commits the transitions an inline group of turns parked
// (lifecycle.Grouper).
func (w world) Flush(ctx context.Context) {
	w.c.lock(ctx)
	w.c.flushTransitions(ctx)
	w.c.mu.Unlock()
}

// flushTransitions commits the queued transitions; c.mu is held.
func (c *Controller) flushTransitions(ctx context.Context) {
	batch := c.tq.take()
	if len(batch) == 0 {
		return
	}
	now := c.clock.Now()
	defer func() {
		// Observers hear of the transitions in commit order, under the
		// lock, as of every other commit; the runner hears of the nodes
		// before their callers do.
		for _, t := range batch {
			if t.err == nil {
				c.moved.Add(1)
				if !t.self || t.n.CleanupPending {
					c.enqueueAfter(t)
				}
				c.observe(t.obs)
				if len(t.obs) > 0 {
					c.notify()
				}
			}
			close(t.done)
		}
	}()
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
		return tx.AddEvents(ctx, b.events)
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

// enqueueAfter hands the node of committed transition t to the runner:
// its cleanup if one is pending, and, unless its own step made it, its
// next step.
func (c *Controller) enqueueAfter(t *pendingTransition) {
	if !t.self {
		c.enqueue(t.n, c.clock.Now())
		return
	}
	c.exec.Runner().Add(lifecycle.CleanupKey(t.n.ID), lifecycle.Due{})
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
	err := b.tx.UpdateNodes(ctx, b.nodes)
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
	ns, err := tx.NodesByID(ctx, ids)
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

var _ store.Tx = (*prefetched)(nil)

func (p *prefetched) CreateNodes(ctx context.Context, ns []domain.Node) error {
	p.forget(ns)
	return p.Tx.CreateNodes(ctx, ns)
}

// forget drops what the prefetch read of ns, about to be written.
func (p *prefetched) forget(ns []domain.Node) {
	for _, n := range ns {
		delete(p.nodes, n.ID)
	}
}

func (p *prefetched) UpdateNodes(ctx context.Context, ns []domain.Node) error {
	p.forget(ns)
	return p.Tx.UpdateNodes(ctx, ns)
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
