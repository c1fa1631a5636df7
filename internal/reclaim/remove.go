package reclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Remove is the removing state's step: it wipes the machine of a removed
// node and hands it to whoever waits for it (Port.HandOver). Nothing here
// waits on the tenant's cluster.
func (m *Machine) Remove(ctx context.Context, n domain.Node) (domain.Node, error) {
	if n.RemovedAt.IsZero() {
		// A node stored by a version that deleted the Node object first:
		// that is cleanup now.
		var err error
		n, err = m.port.Transition(ctx, n.ID, domain.NodeRemoving, func(n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.RemovedAt, n.CleanupPending = now, true
			return []domain.Event{{Reason: domain.ReasonNodeRemoved, Message: removedMessage(*n, now, cleanup{err: errNotTried})}}, nil
		})
		if err != nil {
			return n, IgnoreStale(err)
		}
	}
	if err := m.port.Owns(ctx, n); err != nil {
		return n, IgnoreStale(err)
	}
	mach, err := m.port.Machine(ctx, n.MachineID)
	if err != nil {
		return n, fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	done, err := m.machines.Wipe(ctx, mach, n.ClusterID, n.Name)
	if err != nil {
		return n, &ProviderError{domain.ReasonDeprovisionFailed, fmt.Errorf("wipe machine %s: %w", mach.ID, err)}
	}
	if !done {
		return n, nil
	}
	if err := IgnoreStale(m.port.HandOver(ctx, n)); err != nil {
		return n, err
	}
	n.State = domain.NodeRemoved
	m.port.Kick() // the machine is free: replan soon
	return n, nil
}
