package lifecycle

import (
	"errors"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// A cleanup deletes what a removed node leaves in its cluster once its
// machine is taken back: pods still bound to it are force-deleted (with
// their disruption condition, where the driver sets one), then the node
// itself (whether or not every pod could be deleted: the cluster's pod
// garbage collector deletes pods bound to a node that is gone), then
// notices say how the node went, a courtesy that never keeps the cleanup
// pending. Every call is idempotent. It runs in rounds: list, end and
// release, tell; a drain's end runs it once within its budget
// (endDrain), the cleanup key until the cluster answers (cleanupStep).

// startCleanup is a cleanup's first round: list what is left, by by (zero:
// no limit but the turn's).
func startCleanup(in Input, by time.Time) Ready {
	return Ready{Calls: []Call{{Kind: CallList, Until: by}}, Next: PhaseCleanListed, Carry: Carry{CleanBy: by}}
}

// cleanupRound is a cleanup's later rounds; once it is over, the drain
// ends (drainEnded) or the cleanup key finishes (cleanupFinished).
func cleanupRound(cfg Config, in Input) Ready {
	c := in.Carry
	switch in.Phase {
	case PhaseCleanListed:
		list, _ := result(in.Results, CallList)
		switch {
		case errors.Is(list.Err, errNotTried):
			c.Cleaned = Cleaned{Pods: -1, Err: errNotTried} // the background cleanup is at it
		case list.Err != nil:
			c.Cleaned = Cleaned{Pods: -1, Err: fmt.Errorf("list pods: %w", list.Err)}
		default:
			c.Work = list.Work
			calls := make([]Call, 0, len(list.Work)+1)
			for _, w := range list.Work {
				calls = append(calls, Call{Kind: CallNotify, Work: w, Until: c.CleanBy})
			}
			calls = append(calls, Call{Kind: CallRelease, Group: 1, Until: c.CleanBy})
			return Ready{Calls: calls, Next: PhaseCleanEnded, Carry: c, Hold: holdOf(in)}
		}
	case PhaseCleanEnded:
		var errs []error
		if e := errorsOf(in.Results, CallNotify); len(e) > 0 {
			errs = append(errs, fmt.Errorf("force-delete pods: %w", errors.Join(e...)))
		}
		if e := errorsOf(in.Results, CallRelease); len(e) > 0 {
			errs = append(errs, fmt.Errorf("delete node: %w", errors.Join(e...)))
		}
		c.Cleaned = Cleaned{Pods: len(c.Work), Err: errors.Join(errs...)}
		if len(errs) == 0 {
			return Ready{Calls: endNotices(in.Node, c), Next: PhaseCleanTold, Carry: c, Hold: holdOf(in)}
		}
	case PhaseCleanTold:
		c.Cleaned = Cleaned{Pods: len(c.Work)}
	}
	in.Carry = c
	var cs []Courtesy
	if in.Phase == PhaseCleanTold {
		cs = endCourtesies(in.Results)
	}
	if in.Cleanup {
		return withCourtesies(cleanupFinished(cfg, in), cs)
	}
	return withCourtesies(drainEnded(in), cs)
}

// holdOf is the claim a cleanup round keeps: a drain's end holds the
// node's cleanup key (the cleanup key's own turn holds it already).
func holdOf(in Input) string {
	if in.Cleanup {
		return ""
	}
	return CleanupKey(in.Node.ID)
}

// endNotices post the notices of how the node went, one after another,
// stopping at the first that fails.
func endNotices(n domain.Node, c Carry) []Call {
	outcome := c.Outcome
	if outcome == "" {
		outcome = n.Outcome
	}
	var calls []Call
	for i, e := range endEvents(n, outcome, c.Cleaned.Pods) {
		calls = append(calls, Call{Kind: CallPost, Group: i, Essential: true, Notice: e, Until: c.CleanBy})
	}
	return calls
}

// endCourtesies: an end notice that failed (one about a node gone is no
// failure).
func endCourtesies(rs []Result) []Courtesy {
	for _, r := range rs {
		if r.Call.Kind == CallPost && r.Err != nil && !errors.Is(r.Err, domain.ErrNotFound) {
			return []Courtesy{{"post the notices of its removal", r.Err}}
		}
	}
	return nil
}

// endEvents are the notices that say how a node went.
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

// cleanupStep is the step of a node's cleanup key: it retries the cleanup
// of a removed node whose cluster did not answer in time, with the
// executor's backoff, until it answers. A cluster deleted meanwhile has
// nothing left to clean (its credentials are gone with it).
func cleanupStep(cfg Config, in Input) Ready {
	if !in.Node.CleanupPending {
		return Ready{}
	}
	if in.Phase != PhaseStart {
		return cleanupRound(cfg, in)
	}
	if in.Facts.ClusterGone {
		w := write(in)
		w.CleanupPending = false
		return Ready{Write: w, From: AnyState}
	}
	return startCleanup(in, time.Time{})
}

// cleanupFinished ends a cleanup key's turn: pending no more, with a
// CleanupFinished event; or, if the cluster did not answer, a failure,
// retried.
func cleanupFinished(_ Config, in Input) Ready {
	res := in.Carry.Cleaned
	if res.Err != nil {
		return failed(Due{}, &ClusterError{fmt.Errorf("clean up the cluster: %w", res.Err)})
	}
	w := write(in)
	w.CleanupPending = false
	what := "its Node object was"
	if res.Pods > 0 {
		what = fmt.Sprintf("its Node object and %d pods left on it were", res.Pods)
	}
	return Ready{Write: w, From: AnyState, Events: []domain.Event{{Reason: domain.ReasonCleanupFinished,
		Message: fmt.Sprintf("cleanup of node %s finished: %s deleted from the cluster %s after the node was removed", w.Name, what, in.Now.Sub(w.RemovedAt).Round(time.Second))}}}
}
