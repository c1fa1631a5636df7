package allocator

import (
	"slices"

	"github.com/sparecap/sparecap/internal/domain"
)

// A part's rows change in place (Partitioned.Apply), a few per commit; the
// part's planner keeps its indexes in step rather than building them
// again from the whole part for every node that comes or goes.

// nodeChanged: the i-th of nodes was replaced in place by a node of the
// same machine and cluster; what the join keeps of it is read again.
func (pl *Planner) nodeChanged(nodes []*domain.Node, i int) {
	if pl.j != nil && same(pl.j.of, nodes) {
		pl.j.facts[i] = factOf(nodes[i])
	}
}

// moveClusters returns clusters (in the store's order) with ups
// replacing the clusters of their IDs or joining them and the clusters of
// gone left out, changed in place. The cluster layout, whose index reads
// the rows, is dropped; the node join's positions of clusters are moved
// along (see clustersResized).
func (pl *Planner) moveClusters(clusters, ups []domain.Cluster, gone []rowKey) []domain.Cluster {
	j := pl.j
	track := pl.tracks(clusters)
	for _, g := range gone {
		i, found := at(clusters, g.created, g.id, clusterKey)
		if !g.known {
			// Its creation time is not known (a cluster gone): found by a walk.
			i = slices.IndexFunc(clusters, func(c domain.Cluster) bool { return c.ID == g.id })
			found = i >= 0
		}
		if found {
			clusters = slices.Delete(clusters, i, i+1)
			if track {
				j.shiftClusters(int32(i), -1)
			}
		}
	}
	for _, c := range ups {
		i, found := at(clusters, c.CreatedAt, c.ID, clusterKey)
		if found {
			clusters[i] = c
			continue
		}
		clusters = slices.Insert(clusters, i, c)
		if track {
			j.shiftClusters(int32(i), 1)
		}
	}
	pl.clustersMoved(track)
	return clusters
}

// clustersResized: clusters were appended to before, or it was cut back
// to what it was before appends (a request's new clusters, planned and
// put back): no node's cluster moved.
func (pl *Planner) clustersResized(before []domain.Cluster) {
	pl.clustersMoved(pl.tracks(before))
}

// tracks reports whether the node join's positions of clusters are
// positions in clusters (the planner's clusters before they move).
func (pl *Planner) tracks(clusters []domain.Cluster) bool {
	j := pl.j
	return j != nil && (j.c != nil && same(j.c.of, clusters) || j.c == nil && j.cOK)
}

// clustersMoved drops the cluster layout; the join's positions of
// clusters stay good if it tracked the move (ok), else every node's
// cluster is looked up again at the next plan (rejoinClusters).
func (pl *Planner) clustersMoved(ok bool) {
	pl.c = nil
	if pl.j != nil {
		pl.j.c, pl.j.cOK = nil, ok
	}
}

// shiftClusters moves the join's positions of clusters for a cluster
// inserted at k (d 1) or deleted from k (d -1): nodes of a cluster gone
// join none, as a lookup would answer.
func (j *nodeJoin) shiftClusters(k int32, d int32) {
	for i, ci := range j.nCluster {
		switch {
		case d < 0 && ci == k:
			j.nCluster[i] = -1
		case ci >= k:
			j.nCluster[i] = ci + d
		}
	}
}

// moveNodes returns nodes (in the store's order) with ups replacing the
// nodes of their IDs or joining them and the nodes of gone left out,
// changed in place, with the node join changed alike (clusters are the
// planner's clusters as they are now). A join not built on nodes is
// dropped: its slice may share their array.
func (pl *Planner) moveNodes(nodes, ups []*domain.Node, gone []rowKey, clusters []domain.Cluster) []*domain.Node {
	j := pl.j
	if j != nil && !same(j.of, nodes) {
		pl.j, j = nil, nil
	}
	for _, g := range gone {
		if i, ok := at(nodes, g.created, g.id, nodeKey); ok {
			nodes = slices.Delete(nodes, i, i+1)
			if j != nil {
				j.delete(i)
			}
		}
	}
	for _, n := range ups {
		i, ok := at(nodes, n.CreatedAt, n.ID, nodeKey)
		if ok {
			nodes[i] = n
		} else {
			nodes = slices.Insert(nodes, i, n)
		}
		if j != nil {
			j.put(i, n, !ok, clusters)
		}
	}
	if j != nil {
		j.of = nodes
	}
	return nodes
}

// put joins node n at position i, a new position if insert.
func (j *nodeJoin) put(i int, n *domain.Node, insert bool, clusters []domain.Cluster) {
	mi, ci := j.m.idx.find(n.MachineID), int32(-1)
	switch {
	case j.c != nil:
		ci = j.c.idx.find(n.ClusterID)
	case j.cOK:
		// The clusters moved and are not laid out again yet: a walk from
		// the newest, whose nodes these mostly are (a create's).
		for k := len(clusters) - 1; k >= 0; k-- {
			if clusters[k].ID == n.ClusterID {
				ci = int32(k)
				break
			}
		}
	}
	if insert {
		j.nMachine = slices.Insert(j.nMachine, i, mi)
		j.nCluster = slices.Insert(j.nCluster, i, ci)
		j.facts = slices.Insert(j.facts, i, factOf(n))
		return
	}
	j.nMachine[i], j.nCluster[i], j.facts[i] = mi, ci, factOf(n)
}

func (j *nodeJoin) delete(i int) {
	j.nMachine = slices.Delete(j.nMachine, i, i+1)
	j.nCluster = slices.Delete(j.nCluster, i, i+1)
	j.facts = slices.Delete(j.facts, i, i+1)
}

// rejoinClusters looks every node's cluster up in c, the layout of the
// clusters as they moved in place untracked.
func (j *nodeJoin) rejoinClusters(c *clusterLayout) {
	j.c = c
	for i, n := range j.of {
		j.nCluster[i] = c.idx.find(n.ClusterID)
	}
}
