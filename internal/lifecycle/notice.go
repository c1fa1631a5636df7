package lifecycle

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// Started is the T+0 change of a reclaimed node, which the plan commit
// writes with the plan that decided it.
type Started struct {
	Node domain.Node
	// Event is the notice's lifecycle event (PreemptionNotified, or
	// ScaledDown for a drain the tenant asked for), with the deadline;
	// nil for a pending node, which is removed at once.
	Event *domain.Event
	// Observation is the drain's start, for a node that was ready; nil
	// otherwise.
	Observation *Observation
}

// Start is the T+0 change of node n, reclaimed at now for cause (why: why
// this node rather than another, said in the event) with its
// deadline: a pure function of the node, the cause and the time. A pending
// node (it never held its machine) is removed at once. Any other one is
// draining with its deadline and gets the full notice, a provisioning one
// too: its Node may have joined the cluster and taken pods before the
// controller recorded it ready.
func Start(n domain.Node, cause domain.DrainCause, why string, deadline, now time.Time) Started {
	n.DrainCause, n.DrainStartedAt = cause, now
	if n.State == domain.NodePending {
		n.State, n.RemovedAt = domain.NodeRemoved, now
		return Started{Node: n}
	}
	n.State, n.Deadline, n.Notified = domain.NodeDraining, deadline, false
	reason, msg := noticeText(n, cause)
	if why != "" {
		msg += "; this node rather than another of the cluster: " + why
	}
	s := Started{Node: n, Event: &domain.Event{ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name, Reason: reason,
		Message: msg, Timestamp: now, Deadline: deadline}}
	if !n.ReadyAt.IsZero() {
		o := DrainObservation(KindDrainStarted, n, now)
		s.Observation = &o
	}
	return s
}

// noticeText is the reason and text of a drain's notice.
func noticeText(n domain.Node, cause domain.DrainCause) (domain.EventReason, string) {
	switch cause {
	case domain.CauseScaledDown:
		return domain.ReasonScaledDown, fmt.Sprintf("node %s is drained because the cluster was scaled down; its work (pods, Slurm jobs) gets SIGTERM and the node is removed once it exits", n.Name)
	case domain.CauseClusterDeleted:
		return domain.ReasonScaledDown, fmt.Sprintf("node %s is drained because the cluster is being deleted", n.Name)
	case domain.CauseOutOfService:
		return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed: its machine is going out of service; its work (pods, Slurm jobs) gets SIGTERM, the node is removed once it exits or at the deadline", n.Name)
	case domain.CauseFairShare:
		return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed to give another cluster its fair share of spare capacity; its work (pods, Slurm jobs) gets SIGTERM, the node is removed once it exits or at the deadline", n.Name)
	}
	return domain.ReasonPreemptionNotified, fmt.Sprintf("node %s is reclaimed: its machine is needed for standard nodes; its work (pods, Slurm jobs) gets SIGTERM, the node is removed once it exits or at the deadline", n.Name)
}

// clusterNotice is the notice the tenant sees in their cluster (a
// Kubernetes Event on the node and its pods): a warning unless the tenant
// asked for the drain.
func clusterNotice(n domain.Node) driver.Notice {
	reason, msg := noticeText(n, n.DrainCause)
	return driver.Notice{Warning: !n.DrainCause.TenantInitiated(), Reason: string(reason),
		Message: msg + "; deadline " + n.Deadline.UTC().Format(time.RFC3339)}
}
