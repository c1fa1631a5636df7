package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// Run reconciles until ctx ends: after each pass it sleeps until the
// earliest drain deadline, the end of a cooldown or a retry, a Kick, or
// Interval. Node steps run in the background (see pass), so a cluster
// whose API is slow or down never holds up another cluster's drains.
func (c *Controller) Run(ctx context.Context) error {
	defer c.steps.Wait()
	for {
		next, err := c.pass(ctx, false)
		if err != nil && ctx.Err() == nil {
			c.log.Error("reconcile", "err", err)
		}
		wait := nextWait(next, c.clock.Now(), c.cfg.Interval)
		select {
		case <-ctx.Done():
			return nil
		case <-c.kick:
		case <-c.clock.After(wait):
		}
	}
}

// nextWait is how long the loop sleeps: until next, at most interval.
// Work already overdue (a deadline pass that failed, say because the
// cluster's API is down) is retried after a tenth of the interval, soon
// but without spinning.
func nextWait(next, now time.Time, interval time.Duration) time.Duration {
	if next.IsZero() {
		return interval
	}
	d := next.Sub(now)
	if d <= 0 {
		return interval / 10
	}
	return min(d, interval)
}

// inFlight are the node states the step machine moves on.
var inFlight = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}

// Reconcile runs one pass and waits for every node step it started: plan
// and commit what changed, step every node in flight (concurrently, up to
// Config.Workers at a time), finish deleted clusters and prune old events.
// It returns the earliest time something is due (a drain deadline, a
// cooldown end, a retry), or zero.
func (c *Controller) Reconcile(ctx context.Context) (time.Time, error) {
	return c.pass(ctx, true)
}

// pass is Reconcile; with wait false it returns without waiting for the
// node steps it started. A node whose step is still running from an
// earlier pass is left to it, and a step that finishes kicks the loop, so
// the next pass sees what it changed.
func (c *Controller) pass(ctx context.Context, wait bool) (time.Time, error) {
	pl, err := c.replan(ctx)
	if err != nil {
		return time.Time{}, err
	}
	next := pl.NextWake
	earlier := func(t time.Time) {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	moved := c.moved.Load()
	nodes, err := c.store.ListNodes(ctx, store.NodeFilter{States: inFlight})
	if err != nil {
		return time.Time{}, fmt.Errorf("list nodes in flight: %w", err)
	}
	var (
		errMu sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	now := c.clock.Now()
	for _, n := range nodes {
		if n.State == domain.NodeDraining {
			earlier(n.Deadline)
		}
		if at := c.backoff.retryAt(n, now); now.Before(at) {
			earlier(at)
			continue
		}
		if !c.claim(n.ID) {
			continue
		}
		wg.Add(1)
		c.steps.Add(1)
		run := func(f func()) { go f() }
		if wait && c.cfg.Workers == 1 {
			// One worker and a caller that waits: step in order, on this
			// goroutine, so a test's sequence of driver calls repeats.
			run = func(f func()) { f() }
		}
		run(func() {
			defer c.steps.Done()
			defer wg.Done()
			defer c.release(n.ID)
			select {
			case c.workers <- struct{}{}:
			case <-ctx.Done():
				return
			}
			err := c.step(ctx, n)
			<-c.workers
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				c.backoff.fail(n.ID, c.clock.Now())
				c.noteError(ctx, n, err)
			} else {
				c.backoff.ok(n.ID)
				c.clearError(ctx, n)
			}
			if wait {
				if err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
				return
			}
			// Background step: report through the log and let the loop
			// see what changed (or plan the retry) at once.
			if err != nil {
				c.log.Warn("node step failed; retrying with backoff", "err", err)
			}
			c.Kick()
		})
	}
	if wait {
		wg.Wait()
	}
	if err := c.finishDeletions(ctx); err != nil {
		errs = append(errs, err)
	}
	// Nodes that became ready or left change cluster states and may free
	// capacity: plan again rather than wait for the next pass.
	if c.moved.Load() != moved {
		pl, err := c.replan(ctx)
		if err != nil {
			errs = append(errs, err)
		} else {
			earlier(pl.NextWake)
		}
	}
	if now := c.clock.Now(); now.Sub(c.lastPrune) >= time.Minute {
		err := c.store.Update(ctx, func(tx store.Tx) error {
			_, err := tx.PruneEvents(ctx, now.Add(-c.cfg.EventRetention))
			return err
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("prune events: %w", err))
		} else {
			c.lastPrune = now
		}
	}
	return next, errors.Join(errs...)
}

// replan commits the allocator's plan when it changes anything.
func (c *Controller) replan(ctx context.Context) (allocator.Plan, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	s, err := c.snapshot(ctx)
	if err != nil {
		return allocator.Plan{}, err
	}
	pl := c.plan(s, now)
	if !changes(s, pl) {
		return pl, nil
	}
	if err := c.commit(ctx, pl, now, nil); err != nil {
		return allocator.Plan{}, fmt.Errorf("commit plan: %w", err)
	}
	return pl, nil
}

func changes(s allocator.Snapshot, pl allocator.Plan) bool {
	if len(pl.Reclaims) > 0 || len(pl.Provisions) > 0 {
		return true
	}
	for i, cs := range pl.Clusters {
		c := &s.Clusters[i]
		if c.Status != cs.Status || c.Unfulfilled != cs.Unfulfilled || c.UnfulfilledMessage != cs.Message {
			return true
		}
	}
	return false
}

func (c *Controller) step(ctx context.Context, n domain.Node) error {
	var err error
	switch n.State {
	case domain.NodePending:
		err = c.stepPending(ctx, n)
	case domain.NodeProvisioning:
		err = c.stepProvision(ctx, n)
	case domain.NodeDraining:
		err = c.stepDrain(ctx, n)
	case domain.NodeRemoving:
		err = c.stepRemove(ctx, n)
	}
	if err != nil {
		return fmt.Errorf("%s node %s of cluster %s: %w", n.State, n.Name, n.ClusterID, err)
	}
	return nil
}

// errStale: the node moved on since it was read; the step is dropped.
var errStale = errors.New("node state changed")

// transition applies change to the node if it is still in state from,
// in one transaction under the plan lock, with the events change returns.
func (c *Controller) transition(ctx context.Context, id string, from domain.NodeState, change func(tx store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error)) (domain.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	var n domain.Node
	var obs []Observation
	err := c.store.Update(ctx, func(tx store.Tx) error {
		obs = obs[:0]
		var err error
		n, err = tx.GetNode(ctx, id)
		if err != nil {
			return err
		}
		if n.State != from {
			return errStale
		}
		evs, err := change(tx, &n, now)
		if err != nil {
			return err
		}
		if err := tx.UpdateNode(ctx, n); err != nil {
			return err
		}
		for _, e := range evs {
			e.ID, e.Timestamp = c.NewID("ev-"), now
			if e.NodeID == "" && e.Reason != domain.ReasonTargetUnfulfilled {
				e.NodeID, e.NodeName, e.ClusterID = n.ID, n.Name, n.ClusterID
			}
			if _, err := tx.AddEvent(ctx, e); err != nil {
				return err
			}
			obs = append(obs, Observation{Time: now, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message})
		}
		return nil
	})
	if err != nil {
		return n, err
	}
	c.moved.Add(1)
	c.observe(obs)
	if len(obs) > 0 {
		c.notify()
	}
	return n, nil
}

func (c *Controller) spec(n domain.Node) driver.NodeSpec {
	return driver.NodeSpec{
		ClusterID: n.ClusterID, NodeName: n.Name, MachineID: n.MachineID, Class: n.Class, GPUs: n.GPUs,
		Labels: map[string]string{
			domain.LabelComputeClass: string(n.Class),
			"sparecap.dev/machine":   n.MachineID,
			"sparecap.dev/node-id":   n.ID,
		},
	}
}

// stepPending starts a pending node whose machine has been vacated. The
// removal step normally does this in the same transaction; this covers a
// node that was planned onto a machine just as it was vacated.
func (c *Controller) stepPending(ctx context.Context, n domain.Node) error {
	_, err := c.transition(ctx, n.ID, domain.NodePending, func(tx store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
		busy, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: []domain.NodeState{domain.NodeProvisioning, domain.NodeReady, domain.NodeDraining, domain.NodeRemoving}})
		if err != nil {
			return nil, err
		}
		if len(busy) > 0 {
			return nil, errStale
		}
		n.State = domain.NodeProvisioning
		return nil, nil
	})
	return ignoreStale(err)
}

func ignoreStale(err error) error {
	if errors.Is(err, errStale) {
		return nil
	}
	return err
}

func (c *Controller) stepProvision(ctx context.Context, n domain.Node) error {
	m, err := c.store.GetMachine(ctx, n.MachineID)
	if err != nil {
		return fmt.Errorf("machine %s: %w", n.MachineID, err)
	}
	spec := c.spec(n)
	done, err := c.machines.Prepare(ctx, m, spec)
	if err != nil {
		return &providerError{domain.ReasonProvisionFailed, fmt.Errorf("prepare machine %s: %w", m.ID, err)}
	}
	if !done {
		return nil
	}
	if err := c.cluster.AddNode(ctx, spec); err != nil {
		if errors.Is(err, driver.ErrNotReady) {
			return nil // joined but not Ready: poll again
		}
		return fmt.Errorf("add node: %w", err)
	}
	_, err = c.transition(ctx, n.ID, domain.NodeProvisioning, func(_ store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State, n.ReadyAt = domain.NodeReady, now
		return []domain.Event{{Reason: domain.ReasonNodeAdded,
			Message: fmt.Sprintf("%s node %s (%d GPUs, machine %s) joined the cluster, labelled %s=%s", n.Class, n.Name, n.GPUs, n.MachineID, domain.LabelComputeClass, n.Class)}}, nil
	})
	return ignoreStale(err)
}

// stepDrain is the reclaim state machine's draining state.
func (c *Controller) stepDrain(ctx context.Context, n domain.Node) error {
	// Past the deadline the node goes whatever else failed: the notice is
	// skipped if it never got through.
	if !n.Notified && c.clock.Now().Before(n.Deadline) {
		if err := c.notice(ctx, n); err != nil {
			return err
		}
		var err error
		var notifiedAt time.Time
		n, err = c.transition(ctx, n.ID, domain.NodeDraining, func(_ store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.Notified, notifiedAt = true, now
			return nil, nil
		})
		if err != nil {
			return ignoreStale(err)
		}
		c.observeLocked(drainObservation(KindNoticeDelivered, n, notifiedAt))
	}
	pods, err := c.cluster.ListPods(ctx, n.ClusterID, n.Name)
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	now := c.clock.Now()
	// Grace periods are whole seconds rounded down, so a pod that ignores
	// SIGTERM is killed up to a second before the deadline: pods gone in
	// that last second were ended by the deadline, not by themselves.
	lastSecond := !now.Before(n.Deadline.Add(-time.Second))
	switch {
	case !now.Before(n.Deadline) || (len(pods) == 0 && lastSecond):
		if !n.Notified {
			// The notice never got through (the cluster's API was down):
			// the tenant still gets the Events saying why the node went.
			if err := c.postEvents(ctx, n, pods); err != nil {
				return err
			}
		}
		if err := c.deletePods(ctx, n, pods, func(driver.Pod) bool { return true }, time.Time{}); err != nil {
			return fmt.Errorf("force-delete pods: %w", err)
		}
		n, err = c.transition(ctx, n.ID, domain.NodeDraining, func(_ store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.State, n.DrainedAt, n.Outcome = domain.NodeRemoving, now, domain.OutcomeDeadline
			return nil, nil
		})
	case len(pods) == 0:
		n, err = c.transition(ctx, n.ID, domain.NodeDraining, func(_ store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.State, n.DrainedAt, n.Outcome = domain.NodeRemoving, now, domain.OutcomeEarly
			left := n.Deadline.Sub(now).Round(time.Second)
			return []domain.Event{{Reason: domain.ReasonNodeDrained, Deadline: n.Deadline,
				Message: fmt.Sprintf("all pods on %s exited %s after the notice, %s before the deadline", n.Name, now.Sub(n.DrainStartedAt).Round(time.Second), max(left, 0))}}, nil
		})
	case n.Notified && !slices.ContainsFunc(pods, isWorkload):
		// Only DaemonSet pods are left: their turn for SIGTERM.
		return c.deletePods(ctx, n, pods, isRunningDaemon, n.Deadline)
	default:
		return nil
	}
	if err != nil {
		return ignoreStale(err)
	}
	c.observeLocked(drainObservation(KindDrainFinished, n, n.DrainedAt))
	return c.stepRemove(ctx, n)
}

// notice applies the T+0 actions: cordon, taint, annotate the deadline
// (before any SIGTERM, so a pod can read it), SIGTERM to every workload
// pod at once, then the Event on the node and one on each of those pods
// (after the SIGTERMs: when fifty nodes are reclaimed at once, Events
// must not delay anyone's notice). DaemonSet pods are stopped later, once
// the workload is gone. Each call is idempotent and pods already
// terminating keep the grace they were given, so repeating the notice
// after a crash changes nothing already done. A node whose object is gone
// from its cluster has nothing left to notify.
func (c *Controller) notice(ctx context.Context, n domain.Node) error {
	err := c.mark(ctx, n)
	if errors.Is(err, domain.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	pods, err := c.cluster.ListPods(ctx, n.ClusterID, n.Name)
	if err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	if err := c.deletePods(ctx, n, pods, isRunningWorkload, n.Deadline); err != nil {
		return err
	}
	return c.postEvents(ctx, n, slices.DeleteFunc(pods, func(p driver.Pod) bool { return p.DaemonSet }))
}

func (c *Controller) mark(ctx context.Context, n domain.Node) error {
	taint := driver.Taint{Key: domain.TaintPreempted, Value: string(n.DrainCause), Effect: "NoSchedule"}
	return driver.MarkDraining(ctx, c.cluster, n.ClusterID, n.Name, taint,
		map[string]string{domain.AnnotationDeadline: n.Deadline.UTC().Format(time.RFC3339)})
}

// clusterEvent is the Kubernetes Event of a drain.
func clusterEvent(n domain.Node) driver.NodeEvent {
	reason, msg := drainMessage(n, n.DrainCause)
	typ := "Warning"
	if n.DrainCause.TenantInitiated() {
		typ = "Normal"
	}
	return driver.NodeEvent{Type: typ, Reason: string(reason), Message: msg + "; deadline " + n.Deadline.UTC().Format(time.RFC3339)}
}

func (c *Controller) postNodeEvent(ctx context.Context, n domain.Node) error {
	if err := c.cluster.PostEvent(ctx, n.ClusterID, n.Name, clusterEvent(n)); err != nil {
		return fmt.Errorf("post event: %w", err)
	}
	return nil
}

// postEvents posts the node's Event and one on each pod; a node already
// gone from its cluster takes none.
func (c *Controller) postEvents(ctx context.Context, n domain.Node, pods []driver.Pod) error {
	if err := c.postNodeEvent(ctx, n); err != nil && !errors.Is(err, domain.ErrNotFound) {
		return err
	}
	return c.postPodEvents(ctx, n, pods)
}

// podCalls bounds the concurrent calls for one node's pods.
const podCalls = 16

func (c *Controller) postPodEvents(ctx context.Context, n domain.Node, pods []driver.Pod) error {
	e := clusterEvent(n)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(podCalls)
	for _, p := range pods {
		g.Go(func() error {
			err := c.cluster.PostPodEvent(gctx, n.ClusterID, n.Name, p, e)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("post event on pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// deletePods deletes the pods that match, all at once, each to be gone by
// by (zero: force): grace driver.GraceBy, which Kubernetes counts in whole
// seconds, rounded down so the pod's end is at or before the deadline.
// Drivers that can read the clock at the moment they act do so
// (driver.DeadlineDeleter), so time spent waiting for a turn never
// stretches a pod past the deadline.
func (c *Controller) deletePods(ctx context.Context, n domain.Node, pods []driver.Pod, match func(driver.Pod) bool, by time.Time) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(podCalls)
	for _, p := range pods {
		if !match(p) {
			continue
		}
		g.Go(func() error {
			if err := driver.DeletePodBy(gctx, c.cluster, n.ClusterID, n.Name, p, by, c.clock.Now); err != nil {
				return fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			return nil
		})
	}
	return g.Wait()
}

func isWorkload(p driver.Pod) bool        { return !p.DaemonSet }
func isRunningWorkload(p driver.Pod) bool { return !p.DaemonSet && !p.Terminating }
func isRunningDaemon(p driver.Pod) bool   { return p.DaemonSet && !p.Terminating }

// stepRemove deletes the node object, wipes the machine, and hands the
// machine to whoever waits for it.
func (c *Controller) stepRemove(ctx context.Context, n domain.Node) error {
	if n.RemovedAt.IsZero() {
		if err := c.cluster.DeleteNode(ctx, n.ClusterID, n.Name); err != nil {
			return fmt.Errorf("delete node: %w", err)
		}
		var err error
		n, err = c.transition(ctx, n.ID, domain.NodeRemoving, func(_ store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.RemovedAt = now
			return []domain.Event{{Reason: domain.ReasonNodeRemoved, Message: removedMessage(*n, now)}}, nil
		})
		if err != nil {
			return ignoreStale(err)
		}
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
	_, err = c.transition(ctx, n.ID, domain.NodeRemoving, func(tx store.Tx, n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.State = domain.NodeRemoved
		waiting, err := tx.ListNodes(ctx, store.NodeFilter{MachineID: n.MachineID, States: []domain.NodeState{domain.NodePending}})
		if err != nil {
			return nil, err
		}
		for _, w := range waiting {
			w.State = domain.NodeProvisioning
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

func removedMessage(n domain.Node, now time.Time) string {
	switch {
	case n.ReadyAt.IsZero():
		return fmt.Sprintf("node %s was removed before it joined the cluster", n.Name)
	case n.Outcome == domain.OutcomeDeadline:
		return fmt.Sprintf("node %s was removed at the deadline; pods still running were force-deleted", n.Name)
	case n.Outcome == domain.OutcomeEarly:
		return fmt.Sprintf("node %s was removed %s after the notice, before the deadline", n.Name, now.Sub(n.DrainStartedAt).Round(time.Second))
	}
	return fmt.Sprintf("node %s was removed", n.Name)
}

// finishDeletions marks deleted clusters whose nodes are all removed as
// gone.
func (c *Controller) finishDeletions(ctx context.Context) error {
	clusters, err := c.store.ListClusters(ctx, "")
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	for _, cl := range clusters {
		if !cl.Deleting {
			continue
		}
		c.mu.Lock()
		gone := false
		err := c.store.Update(ctx, func(tx store.Tx) error {
			nodes, err := tx.ListNodes(ctx, store.NodeFilter{ClusterID: cl.ID})
			if err != nil || len(nodes) > 0 {
				return err
			}
			cur, err := tx.GetCluster(ctx, cl.ID)
			if err != nil {
				return err
			}
			cur.DeletedAt, gone = c.clock.Now(), true
			return tx.UpdateCluster(ctx, cur)
		})
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("finish deleting cluster %s: %w", cl.ID, err)
		}
		if gone && c.OnClusterGone != nil {
			c.OnClusterGone(cl.ID)
		}
	}
	return nil
}
