package allocator

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

// victim is a node chosen to go, and why it rather than another.
type victim struct {
	ni  int32
	why string
}

// harm is what taking a set of nodes costs their tenant, compared in
// order: protected work hit, work lost, jobs stopped, then how young the
// nodes are (the sum of their places in youngest-first order: younger
// goes first when all else is equal).
type harm struct {
	protected, jobs int32
	lost            int64
	rank            int64
}

func (a harm) add(b harm) harm {
	return harm{a.protected + b.protected, a.jobs + b.jobs, a.lost + b.lost, a.rank + b.rank}
}

func (a harm) less(b harm) bool {
	switch {
	case a.protected != b.protected:
		return a.protected < b.protected
	case a.lost != b.lost:
		return a.lost < b.lost
	case a.jobs != b.jobs:
		return a.jobs < b.jobs
	}
	return a.rank < b.rank
}

// load is what node ni runs (Config.Load); not known without one.
func (p *planner) load(ni int32) domain.NodeLoad {
	if p.cfg.Load == nil || int(ni) >= len(p.s.Nodes) {
		return domain.NodeLoad{}
	}
	return p.cfg.Load(p.s.Nodes[ni])
}

// victims chooses k of cluster ci's nodes among cands (live nodes of the
// cluster) to give up, in the order they go: nodes not ready yet, then
// ready idle ones, then surplus members of gangs above their minimum,
// then the set of busy nodes whose loss hurts least (leastHarm); the
// youngest first within each. cands is reordered.
func (p *planner) victims(ci int32, cands []int32, k int) []victim {
	k = min(k, len(cands))
	if k <= 0 {
		return nil
	}
	slices.SortFunc(cands, p.youngerFirst)
	out := make([]victim, 0, k)
	i := 0
	for ; i < len(cands) && len(out) < k; i++ {
		ni := cands[i]
		n := p.s.Nodes[ni]
		switch {
		case ci < 0:
			out = append(out, victim{ni, "its cluster is gone"})
		case n.State == domain.NodePending:
			out = append(out, victim{ni, "not started yet"})
		case n.State == domain.NodeProvisioning:
			out = append(out, victim{ni, "not ready yet"})
		case p.busyRank(n) == 0:
			out = append(out, victim{ni, "idle"})
		default:
			return p.leastHarm(ci, cands[i:], k, out)
		}
	}
	return out
}

// gangOf is what the plan knows of one gang of a cluster: its live ready
// members and what stopping it costs.
type gangOf struct {
	members, min, surplus int
	lost                  int64
	protected             bool
	priority              int64
}

// leastHarm appends to out, up to k, the busy ready nodes of cluster ci
// among rest (youngest first) whose loss hurts least: surplus gang
// members first, then the set of gangs and single nodes of least harm
// (an exact knapsack over the nodes still needed: a gang costs all its
// members' lost work however few of them go, so once hit it gives all of
// its nodes before another gang is hit).
func (p *planner) leastHarm(ci int32, rest []int32, k int, out []victim) []victim {
	loads := make([]domain.NodeLoad, len(rest))
	known := false
	for i, ni := range rest {
		loads[i] = p.load(ni)
		known = known || loads[i].Gang != "" || loads[i].LostGPUSeconds > 0 || loads[i].Protected || loads[i].Priority != 0
	}
	if !known {
		for _, ni := range rest[:k-len(out)] {
			out = append(out, victim{ni, "the youngest busy node (nothing is known of its work)"})
		}
		return out
	}
	gangs := p.gangsOf(ci)
	// Surplus members above a gang's minimum, youngest first.
	taken := make([]bool, len(rest))
	for i, ni := range rest {
		g := gangs[loads[i].Gang]
		if len(out) == k {
			return out
		}
		if loads[i].Gang == "" || g == nil || g.surplus == 0 {
			continue
		}
		g.surplus--
		taken[i] = true
		out = append(out, victim{ni, fmt.Sprintf("a surplus member of gang %s (%d running, %d needed)", loads[i].Gang, g.members, g.min)})
	}
	items := p.harmItems(rest, loads, taken, gangs)
	for _, it := range lowestFirst(items, k-len(out)) {
		for j, ni := range it.nodes {
			if len(out) == k {
				break
			}
			out = append(out, victim{ni, it.why(j)})
		}
	}
	return out
}

// gangsOf sums cluster ci's gangs over its live ready nodes.
func (p *planner) gangsOf(ci int32) map[string]*gangOf {
	gangs := map[string]*gangOf{}
	for _, ni := range p.nodesOf(ci) {
		if !p.liveNode(ni) || p.s.Nodes[ni].State != domain.NodeReady {
			continue
		}
		l := p.load(ni)
		if l.Gang == "" {
			continue
		}
		g := gangs[l.Gang]
		if g == nil {
			g = &gangOf{}
			gangs[l.Gang] = g
		}
		g.members++
		g.min = max(g.min, l.GangMin)
		g.lost += l.LostGPUSeconds
		g.protected = g.protected || l.Protected
		g.priority = max(g.priority, l.Priority)
	}
	for _, g := range gangs {
		if g.min > 0 && g.members > g.min {
			g.surplus = g.members - g.min
		}
	}
	return gangs
}

// harmItem is a gang, or a node whose work is its own: the nodes it gives
// (youngest first) and what taking any of them costs.
type harmItem struct {
	gang     string
	nodes    []int32
	cost     harm
	priority int64
}

// above orders items by how much their tenant asks to keep them:
// protected work above the rest, then by priority.
func (it *harmItem) above(o *harmItem) int {
	if c := cmp.Compare(it.cost.protected, o.cost.protected); c != 0 {
		return c
	}
	return cmp.Compare(it.priority, o.priority)
}

func (it *harmItem) why(j int) string {
	h := float64(it.cost.lost) / 3600
	prot := ""
	if it.cost.protected > 0 {
		prot = "; protected by its tenant, but nothing less harmful could serve"
	}
	switch {
	case it.gang == "":
		return fmt.Sprintf("least harm: %.1f GPU-hours of work since its last checkpoint%s", h, prot)
	case j == 0:
		return fmt.Sprintf("least harm: stops gang %s (%.1f GPU-hours since its last checkpoint)%s", it.gang, h, prot)
	}
	return fmt.Sprintf("with the rest of gang %s, already stopped", it.gang)
}

// harmItems groups the nodes of rest not taken into items, in order of
// their youngest node.
func (p *planner) harmItems(rest []int32, loads []domain.NodeLoad, taken []bool, gangs map[string]*gangOf) []*harmItem {
	// One array for the items and one for single nodes' lists: a plan
	// over thousands of busy nodes does not allocate each.
	store := make([]harmItem, 0, len(rest))
	items := make([]*harmItem, 0, len(rest))
	byGang := map[string]*harmItem{}
	for i, ni := range rest {
		if taken[i] {
			continue
		}
		l := loads[i]
		if it := byGang[l.Gang]; l.Gang != "" && it != nil {
			it.nodes = append(it.nodes, ni)
			continue
		}
		store = append(store, harmItem{gang: l.Gang, nodes: rest[i : i+1 : i+1], cost: harm{jobs: 1, lost: l.LostGPUSeconds, rank: int64(len(items))}, priority: l.Priority})
		it := &store[len(store)-1]
		if l.Protected {
			it.cost.protected = 1
		}
		if g := gangs[l.Gang]; l.Gang != "" && g != nil {
			it.cost.lost, it.priority = g.lost, g.priority
			if g.protected {
				it.cost.protected = 1
			}
			byGang[l.Gang] = it
		}
		items = append(items, it)
	}
	return items
}

// lowestFirst returns the items to take for k nodes: among those no more
// kept (above) than the least kept level that can give k nodes, the
// knapsack's choice. So a high-priority job is stopped only when the
// lower ones cannot give the nodes, whatever they would lose.
func lowestFirst(items []*harmItem, k int) []*harmItem {
	levels := slices.Clone(items)
	slices.SortStableFunc(levels, (*harmItem).above)
	n := 0
	for i, it := range levels {
		n += len(it.nodes)
		if n < k && i < len(levels)-1 {
			continue
		}
		if i < len(levels)-1 && levels[i+1].above(it) == 0 {
			continue // the whole level goes in
		}
		var sub []*harmItem
		for _, x := range items {
			if x.above(it) <= 0 {
				sub = append(sub, x)
			}
		}
		return knapsack(sub, k)
	}
	return nil
}

// maxKnapsack bounds the exact choice: items times nodes needed. Above
// it (a cluster of thousands of busy nodes giving up thousands), the
// table would take hundreds of megabytes and the plan a large part of a
// second; the choice is then cheapestPerNode's.
const maxKnapsack = 1 << 18

// knapsack returns the items of least total harm that give at least k
// nodes (all of them if they cannot), in their order. dp[j] is the least
// harm that gives j nodes (k: k or more) from the items seen so far;
// from[g*(k+1)+j] the j that item g was added to, where it made dp[j].
func knapsack(items []*harmItem, k int) []*harmItem {
	if k <= 0 {
		return nil
	}
	if len(items)*(k+1) > maxKnapsack {
		return cheapestPerNode(items, k)
	}
	dp := make([]harm, k+1)
	ok := make([]bool, k+1)
	ok[0] = true
	cells := make([]int32, len(items)*(k+1))
	for i := range cells {
		cells[i] = -1
	}
	from := func(g int) []int32 { return cells[g*(k+1) : (g+1)*(k+1)] }
	for g, it := range items {
		from := from(g)
		for j := k; j >= 0; j-- {
			if !ok[j] {
				continue
			}
			nj := min(k, j+len(it.nodes))
			if c := dp[j].add(it.cost); nj != j && (!ok[nj] || c.less(dp[nj])) {
				dp[nj], ok[nj], from[nj] = c, true, int32(j)
			}
		}
	}
	j := k
	for !ok[j] {
		j-- // fewer nodes than asked: all there are
	}
	var chosen []*harmItem
	for g := len(items) - 1; g >= 0 && j > 0; g-- {
		if f := from(g)[j]; f >= 0 {
			chosen = append(chosen, items[g])
			j = int(f)
		}
	}
	slices.Reverse(chosen)
	return chosen
}

// cheapestPerNode is the choice for k nodes when the exact one is too
// large to make: items by harm per node they give (protected ones last,
// then the least work lost per node, the fewest jobs per node, the
// youngest), taken whole until k nodes are covered; the last may be cut.
// Gangs still go whole before another is hit, as in the exact choice.
func cheapestPerNode(items []*harmItem, k int) []*harmItem {
	order := slices.Clone(items)
	slices.SortStableFunc(order, func(a, b *harmItem) int {
		if c := cmp.Compare(a.cost.protected, b.cost.protected); c != 0 {
			return c
		}
		na, nb := float64(len(a.nodes)), float64(len(b.nodes))
		if c := cmp.Compare(float64(a.cost.lost)/na, float64(b.cost.lost)/nb); c != 0 {
			return c
		}
		if c := cmp.Compare(float64(a.cost.jobs)/na, float64(b.cost.jobs)/nb); c != 0 {
			return c
		}
		return cmp.Compare(a.cost.rank, b.cost.rank)
	})
	n := 0
	for i, it := range order {
		if n += len(it.nodes); n >= k {
			order = order[:i+1]
			break
		}
	}
	slices.SortFunc(order, func(a, b *harmItem) int { return cmp.Compare(a.cost.rank, b.cost.rank) })
	return order
}
