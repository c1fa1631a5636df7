package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
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
			s.fail(w, r, errNoAttach("attach", "kubeconfig"))
			return
		}
		if err := s.checkAttach(req.Kubeconfig); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	project, err := s.clusterProject(ctx, p, req.ProjectID)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.checkOffering(ctx, req.Region, req.GPUType); err != nil {
		s.fail(w, r, err)
		return
	}
	for _, t := range req.PreemptibleGPUTypes {
		if err := s.checkOffering(ctx, req.Region, t); err != nil {
			s.fail(w, r, invalid("preemptible_gpu_types", "%s", err.Error()))
			return
		}
	}
	if err := checkStart(req, s.clock.Now()); err != nil {
		s.fail(w, r, err)
		return
	}
	req.PreemptibleGPUTypes = ownType(req.PreemptibleGPUTypes, req.GPUType)
	if req.BillingType == string(domain.BillingReserved) {
		if err := s.checkReservation(ctx, project, req.Region, req.GPUType); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	var attach []func(store.Tx, string) error
	if req.Kubeconfig != "" {
		// Last of the checks: it asks the cluster.
		a, err := s.attachOnCreate(ctx, req.Kubeconfig)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		attach = append(attach, a)
	}
	c, err := s.ctrl.CreateCluster(ctx, domain.Cluster{
		Name: req.ClusterName, ProjectID: project, Region: req.Region, GPUType: req.GPUType,
		Type: domain.ClusterType(req.ClusterType), BillingType: domain.BillingType(req.BillingType),
		NumGPUs: req.NumGPUs, DesiredPreemptibleGPUs: req.NumPreemptibleGPUs, MaxPreemptibleGPUs: req.MaxPreemptibleGPUs,
		PreemptibleGPUTypes: req.PreemptibleGPUTypes, PreemptibleStrategy: req.PreemptibleStrategy,
		MaxPreemptiblePrice: req.MaxPreemptiblePerGPUHour, Weight: 1, StartsAt: startOf(req.StartsAt),
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

// clusterProject is the project a cluster is created in: a project
// token's own, or with the admin token the one the request names, which
// must exist.
func (s *Server) clusterProject(ctx context.Context, p principal, project string) (string, error) {
	switch {
	case p.admin && project == "":
		return "", invalid("project_id", "project_id is required with the admin token")
	case !p.admin && project == "":
		return p.project, nil
	case !p.admin && project != p.project:
		return "", notFound("project %q not found", project)
	}
	if p.admin {
		if _, err := s.store.GetProject(ctx, project); errors.Is(err, domain.ErrNotFound) {
			return "", invalid("project_id", "unknown project %q; create it first (POST /v1/admin/projects)", echo(project))
		} else if err != nil {
			return "", err
		}
	}
	return project, nil
}

// attachOnCreate checks what the kubeconfig may do in its cluster and
// returns the step that stores both with a new cluster. It runs in the
// cluster's own transaction: the controller never sees the cluster
// without its kubeconfig, so no node goes to the simulation.
func (s *Server) attachOnCreate(ctx context.Context, kubeconfig string) (func(store.Tx, string) error, error) {
	access, err := s.checkAccess(ctx, kubeconfig)
	if err != nil {
		return nil, err
	}
	return func(tx store.Tx, id string) error {
		sealed, err := s.sealKubeconfig(id, kubeconfig)
		if err != nil {
			return err
		}
		if err := tx.SetKubeconfig(ctx, id, sealed, s.clock.Now()); err != nil {
			return err
		}
		return s.storeAccess(ctx, tx, id, access)
	}, nil
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
		return invalid("region", "unknown region %q; the fleet has %s", echo(region), list(o.regions))
	case !o.anyType[gpuType]:
		return invalid("gpu_type", "unknown gpu_type %q; the fleet has %s", echo(gpuType), list(o.anyType))
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
	writeJSON(w, status, clusterView(c, nodes, s.apiAddressRedactor(r.Context(), c), s.nodeTimes(r.Context(), nodes)))
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
	ch := controller.Change{NumGPUs: req.NumGPUs, PreemptibleGPUs: req.NumPreemptibleGPUs, MaxPreemptibleGPUs: req.MaxPreemptibleGPUs}
	if req.StartsAt != nil || scheduled(c, s.clock.Now()) {
		c, err = s.updateBooking(ctx, c, req)
	} else if err = s.preemptibleChange(ctx, &c, req, &ch); err == nil {
		c, err = s.ctrl.UpdateCluster(ctx, c.ID, ch)
	}
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
func clusterView(c domain.Cluster, nodes []domain.Node, redact func(string) string, times func(domain.Node) nodeTimes) apiv1.Cluster {
	v := apiv1.Cluster{
		ClusterID: c.ID, ClusterName: c.Name, ProjectID: c.ProjectID, Region: c.Region, GPUType: c.GPUType,
		ClusterType: string(c.Type), BillingType: string(c.BillingType), Status: string(c.Status),
		NumGPUs: c.NumGPUs, DesiredPreemptibleGPUs: c.DesiredPreemptibleGPUs, Weight: max(c.Weight, 1),
		MaxPreemptibleGPUs: c.MaxPreemptibleGPUs, RequestedPreemptibleGPUs: c.RequestedPreemptibleGPUs,
		PreemptibleGPUTypes:   allocator.Types(&c),
		TargetPreemptibleGPUs: c.TargetPreemptibleGPUs(),
		CreatedAt:             c.CreatedAt, GPUWorkerNodes: make([]apiv1.Node, 0, len(nodes)),
		StartsAt: timePtr(c.StartsAt), ActiveAt: timePtr(c.ActiveAt),
		Access: accessView(c.Access, redact),
	}
	v.PreemptibleStrategy, v.MaxPreemptiblePerGPUHour = strategyOf(&c), c.MaxPreemptiblePrice
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
			byType(&v, nodeType(n, c), n.GPUs)
		}
		nv := apiv1.Node{NodeID: n.ID, NodeName: n.Name, ComputeClass: string(n.Class), Status: string(n.State),
			NumGPUs: n.GPUs, GPUType: nodeType(n, c), CreatedAt: n.CreatedAt, ReadyAt: timePtr(n.ReadyAt), ClassSince: timePtr(n.ClassSince), LastError: redact(n.LastError),
			Outcome: string(n.Outcome), CleanupPending: n.CleanupPending}
		if n.State == domain.NodeDraining {
			nv.Deadline = timePtr(n.Deadline)
		}
		t := times(n)
		nv.LeaseEnd, nv.PreemptAt = timePtr(t.leaseEnd), timePtr(t.preemptAt)
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
// for other nodes, or a pool without one; none without Options.MinLease),
// and when the node's notice comes, its machine being booked (zero: not
// booked, or the notice came).
type nodeTimes struct{ leaseEnd, preemptAt time.Time }

// nodeTimes reads the nodeTimes of nodes from their machines, read in
// one go (a list of many clusters is one read, not one per node).
func (s *Server) nodeTimes(ctx context.Context, nodes []domain.Node) func(domain.Node) nodeTimes {
	live := func(n domain.Node) bool { return n.State == domain.NodeReady || n.State == domain.NodeProvisioning }
	var ids []string
	for _, n := range nodes {
		if live(n) {
			ids = append(ids, n.MachineID)
		}
	}
	machines := map[string]domain.Machine{}
	if len(ids) > 0 {
		var ms []domain.Machine
		var err error
		if br, ok := s.store.(store.BulkReader); ok {
			ms, err = br.MachinesByID(ctx, ids)
		} else {
			ms, err = s.store.ListMachines(ctx)
		}
		if err != nil {
			s.log.Warn("cannot read the nodes' machines: leases and notice times left out", "err", err)
		}
		for _, m := range ms {
			machines[m.ID] = m
		}
	}
	return func(n domain.Node) nodeTimes {
		m, ok := machines[n.MachineID]
		if !live(n) || !ok {
			return nodeTimes{}
		}
		var t nodeTimes
		if s.MinLease != nil {
			t.leaseEnd = n.LeaseEnd(s.MinLease(&m))
		}
		t.preemptAt = m.PreemptAt
		return t
	}
}

// nodeType is n's GPU type: its own, or its cluster's for a node
// written before nodes had one.
func nodeType(n domain.Node, c domain.Cluster) string {
	if n.GPUType != "" {
		return n.GPUType
	}
	return c.GPUType
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
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
