package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/store"
)

// NewToken returns a fresh API token: 256 random bits, hex, with a prefix
// that makes it recognisable in a secret scanner.
func NewToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return "sc_" + hex.EncodeToString(b[:])
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	req, err := decodeProject(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	now := s.clock.Now()
	tok, token := newToken(req.ProjectID, "token", now, time.Time{})
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if err := tx.CreateProject(ctx, domain.Project{ID: req.ProjectID, CreatedAt: now}); err != nil {
			return err
		}
		return tx.CreateToken(ctx, tok)
	})
	if errors.Is(err, domain.ErrConflict) {
		err = conflict("project %q already exists", req.ProjectID)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiv1.Project{ProjectID: req.ProjectID, Token: token, CreatedAt: now})
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request, _ principal) {
	ps, err := s.store.ListProjects(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := apiv1.ProjectList{Projects: make([]apiv1.Project, 0, len(ps))}
	for _, p := range ps {
		out.Projects = append(out.Projects, apiv1.Project{ProjectID: p.ID, CreatedAt: p.CreatedAt})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) createMachines(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	req, err := decodeMachines(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ids := req.MachineIDs
	for len(ids) < req.Count {
		ids = append(ids, s.ctrl.NewID("m-"))
	}
	now := s.clock.Now()
	var made []domain.Machine
	err = s.store.Update(ctx, func(tx store.Tx) error {
		made = made[:0]
		if req.ReservationID != "" {
			if err := checkReservationTarget(ctx, tx, req); err != nil {
				return err
			}
		}
		for _, id := range ids {
			m := domain.Machine{ID: id, Region: req.Region, GPUType: req.GPUType, GPUs: req.GPUsPerMachine, ReservationID: req.ReservationID, CreatedAt: now}
			if err := tx.CreateMachine(ctx, m); err != nil {
				if errors.Is(err, domain.ErrConflict) {
					return conflict("machine %q already exists", id)
				}
				return err
			}
			made = append(made, m)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.ctrl.Kick()
	out := apiv1.MachineList{Machines: make([]apiv1.Machine, 0, len(made))}
	for _, m := range made {
		out.Machines = append(out.Machines, machineView(m, nil))
	}
	writeJSON(w, http.StatusCreated, out)
}

// checkReservationTarget: machines join a reservation of their own region
// and GPU type.
func checkReservationTarget(ctx context.Context, tx store.Tx, req apiv1.CreateMachinesRequest) error {
	rs, err := tx.ListReservations(ctx)
	if err != nil {
		return err
	}
	for _, res := range rs {
		if res.ID != req.ReservationID {
			continue
		}
		if res.Region != req.Region || res.GPUType != req.GPUType {
			return invalid("reservation_id", "reservation %s is for %s in %s, not %s in %s", res.ID, res.GPUType, res.Region, req.GPUType, req.Region)
		}
		return nil
	}
	return invalid("reservation_id", "unknown reservation %q; create it first (POST /v1/admin/reservations)", echo(req.ReservationID))
}

// machineStates maps machine IDs to their active node.
func machineNodes(nodes []*domain.Node) map[string]*domain.Node {
	out := make(map[string]*domain.Node, len(nodes))
	for _, n := range nodes {
		if n.State.Active() {
			out[n.MachineID] = n
		}
	}
	return out
}

func machineView(m domain.Machine, n *domain.Node) apiv1.Machine {
	v := apiv1.Machine{MachineID: m.ID, Region: m.Region, GPUType: m.GPUType, GPUs: m.GPUs, ReservationID: m.ReservationID,
		Pool: "on-demand", State: string(domain.MachineFree)}
	if m.ReservationID != "" {
		v.Pool = "reservation:" + m.ReservationID
	}
	if n != nil {
		v.ClusterID, v.NodeName = n.ClusterID, n.Name
		switch n.State {
		case domain.NodeProvisioning:
			v.State = string(domain.MachineProvisioning)
		case domain.NodeReady:
			v.State = string(domain.MachineReady)
		case domain.NodeDraining:
			v.State = string(domain.MachineDraining)
		case domain.NodeRemoving:
			v.State = string(domain.MachineRemoving)
		}
	}
	if m.OutOfService {
		v.State = string(domain.MachineOutOfService)
		v.OutOfServiceReason = m.OutOfServiceReason
	}
	v.RegistrationFailures = m.Failures
	v.MaintenanceAt, v.ClaimedBy, v.PreemptAt = timePtr(m.MaintenanceAt), m.ClaimedBy, timePtr(m.PreemptAt)
	return v
}

func (s *Server) listMachines(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	q := r.URL.Query()
	region, gpuType, state := q.Get("region"), q.Get("gpu_type"), q.Get("state")
	switch domain.MachineState(state) {
	case "", domain.MachineFree, domain.MachineProvisioning, domain.MachineReady, domain.MachineDraining, domain.MachineRemoving, domain.MachineOutOfService:
	default:
		s.fail(w, r, invalid("state", "unknown machine state %q; one of free, provisioning, ready, draining, removing, out_of_service", echo(state)))
		return
	}
	ms, err := s.store.ListMachines(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	nodes, err := s.store.ListNodes(ctx, store.NodeFilter{})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	byMachine := machineNodes(store.Pointers(nodes))
	out := apiv1.MachineList{Machines: []apiv1.Machine{}}
	for _, m := range ms {
		v := machineView(m, byMachine[m.ID])
		if (region != "" && v.Region != region) || (gpuType != "" && v.GPUType != gpuType) || (state != "" && v.State != state) {
			continue
		}
		out.Machines = append(out.Machines, v)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) updateMachine(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	id := r.PathValue("id")
	req, err := decodeMachineUpdate(r.Body, s.clock.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var m domain.Machine
	err = s.store.Update(ctx, func(tx store.Tx) error {
		m, err = tx.GetMachine(ctx, id)
		if errors.Is(err, domain.ErrNotFound) {
			return notFound("machine %q not found", id)
		} else if err != nil {
			return err
		}
		if req.MaintenanceAt != nil {
			m.MaintenanceAt = req.maintenance
		}
		if req.OutOfService != nil {
			m.OutOfService = *req.OutOfService
		}
		if req.OutOfService != nil && !m.OutOfService {
			// Back in service: the operator has seen to it.
			m.Failures, m.OutOfServiceReason, m.MaintenanceAt = 0, "", time.Time{}
		}
		return tx.UpdateMachine(ctx, m)
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.MaintenanceAt != nil {
		s.ctrl.ClaimsNow()
	}
	s.ctrl.Kick()
	nodes, err := s.store.ListNodes(ctx, store.NodeFilter{MachineID: id})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, machineView(m, machineNodes(store.Pointers(nodes))[id]))
}

func (s *Server) createReservation(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	req, err := decodeReservation(r.Body)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if req.ReservationID == "" {
		req.ReservationID = s.ctrl.NewID("r-")
	}
	res := domain.Reservation{ID: req.ReservationID, ProjectID: req.ProjectID, Region: req.Region, GPUType: req.GPUType, CreatedAt: s.clock.Now()}
	err = s.store.Update(ctx, func(tx store.Tx) error {
		if _, err := tx.GetProject(ctx, req.ProjectID); errors.Is(err, domain.ErrNotFound) {
			return invalid("project_id", "unknown project %q", echo(req.ProjectID))
		} else if err != nil {
			return err
		}
		err := tx.CreateReservation(ctx, res)
		if errors.Is(err, domain.ErrConflict) {
			return conflict("reservation %q already exists", res.ID)
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, apiv1.Reservation{ReservationID: res.ID, ProjectID: res.ProjectID, Region: res.Region, GPUType: res.GPUType, CreatedAt: res.CreatedAt})
}

func (s *Server) listReservations(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	snap, err := s.store.Snapshot(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	byMachine := machineNodes(snap.Nodes)
	out := apiv1.ReservationList{Reservations: make([]apiv1.Reservation, 0, len(snap.Reservations))}
	for _, res := range snap.Reservations {
		v := apiv1.Reservation{ReservationID: res.ID, ProjectID: res.ProjectID, Region: res.Region, GPUType: res.GPUType, CreatedAt: res.CreatedAt}
		for _, m := range snap.Machines {
			if m.ReservationID != res.ID {
				continue
			}
			v.Machines++
			v.GPUs += m.GPUs
			if n := byMachine[m.ID]; n != nil && n.Class == domain.Preemptible && n.State.Live() {
				v.LentGPUs += n.GPUs
			}
		}
		out.Reservations = append(out.Reservations, v)
	}
	writeJSON(w, http.StatusOK, out)
}
