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
	want, booked, machines, err := c.wantedClaims(ctx, now, w)
	if err != nil {
		return err
	}
	v := &claimsView{c: c, machines: machines, booked: booked}
	if err := c.writeClaims(ctx, v, want, now); err != nil {
		return err
	}
	if !c.cfg.Instant && (len(want) > 0 || c.announced.any()) {
		var nodes []domain.Node
		for id := range want {
			if n, ok, err := v.nodeOn(ctx, id); err != nil {
				return err
			} else if ok {
				nodes = append(nodes, n)
			}
		}
		c.announce(ctx, nodes, want)
	}
	return nil
}

// claimsView is what a working-out of the claims reads: every machine,
// the bookings, and the node on a machine whose claim changed or is to be
// shown (never every node).
type claimsView struct {
	c        *Controller
	machines []domain.Machine
	booked   map[string]domain.Cluster
}

// nodeOn is the node holding machine id (provisioning, ready, draining
// or removing), if any.
func (v *claimsView) nodeOn(ctx context.Context, id string) (domain.Node, bool, error) {
	ns, err := v.c.store.ListNodes(ctx, store.NodeFilter{MachineID: id})
	if err != nil {
		return domain.Node{}, false, fmt.Errorf("read the node on machine %s: %w", id, err)
	}
	for _, n := range ns {
		if n.State != domain.NodePending {
			return n, true, nil
		}
	}
	return domain.Node{}, false, nil
}

// cluster is cluster id: a booking, or read from the store (false: gone).
func (v *claimsView) cluster(ctx context.Context, id string) (domain.Cluster, bool) {
	if b, ok := v.booked[id]; ok {
		return b, true
	}
	if id == "" {
		return domain.Cluster{}, false
	}
	cl, err := v.c.store.GetCluster(ctx, id)
	return cl, err == nil
}

// wantedClaims works out every claim that should stand at now; it
// returns them, the bookings not started (by ID), and the machines a
// claim or a maintenance concerns, now or as wanted (read from the
// planner's rows: never every machine).
func (c *Controller) wantedClaims(ctx context.Context, now time.Time, w *wake) (map[string]claim, map[string]domain.Cluster, []domain.Machine, error) {
	c.lock(ctx)
	defer c.mu.Unlock()
	all, err := c.scheduled(ctx, now) // loads the planner's rows
	if err != nil {
		return nil, nil, nil, err
	}
	want := map[string]claim{}
	concerned := func(m *domain.Machine) bool { return !m.PreemptAt.IsZero() || !m.MaintenanceAt.IsZero() }
	for _, m := range c.parts.Machines(concerned) {
		if m.MaintenanceAt.IsZero() || m.OutOfService {
			continue
		}
		at := m.MaintenanceAt.Add(-c.cfg.DrainWindow)
		want[m.ID] = claim{at: at}
		c.claimsAgainAt(at, now, w)
	}
	var with allocator.With
	booked := map[string]domain.Cluster{}
	for _, cl := range all {
		c.claimsAgainAt(cl.ActiveAt, now, w)
		booked[cl.ID] = cl
		cl.ActiveAt = time.Time{}
		with.Clusters = append(with.Clusters, cl)
	}
	if len(booked) > 0 {
		if err := c.bookingClaims(ctx, now, with, booked, want); err != nil {
			return nil, nil, nil, err
		}
	}
	machines := c.parts.Machines(func(m *domain.Machine) bool { _, ok := want[m.ID]; return ok || concerned(m) })
	return want, booked, machines, nil
}

// bookingClaims adds to want the machines a reclaim for the bookings
// would take if they started now (with: them, started); c.mu is held.
func (c *Controller) bookingClaims(ctx context.Context, now time.Time, with allocator.With, booked map[string]domain.Cluster, want map[string]claim) error {
	pl, _, err := c.planWith(ctx, now, with)
	if err != nil {
		return err
	}
	for _, p := range pl.Provisions {
		if b, ok := booked[p.ClusterID]; ok && p.Pending {
			if _, taken := want[p.MachineID]; !taken {
				want[p.MachineID] = claim{by: b.ID, at: b.ActiveAt}
			}
		}
	}
	return nil
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
func (c *Controller) writeClaims(ctx context.Context, v *claimsView, want map[string]claim, now time.Time) error {
	var changed []domain.Machine
	for _, m := range v.machines {
		cur, nw := claim{m.ClaimedBy, m.PreemptAt}, want[m.ID]
		due := !m.MaintenanceAt.IsZero() && !m.OutOfService && !m.MaintenanceAt.Add(-c.cfg.DrainWindow).After(now)
		if cur.by != nw.by || !cur.at.Equal(nw.at) || due {
			changed = append(changed, m)
		}
	}
	if len(changed) == 0 {
		return nil
	}
	var ms []domain.Machine
	var evs []domain.Event
	booking := map[string]int{} // machines each booking gained or lost
	for _, m := range changed {
		cur, nw := claim{m.ClaimedBy, m.PreemptAt}, want[m.ID]
		due := !m.MaintenanceAt.IsZero() && !m.OutOfService && !m.MaintenanceAt.Add(-c.cfg.DrainWindow).After(now)
		m.ClaimedBy, m.PreemptAt = nw.by, nw.at
		if due {
			m.ClaimedBy, m.PreemptAt = "", time.Time{}
			m.OutOfService = true
			m.OutOfServiceReason = "booked for maintenance from " + m.MaintenanceAt.UTC().Format(time.RFC3339)
		}
		ms = append(ms, m)
		if b, ok := v.cluster(ctx, cur.by); ok && !b.ActiveAt.After(now) && nw.at.IsZero() {
			continue // its booking started: the plan took the machine
		}
		if n, ok, err := v.nodeOn(ctx, m.ID); err != nil {
			return err
		} else if ok && !due {
			evs = append(evs, c.claimEvent(ctx, n, m, nw, v, now))
		}
		for _, by := range []string{cur.by, nw.by} {
			if by != "" {
				booking[by]++
			}
		}
	}
	for id := range booking {
		if b, ok := v.cluster(ctx, id); ok {
			evs = append(evs, c.bookingEvent(b, want, v.machines, now))
		}
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
func (c *Controller) claimEvent(ctx context.Context, n domain.Node, m domain.Machine, nw claim, v *claimsView, now time.Time) domain.Event {
	e := domain.Event{ID: c.NewID("ev-"), ClusterID: n.ClusterID, NodeID: n.ID, NodeName: n.Name, Timestamp: now}
	if nw.at.IsZero() {
		e.Reason = domain.ReasonPreemptionCancelled
		e.Message = fmt.Sprintf("node %s is no longer to be taken back: the booking of its machine moved or was cancelled", n.Name)
		return e
	}
	why := "its machine is booked for maintenance from " + m.MaintenanceAt.UTC().Format(time.RFC3339)
	if b, ok := v.cluster(ctx, nw.by); ok {
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
