package allocator

import (
	"cmp"
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

func (p *planner) standard(part int32) {
	for _, ci := range p.partClusters[part] {
		c := &p.s.Clusters[ci]
		if c.Deleting || int(p.stdLive[ci]) >= p.stdWant(ci) {
			continue
		}
		p.findStandard(part, ci)
		if int(p.stdLive[ci]) < p.stdWant(ci) {
			p.short[ci] = true
			p.out.Shortfalls = append(p.out.Shortfalls, Shortfall{
				ClusterID: c.ID, Region: c.Region, GPUType: c.GPUType,
				WantGPUs: c.NumGPUs, CanGPUs: int(p.stdLive[ci]),
			})
		}
	}
}

func (p *planner) need(ci int32) bool {
	return int(p.stdLive[ci])+p.partGPM[p.cPart[ci]] <= p.stdWant(ci)
}

// stdWant is the standard GPUs cluster ci wants now: none before its
// ActiveAt (a booking; the plan wakes then), its NumGPUs after.
func (p *planner) stdWant(ci int32) int {
	c := &p.s.Clusters[ci]
	if c.ActiveAt.After(p.now) {
		p.wake(c.ActiveAt)
		return 0
	}
	return c.NumGPUs
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
			p.reclaim(cl, domain.CausePreempted, "not started yet")
			p.provision(ci, mi, domain.Standard, true)
		}
	}
	// 4. Reclaim preemptible nodes on eligible machines.
	p.preempt(part, ci)
}

// preempt reclaims preemptible nodes on machines cluster ci may use, for
// its standard nodes. Which clusters give them is the fair-share
// decision, a node at a time: the cluster furthest above its share
// (fartherAbove). Which of a cluster's nodes go is victims': the ones
// whose loss hurts least.
func (p *planner) preempt(part, ci int32) {
	want := (p.stdWant(ci) - int(p.stdLive[ci])) / p.partGPM[part]
	if want <= 0 {
		return
	}
	order, leased := p.preemptCandidates(part, ci)
	// Machines its booking claimed (docs/concepts.md "Capacity booked
	// ahead") are taken before any other: their nodes were told.
	for _, ni := range order {
		if p.claimedFor(ni, ci) {
			delete(leased, ni)
		}
	}
	if len(order) == 0 {
		return
	}
	var heads []int32 // index into order of each cluster's next candidate
	for i := range order {
		if i == 0 || p.nCluster[order[i]] != p.nCluster[order[i-1]] {
			heads = append(heads, int32(i))
		}
	}
	ends := append(heads[1:len(heads):len(heads)], int32(len(order)))
	count := p.takeFromHeads(ci, order, leased, heads, ends, want)
	for h, n := range count {
		p.preemptOf(order[heads[h]:ends[h]], leased, n, ci)
	}
}

// preemptCandidates returns the preemptible nodes on machines of part that
// cluster ci could take, each cluster's together in the order
// fartherAbove takes them within one cluster, those inside their minimum
// lease (leased) last.
func (p *planner) preemptCandidates(part, ci int32) (order []int32, leased map[int32]bool) {
	for _, mi := range p.partMachines[part] {
		o := p.occ[mi]
		if int(o) < len(p.s.Nodes) && p.liveNode(o) && p.claim[mi] < 0 && p.eligible(ci, mi) &&
			p.classOf(o) == domain.Preemptible {
			order = append(order, o)
		}
	}
	leased = map[int32]bool{}
	for _, ni := range order {
		if _, ok := p.leaseEnd(ni); ok {
			leased[ni] = true
		}
	}
	slices.SortFunc(order, func(a, b int32) int {
		if c := cmp.Compare(p.nCluster[a], p.nCluster[b]); c != 0 {
			return c
		}
		if ca, cb := p.claimedFor(a, ci), p.claimedFor(b, ci); ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		if leased[a] != leased[b] {
			if leased[b] {
				return -1
			}
			return 1
		}
		return p.youngerFirst(a, b)
	})
	return order, leased
}

// takeFromHeads is the fair-share decision: want nodes, each from the
// head of the cluster farthest above its share (order[heads[h]:ends[h]]
// is cluster h's candidates), a leased head only when no cluster has
// another. It returns how many each cluster gives.
func (p *planner) takeFromHeads(ci int32, order []int32, leased map[int32]bool, heads, ends []int32, want int) []int {
	count := make([]int, len(heads))
	live := make(map[int32]int32, len(heads)) // preLive as the choice goes
	for taken := 0; taken < want; taken++ {
		best := -1
		for h := range heads {
			if int(heads[h])+count[h] >= int(ends[h]) {
				continue
			}
			a := order[int(heads[h])+count[h]]
			if best < 0 {
				best = h
				continue
			}
			b := order[int(heads[best])+count[best]]
			if ca, cb := p.claimedFor(a, ci), p.claimedFor(b, ci); ca != cb {
				if ca {
					best = h
				}
				continue
			}
			if leased[a] != leased[b] {
				if leased[b] {
					best = h
				}
				continue
			}
			if p.fartherAbove(a, b, live) {
				best = h
			}
		}
		if best < 0 {
			break
		}
		ni := order[int(heads[best])+count[best]]
		count[best]++
		if c := p.nCluster[ni]; c >= 0 {
			if _, ok := live[c]; !ok {
				live[c] = p.preLive[c]
			}
			live[c]--
		}
	}
	return count
}

// preemptOf reclaims n of one cluster's candidates (those outside their
// minimum lease first) and provisions cluster ci's standard nodes on
// their machines.
func (p *planner) preemptOf(cands []int32, leased map[int32]bool, n int, ci int32) {
	// Machines ci's booking claimed come first in cands: their nodes
	// were told they would go.
	k := 0
	for k < len(cands) && k < n && p.claimedFor(cands[k], ci) {
		p.reclaim(cands[k], domain.CausePreempted, "its machine is claimed by a booking, as the node was told")
		p.provision(ci, p.nMachine[cands[k]], domain.Standard, true)
		k++
	}
	if cands, n = cands[k:], n-k; n == 0 || len(cands) == 0 {
		return
	}
	free := 0 // not leased: first in cands
	for free < len(cands) && !leased[cands[free]] {
		free++
	}
	vs := p.victims(p.nCluster[cands[0]], cands[:free], min(n, free))
	if n > free {
		for _, v := range p.victims(p.nCluster[cands[0]], cands[free:], n-free) {
			v.why += "; inside its minimum lease, but no other node could serve"
			vs = append(vs, v)
		}
	}
	for _, v := range vs {
		p.reclaim(v.ni, domain.CausePreempted, v.why)
		p.provision(ci, p.nMachine[v.ni], domain.Standard, true)
	}
}

// fartherAbove is betterVictim with the clusters' live counts as the
// choice so far leaves them (live, where it has taken any).
func (p *planner) fartherAbove(a, b int32, live map[int32]int32) bool {
	ca, cb := p.nCluster[a], p.nCluster[b]
	if ca != cb && ca >= 0 && cb >= 0 {
		la, lb := p.preLive[ca], p.preLive[cb]
		if v, ok := live[ca]; ok {
			la = v
		}
		if v, ok := live[cb]; ok {
			lb = v
		}
		// la/w(ca) vs lb/w(cb), by cross-multiplication.
		x, y := int64(la)*int64(weight(&p.s.Clusters[cb])), int64(lb)*int64(weight(&p.s.Clusters[ca]))
		if x != y {
			return x > y
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
