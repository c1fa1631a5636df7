package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sparecap/sparecap/internal/allocator"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/bound"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

func (s *Server) createCluster(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	req, err := decodeCreate(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A kubeconfig is checked before anything is created: a bad one
	// creates nothing. It is sealed once the cluster has its ID, which
	// the sealed value is bound to.
	if req.Kubeconfig != "" {
		if !p.admin {
			s.fail(w, r, errNoKubeAccess("attach"))
			return
		}
		if err := s.checkAttach(req.Kubeconfig); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	project := req.ProjectID
	switch {
	case p.admin && project == "":
		s.fail(w, r, invalid("project_id", "project_id is required with the admin token"))
		return
	case !p.admin && project == "":
		project = p.project
	case !p.admin && project != p.project:
		s.fail(w, r, notFound("project %q not found", project))
		return
	}
	if p.admin {
		if _, err := s.store.GetProject(ctx, project); errors.Is(err, domain.ErrNotFound) {
			s.fail(w, r, invalid("project_id", "unknown project %q; create it first (POST /v1/admin/projects)", project))
			return
		} else if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := s.checkOffering(ctx, req.Region, req.GPUType); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.BillingType == string(domain.BillingReserved) {
		if err := s.checkReservation(ctx, project, req.Region, req.GPUType); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var attach []func(store.Tx, string) error
	if req.Kubeconfig != "" {
		// Last of the checks: it asks the cluster.
		access, err := s.checkAccess(ctx, req.Kubeconfig)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		// In the cluster's own transaction: the controller never sees
		// it without its kubeconfig, so no node goes to the simulation.
		attach = append(attach, func(tx store.Tx, id string) error {
			sealed, err := s.sealKubeconfig(id, req.Kubeconfig)
			if err != nil {
				return err
			}
			if err := tx.SetKubeconfig(ctx, id, sealed, s.clock.Now()); err != nil {
				return err
			}
			return s.storeAccess(ctx, tx, id, access)
		})
	}
	c, err := s.ctrl.CreateCluster(ctx, domain.Cluster{
		Name: req.ClusterName, ProjectID: project, Region: req.Region, GPUType: req.GPUType,
		Type: domain.ClusterType(req.ClusterType), BillingType: domain.BillingType(req.BillingType),
		NumGPUs: req.NumGPUs, DesiredPreemptibleGPUs: req.NumPreemptibleGPUs, MaxPreemptibleGPUs: req.MaxPreemptibleGPUs,
		Weight: 1,
	}, attach...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Kubeconfig != "" && s.OnKubeconfig != nil {
		s.OnKubeconfig(c.ID)
	}
	s.writeCluster(w, r, http.StatusCreated, c)
}

// checkOffering refuses regions and GPU types the fleet does not have.
func (s *Server) checkOffering(ctx context.Context, region, gpuType string) error {
	// The snapshot, which the leader serves from memory: a create must not
	// read the whole fleet from the database.
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	o := s.offers.Load()
	if o == nil || !store.Same(o.machines, snap.Machines) {
		o = offeringsOf(snap.Machines)
		s.offers.Store(o)
	}
	switch here := o.types[region]; {
	case here == nil:
		return invalid("region", "unknown region %q; the fleet has %s", region, list(o.regions))
	case !o.anyType[gpuType]:
		return invalid("gpu_type", "unknown gpu_type %q; the fleet has %s", gpuType, list(o.anyType))
	case !here[gpuType]:
		return invalid("gpu_type", "region %s has no %s machines; it has %s", region, gpuType, list(here))
	}
	return nil
}

// offerings are the regions and GPU types of a fleet's machines. On the
// leader they are worked out once per version of the in-memory machine
// table, not per create (a million-GPU fleet has 125,000 machines).
type offerings struct {
	machines []domain.Machine // what they were worked out from
	regions  map[string]bool
	anyType  map[string]bool
	types    map[string]map[string]bool // by region
}

func offeringsOf(ms []domain.Machine) *offerings {
	o := &offerings{machines: ms, regions: map[string]bool{}, anyType: map[string]bool{}, types: map[string]map[string]bool{}}
	for _, m := range ms {
		if o.types[m.Region] == nil {
			o.regions[m.Region], o.types[m.Region] = true, map[string]bool{}
		}
		o.types[m.Region][m.GPUType], o.anyType[m.GPUType] = true, true
	}
	return o
}

func (s *Server) checkReservation(ctx context.Context, project, region, gpuType string) error {
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		return err
	}
	for _, res := range snap.Reservations {
		if res.ProjectID == project && res.Region == region && res.GPUType == gpuType {
			return nil
		}
	}
	return invalid("billing_type", "billing_type RESERVED needs a reservation: project %s holds no %s reservation in %s", project, gpuType, region)
}

func list(set map[string]bool) string {
	if len(set) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// visibleCluster returns the cluster if the caller may see it; another
// project's cluster is reported as not found, like a missing one.
func (s *Server) visibleCluster(ctx context.Context, id string, p principal) (domain.Cluster, error) {
	c, err := s.store.GetCluster(ctx, id)
	if err == nil && !p.sees(c.ProjectID) {
		err = domain.ErrNotFound
	}
	if errors.Is(err, domain.ErrNotFound) {
		return c, notFound("cluster %q not found", id)
	}
	return c, err
}

func (s *Server) getCluster(w http.ResponseWriter, r *http.Request, p principal) {
	c, err := s.visibleCluster(r.Context(), r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeCluster(w, r, http.StatusOK, c)
}

func (s *Server) writeCluster(w http.ResponseWriter, r *http.Request, status int, c domain.Cluster) {
	nodes, err := s.store.ListNodes(r.Context(), store.NodeFilter{ClusterID: c.ID})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// Removed nodes whose objects are still to be deleted from the
	// cluster are shown too, with cleanup_pending.
	pending, err := s.store.ListNodes(r.Context(), store.NodeFilter{ClusterID: c.ID, CleanupPending: true, States: []domain.NodeState{domain.NodeRemoved}})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nodes = append(nodes, pending...)
	writeJSON(w, status, clusterView(c, nodes, s.apiAddressRedactor(r.Context(), c), s.leaseEnd(r.Context())))
}

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
	for _, c := range cs {
		out.Clusters = append(out.Clusters, clusterView(c, byCluster[c.ID], s.apiAddressRedactor(ctx, c), s.leaseEnd(ctx)))
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

func (s *Server) updateCluster(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := decodeUpdate(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if c.Type == domain.ClusterSlurm && req.MaxPreemptibleGPUs != nil && *req.MaxPreemptibleGPUs > 0 {
		s.fail(w, r, errSlurmQueue())
		return
	}
	c, err = s.ctrl.UpdateCluster(ctx, c.ID, controller.Change{NumGPUs: req.NumGPUs, PreemptibleGPUs: req.NumPreemptibleGPUs, MaxPreemptibleGPUs: req.MaxPreemptibleGPUs})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeCluster(w, r, http.StatusOK, c)
}

// convertNode converts a ready node of the cluster to the other class in
// place, and answers with the cluster.
func (s *Server) convertNode(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := decodeConvert(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	node := r.PathValue("node")
	if _, err := s.ctrl.ConvertNode(ctx, c.ID, node, domain.ComputeClass(req.ComputeClass)); err != nil {
		if errors.Is(err, domain.ErrNotFound) {
			err = notFound("node %q not found in cluster %q", bound.Text(node, 64), c.ID)
		}
		s.fail(w, r, err)
		return
	}
	if c, err = s.store.GetCluster(ctx, c.ID); err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeCluster(w, r, http.StatusOK, c)
}

// setClusterWeight sets a cluster's weight in the fair sharing of spare
// capacity (admin).
func (s *Server) setClusterWeight(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	req, err := decodeWeight(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err = s.ctrl.SetWeight(ctx, c.ID, *req.Weight)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("cluster weight set", "cluster", c.ID, "weight", c.Weight)
	s.writeCluster(w, r, http.StatusOK, c)
}

func (s *Server) deleteCluster(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	c, err := s.visibleCluster(ctx, r.PathValue("id"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err = s.ctrl.DeleteCluster(ctx, c.ID)
	if errors.Is(err, domain.ErrNotFound) {
		// Its last node went between the two reads: it is deleted.
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeCluster(w, r, http.StatusAccepted, c)
}

// accessView is the API's view of a cluster's access record; nil while
// it holds nothing.
func accessView(a domain.Access, redact func(string) string) *apiv1.Access {
	if a.CheckedAt.IsZero() && len(a.Missing) == 0 {
		return nil
	}
	v := &apiv1.Access{CheckedAt: timePtr(a.CheckedAt), Missing: make([]apiv1.MissingPermission, len(a.Missing))}
	for i, m := range a.Missing {
		v.Missing[i] = apiv1.MissingPermission{Permission: m.Permission, Essential: m.Essential, Effect: m.Effect,
			Since: m.Since, Detail: redact(m.Detail)}
	}
	return v
}

// clusterView is the API's view of a cluster; redact masks the cluster's
// API server address in the nodes' errors.
func clusterView(c domain.Cluster, nodes []domain.Node, redact func(string) string, leaseEnd func(domain.Node) time.Time) apiv1.Cluster {
	v := apiv1.Cluster{
		ClusterID: c.ID, ClusterName: c.Name, ProjectID: c.ProjectID, Region: c.Region, GPUType: c.GPUType,
		ClusterType: string(c.Type), BillingType: string(c.BillingType), Status: string(c.Status),
		NumGPUs: c.NumGPUs, DesiredPreemptibleGPUs: c.DesiredPreemptibleGPUs, Weight: max(c.Weight, 1),
		MaxPreemptibleGPUs: c.MaxPreemptibleGPUs, RequestedPreemptibleGPUs: c.RequestedPreemptibleGPUs,
		TargetPreemptibleGPUs: c.TargetPreemptibleGPUs(),
		CreatedAt:             c.CreatedAt, GPUWorkerNodes: make([]apiv1.Node, 0, len(nodes)),
		Access: accessView(c.Access, redact),
	}
	// One column holds a cluster's attachment: a kubeconfig, or a SLURM
	// cluster's slurm.conf.
	attached := apiv1.KubernetesStatus{Attached: !c.KubeAttachedAt.IsZero(), AttachedAt: timePtr(c.KubeAttachedAt)}
	if c.Type == domain.ClusterSlurm {
		v.Slurm = &apiv1.AttachStatus{Attached: attached.Attached, AttachedAt: attached.AttachedAt}
	} else {
		v.Kubernetes = attached
	}
	for _, n := range nodes {
		if n.State == domain.NodeRemoved && !n.CleanupPending {
			continue
		}
		if n.Class == domain.Preemptible && n.State == domain.NodeReady {
			v.AllocatedPreemptibleGPUs += n.GPUs
		}
		nv := apiv1.Node{NodeID: n.ID, NodeName: n.Name, ComputeClass: string(n.Class), Status: string(n.State),
			NumGPUs: n.GPUs, CreatedAt: n.CreatedAt, ReadyAt: timePtr(n.ReadyAt), ClassSince: timePtr(n.ClassSince), LastError: redact(n.LastError),
			Outcome: string(n.Outcome), CleanupPending: n.CleanupPending}
		if n.State == domain.NodeDraining {
			nv.Deadline = timePtr(n.Deadline)
		}
		if leaseEnd != nil {
			nv.LeaseEnd = timePtr(leaseEnd(n))
		}
		v.GPUWorkerNodes = append(v.GPUWorkerNodes, nv)
	}
	if c.Unfulfilled != "" && v.AllocatedPreemptibleGPUs < v.TargetPreemptibleGPUs {
		v.TargetUnfulfilled = &apiv1.Unfulfilled{Reason: string(c.Unfulfilled), Message: c.UnfulfilledMessage}
	} else if v.AllocatedPreemptibleGPUs < v.TargetPreemptibleGPUs && c.Status != domain.StatusDeleting {
		// The stored reason lags a node that left a moment ago.
		v.TargetUnfulfilled = &apiv1.Unfulfilled{Reason: string(domain.UnfulfilledProvisioning), Message: "the controller is catching up with a node that just changed state"}
	}
	return v
}

// leaseEnd is when a ready preemptible node's minimum lease ends (zero
// for other nodes, or a pool without one); nil without Options.MinLease.
func (s *Server) leaseEnd(ctx context.Context) func(domain.Node) time.Time {
	if s.MinLease == nil {
		return nil
	}
	return func(n domain.Node) time.Time {
		if n.Class != domain.Preemptible || n.State != domain.NodeReady {
			return time.Time{}
		}
		m, err := s.store.GetMachine(ctx, n.MachineID)
		if err != nil {
			return time.Time{}
		}
		return n.LeaseEnd(s.MinLease(&m))
	}
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func eventView(e domain.Event) apiv1.Event {
	return apiv1.Event{
		EventID: e.ID, Cursor: strconv.FormatInt(e.Seq, 10), ClusterID: e.ClusterID, NodeID: e.NodeID, NodeName: e.NodeName,
		Reason: string(e.Reason), Message: e.Message, Timestamp: e.Timestamp.UTC(), Deadline: timePtr(e.Deadline),
	}
}

func parseCursor(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, invalid("cursor", "cursor %q is not one this API returned", v)
	}
	return n, nil
}

func (s *Server) events(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	// Events outlive their cluster (they are kept 72 hours), so a deleted
	// cluster's history stays readable by its project.
	id := r.PathValue("id")
	c, err := s.store.GetClusterRecord(ctx, id)
	if errors.Is(err, domain.ErrNotFound) || (err == nil && !p.sees(c.ProjectID)) {
		err = notFound("cluster %q not found", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := r.URL.Query()
	// A reconnecting EventSource sends Last-Event-ID and repeats the URL it
	// first opened, so the header takes precedence over ?cursor=.
	cursorText := r.Header.Get("Last-Event-ID")
	if cursorText == "" {
		cursorText = q.Get("cursor")
	}
	cursor, err := parseCursor(cursorText)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit := 100
	if v := q.Get("limit"); v != "" {
		limit, err = strconv.Atoi(v)
		if err != nil || limit < 1 || limit > 1000 {
			s.fail(w, r, invalid("limit", "limit must be between 1 and 1000; got %q", v))
			return
		}
	}
	watch := false
	if v := q.Get("watch"); v != "" {
		watch, err = strconv.ParseBool(v)
		if err != nil {
			s.fail(w, r, invalid("watch", "watch must be true or false; got %q", v))
			return
		}
	}
	if watch {
		s.stream(w, r, p, c.ID, cursor)
		return
	}
	evs, err := s.store.ListEvents(ctx, store.EventFilter{ClusterID: c.ID, AfterSeq: cursor, Limit: limit})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.EventList{Events: make([]apiv1.Event, 0, len(evs)), NextCursor: strconv.FormatInt(cursor, 10)}
	for _, e := range evs {
		out.Events = append(out.Events, eventView(e))
		out.NextCursor = strconv.FormatInt(e.Seq, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// stream sends the cluster's events after cursor as Server-Sent Events,
// then each new one as it is committed, until the client goes away.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p principal, clusterID string, cursor int64) {
	ctx := r.Context()
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, errors.New("streaming unsupported by this connection"))
		return
	}
	// A project's streams are counted together, whatever token opened
	// them: minting tokens does not buy more. Operators count by token.
	holder, whose := p.key, "this token"
	if !p.admin {
		holder, whose = "project:"+p.project, "project "+p.project
	}
	if !s.streams.acquire(holder, s.MaxStreams) {
		writeError(w, http.StatusTooManyRequests, apiv1.CodeRateLimited, "",
			fmt.Sprintf("%s already has %d event streams open, the most it may (--max-streams-per-project); close one first", whose, s.MaxStreams))
		return
	}
	defer s.streams.release(holder)
	// A stream lives as long as its client: the server's read deadline
	// (which bounds a request) is lifted, and each write gets a deadline
	// of its own, so a client that stops reading is let go.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	writing := func() { _ = rc.SetWriteDeadline(s.realClock.Now().Add(streamWriteTimeout)) }
	writing()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	keepAliveAt := s.realClock.Now().Add(s.KeepAlive)
	for {
		changed := s.ctrl.Changed()
		evs, err := s.store.ListEvents(ctx, store.EventFilter{ClusterID: clusterID, AfterSeq: cursor, Limit: 500})
		if err != nil {
			if ctx.Err() == nil {
				s.log.Error("event stream", "cluster", clusterID, "err", err)
			}
			return
		}
		writing()
		for _, e := range evs {
			data, _ := json.Marshal(eventView(e))
			if _, err := fmt.Fprintf(w, "id: %d\nevent: node_lifecycle_event\ndata: %s\n\n", e.Seq, data); err != nil {
				return
			}
			cursor = e.Seq
		}
		flusher.Flush()
		if len(evs) == 500 {
			continue // more are waiting
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-s.realClock.After(keepAliveAt.Sub(s.realClock.Now())):
			keepAliveAt = s.realClock.Now().Add(s.KeepAlive)
			// A stream outlives the check its request passed: a token
			// revoked or expired since ends it here.
			if t, err := s.store.TokenByHash(ctx, p.key); errors.Is(err, domain.ErrNotFound) || (err == nil && tokenState(t, s.wall.Now()) != "") {
				return
			}
			writing()
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}

func (s *Server) capacity(w http.ResponseWriter, r *http.Request, p principal) {
	snap, err := s.store.Snapshot(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	cfg := s.ctrl.Config()
	av := allocator.Available(allocator.Snapshot(snap), s.clock.Now(), allocator.Config{DrainWindow: cfg.DrainWindow, Cooldown: max(cfg.Cooldown, 0)})
	slices.SortFunc(av, func(a, b allocator.Availability) int {
		if c := strings.Compare(a.Region, b.Region); c != 0 {
			return c
		}
		return strings.Compare(a.GPUType, b.GPUType)
	})
	out := apiv1.CapacityList{Capacity: make([]apiv1.Capacity, 0, len(av))}
	for _, a := range av {
		out.Capacity = append(out.Capacity, apiv1.Capacity{
			Region: a.Region, GPUType: a.GPUType, Total: a.Total, AvailableOnDemand: a.OnDemand,
			AvailablePreemptible: a.Preemptible, Free: a.Free, Reserved: a.Reserved,
			InUseStandard: a.InUseStandard, InUsePreemptible: a.InUsePreemptible, OutOfService: a.OutOfService,
		})
	}
	writeJSON(w, http.StatusOK, out)
}

// streamWriteTimeout bounds one write of an event stream: a client that
// reads nothing for this long is disconnected.
const streamWriteTimeout = 30 * time.Second

// streamCounts counts open event streams by holder: a project, or an
// operator's token.
type streamCounts struct {
	mu sync.Mutex
	n  map[string]int
}

// acquire counts one more stream for key unless it has max already (max
// 0: no cap).
func (c *streamCounts) acquire(key string, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if max > 0 && c.n[key] >= max {
		return false
	}
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[key]++
	return true
}

func (c *streamCounts) release(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key]--; c.n[key] <= 0 {
		delete(c.n, key)
	}
}
