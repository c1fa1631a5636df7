package api

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// maxListedClusters bounds the clusters whose nodes a listing selects by
// ID.
const maxListedClusters = 500

func (s *Server) listClusters(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	project := r.URL.Query().Get("project_id")
	if !p.admin {
		if project != "" && project != p.project {
			writeJSON(w, http.StatusOK, apiv1.ClusterList{Clusters: []apiv1.Cluster{}})
			return
		}
		project = p.project
	}
	cs, byCluster, ix, err := s.clustersWithNodes(ctx, project)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A list depends on the copy's version alone: made once per version,
	// project and format, it is sent as it is until a write makes a new
	// version (encoding was most of a list's cost).
	key := project + "\x00" + strconv.FormatBool(compactJSON(w))
	if ix != nil {
		if body, ok := ix.bodies.Load(key); ok {
			writeBody(w, http.StatusOK, body.([]byte))
			return
		}
	}
	out := apiv1.ClusterList{Clusters: make([]apiv1.Cluster, 0, len(cs))}
	var all []domain.Node
	for _, c := range cs {
		all = append(all, byCluster[c.ID]...)
	}
	times := s.nodeTimes(ctx, all)
	for _, c := range cs {
		out.Clusters = append(out.Clusters, clusterView(c, byCluster[c.ID], s.apiAddressRedactor(ctx, c), times))
	}
	body := encodeJSON(out, compactJSON(w))
	if ix != nil {
		ix.bodies.Store(key, body)
	}
	writeBody(w, http.StatusOK, body)
}

// clustersWithNodes lists project's clusters (every one for "") and their
// live nodes: from the leader's in-memory copy when it is loaded (it
// holds exactly what the database does, in the same order), else from
// the store.
func (s *Server) clustersWithNodes(ctx context.Context, project string) ([]domain.Cluster, map[string][]domain.Node, *listIndex, error) {
	byCluster := map[string][]domain.Node{}
	if snap, ok := store.LoadedSnapshot(s.store); ok {
		ix := s.lists.Load()
		if ix == nil || !store.Same(ix.clusters, snap.Clusters) || !store.Same(ix.nodes, snap.Nodes) {
			ix = listIndexOf(snap)
			s.lists.Store(ix)
		}
		var cs []domain.Cluster
		if project == "" {
			cs = ix.clusters
		} else {
			for _, i := range ix.byProject[project] {
				cs = append(cs, ix.clusters[i])
			}
		}
		for _, c := range cs {
			ns := make([]domain.Node, 0, len(ix.nodesOf[c.ID]))
			for _, i := range ix.nodesOf[c.ID] {
				ns = append(ns, *ix.nodes[i])
			}
			byCluster[c.ID] = ns
		}
		return cs, byCluster, ix, nil
	}
	cs, err := s.store.ListClusters(ctx, project)
	if err != nil {
		return nil, nil, nil, err
	}
	// Read only the listed clusters' nodes, not the fleet's: a project's
	// list costs what it returns. A list too long for one IN clause (an
	// admin's of every cluster) reads every live node instead.
	var f store.NodeFilter
	if len(cs) <= maxListedClusters {
		for _, c := range cs {
			f.ClusterIDs = append(f.ClusterIDs, c.ID)
		}
	}
	var nodes []domain.Node
	if len(cs) > 0 {
		if nodes, err = s.store.ListNodes(ctx, f); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, n := range nodes {
		byCluster[n.ClusterID] = append(byCluster[n.ClusterID], n)
	}
	return cs, byCluster, nil, nil
}

// listIndex is where each project's clusters and each cluster's nodes
// sit in a version of the leader's in-memory copy, worked out once per
// version so that a list costs what it returns, not the fleet.
type listIndex struct {
	clusters  []domain.Cluster // what it indexes
	nodes     []*domain.Node
	byProject map[string][]int // positions in clusters, in order
	nodesOf   map[string][]int // positions in nodes by cluster, in order
	// bodies are the encoded lists of this version, by project and
	// format (see listClusters).
	bodies sync.Map
}

func listIndexOf(snap store.Snapshot) *listIndex {
	ix := &listIndex{clusters: snap.Clusters, nodes: snap.Nodes, byProject: map[string][]int{}, nodesOf: map[string][]int{}}
	for i := range snap.Clusters {
		p := snap.Clusters[i].ProjectID
		ix.byProject[p] = append(ix.byProject[p], i)
	}
	for i := range snap.Nodes {
		c := snap.Nodes[i].ClusterID
		ix.nodesOf[c] = append(ix.nodesOf[c], i)
	}
	return ix
}
