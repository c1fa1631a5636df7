package api

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/billing"
	"github.com/sparecap/sparecap/internal/plan"
)

// planSeed seeds every plan's Monte Carlo: the same question gets the
// same answer.
const planSeed = 1

// jobPlan serves GET /v1/plan: a job's cost and time on preemptible and
// standard nodes at the preemption rate measured in its region and GPU
// type (or the rate asked, for a what-if), and with a deadline the plan
// that meets it. Like the statistics, any token may ask.
func (s *Server) jobPlan(w http.ResponseWriter, r *http.Request, p principal) {
	ctx := r.Context()
	q := r.URL.Query()
	out, j, m, err := s.planInput(ctx, r, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	runs, err := plan.Runs(j, m)
	if err != nil {
		s.fail(w, r, invalid("gpu_hours", "%s", err.Error()))
		return
	}
	release, ok := s.takePlanTurn(w, r, p)
	if !ok {
		return
	}
	res := plan.Make(j, m, runs, plan.PoissonRuns(j, m, planSeed))
	release()
	res.Fill(&out)
	writeJSON(w, http.StatusOK, out)
}

// takePlanTurn is planTurn for a handler: without a turn it answers
// (429 with Retry-After) and says so.
func (s *Server) takePlanTurn(w http.ResponseWriter, r *http.Request, p principal) (func(), bool) {
	release, err := s.planTurn(r.Context(), p)
	if err != nil {
		w.Header().Set("Retry-After", "1")
		s.fail(w, r, err)
		return nil, false
	}
	return release, true
}

// planWait is how long a plan waits for the one running before it is
// refused (429).
const planWait = 2 * time.Second

// planTurn takes the server's one plan slot: a plan is a quarter of a
// second of CPU at most, and plans run one at a time so that they never
// take more than one core from the rest of the server; a project (or an
// operator's token) has one plan running or waiting at a time, so one
// tenant's plans cannot queue out another's.
func (s *Server) planTurn(ctx context.Context, p principal) (func(), error) {
	holder, whose := p.key, "this token"
	if !p.admin {
		holder, whose = "project:"+p.project, "project "+p.project
	}
	if !s.planners.acquire(holder, 1) {
		return nil, rateLimited("%s already has a plan running; ask again once it is answered", whose)
	}
	wait := s.realClock.After(planWait)
	select {
	case s.planSlot <- struct{}{}:
		return func() { <-s.planSlot; s.planners.release(holder) }, nil
	case <-wait:
	case <-ctx.Done():
	}
	s.planners.release(holder)
	return nil, rateLimited("the server is busy with other plans; ask again in a second")
}

// planInput reads and checks a plan's question and looks up its market.
func (s *Server) planInput(ctx context.Context, r *http.Request, q url.Values) (apiv1.Plan, plan.Job, plan.Market, error) {
	out := apiv1.Plan{Region: q.Get("region"), GPUType: q.Get("gpu_type")}
	var j plan.Job
	var m plan.Market
	switch {
	case out.Region == "":
		return out, j, m, invalid("region", "region is required")
	case out.GPUType == "":
		return out, j, m, invalid("gpu_type", "gpu_type is required")
	}
	if err := s.knownPool(ctx, out.Region, out.GPUType); err != nil {
		return out, j, m, err
	}
	j, err := planJob(q, &out)
	if err != nil {
		return out, j, m, err
	}
	if m, err = s.planMarket(ctx, r, &out, q.Get("rate_percent_per_hour")); err != nil {
		return out, j, m, err
	}
	if err := plan.Check(j, m); err != nil {
		return out, j, m, invalid("plan", "%s", err.Error())
	}
	return out, j, m, nil
}

// planJob reads and checks a plan's job, and writes it in out.
func planJob(q url.Values, out *apiv1.Plan) (plan.Job, error) {
	var j plan.Job
	var err error
	num := func(name string, def float64) float64 {
		if err != nil {
			return 0
		}
		v := q.Get(name)
		if v == "" {
			return def
		}
		f, perr := strconv.ParseFloat(v, 64)
		if perr != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			err = invalid(name, "%s must be a number; got %q", name, boundQuery(v))
		}
		return f
	}
	secs := func(name string) time.Duration {
		f := num(name, 0)
		if err == nil && !(f >= 0 && f <= plan.MaxDuration.Seconds()) {
			err = invalid(name, "%s must be between 0 and %.0f seconds; got %g", name, plan.MaxDuration.Seconds(), f)
		}
		return time.Duration(f * float64(time.Second))
	}
	out.GPUHours = num("gpu_hours", 0)
	gpus := num("gpus", 8)
	j = plan.Job{GPUHours: out.GPUHours, GPUs: int(gpus), CheckpointCost: secs("checkpoint_seconds"), RestartCost: secs("restart_seconds"),
		Interval: secs("interval_seconds"), Deadline: time.Duration(num("deadline_hours", 0) * float64(time.Hour))}
	if err != nil {
		return j, err
	}
	if gpus != math.Trunc(gpus) {
		return j, invalid("gpus", "gpus must be a whole number; got %g", gpus)
	}
	switch v := q.Get("checkpoint_at_notice"); v {
	case "", "false":
	case "true":
		j.CheckpointAtNotice = true
	default:
		return j, invalid("checkpoint_at_notice", "checkpoint_at_notice must be true or false; got %q", boundQuery(v))
	}
	out.GPUs, out.CheckpointSeconds, out.RestartSeconds, out.CheckpointAtNotice = j.GPUs, j.CheckpointCost.Seconds(), j.RestartCost.Seconds(), j.CheckpointAtNotice
	out.DeadlineHours = j.Deadline.Hours()
	return j, nil
}

// planMarket is the rate (measured, or asked), the prices and the notice
// of a plan's region and GPU type.
func (s *Server) planMarket(ctx context.Context, r *http.Request, out *apiv1.Plan, asked string) (plan.Market, error) {
	m := plan.Market{Window: s.ctrl.Config().DrainWindow}
	out.DrainWindowSeconds = m.Window.Seconds()
	rate, err := s.measuredRate(r, out.Region, out.GPUType)
	if err != nil {
		return m, err
	}
	out.RateBasis, out.Note = rate.basis, rate.note
	if rate.basis == "none" {
		out.Note = fmt.Sprintf("no preemptible node ran in %s %s in the last 7 days: the plan assumes no preemption; "+
			"ask with rate_percent_per_hour for a what-if", out.Region, out.GPUType)
	}
	m.RatePercentPerHour = rate.percentPerHour
	if asked != "" {
		f, err := strconv.ParseFloat(asked, 64)
		if err != nil || !(f >= 0 && f <= plan.MaxRate) {
			return m, invalid("rate_percent_per_hour", "rate_percent_per_hour must be between 0 and %d; got %q", plan.MaxRate, boundQuery(asked))
		}
		m.RatePercentPerHour, out.RateBasis, out.Note = f, "asked", ""
	}
	out.PreemptionRatePercentPerHour = m.RatePercentPerHour
	b, err := s.book(ctx)
	if err != nil {
		return m, err
	}
	now := s.clock.Now().Unix()
	od, ok := b.OnDemandRate(out.Region, out.GPUType, now)
	if !ok {
		return m, invalid("gpu_type", "no on-demand price for %s in %s: nothing to plan a cost with", out.GPUType, out.Region)
	}
	disc := b.DiscountBP(now)
	out.OnDemandPerGPUHour, out.PreemptibleDiscountPercent = billing.FormatRate(od), percent(disc)
	m.OnDemand, m.Discount = float64(od)/1e6, float64(disc)/float64(billing.FullBP)
	return m, nil
}

func round3(f float64) float64 { return math.Round(f*1000) / 1000 }

// boundQuery bounds a query value echoed in an error.
func boundQuery(v string) string {
	if len(v) > 64 {
		return v[:64] + "..."
	}
	return v
}
