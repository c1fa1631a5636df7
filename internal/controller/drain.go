package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/store"
)

// stepDrain is the reclaim state machine's draining state.
//
// Before the deadline it keeps the drain's promises on a cluster that may
// misbehave: the marks (cordon, taint, deadline annotation) are applied
// again whenever someone removed them; every workload pod gets its SIGTERM
// with grace to the deadline, pods that arrived after T+0 included; a
// terminating pod whose grace would run past the deadline is deleted again
// with less; DaemonSet pods get theirs once the workload is gone. The
// step's calls are cut off at the deadline, so an API that hangs never
// holds the node past it.
//
// At the deadline nothing is asked of the cluster: the node is removed and
// its machine taken back (endDrain). Whatever the cluster still holds (the
// Node object, pods left on it) is cleanup, which never holds the machine.
func (c *Controller) stepDrain(ctx context.Context, n domain.Node) error {
	if !c.clock.Now().Before(n.Deadline) {
		return c.endDrain(ctx, n, domain.OutcomeDeadline)
	}
	dctx, cancel := c.until(ctx, n.Deadline)
	defer cancel()
	pods, err := c.drain(dctx, n)
	if err != nil {
		if !c.clock.Now().Before(n.Deadline) {
			return c.endDrain(ctx, n, domain.OutcomeDeadline)
		}
		return err
	}
	if !n.Notified {
		var notifiedAt time.Time
		n, err = c.transition(ctx, n.ID, domain.NodeDraining, func(_ func() (store.Tx, error), n *domain.Node, now time.Time) ([]domain.Event, error) {
			n.Notified, notifiedAt = true, now
			return nil, nil
		})
		if err != nil {
			return ignoreStale(err)
		}
		if !n.ReadyAt.IsZero() {
			c.observeLocked(drainObservation(KindNoticeDelivered, n, notifiedAt))
		}
	}
	if len(pods) > 0 {
		return nil
	}
	// Grace periods are whole seconds rounded down, so a pod that ignores
	// SIGTERM is killed up to a second before the deadline: pods gone in
	// that last second were ended by the deadline, not by themselves.
	if !c.clock.Now().Before(n.Deadline.Add(-time.Second)) {
		return c.endDrain(ctx, n, domain.OutcomeDeadline)
	}
	return c.endDrain(ctx, n, domain.OutcomeEarly)
}

// until returns ctx cancelled once the controller's clock reaches t (at
// once if it has).
func (c *Controller) until(ctx context.Context, t time.Time) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	d := t.Sub(c.clock.Now())
	if d <= 0 {
		cancel()
		return ctx, cancel
	}
	ch := c.clock.After(d)
	go func() {
		select {
		case <-ch:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// drain does the draining node's work in its cluster (see stepDrain) and
// returns the pods still on it, as listed before this pass's deletions.
// Every call is idempotent, so a pass after a crash repeats nothing that
// was done: pods already terminating within the deadline are left alone,
// and Events are named after their content.
//
// Only the pods' deletions (their SIGTERM) are essential: an error there
// fails the step, which is retried. The marks and the Events are
// courtesies (see courtesy): refused or failed, they are logged (and the
// driver reports a refusal once per cluster) and never keep a pod from its
// notice or the node from its early release. The marks go first, so the
// scheduler places nothing new on the node; until the notice is out they
// may take at most courtesyWait, and are tried again on the next pass if
// they took longer.
func (c *Controller) drain(ctx context.Context, n domain.Node) ([]driver.Work, error) {
	mctx, cancel := ctx, context.CancelFunc(func() {})
	if !n.Notified {
		mctx, cancel = c.until(ctx, c.clock.Now().Add(courtesyWait))
	}
	markErr := c.mark(mctx, n)
	cancel()
	pods, err := c.cluster.ListWork(ctx, n.ClusterID, n.Name)
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	// Workload pods first; DaemonSet pods (log shippers, device plugins)
	// once the workload is gone.
	daemons := !slices.ContainsFunc(pods, isWorkload)
	turn := func(p driver.Work) bool { return p.Support == daemons }
	signal := func(p driver.Work) bool {
		return turn(p) && (!p.Stopping || p.KillAt.After(n.Deadline))
	}
	if err := c.deletePods(ctx, n, pods, signal, n.Deadline); err != nil {
		return nil, err
	}
	// The Node object may be gone (it never joined, or someone deleted
	// it): nothing to mark or post an Event on, but pods the cluster still
	// binds to it got their notice all the same.
	gone := false
	if markErr != nil {
		gone = errors.Is(markErr, domain.ErrNotFound)
		if !gone {
			c.courtesyFailed(n, "mark the node draining", markErr)
		}
	}
	// Events explain the notice: on the node once, and on each pod that
	// got its SIGTERM now (on every workload pod until the notice is
	// recorded, in case a crash came between SIGTERMs and Events).
	told := slices.DeleteFunc(slices.Clone(pods), func(p driver.Work) bool {
		if !n.Notified && !p.Support {
			return false
		}
		return !turn(p) || p.Stopping
	})
	if !n.Notified && !gone {
		if err := c.postNodeEvent(ctx, n, clusterEvent(n)); err != nil && !errors.Is(err, domain.ErrNotFound) {
			c.courtesyFailed(n, "post the notice's Event", err)
		}
	}
	c.postPodEvents(ctx, n, told)
	return pods, nil
}

// courtesyWait is the longest the notice waits for a courtesy that goes
// before it (a drain's marks).
const courtesyWait = time.Second

// courtesyFailed logs a courtesy that failed: a refusal the driver has
// reported (once per cluster) at debug level, anything else as a warning.
func (c *Controller) courtesyFailed(n domain.Node, what string, err error) {
	log := c.log.Warn
	if errors.Is(err, driver.ErrRefused) {
		log = c.log.Debug
	}
	log("a courtesy failed; the notice goes on without it", "what", what, "node", n.Name, "cluster", n.ClusterID, "err", err)
}

func (c *Controller) mark(ctx context.Context, n domain.Node) error {
	return c.cluster.MarkDraining(ctx, n.ClusterID, n.Name, driver.Marks{Cause: n.DrainCause, Deadline: n.Deadline})
}

// clusterEvent is the Kubernetes Event of a drain's notice.
func clusterEvent(n domain.Node) driver.Notice {
	reason, msg := drainMessage(n, n.DrainCause)
	return driver.Notice{Warning: !n.DrainCause.TenantInitiated(), Reason: string(reason), Message: msg + "; deadline " + n.Deadline.UTC().Format(time.RFC3339)}
}

func (c *Controller) postNodeEvent(ctx context.Context, n domain.Node, e driver.Notice) error {
	if err := c.cluster.PostNotice(ctx, n.ClusterID, n.Name, nil, e); err != nil {
		return fmt.Errorf("post event: %w", err)
	}
	return nil
}

// podCalls bounds the concurrent calls for one node's pods.
const podCalls = 16

// postPodEvents posts the notice's Event on each pod, a courtesy: a
// failure is logged, once for the node.
func (c *Controller) postPodEvents(ctx context.Context, n domain.Node, pods []driver.Work) {
	e := clusterEvent(n)
	var g errgroup.Group
	g.SetLimit(podCalls)
	for _, p := range pods {
		g.Go(func() error {
			err := c.cluster.PostNotice(ctx, n.ClusterID, n.Name, &p, e)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		c.courtesyFailed(n, "post the notice's Events on pods", err)
	}
}

// deletePods deletes the pods that match, all at once, each to be gone by
// by (zero: force): grace driver.GraceBy, which Kubernetes counts in whole
// seconds, rounded down so the pod's end is at or before the deadline.
// Drivers that can read the clock at the moment they act do so
// (driver.DeadlineDeleter), so time spent waiting for a turn never
// stretches a pod past the deadline.
//
// One pod's failure never holds back another's notice: every deletion is
// made, and the errors are returned together.
func (c *Controller) deletePods(ctx context.Context, n domain.Node, pods []driver.Work, match func(driver.Work) bool, by time.Time) error {
	var (
		g    errgroup.Group
		mu   sync.Mutex
		errs []error
	)
	g.SetLimit(podCalls)
	for _, p := range pods {
		if !match(p) {
			continue
		}
		g.Go(func() error {
			if err := c.cluster.Notify(ctx, n.ClusterID, n.Name, p, by); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("delete pod %s/%s: %w", p.Namespace, p.Name, err))
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return errors.Join(errs...)
}

func isWorkload(p driver.Work) bool { return !p.Support }

// endDrain ends node n's drain with outcome: the node is removed and its
// machine taken back now. Deleting what the node leaves in its cluster
// (pods still there, the Node object) is tried first, for at most
// Config.CleanupBudget; if the cluster's API does not answer in time, the
// node is removed all the same, with its cleanup pending, retried in the
// background (stepCleanup).
func (c *Controller) endDrain(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) error {
	at := c.clock.Now()
	res := c.tryCleanUp(ctx, n, outcome)
	n, err := c.transition(ctx, n.ID, domain.NodeDraining, func(_ func() (store.Tx, error), n *domain.Node, _ time.Time) ([]domain.Event, error) {
		n.State, n.DrainedAt, n.Outcome, n.RemovedAt = domain.NodeRemoving, at, outcome, at
		n.CleanupPending = res.err != nil
		var evs []domain.Event
		if outcome == domain.OutcomeEarly {
			left := n.Deadline.Sub(at).Round(time.Second)
			evs = append(evs, domain.Event{Reason: domain.ReasonNodeDrained, Deadline: n.Deadline, Timestamp: at,
				Message: fmt.Sprintf("all pods on %s exited %s after the notice, %s before the deadline", n.Name, at.Sub(n.DrainStartedAt).Round(time.Second), max(left, 0))})
		}
		// Stamped with the removal (where billing stops), not with the end
		// of the cleanup attempt, which may take up to CleanupBudget.
		evs = append(evs, domain.Event{Reason: domain.ReasonNodeRemoved, Timestamp: at, Message: removedMessage(*n, at, res)})
		return evs, nil
	})
	if err != nil {
		return ignoreStale(err)
	}
	if !n.ReadyAt.IsZero() {
		c.observeLocked(drainObservation(KindDrainFinished, n, n.DrainedAt))
	}
	return c.stepRemove(ctx, n)
}
