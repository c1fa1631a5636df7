package reclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Sweep checks every ready node against what its cluster says of it: a
// node deleted behind sparecap's back, found lost by its driver
// (NodeHealth.Lost), or not Ready longer than Config.NodeLostAfter, is
// lost (Lose). A node marked with another class than its own (converted
// since) is marked again (SetClass). A cluster that cannot tell (its
// watch has not synced, its API is down) decides nothing. It returns when
// the first node it saw not Ready reaches NodeLostAfter (zero: none is
// not Ready), for the loop to sweep again then.
func (m *Machine) Sweep(ctx context.Context) (time.Time, error) {
	ready, err := m.port.ReadyNodes(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("list ready nodes: %w", err)
	}
	var errs []error
	var due time.Time
	for _, n := range ready {
		h, err := m.cluster.Health(ctx, n.ClusterID, n.Name)
		if err != nil {
			continue
		}
		now := m.clock.Now()
		if nr := h.NotReadySince; !nr.IsZero() {
			if at := nr.Add(m.cfg.NodeLostAfter); at.After(now) && (due.IsZero() || at.Before(due)) {
				due = at
			}
		}
		var why string
		switch {
		case h.Lost != "":
			why = fmt.Sprintf("node %s was lost: %s", n.Name, h.Lost)
		case h.Gone:
			why = fmt.Sprintf("node %s was lost: its Node object was deleted from the cluster, not by sparecap", n.Name)
		case !h.NotReadySince.IsZero() && now.Sub(h.NotReadySince) >= m.cfg.NodeLostAfter:
			why = fmt.Sprintf("node %s was lost: it has not been Ready since %s (%s, longer than %s)", n.Name,
				h.NotReadySince.UTC().Format(time.RFC3339), now.Sub(h.NotReadySince).Round(time.Second), m.cfg.NodeLostAfter)
		case h.Class != "" && h.Class != n.Class:
			// Converted, and its cluster not told yet (or someone
			// changed its marks): mark it again.
			if err := m.cluster.SetClass(ctx, driver.Spec(*n)); err != nil {
				errs = append(errs, fmt.Errorf("mark node %s %s: %w", n.Name, n.Class, err))
			}
			continue
		default:
			continue
		}
		if err := m.Lose(ctx, *n, why); err != nil {
			errs = append(errs, err)
		}
	}
	return due, errors.Join(errs...)
}

// Lose takes a lost node's machine back: billing stops now (its removal),
// its cleanup (the node if the cluster still has it, work bound to it) is
// pending, and the allocator replaces it on the next plan. The removing
// step (Remove) wipes the machine and hands it on.
func (m *Machine) Lose(ctx context.Context, n domain.Node, why string) error {
	_, err := m.port.Transition(ctx, n.ID, domain.NodeReady, func(n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, n.Outcome, n.RemovedAt, n.CleanupPending = domain.NodeRemoving, domain.OutcomeLost, now, true
		return []domain.Event{{Reason: domain.ReasonNodeLost,
			Message: why + "; billing stopped, its machine is taken back and the node replaced"}}, nil
	})
	if err := IgnoreStale(err); err != nil {
		return fmt.Errorf("lose node %s: %w", n.Name, err)
	}
	m.port.Kick()
	return nil
}
