package allocator

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
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
		pl   Plan
		tok  Token
		jobs []partJob
	)
	for _, p := range append(slices.Clip(pp.order), pp.withParts(with)...) {
		w, changed := with.of(p)
		if !changed && !p.dirty && (p.wake.IsZero() || now.Before(p.wake)) {
			pl.NextWake = earliest(pl.NextWake, p.wake)
			continue
		}
		jobs = append(jobs, partJob{p: p, w: w, changed: changed})
	}
	pp.planParts(jobs, now, cfg)
	for _, j := range jobs {
		if pp.parts[j.p.key] == j.p {
			tok.parts = append(tok.parts, settling{p: j.p, version: j.p.version, wake: j.pl.NextWake, with: j.changed})
		}
		tok.planned = append(tok.planned, j.p.key)
		pl.Clusters = append(pl.Clusters, j.states...)
		merge(&pl, j.pl)
	}
	// Compute places every partition's standard nodes before any
	// partition's preemptible ones: the same order, so nodes are made (and
	// numbered) as a whole plan would make them.
	slices.SortStableFunc(pl.Provisions, func(a, b Provision) int {
		return classRank(a.Class) - classRank(b.Class)
	})
	return pl, tok
}

// partJob is one partition to plan, with a request's rows (w), and its
// plan: its Clusters left out, the states that change in states.
type partJob struct {
	p       *part
	w       With
	changed bool
	pl      Plan
	states  []ClusterState
}

// planParts plans each job's partition. Partitions share nothing (each
// has its own rows and planner), so a plan of many large ones (a new
// leader's first) plans them on up to four goroutines; the results are
// merged in order after, as if planned one by one.
func (pp *Partitioned) planParts(jobs []partJob, now time.Time, cfg Config) {
	nodes := 0
	for _, j := range jobs {
		nodes += len(j.p.nodes)
	}
	workers := min(runtime.GOMAXPROCS(0), 4, len(jobs))
	if workers <= 1 || nodes < 2*parallelMin {
		for i := range jobs {
			pp.planPart(&jobs[i], now, cfg)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(jobs); i = int(next.Add(1) - 1) {
				pp.planPart(&jobs[i], now, cfg)
			}
		})
	}
	wg.Wait()
}

// planPart plans j's part with j's rows in place (swapped in for the plan
// and back after: nothing outside pp.mu reads the part's rows), through
// the part's planner, which keeps its indexes and working memory.
func (pp *Partitioned) planPart(j *partJob, now time.Time, cfg Config) {
	p := j.p
	restore := p.use(j.w)
	defer restore()
	s := Snapshot{Machines: p.machines, Reservations: pp.res, Clusters: p.clusters, Nodes: p.nodes}
	j.pl = p.planner.computeKept(s, now, cfg)
	for i, cs := range j.pl.Clusters {
		if StateChanged(&s.Clusters[i], cs, now) {
			j.states = append(j.states, cs)
		}
	}
	j.pl.Clusters = nil
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
