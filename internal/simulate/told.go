package simulate

import (
	"time"

	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
)

// tells are the notices the control plane told ahead, by cluster ID and
// node name: when the node was last told, and the notice's time then
// (PreemptionScheduled; PreemptionCancelled takes it back).
type tells map[[2]string]tell

type tell struct{ at, notice time.Time }

// observe is the controller's Observer: it keeps the tells.
func (t tells) observe(o controller.Observation) {
	if o.Kind != controller.KindEvent || o.Node == "" {
		return
	}
	k := [2]string{o.Cluster, o.Node}
	switch o.Reason {
	case domain.ReasonPreemptionScheduled:
		t[k] = tell{at: o.Time, notice: o.Deadline}
	case domain.ReasonPreemptionCancelled:
		delete(t, k)
	}
}

// ahead reports whether node n's reclaim was told ahead in time for a
// checkpoint of cost: the time told is its notice's (within a second),
// told at least cost before it.
func (t tells) ahead(n *domain.Node, cost time.Duration) bool {
	x, ok := t[[2]string{n.ClusterID, n.Name}]
	if !ok || !reclaimed(n) {
		return false
	}
	return x.notice.Sub(n.DrainStartedAt).Abs() <= time.Second && !x.at.After(n.DrainStartedAt.Add(-cost))
}
