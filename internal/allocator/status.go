package allocator

import (
	"fmt"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// message returns the partition's message for reason and gpus, made by
// f the first time.
func (p *planner) message(reason domain.UnfulfilledReason, gpus int, f func() string) string {
	k := msgKey{reason, gpus}
	if m, ok := p.msgs[k]; ok {
		return m
	}
	m := f()
	p.msgs[k] = m
	return m
}

// reason records why a cluster's preemptible target is not met, if it is
// not. It is written into the cluster's ClusterState by status.
func (p *planner) reason(ci int32, gpm, cooling int, totalFair int32) {
	c := &p.s.Clusters[ci]
	st := p.state(ci)
	st.FairShareGPUs = int(p.fair[ci]) * gpm
	switch {
	case c.Deleting || int(p.preReady[ci]) >= c.TargetPreemptibleGPUs():
		return
	case p.preLive[ci] < p.fair[ci] && !p.leaseKept.IsZero():
		// Its share is counted but held by nodes inside their minimum
		// lease: nothing is provisioned for it until one ends.
		st.Unfulfilled = domain.UnfulfilledWaitingForLease
		short := int(p.fair[ci]-p.preLive[ci]) * gpm
		st.Message = p.message(st.Unfulfilled, short, func() string {
			return fmt.Sprintf("%d GPUs of this cluster's fair share are lent to other clusters within their minimum lease; waiting for a lease to end at %s",
				short, p.leaseKept.UTC().Format(time.RFC3339))
		})
	case p.fair[ci] < p.dem[ci] && cooling > 0:
		st.Unfulfilled = domain.UnfulfilledCoolingDown
		st.Message = p.message(st.Unfulfilled, cooling*gpm, func() string {
			return fmt.Sprintf("%d %s GPUs in %s were just released by standard nodes and are cooling down before they are lent as preemptible",
				cooling*gpm, c.GPUType, c.Region)
		})
	case p.fair[ci] < p.dem[ci] && totalFair > p.fair[ci]:
		st.Unfulfilled = domain.UnfulfilledFairShare
		st.Message = p.message(st.Unfulfilled, st.FairShareGPUs, func() string {
			return fmt.Sprintf("spare %s capacity in %s is shared with other clusters; this cluster's fair share is %d GPUs",
				c.GPUType, c.Region, st.FairShareGPUs)
		})
	case p.fair[ci] < p.dem[ci] && st.FairShareGPUs == 0:
		st.Unfulfilled = domain.UnfulfilledNoCapacity
		st.Message = p.message(st.Unfulfilled, 0, func() string {
			return fmt.Sprintf("no spare %s capacity in %s right now; the target is kept and filled as capacity returns",
				c.GPUType, c.Region)
		})
	case p.fair[ci] < p.dem[ci]:
		st.Unfulfilled = domain.UnfulfilledNoCapacity
		st.Message = p.message(st.Unfulfilled, st.FairShareGPUs, func() string {
			return fmt.Sprintf("only %d GPUs of spare %s capacity in %s right now; the target is kept and filled as capacity returns",
				st.FairShareGPUs, c.GPUType, c.Region)
		})
	default:
		st.Unfulfilled = domain.UnfulfilledProvisioning
		// Constant text: on a cold start every cluster is here at once.
		st.Message = "capacity found; nodes are being provisioned or wait for a drain to end"
	}
}

// state returns the cluster's entry of out.Clusters, created in cluster
// order on first use.
func (p *planner) state(ci int32) *ClusterState {
	if p.out.Clusters == nil {
		if p.states != nil {
			p.out.Clusters = grow(p.states, len(p.s.Clusters))
		} else {
			p.out.Clusters = make([]ClusterState, len(p.s.Clusters))
		}
	}
	return &p.out.Clusters[ci]
}

func (p *planner) status() {
	for ci := range p.s.Clusters {
		c := &p.s.Clusters[ci]
		st := p.state(int32(ci))
		st.ClusterID = c.ID
		st.StandardGPUs = int(p.stdLive[ci])
		st.AllocatedPreemptibleGPUs = int(p.preReady[ci])
		waiting := p.stdWait[ci]
		for _, ni := range p.nodesOf(int32(ci)) {
			if f := p.facts[ni]; f.is(fStandard) && p.liveNode(ni) && !f.is(fReady) {
				waiting = true
			}
		}
		switch {
		case c.Deleting:
			st.Status = domain.StatusDeleting
		case c.ActiveAt.After(p.now):
			st.Status = domain.StatusScheduled
		case p.short[ci] || st.StandardGPUs < c.NumGPUs:
			st.Status = domain.StatusDegraded
		case waiting:
			st.Status = domain.StatusWaiting
		default:
			st.Status = domain.StatusReady
		}
	}
}

// Available reports each partition's capacity, in the order partitions are
// first met in the snapshot's machines. It uses the same indexes and rules
// as Compute, so what it calls available is what a plan would use.
func Available(s Snapshot, now time.Time, cfg Config) []Availability {
	p := &planner{s: &s, now: now, cfg: cfg}
	p.index(&Planner{})
	out := make([]Availability, len(p.partMachines))
	for part, ms := range p.partMachines {
		a := &out[part]
		for _, mi := range ms {
			m := &s.Machines[mi]
			a.Region, a.GPUType = m.Region, m.GPUType
			a.Total += m.GPUs
			if m.ReservationID != "" {
				a.Reserved += m.GPUs
			}
			if m.OutOfService {
				a.OutOfService += m.GPUs
				continue
			}
			o, cl := p.occ[mi], p.claim[mi]
			held := o
			if cl >= 0 {
				held = cl
			}
			standard := held >= 0 && p.liveNode(held) && p.classOf(held) == domain.Standard
			lent := held >= 0 && p.liveNode(held) && p.classOf(held) == domain.Preemptible
			switch {
			case standard:
				a.InUseStandard += m.GPUs
			case lent:
				a.InUsePreemptible += m.GPUs
			case o < 0:
				a.Free += m.GPUs
			}
			if !standard && m.ReservationID == "" {
				a.OnDemand += m.GPUs
			}
			if !standard && !p.cooling(mi) {
				a.Preemptible += m.GPUs
			}
		}
	}
	return out
}
