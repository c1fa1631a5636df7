package allocator

import (
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

func weight(c *domain.Cluster) int {
	if c.Weight <= 0 {
		return 1
	}
	return c.Weight
}

// preemptible shares the partition's spare capacity by weighted max-min
// fairness and moves nodes toward the shares.
func (p *planner) preemptible(part int32) {
	p.leaseKept = time.Time{}
	supply, cooling := p.preemptibleSupply(part)
	p.fairShares(part, supply)
	p.shedAboveShare(part)
	totalFair := p.fillToShare(part)
	if p.msgs == nil {
		p.msgs = make(map[msgKey]string, 8)
	}
	clear(p.msgs)
	for _, ci := range p.partClusters[part] {
		p.reason(ci, p.partGPM[part], cooling, totalFair)
	}
}

// preemptibleSupply counts the partition's machines preemptible nodes
// may have (in service, not serving or awaited by a standard node, not
// cooling down) and those cooling down, whose end is a wake-up of the
// plan.
func (p *planner) preemptibleSupply(part int32) (supply, cooling int) {
	s := p.s
	for _, mi := range p.partMachines[part] {
		if p.oos[mi] {
			continue
		}
		o, cl := p.occ[mi], p.claim[mi]
		switch {
		case cl >= 0:
			if p.classOf(cl) == domain.Preemptible {
				supply++
			}
		case (o < 0 || !p.liveNode(o)) && p.cooling(mi):
			cooling++
			p.wake(s.Machines[mi].CooldownUntil)
		case o < 0 || !p.liveNode(o) || p.classOf(o) == domain.Preemptible:
			supply++
		}
	}
	return supply, cooling
}

// fairShares sets each cluster's fair share of supply nodes (p.fair) and
// its demand (p.dem) by water-filling: clusters sorted by target/weight;
// those whose target fits under the level get it, the rest share what is
// left in proportion to their weights, and the remainder goes as
// shareRemainder says.
func (p *planner) fairShares(part int32, supply int) {
	s := p.s
	gpm := p.partGPM[part]
	order := p.scratch[:0]
	for _, ci := range p.partClusters[part] {
		c := &s.Clusters[ci]
		p.dem[ci], p.fair[ci] = 0, 0
		if t := c.TargetPreemptibleGPUs(); !c.Deleting && t > 0 {
			p.dem[ci] = int32(t / gpm)
			order = append(order, ci)
		}
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		x := int64(p.dem[a]) * int64(weight(&s.Clusters[b]))
		y := int64(p.dem[b]) * int64(weight(&s.Clusters[a]))
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	R, W := int64(supply), int64(0)
	for _, ci := range order {
		W += int64(weight(&s.Clusters[ci]))
	}
	i := 0
	for ; i < len(order); i++ {
		ci := order[i]
		w := int64(weight(&s.Clusters[ci]))
		if int64(p.dem[ci])*W > R*w {
			break
		}
		p.fair[ci] = p.dem[ci]
		R -= int64(p.dem[ci])
		W -= w
	}
	if rest := order[i:]; len(rest) > 0 {
		p.shareRemainder(rest, R, W)
	}
	p.scratch = order[:0]
}

// shareRemainder shares R nodes among the clusters rest by weight (W in
// all), then the integer remainder (fewer nodes than clusters here): first
// to clusters holding more than their share, so it moves no node; then to
// the cluster whose target has been unmet longest, so a freed node reaches
// every waiting cluster in turn and nobody waits forever behind earlier
// clusters; then to clusters holding more, then to older ones.
func (p *planner) shareRemainder(rest []int32, R, W int64) {
	left := R
	for _, ci := range rest {
		f := int64(weight(&p.s.Clusters[ci])) * R / W
		p.fair[ci] = int32(f)
		left -= f
	}
	slices.SortStableFunc(rest, func(a, b int32) int {
		if ka, kb := p.preLive[a] > p.fair[a], p.preLive[b] > p.fair[b]; ka != kb {
			if ka {
				return -1
			}
			return 1
		}
		if c := p.longerUnmet(a, b); c != 0 {
			return c
		}
		if c := int(p.preLive[b]) - int(p.preLive[a]); c != 0 {
			return c
		}
		return p.olderFirst(a, b)
	})
	for j := 0; left > 0 && j < len(rest); j++ {
		if ci := rest[j]; p.fair[ci] < p.dem[ci] {
			p.fair[ci]++
			left--
		}
	}
}

// shedAboveShare reclaims the nodes of clusters above their share that
// hurt them least (victims).
func (p *planner) shedAboveShare(part int32) {
	for _, ci := range p.partClusters[part] {
		for _, v := range p.victimsOf(ci, domain.Preemptible, int(p.preLive[ci]-p.fair[ci]), true) {
			p.reclaim(v.ni, domain.CauseFairShare, v.why)
		}
	}
}

// keepLeased notes a node kept from a fair share until its lease ends
// at end: the plan wakes then, and those below their share say so.
func (p *planner) keepLeased(end time.Time) {
	p.wake(end)
	if p.leaseKept.IsZero() || end.Before(p.leaseKept) {
		p.leaseKept = end
	}
}

// fillToShare gives clusters below their share free machines, then
// draining ones, and returns the partition's total fair share. Idle
// reserved machines are lent before on-demand ones: on-demand requests
// are the more frequent, and each one that finds a free machine is a
// preemption avoided.
func (p *planner) fillToShare(part int32) int32 {
	s := p.s
	free, leaving := p.free0[:0], p.leaving0[:0]
	for pass := 0; pass < 2; pass++ {
		for _, mi := range p.partMachines[part] {
			if (s.Machines[mi].ReservationID != "") != (pass == 0) {
				continue
			}
			switch {
			case p.free(mi) && !p.cooling(mi):
				free = append(free, mi)
			case p.leaving(mi) && !p.cooling(mi):
				leaving = append(leaving, mi)
			}
		}
	}
	p.free0, p.leaving0 = free[:0], leaving[:0] // keep the grown buffers
	totalFair := int32(0)
	for _, ci := range p.partClusters[part] {
		totalFair += p.fair[ci]
		for p.preLive[ci] < p.fair[ci] {
			if len(free) > 0 {
				p.provision(ci, free[0], domain.Preemptible, false)
				free = free[1:]
			} else if len(leaving) > 0 {
				p.provision(ci, leaving[0], domain.Preemptible, true)
				leaving = leaving[1:]
			} else {
				break // the rest of the share is leased (keepLeased)
			}
		}
	}
	return totalFair
}

// longerUnmet orders clusters by how long their preemptible target has
// been unmet, longest first; a cluster with no UnmetSince (met, or not
// yet recorded) has waited least.
func (p *planner) longerUnmet(a, b int32) int {
	ua, ub := p.s.Clusters[a].UnmetSince, p.s.Clusters[b].UnmetSince
	switch {
	case ua.Equal(ub):
		return 0
	case ua.IsZero():
		return 1
	case ub.IsZero():
		return -1
	}
	return ua.Compare(ub)
}

// UnmetSince is what a cluster's UnmetSince becomes once its state cs
// from a plan made at now is applied: the time its preemptible target
// became unmet, kept while it stays unmet, zero once it is met. prev is
// the cluster's current UnmetSince. The controller writes it with the
// cluster's status; the next plans use it to give freed nodes to the
// longest waiter.
func UnmetSince(prev time.Time, cs ClusterState, now time.Time) time.Time {
	if cs.Unfulfilled == domain.UnfulfilledNone || cs.Status == domain.StatusDeleting {
		return time.Time{}
	}
	if prev.IsZero() {
		return now
	}
	return prev
}
