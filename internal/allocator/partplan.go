package allocator

import (
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Plan plans the partitions to be planned at now (see Partitioned) and
// those with's rows fall in, the latter with those rows in place of the
// stored ones. It returns the plan, whose Clusters are only the clusters
// whose state changes from what they store (StateChanged), with the
// NextWake of every partition (planned or settled), and the token naming
// the partitions it planned, to settle them with once the plan is
// committed (Committed), or changed nothing (Settle). A partition planned
// with with's rows is not settled by Settle: its rows in the store did
// not change.
func (pp *Partitioned) Plan(now time.Time, cfg Config, with With) (Plan, Token) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	var (
		pl  Plan
		tok Token
	)
	for _, p := range append(slices.Clip(pp.order), pp.withParts(with)...) {
		w, changed := with.of(p)
		if !changed && !p.dirty && (p.wake.IsZero() || now.Before(p.wake)) {
			pl.NextWake = earliest(pl.NextWake, p.wake)
			continue
		}
		ppl := pp.planPart(p, w, now, cfg, &pl)
		if pp.parts[p.key] == p {
			tok.parts = append(tok.parts, settling{p: p, version: p.version, wake: ppl.NextWake, with: changed})
		}
		tok.planned = append(tok.planned, p.key)
		merge(&pl, ppl)
	}
	// Compute places every partition's standard nodes before any
	// partition's preemptible ones: the same order, so nodes are made (and
	// numbered) as a whole plan would make them.
	slices.SortStableFunc(pl.Provisions, func(a, b Provision) int {
		return classRank(a.Class) - classRank(b.Class)
	})
	return pl, tok
}

// planPart plans part p with w's rows in place (swapped in for the plan
// and back after: nothing outside pp.mu reads the part's rows), through
// the part's planner, which keeps its indexes and working memory; it adds
// to pl the states of the part's clusters that change and returns the
// part's plan (its Clusters left out).
func (pp *Partitioned) planPart(p *part, w With, now time.Time, cfg Config, pl *Plan) Plan {
	restore := p.use(w)
	defer restore()
	s := Snapshot{Machines: p.machines, Reservations: pp.res, Clusters: p.clusters, Nodes: p.nodes}
	ppl := p.planner.computeKept(s, now, cfg)
	for i, cs := range ppl.Clusters {
		if StateChanged(&s.Clusters[i], cs, now) {
			pl.Clusters = append(pl.Clusters, cs)
		}
	}
	ppl.Clusters = nil
	return ppl
}

// StateChanged reports whether cs, a plan's state of cluster c, changes
// what c stores of its state.
func StateChanged(c *domain.Cluster, cs ClusterState, now time.Time) bool {
	if c.Status != cs.Status || c.Unfulfilled != cs.Unfulfilled || c.UnfulfilledMessage != cs.Message {
		return true
	}
	// A cluster unmet before unmet_since existed starts waiting now.
	return !UnmetSince(c.UnmetSince, cs, now).Equal(c.UnmetSince)
}

// Settle marks the partitions of t settled whose inputs did not change
// since t's plan was made, the plan having changed nothing (those planned
// with a request's rows are not: the store does not hold those rows). Each
// keeps its plan's wake-up.
func (pp *Partitioned) Settle(t Token) { pp.settle(t, false) }

// Committed marks the partitions of t settled once t's plan was committed
// with its changes tagged as t's (store.WithTag: Apply with Changes.By),
// which moved no partition: a plan committed is its own fixed point, so
// planning them again would change nothing. A partition whose inputs
// something else changed meanwhile stays to be planned.
func (pp *Partitioned) Committed(t *Token) { pp.settle(*t, true) }

func (pp *Partitioned) settle(t Token, committed bool) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	for _, s := range t.parts {
		if (committed || !s.with) && s.p.version == s.version && pp.parts[s.p.key] == s.p {
			s.p.dirty, s.p.wake = false, s.wake
		}
	}
}

func classRank(c domain.ComputeClass) int {
	if c == domain.Standard {
		return 0
	}
	return 1
}

// merge adds a partition's plan to pl.
func merge(pl *Plan, p Plan) {
	pl.Reclaims = append(pl.Reclaims, p.Reclaims...)
	pl.Provisions = append(pl.Provisions, p.Provisions...)
	pl.Clusters = append(pl.Clusters, p.Clusters...)
	pl.Shortfalls = append(pl.Shortfalls, p.Shortfalls...)
	pl.NextWake = earliest(pl.NextWake, p.NextWake)
}

// earliest is the earlier of two wake-ups (zero: none).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// withParts returns the parts with's clusters would make that do not
// exist yet (a create in a partition no row is in), which are planned but
// never kept.
func (pp *Partitioned) withParts(with With) []*part {
	var extra []*part
	for _, c := range with.Clusters {
		k := partKey{c.Region, c.GPUType}
		if pp.parts[k] != nil || slices.ContainsFunc(extra, func(p *part) bool { return p.key == k }) {
			continue
		}
		extra = append(extra, &part{key: k})
	}
	return extra
}

// of returns what of w falls in p, and whether anything does.
func (w With) of(p *part) (With, bool) {
	var out With
	for _, c := range w.Clusters {
		if c.Region == p.key.region && c.GPUType == p.key.gpuType {
			out.Clusters = append(out.Clusters, c)
		}
	}
	for _, n := range w.Nodes {
		if slices.ContainsFunc(p.nodes, func(o *domain.Node) bool { return o.ID == n.ID }) {
			out.Nodes = append(out.Nodes, n)
		}
	}
	return out, len(out.Clusters)+len(out.Nodes) > 0
}
