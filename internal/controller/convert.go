package controller

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// ConvertNode converts a ready node of cluster clusterID, named by its ID
// or its name, to class to in place: no drain, its work runs on. From that
// second it is billed in its new class (its earlier period's usage record
// is closed in the same transaction), the cluster's standard GPUs and
// preemptible target move by its GPUs, and a standard node is never
// reclaimed. The cluster learns of the change in its node's marks (a
// label, a feature) at the next sweep, asked for now.
//
// It is refused, changing nothing, with an error wrapping
// domain.ErrConflict when the node is not ready or already of that class,
// when it would take the cluster's last standard node, or when its
// machine may not serve the cluster's standard nodes (another project's
// reservation, or none for a reserved cluster).
func (c *Controller) ConvertNode(ctx context.Context, clusterID, node string, to domain.ComputeClass) (domain.Node, error) {
	if to != domain.Standard && to != domain.Preemptible {
		return domain.Node{}, fmt.Errorf("convert node %s: class %q is neither standard nor preemptible", node, to)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	at := now.Truncate(time.Second)
	s, i, err := c.snapshotWith(ctx, clusterID)
	if err != nil {
		return domain.Node{}, err
	}
	cl := &s.Clusters[i]
	if cl.Deleting {
		return domain.Node{}, ErrDeleting
	}
	ni := slices.IndexFunc(s.Nodes, func(n *domain.Node) bool {
		return n.ClusterID == clusterID && (n.ID == node || n.Name == node)
	})
	if ni < 0 {
		return domain.Node{}, fmt.Errorf("node %s of cluster %s: %w", node, clusterID, domain.ErrNotFound)
	}
	n := *s.Nodes[ni]
	if err := convertible(s, cl, n, to, at, c.cfg.ConvertEvery); err != nil {
		return domain.Node{}, fmt.Errorf("convert node %s to %s: %w", n.Name, to, err)
	}
	converted := n
	converted.Class, converted.ClassSince = to, at
	moveCounts(cl, n.GPUs, to)
	pl, tok, err := c.planWith(ctx, now, allocator.With{Clusters: []domain.Cluster{*cl}, Nodes: []*domain.Node{&converted}})
	if err != nil {
		return domain.Node{}, err
	}
	err = c.commit(ctx, pl, &tok, now, commitWrites{before: func(tx store.Tx) error {
		return c.writeConversion(ctx, tx, n, to, at)
	}})
	if err != nil {
		return domain.Node{}, fmt.Errorf("convert node %s to %s: %w", n.Name, to, err)
	}
	c.notify()
	c.SweepSoon()
	return c.store.GetNode(ctx, n.ID)
}

// convertible says why node n of cluster cl may not become to at at, if
// so; every is how soon a node may convert again.
func convertible(s allocator.Snapshot, cl *domain.Cluster, n domain.Node, to domain.ComputeClass, at time.Time, every time.Duration) error {
	switch {
	case n.Class == to:
		return fmt.Errorf("it is %s already: %w", to, domain.ErrConflict)
	case n.State != domain.NodeReady:
		return fmt.Errorf("it is %s; only a ready node converts: %w", n.State, domain.ErrConflict)
	case !n.ClassSince.IsZero() && at.Before(n.ClassSince.Add(every)):
		return fmt.Errorf("it was converted at %s; it may convert again from %s: %w", n.ClassSince.UTC().Format(time.RFC3339),
			n.ClassSince.Add(every).UTC().Format(time.RFC3339), domain.ErrConflict)
	case !at.After(n.PeriodStart()):
		// Billing periods are whole seconds: one may not be empty.
		return fmt.Errorf("it became ready less than a second ago; retry: %w", domain.ErrConflict)
	case to == domain.Preemptible && cl.NumGPUs-n.GPUs < domain.GPUStep:
		return fmt.Errorf("it would leave the cluster no standard node (it has %d standard GPUs): %w", cl.NumGPUs, domain.ErrConflict)
	case to == domain.Standard:
		mi := slices.IndexFunc(s.Machines, func(m domain.Machine) bool { return m.ID == n.MachineID })
		if mi < 0 {
			return fmt.Errorf("its machine %s: %w", n.MachineID, domain.ErrNotFound)
		}
		m := &s.Machines[mi]
		var project string
		for _, r := range s.Reservations {
			if r.ID == m.ReservationID {
				project = r.ProjectID
			}
		}
		if !allocator.ServesStandard(cl, m, project) {
			why := "its machine is in a reservation"
			if cl.BillingType == domain.BillingReserved {
				why = "its machine is not in a reservation of the cluster's project"
			}
			return fmt.Errorf("%s, so it may not serve the cluster's standard nodes: %w", why, domain.ErrConflict)
		}
	}
	return nil
}

// moveCounts moves gpus between the cluster's standard GPUs and its
// preemptible target, toward to. A target the tenant's queue raised
// (RequestedPreemptibleGPUs) is its own: a node converted to standard
// may be replaced by a new preemptible one while the queue asks for it.
func moveCounts(cl *domain.Cluster, gpus int, to domain.ComputeClass) {
	if to == domain.Standard {
		cl.NumGPUs += gpus
		cl.DesiredPreemptibleGPUs = max(cl.DesiredPreemptibleGPUs-gpus, 0)
		return
	}
	cl.NumGPUs -= gpus
	cl.DesiredPreemptibleGPUs += gpus
}

// writeConversion writes, in the commit's transaction, the node's class
// change, the final usage record of its period in the old class, its
// cluster's counts and the event. It reads the node again: one that moved
// since the snapshot (a drain, a loss) is not converted.
func (c *Controller) writeConversion(ctx context.Context, tx store.Tx, was domain.Node, to domain.ComputeClass, at time.Time) error {
	n, err := tx.GetNode(ctx, was.ID)
	if err != nil {
		return err
	}
	if n.State != domain.NodeReady || n.Class != was.Class {
		return fmt.Errorf("it moved on (%s, %s): %w", n.State, n.Class, domain.ErrConflict)
	}
	cl, err := tx.GetCluster(ctx, n.ClusterID)
	if err != nil {
		return err
	}
	m, err := tx.GetMachine(ctx, n.MachineID)
	if err != nil {
		return err
	}
	closed := billing.Closed(&n, &cl, &m, at)
	from := n.Class
	n.Class, n.ClassSince = to, at
	// The node first: a final record of a period before its ClassSince
	// leaves it on the meter's work list.
	if err := tx.UpdateNode(ctx, n); err != nil {
		return err
	}
	if err := tx.PutUsage(ctx, closed); err != nil {
		return err
	}
	moveCounts(&cl, n.GPUs, to)
	if err := tx.UpdateCluster(ctx, cl); err != nil {
		return err
	}
	_, err = tx.AddEvent(ctx, domain.Event{
		ID: c.NewID("ev-"), ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name,
		Reason: domain.ReasonNodeConverted, Timestamp: at, Message: conversionMessage(n.Name, from, to, at),
	})
	return err
}

func conversionMessage(name string, from, to domain.ComputeClass, at time.Time) string {
	what := "billed at the on-demand price from then and never reclaimed"
	if to == domain.Preemptible {
		what = "billed at the preemptible price from then; it may be reclaimed with the usual notice"
	}
	return fmt.Sprintf("node %s converted from %s to %s in place at %s, its work untouched: %s",
		name, from, to, at.UTC().Format(time.RFC3339), what)
}
