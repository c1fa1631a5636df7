package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/lifecycle"
	"github.com/sparecap/sparecap/internal/store"
)

// prefetchClusters reads into known, in one query, the clusters commit
// writes that known does not have: those pl provisions nodes for and
// those whose state changes (a plan's Clusters).
func prefetchClusters(ctx context.Context, tx store.Tx, pl allocator.Plan, known map[string]*domain.Cluster) error {
	var ids []string
	for _, p := range pl.Provisions {
		if known[p.ClusterID] == nil {
			ids = append(ids, p.ClusterID)
		}
	}
	for _, cs := range pl.Clusters {
		if cs.ClusterID != "" && known[cs.ClusterID] == nil {
			ids = append(ids, cs.ClusterID)
		}
	}
	if len(ids) < 2 {
		return nil
	}
	cls, err := tx.ClustersByID(ctx, ids)
	if err != nil {
		return err
	}
	for i := range cls {
		known[cls[i].ID] = &cls[i]
	}
	return nil
}

// commitWrites are what a commit writes besides the plan.
type commitWrites struct {
	// before writes first: a request's change to an existing cluster.
	before func(store.Tx) error
	// create are new clusters (a batch of creates), each written once
	// with the state and node count the plan gives it rather than
	// inserted and then updated; created then writes what goes with them
	// (their kubeconfigs), before their nodes.
	create  []domain.Cluster
	created func(store.Tx) error
}

// commit writes, in one transaction, w's writes, then the plan's intents:
// drains with their deadlines, new nodes, and the lifecycle events they
// imply, and the states of the clusters that change (the plan's Clusters:
// a fleet's thousand clusters are not rewritten for every node).
//
// Its writes are tagged as the plan's (tok, store.WithTag), and once it
// committed the partitions the plan planned are settled: a plan committed
// is its own fixed point.
func (c *Controller) commit(ctx context.Context, pl allocator.Plan, tok *allocator.Token, now time.Time, w commitWrites) error {
	var ct *commitTx
	loads := c.reclaimLoads(pl)
	err := c.store.Update(store.WithTag(ctx, tok), func(tx store.Tx) error {
		ct = &commitTx{c: c, ctx: ctx, pl: pl, now: now, w: w, loads: loads}
		return ct.run(tx)
	})
	if err != nil {
		return err
	}
	c.parts.Committed(tok)
	c.observe(ct.obs)
	if len(ct.events) > 0 {
		c.notify()
	}
	for _, n := range ct.nodes {
		c.enqueue(n, now)
	}
	return nil
}

// reclaimLoads are what the nodes pl reclaims run, asked of their drivers
// before the transaction (a driver may read the store, which the
// transaction holds), for the lost-work ledger.
func (c *Controller) reclaimLoads(pl allocator.Plan) map[string]domain.NodeLoad {
	var loads map[string]domain.NodeLoad
	for _, r := range pl.Reclaims {
		if r.NodeState != domain.NodeReady {
			continue
		}
		if loads == nil {
			loads = make(map[string]domain.NodeLoad, len(pl.Reclaims))
		}
		loads[r.NodeID] = c.cluster.Load(r.ClusterID, r.NodeName)
	}
	return loads
}

// commitTx is one run of a commit's transaction (a backend may run it
// more than once).
type commitTx struct {
	c   *Controller
	ctx context.Context
	// loads are the reclaimed nodes' loads (reclaimLoads).
	loads map[string]domain.NodeLoad
	tx    store.Tx
	pl    allocator.Plan
	now   time.Time
	w     commitWrites
	// clusters are the rows of the clusters the commit writes, read once:
	// the new ones (not in the store yet) and those it changes.
	clusters map[string]*domain.Cluster
	// events go in a few statements at the end (a burst posts a notice
	// per reclaim); obs are reported once the transaction committed.
	events []domain.Event
	obs    []Observation
	// nodes are the nodes it wrote (reclaimed, then created), for the
	// step runner once it committed.
	nodes []domain.Node
}

func (t *commitTx) run(tx store.Tx) error {
	if t.w.before != nil {
		if err := t.w.before(tx); err != nil {
			return err
		}
	}
	// A burst's plan reclaims hundreds of nodes: read them in one query,
	// not one each.
	tx, err := prefetch(t.ctx, tx, t.pl.Reclaims, func(r allocator.Reclaim) string { return r.NodeID })
	if err != nil {
		return err
	}
	t.tx = tx
	if err := t.readClusters(); err != nil {
		return err
	}
	// The reclaimed nodes are written before the new nodes: those may take
	// the machines they free.
	if err := t.reclaim(); err != nil {
		return err
	}
	created, err := t.provision()
	if err != nil {
		return err
	}
	if err := t.clusterStates(); err != nil {
		return err
	}
	return t.write(created)
}

// readClusters reads, in one query, the clusters the plan provisions for
// or changes the state of; the new clusters' rows are worked out here.
func (t *commitTx) readClusters() error {
	t.clusters = make(map[string]*domain.Cluster, len(t.w.create))
	for i := range t.w.create {
		cl := t.w.create[i]
		t.clusters[cl.ID] = &cl
	}
	return prefetchClusters(t.ctx, t.tx, t.pl, t.clusters)
}

func (t *commitTx) cluster(id string) (*domain.Cluster, error) {
	if cl, ok := t.clusters[id]; ok {
		return cl, nil
	}
	cl, err := t.tx.GetCluster(t.ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", id, err)
	}
	t.clusters[id] = &cl
	return &cl, nil
}

func (t *commitTx) addEvent(e domain.Event) {
	e.ID = t.c.NewID("ev-")
	e.Timestamp = t.now
	t.events = append(t.events, e)
	t.obs = append(t.obs, lifecycle.EventObservation(e))
}

// lostWork is the ledger's entry of ready node n drained now with load l:
// the work at risk at its notice. None for a node that runs none of its
// tenant's work, or whose driver cannot tell.
func (t *commitTx) lostWork(n domain.Node, cause domain.DrainCause, l domain.NodeLoad) (domain.LostWork, bool, error) {
	if n.State != domain.NodeReady || !l.Known || l.Idle {
		return domain.LostWork{}, false, nil
	}
	cl, err := t.cluster(n.ClusterID)
	if err != nil {
		return domain.LostWork{}, false, err
	}
	return domain.LostWork{NodeID: n.ID, NodeName: n.Name, ClusterID: n.ClusterID, ClusterName: cl.Name, ProjectID: cl.ProjectID,
		Region: cl.Region, GPUType: cl.GPUType, Class: n.Class, Cause: cause, At: t.now, GPUSeconds: l.WorkGPUSeconds, Job: l.Gang}, true, nil
}

// reclaim writes the T+0 change of each reclaimed node (reclaim.Start),
// in a few statements, decided by the node's state now rather than the
// plan's view: a pending node may have started provisioning since.
func (t *commitTx) reclaim() error {
	reclaimed := make([]domain.Node, 0, len(t.pl.Reclaims))
	var ledger []domain.LostWork
	for _, r := range t.pl.Reclaims {
		n, err := t.tx.GetNode(t.ctx, r.NodeID)
		if err != nil {
			return fmt.Errorf("reclaim node %s: %w", r.NodeID, err)
		}
		if !n.State.Live() {
			continue
		}
		if w, ok, err := t.lostWork(n, r.Cause, t.loads[n.ID]); err != nil {
			return err
		} else if ok {
			ledger = append(ledger, w)
		}
		deadline := r.Deadline
		if deadline.IsZero() {
			// Planned as pending (no drain), started since: it gets the
			// whole window like any node holding its machine.
			deadline = t.now.Add(t.c.cfg.DrainWindow)
		}
		st := lifecycle.Start(n, r.Cause, r.Why, deadline, t.now)
		if st.Event != nil {
			t.addEvent(*st.Event)
		}
		if st.Observation != nil {
			t.obs = append(t.obs, *st.Observation)
		}
		reclaimed = append(reclaimed, st.Node)
	}
	if err := t.tx.UpdateNodes(t.ctx, reclaimed); err != nil {
		return fmt.Errorf("reclaim %d nodes: %w", len(reclaimed), err)
	}
	if len(ledger) > 0 {
		if err := t.tx.AddLostWork(t.ctx, ledger); err != nil {
			return fmt.Errorf("record the work %d reclaims put at risk: %w", len(ledger), err)
		}
	}
	t.nodes = append(t.nodes[:0], reclaimed...)
	return nil
}

// provision makes the plan's new nodes, numbered by their clusters.
func (t *commitTx) provision() ([]domain.Node, error) {
	created := make([]domain.Node, 0, len(t.pl.Provisions))
	for _, p := range t.pl.Provisions {
		cl, err := t.cluster(p.ClusterID)
		if err != nil {
			return nil, err
		}
		cl.NodeSeq++
		n := domain.Node{
			ID: t.c.NewID("n-"), ClusterID: cl.ID, MachineID: p.MachineID, GPUType: p.GPUType, Class: p.Class, GPUs: p.GPUs,
			Name: domain.NodeName(p.Class, cl.NodeSeq), State: domain.NodeProvisioning, CreatedAt: t.now,
			ProvisioningAt: t.now,
		}
		if p.Pending {
			n.State, n.ProvisioningAt = domain.NodePending, time.Time{}
		}
		if p.Class == domain.Standard && cl.StartsAt.After(t.now) {
			// A booking's node, up before its start, is billed from it:
			// its period in its class starts there.
			n.ClassSince = cl.StartsAt.Truncate(time.Second)
		}
		created = append(created, n)
	}
	return created, nil
}

// clusterStates sets the plan's state of every cluster it changes, with
// the TargetUnfulfilled and TargetFulfilled events of a change of reason.
func (t *commitTx) clusterStates() error {
	for _, cs := range t.pl.Clusters {
		if cs.ClusterID == "" {
			continue
		}
		cur, err := t.cluster(cs.ClusterID)
		if err != nil {
			return err
		}
		prev := cur.Unfulfilled
		cur.Status, cur.Unfulfilled, cur.UnfulfilledMessage = cs.Status, cs.Unfulfilled, cs.Message
		// How long the target has been unmet decides who gets the next
		// freed node; it is kept with the status it follows.
		cur.UnmetSince = allocator.UnmetSince(cur.UnmetSince, cs, t.now)
		if cs.Unfulfilled == prev || cur.Deleting {
			continue
		}
		switch {
		case cs.Unfulfilled != "" && cs.Unfulfilled != domain.UnfulfilledProvisioning:
			t.addEvent(domain.Event{ClusterID: cur.ID, Reason: domain.ReasonTargetUnfulfilled,
				Message: fmt.Sprintf("%s: %s", cs.Unfulfilled, cs.Message)})
		case cs.Unfulfilled == "" && cur.TargetPreemptibleGPUs() > 0:
			t.addEvent(domain.Event{ClusterID: cur.ID, Reason: domain.ReasonTargetFulfilled,
				Message: fmt.Sprintf("%d of %d preemptible GPUs allocated", cs.AllocatedPreemptibleGPUs, cur.TargetPreemptibleGPUs())})
		}
	}
	return nil
}

// write writes the new clusters (first, for their nodes to refer to) and
// what goes with them, the new nodes, the changed clusters and the
// events, each kind in a few statements.
func (t *commitTx) write(created []domain.Node) error {
	ctx, tx := t.ctx, t.tx
	fresh := make([]domain.Cluster, len(t.w.create))
	for i, cl := range t.w.create {
		fresh[i] = *t.clusters[cl.ID]
		delete(t.clusters, cl.ID)
	}
	if err := tx.CreateClusters(ctx, fresh); err != nil {
		return fmt.Errorf("create %d clusters: %w", len(fresh), err)
	}
	if t.w.created != nil {
		if err := t.w.created(tx); err != nil {
			return err
		}
	}
	if err := tx.CreateNodes(ctx, created); err != nil {
		return fmt.Errorf("provision %d nodes: %w", len(created), err)
	}
	t.nodes = append(t.nodes, created...)
	changed := make([]domain.Cluster, 0, len(t.clusters))
	for _, cl := range t.clusters {
		changed = append(changed, *cl)
	}
	slices.SortFunc(changed, func(a, b domain.Cluster) int { return strings.Compare(a.ID, b.ID) })
	if err := tx.UpdateClusters(ctx, changed); err != nil {
		return fmt.Errorf("update %d clusters: %w", len(changed), err)
	}
	return tx.AddEvents(ctx, t.events)
}
