package allocator

import (
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// Plan plans the partitions to be planned at now (see Partitioned) and
// those with's rows fall in, the latter with those rows in place of the
// stored ones. It returns the plan, with the NextWake of every partition
// (planned or settled), the clusters and nodes of the partitions it
// planned (the plan's Clusters line up with them, its Reclaims name nodes
// of them; shared: not to be changed) and the token to settle them with once the plan is
// committed, or changed nothing. A partition planned with with's rows is
// not settled by it: its rows in the store did not change.
func (pp *Partitioned) Plan(now time.Time, cfg Config, with With) (Snapshot, Plan, Token) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	extra := pp.withParts(with)
	var (
		pl      Plan
		tok     Token
		planned []Snapshot
	)
	for _, p := range append(slices.Clip(pp.order), extra...) {
		w, changed := with.of(p)
		if !changed && !p.dirty && (p.wake.IsZero() || now.Before(p.wake)) {
			pl.NextWake = earliest(pl.NextWake, p.wake)
			continue
		}
		s := Snapshot{Machines: p.machines, Reservations: pp.res, Clusters: p.clusters, Nodes: p.nodes}
		if changed {
			s = w.apply(s)
		}
		// Through the part's planner, which keeps its indexes (with a
		// request's rows, those of its machines and nodes still serve).
		ppl := p.planner.Compute(s, now, cfg)
		if pp.parts[p.key] == p {
			tok.parts = append(tok.parts, settling{p: p, version: p.version, wake: ppl.NextWake, with: changed})
		}
		planned = append(planned, s)
		merge(&pl, ppl)
	}
	// Compute places every partition's standard nodes before any
	// partition's preemptible ones: the same order, so nodes are made (and
	// numbered) as a whole plan would make them.
	slices.SortStableFunc(pl.Provisions, func(a, b Provision) int {
		return classRank(a.Class) - classRank(b.Class)
	})
	return joined(planned, pp.res), pl, tok
}

// joined is the snapshot of the partitions planned: their clusters and
// nodes, in order (a plan's Clusters line up with them), without a copy
// for one partition. Its machines are left out: nobody reads them from it.
func joined(planned []Snapshot, res []domain.Reservation) Snapshot {
	switch len(planned) {
	case 0:
		return Snapshot{Reservations: res}
	case 1:
		s := planned[0]
		return Snapshot{Reservations: res, Clusters: slices.Clip(s.Clusters), Nodes: slices.Clip(s.Nodes)}
	}
	out := Snapshot{Reservations: res}
	for _, s := range planned {
		out.Clusters = append(out.Clusters, s.Clusters...)
		out.Nodes = append(out.Nodes, s.Nodes...)
	}
	return out
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

// apply returns s with w's rows in place of those of their IDs, new
// clusters last; s's slices are not changed.
func (w With) apply(s Snapshot) Snapshot {
	if len(w.Clusters) > 0 {
		s.Clusters = slices.Clone(s.Clusters)
		for _, c := range w.Clusters {
			if i := slices.IndexFunc(s.Clusters, func(o domain.Cluster) bool { return o.ID == c.ID }); i >= 0 {
				s.Clusters[i] = c
			} else {
				s.Clusters = append(s.Clusters, c)
			}
		}
	}
	if len(w.Nodes) > 0 {
		s.Nodes = slices.Clone(s.Nodes)
		for _, n := range w.Nodes {
			if i := slices.IndexFunc(s.Nodes, func(o *domain.Node) bool { return o.ID == n.ID }); i >= 0 {
				s.Nodes[i] = n
			}
		}
	}
	return s
}
