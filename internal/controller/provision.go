package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/store"
)

// activeMachines are the machines an active node occupies (what
// stepPending waits for), as the snapshot (memory on the leader) has them.
func (c *Controller) activeMachines(ctx context.Context) (map[string]bool, error) {
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	active := map[string]bool{}
	for _, n := range s.Nodes {
		if n.State.Active() {
			active[n.MachineID] = true
		}
	}
	return active, nil
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
	case domain.NodeDraining, domain.NodeRemoving:
		_, err := c.reclaim.Step(ctx, n)
		return err
	}
	if err != nil {
		return fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
	}
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
		active, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: domain.ActiveStates})
		if err != nil {
			return nil, err
		}
		if len(active) > 0 {
			return nil, reclaim.ErrStale
		}
		n.State, n.ProvisioningAt = domain.NodeProvisioning, now
		return nil, nil
	})
	return reclaim.IgnoreStale(err)
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
	if cl, err := c.store.GetCluster(ctx, n.ClusterID); err == nil {
		spec.Platform = cl.Type
	}
	done, err := c.machines.Prepare(ctx, m, spec)
	if err != nil {
		if late {
			return c.registrationFailed(ctx, n)
		}
		return &reclaim.ProviderError{Reason: domain.ReasonProvisionFailed, Err: fmt.Errorf("prepare machine %s: %w", m.ID, err)}
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
		return &reclaim.ClusterError{Err: fmt.Errorf("add node: %w", err)}
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
	return reclaim.IgnoreStale(err)
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
