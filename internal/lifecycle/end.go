package lifecycle

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// endDrain ends node n's drain with outcome (early: its work ended;
// deadline: the deadline came): the node is removed and its machine taken
// back now. Deleting what the node leaves in its cluster (work still
// there, the node itself) is tried first, for at most
// Config.CleanupBudget, unless the node's background cleanup is at it; if
// the cluster does not answer in time, the node is removed all the same
// with its cleanup pending, retried in the background (cleanupStep).
// Nothing is asked of the cluster on the way to the machine's return but
// that bounded attempt.
func endDrain(cfg Config, in Input, outcome domain.DrainOutcome) Ready {
	r := startCleanup(in, in.Now.Add(cfg.CleanupBudget))
	r.Hold = CleanupKey(in.Node.ID)
	r.Carry.EndAt, r.Carry.Outcome = in.Now, outcome
	// Work that checkpointed and went since the last turn.
	r.SaveWork = checkpoint(in)
	return r
}

// drainEnded writes the end of the drain once its cleanup attempt is
// over: removing, with the removal where billing stops (never later than
// the deadline), the cleanup pending if the attempt did not finish, and
// the events; the removing step runs at once.
func drainEnded(in Input) Ready {
	at, outcome, res := in.Carry.EndAt, in.Carry.Outcome, in.Carry.Cleaned
	w := write(in)
	w.State, w.DrainedAt, w.Outcome, w.RemovedAt = domain.NodeRemoving, at, outcome, at
	w.CleanupPending = res.Err != nil
	var evs []domain.Event
	if outcome == domain.OutcomeEarly {
		left := w.Deadline.Sub(at).Round(time.Second)
		evs = append(evs, domain.Event{Reason: domain.ReasonNodeDrained, Deadline: w.Deadline, Timestamp: at,
			Message: fmt.Sprintf("all pods on %s exited %s after the notice, %s before the deadline", w.Name, at.Sub(w.DrainStartedAt).Round(time.Second), max(left, 0))})
	}
	// Stamped with the removal (where billing stops), not with the end of
	// the cleanup attempt, which may take up to CleanupBudget.
	evs = append(evs, domain.Event{Reason: domain.ReasonNodeRemoved, Timestamp: at, Message: removedMessage(*w, at, res)})
	r := Ready{Write: w, From: domain.NodeDraining, Events: evs, Moved: true, Again: true}
	if !w.ReadyAt.IsZero() {
		r.Obs = []Observation{DrainObservation(KindDrainFinished, *w, w.DrainedAt)}
	}
	return r
}

// removedMessage says how node n went, at at, and what cleanup left.
func removedMessage(n domain.Node, at time.Time, res Cleaned) string {
	var msg string
	switch {
	case n.ReadyAt.IsZero():
		msg = fmt.Sprintf("node %s was removed before it became ready", n.Name)
	case n.Outcome == domain.OutcomeEarly:
		msg = fmt.Sprintf("node %s was removed %s after the notice, before the deadline", n.Name, at.Sub(n.DrainStartedAt).Round(time.Second))
	case n.Outcome == domain.OutcomeDeadline && res.Err == nil && res.Pods > 0:
		msg = fmt.Sprintf("node %s was removed at the deadline; %d pods still running were force-deleted", n.Name, res.Pods)
	case n.Outcome == domain.OutcomeDeadline && res.Err == nil:
		msg = fmt.Sprintf("node %s was removed at the deadline; its last pods ended within the final second", n.Name)
	case n.Outcome == domain.OutcomeDeadline:
		msg = fmt.Sprintf("node %s was removed at the deadline", n.Name)
	default:
		msg = fmt.Sprintf("node %s was removed", n.Name)
	}
	if res.Err == nil {
		return msg
	}
	left := "its Node object"
	switch {
	case res.Pods > 0:
		left = fmt.Sprintf("its Node object and %d pods still on it", res.Pods)
	case res.Pods < 0:
		left = "its Node object and any pods still on it"
	}
	return fmt.Sprintf("%s; its machine is taken back, but the cluster's API did not answer in time (%v): cleanup pending, %s are deleted once it does",
		msg, res.Err, left)
}
