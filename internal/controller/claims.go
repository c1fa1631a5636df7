package controller

import (
	"context"
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// A booking claims the machines it will take back: those a reclaim for it
// would take if it started now (idle nodes first, then fair share and
// least harm: the allocator's own choice), each with PreemptAt, when the
// notice of the node on it will come (the booking's ActiveAt). A machine
// booked for maintenance is claimed by nobody, its notice a drain window
// before the maintenance. The node on a claimed machine and its tenant
// are told (PreemptionScheduled; PreemptionCancelled when the claim goes),
// and so is the booking's tenant. When the booking starts, the plan takes
// its claimed machines before any other. Claims are worked out again
// every SweepEvery, and at once after a booking is made, moved or
// cancelled: as the fleet changes they may move, and both sides are told.

type claim struct {
	by string
	at time.Time
}

// claimsIfDue works the claims out when due, and takes a machine booked
// for maintenance out of lending a drain window before its time.
func (c *Controller) claimsIfDue(ctx context.Context, now time.Time, w *wake) error {
	due := c.lastClaims.IsZero() || now.Sub(c.lastClaims) >= c.cfg.SweepEvery ||
		(!c.nextClaims.IsZero() && !now.Before(c.nextClaims))
	if !c.claimNow.Swap(false) && !due {
		w.earlier(c.nextClaims)
		return nil
	}
	c.lastClaims, c.nextClaims = now, time.Time{}
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("read the bookings: %w", err)
	}
	want, err := c.wantedClaims(ctx, s, now, w)
	if err != nil {
		return err
	}
	if err := c.writeClaims(ctx, s, want, now); err != nil {
		return err
	}
	if !c.cfg.Instant {
		c.announce(ctx, s, want)
	}
	return nil
}

// wantedClaims works out every claim that should stand at now.
func (c *Controller) wantedClaims(ctx context.Context, s store.Snapshot, now time.Time, w *wake) (map[string]claim, error) {
	want := map[string]claim{}
	for _, m := range s.Machines {
		if m.MaintenanceAt.IsZero() || m.OutOfService {
			continue
		}
		at := m.MaintenanceAt.Add(-c.cfg.DrainWindow)
		want[m.ID] = claim{at: at}
		c.claimsAgainAt(at, now, w)
	}
	var with allocator.With
	booked := map[string]domain.Cluster{}
	for _, cl := range s.Clusters {
		if cl.ActiveAt.After(now) && !cl.Deleting {
			c.claimsAgainAt(cl.ActiveAt, now, w)
			booked[cl.ID] = cl
			cl.ActiveAt = time.Time{}
			with.Clusters = append(with.Clusters, cl)
		}
	}
	if len(booked) == 0 {
		return want, nil
	}
	c.lock(ctx)
	pl, _, err := c.planWith(ctx, now, with)
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	for _, p := range pl.Provisions {
		if b, ok := booked[p.ClusterID]; ok && p.Pending {
			if _, taken := want[p.MachineID]; !taken {
				want[p.MachineID] = claim{by: b.ID, at: b.ActiveAt}
			}
		}
	}
	return want, nil
}

// claimsAgainAt makes at, when a claim falls due, a time the claims are
// worked out again.
func (c *Controller) claimsAgainAt(at, now time.Time, w *wake) {
	if at.After(now) && (c.nextClaims.IsZero() || at.Before(c.nextClaims)) {
		c.nextClaims = at
	}
	w.earlier(at)
}

// writeClaims writes the claims that changed, and machines whose
// maintenance is a drain window away out of service, with the events that
// tell of them, in one transaction.
func (c *Controller) writeClaims(ctx context.Context, s store.Snapshot, want map[string]claim, now time.Time) error {
	clusters := map[string]domain.Cluster{}
	for _, cl := range s.Clusters {
		clusters[cl.ID] = cl
	}
	on := map[string]*domain.Node{}
	for _, n := range s.Nodes {
		if n.State != domain.NodeRemoved && n.State != domain.NodePending {
			on[n.MachineID] = n
		}
	}
	var ms []domain.Machine
	var evs []domain.Event
	booking := map[string]int{} // machines each booking gained or lost
	for _, m := range s.Machines {
		cur, nw := claim{m.ClaimedBy, m.PreemptAt}, want[m.ID]
		due := !m.MaintenanceAt.IsZero() && !m.OutOfService && !m.MaintenanceAt.Add(-c.cfg.DrainWindow).After(now)
		if cur.by == nw.by && cur.at.Equal(nw.at) && !due {
			continue
		}
		m.ClaimedBy, m.PreemptAt = nw.by, nw.at
		if due {
			m.ClaimedBy, m.PreemptAt = "", time.Time{}
			m.OutOfService = true
			m.OutOfServiceReason = "booked for maintenance from " + m.MaintenanceAt.UTC().Format(time.RFC3339)
		}
		ms = append(ms, m)
		if b, ok := clusters[cur.by]; ok && !b.ActiveAt.After(now) && nw.at.IsZero() {
			continue // its booking started: the plan took the machine
		}
		if n := on[m.ID]; n != nil && !due {
			evs = append(evs, c.claimEvent(*n, m, nw, clusters, now))
		}
		for _, by := range []string{cur.by, nw.by} {
			if by != "" {
				booking[by]++
			}
		}
	}
	for id := range booking {
		if b, ok := clusters[id]; ok {
			evs = append(evs, c.bookingEvent(b, want, s.Machines, now))
		}
	}
	if len(ms) == 0 {
		return nil
	}
	return c.commitClaims(ctx, ms, evs)
}

// commitClaims writes ms and evs in one transaction.
func (c *Controller) commitClaims(ctx context.Context, ms []domain.Machine, evs []domain.Event) error {
	err := c.store.Update(ctx, func(tx store.Tx) error {
		for _, m := range ms {
			if err := tx.UpdateMachine(ctx, m); err != nil {
				return err
			}
		}
		for _, e := range evs {
			if _, err := tx.AddEvent(ctx, e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("write the bookings' claims: %w", err)
	}
	obs := make([]Observation, len(evs))
	for i, e := range evs {
		obs[i] = Observation{Time: e.Timestamp, Kind: KindEvent, Cluster: e.ClusterID, Node: e.NodeName, Reason: e.Reason, Message: e.Message, Deadline: e.Deadline}
	}
	c.observe(obs)
	c.notify()
	c.Kick()
	return nil
}

// claimEvent tells node n's tenant of its machine's claim nw (none:
// cancelled). It names no other tenant's cluster.
func (c *Controller) claimEvent(n domain.Node, m domain.Machine, nw claim, clusters map[string]domain.Cluster, now time.Time) domain.Event {
	e := domain.Event{ID: c.NewID("ev-"), ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name, Timestamp: now}
	if nw.at.IsZero() {
		e.Reason = domain.ReasonPreemptionCancelled
		e.Message = fmt.Sprintf("node %s is no longer to be taken back: the booking of its machine moved or was cancelled", n.Name)
		return e
	}
	why := "its machine is booked for maintenance from " + m.MaintenanceAt.UTC().Format(time.RFC3339)
	if b, ok := clusters[nw.by]; ok {
		why = "its machine is booked from " + b.StartsAt.UTC().Format(time.RFC3339)
	}
	e.Reason, e.Deadline = domain.ReasonPreemptionScheduled, nw.at
	e.Message = fmt.Sprintf("node %s gets its notice at %s (in %s) and is gone by %s at the latest: %s",
		n.Name, nw.at.UTC().Format(time.RFC3339), nw.at.Sub(now).Round(time.Second),
		nw.at.Add(c.cfg.DrainWindow).UTC().Format(time.RFC3339), why)
	return e
}

// bookingEvent tells booking b's tenant how many machines its booking
// claims now, and when their nodes get their notice.
func (c *Controller) bookingEvent(b domain.Cluster, want map[string]claim, ms []domain.Machine, now time.Time) domain.Event {
	n, gpus := 0, 0
	for _, m := range ms {
		if want[m.ID].by == b.ID {
			n, gpus = n+1, gpus+m.GPUs
		}
	}
	msg := fmt.Sprintf("the booking from %s claims %d machines (%d GPUs) lent to preemptible work now; their nodes get their notice at %s",
		b.StartsAt.UTC().Format(time.RFC3339), n, gpus, b.ActiveAt.UTC().Format(time.RFC3339))
	if n == 0 {
		msg = fmt.Sprintf("the booking from %s claims no machine lent to preemptible work now: free capacity holds it", b.StartsAt.UTC().Format(time.RFC3339))
	}
	return domain.Event{ID: c.NewID("ev-"), ClusterID: b.ID, Reason: domain.ReasonPreemptionScheduled, Message: msg, Timestamp: now, Deadline: b.ActiveAt}
}
