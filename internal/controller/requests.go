package controller

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// CreateCluster creates a cluster if its standard capacity can be found,
// and commits the plan that provides it. It returns *ShortfallError
// otherwise, having changed nothing. The caller validates the request.
// also, if set, writes more in the same transaction (the cluster's
// kubeconfig, so no node is ever provisioned before it is attached).
// Concurrent creates are planned and committed together (see createReq),
// each with its own answer.
func (c *Controller) CreateCluster(ctx context.Context, cl domain.Cluster, also ...func(tx store.Tx, id string) error) (domain.Cluster, error) {
	r := &createReq{cl: cl, also: also, done: make(chan struct{})}
	c.cq.push(r)
	if c.lockUnless(ctx, r.done) {
		c.mu.Unlock()
	}
	<-r.done // answered by this holder or by another
	if r.err != nil {
		return domain.Cluster{}, r.err
	}
	// No Kick: the batch committed a plan of the whole fleet, and its
	// nodes are the step runner's already; a pass now would only plan
	// the same again under the lock the next creates wait for.
	return c.store.GetCluster(ctx, r.cl.ID)
}

// createReq is one CreateCluster waiting for the next holder of the plan
// lock, which plans and commits every waiting create together: concurrent
// creates share one plan and one commit instead of queueing for one each.
type createReq struct {
	cl   domain.Cluster
	also []func(tx store.Tx, id string) error
	done chan struct{}
	err  error
}

// flushCreates answers the queued creates; c.mu is held. The batch runs
// on a context of its own: one client going away must not fail the
// creates of the others.
func (c *Controller) flushCreates(ctx context.Context) {
	batch := c.cq.take()
	if len(batch) == 0 {
		return
	}
	defer func() {
		for _, r := range batch {
			close(r.done)
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	c.createBatch(ctx, batch)
}

// createBatch creates the clusters of rs that conflict with no other and
// whose standard capacity can be found, in one plan and one commit, and
// sets each request's error. If the commit fails (one request's own
// writes, say), each request is planned and committed alone, for its own
// answer.
func (c *Controller) createBatch(ctx context.Context, rs []*createReq) {
	now := c.clock.Now()
	accepted := c.checkBookings(ctx, c.acceptCreates(ctx, rs, now), now)
	// Plan with every accepted create; refuse those left short and plan
	// again without them, until none is.
	var (
		pl  allocator.Plan
		tok allocator.Token
		err error
	)
	for len(accepted) > 0 {
		with := allocator.With{Clusters: make([]domain.Cluster, len(accepted))}
		for i, r := range accepted {
			with.Clusters[i] = r.cl
		}
		if pl, tok, err = c.planWith(ctx, now, with); err != nil {
			for _, r := range accepted {
				r.err = err
			}
			return
		}
		var keep []*createReq
		for _, r := range accepted {
			if sf := shortfallOf(pl, r.cl.ID); sf != nil {
				r.err = &ShortfallError{Shortfall: *sf}
				continue
			}
			keep = append(keep, r)
		}
		if len(keep) == len(accepted) {
			break
		}
		accepted = keep
	}
	if len(accepted) == 0 {
		return
	}
	c.commitCreates(ctx, pl, tok, now, accepted)
}

// acceptCreates gives each create its ID and first state, and refuses
// those whose name its project has for another cluster (or another create
// of the batch has); it returns the others.
func (c *Controller) acceptCreates(ctx context.Context, rs []*createReq, now time.Time) []*createReq {
	var accepted []*createReq
	for _, r := range rs {
		cl := &r.cl
		if cl.ID == "" {
			cl.ID = c.NewID("c-")
		}
		cl.CreatedAt, cl.Status = now, domain.StatusWaiting
		c.schedule(ctx, cl, now)
		if cl.Weight <= 0 {
			cl.Weight = 1
		}
		r.err = nil
		clash := func(o *domain.Cluster) bool { return o.ProjectID == cl.ProjectID && o.Name == cl.Name && !o.Deleting }
		if o, found, err := c.clusterNamed(ctx, cl.ProjectID, cl.Name, clash); err != nil || found {
			if r.err = err; found {
				r.err = fmt.Errorf("project %s already has a cluster named %q (%s): %w", cl.ProjectID, cl.Name, o.ID, domain.ErrConflict)
			}
			continue
		}
		if i := slices.IndexFunc(accepted, func(a *createReq) bool { return clash(&a.cl) }); i >= 0 {
			r.err = fmt.Errorf("project %s already has a cluster named %q (%s): %w", cl.ProjectID, cl.Name, accepted[i].cl.ID, domain.ErrConflict)
			continue
		}
		accepted = append(accepted, r)
	}
	return accepted
}

// clusterNamed finds a cluster of project named name for which match
// says so: in the leader's memory, else in the store.
func (c *Controller) clusterNamed(ctx context.Context, project, name string, match func(*domain.Cluster) bool) (domain.Cluster, bool, error) {
	cs, loaded := []domain.Cluster(nil), false
	if ca, ok := store.MemoryOf(c.store); ok {
		cs, loaded = ca.ClustersNamed(project, name)
	}
	if !loaded {
		var err error
		if cs, err = c.store.ListClusters(ctx, project); err != nil {
			return domain.Cluster{}, false, err
		}
	}
	for i := range cs {
		if match(&cs[i]) {
			return cs[i], true, nil
		}
	}
	return domain.Cluster{}, false, nil
}

// commitCreates commits the plan of the accepted creates with their
// clusters; if that fails (one request's own writes, say), each is
// planned and committed alone, for its own answer.
func (c *Controller) commitCreates(ctx context.Context, pl allocator.Plan, tok allocator.Token, now time.Time, accepted []*createReq) {
	fresh := make([]domain.Cluster, len(accepted))
	for i, r := range accepted {
		fresh[i] = r.cl
	}
	err := c.commit(ctx, pl, &tok, now, commitWrites{create: fresh, created: func(tx store.Tx) error {
		for _, r := range accepted {
			for _, f := range r.also {
				if err := f(tx, r.cl.ID); err != nil {
					return err
				}
			}
		}
		return nil
	}})
	switch {
	case err == nil:
		for _, r := range accepted {
			if !r.cl.ActiveAt.IsZero() {
				c.claimNow.Store(true) // a booking: its claims on the next pass
				c.Kick()
			}
		}
	case len(accepted) == 1:
		accepted[0].err = fmt.Errorf("create cluster %s: %w", accepted[0].cl.ID, err)
	default:
		for _, r := range accepted {
			c.createBatch(ctx, []*createReq{r})
		}
	}
}

// Change is what UpdateCluster changes in a cluster; a nil field keeps
// its value.
type Change struct {
	// NumGPUs is the standard GPUs; PreemptibleGPUs the tenant's
	// preemptible target (domain.Cluster.DesiredPreemptibleGPUs);
	// MaxPreemptibleGPUs how far the queue's requests may raise it
	// (domain.Cluster.MaxPreemptibleGPUs).
	NumGPUs, PreemptibleGPUs, MaxPreemptibleGPUs *int
	// PreemptibleGPUTypes, PreemptibleStrategy and MaxPreemptiblePrice
	// as domain.Cluster's (checked by the caller).
	PreemptibleGPUTypes                      *[]string
	PreemptibleStrategy, MaxPreemptiblePrice *string
}

// UpdateCluster changes a cluster's standard GPUs, preemptible target
// and/or the maximum its queue may raise the target to. Growing standard
// capacity is synchronous like a create: refused with *ShortfallError,
// changing nothing, when it cannot be found.
func (c *Controller) UpdateCluster(ctx context.Context, id string, ch Change) (domain.Cluster, error) {
	grows := false
	return c.changeCluster(ctx, "update", id, func(cl *domain.Cluster) {
		if ch.NumGPUs != nil {
			grows = *ch.NumGPUs > cl.NumGPUs
			cl.NumGPUs = *ch.NumGPUs
		}
		if ch.PreemptibleGPUs != nil {
			cl.DesiredPreemptibleGPUs = *ch.PreemptibleGPUs
		}
		if ch.MaxPreemptibleGPUs != nil {
			cl.MaxPreemptibleGPUs = *ch.MaxPreemptibleGPUs
		}
		ch.preemptible(cl)
	}, func() bool { return grows })
}

// preemptible applies ch's preemptible types, strategy and cap to cl.
func (ch Change) preemptible(cl *domain.Cluster) {
	if ch.PreemptibleGPUTypes != nil {
		cl.PreemptibleGPUTypes = *ch.PreemptibleGPUTypes
	}
	if ch.PreemptibleStrategy != nil {
		cl.PreemptibleStrategy = *ch.PreemptibleStrategy
	}
	if ch.MaxPreemptiblePrice != nil {
		cl.MaxPreemptiblePrice = *ch.MaxPreemptiblePrice
	}
}

// SetRequested records what the cluster's queue asks for now through its
// ProvisioningRequests (domain.Cluster.RequestedPreemptibleGPUs), and
// commits the plan that follows: the target rises or falls with it,
// within the cluster's maximum. Setting the value it has changes nothing.
func (c *Controller) SetRequested(ctx context.Context, id string, gpus int) (domain.Cluster, error) {
	if gpus < 0 {
		return domain.Cluster{}, fmt.Errorf("set requested GPUs of cluster %s: %d is negative", id, gpus)
	}
	if cur, err := c.store.GetCluster(ctx, id); err == nil && cur.RequestedPreemptibleGPUs == gpus {
		return cur, nil
	}
	return c.changeCluster(ctx, "set requested GPUs of", id, func(cl *domain.Cluster) {
		cl.RequestedPreemptibleGPUs = gpus
	}, nil)
}

// changeCluster plans the fleet with change applied to cluster id and
// commits that plan with the fields the tenant and its queue set (standard
// GPUs, targets, weight), under the plan lock, which every writer of
// those fields holds. When
// refuseShortfall says so (after change ran), a plan that cannot give the
// cluster its standard capacity is refused with *ShortfallError.
func (c *Controller) changeCluster(ctx context.Context, what, id string, change func(*domain.Cluster), refuseShortfall func() bool) (domain.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	cl, err := c.store.GetCluster(ctx, id)
	if err != nil {
		return domain.Cluster{}, err
	}
	if cl.Deleting {
		return domain.Cluster{}, ErrDeleting
	}
	change(&cl)
	pl, tok, err := c.planWith(ctx, now, allocator.With{Clusters: []domain.Cluster{cl}})
	if err != nil {
		return domain.Cluster{}, err
	}
	if refuseShortfall != nil && refuseShortfall() {
		if sf := shortfallOf(pl, id); sf != nil {
			return domain.Cluster{}, &ShortfallError{Shortfall: *sf}
		}
		if short, err := c.shortAfterBookings(ctx, now, []domain.Cluster{cl}); err != nil || short[id] != nil {
			return domain.Cluster{}, cmp.Or(err, error(short[id]))
		}
	}
	err = c.commit(ctx, pl, &tok, now, commitWrites{before: func(tx store.Tx) error {
		cur, err := tx.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		cur.NumGPUs, cur.DesiredPreemptibleGPUs = cl.NumGPUs, cl.DesiredPreemptibleGPUs
		cur.MaxPreemptibleGPUs, cur.RequestedPreemptibleGPUs = cl.MaxPreemptibleGPUs, cl.RequestedPreemptibleGPUs
		cur.Weight, cur.StartsAt, cur.ActiveAt = cl.Weight, cl.StartsAt, cl.ActiveAt
		cur.PreemptibleGPUTypes, cur.PreemptibleStrategy, cur.MaxPreemptiblePrice = cl.PreemptibleGPUTypes, cl.PreemptibleStrategy, cl.MaxPreemptiblePrice
		return tx.UpdateCluster(ctx, cur)
	}})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("%s cluster %s: %w", what, id, err)
	}
	c.Kick()
	return c.store.GetCluster(ctx, id)
}

// SetWeight changes a cluster's weight in the max-min fair sharing of
// spare capacity (1..domain.MaxWeight). It is committed with the plan made
// with the new weight, so preemptible nodes move toward the new shares
// (with the usual drain) at once.
func (c *Controller) SetWeight(ctx context.Context, id string, weight int) (domain.Cluster, error) {
	if weight < 1 || weight > domain.MaxWeight {
		return domain.Cluster{}, fmt.Errorf("set weight of cluster %s: weight %d is not in 1..%d", id, weight, domain.MaxWeight)
	}
	return c.changeCluster(ctx, "set weight of", id, func(cl *domain.Cluster) { cl.Weight = weight }, nil)
}

// DeleteCluster marks the cluster for deletion and starts draining all its
// nodes, standard ones too. The cluster disappears once every node is
// removed.
func (c *Controller) DeleteCluster(ctx context.Context, id string) (domain.Cluster, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	cl, err := c.store.GetCluster(ctx, id)
	if err != nil {
		return domain.Cluster{}, err
	}
	cl.Deleting = true
	pl, tok, err := c.planWith(ctx, now, allocator.With{Clusters: []domain.Cluster{cl}})
	if err != nil {
		return domain.Cluster{}, err
	}
	added := false
	err = c.commit(ctx, pl, &tok, now, commitWrites{before: func(tx store.Tx) error {
		added = false
		cur, err := tx.GetCluster(ctx, id)
		if err != nil {
			return err
		}
		if cur.Deleting {
			return nil
		}
		cur.Deleting, added = true, true
		if _, err := tx.AddEvent(ctx, domain.Event{
			ID: c.NewID("ev-"), ClusterID: id, Reason: domain.ReasonClusterDeleting, Timestamp: now,
			Message: "cluster deletion requested; every node is drained and its machine freed",
		}); err != nil {
			return err
		}
		return tx.UpdateCluster(ctx, cur)
	}})
	if err != nil {
		return domain.Cluster{}, fmt.Errorf("delete cluster %s: %w", id, err)
	}
	if added {
		// ClusterDeleting is an event too: wake the event streams even
		// when the plan itself added none (a cluster with no nodes).
		c.notify()
	}
	if cl.ActiveAt.After(now) {
		c.claimNow.Store(true) // a booking cancelled: its claims go
	}
	c.Kick()
	return c.store.GetCluster(ctx, id)
}

// snapshotWith reads a snapshot and finds cluster id in it. Its clusters
// are the caller's to change (a snapshot's slices are shared otherwise).
func (c *Controller) snapshotWith(ctx context.Context, id string) (allocator.Snapshot, int, error) {
	s, err := c.snapshot(ctx)
	if err != nil {
		return s, -1, err
	}
	s.Clusters = slices.Clone(s.Clusters)
	for i := range s.Clusters {
		if s.Clusters[i].ID == id {
			return s, i, nil
		}
	}
	return s, -1, domain.ErrNotFound
}

func shortfallOf(pl allocator.Plan, id string) *allocator.Shortfall {
	for i := range pl.Shortfalls {
		if pl.Shortfalls[i].ClusterID == id {
			return &pl.Shortfalls[i]
		}
	}
	return nil
}

// Plan returns the plan the allocator would make now, without applying it
// (a dry run).
func (c *Controller) Plan(ctx context.Context) (allocator.Plan, error) {
	s, err := c.snapshot(ctx)
	if err != nil {
		return allocator.Plan{}, err
	}
	return allocator.Compute(s, c.clock.Now(), c.planConfig()), nil
}
