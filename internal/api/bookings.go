package api

import (
	"context"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
)

// maxBookAhead bounds how far ahead capacity may be booked.
const maxBookAhead = 366 * 24 * time.Hour

// checkStart checks a create's starts_at: ahead of now, within a year, and
// of standard capacity only (a booked cluster's preemptible target is set
// once it has started).
func checkStart(req apiv1.CreateClusterRequest, now time.Time) error {
	if req.StartsAt == nil {
		return nil
	}
	return checkStartAt(*req.StartsAt, now, req.NumPreemptibleGPUs+req.MaxPreemptibleGPUs > 0 || len(req.PreemptibleGPUTypes) > 0 ||
		req.PreemptibleStrategy != "" || req.MaxPreemptiblePerGPUHour != "")
}

// checkStartAt checks a booking's start at.
func checkStartAt(at, now time.Time, preemptible bool) error {
	switch {
	case !at.After(now):
		return invalid("starts_at", "starts_at %s is not in the future (now is %s); leave it out to start now",
			at.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	case at.Sub(now) > maxBookAhead:
		return invalid("starts_at", "starts_at %s is more than a year ahead", at.UTC().Format(time.RFC3339))
	case preemptible:
		return invalid("starts_at", "a booking is of standard capacity (num_gpus): set num_preemptible_gpus, max_preemptible_gpus, preemptible_gpu_types, preemptible_strategy or max_preemptible_per_gpu_hour once it has started")
	}
	return nil
}

// startOf is a request's start, to the second (zero: none).
func startOf(at *time.Time) time.Time {
	if at == nil {
		return time.Time{}
	}
	return at.UTC().Truncate(time.Second)
}

// scheduled reports whether c is a booking not started yet.
func scheduled(c domain.Cluster, now time.Time) bool { return c.ActiveAt.After(now) }

// updateBooking moves booking c (req.StartsAt) or changes its standard
// GPUs; a cluster that started cannot be moved.
func (s *Server) updateBooking(ctx context.Context, c domain.Cluster, req apiv1.UpdateClusterRequest) (domain.Cluster, error) {
	now := s.clock.Now()
	if req.StartsAt == nil {
		if (req.NumPreemptibleGPUs != nil && *req.NumPreemptibleGPUs > 0) || (req.MaxPreemptibleGPUs != nil && *req.MaxPreemptibleGPUs > 0) ||
			req.PreemptibleGPUTypes != nil || req.PreemptibleStrategy != nil || req.MaxPreemptiblePerGPUHour != nil {
			return domain.Cluster{}, checkStartAt(c.StartsAt, now, true)
		}
		return s.ctrl.UpdateCluster(ctx, c.ID, controller.Change{NumGPUs: req.NumGPUs})
	}
	if !scheduled(c, now) {
		what := "it was not booked ahead"
		if !c.StartsAt.IsZero() {
			what = "its nodes are planned since " + c.ActiveAt.UTC().Format(time.RFC3339)
		}
		return domain.Cluster{}, conflict("cluster %s cannot be moved: %s", c.ID, what)
	}
	if err := checkStartAt(*req.StartsAt, now, false); err != nil {
		return domain.Cluster{}, err
	}
	return s.ctrl.MoveBooking(ctx, c.ID, startOf(req.StartsAt))
}

// bookings lists the clusters booked ahead and not started yet.
func (s *Server) bookings(ctx context.Context, now time.Time) ([]domain.Cluster, error) {
	all, err := s.store.ListClusters(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []domain.Cluster
	for _, c := range all {
		if scheduled(c, now) && !c.Deleting {
			out = append(out, c)
		}
	}
	return out, nil
}

// bookHours takes off each hour of pf what is certain from bookings: the
// standard GPUs of the pool's bookings that have started by the hour's
// end (their nodes are planned from active_at) and the GPUs of its
// machines booked for maintenance by then, which the past the forecast
// reads does not know of.
func bookHours(pf *apiv1.PoolForecast, bookings []domain.Cluster, machines []domain.Machine, now time.Time) {
	for i := range pf.Hours {
		h := &pf.Hours[i]
		end := h.Start.Add(time.Hour)
		booked := 0
		for _, c := range bookings {
			if c.Region == pf.Region && c.GPUType == pf.GPUType && c.ActiveAt.Before(end) {
				booked += c.NumGPUs
			}
		}
		for _, m := range machines {
			if m.Region == pf.Region && m.GPUType == pf.GPUType && !m.OutOfService && !m.MaintenanceAt.IsZero() && m.MaintenanceAt.Before(end) {
				booked += m.GPUs
			}
		}
		if booked == 0 {
			continue
		}
		h.BookedGPUs = booked
		b := float64(booked)
		h.ExpectedGPUs, h.LowGPUs, h.HighGPUs = max(h.ExpectedGPUs-b, 0), max(h.LowGPUs-b, 0), max(h.HighGPUs-b, 0)
	}
}
