package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// sweep checks every ready node against what its cluster says about its
// Node object (when the driver watches Node objects): a Node deleted
// behind sparecap's back, or NotReady longer than Config.NodeLostAfter,
// makes the node lost. A cluster that cannot tell (its watch has not
// synced, its API is down) decides nothing.
func (c *Controller) sweep(ctx context.Context) error {
	// The ready nodes of the snapshot, which the leader holds in memory:
	// a sweep costs no read of every node from the database.
	s, err := c.snapshot(ctx)
	if err != nil {
		return fmt.Errorf("list ready nodes: %w", err)
	}
	var errs []error
	var due time.Time
	defer func() { c.lostDue = due }()
	for _, n := range s.Nodes {
		if n.State != domain.NodeReady {
			continue
		}
		h, err := c.cluster.Health(ctx, n.ClusterID, n.Name)
		if err != nil {
			continue
		}
		now := c.clock.Now()
		if nr := h.NotReadySince; !nr.IsZero() {
			if at := nr.Add(c.cfg.NodeLostAfter); at.After(now) && (due.IsZero() || at.Before(due)) {
				due = at
			}
		}
		var why string
		switch {
		case h.Gone:
			why = fmt.Sprintf("node %s was lost: its Node object was deleted from the cluster, not by sparecap", n.Name)
		case !h.NotReadySince.IsZero() && now.Sub(h.NotReadySince) >= c.cfg.NodeLostAfter:
			why = fmt.Sprintf("node %s was lost: it has not been Ready since %s (%s, longer than %s)", n.Name,
				h.NotReadySince.UTC().Format(time.RFC3339), now.Sub(h.NotReadySince).Round(time.Second), c.cfg.NodeLostAfter)
		default:
			continue
		}
		if err := c.lose(ctx, *n, why); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// lose takes a lost node's machine back: billing stops now (its removal),
// its cleanup (the Node object if it is still there, pods bound to it)
// is pending, and the allocator replaces it on the next plan.
func (c *Controller) lose(ctx context.Context, n domain.Node, why string) error {
	_, err := c.transition(ctx, n.ID, domain.NodeReady, func(_ func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, n.Outcome, n.RemovedAt, n.CleanupPending = domain.NodeRemoving, domain.OutcomeLost, now, true
		return []domain.Event{{Reason: domain.ReasonNodeLost,
			Message: why + "; billing stopped, its machine is taken back and the node replaced"}}, nil
	})
	if err := ignoreStale(err); err != nil {
		return fmt.Errorf("lose node %s: %w", n.Name, err)
	}
	c.Kick()
	return nil
}

// registrationFailed gives back the machine of a node that did not
// register Ready within Config.RegisterTimeout, so the node is replaced.
// The machine is blamed unless the cluster's API was failing (then it is
// the cluster's fault); after MaxFailures in a row it is taken out of
// service, with the reason on the admin machine listing.
func (c *Controller) registrationFailed(ctx context.Context, n domain.Node) error {
	var ce *clusterError
	blame := !errors.As(c.backoff.lastErr(n.ID), &ce)
	n, err := c.transition(ctx, n.ID, domain.NodeProvisioning, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, n.RemovedAt, n.CleanupPending = domain.NodeRemoving, now, true
		msg := fmt.Sprintf("node %s did not register Ready within %s on machine %s; the machine goes back and the node is replaced",
			n.Name, c.cfg.RegisterTimeout, n.MachineID)
		if !blame {
			msg = fmt.Sprintf("node %s did not register Ready within %s: the cluster's API kept failing; the machine goes back and the node is replaced",
				n.Name, c.cfg.RegisterTimeout)
		}
		if blame {
			tx, err := txOf()
			if err != nil {
				return nil, err
			}
			m, err := tx.GetMachine(ctx, n.MachineID)
			if err != nil {
				return nil, err
			}
			m.Failures++
			if m.Failures >= MaxFailures && !m.OutOfService {
				m.OutOfService = true
				m.OutOfServiceReason = fmt.Sprintf("%d nodes in a row did not register Ready within %s (last: %s of cluster %s at %s)",
					m.Failures, c.cfg.RegisterTimeout, n.Name, n.ClusterID, now.UTC().Format(time.RFC3339))
				msg += fmt.Sprintf("; machine %s is taken out of service after %d such failures in a row", m.ID, m.Failures)
			}
			if err := tx.UpdateMachine(ctx, m); err != nil {
				return nil, err
			}
		}
		return []domain.Event{{Reason: domain.ReasonRegistrationFailed, Message: msg}}, nil
	})
	if err != nil {
		return ignoreStale(err)
	}
	c.preparing.forget(n.ID)
	return c.stepRemove(ctx, n)
}
