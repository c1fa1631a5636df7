package reclaim

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
)

// drainStep is the draining state's step.
//
// Before the deadline it keeps the drain's promises on a cluster that may
// misbehave: the marks are applied again whenever someone removed them;
// every unit of the workload gets its notice with grace to the deadline,
// work that arrived after T+0 included; work already stopping whose grace
// would run past the deadline is notified again with less; support work
// (DaemonSet pods) gets its notice once the workload is gone. The step's
// calls are cut off at the deadline, so a cluster that hangs never holds
// the node past it. Once every unit of work had its notice, Notified is
// stored; once none is left, the drain ends early (endDrain).
//
// At the deadline nothing is asked of the cluster: the node is removed and
// its machine taken back (endDrain).
func (m *Machine) drainStep(ctx context.Context, n domain.Node) (domain.Node, error) {
	if !m.clock.Now().Before(n.Deadline) {
		return m.endDrain(ctx, n, domain.OutcomeDeadline)
	}
	dctx, cancel := m.until(ctx, n.Deadline)
	defer cancel()
	work, err := m.drain(dctx, n)
	if err != nil {
		if !m.clock.Now().Before(n.Deadline) {
			return m.endDrain(ctx, n, domain.OutcomeDeadline)
		}
		return n, err
	}
	if !n.Notified {
		if n, err = m.notified(ctx, n); err != nil {
			return n, IgnoreStale(err)
		}
	}
	m.noteCheckpoint(ctx, n)
	if len(work) > 0 {
		return n, nil
	}
	// Grace periods are whole seconds rounded down, so work that ignores
	// its notice is killed up to a second before the deadline: work gone
	// in that last second was ended by the deadline, not by itself.
	if !m.clock.Now().Before(n.Deadline.Add(-time.Second)) {
		return m.endDrain(ctx, n, domain.OutcomeDeadline)
	}
	return m.endDrain(ctx, n, domain.OutcomeEarly)
}

// noteCheckpoint records, once, a checkpoint the node's work reported
// after its notice (the driver's Load, from what it watches): the work
// the ledger put at risk at the notice was saved, not lost. It comes
// after the notices, and is a courtesy: a failed write is logged and
// tried again on the next pass.
func (m *Machine) noteCheckpoint(ctx context.Context, n domain.Node) {
	if n.DrainStartedAt.IsZero() {
		return
	}
	if _, done := m.saved.Load(n.ID); done {
		return
	}
	// Checkpoints are reported to the second (RFC 3339): one in the
	// notice's second counts as after it.
	l := m.cluster.Load(n.ClusterID, n.Name)
	if !l.Known || l.LastCheckpoint.Before(n.DrainStartedAt.Truncate(time.Second)) {
		return
	}
	// Bounded: at a drain's end it goes before the machine's return, and a
	// store that does not answer must not hold the node.
	sctx, cancel := context.WithTimeout(ctx, saveWorkWait)
	defer cancel()
	if err := m.port.SaveWork(sctx, n.ID, l.LastCheckpoint); err != nil {
		m.log.Warn("record a checkpoint within a notice", "node", n.Name, "err", err)
		return
	}
	m.saved.Store(n.ID, true)
}

// saveWorkWait bounds noteCheckpoint's write.
const saveWorkWait = time.Second

// notified stores that every unit of work on n had its notice.
func (m *Machine) notified(ctx context.Context, n domain.Node) (domain.Node, error) {
	var at time.Time
	n, err := m.port.Transition(ctx, n.ID, domain.NodeDraining, func(n *domain.Node, now time.Time) ([]domain.Event, error) {
		n.Notified, at = true, now
		return nil, nil
	})
	if err == nil && !n.ReadyAt.IsZero() {
		m.port.Observe(DrainObservation(KindNoticeDelivered, n, at))
	}
	return n, err
}

// courtesyWait is the longest the notice waits for a courtesy that goes
// before it (a drain's marks).
const courtesyWait = time.Second

// drain does the draining node's work in its cluster (see drainStep) and
// returns the work still on it, as listed before this pass's notices.
// Every call is idempotent, so a pass after a crash repeats nothing that
// was done: work already stopping within the deadline is left alone, and
// notices are named after their content.
//
// Only the notices to the work (its SIGTERM) are essential: an error there
// fails the step, which is retried. The marks and the notices the tenant
// reads are courtesies: refused or failed, they are logged (the driver
// reports a refusal once per cluster) and never keep work from its notice
// or the node from its early release. The marks go first, so the cluster
// places nothing new on the node; until the notice is out they may take
// at most courtesyWait, and are tried again on the next pass if they took
// longer.
func (m *Machine) drain(ctx context.Context, n domain.Node) ([]driver.Work, error) {
	markErr := m.mark(ctx, n)
	work, err := m.cluster.ListWork(ctx, n.ClusterID, n.Name)
	if err != nil {
		return nil, fmt.Errorf("list work: %w", err)
	}
	// The workload first; support work (log shippers, device plugins) once
	// the workload is gone.
	support := !slices.ContainsFunc(work, isWorkload)
	turn := func(w driver.Work) bool { return w.Support == support }
	due := func(w driver.Work) bool {
		return turn(w) && (!w.Stopping || w.KillAt.After(n.Deadline))
	}
	if err := m.notifyWork(ctx, n, work, due, n.Deadline); err != nil {
		return nil, err
	}
	// The node may be gone from its cluster (it never joined, or someone
	// deleted it): nothing to mark or post a notice on, but work the
	// cluster still binds to it got its notice all the same.
	gone := false
	if markErr != nil {
		gone = errors.Is(markErr, domain.ErrNotFound)
		if !gone {
			m.courtesyFailed(n, "mark the node draining", markErr)
		}
	}
	// Notices explain the drain: on the node once, and on each unit of
	// work that got its notice now (on every one of the workload until the
	// notice is recorded, in case a crash came between the two).
	told := slices.DeleteFunc(slices.Clone(work), func(w driver.Work) bool {
		if !n.Notified && !w.Support {
			return false
		}
		return !turn(w) || w.Stopping
	})
	if !n.Notified && !gone {
		if err := m.cluster.PostNotice(ctx, n.ClusterID, n.Name, nil, clusterNotice(n)); err != nil && !errors.Is(err, domain.ErrNotFound) {
			m.courtesyFailed(n, "post the drain's notice on the node", err)
		}
	}
	m.postWorkNotices(ctx, n, told)
	return work, nil
}

// mark applies the node's marks: bounded by courtesyWait until the notice
// is out.
func (m *Machine) mark(ctx context.Context, n domain.Node) error {
	if !n.Notified {
		var cancel context.CancelFunc
		ctx, cancel = m.until(ctx, m.clock.Now().Add(courtesyWait))
		defer cancel()
	}
	return m.cluster.MarkDraining(ctx, n.ClusterID, n.Name, driver.Marks{Cause: n.DrainCause, Deadline: n.Deadline})
}

// courtesyFailed logs a courtesy that failed: a refusal the driver has
// reported (once per cluster) at debug level, anything else as a warning.
func (m *Machine) courtesyFailed(n domain.Node, what string, err error) {
	log := m.log.Warn
	if errors.Is(err, driver.ErrRefused) {
		log = m.log.Debug
	}
	log("a courtesy failed; the notice goes on without it", "what", what, "node", n.Name, "cluster", n.ClusterID, "err", err)
}

// workCalls bounds the concurrent calls for one node's work.
const workCalls = 16

// postWorkNotices posts the drain's notice on each unit of work, a
// courtesy: a failure is logged, once for the node.
func (m *Machine) postWorkNotices(ctx context.Context, n domain.Node, work []driver.Work) {
	e := clusterNotice(n)
	var g errgroup.Group
	g.SetLimit(workCalls)
	for _, w := range work {
		g.Go(func() error {
			err := m.cluster.PostNotice(ctx, n.ClusterID, n.Name, &w, e)
			if err != nil && !errors.Is(err, domain.ErrNotFound) {
				return fmt.Errorf("%s/%s: %w", w.Namespace, w.Name, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		m.courtesyFailed(n, "post the drain's notice on its work", err)
	}
}

// notifyWork gives the work that matches its notice, all at once, each to
// be gone by by (zero: at once): the driver works out the grace
// (driver.GraceBy) as it acts, so time spent waiting for a turn never
// stretches work past the deadline. One unit's failure never holds back
// another's notice: every notice is sent, and the errors are returned
// together.
func (m *Machine) notifyWork(ctx context.Context, n domain.Node, work []driver.Work, match func(driver.Work) bool, by time.Time) error {
	var (
		g    errgroup.Group
		mu   sync.Mutex
		errs []error
	)
	g.SetLimit(workCalls)
	for _, w := range work {
		if !match(w) {
			continue
		}
		g.Go(func() error {
			if err := m.cluster.Notify(ctx, n.ClusterID, n.Name, w, by); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("notify %s/%s: %w", w.Namespace, w.Name, err))
				mu.Unlock()
			}
			return nil
		})
	}
	g.Wait()
	return errors.Join(errs...)
}

func isWorkload(w driver.Work) bool { return !w.Support }
