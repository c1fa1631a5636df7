package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/provision"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/store"
)

// port is the controller as the reclaim machine's reclaim.Port: its
// store, its plan lock with the group commit of transitions, its step
// claims and its loop.
type port struct{ c *Controller }

var (
	_ reclaim.Port   = port{}
	_ provision.Port = port{}
)

func (p port) Node(ctx context.Context, id string) (domain.Node, error) {
	return p.c.store.GetNode(ctx, id)
}

func (p port) Machine(ctx context.Context, id string) (domain.Machine, error) {
	return p.c.store.GetMachine(ctx, id)
}

func (p port) ClusterGone(ctx context.Context, id string) (bool, error) {
	_, err := p.c.store.GetCluster(ctx, id)
	if errors.Is(err, domain.ErrNotFound) {
		return true, nil
	}
	return false, err
}

// ReadyNodes are the ready nodes of the snapshot, which the leader holds
// in memory: a sweep costs no read of every node from the database.
func (p port) ReadyNodes(ctx context.Context) ([]*domain.Node, error) {
	s, err := p.c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var out []*domain.Node
	for _, n := range s.Nodes {
		if n.State == domain.NodeReady {
			out = append(out, n)
		}
	}
	return out, nil
}

func (p port) Transition(ctx context.Context, id string, from domain.NodeState, change reclaim.Change) (domain.Node, error) {
	return p.c.transition(ctx, id, from, func(_ func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		return change(n, now)
	})
}

func (p port) ClusterType(ctx context.Context, id string) (domain.ClusterType, error) {
	cl, err := p.c.store.GetCluster(ctx, id)
	return cl.Type, err
}

// Start starts pending node id once its machine serves no other node.
// The removal that frees a machine normally does this in the same
// transaction (HandOver); this covers a node planned onto a machine just
// as it was vacated.
func (p port) Start(ctx context.Context, id string) (domain.Node, error) {
	return p.c.transition(ctx, id, domain.NodePending, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		tx, err := txOf()
		if err != nil {
			return nil, err
		}
		active, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: domain.ActiveStates})
		if err != nil {
			return nil, err
		}
		if len(active) > 0 {
			return nil, errStale
		}
		n.State, n.ProvisioningAt = domain.NodeProvisioning, now
		return nil, nil
	})
}

// TransitionWithMachine is Transition whose change may read the node's
// machine in the transaction; a machine it read is written back.
func (p port) TransitionWithMachine(ctx context.Context, id string, from domain.NodeState, change provision.Change) (domain.Node, error) {
	return p.c.transition(ctx, id, from, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		var (
			tx store.Tx
			m  *domain.Machine
		)
		machine := func() (*domain.Machine, error) {
			if m != nil {
				return m, nil
			}
			t, err := txOf()
			if err != nil {
				return nil, err
			}
			got, err := t.GetMachine(ctx, n.MachineID)
			if err != nil {
				return nil, err
			}
			tx, m = t, &got
			return m, nil
		}
		evs, err := change(n, machine, now)
		if err != nil || m == nil {
			return evs, err
		}
		return evs, tx.UpdateMachine(ctx, *m)
	})
}

// HandOver writes n removed and, in the same transaction, starts the node
// pending on its machine, or the machine's cooldown after a standard node
// nobody waits for.
func (p port) HandOver(ctx context.Context, n domain.Node) error {
	c := p.c
	var started []domain.Node
	_, err := c.transition(ctx, n.ID, domain.NodeRemoving, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, started = domain.NodeRemoved, started[:0]
		tx, err := txOf()
		if err != nil {
			return nil, err
		}
		// The machine is free only once n is written removed: the schema
		// refuses a second live node on it.
		if err := tx.UpdateNode(ctx, *n); err != nil {
			return nil, err
		}
		waiting, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: []domain.NodeState{domain.NodePending}})
		if err != nil {
			return nil, err
		}
		for _, w := range waiting {
			w.State, w.ProvisioningAt = domain.NodeProvisioning, now
			if err := tx.UpdateNode(ctx, w); err != nil {
				return nil, err
			}
			started = append(started, w)
		}
		if len(waiting) == 0 && n.Class == domain.Standard && c.cfg.Cooldown > 0 {
			m, err := tx.GetMachine(ctx, n.MachineID)
			if err != nil {
				return nil, err
			}
			m.CooldownUntil = now.Add(c.cfg.Cooldown)
			if err := tx.UpdateMachine(ctx, m); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err == nil {
		now := c.clock.Now()
		for _, w := range started {
			c.enqueue(w, now)
		}
	}
	return err
}

// Owns checks, under the plan lock, that node n is still removing and is
// the only node its machine serves, so a step working from a stale copy
// never wipes a machine already handed to another node. Only this node's
// own step (one at a time) moves it on from removing, so the answer holds
// until the wipe.
func (p port) Owns(ctx context.Context, n domain.Node) error {
	c := p.c
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.store.GetNode(ctx, n.ID)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	if cur.State != domain.NodeRemoving {
		return reclaim.ErrStale
	}
	active, err := c.store.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: domain.ActiveStates})
	if err != nil {
		return fmt.Errorf("nodes of machine %s: %w", n.MachineID, err)
	}
	for _, o := range active {
		if o.ID != n.ID {
			c.log.Error("machine serves another node; not wiped", "machine", n.MachineID, "node", n.Name, "other", o.Name)
			return reclaim.ErrStale
		}
	}
	return nil
}

func (p port) Claim(key string) bool { return p.c.runner.Claim(key) }

func (p port) Release(key string) { p.c.runner.Release(key) }

func (p port) Observe(obs ...reclaim.Observation) { p.c.observeLocked(obs...) }

func (p port) Kick() { p.c.movedNodes() }

// SaveWork records a checkpoint within a drain's notice in the ledger.
func (p port) SaveWork(ctx context.Context, id string, at time.Time) error {
	return p.c.store.Update(ctx, func(tx store.Tx) error { return tx.SaveLostWork(ctx, id, at) })
}
