package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
	"github.com/sparecap/sparecap/internal/store"
)

// registrationFailed gives back the machine of a node that did not
// register Ready within Config.RegisterTimeout, so the node is replaced.
// The machine is blamed unless the cluster's API was failing (then it is
// the cluster's fault); after MaxFailures in a row it is taken out of
// service, with the reason on the admin machine listing.
func (c *Controller) registrationFailed(ctx context.Context, n domain.Node) error {
	var ce *reclaim.ClusterError
	blame := !errors.As(c.backoff.Err(n.ID), &ce)
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
		return reclaim.IgnoreStale(err)
	}
	c.preparing.forget(n.ID)
	_, err = c.reclaim.Remove(ctx, n)
	return err
}
