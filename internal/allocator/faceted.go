package allocator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Faceted is Partitioned over the facets of the clusters whose
// preemptible target may be of several GPU types, or is under a price cap
// (facets.go): each such cluster is fed to the planner as its facets,
// with its nodes joined to the facet of their type; its plan's rows say
// the cluster again, and its facets' states are merged. Before a plan of
// what changed and after each plan the target is spread again over the
// types (Spread), from the nodes held, the pools' prices at the plan's
// now and reclaims, the cluster's cap and what each facet's plan said of
// its pool; a new spread is a change of the facets' rows. The
// controller's planner (its Price, Cap and Reclaims: controller/pools.go).
type Faceted struct {
	Partitioned
	// Price is the preemptible price of a pool in micro-dollars per
	// GPU-hour at now (0: unknown); Cap parses a cluster's cap (0: none);
	// Reclaims is how often a pool reclaims (Pool.Reclaims), asked only
	// for the strategies that use it. Each may be nil.
	Price    func(region, gpuType string, now time.Time) uint64
	Cap      func(*domain.Cluster) uint64
	Reclaims func(region, gpuType string) float64

	fmu sync.Mutex
	// multi are the stored rows of the clusters of several types; split
	// their targets' spread; states each facet row's last state; held the
	// live preemptible GPUs of each by type; nodes what is known of each
	// of their nodes (cluster, type, GPUs counted in held).
	multi  map[string]domain.Cluster
	split  map[string]map[string]int
	states map[string]ClusterState
	held   map[string]map[string]int
	nodes  map[string]heldNode
	// blocked is when each facet's plan last said its pool gave it less
	// than it asked: its pool counts as full until retryFull has passed.
	blocked map[string]time.Time
	// now is the time of the last plan.
	now time.Time
}

// retryFull is how long a pool that gave a facet less than it asked
// counts as full for the spread: the remainder does not flap between
// types plan by plan.
const retryFull = time.Minute

type heldNode struct {
	cluster, gpuType string
	gpus             int
}

// isMulti: c is planned as its facets, being of several types or of
// one under a price cap (whose target the cap may take away).
func isMulti(c *domain.Cluster) bool {
	t := Types(c)
	return len(t) > 1 || (len(t) == 1 && t[0] != c.GPUType) || c.MaxPreemptiblePrice != ""
}

// heldElsewhere are the types c holds preemptible nodes of that it does
// not list (it listed them before): their facets stay, with no target,
// until the nodes are gone.
func (f *Faceted) heldElsewhere(c *domain.Cluster) []string {
	var out []string
	for _, t := range slices.Sorted(maps.Keys(f.held[c.ID])) {
		if f.held[c.ID][t] > 0 && t != c.GPUType && !slices.Contains(Types(c), t) {
			out = append(out, t)
		}
	}
	return out
}

// facetsOf is c's facets at its split, with those of the types it holds
// nodes of without listing them.
func (f *Faceted) facetsOf(c domain.Cluster) []domain.Cluster {
	return Facets(c, f.split[c.ID], f.heldElsewhere(&c)...)
}

// Load loads s, its clusters of several types as their facets.
func (f *Faceted) Load(s Snapshot) {
	f.fmu.Lock()
	// What the plans said of the facets (their states, the pools that
	// fell short, the spread) outlives a Load: over a store not in memory
	// every plan loads the world afresh.
	if f.states == nil {
		f.split, f.states, f.blocked = map[string]map[string]int{}, map[string]ClusterState{}, map[string]time.Time{}
	}
	f.multi, f.held, f.nodes = map[string]domain.Cluster{}, map[string]map[string]int{}, map[string]heldNode{}
	out := s
	out.Clusters = f.expandClusters(s.Clusters, nil)
	out.Nodes = f.expandNodes(s.Nodes, nil)
	f.fmu.Unlock()
	f.Partitioned.Load(out)
}

// Apply applies ch, its clusters of several types as their facets.
func (f *Faceted) Apply(ch Changes) {
	f.fmu.Lock()
	if f.plain(ch) {
		// No cluster of several types in sight: as Partitioned, at no
		// cost (every commit of a fleet of one type per cluster).
		f.fmu.Unlock()
		f.Partitioned.Apply(ch)
		return
	}
	out := ch
	gone := slices.Clone(ch.GoneClusters)
	out.Clusters = f.expandClusters(ch.Clusters, &gone)
	for _, id := range ch.GoneClusters {
		if c, ok := f.multi[id]; ok {
			for _, t := range Types(&c) {
				if t != c.GPUType {
					gone = append(gone, FacetID(id, t))
				}
			}
			delete(f.multi, id)
			delete(f.split, id)
		}
	}
	out.GoneClusters = gone
	out.Nodes = f.expandNodes(ch.Nodes, ch.GoneNodes)
	f.fmu.Unlock()
	f.Partitioned.Apply(out)
	// A commit tagged by its plan settles the parts it planned: a spread
	// that what it wrote changes is a change of their inputs of its own.
	f.fmu.Lock()
	f.respread(f.now)
	f.fmu.Unlock()
}

// plain: ch has nothing of a cluster of several types.
func (f *Faceted) plain(ch Changes) bool {
	if len(f.multi) > 0 {
		return false
	}
	for i := range ch.Clusters {
		if isMulti(&ch.Clusters[i]) {
			return false
		}
	}
	return true
}

// expandClusters is cs with each cluster of several types as its facets
// (a facet of a type no longer listed gone, into gone).
func (f *Faceted) expandClusters(cs []domain.Cluster, gone *[]string) []domain.Cluster {
	out := make([]domain.Cluster, 0, len(cs))
	for _, c := range cs {
		old, was := f.multi[c.ID]
		if gone != nil && was {
			for _, t := range Types(&old) {
				if t != old.GPUType && !slices.Contains(Types(&c), t) && f.held[c.ID][t] <= 0 {
					*gone = append(*gone, FacetID(c.ID, t))
				}
			}
		}
		if !isMulti(&c) && len(f.heldElsewhere(&c)) == 0 {
			delete(f.multi, c.ID)
			out = append(out, c)
			continue
		}
		f.multi[c.ID] = c
		if f.split[c.ID] == nil {
			f.split[c.ID] = f.first(&c, f.now)
		}
		out = append(out, f.facetsWithStates(c)...)
	}
	return out
}

// facetsWithStates is c's facets, each with its own last state (what
// the planner compares a plan's state with), none before its first plan
// (so that the plan says it).
func (f *Faceted) facetsWithStates(c domain.Cluster) []domain.Cluster {
	fs := f.facetsOf(c)
	for i := range fs {
		st := f.states[fs[i].ID]
		fs[i].Status, fs[i].Unfulfilled, fs[i].UnfulfilledMessage = st.Status, st.Unfulfilled, st.Message
	}
	return fs
}

// expandNodes is ns with the nodes of clusters of several types joined
// to their facets (copies), counting their preemptible GPUs in held.
func (f *Faceted) expandNodes(ns []*domain.Node, gone []string) []*domain.Node {
	for _, id := range gone {
		f.unhold(id)
	}
	out := make([]*domain.Node, len(ns))
	for i, n := range ns {
		out[i] = n
		f.unhold(n.ID)
		c, ok := f.multi[n.ClusterID]
		if !ok {
			continue
		}
		if n.Class == domain.Preemptible && n.State.Live() {
			t := n.GPUType
			if t == "" {
				t = c.GPUType
			}
			if f.held[c.ID] == nil {
				f.held[c.ID] = map[string]int{}
			}
			f.held[c.ID][t] += n.GPUs
			f.nodes[n.ID] = heldNode{c.ID, t, n.GPUs}
		}
		if id := NodeFacet(n, &c); id != c.ID {
			cp := *n
			cp.ClusterID = id
			out[i] = &cp
		}
	}
	return out
}

func (f *Faceted) unhold(id string) {
	if h, ok := f.nodes[id]; ok {
		f.held[h.cluster][h.gpuType] -= h.gpus
		delete(f.nodes, id)
	}
}

// Plan plans as Partitioned does, with's clusters of several types as
// their facets (spread again at now first), and says the plan of the
// clusters again: their merged states (those that change), then spreads
// their targets again.
func (f *Faceted) Plan(now time.Time, cfg Config, with With) (Plan, Token) {
	f.fmu.Lock()
	if len(with.Clusters)+len(with.Nodes) == 0 && len(f.multi) > 0 {
		// The prices of now: a change that puts a type above a cap is
		// planned at once.
		f.respread(now)
	}
	w := with
	w.Clusters = nil
	asked := map[string]domain.Cluster{} // with's clusters of several types
	for _, c := range with.Clusters {
		if isMulti(&c) {
			split := f.split[c.ID]
			if split == nil {
				split = f.first(&c, now)
			}
			asked[c.ID] = c
			w.Clusters = append(w.Clusters, Facets(c, split)...)
		} else {
			w.Clusters = append(w.Clusters, c)
		}
	}
	f.fmu.Unlock()
	pl, tok := f.Partitioned.Plan(now, cfg, w)
	f.fmu.Lock()
	defer f.fmu.Unlock()
	f.now = now
	if len(asked) == 0 && len(f.multi) == 0 && len(f.states) == 0 {
		return pl, tok // as Partitioned's
	}
	f.collapse(&pl, now, asked)
	if len(with.Clusters)+len(with.Nodes) == 0 {
		f.respread(now)
	}
	return pl, tok
}

// collapse says pl of the clusters, not their facets (asked: a request's
// clusters of several types, planned as it would leave them), keeping
// the facets' states.
func (f *Faceted) collapse(pl *Plan, now time.Time, asked map[string]domain.Cluster) {
	cluster := func(id string) (domain.Cluster, bool) {
		if c, ok := asked[id]; ok {
			return c, true
		}
		c, ok := f.multi[id]
		return c, ok
	}
	states := map[string]ClusterState{}
	for i := range pl.Reclaims {
		r := &pl.Reclaims[i]
		if c, ok := cluster(RealID(r.ClusterID)); ok && r.Cause == domain.CauseScaledDown {
			if why := f.whyGone(&c, r.ClusterID, now); why != "" {
				r.Why = why
			}
		}
		r.ClusterID = RealID(r.ClusterID)
	}
	for i := range pl.Provisions {
		pl.Provisions[i].ClusterID = RealID(pl.Provisions[i].ClusterID)
	}
	for i := range pl.Shortfalls {
		pl.Shortfalls[i].ClusterID = RealID(pl.Shortfalls[i].ClusterID)
	}
	touched := map[string]bool{}
	kept := pl.Clusters[:0]
	for _, cs := range pl.Clusters {
		id := RealID(cs.ClusterID)
		if _, ok := cluster(id); !ok {
			kept = append(kept, cs)
			continue
		}
		states[cs.ClusterID] = cs
		// A request's plan's too: what it saw of the pools holds whether
		// or not the request is committed.
		f.states[cs.ClusterID] = cs
		if cs.Unfulfilled == domain.UnfulfilledNoCapacity || cs.Unfulfilled == domain.UnfulfilledFairShare {
			f.blocked[cs.ClusterID] = now
		}
		touched[id] = true
	}
	pl.Clusters = kept
	for id, c := range f.multi {
		// A cap that leaves it no type: its facets' states do not
		// change, its own does.
		if f.short(&c) && c.Unfulfilled != domain.UnfulfilledNoCapacity {
			touched[id] = true
		}
	}
	for _, id := range slices.Sorted(maps.Keys(touched)) {
		c, _ := cluster(id)
		var all []ClusterState
		for _, fc := range f.facetsOf(c) {
			st, ok := states[fc.ID]
			if !ok {
				st = f.states[fc.ID]
			}
			all = append(all, st)
		}
		m := Merge(&c, all)
		f.underCap(&c, &m)
		if StateChanged(&c, m, now) {
			pl.Clusters = append(pl.Clusters, m)
		}
	}
}

// prune forgets what was kept of clusters that are not stored (gone, or
// a request's that was never committed, such as a create refused): a
// tenant's refused creates do not grow the leader's memory.
func (f *Faceted) prune() {
	for id := range f.states {
		if _, ok := f.multi[RealID(id)]; !ok {
			delete(f.states, id)
			delete(f.blocked, id)
		}
	}
	for id, h := range f.held {
		if _, ok := f.multi[id]; !ok && !slices.ContainsFunc(slices.Collect(maps.Values(h)), func(n int) bool { return n > 0 }) {
			delete(f.held, id)
		}
	}
}

// respread spreads each cluster of several types' target again, and
// feeds the planner the facets of those whose spread changed.
func (f *Faceted) respread(now time.Time) {
	f.prune()
	var changed []domain.Cluster
	for _, id := range slices.Sorted(maps.Keys(f.multi)) {
		c := f.multi[id]
		s := f.spread(&c, now)
		if !maps.Equal(s, f.split[id]) {
			f.split[id] = s
			changed = append(changed, f.facetsWithStates(c)...)
		}
	}
	if len(changed) > 0 {
		f.fmu.Unlock()
		f.Partitioned.Apply(Changes{Clusters: changed})
		f.fmu.Lock()
	}
}

// spread is c's target spread over its types at now, from what it
// holds, its pools' prices, reclaims and room, and its cap.
func (f *Faceted) spread(c *domain.Cluster, now time.Time) map[string]int {
	pools := map[string]Pool{}
	for _, fc := range f.facetsOf(*c) {
		p := Pool{Room: -1}
		if f.Price != nil {
			p.Price = f.Price(c.Region, fc.GPUType, now)
		}
		if f.Reclaims != nil && (c.PreemptibleStrategy == CapacityOptimized || c.PreemptibleStrategy == PriceCapacityOptimized) {
			p.Reclaims = f.Reclaims(c.Region, fc.GPUType)
		}
		if at, ok := f.blocked[fc.ID]; ok && now.Before(at.Add(retryFull)) {
			p.Room = 0 // its pool gave it less than it asked, lately
		}
		pools[fc.GPUType] = p
	}
	var capMicros uint64
	if f.Cap != nil {
		capMicros = f.Cap(c)
	}
	return Spread(c, f.held[c.ID], pools, capMicros)
}

// first is the spread of a cluster not spread before at now: from its
// pools' prices and its cap alone, so that a request's plan and the
// commit of that plan (at the plan's now) spread it alike.
func (f *Faceted) first(c *domain.Cluster, now time.Time) map[string]int {
	pools := map[string]Pool{}
	for _, t := range Types(c) {
		p := Pool{Room: -1}
		if f.Price != nil {
			p.Price = f.Price(c.Region, t, now)
		}
		pools[t] = p
	}
	var capMicros uint64
	if f.Cap != nil {
		capMicros = f.Cap(c)
	}
	return Spread(c, f.held[c.ID], pools, capMicros)
}

// underCap says, of a cluster whose every type is priced above its cap
// (its spread short of its target), that this is why its target is not
// met.
func (f *Faceted) underCap(c *domain.Cluster, m *ClusterState) {
	if m.Unfulfilled == domain.UnfulfilledNone && f.short(c) {
		m.Unfulfilled = domain.UnfulfilledNoCapacity
		m.Message = "the preemptible price of every GPU type it may be of is above its cap of $" + c.MaxPreemptiblePrice + " per GPU-hour"
	}
}

// whyGone says why a node of c's facet id goes when its type is no
// longer listed or is priced above c's cap ("": neither).
func (f *Faceted) whyGone(c *domain.Cluster, id string, now time.Time) string {
	t := c.GPUType
	if _, typ, ok := strings.Cut(id, FacetSep); ok {
		t = typ
	}
	if !slices.Contains(Types(c), t) {
		return "its GPU type " + t + " is no longer one the cluster's preemptible target may be of"
	}
	if f.Price == nil || f.Cap == nil {
		return ""
	}
	if capMicros, price := f.Cap(c), f.Price(c.Region, t, now); capMicros > 0 && price > capMicros {
		return fmt.Sprintf("the preemptible price of %s ($%s per GPU-hour) is above the cluster's cap of $%s",
			t, strconv.FormatFloat(float64(price)/1e6, 'f', -1, 64), c.MaxPreemptiblePrice)
	}
	return ""
}

// short: c's spread is short of its target (a cap left it no type).
func (f *Faceted) short(c *domain.Cluster) bool {
	sum := 0
	for _, n := range f.split[c.ID] {
		sum += n
	}
	return sum < c.TargetPreemptibleGPUs()
}

// Finished is Partitioned's, said of the clusters (the caller checks
// that none of a cluster's nodes is left, of any type).
func (f *Faceted) Finished() []string {
	var out []string
	for _, id := range f.Partitioned.Finished() {
		if real := RealID(id); !slices.Contains(out, real) {
			out = append(out, real)
		}
	}
	return out
}

// Reset forgets the world and the facets.
func (f *Faceted) Reset() {
	f.fmu.Lock()
	f.multi, f.split, f.states, f.held, f.nodes, f.blocked = nil, nil, nil, nil, nil, nil
	f.fmu.Unlock()
	f.Partitioned.Reset()
}
