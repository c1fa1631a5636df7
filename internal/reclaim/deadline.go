package reclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// endDrain ends node n's drain with outcome (early: its work ended;
// deadline: the deadline came): the node is removed and its machine taken
// back now. Deleting what the node leaves in its cluster (work still
// there, the node itself) is tried first, for at most
// Config.CleanupBudget; if the cluster does not answer in time, the node
// is removed all the same with its cleanup pending, retried in the
// background (Cleanup). Nothing is asked of the cluster on the way to the
// machine's return but that bounded attempt.
func (m *Machine) endDrain(ctx context.Context, n domain.Node, outcome domain.DrainOutcome) (domain.Node, error) {
	at := m.clock.Now()
	m.noteCheckpoint(ctx, n) // work that checkpointed and went since the last pass
	m.saved.Delete(n.ID)
	res := m.tryCleanUp(ctx, n, outcome)
	n, err := m.port.Transition(ctx, n.ID, domain.NodeDraining, func(n *domain.Node, _ time.Time) ([]domain.Event, error) {
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
		return n, IgnoreStale(err)
	}
	if !n.ReadyAt.IsZero() {
		m.port.Observe(DrainObservation(KindDrainFinished, n, n.DrainedAt))
	}
	return m.Remove(ctx, n)
}
