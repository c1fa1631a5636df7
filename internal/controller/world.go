package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// world is the controller as the executor's lifecycle.World: its store,
// its plan lock with the group commit of node writes, its observers and
// its loop.
type world struct{ c *Controller }

var _ lifecycle.World = world{}

func (w world) Node(ctx context.Context, id string) (domain.Node, error) {
	return w.c.store.GetNode(ctx, id)
}

// Facts reads the node's machine and cluster from the leader's memory,
// and whether another active node occupies its machine.
func (w world) Facts(ctx context.Context, n domain.Node, f *lifecycle.Facts) error {
	c := w.c
	m, err := c.store.GetMachine(ctx, n.MachineID)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	f.Machine = m
	cl, err := c.store.GetCluster(ctx, n.ClusterID)
	switch {
	case errors.Is(err, domain.ErrNotFound):
		f.ClusterGone = true
	case err != nil:
		return fmt.Errorf("cluster %s: %w", n.ClusterID, err)
	default:
		f.ClusterType = cl.Type
	}
	if n.State == domain.NodePending || n.State == domain.NodeRemoving {
		busy, err := c.machineBusy(ctx, n)
		if err != nil {
			return err
		}
		f.MachineBusy = busy
	}
	return nil
}

// machineBusy reports whether an active node other than n occupies n's
// machine: from the leader's memory when it is loaded.
func (c *Controller) machineBusy(ctx context.Context, n domain.Node) (bool, error) {
	if ca, ok := store.MemoryOf(c.store); ok {
		if o, ok, loaded := ca.ActiveOn(n.MachineID); loaded {
			return ok && o.ID != n.ID, nil
		}
	}
	active, err := c.store.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: domain.ActiveStates})
	if err != nil {
		return false, fmt.Errorf("nodes of machine %s: %w", n.MachineID, err)
	}
	for _, o := range active {
		if o.ID != n.ID {
			return true, nil
		}
	}
	return false, nil
}

// Commit writes r for node n compare-and-set: in the transaction the node
// must still be n, else the write is stale and dropped.
func (w world) Commit(ctx context.Context, n domain.Node, r *lifecycle.Ready) (domain.Node, error) {
	c := w.c
	want := n
	var started []domain.Node
	got, err := c.transition(ctx, n.ID, r.From, func(txOf func() (store.Tx, error), cur *domain.Node, now time.Time) ([]domain.Event, error) {
		if !sameNode(*cur, want) {
			return nil, errStale
		}
		started = started[:0]
		if r.Write != nil {
			*cur = *r.Write
		}
		if r.Start {
			if err := c.startable(ctx, txOf, cur); err != nil {
				return nil, err
			}
		}
		if !r.Machine.Empty() {
			if err := machineChange(ctx, txOf, cur.MachineID, r.Machine); err != nil {
				return nil, err
			}
		}
		if r.HandOver {
			s, err := c.handOver(ctx, txOf, cur, now)
			if err != nil {
				return nil, err
			}
			started = s
		}
		return r.Events, nil
	})
	if err == nil {
		now := c.clock.Now()
		for _, s := range started {
			c.enqueue(s, now)
		}
	}
	return got, err
}

// startable refuses (stale) to start pending node n while another active
// node holds its machine.
func (c *Controller) startable(ctx context.Context, txOf func() (store.Tx, error), n *domain.Node) error {
	tx, err := txOf()
	if err != nil {
		return err
	}
	active, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: domain.ActiveStates})
	if err != nil {
		return err
	}
	if len(active) > 0 {
		return errStale
	}
	return nil
}

// machineChange applies ch to machine id as the transaction reads it.
func machineChange(ctx context.Context, txOf func() (store.Tx, error), id string, ch lifecycle.MachineChange) error {
	tx, err := txOf()
	if err != nil {
		return err
	}
	m, err := tx.GetMachine(ctx, id)
	if err != nil {
		return err
	}
	if ch.ResetFailures {
		if m.Failures == 0 {
			return nil
		}
		m.Failures = 0
	}
	if ch.Failed {
		m.Failures++
		if m.Failures >= ch.MaxFailures && !m.OutOfService {
			m.OutOfService, m.OutOfServiceReason = true, ch.OutOfServiceReason
		}
	}
	return tx.UpdateMachine(ctx, m)
}

// handOver, in the transaction that writes n removed, starts the node
// pending on its machine, or the machine's cooldown after a standard node
// nobody waits for; it returns the nodes it started.
func (c *Controller) handOver(ctx context.Context, txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Node, error) {
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
	var started []domain.Node
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
	return started, nil
}

// sameNode reports whether a and b are the same row, field by field (a
// time compared as an instant).
func sameNode(a, b domain.Node) bool {
	return a.ID == b.ID && a.ClusterID == b.ClusterID && a.MachineID == b.MachineID && a.Name == b.Name &&
		a.Class == b.Class && a.GPUs == b.GPUs && a.State == b.State && a.CreatedAt.Equal(b.CreatedAt) &&
		a.ReadyAt.Equal(b.ReadyAt) && a.DrainStartedAt.Equal(b.DrainStartedAt) && a.Deadline.Equal(b.Deadline) &&
		a.DrainCause == b.DrainCause && a.Notified == b.Notified && a.DrainedAt.Equal(b.DrainedAt) &&
		a.Outcome == b.Outcome && a.RemovedAt.Equal(b.RemovedAt) && a.LastError == b.LastError &&
		a.CleanupPending == b.CleanupPending && a.ProvisioningAt.Equal(b.ProvisioningAt) && a.ClassSince.Equal(b.ClassSince) &&
		a.GPUType == b.GPUType
}

// SaveWork records a checkpoint within a drain's notice in the ledger.
func (w world) SaveWork(ctx context.Context, id string, at time.Time) error {
	return w.c.store.Update(ctx, func(tx store.Tx) error { return tx.SaveLostWork(ctx, id, at) })
}

func (w world) Failed(ctx context.Context, n domain.Node, msg string, reason domain.EventReason) {
	w.c.setLastError(ctx, n, msg, reason)
}

func (w world) Observe(obs []lifecycle.Observation) { w.c.observeLocked(obs...) }

func (w world) Moved() { w.c.movedNodes() }
