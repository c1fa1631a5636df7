package allocator

import (
	"github.com/sparecap/sparecap/internal/domain"
)

func (p *planner) standard(part int32) {
	for _, ci := range p.partClusters[part] {
		c := &p.s.Clusters[ci]
		if c.Deleting || int(p.stdLive[ci]) >= c.NumGPUs {
			continue
		}
		p.findStandard(part, ci)
		if int(p.stdLive[ci]) < c.NumGPUs {
			p.short[ci] = true
			p.out.Shortfalls = append(p.out.Shortfalls, Shortfall{
				ClusterID: c.ID, Region: c.Region, GPUType: c.GPUType,
				WantGPUs: c.NumGPUs, CanGPUs: int(p.stdLive[ci]),
			})
		}
	}
}

func (p *planner) need(ci int32) bool {
	return int(p.stdLive[ci])+p.partGPM[p.cPart[ci]] <= p.s.Clusters[ci].NumGPUs
}

func (p *planner) findStandard(part, ci int32) {
	c := &p.s.Clusters[ci]
	// 1. Free machines of the cluster's pools.
	for _, pr := range p.poolsFor(part, c) {
		for p.need(ci) && pr.cursor < len(pr.ms) {
			mi := pr.ms[pr.cursor]
			pr.cursor++
			if p.free(mi) {
				p.provision(ci, mi, domain.Standard, false)
			}
		}
		// A machine skipped by the cursor is not free now and cannot
		// become free during this plan.
	}
	if !p.need(ci) {
		return
	}
	// 2. Eligible machines already draining with nobody waiting, then
	// 3. those awaited only by a pending preemptible node.
	for _, mi := range p.partMachines[part] {
		if !p.need(ci) {
			return
		}
		if p.eligible(ci, mi) && p.leaving(mi) {
			p.provision(ci, mi, domain.Standard, true)
		}
	}
	for _, mi := range p.partMachines[part] {
		if !p.need(ci) {
			return
		}
		if cl := p.claim[mi]; int(cl) < len(p.s.Nodes) && p.liveNode(cl) && p.eligible(ci, mi) &&
			!p.oos[mi] && p.classOf(cl) == domain.Preemptible {
			p.reclaim(cl, domain.CausePreempted)
			p.provision(ci, mi, domain.Standard, true)
		}
	}
	// 4. Reclaim preemptible nodes on eligible machines.
	cand := p.scratch[:0]
	for _, mi := range p.partMachines[part] {
		o := p.occ[mi]
		if int(o) < len(p.s.Nodes) && p.liveNode(o) && p.claim[mi] < 0 && p.eligible(ci, mi) &&
			p.classOf(o) == domain.Preemptible {
			cand = append(cand, mi)
		}
	}
	for p.need(ci) && len(cand) > 0 {
		best := -1
		for i, mi := range cand {
			if best < 0 || p.betterVictim(p.occ[mi], p.occ[cand[best]]) {
				best = i
			}
		}
		mi := cand[best]
		cand[best] = cand[len(cand)-1]
		cand = cand[:len(cand)-1]
		p.reclaim(p.occ[mi], domain.CausePreempted)
		p.provision(ci, mi, domain.Standard, true)
	}
	p.scratch = cand[:0]
}

// betterVictim: the node whose cluster holds the most preemptible nodes per
// unit of weight (furthest above its fair share), then the youngest node.
func (p *planner) betterVictim(a, b int32) bool {
	ca, cb := p.nCluster[a], p.nCluster[b]
	if ca != cb && ca >= 0 && cb >= 0 {
		// preLive[ca]/w(ca) vs preLive[cb]/w(cb), by cross-multiplication.
		la := int64(p.preLive[ca]) * int64(weight(&p.s.Clusters[cb]))
		lb := int64(p.preLive[cb]) * int64(weight(&p.s.Clusters[ca]))
		if la != lb {
			return la > lb
		}
	}
	return p.youngerFirst(a, b) < 0
}

// poolsFor returns the pools a cluster's standard nodes may use.
func (p *planner) poolsFor(part int32, c *domain.Cluster) []*poolRange {
	if c.BillingType != domain.BillingReserved {
		if pr := p.pools[poolKey{part, ""}]; pr != nil {
			return []*poolRange{pr}
		}
		return nil
	}
	var out []*poolRange
	for i := range p.s.Reservations {
		r := &p.s.Reservations[i]
		if r.ProjectID == c.ProjectID {
			if pr := p.pools[poolKey{part, r.ID}]; pr != nil {
				out = append(out, pr)
			}
		}
	}
	return out
}
