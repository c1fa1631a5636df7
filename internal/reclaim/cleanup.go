package reclaim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// cleanup is what deleting a removed node's objects from its cluster did.
type cleanup struct {
	// pods force-deleted; -1 when they could not be listed.
	pods int
	err  error
}

// errNotTried: cleanup has not been tried yet.
var errNotTried = errors.New("not tried yet")

// tryCleanUp cleans up for at most Config.CleanupBudget.
func (m *Machine) tryCleanUp(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) cleanup {
	if !m.port.Claim(CleanupKey(n.ID)) {
		return cleanup{pods: -1, err: errNotTried} // the background cleanup is at it
	}
	defer m.port.Release(CleanupKey(n.ID))
	ctx, cancel := context.WithTimeout(ctx, m.cfg.CleanupBudget)
	defer cancel()
	return m.cleanUp(ctx, n, outcome)
}

// cleanUp deletes what node n leaves in its cluster once its machine is
// taken back: pods still bound to it are force-deleted (with their
// disruption condition, where the driver sets one), then the Node object
// (whether or not every pod could be deleted: the cluster's pod garbage
// collector deletes pods bound to a Node that is gone), then Kubernetes
// Events say how the node went, a courtesy that never keeps the cleanup
// pending. Every call is idempotent.
func (m *Machine) cleanUp(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) cleanup {
	pods, err := m.cluster.ListWork(ctx, n.ClusterID, n.Name)
	if err != nil {
		return cleanup{pods: -1, err: fmt.Errorf("list pods: %w", err)}
	}
	var errs []error
	if err := m.notifyWork(ctx, n, pods, func(driver.Work) bool { return true }, time.Time{}); err != nil {
		errs = append(errs, fmt.Errorf("force-delete pods: %w", err))
	}
	if err := m.cluster.Release(ctx, n.ClusterID, n.Name); err != nil {
		errs = append(errs, fmt.Errorf("delete node: %w", err))
	}
	if len(errs) > 0 {
		return cleanup{pods: len(pods), err: errors.Join(errs...)}
	}
	for _, e := range endEvents(n, outcome, len(pods)) {
		if err := m.cluster.PostNotice(ctx, n.ClusterID, n.Name, nil, e); err != nil && !errors.Is(err, domain.ErrNotFound) {
			m.courtesyFailed(n, "post the notices of its removal", err)
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

// Cleanup retries the cleanup of a removed node whose cluster did not
// answer in time, with backoff (the controller's), until it answers. A
// cluster deleted meanwhile has nothing left to clean (its credentials are
// gone with it). It runs under CleanupKey, apart from the node's steps;
// n is the node as stored, read just before.
func (m *Machine) Cleanup(ctx context.Context, n domain.Node) error {
	if !n.CleanupPending {
		return nil
	}
	gone, err := m.port.ClusterGone(ctx, n.ClusterID)
	if err != nil {
		return err
	}
	res := cleanup{pods: -1}
	if !gone {
		if res = m.cleanUp(ctx, n, n.Outcome); res.err != nil {
			return &ClusterError{fmt.Errorf("clean up the cluster: %w", res.err)}
		}
	}
	_, err = m.port.Transition(ctx, n.ID, AnyState, func(n *domain.Node, now time.Time) ([]domain.Event, error) {
		if !n.CleanupPending {
			return nil, ErrStale
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
	return IgnoreStale(err)
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
