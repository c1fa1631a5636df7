package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/simulate"
)

// simulations is the server's queue of simulations, made on first use.
func (s *Server) simulations() *simulate.Queue {
	s.simOnce.Do(func() {
		s.sims = simulate.NewQueue(s.wall, func() string { return s.ctrl.NewID("sim-") })
	})
	return s.sims
}

// CloseSimulations cancels the simulations running or queued and waits
// for them (the server's shutdown).
func (s *Server) CloseSimulations() {
	s.simOnce.Do(func() {})
	if s.sims != nil {
		s.sims.Close()
	}
}

// createSimulation serves POST /v1/simulations (admin): it checks the
// scenario and trace and queues the run.
func (s *Server) createSimulation(w http.ResponseWriter, r *http.Request, _ principal) {
	ctx := r.Context()
	var req apiv1.CreateSimulationRequest
	if err := decodeStrict(r.Body, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(bytes.TrimSpace(req.Scenario)) == 0 {
		s.fail(w, r, invalid("scenario", "scenario is required: the fields of a sparecap simulate scenario file"))
		return
	}
	sc, err := simulate.Decode(req.Scenario)
	if err != nil {
		s.fail(w, r, invalid("scenario", "%s", err.Error()))
		return
	}
	if len(sc.Fleet.Pools) == 0 {
		if sc.Fleet, err = s.ownFleet(ctx); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if err := sc.Check(); err != nil {
		s.fail(w, r, invalid("scenario", "%s", err.Error()))
		return
	}
	evs := simulate.Generate(sc)
	if req.Trace != "" {
		if evs, sc.Trace, err = simulate.ReadTraceAs(req.TraceFormat, strings.NewReader(req.Trace), sc.Fleet); err != nil {
			s.fail(w, r, invalid("trace", "%s", err.Error()))
			return
		}
	}
	st, err := s.simulations().Submit(sc, evs)
	if errors.Is(err, simulate.ErrBusy) {
		w.Header().Set("Retry-After", "60")
		s.fail(w, r, &clientError{http.StatusTooManyRequests, apiv1.CodeRateLimited,
			"the simulation queue is full: one runs and four wait; try again once one ends"})
		return
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, simulationView(st, false))
}

// ownFleet is the server's fleet as a fleet file: its machines by
// region, GPU type and reservation, and the on-demand prices in force.
func (s *Server) ownFleet(ctx context.Context) (fleet.File, error) {
	ms, err := s.store.ListMachines(ctx)
	if err != nil {
		return fleet.File{}, err
	}
	rs, err := s.store.ListReservations(ctx)
	if err != nil {
		return fleet.File{}, err
	}
	owner := map[string]string{}
	for _, r := range rs {
		owner[r.ID] = r.ProjectID
	}
	b, err := s.book(ctx)
	if err != nil {
		return fleet.File{}, err
	}
	var f fleet.File
	f.Prices = map[string]string{}
	idx := map[fleet.Pool]int{}
	now := s.clock.Now().Unix()
	for _, m := range ms {
		if m.OutOfService || m.GPUs != domain.GPUStep {
			continue
		}
		k := fleet.Pool{Region: m.Region, GPUType: m.GPUType, ReservedFor: owner[m.ReservationID], GPUsPerMachine: m.GPUs}
		i, ok := idx[k]
		if !ok {
			i = len(f.Pools)
			idx[k] = i
			f.Pools = append(f.Pools, k)
		}
		f.Pools[i].Machines++
		if _, ok := f.Prices[m.GPUType]; !ok {
			if od, ok := b.OnDemandRate(m.Region, m.GPUType, now); ok {
				f.Prices[m.GPUType] = billing.FormatRate(od)
			}
		}
	}
	if len(f.Pools) == 0 {
		return fleet.File{}, invalid("scenario", "the server has no machines in service to simulate: give the scenario a fleet")
	}
	return f, nil
}

// listSimulations serves GET /v1/simulations (admin), newest first.
func (s *Server) listSimulations(w http.ResponseWriter, r *http.Request, _ principal) {
	out := apiv1.SimulationList{Simulations: []apiv1.Simulation{}}
	for _, st := range s.simulations().List() {
		out.Simulations = append(out.Simulations, simulationView(st, false))
	}
	writeJSON(w, http.StatusOK, out)
}

// getSimulation serves GET /v1/simulations/{id} (admin), with the result
// once done.
func (s *Server) getSimulation(w http.ResponseWriter, r *http.Request, _ principal) {
	st, ok := s.simulations().Get(r.PathValue("id"))
	if !ok {
		s.fail(w, r, domain.ErrNotFound)
		return
	}
	writeJSON(w, http.StatusOK, simulationView(st, true))
}

// cancelSimulation serves POST /v1/simulations/{id}/cancel (admin).
func (s *Server) cancelSimulation(w http.ResponseWriter, r *http.Request, _ principal) {
	if err := decodeEmpty(r.Body); err != nil {
		s.fail(w, r, err)
		return
	}
	st, ok := s.simulations().Cancel(r.PathValue("id"))
	if !ok {
		s.fail(w, r, domain.ErrNotFound)
		return
	}
	writeJSON(w, http.StatusOK, simulationView(st, false))
}

func simulationView(st simulate.Status, result bool) apiv1.Simulation {
	v := apiv1.Simulation{ID: st.ID, Status: st.Status, Error: st.Error, CreatedAt: st.Created.UTC(),
		Progress: apiv1.SimulationProgress{Policy: st.Progress.Policy, DoneSeconds: st.Progress.Done.Seconds(), TotalSeconds: st.Progress.Total.Seconds()}}
	at := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		u := t.UTC()
		return &u
	}
	v.StartedAt, v.FinishedAt = at(st.Started), at(st.Finished)
	if result && st.Result != nil {
		var b bytes.Buffer
		if err := st.Result.WriteJSON(&b); err == nil {
			v.Result = json.RawMessage(bytes.TrimSpace(b.Bytes()))
		}
	}
	return v
}
