package simulate_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/client"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/server"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/simulate"
	"github.com/sparecap/sparecap/internal/store"
)

// fidelityScenario is small enough for a server to live through on a
// fake clock in seconds, busy enough that on-demand clusters reclaim
// preemptible nodes in both pools.
const fidelityScenario = `
seed: 11
horizon: 2h
fleet:
  pools:
    - {region: us-east-1, gpu_type: H100_SXM, machines: 6}
    - {region: us-east-1, gpu_type: H100_SXM, machines: 2, reserved_for: acme}
    - {region: eu-west-1, gpu_type: L40S, machines: 4}
  prices:
    H100_SXM: "2.99"
    L40S: "1.10"
on_demand:
  arrivals_per_hour: 4
  mean_lifetime: 30m
  gpus: [8, 16, 24]
tenants:
  count: 1
  target_gpus: 32
jobs:
  checkpoint_interval: 20m
  checkpoint_cost: 30s
  restart_cost: 5m
  exit_after_notice: 20s
policy:
  name: server
  cooldown: 30s
  # The server's simulated fleet tells whether a node runs pods, not
  # what its jobs would lose: the simulator sees as much.
  victims: idle-first
`

// TestFidelityAgainstTheServer: the same demand through the simulator and
// through the embedded server (its API, its controller's loop and step
// workers, its meter, the simulated fleet) on a virtual clock gives the
// same nodes on the same machines at the same instants (created,
// provisioning, ready, notice, removed, and why), and the same Result to
// the byte: bill, deliveries, reclaims, waits.
func TestFidelityAgainstTheServer(t *testing.T) {
	// Mostly waiting for the server to settle: the package's other tests
	// run meanwhile.
	t.Parallel()
	sc, err := simulate.Parse([]byte(fidelityScenario))
	if err != nil {
		t.Fatal(err)
	}
	evs := simulate.Generate(sc)
	ctx := context.Background()
	var simNodes []string
	want, err := simulate.RunInspect(ctx, sc, evs, sc.Policy, func(st store.Store) (err error) {
		simNodes, err = trajectory(ctx, st)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want.Run.StepErrors != 0 {
		t.Fatalf("the simulator's run had %d step errors", want.Run.StepErrors)
	}
	if want.Operator.Reclaims < 3 || want.Operator.OnDemandRequests < 5 {
		t.Fatalf("the scenario exercises too little: %d reclaims, %d on-demand requests", want.Operator.Reclaims, want.Operator.OnDemandRequests)
	}
	h := startServer(t, sc)
	refused := h.replay(t, evs)
	got, err := simulate.Outcome(ctx, h.srv.Store, sc, sc.Policy, evs, refused)
	if err != nil {
		t.Fatal(err)
	}
	srvNodes, err := trajectory(ctx, h.srv.Store)
	if err != nil {
		t.Fatal(err)
	}
	if d := diffLines(simNodes, srvNodes); d != "" {
		t.Errorf("the nodes differ (- simulator, + server):\n%s", d)
	}
	want.Run = simulate.RunStats{Nodes: want.Run.Nodes}
	a, _ := json.MarshalIndent(want, "", " ")
	b, _ := json.MarshalIndent(got, "", " ")
	if d := diffLines(strings.Split(string(a), "\n"), strings.Split(string(b), "\n")); d != "" {
		t.Errorf("the results differ (- simulator, + server):\n%s", d)
	}
	t.Logf("%d nodes, %d reclaims, %d on-demand requests, %d jumps of the server's clock",
		len(simNodes), want.Operator.Reclaims, want.Operator.OnDemandRequests, h.jumps)
}

// serverHarness is an embedded server on a fake clock.
type serverHarness struct {
	sc      simulate.Scenario
	clk     *clock.Fake
	srv     *server.Server
	admin   *client.Client
	project string
	ids     map[string]string
	jumps   int
}

// startServer starts the embedded server on sc's fleet and policy, with
// the simulator's pods, at the simulator's epoch.
func startServer(t *testing.T, sc simulate.Scenario) *serverHarness {
	dir := t.TempDir()
	fleetFile := filepath.Join(dir, "fleet.yaml")
	data, err := json.Marshal(sc.Fleet) // JSON is YAML
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fleetFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	pol := sc.Policy
	h := &serverHarness{sc: sc, clk: clock.NewFake(simulate.Epoch), ids: map[string]string{}}
	h.srv, err = server.Start(context.Background(), server.Options{Addr: "127.0.0.1:0", DataDir: dir, FleetFile: fleetFile,
		Clock: h.clk, DrainWindow: pol.DrainWindow.D, Cooldown: pol.Cooldown.D, SimSeed: int64(sc.Seed),
		SimPods: []sim.PodTemplate{{Name: "job", TerminationGracePeriod: pol.DrainWindow.D, ExitAfter: sc.Jobs.ExitAfterNotice.D}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.srv.Close() })
	h.admin = client.New(h.srv.URL, h.srv.AdminToken)
	p, err := h.admin.CreateProject(context.Background(), "sim")
	if err != nil {
		t.Fatal(err)
	}
	h.project = p.ProjectID
	h.settle(t)
	return h
}

// replay applies evs through the API at their instants, jumping the
// clock from one due time to the next (an event's, or what the server's
// controller says is due next) once the server has settled, and
// ends with the meter's cut at the horizon. It returns how many
// on-demand requests the server refused for capacity.
func (h *serverHarness) replay(t *testing.T, evs []simulate.Event) int {
	ctx := context.Background()
	end := simulate.Epoch.Add(h.sc.Horizon.D)
	refused, i := 0, 0
	for {
		next := end.Add(time.Nanosecond)
		if i < len(evs) {
			next = simulate.Epoch.Add(evs[i].At)
		}
		// The server's own answer to "what is due next": the same one the
		// simulator jumps on.
		if at, idle := h.srv.Controller.Due(); idle && !at.IsZero() && at.Before(next) {
			next = at
		}
		if next.After(end) {
			break
		}
		if next.After(h.clk.Now()) {
			h.clk.Set(next)
			h.jumps++
		}
		for ; i < len(evs) && !simulate.Epoch.Add(evs[i].At).After(next); i++ {
			if h.apply(t, evs[i]) {
				refused++
			}
			h.settle(t)
		}
		h.settle(t)
	}
	h.clk.Set(end)
	h.settle(t)
	if err := h.srv.Meter.Cut(ctx); err != nil {
		t.Fatal(err)
	}
	return refused
}

// apply makes one demand event an API request, as the simulator makes it
// a controller call; true: refused for capacity.
func (h *serverHarness) apply(t *testing.T, e simulate.Event) bool {
	ctx := context.Background()
	id, known := h.ids[e.Cluster]
	var err error
	switch {
	case !known && e.GPUs == 0:
		return false
	case !known:
		req := apiv1.CreateClusterRequest{ClusterName: e.Cluster, Region: e.Region, GPUType: e.GPUType,
			ClusterType: "KUBERNETES", BillingType: "ON_DEMAND", ProjectID: h.project}
		if e.Class == domain.Standard {
			req.NumGPUs = e.GPUs
		} else {
			req.NumGPUs, req.NumPreemptibleGPUs = e.Standard, e.GPUs
		}
		var c *apiv1.Cluster
		if c, err = h.admin.CreateCluster(ctx, req); err == nil {
			h.ids[e.Cluster] = c.ClusterID
			if e.Weight > 1 {
				_, err = h.admin.SetClusterWeight(ctx, c.ClusterID, e.Weight)
			}
		}
	case e.GPUs == 0:
		delete(h.ids, e.Cluster)
		_, err = h.admin.DeleteCluster(ctx, id)
	default:
		g := e.GPUs
		req := apiv1.UpdateClusterRequest{NumGPUs: &g}
		if e.Class == domain.Preemptible {
			req = apiv1.UpdateClusterRequest{NumPreemptibleGPUs: &g}
		}
		_, err = h.admin.UpdateCluster(ctx, id, req)
	}
	var ae *client.APIError
	switch {
	case err == nil:
		return false
	case errors.As(err, &ae) && ae.Code == apiv1.CodeNoCapacity:
		return e.Class == domain.Standard
	case errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusConflict):
		return false // a cluster the server already finished deleting, as the simulator ignores it
	}
	t.Fatalf("%s %s at T+%s: %v", e.Class, e.Cluster, e.At, err)
	return false
}

// settle waits until the server has nothing left to do at the clock's
// now: its controller idle (Controller.Due) at three looks in a row.
func (h *serverHarness) settle(t *testing.T) {
	deadline := time.Now().Add(time.Minute)
	for calm := 0; calm < 3; {
		if time.Now().After(deadline) {
			t.Fatalf("the server did not settle at T+%s", h.clk.Now().Sub(simulate.Epoch))
		}
		time.Sleep(100 * time.Microsecond)
		if _, idle := h.srv.Controller.Due(); idle {
			calm++
		} else {
			calm = 0
		}
	}
}

// A pool's machines are alike: which of them a node lands on is the
// allocator's tie-break, which on a server follows its random node IDs.
// A trajectory names the machine's pool only. (So would it a pool's
// tenants if it had several alike ones: the scenario has one per pool.)
var machineRE = regexp.MustCompile(`-[0-9]+$`)

// trajectory is every node st holds, one line each, sorted: its
// cluster's name, machine, class and GPUs, its instants from the epoch,
// and why it drained.
func trajectory(ctx context.Context, st store.Store) ([]string, error) {
	nodes, err := st.ListNodes(ctx, store.NodeFilter{IncludeRemoved: true})
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.Sub(simulate.Epoch).String()
	}
	var out []string
	for _, n := range nodes {
		name, ok := names[n.ClusterID]
		if !ok {
			c, err := st.GetClusterRecord(ctx, n.ClusterID)
			if err != nil {
				return nil, err
			}
			name, names[n.ClusterID] = c.Name, c.Name
		}
		out = append(out, fmt.Sprintf("%s %s %s/%d created %s provisioning %s ready %s notice %s (%s) removed %s",
			name, machineRE.ReplaceAllString(n.MachineID, "-*"), n.Class, n.GPUs, at(n.CreatedAt), at(n.ProvisioningAt), at(n.ReadyAt),
			at(n.DrainStartedAt), n.DrainCause, at(n.RemovedAt)))
	}
	slices.Sort(out)
	return out, nil
}

// diffLines lists the lines only a or only b holds ("" if none).
func diffLines(a, b []string) string {
	var d []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			d = append(d, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			d = append(d, "+ "+l)
		}
	}
	return strings.Join(d, "\n")
}
