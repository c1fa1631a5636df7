package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/sparecap/sparecap/docs"
	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/simulate"
)

// waitSimulation polls a simulation until it has one of the statuses.
func (e *env) waitSimulation(id string, want ...string) apiv1.Simulation {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var s apiv1.Simulation
		e.do("admin", "GET", "/v1/simulations/"+id, "", 200, &s)
		for _, w := range want {
			if s.Status == w {
				return s
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("simulation %s %s, want %v", id, s.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSimulations: the operator posts docs/planning.md's scenario (over 2
// hours) and gets, once done, the very result `sparecap simulate -o json`
// prints; a scenario without a fleet runs on the server's own; a trace
// replaces the demand; a tenant may not; bad input names its field and
// queues nothing; a running simulation cancels.
func TestSimulations(t *testing.T) {
	e := newEnv(t)
	defer e.api.CloseSimulations()
	text, err := docs.Snippet("planning.md", "week-scenario")
	if err != nil {
		t.Fatal(err)
	}
	js, err := yaml.YAMLToJSON([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	json.Unmarshal(js, &raw)
	raw["horizon"] = "2h"
	body, _ := json.Marshal(map[string]any{"scenario": raw})

	var created apiv1.Simulation
	e.do("admin", "POST", "/v1/simulations", string(body), 202, &created)
	if created.Status != "queued" && created.Status != "running" || created.Progress.TotalSeconds != 7200 {
		t.Fatalf("created %+v", created)
	}
	done := e.waitSimulation(created.ID, "done")
	sc, err := simulate.Parse(js)
	if err != nil {
		t.Fatal(err)
	}
	sc.Horizon.D = 2 * time.Hour
	want, err := simulate.Compare(context.Background(), sc, simulate.Generate(sc), nil)
	if err != nil {
		t.Fatal(err)
	}
	var b, compact bytes.Buffer
	want.WriteJSON(&b)
	json.Compact(&compact, b.Bytes())
	if string(done.Result) != compact.String() || done.StartedAt == nil || done.FinishedAt == nil || done.Progress.DoneSeconds != 7200 {
		t.Fatalf("result differs from sparecap simulate's:\n%s\n%s", done.Result, b.String())
	}

	// The server's own fleet: 6 machines, 48 GPUs.
	var own apiv1.Simulation
	e.do("admin", "POST", "/v1/simulations", `{"scenario": {"horizon": "1h", "seed": 3, "tenants": {"count": 1, "target_gpus": 8}}}`, 202, &own)
	own = e.waitSimulation(own.ID, "done")
	var c struct {
		Runs []struct {
			Operator struct {
				Fleet float64 `json:"fleet_gpu_hours"`
			}
			Tenants []struct{ Cluster string }
		}
	}
	if err := json.Unmarshal(own.Result, &c); err != nil || c.Runs[0].Operator.Fleet != 48 || len(c.Runs[0].Tenants) != 2 {
		t.Fatalf("on the server's fleet: %v %+v", err, c)
	}

	// A trace's demand.
	trace, _ := docs.Snippet("planning.md", "trace")
	trace = strings.ReplaceAll(strings.ReplaceAll(trace, "us-east-1", "us-central-2"), "H100_SXM", "RTX_6000_PCI")
	trace = strings.ReplaceAll(strings.ReplaceAll(trace, ",128\n", ",24\n"), ",192\n", ",16\n")
	tb, _ := json.Marshal(map[string]any{"scenario": map[string]any{"horizon": "6h"}, "trace": trace})
	var tr apiv1.Simulation
	e.do("admin", "POST", "/v1/simulations", string(tb), 202, &tr)
	tr = e.waitSimulation(tr.ID, "done")
	if !strings.Contains(string(tr.Result), `"cluster":"train"`) {
		t.Fatalf("the trace's tenant is not in the result: %s", tr.Result)
	}

	for _, tc := range []struct{ body, field string }{
		{`{}`, "scenario"},
		{`{"scenario": {"horizon": "0s"}}`, "scenario"},
		{`{"scenario": {"horizon": "1h", "bogus": 1}}`, "scenario"},
		{`{"scenario": {"horizon": "1h"}, "trace": "at,cluster\n"}`, "trace"},
		{`{"scenario": {"horizon": "1h"}, "extra": 1}`, "extra"},
	} {
		if got := e.apiErr("admin", "POST", "/v1/simulations", tc.body, 400); got.Field != tc.field {
			t.Errorf("%s: %+v, want field %s", tc.body, got, tc.field)
		}
	}
	e.apiErr("p", "POST", "/v1/simulations", `{"scenario": {"horizon": "1h"}}`, 403)
	e.apiErr("p", "GET", "/v1/simulations", "", 403)
	e.apiErr("admin", "GET", "/v1/simulations/sim-nope", "", 404)
	e.apiErr("admin", "POST", "/v1/simulations/sim-nope/cancel", "", 404)

	var long apiv1.Simulation
	e.do("admin", "POST", "/v1/simulations", `{"scenario": {"horizon": "8000h", "tenants": {"count": 2, "target_gpus": 8}, "on_demand": {"arrivals_per_hour": 2, "mean_lifetime": "2h", "gpus": [8]}}}`, 202, &long)
	e.waitSimulation(long.ID, "running")
	e.do("admin", "POST", "/v1/simulations/"+long.ID+"/cancel", "", 200, nil)
	if s := e.waitSimulation(long.ID, "cancelled", "done"); s.Status != "cancelled" || s.Result != nil {
		t.Errorf("cancelled: %+v", s)
	}
	var list apiv1.SimulationList
	e.do("admin", "GET", "/v1/simulations", "", 200, &list)
	if len(list.Simulations) != 4 || list.Simulations[0].ID != long.ID || list.Simulations[0].Result != nil {
		t.Errorf("list: %s", fmt.Sprint(list))
	}
}
