package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/reclaim"
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
// Overdue work does not shorten the sleep: a node whose step failed waits
// for its backoff (retryAt), one whose step is still running kicks the
// loop when it ends, and nothing else is ever overdue, because the
// deadline step needs no answer from the tenant's cluster.
func nextWait(next, now time.Time, interval time.Duration) time.Duration {
	if next.IsZero() {
		return interval
	}
	d := next.Sub(now)
	if d <= 0 {
		return interval
	}
	return min(d, interval)
}

// inFlight are the node states the step machine moves on.
var inFlight = []domain.NodeState{domain.NodePending, domain.NodeProvisioning, domain.NodeDraining, domain.NodeRemoving}

// Reconcile runs one pass and waits for every node step it started: plan
// and commit what changed, step every node in flight (concurrently, up to
// Config.Workers at a time), clean up what removed nodes left in their
// clusters, check ready nodes for loss, finish deleted clusters, prune
// old events and archive old removed nodes. It returns the earliest time
// something is due (a drain deadline, a registration timeout, a cooldown
// end, a retry), or zero.
func (c *Controller) Reconcile(ctx context.Context) (time.Time, error) {
	return c.pass(ctx, true)
}

// pass is Reconcile; with wait false it returns without waiting for the
// node steps it started. A node whose step is still running from an
// earlier pass is left to it, and a step that finishes kicks the loop, so
// the next pass sees what it changed.
func (c *Controller) pass(ctx context.Context, wait bool) (time.Time, error) {
	if err := c.recordAccess(ctx); err != nil {
		c.log.Warn("cannot record what a cluster's permission check found", "err", err)
	}
	if err := c.recordNotes(ctx); err != nil {
		c.log.Warn("cannot record a driver's note", "err", err)
	}
	pl, err := c.replan(ctx)
	if err != nil {
		return time.Time{}, err
	}
	now := c.clock.Now()
	w := &wake{now: now, next: pl.NextWake}
	moved := c.moved.Load()
	r := &stepRun{c: c, ctx: ctx, wait: wait}
	if err := c.startSteps(r, now, w); err != nil {
		return time.Time{}, err
	}
	var errs []error
	if err := c.sweepIfDue(ctx, now); err != nil {
		errs = append(errs, err)
	}
	w.earlier(c.lostDue)
	errs = append(errs, r.done()...)
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
			w.earlier(pl.NextWake)
		}
	}
	if err := c.pruneIfDue(ctx); err != nil {
		errs = append(errs, err)
	}
	return w.next, errors.Join(errs...)
}

// wake is the earliest time something is due, as a pass works it out.
type wake struct {
	now, next time.Time
}

// earlier makes t the wake-up if it comes first. Only the future counts:
// see nextWait.
func (w *wake) earlier(t time.Time) {
	if t.After(w.now) && (w.next.IsZero() || t.Before(w.next)) {
		w.next = t
	}
}

// startSteps starts the step of every node in flight and the cleanup of
// every removed node whose cleanup is pending, each when reclaim.When
// says it is due, and notes when the loop must wake for them in w.
func (c *Controller) startSteps(r *stepRun, now time.Time, w *wake) error {
	ctx := r.ctx
	nodes, err := c.nodesInFlight(ctx)
	if err != nil {
		return fmt.Errorf("list nodes in flight: %w", err)
	}
	cleanups, err := c.store.ListNodes(ctx, store.NodeFilter{CleanupPending: true, IncludeRemoved: true})
	if err != nil {
		return fmt.Errorf("list nodes to clean up: %w", err)
	}
	var active map[string]bool // built only when a node is pending
	if slices.ContainsFunc(nodes, func(n domain.Node) bool { return n.State == domain.NodePending }) {
		if active, err = c.activeMachines(ctx); err != nil {
			return err
		}
	}
	provisioning := 0
	for _, n := range nodes {
		switch n.State {
		case domain.NodeProvisioning:
			provisioning++
		case domain.NodePending:
			if active[n.MachineID] {
				// Its machine is still being vacated: the step would find
				// that in a transaction of its own. The removal that frees
				// the machine starts the node (and kicks the loop).
				continue
			}
		}
		due := reclaim.When(n, c.registerBy(n), c.backoff.Retry(n.ID))
		w.earlier(due.Wake)
		r.start(n.ID, n, due, now, w, c.step)
	}
	for _, n := range cleanups {
		key := reclaim.CleanupKey(n.ID)
		r.start(key, n, reclaim.WhenCleanup(c.backoff.Retry(key)), now, w, c.reclaim.Cleanup)
	}
	c.preparing.prune(nodes, provisioning)
	return nil
}

// sweepIfDue checks ready nodes for loss when a node watch asked for it,
// when the backstop's time has come, or when a node seen not Ready
// reaches Config.NodeLostAfter.
func (c *Controller) sweepIfDue(ctx context.Context, now time.Time) error {
	if !c.sweepNow.Swap(false) && now.Sub(c.lastSweep) < c.cfg.SweepEvery && (c.lostDue.IsZero() || now.Before(c.lostDue)) {
		return nil
	}
	due, err := c.reclaim.Sweep(ctx)
	c.lostDue, c.lastSweep = due, now
	return err
}

// pruneIfDue prunes old events and archives old removed nodes, once a
// minute.
func (c *Controller) pruneIfDue(ctx context.Context) error {
	now := c.clock.Now()
	if now.Sub(c.lastPrune) < time.Minute {
		return nil
	}
	err := c.store.Update(ctx, func(tx store.Tx) error {
		_, err := tx.PruneEvents(ctx, now.Add(-c.cfg.EventRetention))
		return err
	})
	if err == nil {
		_, err = c.archive(ctx, now.Add(-c.cfg.EventRetention))
	}
	if err != nil {
		return fmt.Errorf("prune events and archive nodes: %w", err)
	}
	c.lastPrune = now
	return nil
}

// stepRun is the node steps one pass starts.
type stepRun struct {
	c    *Controller
	ctx  context.Context
	wait bool // the caller waits for them (Reconcile)
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

// start runs f for the work key in the background (or inline, see
// below) in due's pool, unless its backoff says later or a run for key is
// going on.
func (r *stepRun) start(key string, n domain.Node, due reclaim.Due, now time.Time, w *wake, f func(context.Context, domain.Node) error) {
	c := r.c
	if now.Before(due.NotBefore) {
		w.earlier(due.NotBefore)
		return
	}
	if !c.claim(key) {
		return
	}
	r.wg.Add(1)
	c.steps.Add(1)
	body := func() {
		defer c.steps.Done()
		defer r.wg.Done()
		defer c.release(key)
		r.finish(key, n, r.run(c.pool(due.Pool), n, f))
	}
	if r.wait && c.cfg.Workers == 1 {
		// One worker and a caller that waits: step in order, on this
		// goroutine, so a test's sequence of driver calls repeats.
		body()
		return
	}
	go body()
}

// errCancelled: the step did not run, or ran into the end of the loop.
var errCancelled = errors.New("cancelled")

// run runs f on n once a token of pool is free.
func (r *stepRun) run(pool chan struct{}, n domain.Node, f func(context.Context, domain.Node) error) stepResult {
	c := r.c
	select {
	case pool <- struct{}{}:
	case <-r.ctx.Done():
		return stepResult{err: errCancelled}
	}
	defer func() { <-pool }()
	moved := c.moved.Load()
	err := f(r.ctx, n)
	if r.ctx.Err() != nil {
		return stepResult{err: errCancelled}
	}
	return stepResult{err: err, moved: c.moved.Load() != moved}
}

type stepResult struct {
	err   error
	moved bool // some node moved while it ran
}

// finish records a step's outcome: its backoff and last error, and, for a
// background step, the log and a wake-up of the loop (a step that moved
// no node, a drain waiting for its pods, does not wake it: the next pass
// comes at the interval, or when pods go).
func (r *stepRun) finish(key string, n domain.Node, res stepResult) {
	c := r.c
	if errors.Is(res.err, errCancelled) {
		return
	}
	if res.err != nil {
		c.backoff.Fail(key, c.clock.Now(), res.err)
		c.noteError(r.ctx, n, res.err)
	} else {
		c.backoff.OK(key)
		c.clearError(r.ctx, n)
	}
	if r.wait {
		if res.err != nil {
			r.mu.Lock()
			r.errs = append(r.errs, res.err)
			r.mu.Unlock()
		}
		return
	}
	if res.err != nil {
		c.log.Warn("node step failed; retrying with backoff", "err", res.err)
	}
	if res.err != nil || res.moved {
		c.Kick()
	}
}

// done waits for the steps when the caller does, and returns their
// errors.
func (r *stepRun) done() []error {
	if !r.wait {
		return nil
	}
	r.wg.Wait()
	return r.errs
}

// pool is the token pool of p.
func (c *Controller) pool(p reclaim.Pool) chan struct{} {
	if p == reclaim.Notices {
		return c.notices
	}
	return c.workers
}

// nodesInFlight lists the nodes the step machine moves on: from the
// leader's in-memory copy when it is loaded (it holds the live nodes in
// the store's order), else from the store.
func (c *Controller) nodesInFlight(ctx context.Context) ([]domain.Node, error) {
	if s, ok := store.LoadedSnapshot(c.store); ok {
		// Worked out once per version of the copy: a settled fleet's
		// passes (ten a wall second) do not walk every node.
		if f := c.inFlight.Load(); f != nil && store.Same(f.of, s.Nodes) {
			return f.nodes, nil
		}
		var out []domain.Node
		for _, n := range s.Nodes {
			if slices.Contains(inFlight, n.State) {
				out = append(out, *n)
			}
		}
		c.inFlight.Store(&inFlightNodes{of: s.Nodes, nodes: out})
		return out, nil
	}
	return c.store.ListNodes(ctx, store.NodeFilter{States: inFlight})
}

// inFlightNodes are the nodes in flight of a version of the in-memory
// copy's nodes (of); callers must not modify them.
type inFlightNodes struct {
	of    []*domain.Node
	nodes []domain.Node
}

// finishDeletions marks deleted clusters whose nodes are all removed as
// gone.
func (c *Controller) finishDeletions(ctx context.Context) error {
	// The snapshot (in memory on the leader) lists the same clusters as
	// ListClusters without a query per pass.
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("list clusters: %w", err)
	}
	for i := range s.Clusters {
		cl := &s.Clusters[i] // not a copy of every cluster on every pass
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
