package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// stepRemove wipes the machine of a removed node and hands it to whoever
// waits for it. Nothing here waits on the tenant's cluster.
func (c *Controller) stepRemove(ctx context.Context, n domain.Node) error {
	if n.RemovedAt.IsZero() {
		// A node stored by a version that deleted the Node object first:
		// that is cleanup now.
		var err error
		n, err = c.transition(ctx, n.ID, domain.NodeRemoving, func(_ func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.RemovedAt, n.CleanupPending = now, true
			return []domain.Event{{Reason: domain.ReasonNodeRemoved, Message: removedMessage(*n, now, cleanup{err: errNotTried})}}, nil
		})
		if err != nil {
			return ignoreStale(err)
		}
	}
	if err := c.owns(ctx, n); err != nil {
		return ignoreStale(err)
	}
	m, err := c.store.GetMachine(ctx, n.MachineID)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	done, err := c.machines.Wipe(ctx, m, n.ClusterID, n.Name)
	if err != nil {
		return &providerError{domain.ReasonDeprovisionFailed, fmt.Errorf("wipe machine %s: %w", m.ID, err)}
	}
	if !done {
		return nil
	}
	_, err = c.transition(ctx, n.ID, domain.NodeRemoving, func(txOf func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State = domain.NodeRemoved
		tx, err := txOf()
		if err != nil {
			return nil, err
		}
		// The machine is free only once n is written removed: the schema
		// refuses a second live node on it.
		if err := tx.UpdateNode(ctx, *n); err != nil {
			return nil, err
		}
		waiting, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: []domain.NodeState{domain.NodePending}})
		if err != nil {
			return nil, err
		}
		for _, w := range waiting {
			w.State, w.ProvisioningAt = domain.NodeProvisioning, now
			if err := tx.UpdateNode(ctx, w); err != nil {
				return nil, err
			}
		}
		if len(waiting) == 0 && n.Class == domain.Standard && c.cfg.Cooldown > 0 {
			m, err := tx.GetMachine(ctx, n.MachineID)
			if err != nil {
				return nil, err
			}
			m.CooldownUntil = now.Add(c.cfg.Cooldown)
			if err := tx.UpdateMachine(ctx, m); err != nil {
				return nil, err
			}
		}
		return nil, nil
	})
	if err := ignoreStale(err); err != nil {
		return err
	}
	c.Kick() // the machine is free: replan soon
	return nil
}

// owns checks, under the plan lock, that node n is still removing and is
// the only node its machine serves, so a step working from a stale copy
// never wipes a machine already handed to another node. Only this node's
// own step (one at a time) moves it on from removing, so the answer holds
// until the wipe.
func (c *Controller) owns(ctx context.Context, n domain.Node) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur, err := c.store.GetNode(ctx, n.ID)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.ID, err)
	}
	if cur.State != domain.NodeRemoving {
		return errStale
	}
	active, err := c.store.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID,
		States: []domain.NodeState{domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining, domain.NodeRemoving}})
	if err != nil {
		return fmt.Errorf("nodes of machine %s: %w", n.MachineID, err)
	}
	for _, o := range active {
		if o.ID != n.ID {
			c.log.Error("machine serves another node; not wiped", "machine", n.MachineID, "node", n.Name, "other", o.Name)
			return errStale
		}
	}
	return nil
}

// cleanup is what deleting a removed node's objects from its cluster did.
type cleanup struct {
	// pods force-deleted; -1 when they could not be listed.
	pods int
	err  error
}

// errNotTried: cleanup has not been tried yet.
var errNotTried = errors.New("not tried yet")

// tryCleanUp cleans up for at most Config.CleanupBudget.
func (c *Controller) tryCleanUp(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) cleanup {
	if !c.claim(cleanupKey(n.ID)) {
		return cleanup{pods: -1, err: errNotTried} // the background cleanup is at it
	}
	defer c.release(cleanupKey(n.ID))
	ctx, cancel := context.WithTimeout(ctx, c.cfg.CleanupBudget)
	defer cancel()
	return c.cleanUp(ctx, n, outcome)
}

// cleanUp deletes what node n leaves in its cluster once its machine is
// taken back: pods still bound to it are force-deleted (with their
// disruption condition, where the driver sets one), then the Node object
// (whether or not every pod could be deleted: the cluster's pod garbage
// collector deletes pods bound to a Node that is gone), then Kubernetes
// Events say how the node went, a courtesy that never keeps the cleanup
// pending. Every call is idempotent.
func (c *Controller) cleanUp(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) cleanup {
	pods, err := c.cluster.ListWork(ctx, n.ClusterID, n.Name)
	if err != nil {
		return cleanup{pods: -1, err: fmt.Errorf("list pods: %w", err)}
	}
	var errs []error
	if err := c.deletePods(ctx, n, pods, func(driver.Work) bool { return true }, time.Time{}); err != nil {
		errs = append(errs, fmt.Errorf("force-delete pods: %w", err))
	}
	if err := c.cluster.Release(ctx, n.ClusterID, n.Name); err != nil {
		errs = append(errs, fmt.Errorf("delete node: %w", err))
	}
	if len(errs) > 0 {
		return cleanup{pods: len(pods), err: errors.Join(errs...)}
	}
	for _, e := range endEvents(n, outcome, len(pods)) {
		if err := c.postNodeEvent(ctx, n, e); err != nil && !errors.Is(err, domain.ErrNotFound) {
			c.courtesyFailed(n, "post the Events of its removal", err)
			break
		}
	}
	return cleanup{pods: len(pods)}
}

// endEvents are the Kubernetes Events that say how a node went.
func endEvents(n domain.Node, outcome domain.DrainOutcome, forced int) []driver.Notice {
	removed := driver.Notice{Reason: string(domain.ReasonNodeRemoved),
		Message: fmt.Sprintf("sparecap removed node %s and took its machine back", n.Name)}
	switch {
	case outcome == domain.OutcomeLost:
		return []driver.Notice{{Warning: true, Reason: string(domain.ReasonNodeLost),
			Message: fmt.Sprintf("node %s was lost (deleted by someone else, or NotReady too long); sparecap took its machine back", n.Name)}}
	case n.ReadyAt.IsZero() && n.DrainStartedAt.IsZero():
		return []driver.Notice{{Warning: true, Reason: string(domain.ReasonRegistrationFailed),
			Message: fmt.Sprintf("node %s did not register Ready in time; sparecap took its machine back", n.Name)}}
	case outcome == domain.OutcomeEarly:
		return []driver.Notice{{Reason: string(domain.ReasonNodeDrained),
			Message: fmt.Sprintf("all pods on node %s exited before the deadline %s", n.Name, n.Deadline.UTC().Format(time.RFC3339))}, removed}
	case forced > 0:
		return []driver.Notice{{Warning: true, Reason: "DeadlineReached",
			Message: fmt.Sprintf("deadline %s reached: %d pods still on node %s were force-deleted", n.Deadline.UTC().Format(time.RFC3339), forced, n.Name)}, removed}
	}
	return []driver.Notice{removed}
}

// stepCleanup retries the cleanup of a removed node whose cluster did not
// answer in time, with backoff, until it answers. A cluster deleted
// meanwhile has nothing left to clean (its credentials are gone with it).
func (c *Controller) stepCleanup(ctx context.Context, n domain.Node) error {
	n, err := c.store.GetNode(ctx, n.ID)
	if err != nil || !n.CleanupPending {
		return err
	}
	_, err = c.store.GetCluster(ctx, n.ClusterID)
	gone := errors.Is(err, domain.ErrNotFound)
	if err != nil && !gone {
		return err
	}
	res := cleanup{pods: -1}
	if !gone {
		if res = c.cleanUp(ctx, n, n.Outcome); res.err != nil {
			return &clusterError{fmt.Errorf("clean up the cluster: %w", res.err)}
		}
	}
	_, err = c.transition(ctx, n.ID, anyState, func(_ func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
		if !n.CleanupPending {
			return nil, errStale
		}
		n.CleanupPending = false
		if gone {
			return nil, nil
		}
		what := "its Node object was"
		if res.pods > 0 {
			what = fmt.Sprintf("its Node object and %d pods left on it were", res.pods)
		}
		return []domain.Event{{Reason: domain.ReasonCleanupFinished,
			Message: fmt.Sprintf("cleanup of node %s finished: %s deleted from the cluster %s after the node was removed", n.Name, what, now.Sub(n.RemovedAt).Round(time.Second))}}, nil
	})
	return ignoreStale(err)
}

// removedMessage says how node n went, at at, and what cleanup left.
func removedMessage(n domain.Node, at time.Time, res cleanup) string {
	var msg string
	switch {
	case n.ReadyAt.IsZero():
		msg = fmt.Sprintf("node %s was removed before it became ready", n.Name)
	case n.Outcome == domain.OutcomeEarly:
		msg = fmt.Sprintf("node %s was removed %s after the notice, before the deadline", n.Name, at.Sub(n.DrainStartedAt).Round(time.Second))
	case n.Outcome == domain.OutcomeDeadline && res.err == nil && res.pods > 0:
		msg = fmt.Sprintf("node %s was removed at the deadline; %d pods still running were force-deleted", n.Name, res.pods)
	case n.Outcome == domain.OutcomeDeadline && res.err == nil:
		msg = fmt.Sprintf("node %s was removed at the deadline; its last pods ended within the final second", n.Name)
	case n.Outcome == domain.OutcomeDeadline:
		msg = fmt.Sprintf("node %s was removed at the deadline", n.Name)
	default:
		msg = fmt.Sprintf("node %s was removed", n.Name)
	}
	if res.err == nil {
		return msg
	}
	left := "its Node object"
	switch {
	case res.pods > 0:
		left = fmt.Sprintf("its Node object and %d pods still on it", res.pods)
	case res.pods < 0:
		left = "its Node object and any pods still on it"
	}
	return fmt.Sprintf("%s; its machine is taken back, but the cluster's API did not answer in time (%v): cleanup pending, %s are deleted once it does",
		msg, res.err, left)
}
