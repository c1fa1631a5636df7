package allocator

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/sparecap/sparecap/internal/domain"
)

// A cluster whose preemptible target may be of several GPU types is
// planned as one facet per type, each a row of its type's partition:
// partitions stay independent. The home facet is the cluster's own row
// (its type: its standard demand and that type's share of the target);
// each other type's facet has the ID FacetID(cluster, type), no standard
// demand and its type's share. A node is planned under the facet of its
// GPU type. What the plan says of a facet is said of its cluster
// (RealID), and the facets' states merge into the cluster's (Merge).
// The controller plans through Faceted, which does this.

// FacetSep separates a cluster's ID from a GPU type in a facet's ID
// (cluster IDs never hold it).
const FacetSep = "/"

// FacetID is the ID of cluster id's facet of GPU type t.
func FacetID(id, t string) string { return id + FacetSep + t }

// RealID is the cluster a facet ID (or a cluster's own ID) stands for.
func RealID(id string) string {
	real, _, _ := strings.Cut(id, FacetSep)
	return real
}

// Types are the GPU types c's preemptible target may be of, in its
// order of preference: its PreemptibleGPUTypes, or its own type.
func Types(c *domain.Cluster) []string {
	if len(c.PreemptibleGPUTypes) == 0 {
		return []string{c.GPUType}
	}
	return c.PreemptibleGPUTypes
}

// Facets is c as the planner sees it, given the split of its target by
// type: the home row first, then a row per other type, in c's order, then
// one per type of more that it no longer lists (target 0: its nodes
// there go). A cluster of one type is itself.
func Facets(c domain.Cluster, split map[string]int, more ...string) []domain.Cluster {
	types := Types(&c)
	for _, t := range more {
		if !slices.Contains(types, t) {
			types = append(slices.Clip(types), t)
		}
	}
	if len(types) == 1 && types[0] == c.GPUType && split == nil {
		return []domain.Cluster{c}
	}
	home := c
	home.DesiredPreemptibleGPUs, home.RequestedPreemptibleGPUs, home.MaxPreemptibleGPUs = split[c.GPUType], 0, 0
	out := []domain.Cluster{home}
	for _, t := range types {
		if t == c.GPUType {
			continue
		}
		f := c
		f.ID, f.GPUType, f.NumGPUs = FacetID(c.ID, t), t, 0
		f.DesiredPreemptibleGPUs, f.RequestedPreemptibleGPUs, f.MaxPreemptibleGPUs = split[t], 0, 0
		out = append(out, f)
	}
	return out
}

// NodeFacet is the row ID node n of cluster c is planned under: the
// facet of its GPU type (a node of before, with none, is c's own).
func NodeFacet(n *domain.Node, c *domain.Cluster) string {
	if n.GPUType == "" || n.GPUType == c.GPUType {
		return c.ID
	}
	return FacetID(c.ID, n.GPUType)
}

// Pool is what the spread knows of one GPU type's pool in the
// cluster's region: its preemptible price (micro-dollars per GPU-hour,
// 0 unknown), the GPUs it could lend the cluster now (-1 unknown), and
// how often it reclaims (reclaims per node-hour lately; 0 none seen or
// unknown).
type Pool struct {
	Price    uint64
	Room     int
	Reclaims float64
}

// Spread splits c's preemptible target among its types, given the
// preemptible GPUs it holds of each (held) and their pools. Types priced
// above c's cap get nothing (their nodes go). What it holds stays where
// it is (no node is reclaimed only to move back to a preferred type),
// within the target, the least preferred given up first; the rest goes
// to the types in the strategy's order, each as much as its pool has
// room for; what none has room for stays on the nodes of types it no
// longer lists (until the types it lists can take their place), and the
// rest waits on the first.
func Spread(c *domain.Cluster, held map[string]int, pools map[string]Pool, capMicros uint64) map[string]int {
	capped := func(t string) bool { return capMicros > 0 && pools[t].Price > capMicros }
	order := slices.DeleteFunc(strategyOrder(c, pools), capped)
	split := make(map[string]int, len(order))
	left := c.TargetPreemptibleGPUs()
	for _, t := range order {
		k := min(held[t], left)
		split[t], left = k, left-k
	}
	for _, t := range order {
		if left <= 0 {
			break
		}
		room := pools[t].Room
		if room < 0 {
			room = left
		}
		k := min(room, left)
		split[t], left = split[t]+k, left-k
	}
	for _, t := range slices.Sorted(maps.Keys(held)) {
		if left > 0 && !slices.Contains(Types(c), t) && !capped(t) && held[t] > 0 {
			k := min(held[t], left)
			split[t], left = k, left-k
		}
	}
	if left > 0 && len(order) > 0 {
		split[order[0]] += left
	}
	return split
}

// Strategies of a preemptible target over several types.
const (
	InOrder                = "in-order"
	LowestPrice            = "lowest-price"
	CapacityOptimized      = "capacity-optimized"
	PriceCapacityOptimized = "price-capacity-optimized"
)

// strategyOrder is c's types in the order its strategy tries them:
// in-order as listed; lowest-price by price; capacity-optimized by how
// often the pool reclaims (least first), then room (most first);
// price-capacity-optimized those with room for the whole target first,
// by price then reclaims, then the rest by room. Ties keep c's order.
func strategyOrder(c *domain.Cluster, pools map[string]Pool) []string {
	order := slices.Clone(Types(c))
	want := c.TargetPreemptibleGPUs()
	byPrice := func(a, b string) int { return cmp.Compare(pools[a].Price, pools[b].Price) }
	byRoom := func(a, b string) int { return cmp.Compare(pools[b].Room, pools[a].Room) }
	byReclaims := func(a, b string) int { return cmp.Compare(pools[a].Reclaims, pools[b].Reclaims) }
	switch c.PreemptibleStrategy {
	case LowestPrice:
		slices.SortStableFunc(order, byPrice)
	case CapacityOptimized:
		slices.SortStableFunc(order, func(a, b string) int { return cmp.Or(byReclaims(a, b), byRoom(a, b)) })
	case PriceCapacityOptimized:
		fits := func(t string) bool { return pools[t].Room < 0 || pools[t].Room >= want }
		slices.SortStableFunc(order, func(a, b string) int {
			if fa, fb := fits(a), fits(b); fa != fb {
				if fa {
					return -1
				}
				return 1
			} else if fa {
				return cmp.Or(byPrice(a, b), byReclaims(a, b))
			}
			return byRoom(a, b)
		})
	}
	return order
}

// Merge is the state of cluster c from its facets' states (the home
// facet's first): standard nodes and status are the home facet's, the
// preemptible GPUs allocated and the fair shares the facets' sums; the
// target is unmet while the sum is below it, for the first unmet
// facet's reason.
func Merge(c *domain.Cluster, states []ClusterState) ClusterState {
	out := ClusterState{ClusterID: c.ID}
	for i, s := range states {
		if i == 0 {
			out.Status, out.StandardGPUs = s.Status, s.StandardGPUs
		}
		out.AllocatedPreemptibleGPUs += s.AllocatedPreemptibleGPUs
		out.FairShareGPUs += s.FairShareGPUs
		if out.Unfulfilled == domain.UnfulfilledNone && s.Unfulfilled != domain.UnfulfilledNone {
			out.Unfulfilled, out.Message = s.Unfulfilled, s.Message
		}
	}
	if out.AllocatedPreemptibleGPUs >= c.TargetPreemptibleGPUs() {
		out.Unfulfilled, out.Message = domain.UnfulfilledNone, ""
	}
	return out
}
