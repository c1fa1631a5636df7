package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestPlanPage: a tenant plans a job through the form: the plan, its
// advice and the deadline rows; a bad number is shown by its field and
// asks nothing; "any region and GPU type" ranks every pool.
func TestPlanPage(t *testing.T) {
	e := newEnv(t)
	b := e.browser()
	b.signIn(e.tokens["p"])
	status, page, _ := b.get("/console/plan")
	if status != 200 || !strings.Contains(page, `id="plan-form"`) || !strings.Contains(page, "us-central-2 · RTX_6000_PCI") || strings.Contains(page, `id="plan-result"`) {
		t.Fatalf("plan form %d", status)
	}
	q := url.Values{"region_gpu": {"us-central-2/RTX_6000_PCI"}, "gpu_hours": {"384"}, "gpus": {"8"}, "checkpoint_seconds": {"90"},
		"restart_seconds": {"720"}, "deadline_hours": {"52"}, "rate": {"4.1"}}
	status, page, _ = b.get("/console/plan?" + q.Encode())
	if status != 200 || !strings.Contains(page, `id="plan-advice"`) || !strings.Contains(page, "move to standard nodes when the slack runs out") ||
		!strings.Contains(page, `id="plan-row"`) || !strings.Contains(page, "Rate 4.1 %/h (asked); checkpoint every 32m38s") ||
		!strings.Contains(page, `id="plan-data"`) || strings.Contains(page, "%!") ||
		!strings.Contains(page, "Preemptible always pays here") || strings.Contains(page, "stops paying") {
		t.Fatalf("plan %d:\n%s", status, page)
	}
	q.Set("gpus", "12")
	status, page, _ = b.get("/console/plan?" + q.Encode())
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-gpu_hours"`) || !strings.Contains(page, "multiple of 8") {
		t.Fatalf("plan with 12 GPUs %d:\n%s", status, page)
	}
	q.Set("gpus", "8")
	q.Set("rate", "lots")
	status, page, _ = b.get("/console/plan?" + q.Encode())
	if status != http.StatusBadRequest || !strings.Contains(page, `id="err-rate"`) {
		t.Fatalf("plan with a bad rate %d", status)
	}
	// Any region and GPU type: every pool ranked, each linking its week.
	q.Set("region_gpu", "any")
	q.Set("rate", "4.1")
	if status, page, _ = b.get("/console/plan?" + q.Encode()); status != http.StatusBadRequest || !strings.Contains(page, "a what-if rate is for one region") {
		t.Fatalf("any pool with a what-if rate %d:\n%s", status, page)
	}
	q.Del("rate")
	status, page, _ = b.get("/console/plan?" + q.Encode())
	if status != 200 || !strings.Contains(page, `id="plan-options"`) || !strings.Contains(page, "<tr><td>1</td>") ||
		!strings.Contains(page, `href="/console/pools/week?region=us-central-2&amp;gpu_type=RTX_6000_PCI"`) || !strings.Contains(page, "<th>Deadline met</th>") ||
		strings.Contains(page, `id="plan-result"`) || strings.Contains(page, "%!") {
		t.Fatalf("any pool %d:\n%s", status, page)
	}
}

// TestSimulationPages: the admin runs a scenario from the form and reads
// the result's tables and charts; a bad scenario is shown and runs
// nothing; a project may not.
func TestSimulationPages(t *testing.T) {
	e := newEnv(t)
	p := e.browser()
	pc := p.signIn(e.tokens["p"])
	if status, _, _ := p.get("/console/simulations"); status != http.StatusForbidden {
		t.Fatalf("simulations for a project: %d", status)
	}
	if status, _, _ := p.post("/console/simulations", url.Values{"csrf": {pc}, "scenario": {"horizon: 1h"}}); status != http.StatusForbidden {
		t.Fatalf("a project's simulation: %d", status)
	}
	a := e.browser()
	csrf := a.signIn(adm)
	status, page, _ := a.get("/console/simulations")
	if status != 200 || !strings.Contains(page, `id="simulation-form"`) || !strings.Contains(page, "horizon: 168h") {
		t.Fatalf("simulations page %d", status)
	}
	status, page, _ = a.post("/console/simulations", url.Values{"csrf": {csrf}, "scenario": {"horizon: [1h"}})
	if status != http.StatusBadRequest || !strings.Contains(page, "not YAML") {
		t.Fatalf("bad YAML %d", status)
	}
	status, page, _ = a.post("/console/simulations", url.Values{"csrf": {csrf}, "scenario": {"horizon: 1h\ntenants: {count: 1, target_gpus: 12}"}})
	if status != http.StatusBadRequest || !strings.Contains(page, "12 GPUs is not a multiple of 8") {
		t.Fatalf("bad scenario %d", status)
	}
	scenario := "seed: 2\nhorizon: 2h\ntenants: {count: 1, target_gpus: 16}\non_demand: {arrivals_per_hour: 2, mean_lifetime: 30m, gpus: [8]}\ncompare: {name: slow, cooldown: 10m}\njobs: {gang_gpus: 16}\n"
	status, _, h := a.post("/console/simulations", url.Values{"csrf": {csrf}, "scenario": {scenario}})
	loc := h.Get("Location")
	if status != http.StatusSeeOther || !regexp.MustCompile(`^/console/simulations/sim-`).MatchString(loc) {
		t.Fatalf("run %d to %q", status, loc)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		status, page, _ = a.get(loc)
		if strings.Contains(page, `id="sim-status">done<`) || time.Now().After(deadline) {
			break
		}
		if !strings.Contains(page, "data-refresh") {
			t.Fatalf("a simulation not done does not reload itself:\n%s", page)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if strings.Contains(page, "%!") {
		t.Errorf("a formatting error on the result page:\n%s", page)
	}
	for _, want := range []string{"The operator, policy by policy", "<th>policy</th><th>slow</th>", `id="sim-chart-0"`, `id="sim-chart-1"`,
		`id="sim-data-1"`, `id="sim-reclaims"`, "tenant-1-us-central-2-rtx-6000-pci", "Preemptible GPU-hours", "Standard GPU-hours asked", "Waited for a gang GPU-h"} {
		if !strings.Contains(page, want) {
			t.Fatalf("result page %d lacks %q:\n%s", status, want, page)
		}
	}
	if strings.Contains(page, "data-refresh") {
		t.Error("a done simulation still reloads itself")
	}
	if _, page, _ = a.get("/console/simulations"); !strings.Contains(page, strings.TrimPrefix(loc, "/console/simulations/")) {
		t.Error("the list does not show the simulation")
	}
	// Demand the fleet cannot hold: the page says so before any figure.
	huge := "seed: 2\nhorizon: 2h\non_demand: {arrivals_per_hour: 20, mean_lifetime: 2h, gpus: [99992]}\n"
	if status, _, h = a.post("/console/simulations", url.Values{"csrf": {csrf}, "scenario": {huge}}); status != http.StatusSeeOther {
		t.Fatalf("run %d", status)
	}
	page = waitSimulation(t, a, h.Get("Location"))
	if !strings.Contains(page, `<strong>Warning (policy):</strong> most of the standard demand was refused`) {
		t.Errorf("the result of refused demand does not warn:\n%s", page)
	}
}

// waitSimulation reads the console's page of a simulation until it is done.
func waitSimulation(t *testing.T, a *browser, loc string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, page, _ := a.get(loc)
		if strings.Contains(page, `id="sim-status">done<`) {
			return page
		}
		if time.Now().After(deadline) {
			t.Fatalf("simulation %s not done in a minute:\n%s", loc, page)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
