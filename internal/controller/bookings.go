package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
)

// A booking is a standard cluster created with StartsAt ahead: the plan
// gives it no nodes before its ActiveAt (StartsAt less the drain window and
// its pool's provisioning lead), so that it is Ready at StartsAt. It is
// accepted only if its pool can hold it with every standard cluster there
// and every booking before it; once accepted it holds: a later create that
// would leave a booking short is refused, naming it. See docs/concepts.md
// "Capacity booked ahead".

// DefaultProvisionLead is how long a machine is taken to provision when
// its provider does not say and its pool has no recent provision to go by.
const DefaultProvisionLead = 10 * time.Minute

// schedule sets the ActiveAt and status of a create with a StartsAt; a
// start too near to be ahead of its lead is a create planned now (billed
// from StartsAt all the same).
func (c *Controller) schedule(ctx context.Context, cl *domain.Cluster, now time.Time) {
	cl.ActiveAt = time.Time{}
	if cl.StartsAt.IsZero() {
		return
	}
	if at := cl.StartsAt.Add(-c.BookingLead(ctx, cl.Region, cl.GPUType)); at.After(now) {
		cl.ActiveAt, cl.Status = at, domain.StatusScheduled
	}
}

// BookingLead is how long before its start a booking in the pool of region
// and gpuType is planned: the drain window, for the nodes it takes back to
// go, and the pool's provisioning lead, for its own to come up.
func (c *Controller) BookingLead(ctx context.Context, region, gpuType string) time.Duration {
	return c.cfg.DrainWindow + c.provisionLead(ctx, region, gpuType)
}

// provisionLead is the time a machine of the pool takes to provision: what
// its provider declares (driver.LeadTeller), else the 90th percentile of
// the pool's live nodes' provisioning times, else DefaultProvisionLead.
func (c *Controller) provisionLead(ctx context.Context, region, gpuType string) time.Duration {
	if lt, ok := c.machines.(driver.LeadTeller); ok {
		if d, ok := lt.ProvisionLead(region, gpuType); ok {
			return d
		}
	}
	s, err := c.store.Snapshot(ctx)
	if err != nil {
		return DefaultProvisionLead
	}
	inPool := map[string]bool{}
	for _, m := range s.Machines {
		inPool[m.ID] = m.Region == region && m.GPUType == gpuType
	}
	var took []time.Duration
	for _, n := range s.Nodes {
		if inPool[n.MachineID] && !n.ReadyAt.IsZero() && !n.ProvisioningAt.IsZero() && n.ReadyAt.After(n.ProvisioningAt) {
			took = append(took, n.ReadyAt.Sub(n.ProvisioningAt))
		}
	}
	if len(took) == 0 {
		return DefaultProvisionLead
	}
	slices.Sort(took)
	return took[(len(took)*9+9)/10-1].Round(time.Second)
}

// checkBookings refuses the creates of rs that a booking leaves short
// (shortAfterBookings) and returns the others.
func (c *Controller) checkBookings(ctx context.Context, rs []*createReq, now time.Time) []*createReq {
	cls := make([]domain.Cluster, len(rs))
	for i, r := range rs {
		cls[i] = r.cl
	}
	short, err := c.shortAfterBookings(ctx, now, cls)
	var keep []*createReq
	for _, r := range rs {
		switch {
		case err != nil:
			r.err = err
		case short[r.cl.ID] != nil:
			r.err = short[r.cl.ID]
		default:
			keep = append(keep, r)
		}
	}
	return keep
}

// shortAfterBookings plans cls (clusters as a request would leave them) as
// if every booking of their pools had started, and returns those left
// short there: a booking its pool cannot hold at its start, or a cluster
// that would leave a booking short. Without a booking among cls or in
// their pools, it plans nothing.
func (c *Controller) shortAfterBookings(ctx context.Context, now time.Time, cls []domain.Cluster) (map[string]*ShortfallError, error) {
	booked, err := c.scheduled(ctx, now)
	if err != nil {
		return nil, err
	}
	pools := map[[2]string]bool{}
	for _, cl := range cls {
		pools[[2]string{cl.Region, cl.GPUType}] = true
	}
	var with allocator.With
	var ahead []domain.Cluster // the pools' bookings, soonest first
	mine := map[string]bool{}
	for _, cl := range cls {
		mine[cl.ID] = true
	}
	for _, b := range booked {
		if pools[[2]string{b.Region, b.GPUType}] && !mine[b.ID] {
			ahead = append(ahead, b)
			b.ActiveAt = time.Time{}
			with.Clusters = append(with.Clusters, b)
		}
	}
	for _, cl := range cls {
		if !cl.StartsAt.IsZero() || len(ahead) > 0 {
			cl.ActiveAt = time.Time{}
			with.Clusters = append(with.Clusters, cl)
		}
	}
	if len(with.Clusters) == len(ahead) {
		return nil, nil
	}
	pl, _, err := c.planWith(ctx, now, with)
	if err != nil {
		return nil, err
	}
	short := map[string]*ShortfallError{}
	for _, cl := range cls {
		if sf := shortfallOf(pl, cl.ID); sf != nil {
			short[cl.ID] = &ShortfallError{Shortfall: *sf, Because: bookedBecause(cl, ahead)}
		}
	}
	for _, b := range ahead {
		if sf := shortfallOf(pl, b.ID); sf != nil && len(cls) == 1 {
			// An older cluster grown: it comes first in the plan, and the
			// booking after it falls short.
			short[cls[0].ID] = &ShortfallError{Shortfall: allocator.Shortfall{ClusterID: cls[0].ID,
				Region: cls[0].Region, GPUType: cls[0].GPUType, WantGPUs: cls[0].NumGPUs,
				CanGPUs: cls[0].NumGPUs - (sf.WantGPUs - sf.CanGPUs)}, Because: bookedBecause(cls[0], []domain.Cluster{b})}
			break
		}
	}
	return short, nil
}

// bookedBecause says why cl falls short once the bookings ahead of its
// pool have started.
func bookedBecause(cl domain.Cluster, ahead []domain.Cluster) string {
	var first *domain.Cluster
	for i := range ahead {
		if ahead[i].Region == cl.Region && ahead[i].GPUType == cl.GPUType && ahead[i].ID != cl.ID {
			first = &ahead[i]
			break
		}
	}
	switch {
	case first == nil && !cl.StartsAt.IsZero():
		return fmt.Sprintf("at its start %s, beside the standard clusters of the pool", cl.StartsAt.UTC().Format(time.RFC3339))
	case first == nil:
		return ""
	case !cl.StartsAt.IsZero():
		return fmt.Sprintf("at its start %s, beside the standard clusters of the pool and its bookings from %s on",
			cl.StartsAt.UTC().Format(time.RFC3339), first.StartsAt.UTC().Format(time.RFC3339))
	default:
		return fmt.Sprintf("the pool is booked from %s (cluster %s)", first.StartsAt.UTC().Format(time.RFC3339), first.ID)
	}
}

// scheduled lists the bookings not started yet (ActiveAt after now),
// soonest first, from the planner's rows; c.mu is held.
func (c *Controller) scheduled(ctx context.Context, now time.Time) ([]domain.Cluster, error) {
	if err := c.loadParts(ctx); err != nil {
		return nil, fmt.Errorf("list bookings: %w", err)
	}
	out := c.parts.Booked(now)
	slices.SortStableFunc(out, func(a, b domain.Cluster) int {
		return cmp.Or(a.StartsAt.Compare(b.StartsAt), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// ErrStarted refuses to move a booking whose nodes are planned already.
var ErrStarted = errors.New("the booking has started: its nodes are planned")

// MoveBooking moves booking id to start at startsAt, if its pool can hold
// it then (beside the standard clusters and the bookings before it); a
// start too near to be ahead of its lead is planned now. The bookings'
// claims follow on the next pass, their nodes told.
func (c *Controller) MoveBooking(ctx context.Context, id string, startsAt time.Time) (domain.Cluster, error) {
	if cur, err := c.store.GetCluster(ctx, id); err != nil {
		return domain.Cluster{}, err
	} else if !cur.ActiveAt.After(c.clock.Now()) {
		return domain.Cluster{}, fmt.Errorf("move cluster %s: %w", id, ErrStarted)
	}
	var refuse error
	cl, err := c.changeCluster(ctx, "move booking", id, func(cl *domain.Cluster) {
		now := c.clock.Now()
		if !cl.ActiveAt.After(now) {
			refuse = fmt.Errorf("move cluster %s: %w", id, ErrStarted)
			return
		}
		cl.StartsAt = startsAt
		c.schedule(ctx, cl, now)
	}, func() bool { return refuse == nil })
	if refuse != nil {
		return domain.Cluster{}, refuse
	}
	if err == nil {
		c.claimNow.Store(true)
	}
	return cl, err
}

// ClaimsNow asks the next pass to work the claims out at once (an
// operator booked a machine for maintenance or cancelled it).
func (c *Controller) ClaimsNow() { c.claimNow.Store(true) }
