package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
)

// planForm is the planner's page: the form, its errors and the plan.
type planForm struct {
	Values map[string]string
	Errors map[string]string
	Offers []offer
	Plan   *apiv1.Plan
	// Options: the job ranked in every pool (region_gpu "any").
	Options *apiv1.PlanOptions
}

// planFields are the planner form's fields, with their defaults.
var planFields = map[string]string{"region_gpu": "", "gpu_hours": "", "gpus": "8", "checkpoint_seconds": "90", "restart_seconds": "600",
	"deadline_hours": "", "rate": "", "checkpoint_at_notice": ""}

// plan serves GET /console/plan: the form, and with gpu_hours the plan
// the API answers (a question, so a GET: the page can be bookmarked).
func (c *Console) plan(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	ctx := r.Context()
	q := r.URL.Query()
	f := planForm{Values: map[string]string{}, Errors: map[string]string{}}
	for k, def := range planFields {
		f.Values[k] = def
		if v := q.Get(k); v != "" || q.Has("gpu_hours") {
			f.Values[k] = strings.TrimSpace(v)
		}
	}
	if f.Values["gpus"] == "" {
		f.Values["gpus"] = "8"
	}
	offers, err := c.offers(ctx, api)
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	f.Offers = offers
	status := http.StatusOK
	if q.Has("gpu_hours") {
		status = c.askPlan(r, api, &f)
	}
	c.render(w, status, "plan", view{Title: "Plan a job", Nav: "plan", Data: f}, s)
}

// askPlan reads the form into a question, asks the API and keeps the
// plan or the errors; it returns the page's status.
func (c *Console) askPlan(r *http.Request, api *client.Client, f *planForm) int {
	v := f.Values
	num := func(name string) float64 {
		if v[name] == "" {
			return 0
		}
		x, err := strconv.ParseFloat(v[name], 64)
		if err != nil {
			f.Errors[name] = fmt.Sprintf("%s must be a number", strings.ReplaceAll(name, "_", " "))
		}
		return x
	}
	secs := func(name string) time.Duration { return time.Duration(num(name) * float64(time.Second)) }
	region, gpu, _ := strings.Cut(v["region_gpu"], "/")
	q := client.PlanQuery{Region: region, GPUType: gpu, GPUHours: num("gpu_hours"), GPUs: int(num("gpus")),
		Checkpoint: secs("checkpoint_seconds"), Restart: secs("restart_seconds"), CheckpointAtNotice: v["checkpoint_at_notice"] == "on",
		Deadline: time.Duration(num("deadline_hours") * float64(time.Hour)), RatePercentPerHour: -1}
	if v["rate"] != "" {
		q.RatePercentPerHour = num("rate")
	}
	if len(f.Errors) > 0 {
		return http.StatusBadRequest
	}
	if v["region_gpu"] == "any" {
		return askOptions(r, api, f, q)
	}
	p, err := api.Plan(r.Context(), q)
	if err != nil {
		msg, _ := fieldError(err, f.Errors)
		for from, to := range map[string]string{"region": "region_gpu", "gpu_type": "region_gpu", "rate_percent_per_hour": "rate", "plan": "gpu_hours"} {
			if e := f.Errors[from]; e != "" {
				f.Errors[to] = e
			}
		}
		if msg != "" {
			f.Errors["gpu_hours"] = msg
		}
		if len(f.Errors) == 0 {
			f.Errors["gpu_hours"] = err.Error()
		}
		return statusOf(err)
	}
	f.Plan = p
	return http.StatusOK
}

// askOptions asks for the job of q ranked in every pool and keeps them,
// or the error; it returns the page's status.
func askOptions(r *http.Request, api *client.Client, f *planForm, q client.PlanQuery) int {
	if q.RatePercentPerHour >= 0 {
		f.Errors["rate"] = "a what-if rate is for one region and GPU type: every pool is planned at its own measured rate"
		return http.StatusBadRequest
	}
	o, err := api.PlanOptions(r.Context(), q, nil, nil)
	if err != nil {
		msg, _ := fieldError(err, f.Errors)
		if e := f.Errors["plan"]; e != "" {
			f.Errors["gpu_hours"] = e
		}
		if msg != "" || len(f.Errors) == 0 {
			f.Errors["gpu_hours"] = err.Error()
		}
		return statusOf(err)
	}
	f.Options = o
	return http.StatusOK
}

// simulationsPage is the simulations list and the form to start one.
type simulationsPage struct {
	Simulations []apiv1.Simulation
	Scenario    string
	Trace       string
}

// defaultScenario fills the form: a week of the server's own fleet.
const defaultScenario = `# Without a fleet: the server's own machines and prices.
seed: 1
horizon: 168h
on_demand:
  arrivals_per_hour: 0.5
  mean_lifetime: 8h
  gpus: [8, 16]
tenants:
  count: 2
  target_gpus: 16
jobs:
  checkpoint_interval: 30m
  checkpoint_cost: 90s
  restart_cost: 10m
  exit_after_notice: 20s
policy:
  name: cooldown-30s
compare:
  name: cooldown-30m
  cooldown: 30m
`

// simulations serves GET /console/simulations (admin).
func (c *Console) simulations(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !c.adminOnly(w, s) {
		return
	}
	c.renderSimulations(w, r, s, api, http.StatusOK, defaultScenario, "", "")
}

func (c *Console) renderSimulations(w http.ResponseWriter, r *http.Request, s *session, api *client.Client, status int, scenario, trace, msg string) {
	list, err := api.ListSimulations(r.Context())
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	c.render(w, status, "simulations", view{Title: "Simulations", Nav: "simulations", Error: msg,
		Data: simulationsPage{Simulations: list.Simulations, Scenario: scenario, Trace: trace}}, s)
}

// startSimulation serves POST /console/simulations (admin): the scenario
// in YAML, as the CLI reads it.
func (c *Console) startSimulation(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !c.adminOnly(w, s) {
		return
	}
	scenario, trace := r.PostFormValue("scenario"), r.PostFormValue("trace")
	js, err := yaml.YAMLToJSON([]byte(scenario))
	if err != nil {
		c.renderSimulations(w, r, s, api, http.StatusBadRequest, scenario, trace, "The scenario is not YAML: "+err.Error())
		return
	}
	sim, err := api.CreateSimulation(r.Context(), apiv1.CreateSimulationRequest{Scenario: js, Trace: trace})
	var ae *client.APIError
	if errors.As(err, &ae) && ae.Status < 500 {
		c.renderSimulations(w, r, s, api, statusOf(err), scenario, trace, ae.Message)
		return
	}
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/simulations/"+url.PathEscape(sim.ID), http.StatusSeeOther)
}

// simulationView is one simulation's page: its status, and once done its
// result decoded for the tables and charts.
type simulationView struct {
	Sim    *apiv1.Simulation
	Result *simResult
	// Refresh: the page reloads itself while the simulation is not done.
	Refresh bool
	// OperatorRows are the rows of the operator's table.
	OperatorRows []struct{ Key, Name string }
}

// simResult is what the page shows of a result (the JSON of sparecap
// simulate; see package simulate).
type simResult struct {
	Seed    uint64 `json:"seed"`
	Horizon string `json:"horizon"`
	Events  int    `json:"demand_events"`
	// GangGPUs: the jobs ran in gangs; the tenants' table shows the
	// GPU-hours waited for one.
	GangGPUs int `json:"gang_gpus"`
	Runs     []struct {
		Policy struct {
			Name string `json:"name"`
		} `json:"policy"`
		Operator map[string]any   `json:"operator"`
		Warnings []string         `json:"warnings"`
		Tenants  []map[string]any `json:"tenants"`
		Series   []map[string]any `json:"series"`
	} `json:"runs"`
}

// operatorRows are the operator's figures the page compares.
var operatorRows = []struct{ Key, Name string }{
	{"fleet_gpu_hours", "Fleet GPU-hours"}, {"asked_standard_gpu_hours", "Standard GPU-hours asked"}, {"asked_preemptible_gpu_hours", "Preemptible GPU-hours asked"}, {"standard_gpu_hours", "Standard GPU-hours"}, {"preemptible_gpu_hours", "Preemptible GPU-hours"},
	{"lent_from_idle_gpu_hours", "lent from idle on-demand"}, {"lent_from_reserved_gpu_hours", "lent from idle reservations"},
	{"idle_gpu_hours", "Idle GPU-hours"}, {"preemptible_revenue", "Preemptible revenue"}, {"standard_revenue", "Standard revenue"},
	{"reclaims", "Reclaims"}, {"on_demand_refused", "On-demand requests refused"}, {"on_demand_waited_for_a_drain", "On-demand requests that waited for a drain"},
}

// simulation serves GET /console/simulations/{id} (admin).
func (c *Console) simulation(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !c.adminOnly(w, s) {
		return
	}
	sim, err := api.GetSimulation(r.Context(), r.PathValue("id"))
	if err != nil {
		c.apiFailure(w, s, err)
		return
	}
	v := simulationView{Sim: sim, Refresh: sim.Status == "queued" || sim.Status == "running", OperatorRows: operatorRows}
	if len(sim.Result) > 0 {
		var res simResult
		if err := json.Unmarshal(sim.Result, &res); err != nil {
			c.apiFailure(w, s, err)
			return
		}
		v.Result = &res
	}
	c.render(w, http.StatusOK, "simulation", view{Title: "Simulation " + sim.ID, Nav: "simulations", Data: v}, s)
}

// cancelSimulation serves POST /console/simulations/{id}/cancel (admin).
func (c *Console) cancelSimulation(w http.ResponseWriter, r *http.Request, s *session, api *client.Client) {
	if !c.adminOnly(w, s) {
		return
	}
	if _, err := api.CancelSimulation(r.Context(), r.PathValue("id")); err != nil {
		c.apiFailure(w, s, err)
		return
	}
	http.Redirect(w, r, "/console/simulations/"+url.PathEscape(r.PathValue("id")), http.StatusSeeOther)
}

// adminOnly answers 403 to a project's session.
func (c *Console) adminOnly(w http.ResponseWriter, s *session) bool {
	if !s.admin {
		c.render(w, http.StatusForbidden, "error", view{Title: "Admins only", Error: "Simulations need the admin token."}, s)
		return false
	}
	return true
}
