package allocator

import (
	"slices"
	"time"

	"github.com/sparecap/sparecap/internal/domain"
)

// part is one partition's share of the fleet as Partitioned keeps it: its
// machines, clusters and live nodes in the store's order (creation time,
// then ID), whether an input of its plan changed since it was last
// settled (dirty), and when its last plan wakes.
type part struct {
	key      partKey
	machines []domain.Machine
	clusters []domain.Cluster
	nodes    []*domain.Node
	// version counts the changes of its inputs; dirty: one came since the
	// part was last settled.
	version uint64
	dirty   bool
	// wake is the NextWake of its last settled plan (zero: none).
	wake time.Time
	// planner keeps the part's indexes between its plans.
	planner Planner
}

// first is the creation key of the part's first machine, or of its first
// cluster for a part with no machines: parts are planned in that order,
// the order Compute numbers partitions in.
func (p *part) first() (time.Time, string, bool) {
	if len(p.machines) > 0 {
		return p.machines[0].CreatedAt, p.machines[0].ID, true
	}
	if len(p.clusters) > 0 {
		return p.clusters[0].CreatedAt, p.clusters[0].ID, false
	}
	return time.Time{}, "", false
}

// partBefore orders parts as Compute numbers partitions: those with
// machines by their first machine, then those with clusters only by their
// first cluster.
func partBefore(a, b *part) int {
	ta, ia, ma := a.first()
	tb, ib, mb := b.first()
	if ma != mb {
		if ma {
			return -1
		}
		return 1
	}
	if c := domain.ByCreated(ta, ia, tb, ib); c != 0 {
		return c
	}
	return cmpString(a.key.region+"\x00"+a.key.gpuType, b.key.region+"\x00"+b.key.gpuType)
}

// upsertRows returns rows (in the store's order) with ups replacing the
// rows of their IDs or joining them, and the rows of gone IDs left out: a
// new slice when anything changed (a plan's kept indexes are keyed by the
// slices they were built from), rows itself otherwise. Each change costs a binary search and at most one
// move of the rows after it (a commit writes a few rows of a partition).
func upsertRows[T any](rows, ups []T, gone []rowKey, key func(T) (time.Time, string)) []T {
	if len(ups) == 0 && len(gone) == 0 {
		return rows
	}
	out := make([]T, len(rows), len(rows)+len(ups))
	copy(out, rows)
	at := func(t time.Time, id string) (int, bool) {
		return slices.BinarySearchFunc(out, id, func(r T, id string) int {
			rt, rid := key(r)
			return domain.ByCreated(rt, rid, t, id)
		})
	}
	for _, g := range gone {
		i, found := at(g.created, g.id)
		if !g.known {
			// Its creation time is not known (a cluster gone, which is
			// rare): found by a walk.
			i = slices.IndexFunc(out, func(r T) bool { _, rid := key(r); return rid == g.id })
			found = i >= 0
		}
		if found {
			out = slices.Delete(out, i, i+1)
		}
	}
	for _, u := range ups {
		t, id := key(u)
		if i, found := at(t, id); found {
			out[i] = u
		} else {
			out = slices.Insert(out, i, u)
		}
	}
	return out
}

// rowKey names a row gone: its ID and, when known, its creation time.
type rowKey struct {
	created time.Time
	known   bool
	id      string
}

func machineKey(m domain.Machine) (time.Time, string) { return m.CreatedAt, m.ID }
func clusterKey(c domain.Cluster) (time.Time, string) { return c.CreatedAt, c.ID }
func nodeKey(n *domain.Node) (time.Time, string)      { return n.CreatedAt, n.ID }
func machinePlanned(a, b *domain.Machine) bool {
	return a.OutOfService == b.OutOfService && a.CooldownUntil.Equal(b.CooldownUntil) && a.ReservationID == b.ReservationID &&
		a.ClaimedBy == b.ClaimedBy && a.PreemptAt.Equal(b.PreemptAt) &&
		a.GPUs == b.GPUs && a.Region == b.Region && a.GPUType == b.GPUType && a.CreatedAt.Equal(b.CreatedAt)
}

// clusterPlanned reports whether a and b are the same to a plan: the
// cluster's demand, and how long its target has been unmet (who gets the
// next freed node). Its status is the plan's output, written by the plan
// that computed it: a plan of unchanged inputs computes it again.
func clusterPlanned(a, b *domain.Cluster) bool {
	return a.NumGPUs == b.NumGPUs && a.TargetPreemptibleGPUs() == b.TargetPreemptibleGPUs() && a.Weight == b.Weight &&
		a.Deleting == b.Deleting && a.BillingType == b.BillingType && a.ProjectID == b.ProjectID && a.CreatedAt.Equal(b.CreatedAt) &&
		a.UnmetSince.Equal(b.UnmetSince) && a.Region == b.Region && a.GPUType == b.GPUType && a.ActiveAt.Equal(b.ActiveAt)
}

// nodePlanned reports whether a and b are the same to a plan: what the
// allocator reads of a node (a step that only records its notice, or an
// error, changes nothing a plan sees). Of its state a plan reads its facts
// (factOf) and which live state it is in: a drain's end (draining to
// removing) is no change to it, the node holds its machine and counts
// for nobody either way.
func nodePlanned(a, b *domain.Node) bool {
	return factOf(a) == factOf(b) && (a.State == b.State || !a.State.Live()) && a.Class == b.Class && a.GPUs == b.GPUs && a.MachineID == b.MachineID && a.ClusterID == b.ClusterID &&
		a.CreatedAt.Equal(b.CreatedAt) && a.ReadyAt.Equal(b.ReadyAt) && a.ClassSince.Equal(b.ClassSince)
}

// use puts w's rows in the part for one plan: a cluster or node of w in
// place of the stored row of its ID, a new cluster appended last (a
// create is the newest cluster); restore puts the stored rows back. In
// place, under Partitioned's lock: no copy of the part's rows per
// request.
func (p *part) use(w With) (restore func()) {
	if len(w.Clusters)+len(w.Nodes) == 0 {
		return func() {}
	}
	n := len(p.clusters)
	before := p.clusters
	var swappedC []int
	var keptC []domain.Cluster
	for _, c := range w.Clusters {
		if i, ok := slices.BinarySearchFunc(p.clusters[:n], c, func(r, c domain.Cluster) int {
			return domain.ByCreated(r.CreatedAt, r.ID, c.CreatedAt, c.ID)
		}); ok {
			swappedC, keptC = append(swappedC, i), append(keptC, p.clusters[i])
			p.clusters[i] = c
			continue
		}
		p.clusters = append(p.clusters, c)
	}
	if len(p.clusters) > n {
		p.planner.clustersResized(before)
	}
	var swappedN []int
	var keptN []*domain.Node
	for _, nd := range w.Nodes {
		if i := slices.IndexFunc(p.nodes, func(o *domain.Node) bool { return o.ID == nd.ID }); i >= 0 {
			swappedN, keptN = append(swappedN, i), append(keptN, p.nodes[i])
			p.nodes[i] = nd
			p.planner.nodeChanged(p.nodes, i)
		}
	}
	return func() {
		for k, i := range swappedC {
			p.clusters[i] = keptC[k]
		}
		if len(p.clusters) > n {
			grown := p.clusters
			clear(p.clusters[n:]) // nothing kept alive past the part's end
			p.clusters = p.clusters[:n]
			p.planner.clustersResized(grown)
		}
		for k, i := range swappedN {
			p.nodes[i] = keptN[k]
			p.planner.nodeChanged(p.nodes, i)
		}
	}
}
