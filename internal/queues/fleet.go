package queues

import (
	"context"

	"github.com/sparecap/sparecap/internal/domain"
)

// View is sparecap's side of one cluster, as the leader knows it now.
type View struct {
	Cluster domain.Cluster
	// Nodes are the cluster's nodes not yet removed.
	Nodes []domain.Node
	// GPUsPerNode is what one node of the cluster brings: the GPUs of a
	// machine of its region and GPU type.
	GPUsPerNode int
}

// Fleet is what the queue integrations read of sparecap and ask of it.
type Fleet interface {
	// View returns the cluster's view; domain.ErrNotFound once it is
	// deleted.
	View(ctx context.Context, clusterID string) (View, error)
	// SetRequested records what the cluster's ProvisioningRequests ask
	// for (domain.Cluster.RequestedPreemptibleGPUs) and replans.
	SetRequested(ctx context.Context, clusterID string, gpus int) error
	// Changed is closed at the next commit that adds lifecycle events (a
	// node added, noticed, removed; a target met or not).
	Changed() <-chan struct{}
}

// Preemptible returns the view's preemptible nodes in state.
func (v View) Preemptible(state domain.NodeState) []domain.Node {
	var out []domain.Node
	for _, n := range v.Nodes {
		if n.Class == domain.Preemptible && n.State == state {
			out = append(out, n)
		}
	}
	return out
}

// Node returns the view's node of that name.
func (v View) Node(name string) (domain.Node, bool) {
	for _, n := range v.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return domain.Node{}, false
}
