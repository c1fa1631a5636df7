package api

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sparecap/sparecap/internal/apiv1"
	"github.com/sparecap/sparecap/internal/clock"
	"github.com/sparecap/sparecap/internal/controller"
	"github.com/sparecap/sparecap/internal/domain"
	"github.com/sparecap/sparecap/internal/fleet"
	"github.com/sparecap/sparecap/internal/metering"
	"github.com/sparecap/sparecap/internal/openapi/contracttest"
	"github.com/sparecap/sparecap/internal/sim"
	"github.com/sparecap/sparecap/internal/store"
	"github.com/sparecap/sparecap/internal/store/sqlite"
)

const adminToken = "admin-secret-0123456789abcdef0123456789"

type env struct {
	t    *testing.T
	ctx  context.Context
	st   store.Store
	clk  *clock.Fake
	ctrl *controller.Controller
	srv  *httptest.Server
	api  *Server
	// wall is the API's clock for tokens (expiry, last use).
	wall   *clock.Fake
	tokens map[string]string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvOpts(t, Options{})
}

// newEnvOpts is newEnv with the server's Options set before it serves.
func newEnvOpts(t *testing.T, opts Options) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	f, err := fleet.Parse([]byte(`
pools:
  - {region: us-central-2, gpu_type: RTX_6000_PCI, machines: 3}
  - {region: us-central-2, gpu_type: RTX_6000_PCI, machines: 2, reserved_for: acme}
  - {region: eu-west-1, gpu_type: L40S, machines: 1}
prices: {RTX_6000_PCI: "0.89", L40S: "1.09"}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fleet.Register(ctx, st, f, clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := fleet.RegisterPrices(ctx, st, f, "50", clk.Now()); err != nil {
		t.Fatal(err)
	}
	fl, err := sim.New(sim.Config{Clock: clk, Pods: []sim.PodTemplate{}})
	if err != nil {
		t.Fatal(err)
	}
	ctrl := controller.New(st, fl, fl, clk, controller.Config{Cooldown: -1}, nil)
	e := &env{t: t, ctx: ctx, st: st, clk: clk, ctrl: ctrl, tokens: map[string]string{"admin": adminToken}}
	if _, err := BootstrapOperator(ctx, st, adminToken, time.Now()); err != nil {
		t.Fatal(err)
	}
	s := New(st, ctrl, clk, clock.Real{}, nil)
	e.api, e.wall = s, clock.NewFake(time.Now())
	s.wall = e.wall
	s.Meter = metering.New(st, clk, nil)
	s.KeepAlive = 50 * time.Millisecond
	s.Options = opts
	e.srv = httptest.NewServer(contracttest.Handler(t, s))
	t.Cleanup(e.srv.Close)
	for _, p := range []string{"p", "q"} {
		var out apiv1.Project
		e.do("admin", "POST", "/v1/admin/projects", fmt.Sprintf(`{"project_id":%q}`, p), 201, &out)
		e.tokens[p] = out.Token
	}
	return e
}

// do sends a request as who ("admin", a project, or "" for no token) and
// checks the status; out, if not nil, receives the decoded body.
func (e *env) do(who, method, path, body string, want int, out any) []byte {
	e.t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.srv.URL+path, r)
	if tok := e.tokens[who]; tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		e.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			e.t.Fatalf("decode %s: %v", data, err)
		}
	}
	return data
}

func (e *env) apiErr(who, method, path, body string, want int) apiv1.ErrorBody {
	e.t.Helper()
	var out apiv1.Error
	e.do(who, method, path, body, want, &out)
	if out.Error.Code == "" || out.Error.Message == "" {
		e.t.Fatalf("error body without code or message: %+v", out)
	}
	return out.Error
}

func (e *env) settle() {
	e.t.Helper()
	for i := 0; i < 40; i++ {
		if _, err := e.ctrl.Turn(e.ctx); err != nil {
			e.t.Fatal(err)
		}
		e.clk.Step(5 * time.Second)
	}
}

const createBody = `{"cluster_name":"train","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"KUBERNETES","billing_type":"ON_DEMAND","num_gpus":8,"num_preemptible_gpus":16}`

func (e *env) create(who, body string) apiv1.Cluster {
	e.t.Helper()
	var c apiv1.Cluster
	e.do(who, "POST", "/v1/clusters", body, 201, &c)
	return c
}

func TestAuth(t *testing.T) {
	e := newEnv(t)
	if got := e.apiErr("", "GET", "/v1/clusters", "", 401); got.Code != apiv1.CodeUnauthorized {
		t.Fatalf("%+v", got)
	}
	e.tokens["bogus"] = "nope"
	e.apiErr("bogus", "GET", "/v1/clusters", "", 401)
	if got := e.apiErr("p", "GET", "/v1/admin/projects", "", 403); got.Code != apiv1.CodeForbidden {
		t.Fatalf("%+v", got)
	}
	e.do("p", "GET", "/v1/clusters", "", 200, nil)
	var who apiv1.WhoAmI
	e.do("p", "GET", "/v1/whoami", "", 200, &who)
	if who.Admin || who.ProjectID != "p" {
		t.Fatalf("whoami %+v", who)
	}
	var adm apiv1.WhoAmI
	e.do("admin", "GET", "/v1/whoami", "", 200, &adm)
	if !adm.Admin || adm.ProjectID != "" {
		t.Fatalf("admin whoami %+v", adm)
	}
	e.do("", "GET", "/healthz", "", 200, nil)
	resp, err := http.Get(e.srv.URL + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get(TimeHeader); got != e.clk.Now().Format(time.RFC3339Nano) {
		t.Fatalf("%s = %q, want the server's clock %s", TimeHeader, got, e.clk.Now())
	}
	e.do("", "GET", "/readyz", "", 200, nil)
	e.apiErr("p", "GET", "/v1/nope", "", 404)
}

func TestCreateClusterShape(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	if c.ClusterID == "" || c.ClusterName != "train" || c.ProjectID != "p" || c.Status != string(domain.StatusWaiting) ||
		c.NumGPUs != 8 || c.DesiredPreemptibleGPUs != 16 || c.AllocatedPreemptibleGPUs != 0 || c.CreatedAt.IsZero() {
		t.Fatalf("%+v", c)
	}
	if len(c.GPUWorkerNodes) != 3 {
		t.Fatalf("nodes %+v", c.GPUWorkerNodes)
	}
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if got.Status != "Ready" || got.AllocatedPreemptibleGPUs != 16 || got.TargetUnfulfilled != nil {
		t.Fatalf("%+v", got)
	}
	classes := map[string]int{}
	for _, n := range got.GPUWorkerNodes {
		classes[n.ComputeClass]++
		if n.Status != "ready" || n.NumGPUs != 8 || n.Deadline != nil || n.ReadyAt == nil {
			t.Fatalf("node %+v", n)
		}
		prefix := "gpu-dp-"
		if n.ComputeClass == "preemptible" {
			prefix = "gpu-preemptible-dp-"
		}
		if !strings.HasPrefix(n.NodeName, prefix) {
			t.Fatalf("node name %s for class %s", n.NodeName, n.ComputeClass)
		}
	}
	if classes["standard"] != 1 || classes["preemptible"] != 2 {
		t.Fatalf("classes %v", classes)
	}
	// Same name again in the same project: conflict.
	if got := e.apiErr("p", "POST", "/v1/clusters", createBody, 409); got.Code != apiv1.CodeConflict ||
		got.Message != fmt.Sprintf("project p already has a cluster named %q (%s)", "train", c.ClusterID) {
		t.Fatalf("%+v", got)
	}
}

func TestCreateValidation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name, body, field, contains string
	}{
		{"zero gpus", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":0}`, "num_gpus", "at least 8"},
		{"not multiple", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":12}`, "num_gpus", "multiple of 8"},
		{"negative preemptible", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8,"num_preemptible_gpus":-8}`, "num_preemptible_gpus", "negative"},
		{"preemptible not multiple", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8,"num_preemptible_gpus":4}`, "num_preemptible_gpus", "multiple of 8"},
		{"unknown region", `{"cluster_name":"a","region":"mars-1","gpu_type":"RTX_6000_PCI","num_gpus":8}`, "region", "eu-west-1, us-central-2"},
		{"unknown gpu", `{"cluster_name":"a","region":"us-central-2","gpu_type":"TPU","num_gpus":8}`, "gpu_type", "unknown gpu_type"},
		{"gpu not in region", `{"cluster_name":"a","region":"eu-west-1","gpu_type":"RTX_6000_PCI","num_gpus":8}`, "gpu_type", "has no RTX_6000_PCI"},
		{"unknown type", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"NOMAD","num_gpus":8}`, "cluster_type", "KUBERNETES or SLURM"},
		{"slurm with kubeconfig", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","cluster_type":"SLURM","num_gpus":8,"kubeconfig":"x"}`, "kubeconfig", "slurm.conf"},
		{"billing", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","billing_type":"SPOT","num_gpus":8}`, "billing_type", "ON_DEMAND or RESERVED"},
		{"reserved without reservation", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","billing_type":"RESERVED","num_gpus":8}`, "billing_type", "no RTX_6000_PCI reservation"},
		{"bad name", `{"cluster_name":"My Cluster","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`, "cluster_name", "lowercase"},
		{"missing name", `{"region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`, "cluster_name", "required"},
		{"unknown field", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8,"spot":true}`, "spot", "unknown field"},
		{"wrong type", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":"eight"}`, "num_gpus", "must be an integer, not a JSON string"},
		{"repeated field", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":-8,"num_gpus":8}`, "num_gpus", "more than once"},
		{"field in another case", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","NUM_GPUS":8}`, "NUM_GPUS", `case-sensitive: did you mean "num_gpus"`},
		{"field in mixed case", `{"Cluster_Name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}`, "Cluster_Name", "case-sensitive"},
		{"trailing garbage", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8}x`, "", "after the object"},
		{"malformed", `{"cluster_name":`, "", "malformed JSON"},
		{"trailing", `{"cluster_name":"a","region":"us-central-2","gpu_type":"RTX_6000_PCI","num_gpus":8} {}`, "", "after the object"},
		{"empty", ``, "", "empty"},
		{"array", `[]`, "", "must be a"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := e.apiErr("p", "POST", "/v1/clusters", tc.body, 400)
			if got.Code != apiv1.CodeInvalid || got.Field != tc.field || !strings.Contains(got.Message, tc.contains) {
				t.Fatalf("got %+v, want field %q and message containing %q", got, tc.field, tc.contains)
			}
		})
	}
	var list apiv1.ClusterList
	e.do("admin", "GET", "/v1/clusters", "", 200, &list)
	if len(list.Clusters) != 0 {
		t.Fatal("a refused request created a cluster")
	}
	// Admin must name an existing project.
	if got := e.apiErr("admin", "POST", "/v1/clusters", createBody, 400); got.Field != "project_id" {
		t.Fatalf("%+v", got)
	}
	body := strings.Replace(createBody, `"num_gpus"`, `"project_id":"nobody","num_gpus"`, 1)
	if got := e.apiErr("admin", "POST", "/v1/clusters", body, 400); !strings.Contains(got.Message, "unknown project") {
		t.Fatalf("%+v", got)
	}
}

func TestInsufficientCapacity(t *testing.T) {
	e := newEnv(t)
	body := strings.Replace(createBody, `"num_gpus":8`, `"num_gpus":32`, 1)
	got := e.apiErr("p", "POST", "/v1/clusters", body, 409)
	want := "asked for 32 RTX_6000_PCI GPUs in us-central-2; 24 can be had"
	if got.Code != apiv1.CodeNoCapacity || !strings.Contains(got.Message, want) {
		t.Fatalf("got %+v, want %q", got, want)
	}
}

func TestProjectIsolation(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/v1/clusters/" + c.ClusterID, ""},
		{"PATCH", "/v1/clusters/" + c.ClusterID, `{"num_preemptible_gpus":0}`},
		{"DELETE", "/v1/clusters/" + c.ClusterID, ""},
		{"GET", "/v1/clusters/" + c.ClusterID + "/events", ""},
	} {
		if got := e.apiErr("q", r.method, r.path, r.body, 404); got.Code != apiv1.CodeNotFound {
			t.Fatalf("%s %s: %+v", r.method, r.path, got)
		}
	}
	var list apiv1.ClusterList
	e.do("q", "GET", "/v1/clusters", "", 200, &list)
	if len(list.Clusters) != 0 {
		t.Fatal("q sees p's cluster")
	}
	e.do("q", "GET", "/v1/clusters?project_id=p", "", 200, &list)
	if len(list.Clusters) != 0 {
		t.Fatal("q sees p's cluster through the filter")
	}
	// A project token cannot create in another project.
	body := strings.Replace(createBody, `"num_gpus"`, `"project_id":"p","num_gpus"`, 1)
	e.apiErr("q", "POST", "/v1/clusters", body, 404)
	e.do("admin", "GET", "/v1/clusters", "", 200, &list)
	if len(list.Clusters) != 1 {
		t.Fatal("admin sees every project's clusters")
	}
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, nil)
}

func TestUpdateCluster(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	e.settle()
	path := "/v1/clusters/" + c.ClusterID
	for _, tc := range []struct{ body, field, contains string }{
		{`{"compute_class":"standard"}`, "compute_class", "convert one node with POST"},
		{`{"gpu_worker_nodes":[{"node_id":"x","compute_class":"standard"}]}`, "compute_class", "convert one node with POST"},
		{`{"region":"eu-west-1"}`, "region", "cannot be changed"},
		{`{}`, "", "nothing to update"},
		{`{"num_gpus":4}`, "num_gpus", "at least 8"},
		{`{"num_preemptible_gpus":-16}`, "num_preemptible_gpus", "negative"},
	} {
		got := e.apiErr("p", "PATCH", path, tc.body, 400)
		if got.Field != tc.field || !strings.Contains(got.Message, tc.contains) {
			t.Fatalf("%s: %+v", tc.body, got)
		}
	}
	var u apiv1.Cluster
	e.do("p", "PATCH", path, `{"num_preemptible_gpus":8}`, 200, &u)
	if u.DesiredPreemptibleGPUs != 8 || u.NumGPUs != 8 {
		t.Fatalf("%+v", u)
	}
	draining := 0
	for _, n := range u.GPUWorkerNodes {
		if n.Status == "draining" {
			draining++
			if n.Deadline == nil || !n.Deadline.Equal(e.clk.Now().Add(5*time.Minute)) {
				t.Fatalf("deadline %v", n.Deadline)
			}
		}
	}
	if draining != 1 {
		t.Fatalf("want one surplus node draining, got %d", draining)
	}
	// Omitting num_preemptible_gpus keeps it.
	e.do("p", "PATCH", path, `{"num_gpus":16}`, 200, &u)
	if u.DesiredPreemptibleGPUs != 8 || u.NumGPUs != 16 {
		t.Fatalf("%+v", u)
	}
	// Growing standard beyond the fleet is refused and changes nothing.
	e.apiErr("p", "PATCH", path, `{"num_gpus":64}`, 409)
	e.do("p", "GET", path, "", 200, &u)
	if u.NumGPUs != 16 {
		t.Fatalf("refused update changed num_gpus to %d", u.NumGPUs)
	}
}

// TestQueueMaximum: a tenant opts in to a target that follows its queue
// by setting max_preemptible_gpus; the view shows the target sparecap
// fills, which requests raise within the maximum, and bad values change
// nothing.
func TestQueueMaximum(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	e.settle()
	path := "/v1/clusters/" + c.ClusterID
	if c.MaxPreemptibleGPUs != 0 || c.TargetPreemptibleGPUs != 16 {
		t.Fatalf("a new cluster has no queue maximum and its own target: %+v", c)
	}
	for _, tc := range []struct{ body, field, contains string }{
		{`{"max_preemptible_gpus":12}`, "max_preemptible_gpus", "multiple of 8"},
		{`{"max_preemptible_gpus":-8}`, "max_preemptible_gpus", "negative"},
		{`{"max_preemptible_gpus":"64"}`, "max_preemptible_gpus", "must be an integer, not a JSON string"},
	} {
		got := e.apiErr("p", "PATCH", path, tc.body, 400)
		if got.Field != tc.field || !strings.Contains(got.Message, tc.contains) {
			t.Fatalf("%s: %+v", tc.body, got)
		}
	}
	var u apiv1.Cluster
	e.do("p", "PATCH", path, `{"max_preemptible_gpus":64}`, 200, &u)
	if u.MaxPreemptibleGPUs != 64 || u.DesiredPreemptibleGPUs != 16 || u.TargetPreemptibleGPUs != 16 {
		t.Fatalf("after setting the maximum: %+v", u)
	}
	// The queue asks for 40 GPUs: the target follows.
	if _, err := e.ctrl.SetRequested(e.ctx, c.ClusterID, 40); err != nil {
		t.Fatal(err)
	}
	e.do("p", "GET", path, "", 200, &u)
	if u.RequestedPreemptibleGPUs != 40 || u.TargetPreemptibleGPUs != 40 || u.DesiredPreemptibleGPUs != 16 {
		t.Fatalf("with requests of 40 GPUs: %+v", u)
	}
	if u.TargetUnfulfilled == nil {
		t.Fatalf("allocated %d of a target of 40 GPUs, want a reason: %+v", u.AllocatedPreemptibleGPUs, u)
	}
	// Lowering the maximum caps the target at once.
	e.do("p", "PATCH", path, `{"max_preemptible_gpus":24}`, 200, &u)
	if u.TargetPreemptibleGPUs != 24 {
		t.Fatalf("target %d after lowering the maximum to 24, want 24", u.TargetPreemptibleGPUs)
	}

	// A SLURM cluster has no ProvisioningRequests to follow.
	slurm := strings.Replace(strings.Replace(createBody, `"KUBERNETES"`, `"SLURM"`, 1), `"train"`, `"hpc"`, 1)
	got := e.apiErr("p", "POST", "/v1/clusters", strings.Replace(slurm, `"num_gpus":8`, `"num_gpus":8,"max_preemptible_gpus":16`, 1), 400)
	if got.Field != "max_preemptible_gpus" || !strings.Contains(got.Message, "KUBERNETES") {
		t.Fatalf("create SLURM with a queue maximum: %+v", got)
	}
	sc := e.create("p", slurm)
	got = e.apiErr("p", "PATCH", "/v1/clusters/"+sc.ClusterID, `{"max_preemptible_gpus":16}`, 400)
	if got.Field != "max_preemptible_gpus" {
		t.Fatalf("patch SLURM with a queue maximum: %+v", got)
	}
}

func TestDeleteCluster(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	e.settle()
	var d apiv1.Cluster
	e.do("p", "DELETE", "/v1/clusters/"+c.ClusterID, "", 202, &d)
	if d.Status != string(domain.StatusDeleting) {
		t.Fatalf("%+v", d)
	}
	e.apiErr("p", "PATCH", "/v1/clusters/"+c.ClusterID, `{"num_gpus":16}`, 409)
	e.settle()
	e.apiErr("p", "GET", "/v1/clusters/"+c.ClusterID, "", 404)
	// Its events stay readable by its project, and only by it.
	var evs apiv1.EventList
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID+"/events", "", 200, &evs)
	removed := 0
	for _, ev := range evs.Events {
		if ev.Reason == "NodeRemoved" {
			removed++
		}
	}
	if removed != 3 {
		t.Fatalf("events of the deleted cluster: %+v", evs.Events)
	}
	e.apiErr("q", "GET", "/v1/clusters/"+c.ClusterID+"/events", "", 404)
}

func TestEventsPaging(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	e.settle()
	path := "/v1/clusters/" + c.ClusterID + "/events"
	var all apiv1.EventList
	e.do("p", "GET", path, "", 200, &all)
	if len(all.Events) < 3 {
		t.Fatalf("events %+v", all.Events)
	}
	var page apiv1.EventList
	e.do("p", "GET", path+"?limit=2", "", 200, &page)
	if len(page.Events) != 2 || page.NextCursor != page.Events[1].Cursor {
		t.Fatalf("page %+v", page)
	}
	var rest apiv1.EventList
	e.do("p", "GET", path+"?cursor="+page.NextCursor, "", 200, &rest)
	if len(rest.Events) != len(all.Events)-2 || rest.Events[0].EventID != all.Events[2].EventID {
		t.Fatalf("rest %+v", rest)
	}
	var empty apiv1.EventList
	e.do("p", "GET", path+"?cursor="+all.NextCursor, "", 200, &empty)
	if len(empty.Events) != 0 || empty.NextCursor != all.NextCursor {
		t.Fatalf("after the end: %+v", empty)
	}
	for _, q := range []string{"?cursor=abc", "?limit=0", "?limit=5000", "?watch=maybe"} {
		e.apiErr("p", "GET", path+q, "", 400)
	}
	for _, ev := range all.Events {
		if ev.Timestamp.Location() != time.UTC || ev.Reason == "" || ev.EventID == "" {
			t.Fatalf("event %+v", ev)
		}
	}
}

func TestEventStream(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	ctx, cancel := context.WithTimeout(e.ctx, 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/clusters/"+c.ClusterID+"/events?watch=true", nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	got := make(chan apiv1.Event, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev apiv1.Event
				if json.Unmarshal([]byte(data), &ev) == nil {
					got <- ev
				}
			}
		}
	}()
	// Nothing has happened yet; the nodes joining are streamed as they do.
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; i < 40 && err == nil; i++ {
			_, err = e.ctrl.Turn(e.ctx)
			e.clk.Step(5 * time.Second)
		}
		done <- err
	}()
	seen := map[string]int{}
	for seen["NodeAdded"] < 3 {
		select {
		case ev := <-got:
			seen[ev.Reason]++
		case <-ctx.Done():
			t.Fatalf("stream delivered %v", seen)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestCapacity(t *testing.T) {
	e := newEnv(t)
	var caps apiv1.CapacityList
	e.do("p", "GET", "/v1/capacity", "", 200, &caps)
	if len(caps.Capacity) != 2 {
		t.Fatalf("%+v", caps)
	}
	us := caps.Capacity[1]
	if us.Region != "us-central-2" || us.Total != 40 || us.AvailableOnDemand != 24 || us.AvailablePreemptible != 40 || us.Reserved != 16 {
		t.Fatalf("%+v", us)
	}
}

func TestAdminFleet(t *testing.T) {
	e := newEnv(t)
	if got := e.apiErr("admin", "POST", "/v1/admin/projects", `{"project_id":"p"}`, 409); got.Code != apiv1.CodeConflict {
		t.Fatalf("%+v", got)
	}
	e.apiErr("admin", "POST", "/v1/admin/projects", `{"project_id":"Bad Name"}`, 400)
	var res apiv1.Reservation
	e.do("admin", "POST", "/v1/admin/reservations", `{"reservation_id":"r-q","project_id":"q","region":"eu-west-1","gpu_type":"L40S"}`, 201, &res)
	e.apiErr("admin", "POST", "/v1/admin/reservations", `{"project_id":"ghost","region":"eu-west-1","gpu_type":"L40S"}`, 400)
	var ms apiv1.MachineList
	e.do("admin", "POST", "/v1/admin/machines", `{"region":"eu-west-1","gpu_type":"L40S","count":2,"reservation_id":"r-q"}`, 201, &ms)
	if len(ms.Machines) != 2 || ms.Machines[0].Pool != "reservation:r-q" {
		t.Fatalf("%+v", ms)
	}
	if got := e.apiErr("admin", "POST", "/v1/admin/machines", `{"region":"us-central-2","gpu_type":"L40S","count":1,"reservation_id":"r-q"}`, 400); got.Field != "reservation_id" {
		t.Fatalf("%+v", got)
	}
	e.apiErr("admin", "POST", "/v1/admin/machines", `{"region":"eu-west-1","gpu_type":"L40S","count":1,"gpus_per_machine":4}`, 400)
	var rl apiv1.ReservationList
	e.do("admin", "GET", "/v1/admin/reservations", "", 200, &rl)
	found := false
	for _, r := range rl.Reservations {
		if r.ReservationID == "r-q" {
			found = r.Machines == 2 && r.GPUs == 16
		}
	}
	if !found {
		t.Fatalf("%+v", rl)
	}

	// Out of service: the node on it is reclaimed and replaced.
	c := e.create("p", strings.Replace(createBody, `"num_preemptible_gpus":16`, `"num_preemptible_gpus":0`, 1))
	e.settle()
	var got apiv1.Cluster
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	var list apiv1.MachineList
	e.do("admin", "GET", "/v1/admin/machines?state=ready", "", 200, &list)
	if len(list.Machines) != 1 || list.Machines[0].ClusterID != c.ClusterID {
		t.Fatalf("%+v", list)
	}
	mid := list.Machines[0].MachineID
	var m apiv1.Machine
	e.do("admin", "PATCH", "/v1/admin/machines/"+mid, `{"out_of_service":true}`, 200, &m)
	if m.State != string(domain.MachineOutOfService) {
		t.Fatalf("%+v", m)
	}
	e.settle()
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, &got)
	if got.Status != "Ready" || len(got.GPUWorkerNodes) != 1 {
		t.Fatalf("%+v", got)
	}
	e.apiErr("admin", "PATCH", "/v1/admin/machines/nope", `{"out_of_service":true}`, 404)
	e.apiErr("admin", "GET", "/v1/admin/machines?state=bogus", "", 400)
}

func TestIssueAnotherToken(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	var out apiv1.Project
	e.do("admin", "POST", "/v1/admin/projects/p/tokens", "", 201, &out)
	if out.Token == "" || out.Token == e.tokens["p"] {
		t.Fatalf("%+v", out)
	}
	e.tokens["p2"] = out.Token
	e.do("p2", "GET", "/v1/clusters/"+c.ClusterID, "", 200, nil)
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID, "", 200, nil)
	e.apiErr("admin", "POST", "/v1/admin/projects/ghost/tokens", "", 404)
	e.apiErr("p", "POST", "/v1/admin/projects/p/tokens", "", 403)
}

func TestTokensAreStoredHashed(t *testing.T) {
	e := newEnv(t)
	tok := e.tokens["p"]
	if _, err := e.st.TokenByHash(e.ctx, HashToken(tok)); err != nil {
		t.Fatalf("token not found by its hash: %v", err)
	}
	if _, err := e.st.TokenByHash(e.ctx, tok); err == nil {
		t.Fatal("token stored in the clear")
	}
	if !bytes.HasPrefix([]byte(tok), []byte("sc_")) || len(tok) != 67 {
		t.Fatalf("token %q", tok)
	}
}

func TestRoutingErrorsAreJSON(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	req, _ := http.NewRequest("PUT", e.srv.URL+"/v1/clusters/"+c.ClusterID, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body apiv1.Error
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || resp.StatusCode != 405 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	if allow := resp.Header.Get("Allow"); allow != "GET, PATCH, DELETE" || body.Error.Code != "method_not_allowed" {
		t.Fatalf("allow %q body %+v", allow, body)
	}
	if got := e.apiErr("p", "GET", "/v1/nothing/here", "", 404); !strings.Contains(got.Message, "no such endpoint") {
		t.Fatalf("%+v", got)
	}
}

func TestBearerSchemeIsCaseInsensitive(t *testing.T) {
	e := newEnv(t)
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/clusters", nil)
	req.Header.Set("Authorization", "bearer "+e.tokens["p"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestErrorMessagesReadWell(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct{ method, path, body, want string }{
		{"POST", "/v1/admin/projects", `{"project_id":"p"}`, `project "p" already exists`},
		{"PATCH", "/v1/admin/machines/nope", `{"out_of_service":true}`, `machine "nope" not found`},
		{"GET", "/v1/clusters/c-missing", "", `cluster "c-missing" not found`},
		{"POST", "/v1/admin/projects/ghost/tokens", "", `project "ghost" not found`},
	} {
		var out apiv1.Error
		e.do("admin", tc.method, tc.path, tc.body, map[bool]int{true: 409, false: 404}[strings.Contains(tc.want, "exists")], &out)
		if out.Error.Message != tc.want {
			t.Errorf("%s %s: message %q, want %q", tc.method, tc.path, out.Error.Message, tc.want)
		}
	}
	if got := e.apiErr("admin", "POST", "/v1/admin/projects/p/tokens", `{"expires":"never"}`, 400); got.Field != "expires" {
		t.Fatalf("%+v", got)
	}
}

func TestLastEventIDWinsOverCursor(t *testing.T) {
	e := newEnv(t)
	c := e.create("p", createBody)
	e.settle()
	var all apiv1.EventList
	e.do("p", "GET", "/v1/clusters/"+c.ClusterID+"/events", "", 200, &all)
	ctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/v1/clusters/"+c.ClusterID+"/events?watch=true&cursor=0", nil)
	req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
	req.Header.Set("Last-Event-ID", all.Events[1].Cursor)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
			if id != all.Events[2].Cursor {
				t.Fatalf("first streamed event %s, want the one after Last-Event-ID (%s)", id, all.Events[2].Cursor)
			}
			return
		}
	}
	t.Fatal("no event streamed")
}

// TestPrettyForPeople: a person's tool (curl, Wget, HTTPie) or ?pretty
// gets indented JSON; programs get it compact, the same document.
func TestPrettyForPeople(t *testing.T) {
	e := newEnv(t)
	e.create("p", createBody)
	get := func(path, agent string) string {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+e.tokens["p"])
		if agent != "" {
			req.Header.Set("User-Agent", agent)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, data)
		}
		return string(data)
	}
	compact := get("/v1/clusters", "")
	if strings.Contains(compact, "\n ") || !strings.HasPrefix(compact, `{"clusters":[{"cluster_id":`) {
		t.Fatalf("a program's list is not compact: %.200s", compact)
	}
	for _, tc := range []struct{ path, agent string }{
		{"/v1/clusters", "curl/8.5.0"}, {"/v1/clusters", "Wget/1.21"}, {"/v1/clusters", "HTTPie/3.2"},
		{"/v1/clusters?pretty", ""}, {"/v1/clusters?pretty=true", "Go-http-client/1.1"}, {"/v1/clusters?pretty=1", ""},
	} {
		got := get(tc.path, tc.agent)
		if !strings.HasPrefix(got, "{\n  \"clusters\": [\n") {
			t.Errorf("%s as %q is not indented: %.80q", tc.path, tc.agent, got)
		}
		var a, b bytes.Buffer
		json.Compact(&a, []byte(got))
		json.Compact(&b, []byte(compact))
		if a.String() != b.String() {
			t.Errorf("%s as %q is another document", tc.path, tc.agent)
		}
	}
	if got := get("/v1/clusters?pretty=false", "curl/8.5.0"); strings.Contains(got, "\n ") {
		t.Errorf("?pretty=false from curl is indented: %.80q", got)
	}
}

// TestAdminNamesFollowTheFleetRule: a region or GPU type name an admin
// sends (machines, reservations, prices) follows the fleet file's rule:
// every tenant sees these names, in terminals too. Nothing is created.
func TestAdminNamesFollowTheFleetRule(t *testing.T) {
	e := newEnv(t)
	long := strings.Repeat("a", 10000)
	for _, bad := range []string{long, `eu\u0000west`, `eu\r\nwest`, `\u001b[31mred`, `<b>bold</b>`, ` eu-west-1`, `eu west`} {
		for _, tc := range []struct{ path, body, field string }{
			{"/v1/admin/machines", `{"region":"` + bad + `","gpu_type":"L40S","count":1}`, "region"},
			{"/v1/admin/machines", `{"region":"eu-west-1","gpu_type":"` + bad + `","count":1}`, "gpu_type"},
			{"/v1/admin/reservations", `{"project_id":"p","region":"` + bad + `","gpu_type":"L40S"}`, "region"},
			{"/v1/admin/prices", `{"kind":"on_demand","gpu_type":"` + bad + `","value":"1.00"}`, "gpu_type"},
			{"/v1/admin/prices", `{"kind":"on_demand","region":"` + bad + `","gpu_type":"L40S","value":"1.00"}`, "region"},
		} {
			got := e.apiErr("admin", "POST", tc.path, tc.body, 400)
			if got.Field != tc.field || !strings.Contains(got.Message, "not a valid name") || len(got.Message) > 300 {
				t.Errorf("%s with %.20q: %+v", tc.path, bad, got)
			}
		}
	}
	var ms apiv1.MachineList
	e.do("admin", "GET", "/v1/admin/machines", "", 200, &ms)
	for _, m := range ms.Machines {
		if !domain.ValidName(m.Region) || !domain.ValidName(m.GPUType) {
			t.Errorf("machine %s stored with region %q, GPU type %q", m.MachineID, m.Region, m.GPUType)
		}
	}
}
