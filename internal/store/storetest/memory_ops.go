package storetest

import (
	"context"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// The operations of testMemoryFollow's transactions. Each keeps to what
// the store accepts (a machine holds one active and one pending node at
// most), so only a rollback on purpose fails a transaction.

// op runs one random operation in tx and says which.
func (r *memoryRun) op(ctx context.Context, tx store.Tx, p *memoryPlan) (string, error) {
	switch op := r.rng.IntN(14); {
	case op == 0 || len(p.machines) < 4:
		m := machine(r.id("m-"), r.when())
		p.machines = append(p.machines, m.ID)
		return "create machine", tx.CreateMachine(ctx, m)
	case op == 1:
		m, err := tx.GetMachine(ctx, r.pick(p.machines))
		if err != nil {
			return "update machine", err
		}
		m.OutOfService, m.CooldownUntil = !m.OutOfService, r.when()
		return "update machine", tx.UpdateMachine(ctx, m)
	case op == 2:
		return "create reservation", tx.CreateReservation(ctx, domain.Reservation{ID: r.id("r-"),
			ProjectID: r.pick([]string{"p1", "p2"}), Region: "eu-1", GPUType: "H100", CreatedAt: r.when()})
	case op == 3 || len(p.clusters) == 0:
		c := cluster(r.id("c-"), r.pick([]string{"p1", "p2"}), r.when())
		c.Name = r.pick(clusterNamePool)
		p.clusters = append(p.clusters, c.ID)
		if r.rng.IntN(2) == 0 {
			return "create clusters", tx.CreateClusters(ctx, []domain.Cluster{c})
		}
		return "create cluster", tx.CreateCluster(ctx, c)
	case op == 4:
		return "update cluster", r.updateCluster(ctx, tx, p)
	case op == 5:
		var sealed []byte
		if r.rng.IntN(2) == 0 {
			sealed = []byte("sealed")
		}
		return "attach or detach a kubeconfig", tx.SetKubeconfig(ctx, r.pick(p.clusters), sealed, at(1+r.rng.IntN(20)))
	case op == 6:
		return "set access", tx.SetAccess(ctx, r.pick(p.clusters), domain.Access{CheckedAt: r.when(),
			Missing: []domain.MissingPermission{{Permission: "nodes/delete", Essential: true, Since: at(3)}}})
	case op <= 8:
		return "create nodes", r.createNodes(ctx, tx, p)
	case op <= 11 && len(p.live) > 0:
		return "update node", r.updateNode(ctx, tx, p)
	case op == 12 && len(p.live) > 1:
		return "update nodes", r.updateNodes(ctx, tx, p)
	case op == 13:
		_, err := tx.ArchiveNodes(ctx, at(100), 2)
		return "archive nodes", err
	default:
		_, err := tx.AddEvent(ctx, event(r.id("e-"), r.pick(p.clusters), r.pick(append(p.live, "gone")),
			domain.ReasonNodeAdded, r.when()))
		return "add event", err
	}
}

func (r *memoryRun) pick(xs []string) string { return xs[r.rng.IntN(len(xs))] }

// when is a time that often ties with others, and is sometimes zero.
func (r *memoryRun) when() time.Time {
	if r.rng.IntN(10) == 0 {
		return time.Time{}
	}
	return at(r.rng.IntN(20)).Add(time.Duration(r.rng.IntN(1000)) * time.Nanosecond)
}

// updateCluster renames a cluster within the pool, changes its status,
// or deletes it fully (it leaves the snapshot), one by one or in bulk.
func (r *memoryRun) updateCluster(ctx context.Context, tx store.Tx, p *memoryPlan) error {
	i := r.rng.IntN(len(p.clusters))
	c, err := tx.GetCluster(ctx, p.clusters[i])
	if err != nil {
		return err
	}
	switch r.rng.IntN(4) {
	case 0:
		c.Name = r.pick(clusterNamePool)
	case 1:
		c.Deleting, c.DeletedAt = true, at(30)
		p.clusters = slices.Delete(p.clusters, i, i+1)
	default:
		c.Status, c.NodeSeq, c.UnmetSince = domain.StatusReady, c.NodeSeq+1, r.when()
	}
	if r.rng.IntN(2) == 0 {
		return tx.UpdateClusters(ctx, []domain.Cluster{c})
	}
	return tx.UpdateCluster(ctx, c)
}

// createNodes creates up to three nodes on machines free for them: one
// provisioning or ready where no node is active, else one pending where
// none is pending.
func (r *memoryRun) createNodes(ctx context.Context, tx store.Tx, p *memoryPlan) error {
	var ns []domain.Node
	for range 1 + r.rng.IntN(3) {
		m := r.pick(p.machines)
		st := r.pick([]string{string(domain.NodeProvisioning), string(domain.NodeReady)})
		switch {
		case p.active[m] == "":
		case p.pending[m] == "":
			st = string(domain.NodePending)
		default:
			continue
		}
		n := node(r.id("n-"), r.pick(p.clusters), m, domain.NodeState(st), r.when())
		n.Name = r.pick(nodeNamePool)
		p.claim(n)
		p.live = append(p.live, n.ID)
		ns = append(ns, n)
	}
	if len(ns) == 1 && r.rng.IntN(2) == 0 {
		return tx.CreateNode(ctx, ns[0])
	}
	return tx.CreateNodes(ctx, ns)
}

// updateNode moves a live node one state on (pending to provisioning
// once its machine is free), or removes it, or renames it.
func (r *memoryRun) updateNode(ctx context.Context, tx store.Tx, p *memoryPlan) error {
	i := r.rng.IntN(len(p.live))
	n, err := tx.GetNode(ctx, p.live[i])
	if err != nil {
		return err
	}
	p.free(n)
	next := map[domain.NodeState]domain.NodeState{domain.NodePending: domain.NodeProvisioning,
		domain.NodeProvisioning: domain.NodeReady, domain.NodeReady: domain.NodeDraining,
		domain.NodeDraining: domain.NodeRemoving, domain.NodeRemoving: domain.NodeRemoved}
	switch k := r.rng.IntN(10); {
	case k < 2:
		n.State, n.RemovedAt = domain.NodeRemoved, r.when()
	case k < 3:
		n.Name = r.pick(nodeNamePool)
	case n.State == domain.NodePending && p.active[n.MachineID] != "":
		n.LastError = "the machine is still draining"
	default:
		n.State = next[n.State]
		n.ReadyAt, n.Deadline, n.RemovedAt = r.when(), r.when(), r.when()
	}
	if n.State == domain.NodeRemoved {
		p.live = slices.Delete(p.live, i, i+1)
	} else {
		p.claim(n)
	}
	return tx.UpdateNode(ctx, n)
}

// updateNodes renames two live nodes and notes an error on them, in one
// bulk write.
func (r *memoryRun) updateNodes(ctx context.Context, tx store.Tx, p *memoryPlan) error {
	i := r.rng.IntN(len(p.live))
	j := (i + 1 + r.rng.IntN(len(p.live)-1)) % len(p.live)
	ns, err := tx.NodesByID(ctx, []string{p.live[i], p.live[j]})
	if err != nil {
		return err
	}
	for k := range ns {
		ns[k].Name, ns[k].LastError = r.pick(nodeNamePool), "renamed"
	}
	return tx.UpdateNodes(ctx, ns)
}
