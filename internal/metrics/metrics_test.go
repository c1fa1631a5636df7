package metrics

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/driver"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

const (
	region = "us-central-2"
	gpu    = "RTX_6000_PCI"
)

// Two on-demand machines and two of acme's reservation, idle until acme
// claims them.
const testFleet = `
pools:
  - {region: us-central-2, gpu_type: RTX_6000_PCI, machines: 2}
  - {region: us-central-2, gpu_type: RTX_6000_PCI, machines: 2, reserved_for: acme}
`

// Every pod ignores SIGTERM, so a drain runs to its deadline unless the
// test deletes the pods itself.
var stubbornPods = []sim.PodTemplate{{Name: "trainer", TerminationGracePeriod: 10 * time.Minute, ExitAfter: sim.NeverExits}}

type world struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Fake
	st  store.Store
	sim *sim.Fleet
	c   *controller.Controller
	m   *Metrics
	obs []controller.Observation
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	w := &world{t: t, ctx: ctx, clk: clock.NewFake(t0)}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w.st = st
	f, err := fleet.Parse([]byte(testFleet))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Register(ctx, st, f, t0); err != nil {
		t.Fatal(err)
	}
	if err := st.Update(ctx, func(tx store.Tx) error { return tx.CreateProject(ctx, domain.Project{ID: "team", CreatedAt: t0}) }); err != nil {
		t.Fatal(err)
	}
	w.sim, err = sim.New(sim.Config{Clock: w.clk, Pods: stubbornPods, ProvisionTime: 20 * time.Second, WipeTime: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	w.c = controller.New(st, w.sim, w.sim, w.clk, controller.Config{Cooldown: -1}, nil)
	w.m = New(st, clock.Real{})
	w.c.Observer = controller.Observers(func(o controller.Observation) { w.obs = append(w.obs, o) }, nil, w.m.Observe)
	return w
}

func (w *world) reconcile() {
	w.t.Helper()
	if _, err := w.c.Turn(w.ctx); err != nil {
		w.t.Fatal(err)
	}
}

// advance steps the clock a second at a time, reconciling after each step.
func (w *world) advance(d time.Duration) {
	w.t.Helper()
	for end := w.clk.Now().Add(d); w.clk.Now().Before(end); {
		w.clk.Step(time.Second)
		w.reconcile()
	}
}

func (w *world) create(id, project string, billing domain.BillingType, std, pre int) {
	w.t.Helper()
	_, err := w.c.CreateCluster(w.ctx, domain.Cluster{ID: id, Name: id, ProjectID: project, Region: region, GPUType: gpu,
		Type: domain.ClusterKubernetes, BillingType: billing, NumGPUs: std, DesiredPreemptibleGPUs: pre})
	if err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) nodes(cluster string, class domain.ComputeClass, state domain.NodeState) []domain.Node {
	w.t.Helper()
	ns, err := w.st.ListNodes(w.ctx, store.NodeFilter{ClusterID: cluster, States: []domain.NodeState{state}})
	if err != nil {
		w.t.Fatal(err)
	}
	var out []domain.Node
	for _, n := range ns {
		if n.Class == class {
			out = append(out, n)
		}
	}
	return out
}

// scrape fetches h over HTTP and parses the text exposition.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL+"/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %s\n%s", resp.Status, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse exposition: %v\n%s", err, body)
	}
	return fams
}

// find returns the series of family name whose labels include want.
func find(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	t.Helper()
	f, ok := fams[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range f.GetMetric() {
		if labelsMatch(m, want) {
			return m
		}
	}
	t.Fatalf("no series %s%v; have %v", name, want, f.GetMetric())
	return nil
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	t.Helper()
	m := find(t, fams, name, labels)
	switch {
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Counter != nil:
		return m.Counter.GetValue()
	}
	t.Fatalf("%s%v is neither a gauge nor a counter", name, labels)
	return 0
}

func expect(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string, want float64) {
	t.Helper()
	if got := value(t, fams, name, labels); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func histogram(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Histogram {
	t.Helper()
	m := find(t, fams, name, labels)
	if m.Histogram == nil {
		t.Fatalf("%s%v is not a histogram", name, labels)
	}
	return m.Histogram
}

func expectNodes(t *testing.T, fams map[string]*dto.MetricFamily, want map[string]float64) {
	t.Helper()
	for _, class := range classes {
		for _, state := range nodeStates {
			k := string(class) + "/" + string(state)
			expect(t, fams, "sparecap_nodes", map[string]string{"class": string(class), "state": string(state)}, want[k])
		}
	}
}

func expectUnmet(t *testing.T, fams map[string]*dto.MetricFamily, want map[domain.UnfulfilledReason]float64) {
	t.Helper()
	for _, r := range unmetReasons {
		expect(t, fams, "sparecap_targets_unfulfilled", map[string]string{"reason": string(r)}, want[r])
	}
}

// TestReclaimMetrics runs a fill, a reclaim of two preemptible nodes (one
// drained early, one at the deadline) and a partial refill, and checks
// what a scrape reports at each stage.
func TestReclaimMetrics(t *testing.T) {
	w := newWorld(t)
	a := map[string]string{"cluster_id": "a", "project_id": "team"}

	// Fill: 8 standard GPUs on an on-demand machine, a target of 16
	// preemptible GPUs on acme's two idle reserved machines.
	w.create("a", "team", domain.BillingOnDemand, 8, 16)
	w.reconcile()
	fams := scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_store_up", nil, 1)
	expect(t, fams, "sparecap_cluster_desired_preemptible_gpus", a, 16)
	expect(t, fams, "sparecap_cluster_allocated_preemptible_gpus", a, 0)
	expectNodes(t, fams, map[string]float64{"standard/provisioning": 1, "preemptible/provisioning": 2})
	expectUnmet(t, fams, map[domain.UnfulfilledReason]float64{domain.UnfulfilledProvisioning: 1})

	w.advance(20 * time.Second)
	fams = scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_cluster_allocated_preemptible_gpus", a, 16)
	expectNodes(t, fams, map[string]float64{"standard/ready": 1, "preemptible/ready": 2})
	expectUnmet(t, fams, nil)
	expect(t, fams, "sparecap_reclaims_started_total", map[string]string{"cause": "preempted"}, 0)

	// acme claims its reservation: both preemptible nodes are reclaimed
	// (T+0 and the notice in the same pass), the target is refilled from
	// the last free on-demand machine.
	victims := w.nodes("a", domain.Preemptible, domain.NodeReady)
	if len(victims) != 2 {
		t.Fatalf("want 2 ready preemptible nodes, got %+v", victims)
	}
	w.create("acme-prod", "acme", domain.BillingReserved, 16, 0)
	w.reconcile()
	fams = scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_reclaims_started_total", map[string]string{"cause": "preempted"}, 2)
	expect(t, fams, "sparecap_reclaims_started_total", map[string]string{"cause": "fair_share"}, 0)
	if h := histogram(t, fams, "sparecap_notice_fanout_seconds", nil); h.GetSampleCount() != 2 || h.GetSampleSum() != 0 {
		t.Errorf("notice fan-out: count %d sum %v, want 2 notices at T+0 on the fake clock", h.GetSampleCount(), h.GetSampleSum())
	}
	expect(t, fams, "sparecap_cluster_desired_preemptible_gpus", a, 16)
	expect(t, fams, "sparecap_cluster_allocated_preemptible_gpus", a, 0)
	expect(t, fams, "sparecap_cluster_desired_preemptible_gpus", map[string]string{"cluster_id": "acme-prod", "project_id": "acme"}, 0)
	expectNodes(t, fams, map[string]float64{"standard/ready": 1, "standard/pending": 2, "preemptible/draining": 2, "preemptible/provisioning": 1})
	expectUnmet(t, fams, map[domain.UnfulfilledReason]float64{domain.UnfulfilledNoCapacity: 1})

	// One victim's pods exit after 40s: an early drain. The other runs to
	// the deadline.
	w.advance(39 * time.Second)
	for _, p := range mustPods(t, w, victims[0]) {
		if err := w.sim.Notify(w.ctx, "a", victims[0].Name, p, time.Time{}); err != nil {
			t.Fatal(err)
		}
	}
	w.advance(time.Second)
	fams = scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_reclaims_finished_total", map[string]string{"cause": "preempted", "outcome": "early"}, 1)
	expect(t, fams, "sparecap_reclaims_finished_total", map[string]string{"cause": "preempted", "outcome": "deadline"}, 0)
	if h := histogram(t, fams, "sparecap_drain_duration_seconds", map[string]string{"outcome": "early"}); h.GetSampleCount() != 1 || h.GetSampleSum() != 40 {
		t.Errorf("early drains: count %d sum %v, want one of 40s", h.GetSampleCount(), h.GetSampleSum())
	}

	w.advance(5*time.Minute - 40*time.Second)
	w.advance(30 * time.Second) // wipe, then acme's second node provisions
	fams = scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_reclaims_started_total", map[string]string{"cause": "preempted"}, 2)
	expect(t, fams, "sparecap_reclaims_finished_total", map[string]string{"cause": "preempted", "outcome": "early"}, 1)
	expect(t, fams, "sparecap_reclaims_finished_total", map[string]string{"cause": "preempted", "outcome": "deadline"}, 1)
	if h := histogram(t, fams, "sparecap_drain_duration_seconds", map[string]string{"outcome": "deadline"}); h.GetSampleCount() != 1 || h.GetSampleSum() != 300 {
		t.Errorf("deadline drains: count %d sum %v, want one of 300s", h.GetSampleCount(), h.GetSampleSum())
	} else if b := bucket(h, 300); b != 1 {
		t.Errorf("deadline drain not in the le=300 bucket (%v)", b)
	}
	if h := histogram(t, fams, "sparecap_notice_fanout_seconds", nil); h.GetSampleCount() != 2 {
		t.Errorf("notice fan-out count %d, want 2", h.GetSampleCount())
	}
	// acme's standard nodes took the reserved machines; cluster a keeps 8
	// of its 16 preemptible GPUs on the on-demand machine.
	expect(t, fams, "sparecap_cluster_allocated_preemptible_gpus", a, 8)
	expect(t, fams, "sparecap_cluster_desired_preemptible_gpus", a, 16)
	expectNodes(t, fams, map[string]float64{"standard/ready": 3, "preemptible/ready": 1})
	expectUnmet(t, fams, map[domain.UnfulfilledReason]float64{domain.UnfulfilledNoCapacity: 1})

	// The observations metrics counted, in the order they happened.
	var kinds []string
	for _, o := range w.obs {
		if o.Kind != controller.KindEvent {
			kinds = append(kinds, fmt.Sprintf("%s %s %s", o.Kind, o.Cause, o.Outcome))
		}
	}
	want := []string{"drain_started preempted ", "drain_started preempted ", "notice_delivered preempted ", "notice_delivered preempted ",
		"drain_finished preempted early", "drain_finished preempted deadline"}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("observations %q, want %q", kinds, want)
	}

	// State metrics come from the store alone: a fresh Metrics on the same
	// store (a restarted process) reports the same state, with its
	// counters back at zero.
	fams = scrape(t, New(w.st, clock.Real{}).Handler())
	expect(t, fams, "sparecap_cluster_allocated_preemptible_gpus", a, 8)
	expectNodes(t, fams, map[string]float64{"standard/ready": 3, "preemptible/ready": 1})
	expect(t, fams, "sparecap_reclaims_started_total", map[string]string{"cause": "preempted"}, 0)
}

func mustPods(t *testing.T, w *world, n domain.Node) []driver.Work {
	t.Helper()
	pods, err := w.sim.ListWork(w.ctx, n.ClusterID, n.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) == 0 {
		t.Fatalf("node %s has no pods", n.Name)
	}
	return pods
}

func bucket(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

func TestMiddleware(t *testing.T) {
	m := New(nil, clock.Real{})
	api := http.NewServeMux()
	api.HandleFunc("GET /v1/clusters/{id}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") == "missing" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Write([]byte("{}"))
	})
	api.HandleFunc("POST /v1/clusters", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	api.HandleFunc("GET /v1/clusters/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		// Event streams need to flush through the recorder.
		f, ok := w.(http.Flusher)
		if !ok {
			http.Error(w, "no flusher", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write([]byte(": hello\n\n"))
		f.Flush()
	})
	// The API behind an outer mux, as the server serves it next to
	// /metrics: the route is the inner pattern, never the outer "/".
	outer := http.NewServeMux()
	outer.Handle("GET /metrics", m.Handler())
	outer.Handle("/", m.Middleware(api))
	srv := httptest.NewServer(outer)
	defer srv.Close()

	for _, r := range []struct {
		method, path string
		status       int
	}{
		{"GET", "/v1/clusters/c-1", 200},
		{"GET", "/v1/clusters/c-2", 200},
		{"GET", "/v1/clusters/missing", 404},
		{"POST", "/v1/clusters", 201},
		{"GET", "/v1/clusters/c-1/events", 200},
		{"GET", "/nowhere", 404},
		{"DELETE", "/v1/clusters", 405},
	} {
		req, _ := http.NewRequest(r.method, srv.URL+r.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.status {
			t.Fatalf("%s %s: %d, want %d", r.method, r.path, resp.StatusCode, r.status)
		}
	}

	fams := scrape(t, outer)
	for _, c := range []struct {
		method, route, code string
		count               uint64
	}{
		{"GET", "/v1/clusters/{id}", "200", 2},
		{"GET", "/v1/clusters/{id}", "404", 1},
		{"POST", "/v1/clusters", "201", 1},
		{"GET", "/v1/clusters/{id}/events", "200", 1},
		{"GET", "unmatched", "404", 1},
		{"DELETE", "unmatched", "405", 1},
	} {
		h := histogram(t, fams, "sparecap_http_request_duration_seconds", map[string]string{"method": c.method, "route": c.route, "code": c.code})
		if h.GetSampleCount() != c.count {
			t.Errorf("%s %s %s: count %d, want %d", c.method, c.route, c.code, h.GetSampleCount(), c.count)
		}
	}
	for _, s := range fams["sparecap_http_request_duration_seconds"].GetMetric() {
		if labelsMatch(s, map[string]string{"route": "/"}) || labelsMatch(s, map[string]string{"route": "/metrics"}) {
			t.Errorf("series for the outer mux: %v", s.GetLabel())
		}
	}
}

func TestBilledGPUSeconds(t *testing.T) {
	m := New(nil, clock.Real{})
	m.AddBilledGPUSeconds("preemptible", 3600)
	m.AddBilledGPUSeconds("preemptible", 1.5)
	m.AddBilledGPUSeconds("standard", 80)
	m.AddBilledGPUSeconds("standard", -5) // ignored: counters only go up
	fams := scrape(t, m.Handler())
	expect(t, fams, "sparecap_billed_gpu_seconds_total", map[string]string{"class": "preemptible"}, 3601.5)
	expect(t, fams, "sparecap_billed_gpu_seconds_total", map[string]string{"class": "standard"}, 80)
}

// TestStoreDown: a failed snapshot drops the state metrics and reports
// sparecap_store_up 0, but the scrape still serves everything else.
func TestStoreDown(t *testing.T) {
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "db.sqlite"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the handler logs the failed read
	defer slog.SetDefault(prev)
	m := New(st, clock.Real{})
	m.AddBilledGPUSeconds("standard", 8)
	fams := scrape(t, m.Handler())
	expect(t, fams, "sparecap_store_up", nil, 0)
	expect(t, fams, "sparecap_billed_gpu_seconds_total", map[string]string{"class": "standard"}, 8)
	if _, ok := fams["sparecap_nodes"]; ok {
		t.Error("state metrics served without a snapshot")
	}
	if _, ok := fams["go_goroutines"]; !ok {
		t.Error("Go collector missing")
	}
	if _, ok := fams["process_start_time_seconds"]; !ok {
		t.Log("process collector reports nothing on this platform")
	}
}

func TestRouteLabel(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "unmatched",
		"/":                         "/",
		"GET /v1/clusters/{id}":     "/v1/clusters/{id}",
		"example.com/x":             "example.com/x",
		"POST example.com/v1/x/{$}": "example.com/v1/x/{$}",
	} {
		if got := routeLabel(in); got != want {
			t.Errorf("routeLabel(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLendingMetrics: what the fleet lends, out of idle or reserved
// machines, and at what price, under OpenCost's and Karpenter's names.
func TestLendingMetrics(t *testing.T) {
	w := newWorld(t)
	f, err := fleet.Parse([]byte(testFleet + "prices: {RTX_6000_PCI: \"0.89\"}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := fleet.RegisterPrices(w.ctx, w.st, f, "50", t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	w.m.SetPriceClock(w.clk)
	// Preemptible nodes go to reserved machines first: 16 GPUs on the two
	// reserved machines, 8 on an idle one; 8 standard.
	w.create("c1", "team", domain.BillingOnDemand, 8, 24)
	w.advance(time.Minute)
	fams := scrape(t, w.m.Handler())
	expect(t, fams, "sparecap_lent_gpus", map[string]string{"source": "reserved", "region": region, "gpu_type": gpu}, 16)
	expect(t, fams, "sparecap_lent_gpus", map[string]string{"source": "idle", "region": region, "gpu_type": gpu}, 8)
	pre := w.nodes("c1", domain.Preemptible, domain.NodeReady)[0]
	std := w.nodes("c1", domain.Standard, domain.NodeReady)[0]
	expect(t, fams, "sparecap_node_gpu_hourly_cost", map[string]string{"node": pre.Name, "class": "preemptible"}, 0.445)
	expect(t, fams, "sparecap_node_total_hourly_cost", map[string]string{"node": std.Name, "class": "standard"}, 8*0.89)
	expect(t, fams, "sparecap_node_is_spot", map[string]string{"node": pre.Name}, 1)
	expect(t, fams, "sparecap_node_is_spot", map[string]string{"node": std.Name}, 0)
	expect(t, fams, "sparecap_instance_type_offering_price_estimate", map[string]string{"capacity_type": "spot", "gpu_type": gpu}, 0.445)
	expect(t, fams, "sparecap_instance_type_offering_price_estimate", map[string]string{"capacity_type": "on-demand", "gpu_type": gpu}, 0.89)
}
