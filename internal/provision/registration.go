package provision

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
)

// registrationFailed gives back the machine of a node that did not
// register Ready within Config.RegisterTimeout, so the node is replaced.
// The machine is blamed unless the cluster's API was failing (then it is
// the cluster's fault); after Config.MaxFailures in a row it is taken out
// of service, with the reason on the admin machine listing.
func (p *Provisioner) registrationFailed(ctx context.Context, n domain.Node) (domain.Node, error) {
	var ce *reclaim.ClusterError
	blame := !errors.As(p.cfg.LastErr(n.ID), &ce)
	timeout := p.cfg.RegisterTimeout
	n, err := p.port.TransitionWithMachine(ctx, n.ID, domain.NodeProvisioning, func(n *domain.Node, machine func() (*domain.Machine, error), now time.Time) ([]domain.Event, error) {
		n.State, n.RemovedAt, n.CleanupPending = domain.NodeRemoving, now, true
		if !blame {
			return []domain.Event{{Reason: domain.ReasonRegistrationFailed, Message: fmt.Sprintf(
				"node %s did not register Ready within %s: the cluster's API kept failing; the machine goes back and the node is replaced",
				n.Name, timeout)}}, nil
		}
		msg := fmt.Sprintf("node %s did not register Ready within %s on machine %s; the machine goes back and the node is replaced",
			n.Name, timeout, n.MachineID)
		m, err := machine()
		if err != nil {
			return nil, err
		}
		m.Failures++
		if m.Failures >= p.cfg.MaxFailures && !m.OutOfService {
			m.OutOfService = true
			m.OutOfServiceReason = fmt.Sprintf("%d nodes in a row did not register Ready within %s (last: %s of cluster %s at %s)",
				m.Failures, timeout, n.Name, n.ClusterID, now.UTC().Format(time.RFC3339))
			msg += fmt.Sprintf("; machine %s is taken out of service after %d such failures in a row", m.ID, m.Failures)
		}
		return []domain.Event{{Reason: domain.ReasonRegistrationFailed, Message: msg}}, nil
	})
	if err != nil {
		return n, reclaim.IgnoreStale(err)
	}
	p.preparing.forget(n.ID)
	return p.remover.Remove(ctx, n)
}
